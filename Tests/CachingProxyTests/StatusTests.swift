#if os(Linux)
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// The status page's parts: the per-second ring, the busiest targets, the page and its JSON.
@Suite("Status page: the ring of seconds, the busiest URLs, /_httpcache/status")
struct StatusTests {
    private func totals(requests: Int, hits: Int = 0, bytesFromCache: Int = 0) -> StatusHistory.Totals {
        StatusHistory.Totals(requests: requests, hits: hits, bytesFromCache: bytesFromCache)
    }

    @Test(
        "A tick stores what the counters grew by in its second; two ticks in one second add up; a skipped second is zero"
    )
    func secondRollover() {
        let history = StatusHistory()
        history.tick(second: 1000, totals: totals(requests: 5, hits: 4))
        history.tick(second: 1001, totals: totals(requests: 8, hits: 6, bytesFromCache: 100))
        history.tick(second: 1001, totals: totals(requests: 9, hits: 6, bytesFromCache: 150))
        history.tick(second: 1003, totals: totals(requests: 12, hits: 7))
        let window = history.window(endingAt: 1003, count: 4)
        #expect(window.count == 4)
        #expect((0..<4).map { window.totals(at: $0).requests } == [5, 4, 0, 3])
        #expect((0..<4).map { window.totals(at: $0).hits } == [4, 2, 0, 1])
        #expect(window.totals(at: 1).bytesFromCache == 150)
        #expect(window.totals(over: 0..<4).requests == 12)
        // Seconds after the last tick are empty.
        #expect(history.window(endingAt: 1005, count: 2).totals(over: 0..<2).requests == 0)
    }

    @Test("The ring holds 3600 seconds: the 3601st second takes the first one's slot")
    func wraps() {
        let history = StatusHistory()
        for second in 0...3600 { history.tick(second: second, totals: totals(requests: second + 1)) }
        let hour = history.window(endingAt: 3600)
        #expect(hour.count == StatusHistory.capacity)
        #expect((0..<hour.count).allSatisfy { hour.totals(at: $0).requests == 1 })
        // Second 0 was overwritten by second 3600: a window that still covers it reads zero.
        let older = history.window(endingAt: 3599)
        #expect(older.totals(at: 0).requests == 0)
        #expect(older.totals(at: 1).requests == 1)
        // Windows longer than the ring are cut to it.
        #expect(history.window(endingAt: 3600, count: 10_000).count == StatusHistory.capacity)
    }

    @Test("p50 and p99 are the upper bounds of the buckets holding them; no requests, no percentile")
    func percentiles() {
        let history = StatusHistory()
        for _ in 0..<98 { history.recordLatency(0.000_08, .hit) }  // 80 µs: the 100 µs bucket
        history.recordLatency(0.004, .hit)  // the 5 ms bucket
        history.recordLatency(30, .hit)  // above every bound
        for _ in 0..<99 { history.recordLatency(0.02, .miss) }  // 25 ms bucket
        history.recordLatency(0.3, .miss)  // 500 ms bucket
        history.tick(second: 50, totals: totals(requests: 200))
        let window = history.window(endingAt: 50, count: 1)
        #expect(window.percentile(0.5, .hit, over: 0..<1) == 100)
        #expect(window.percentile(0.99, .hit, over: 0..<1) == 5_000)
        #expect(window.percentile(1, .hit, over: 0..<1) == 10_000_000)
        #expect(window.percentile(0.5, .miss, over: 0..<1) == 25_000)
        #expect(window.percentile(0.99, .miss, over: 0..<1) == 25_000)
        #expect(window.percentile(1, .miss, over: 0..<1) == 500_000)
        // The tick took the second's latencies: the next second has none.
        history.tick(second: 51, totals: totals(requests: 200))
        #expect(history.window(endingAt: 51, count: 1).percentile(0.5, .hit, over: 0..<1) == nil)
        #expect(StatusHistory.bucket(microseconds: 50) == 0)
        #expect(StatusHistory.bucket(microseconds: 51) == 1)
    }

    @Test("The busiest targets: memory bounded by the counters whatever the traffic, the heavy hitters found")
    func busiestFindsHeavyHitters() {
        let busiest = BusiestTargets(shards: 1, sampling: 1)
        for index in 0..<60_000 {
            if index % 5 == 0 {
                busiest.record("/hot")
            } else if index % 10 == 1 {
                busiest.record("/warm")
            } else {
                busiest.record("/cold/\(index)")
            }
        }
        let top = busiest.top(1000)
        #expect(top.count == BusiestTargets.tracked)
        #expect(top.prefix(2).map(\.target) == ["/hot", "/warm"])
        // Space-saving overestimates by at most the error it reports.
        #expect(top[0].count >= 12_000 && top[0].count - top[0].error <= 12_000)
        #expect(top[1].count >= 6_000 && top[1].count - top[1].error <= 6_000)
        let long = String(repeating: "a", count: 5000)
        busiest.record("/" + long)
        #expect(busiest.top(1000).allSatisfy { $0.target.utf8.count <= BusiestTargets.maxTargetBytes })
    }

