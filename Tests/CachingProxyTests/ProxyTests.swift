#if os(Linux)
import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// `httpcache serve` as a process in front of the loopback origin: what a client of the proxy
/// sees, and what reaches the origin.
@Suite("httpcache serve: a shared cache in front of an origin")
struct ProxyTests {
    @Test(
        "A miss is stored, then served as a hit with Age, Via and Cache-Status (RFC 9111 §4, §5.1; RFC 9211; RFC 9110 §7.6.3)"
    )
    func missThenHit() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve(
                "/a",
                [("Cache-Control", "max-age=60"), ("Content-Type", "text/plain"), ("X-Twice", "1"), ("X-Twice", "2")],
                body: "hello")
            let first = try harness.get("/a")
            #expect(first.status == 200)
            #expect(first.text == "hello")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            #expect(first.fields.values(named: "Via") == ["1.1 httpcache"])
            let second = try harness.get("/a")
            #expect(second.text == "hello")
            #expect(second.isHit, "\(second.fields)")
            #expect(second["Age"] != nil)
            #expect(second.fields.values(named: "X-Twice") == ["1", "2"], "repeated fields kept in order")
            #expect(second.fields.values(named: "Via") == ["1.1 httpcache"])
            #expect(harness.origin.count("/a") == 1)
        }
    }

    @Test(
        "The origin gets the client's fields in order, Host rewritten, hop-by-hop fields dropped, Via added (RFC 9110 §7.6.1, §7.6.3; RFC 9112 §3.2.2)"
    )
    func forwardedRequestFields() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/f", [("Cache-Control", "no-store")])
            _ = try harness.get(
                "/f",
                [
                    ("Accept", "text/plain"), ("X-One", "a"), ("Connection", "X-Secret"), ("X-Secret", "s"),
                    ("X-One", "b"), ("Proxy-Authorization", "Basic eDp5"),
                ])
            let request = try #require(harness.origin.requests(to: "/f").first)
            let names = request.headers.map { $0.name.lowercased() }
            #expect(request.header("Host") == "127.0.0.1:\(harness.origin.port)")
            #expect(names.filter { $0 == "host" }.count == 1)
            #expect(!names.contains("proxy-authorization"), "the proxy's own credentials go no further")
            #expect(!names.contains("x-secret"), "a field Connection nominates is hop-by-hop")
            #expect(!names.contains("connection") || request.header("Connection")?.lowercased() != "x-secret")
            #expect(request.headers.filter { $0.name == "X-One" }.map(\.value) == ["a", "b"])
            #expect(request.header("Via") == "1.1 httpcache")
            #expect(request.header("Accept-Encoding") == nil, "nothing added")
        }
    }

    @Test(
        "Via names the version each message was received with: 1.0 from an HTTP/1.0 origin or client; a stored response served later says 1.1 (RFC 9110 §7.6.3)"
    )
    func viaNamesTheReceivedVersion() async throws {
        try await offPool {
            let origin = try RawOrigin(answer: { _ in
                [.send("HTTP/1.0 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\nhello"), .close]
            })
            defer { origin.stop() }
            let proxy = try InProcessProxy(origin: origin.url(""))
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            try client.send("GET /old HTTP/1.0\r\nHost: origin.test\r\n\r\n")
            let miss = try client.readResponse()
            #expect(miss.bodyText == "hello")
            #expect(miss.values("Via") == ["1.0 httpcache"], "received from the origin over HTTP/1.0")
            let forwarded = try #require(origin.received.first?.text)
            #expect(forwarded.contains("\r\nVia: 1.0 httpcache\r\n"), "received from the client over HTTP/1.0")

            // The store keeps no version: what it serves is the proxy's own HTTP/1.1 message.
            let again = try RawHTTPClient(port: proxy.port)
            defer { again.close() }
            try again.send("GET /old HTTP/1.1\r\nHost: origin.test\r\n\r\n")
            let hit = try again.readResponse()
            #expect(hit.field("Cache-Status")?.contains("; hit") == true)
            #expect(hit.values("Via") == ["1.1 httpcache"])
        }
    }

    @Test("A stale response is revalidated with If-None-Match; the 304 freshens it (RFC 9111 §4.3.1, §4.3.4)")
    func revalidation() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/v") { request in
                let headers = [
                    ("Cache-Control", "max-age=0"), ("ETag", "\"v1\""),
                    ("X-Version", request.header("If-None-Match") == nil ? "full" : "304"),
                ]
                if request.header("If-None-Match") == "\"v1\"" {
                    return LoopbackOrigin.Response(status: 304, headers: headers)
                }
                return LoopbackOrigin.Response(headers: headers, body: "versioned")
            }
            _ = try harness.get("/v")
            let second = try harness.get("/v")
            #expect(second.status == 200)
            #expect(second.text == "versioned")
            // ttl is 0 or -1: max-age=0 and an age of up to a second.
            #expect(second.cacheStatus?.hasPrefix("httpcache; fwd=stale; fwd-status=304; stored; ttl=") == true)
            #expect(second["X-Version"] == "304", "fields of the 304 replace the stored ones (§3.2)")
            #expect(harness.origin.requests(to: "/v").last?.header("If-None-Match") == "\"v1\"")
        }
    }

    @Test("A client's own conditional request is answered 304 from a fresh stored response (RFC 9111 §4.3.2)")
    func clientConditional() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/c", [("Cache-Control", "max-age=60"), ("ETag", "\"c\"")], body: "conditional")
            _ = try harness.get("/c")
            let answer = try harness.get("/c", [("If-None-Match", "\"c\"")])
            #expect(answer.status == 304)
            #expect(answer.body.isEmpty)
            #expect(answer["ETag"] == "\"c\"")
            #expect(harness.origin.count("/c") == 1)
        }
    }

    @Test("Variants by Vary are stored side by side (RFC 9111 §4.1)")
    func vary() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/lang") { request in
                LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                    body: "in \(request.header("Accept-Language") ?? "none")")
            }
            #expect(try harness.get("/lang", [("Accept-Language", "fr")]).text == "in fr")
            #expect(try harness.get("/lang", [("Accept-Language", "de")]).text == "in de")
            let french = try harness.get("/lang", [("Accept-Language", "fr")])
            #expect(french.text == "in fr")
            #expect(french.isHit)
            #expect(try harness.get("/lang", [("Accept-Language", "de")]).isHit)
            #expect(harness.origin.count("/lang") == 2)
        }
    }

    @Test("A POST invalidates the stored response for its URL (RFC 9111 §4.4)")
    func invalidation() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/doc") { request in
                request.method == "POST"
                    ? LoopbackOrigin.Response(status: 204)
                    : LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: "doc")
            }
            _ = try harness.get("/doc")
            #expect(try harness.get("/doc").isHit)
            let post = try harness.get("/doc", method: "POST", body: Array("x=1".utf8))
            #expect(post.status == 204)
            #expect(post.cacheStatus == "httpcache; fwd=method; fwd-status=204")
            #expect(harness.origin.requests(to: "/doc").last?.body == Array("x=1".utf8))
            let after = try harness.get("/doc")
            #expect(!after.isHit)
            #expect(harness.origin.requests(to: "/doc").filter { $0.method == "GET" }.count == 2)
        }
    }

    @Test("50 concurrent misses on one URL make one origin request; the others are collapsed (RFC 9211 §2.6)")
    func collapsedForwarding() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let release = DispatchSemaphore(value: 0)
            harness.origin.route("/slow") { _ in
                _ = release.wait(timeout: .now() + 20)
                return LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: "collapsed body")
            }
            let answers = try await withThrowingTaskGroup(of: Received.self) { group in
                for _ in 0..<50 {
                    group.addTask {
                        try await offPool { try harness.client.send("GET", harness.proxy.baseURL + "/slow") }
                    }
                }
                // Let every request reach the proxy before the origin answers.
                try await Task.sleep(for: .milliseconds(500))
                release.signal()
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.count == 50)
            #expect(answers.allSatisfy { $0.status == 200 && $0.text == "collapsed body" })
            #expect(harness.origin.count("/slow") == 1)
            #expect(answers.filter { $0.cacheStatus?.contains("collapsed") == true }.count >= 1)
        }
    }

    @Test(
        "A client that stops reading a miss others wait for holds them no longer than collapsedClientWait: they go to the origin themselves without storing, and the slow client still gets its response whole"
    )
    func stalledLeaderReleasesWaiters() async throws {
        try await offPool {
            let harness = try ProxyHarness { $0.collapsedClientWait = 0.2 }
            // Far more than the socket buffers and the 256 KiB queue hold for a client that reads nothing.
            let body = Fixtures.bytes(count: 16 << 20) { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 10) }
            harness.origin.route("/big") { _ in
                LoopbackOrigin.Response(status: 200, headers: [("Cache-Control", "max-age=600")], body: body)
            }
            let stalled = try RawHTTPClient(port: harness.proxy.port, timeout: 20, receiveBuffer: 4 << 10)
            defer { stalled.close() }
            try stalled.send("GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(SharedCacheConformanceTests.eventually { harness.origin.count("/big") == 1 })
            // The second request joins the first, whose client reads nothing: without a limit it
            // waited until that client was cut (the idle timeout, 60 s); this wait is 10 s at most.
            let waiter = try RawHTTPClient(port: harness.proxy.port, timeout: 10)
            try waiter.send("GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            var answer = try waiter.readHead()
            try waiter.readBody(into: &answer)
            #expect(answer.status == 200)
            #expect(answer.body == body)
            #expect(harness.origin.count("/big") == 2, "the waiter went to the origin itself")
            let status = answer.field("Cache-Status") ?? ""
            #expect(status.contains("stored=?0"), "the leader stores it, not the waiter: \(status)")
            // The first client, still connected, reads its response whole at its own pace.
            var first = try stalled.readHead()
            try stalled.readBody(into: &first)
            #expect(first.status == 200)
            #expect(first.body == body)
            #expect(try harness.get("/big").isHit)
        }
    }

    @Test(
        "RFC 9111 §4.2, §5.2.2.4: requests waiting for a miss whose response is stored but cannot answer them unvalidated (an event stream with no-cache) go on at its head, not at its end"
    )
    func waitersGoOnWhenTheResponseNeedsValidation() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/events") { _ in
                // A stream that sends its first event, then nothing more for as long as it is open.
                var response = LoopbackOrigin.Response(
                    headers: [("Cache-Control", "no-cache"), ("Content-Type", "text/event-stream")],
                    body: Array(repeating: UInt8(ascii: "x"), count: 4096))
                response.pauseAfterBodyBytes = 9
                return response
            }
            let first = try RawHTTPClient(port: harness.proxy.port)
            defer { first.close() }
            try first.send("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            #expect(try first.readHead().status == 200)
            // The first stream goes on; a second viewer is answered by the origin at once. It
            // waited for the first stream's end (never, until the origin's 60-s stall limit).
            let second = try RawHTTPClient(port: harness.proxy.port)
            defer { second.close() }
            try second.send("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let answer = try second.readHead()
            #expect(answer.status == 200)
            #expect(answer.field("Cache-Status")?.contains("fwd=") == true, "\(answer.field("Cache-Status") ?? "")")
            #expect(harness.origin.count("/events") == 2)
            // The streams end with the origin, so the proxy stops without waiting for them.
            harness.origin.stop()
        }
    }

    @Test("Concurrent misses on a response that turns out not storable are each forwarded (RFC 9111 §4)")
    func collapsedButNotStorable() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let release = DispatchSemaphore(value: 0)
            harness.origin.route("/private") { _ in
                _ = release.wait(timeout: .now() + 20)
                return LoopbackOrigin.Response(headers: [("Cache-Control", "private")], body: "mine")
            }
            let answers = try await withThrowingTaskGroup(of: Received.self) { group in
                for _ in 0..<5 {
                    group.addTask {
                        try await offPool { try harness.client.send("GET", harness.proxy.baseURL + "/private") }
                    }
                }
                try await Task.sleep(for: .milliseconds(300))
                for _ in 0..<5 { release.signal() }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.text == "mine" })
            #expect(harness.origin.count("/private") == 5)
        }
    }

    @Test("PURGE removes a URL's stored responses; httpcache purge --proxy sends it")
    func purge() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/p", [("Cache-Control", "max-age=60")], body: "purge me")
            _ = try harness.get("/p")
            #expect(try harness.get("/p").isHit)
            let answer = try CachingProxy.purge(harness.proxy.baseURL + "/p", proxy: harness.proxy.baseURL, token: nil)
            #expect(answer.status == 200)
            #expect(answer.message.contains("purged 1 stored response"))
            #expect(!(try harness.get("/p").isHit))
            let again = try harness.get("/nothing", method: "PURGE")
            #expect(again.status == 404)
        }
    }

    @Test("PURGE with Cache-Group-Invalidation removes the origin's responses in those groups (RFC 9875)")
    func purgeGroup() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/a", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"news\", \"x\"")], body: "a")
            harness.serve("/b", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"news\"")], body: "b")
            harness.serve("/c", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"sport\"")], body: "c")
            for path in ["/a", "/b", "/c"] { _ = try harness.get(path) }
            let answer = try CachingProxy.purge(
                harness.proxy.baseURL + "/", proxy: harness.proxy.baseURL, token: nil, groups: ["news", "none"])
            #expect(answer.status == 200)
            #expect(answer.message.contains("purged 2 stored responses in cache group \"news\", \"none\""))
            #expect(!(try harness.get("/a").isHit))
            #expect(!(try harness.get("/b").isHit))
            #expect(try harness.get("/c").isHit)
            let bad = try harness.get("/", [("Cache-Group-Invalidation", "news")], method: "PURGE")
            #expect(bad.status == 400)
            let again = try CachingProxy.purge(
                harness.proxy.baseURL + "/", proxy: harness.proxy.baseURL, token: nil, groups: ["sport"])
            #expect(again.status == 200)
            #expect(
                try CachingProxy.purge(
                    harness.proxy.baseURL + "/", proxy: harness.proxy.baseURL, token: nil, groups: ["sport"]
                ).status == 404)
        }
    }

    @Test(
        "Clear Site Data §4.2: a \"cache\" response removes the origin's stored responses and is passed on, then stored"
    )
    func clearSiteData() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/a", [("Cache-Control", "max-age=600")], body: "a")
            harness.serve("/b?x", [("Cache-Control", "max-age=600"), ("Vary", "Accept")], body: "b")
            harness.serve("/other", [("Cache-Control", "max-age=600"), ("Clear-Site-Data", "\"cookies\"")])
            harness.serve(
                "/logout", [("Cache-Control", "max-age=600"), ("Clear-Site-Data", "\"storage\", \"cache\"")],
                body: "bye")
            for path in ["/a", "/b?x", "/other"] { _ = try harness.get(path) }
            #expect(try harness.get("/a").isHit)
            let logout = try harness.get("/logout")
            #expect(logout.text == "bye")
            #expect(logout["Clear-Site-Data"] == "\"storage\", \"cache\"")
            #expect(!(try harness.get("/a").isHit))
            #expect(!(try harness.get("/b?x").isHit))
            #expect(!(try harness.get("/other").isHit))
            let again = try harness.get("/logout")
            #expect(again.isHit)
            #expect(again["Clear-Site-Data"] == "\"storage\", \"cache\"")
            #expect(harness.origin.count("/logout") == 1)
        }
    }

    @Test("PURGE of a URI equivalent modulo No-Vary-Search removes the response stored for another (draft §6, §7)")
    func purgeEquivalent() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/n", [("Cache-Control", "max-age=60"), ("No-Vary-Search", "params=(\"utm\")")], body: "n")
            _ = try harness.get("/n?utm=1&x=1")
            #expect(try harness.get("/n?x=1&utm=2").isHit)
            #expect(!(try harness.get("/n?x=2&utm=1").isHit))
            let answer = try harness.get("/n?x=1", method: "PURGE")
            #expect(answer.status == 200)
            #expect(!(try harness.get("/n?utm=4&x=1").isHit))
        }
    }

    @Test("Metrics in the Prometheus text format count outcomes, origin latency and the store")
    func metrics() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/m", [("Cache-Control", "max-age=60")], body: "metric")
            _ = try harness.get("/m")
            _ = try harness.get("/m")
            let metrics = try harness.get("/_httpcache/metrics")
            #expect(metrics.status == 200)
            #expect(metrics["Content-Type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            let lines = Set(metrics.text.split(separator: "\n").map(String.init))
            #expect(lines.contains("httpcache_requests_total{outcome=\"hit\"} 1"))
            #expect(lines.contains("httpcache_requests_total{outcome=\"miss\"} 1"))
            #expect(lines.contains("httpcache_origin_requests_total 1"))
            #expect(lines.contains("httpcache_origin_latency_seconds_count 1"))
            #expect(lines.contains("httpcache_store_entries{tier=\"all\"} 1"))
            #expect(lines.contains("httpcache_stored_total 1"))
            #expect(lines.contains("httpcache_store_refusals_total 0"))
            #expect(lines.contains("# TYPE httpcache_origin_latency_seconds histogram"))
        }
    }

    @Test("A metrics scrape waiting for the store's totals holds up no other request on its event loop")
    func metricsWaitOffTheLoop() async throws {
        try await offPool {
            let entered = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let harness = try ProxyHarness { configuration in
                configuration.loops = 1
                configuration.storeTotals = {
                    entered.signal()
                    // A store whose index is held by a long write: bounded, so a failing run ends.
                    _ = release.wait(timeout: .now() + 30)
                    return StoreTotals(entries: 7)
                }
            }
            harness.serve("/h", [("Cache-Control", "max-age=60")], body: "hit")
            _ = try harness.get("/h")
            let scraper = try TestClient()
            let scraped = Locked<Received?>(nil)
            let done = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                let received = try? scraper.send("GET", harness.proxy.baseURL + "/_httpcache/metrics")
                scraped.withLock { $0 = received }
                done.signal()
            }
            #expect(entered.wait(timeout: .now() + 20) == .success, "the scrape never read the totals")
            // The only loop is free while the scrape waits: a hit and a miss are answered.
            harness.serve("/m", [("Cache-Control", "max-age=60")], body: "miss")
            let hit = try harness.get("/h")
            #expect(hit.isHit && hit.text == "hit")
            #expect(try harness.get("/m").text == "miss")
            #expect(scraped.withLock { $0 } == nil, "the scrape answered before the totals were given")
            release.signal()
            #expect(done.wait(timeout: .now() + 20) == .success)
            let metrics = try #require(scraped.withLock { $0 })
            #expect(metrics.status == 200)
            #expect(metrics.text.contains("httpcache_store_entries{tier=\"all\"} 7"))
        }
    }

    @Test(
        "A hit carries the stored fields once, in their order, then Age and Cache-Status; to GET and to HEAD; a stored Cache-Status gets this cache's member appended (RFC 9111 §5.1, RFC 9211 §2)"
    )
    func hitFieldsInOrder() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let stored = [
                ("Content-Type", "text/plain"), ("Cache-Control", "max-age=60"), ("X-One", "1"), ("X-Two", "2"),
            ]
            harness.serve("/f", stored, body: "fields")
            harness.serve("/c", stored + [("Cache-Status", "upstream; hit")], body: "fields")
            _ = try harness.get("/f")
            _ = try harness.get("/c")
            for method in ["GET", "HEAD"] {
                let hit = try harness.get("/f", method: method)
                #expect(hit.isHit, "\(method)")
                let names = hit.fields.map(\.name).filter {
                    !["Date", "Via", "Content-Length", "Connection"].contains($0)
                }
                #expect(
                    names == ["Content-Type", "Cache-Control", "X-One", "X-Two", "Age", "Cache-Status"], "\(method)")
                let chained = try harness.get("/c", method: method)
                #expect(chained.fields.values(named: "Cache-Status").count == 1, "\(method)")
                #expect(chained["Cache-Status"]?.hasPrefix("upstream; hit, httpcache; hit") == true, "\(method)")
            }
        }
    }

    @Test("A full memory tier refuses a disk body used less than the entry it would evict, and counts it")
    func memoryPromotions() async throws {
        try await offPool {
            // Room for about four 5,000-byte responses with their heads.
            let harness = try ProxyHarness { $0.memoryCapacity = 26_000 }
            let body = String(repeating: "p", count: 5_000)
            for number in 1...8 {
                harness.serve("/p\(number)", [("Cache-Control", "max-age=60")], body: body)
                _ = try harness.get("/p\(number)")
            }
            func promotions() throws -> Set<String> {
                Set(try harness.get("/_httpcache/metrics").text.split(separator: "\n").map(String.init))
                    .filter { $0.hasPrefix("httpcache_memory_promotions_total{") }
            }
            #expect(try promotions().contains("httpcache_memory_promotions_total{result=\"admitted\"} 0"))
            // Stored once, read once from disk: used as much as the entry memory would evict.
            #expect(try harness.get("/p1").text == body)
            #expect(
                try promotions() == [
                    "httpcache_memory_promotions_total{result=\"admitted\"} 0",
                    "httpcache_memory_promotions_total{result=\"refused\"} 1",
                ])
            // Read again, it has been used more: it takes that entry's place.
            #expect(try harness.get("/p1").text == body)
            #expect(
                try promotions() == [
                    "httpcache_memory_promotions_total{result=\"admitted\"} 1",
                    "httpcache_memory_promotions_total{result=\"refused\"} 1",
                ])
            #expect(try harness.get("/p1").isHit)
            #expect(try promotions().contains("httpcache_memory_promotions_total{result=\"admitted\"} 1"))
            #expect(harness.origin.count("/p1") == 1)
        }
    }

    @Test("The origin down: a stored response that allows it is served stale, else 502 (RFC 9111 §4.2.4; RFC 5861 §4)")
    func originDown() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/gone", [("Cache-Control", "max-age=0, stale-if-error=60")], body: "still here")
            _ = try harness.get("/gone")
            harness.origin.stop()
            let stale = try harness.get("/gone")
            #expect(stale.status == 200)
            #expect(stale.text == "still here")
            #expect(stale.cacheStatus?.contains("hit") == true)
            #expect(stale.cacheStatus?.contains("stale-if-error") == true)
            let nothing = try harness.get("/never")
            #expect(nothing.status == 502)
            #expect(nothing.text.contains("127.0.0.1:\(harness.origin.port)"))
        }
    }

    @Test("SIGTERM lets a response in flight finish and stores it whole; the process exits 0")
    func gracefulStop() async throws {
        try await offPool {
            let harness = try ProxyHarness(process: [])
            let release = DispatchSemaphore(value: 0)
            harness.origin.route("/inflight") { _ in
                _ = release.wait(timeout: .now() + 20)
                return LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=86400")], body: String(repeating: "z", count: 100_000))
            }
            let answer = Task {
                try await offPool { try harness.client.send("GET", harness.proxy.baseURL + "/inflight") }
            }
            while harness.origin.count("/inflight") == 0 { try await Task.sleep(for: .milliseconds(20)) }
            let stopped = Task { await offPool { harness.proxy.terminate() } }
            try await Task.sleep(for: .milliseconds(300))
            release.signal()
            let received = try await answer.value
            #expect(received.body.count == 100_000)
            #expect(await stopped.value == 0)
            // The stored entry is whole: a new proxy on the same directory serves it as a hit.
            let again = try ServeProcess(["--origin", harness.origin.baseURL], store: harness.proxy.cacheDirectory)
            defer { again.terminate() }
            let hit = try harness.client.send("GET", again.baseURL + "/inflight")
            #expect(hit.isHit)
            #expect(hit.body.count == 100_000)
        }
    }
}
#endif