    @Test("Busiest targets past 256 requests: one in 8 counted as 8, the heavy hitters found, counts near the truth")
    func busiestSampled() {
        let busiest = BusiestTargets(shards: 1, sampling: 8)
        var generator = SystemRandomNumberGenerator()
        var hot = 0
        for _ in 0..<16_000 {
            if Int.random(in: 0..<4, using: &generator) == 0 {
                hot += 1
                busiest.record("/hot")
            } else {
                busiest.record("/other/\(Int.random(in: 0..<997, using: &generator))")
            }
        }
        let top = busiest.top(3)
        #expect(top.first?.target == "/hot")
        // 500 counted of about 4,000: the estimate is within a fifth of the truth.
        #expect(top.first.map { abs($0.count - hot) < hot / 5 } == true, "\(top), truly \(hot)")
    }

    @Test("The busiest targets halve at each new minute; a count of one is dropped")
    func busiestDecays() {
        let busiest = BusiestTargets(shards: 2, sampling: 1)
        busiest.tick(second: 120)
        for _ in 0..<8 { busiest.record("/a") }
        busiest.record("/b")
        busiest.tick(second: 150)
        #expect(busiest.top(10).map(\.count) == [8, 1])
        busiest.tick(second: 180)
        #expect(busiest.top(10) == [BusiestTargets.Entry(target: "/a", count: 4, error: 0)])
    }

    @Test(
        "status.json's text: the history written directly reads back as the status JSONEncoder writes, nulls and all, whatever the strings hold"
    )
    func jsonText() throws {
        let seconds = 3600
        let counts = (0..<seconds).map { $0 % 7 == 0 ? 0 : $0 * 1_000_003 }
        let latencies = (0..<seconds).map { $0 % 3 == 0 ? nil : Optional($0 * 17) }
        let history = ProxyStatus.History(
            end: 1_780_000_000, seconds: seconds, requests: counts, hits: counts.map { $0 / 2 },
            misses: counts.map { $0 / 3 }, originErrors: counts.map { $0 % 5 }, bytesFromCache: counts.reversed(),
            bytesFromOrigin: counts.map { Int.max - $0 }, hitP50: latencies, hitP99: latencies.reversed(),
            missP50: latencies.map { $0.map { -$0 } }, missP99: Array(repeating: nil, count: seconds))
        // Strings holding the text the history is found by, escaped or not.
        let hostile = #""history":{"bytesFromCache":[],"bytesFromOrigin":[],"end":1780000000,"seconds":0} \ "#
        let status = ProxyStatus(
            version: "1", name: hostile, time: 1.5, uptimeSeconds: 2, connectionsOpen: 3, entries: 4,
            totals: ProxyStatus.Totals(
                requests: 1, hits: 1, misses: 0, errors: 0, hitRatio: 1, bytesFromCache: 5, bytesFromOrigin: 0,
                originRequests: 0, originErrors: 0),
            recent: ProxyStatus.Recent(
                seconds: 10, requestsPerSecond: 0.1, hitRatio: nil, bytesFromCachePerSecond: 0,
                bytesFromOriginPerSecond: 0, originErrorsPerSecond: 0,
                hitLatency: ProxyStatus.Latency(p50Microseconds: 50, p99Microseconds: nil),
                missLatency: ProxyStatus.Latency(p50Microseconds: nil, p99Microseconds: nil)),
            tiers: [ProxyStatus.Tier(name: "memory", entries: 1, bodyBytes: 5, capacityBytes: nil)],
            busiest: [ProxyStatus.BusyTarget(target: "/" + hostile, count: 1, error: 0)],
            origin: ProxyStatus.Origin(errorRate: nil, lastError: hostile, lastErrorTime: nil), redis: nil,
            history: history)
        let text = status.jsonText()
        #expect(try JSONDecoder().decode(ProxyStatus.self, from: Data(text)) == status)
        // The same document as JSONEncoder's, as a JSON value.
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let reference = try JSONSerialization.jsonObject(with: try encoder.encode(status)) as? NSDictionary
        #expect(try JSONSerialization.jsonObject(with: Data(text)) as? NSDictionary == reference)
        // An hour without traffic: every latency null.
        let dump = String(decoding: text, as: UTF8.self)
        #expect(dump.contains(#""missP99":[null,null,"#))
        #expect(dump.contains(#""seconds":3600}"#))
    }

    @Test("Every text from outside is escaped on the page: a <script> in a URL or an error is inert")
    func pageEscapes() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let json = try harness.get("/_httpcache/status.json")
            var status = try JSONDecoder().decode(ProxyStatus.self, from: Data(json.body))
            status.busiest = [ProxyStatus.BusyTarget(target: "/x<script>alert(1)</script>\"'&", count: 3, error: 0)]
            status.origin.lastError = "<img src=x onerror=alert(2)>"
            let page = StatusPage.html(status, jsonPath: "/_httpcache/status.json")
            #expect(!page.contains("<script>alert"))
            #expect(!page.contains("<img"))
            #expect(page.contains("/x&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"))
            #expect(page.contains("&lt;img src=x onerror=alert(2)&gt;"))
            // One script of the page's own, and it writes URLs with textContent only.
            #expect(page.components(separatedBy: "<script>").count == 2)
            #expect(!page.contains("innerHTML"))
        }
    }

    @Test(
        "GET /_httpcache/status and status.json: no-store, the same totals as the metrics, the busiest URL, HEAD, 405")
    func statusThroughProxy() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/s", [("Cache-Control", "max-age=60")], body: "status")
            _ = try harness.get("/s")
            for _ in 0..<3 { _ = try harness.get("/s") }
            let json = try harness.get("/_httpcache/status.json")
            #expect(json.status == 200)
            #expect(json["Cache-Control"] == "no-store")
            #expect(json["Content-Type"] == "application/json")
            let status = try JSONDecoder().decode(ProxyStatus.self, from: Data(json.body))
            #expect(status.totals.requests == 4)
            #expect(status.totals.hits == 3)
            #expect(status.totals.misses == 1)
            #expect(status.totals.hitRatio == 0.75)
            #expect(status.totals.bytesFromCache == 18)
            #expect(status.totals.originRequests == 1)
            #expect(status.busiest.first == ProxyStatus.BusyTarget(target: "/s", count: 4, error: 0))
            #expect(status.entries == 1)
            #expect(status.tiers.map(\.name) == ["memory", "disk"])
            #expect(status.history.seconds == StatusHistory.capacity)
            #expect(status.history.requests.count == StatusHistory.capacity)
            #expect(status.version == CachingProxy.version)
            let metrics = try harness.get("/_httpcache/metrics").text
            #expect(metrics.contains("httpcache_requests_total{outcome=\"hit\"} 3\n"))
            #expect(metrics.contains("httpcache_requests_total{outcome=\"miss\"} 1\n"))
            // A request-target may hold < and > (RFC 9112 lets any visible byte through here).
            let raw = try RawHTTPClient(port: harness.proxy.port)
            try raw.send("GET /q<script>alert(1)</script> HTTP/1.1\r\nHost: h\r\n\r\n")
            _ = try raw.readResponse()
            let page = try harness.get("/_httpcache/status?refresh=1")
            #expect(page.text.contains("<code>/q&lt;script&gt;alert(1)&lt;/script&gt;</code>"))
            #expect(!page.text.contains("<script>alert"))
            #expect(page.status == 200)
            #expect(page["Cache-Control"] == "no-store")
            #expect(page["Content-Type"] == "text/html; charset=utf-8")
            #expect(page.text.contains("data-k=\"totals.requests\" data-f=\"int\">5<"))  // the 4, and the one above
            #expect(page.text.contains("<code>/s</code>"))
            #expect(page.text.components(separatedBy: "<svg ").count - 1 == StatusPage.charts.count)
            let head = try harness.get("/_httpcache/status", method: "HEAD")
            #expect(head.status == 200 && head.body.isEmpty)
            let post = try harness.get("/_httpcache/status.json", method: "POST", body: [])
            #expect(post.status == 405)
            #expect(post["Allow"] == "GET, HEAD")
        }
    }

    @Test("CachingProxy.status reads a running proxy; a proxy that is not there is one line saying what to do")
    func statusClient() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/c", [("Cache-Control", "max-age=60")], body: "c")
            _ = try harness.get("/c")
            let status = try CachingProxy.status(proxy: harness.proxy.baseURL, token: nil)
            #expect(status.totals.misses == 1)
            let refusing = try RefusingPort()
            defer { withExtendedLifetime(refusing) {} }  // held until the test is done
            let closed = refusing.port
            let error = #expect(throws: CachingProxy.ConfigurationError.self) {
                _ = try CachingProxy.status(proxy: "http://127.0.0.1:\(closed)", token: nil, timeout: 2)
            }
            let description = error?.description ?? ""
            #expect(
                description.contains("could not connect to the proxy at http://127.0.0.1:\(closed)"), "\(description)")
            #expect(description.contains("is `httpcache serve` running?"), "\(description)")
        }
    }
}
#endif
