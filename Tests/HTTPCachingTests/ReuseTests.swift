import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Validation and reuse against a real origin (RFC 9111 §4.1–§4.4)")
struct ReuseTests {
    /// §4.3.1, §4.3.4: a stale response with an ETag is validated with If-None-Match; the 304
    /// gives the stored body, outcome revalidated, and freshens the stored response.
    @Test("ETag revalidation (§4.3.1, §4.3.4)")
    func etagRevalidation() async throws {
        let h = try Harness()
        h.serveValidated("/e", etag: "\"abc\"", [("Cache-Control", "max-age=60"), ("X-Version", "1")], body: "payload")
        _ = try await h.get("/e")
        h.clock.advance(by: 120)
        h.origin.route("/e") { [clock = h.clock] request in
            // The 304 carries a new field value: it must replace the stored one (§3.2).
            #expect(request.header("If-None-Match") == "\"abc\"")
            return LoopbackOrigin.Response(
                status: 304,
                headers: [
                    ("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now()))), ("ETag", "\"abc\""),
                    ("Cache-Control", "max-age=60"), ("X-Version", "2"),
                ])
        }
        let validated = try await h.get("/e")
        #expect(validated.outcome == .revalidated)
        #expect(validated.text == "payload")
        #expect(validated.statusCode == 200)
        #expect(validated.field("X-Version") == "2")
        #expect(validated.cacheStatus.forwardStatus == 304)

        h.clock.advance(by: 30)
        let after = try await h.get("/e")
        #expect(after.outcome == .hit)
        #expect(after.field("X-Version") == "2")
        #expect(h.origin.count("/e") == 2)
        #expect(h.cache.statistics.bytesSavedByRevalidation == 7)
    }

    /// §4.3.1: with only Last-Modified, the validation request carries If-Modified-Since.
    @Test("Last-Modified revalidation (§4.3.1)")
    func lastModifiedRevalidation() async throws {
        let h = try Harness()
        let modified = HTTPDate.format(Timestamp(secondsSince1970: h.clock.now() - 86_400))
        h.serveValidated("/l", etag: nil, lastModified: modified, [("Cache-Control", "max-age=10")], body: "lm")
        _ = try await h.get("/l")
        h.clock.advance(by: 20)
        let validated = try await h.get("/l")
        #expect(validated.outcome == .revalidated)
        #expect(validated.text == "lm")
        #expect(h.origin.requests(to: "/l").last?.header("If-Modified-Since") == modified)
        let after = try await h.get("/l")
        #expect(after.outcome == .hit)
    }

    /// §4.1: two `Vary` variants of one URL are both kept and each is served to its match.
    @Test("Two Vary variants of one URL (§4.1)")
    func varyVariants() async throws {
        let h = try Harness()
        h.origin.route("/v") { [clock = h.clock] request in
            let language = request.header("Accept-Language") ?? "none"
            return LoopbackOrigin.Response(
                headers: [
                    ("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now()))),
                    ("Cache-Control", "max-age=60"), ("Vary", "Accept-Language"),
                ], body: "lang=\(language)")
        }
        let english = try await h.get("/v", headers: ["Accept-Language": "en"])
        let french = try await h.get("/v", headers: ["Accept-Language": "fr"])
        #expect(english.outcome == .miss && french.outcome == .miss)
        let english2 = try await h.get("/v", headers: ["Accept-Language": "en"])
        let french2 = try await h.get("/v", headers: ["Accept-Language": "fr"])
        #expect(english2.outcome == .hit && english2.text == "lang=en")
        #expect(french2.outcome == .hit && french2.text == "lang=fr")
        #expect(h.origin.count("/v") == 2)
        #expect(try h.cache.entries(for: h.origin.url("/v")).count == 2)
    }

    /// §4.1: the query is part of the key — `?v=2` is never answered with `?v=1`'s body
    /// (swift-corelibs URLCache keys on host + path).
    @Test("Query strings are distinct keys (§4.1)")
    func queryKeys() async throws {
        let h = try Harness()
        h.origin.route("/q") { request in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: request.target)
        }
        let one = try await h.get("/q?v=1")
        let two = try await h.get("/q?v=2")
        #expect(one.text == "/q?v=1" && two.text == "/q?v=2")
        #expect(two.outcome == .miss)
        #expect(try await h.get("/q?v=1").outcome == .hit)
    }

    /// §4.2.3: an `Age` from an upstream cache counts: max-age=60 with Age: 100 is stale at once.
    @Test("Age makes a response stale (§4.2.3)")
    func ageCounts() async throws {
        let h = try Harness()
        h.serve("/age", [("Cache-Control", "max-age=60"), ("Age", "100")])
        _ = try await h.get("/age")
        let second = try await h.get("/age")
        #expect(second.outcome == .miss)
        #expect(second.cacheStatus.forward == .stale)
        #expect(h.origin.count("/age") == 2)
    }

    /// §4.2.2: with Last-Modified and no explicit lifetime, 10% of the age of the
    /// modification is used; the entry says where its lifetime came from.
    @Test("Heuristic freshness (§4.2.2)")
    func heuristicFreshness() async throws {
        let h = try Harness()
        let tenDaysAgo = HTTPDate.format(Timestamp(secondsSince1970: h.clock.now() - 10 * 86_400))
        h.serve("/h", [("Last-Modified", tenDaysAgo)])
        _ = try await h.get("/h")
        h.clock.advance(by: 3600)
        #expect(try await h.get("/h").outcome == .hit)
        let entry = try #require(try h.cache.entries(for: h.origin.url("/h")).first)
        #expect(entry.facts?.lifetimeSource == .heuristic)
        #expect(abs((entry.facts?.freshnessLifetime ?? 0) - 86_400) < 2)
        h.clock.advance(by: 86_400)
        #expect(try await h.get("/h").outcome != .hit)
    }

    /// §4.4: a successful POST invalidates the stored GET of its URL and of its Location.
    @Test("POST invalidates its URL and Location (§4.4)")
    func postInvalidates() async throws {
        let h = try Harness()
        h.serve("/items", [("Cache-Control", "max-age=600")], body: "list")
        h.serve("/items/7", [("Cache-Control", "max-age=600")], body: "item")
        _ = try await h.get("/items")
        _ = try await h.get("/items/7")
        h.origin.route("/items") { request in
            if request.method == "POST" {
                return LoopbackOrigin.Response(status: 201, headers: [("Location", "/items/7")], body: "created")
            }
            return LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=600")], body: "list2")
        }
        let post = try await h.get("/items", method: "POST", body: Data("x".utf8))
        #expect(post.outcome == .bypass)
        #expect(post.cacheStatus.forward == .method)
        #expect(try await h.get("/items").outcome == .miss)
        #expect(try await h.get("/items/7").outcome == .miss)
    }

    /// A POST's 4xx invalidates nothing (§4.4: only 2xx and 3xx).
    @Test("A failed POST invalidates nothing (§4.4)")
    func failedPostKeeps() async throws {
        let h = try Harness()
        h.serve("/keep", [("Cache-Control", "max-age=600")])
        _ = try await h.get("/keep")
        h.origin.route("/keep") { _ in LoopbackOrigin.Response(status: 403, body: "no") }
        _ = try await h.get("/keep", method: "POST")
        #expect(try await h.get("/keep").outcome == .hit)
    }

    /// §4.3.5: a HEAD response with a different ETag marks the stored GET response as needing
    /// validation; a HEAD is answered from the stored GET response without a body.
    @Test("HEAD is answered from GET and can invalidate it (§4.3.5)")
    func headRequests() async throws {
        let h = try Harness()
        h.serveValidated("/hd", etag: "\"1\"", [("Cache-Control", "max-age=600")], body: "full")
        _ = try await h.get("/hd")
        let head = try await h.get("/hd", method: "HEAD")
        #expect(head.outcome == .hit && head.data.isEmpty)
        h.serveValidated("/hd", etag: "\"2\"", [("Cache-Control", "max-age=600")], body: "new")
        _ = try await h.get("/hd", method: "HEAD", policy: .reloadIgnoringLocalCacheData)
        let after = try await h.get("/hd")
        #expect(after.outcome == .miss)
        #expect(after.text == "new")
    }

    /// RFC 9110 §15.4: redirects are followed and each hop is cached under its own URL.
    @Test func redirectsAreFollowedAndCached() async throws {
        let h = try Harness()
        h.serve("/old", status: 301, [("Location", "/new"), ("Cache-Control", "max-age=600")], body: "")
        h.serve("/new", [("Cache-Control", "max-age=600")], body: "moved here")
        let first = try await h.get("/old")
        #expect(first.text == "moved here")
        #expect(first.response.url?.path == "/new")
        let second = try await h.get("/old")
        #expect(second.outcome == .hit && second.text == "moved here")
        #expect(h.origin.count("/old") == 1 && h.origin.count("/new") == 1)
    }

    /// RFC 9110 §15.4 through the streaming API (which `httpcache get` and `CachingURLProtocol`
    /// use): each hop's body is read to its end before the redirect is followed, so the hop is
    /// stored under its own URL, as through data(for:).
    @Test func redirectHopsAreStoredThroughBytes() async throws {
        let h = try Harness()
        h.serve("/old", status: 301, [("Location", "/new"), ("Cache-Control", "max-age=600")], body: "moved")
        h.serve("/new", [("Cache-Control", "max-age=600")], body: "moved here")
        for _ in 0..<2 {
            let (head, body) = try await h.cache.bytes(for: h.request("/old"))
            #expect(try await body.collect() == Data("moved here".utf8))
            #expect(head.response.url?.path == "/new")
        }
        #expect(h.origin.count("/old") == 1 && h.origin.count("/new") == 1)
        let hop = try #require(try h.cache.entries(for: h.origin.url("/old")).first)
        #expect(hop.status == 301 && hop.bodySize == 5)
    }

    /// Redirects that go on past `maximumRedirects` (a loop) fail the request with
    /// `URLError(.httpTooManyRedirects)`, as URLSession's do, saying where the last one leads;
    /// the last redirect was answered as if it were the response, with an empty body. Through
    /// `data(for:)` and through the streaming API.
    @Test("a redirect loop fails with httpTooManyRedirects, as URLSession's does (RFC 9110 §15.4)")
    func redirectLoopFails() async throws {
        let h = try Harness()
        h.origin.route("/loop") { _ in LoopbackOrigin.Response(status: 302, headers: [("Location", "/loop")]) }
        let error = await #expect(throws: URLError.self) { _ = try await h.get("/loop") }
        #expect(error?.code == .httpTooManyRedirects)
        #expect(error?.failingURL == h.origin.url("/loop"))
        #expect(error?.localizedDescription.contains("more than 10 redirects") == true, "\(String(describing: error))")
        #expect(h.origin.count("/loop") == 11)
        let streamed = await #expect(throws: URLError.self) { _ = try await h.cache.bytes(for: h.request("/loop")) }
        #expect(streamed?.code == .httpTooManyRedirects)
    }

    /// A response whose body cannot be stored is still served, with the reason.
    @Test("no-store is served and not stored (§3)")
    func noStore() async throws {
        let h = try Harness()
        h.serve("/ns", [("Cache-Control", "no-store")], body: "secret")
        let first = try await h.get("/ns")
        #expect(first.text == "secret")
        #expect(first.cacheStatus.stored == false)
        #expect(first.reasons.contains(.responseNoStore))
        #expect(try await h.get("/ns").outcome == .miss)
    }

    /// RFC 9110 §9.3.1: content in a GET has no generally defined semantics, so the cache never
    /// keys or stores a response that may depend on it, and never answers such a request from
    /// the store. (URLSession itself refuses to send a GET with a body, with
    /// `NSURLErrorDataLengthExceedsMaximum` on Linux; a transport of the app's own may send it.)
    @Test("a GET with content is sent on, never stored and never answered from the store (RFC 9110 §9.3.1)")
    func getWithContentBypasses() async throws {
        let transport = EchoTransport()
        var configuration = HTTPCache.Configuration()
        configuration.clock = ManualClock().function  // the last request is a hit however slow the machine
        let cache = HTTPCache(configuration: configuration, store: MemoryStore(capacity: 1 << 20), transport: transport)
        var fatRequest = URLRequest(url: URL(string: "http://127.0.0.1:9/search")!)
        fatRequest.httpBody = Data("user=alice".utf8)
        let fat = try await cache.data(for: fatRequest)
        #expect(fat.outcome == .bypass)
        #expect(fat.cacheStatus.forward == .bypass)
        #expect(fat.text == "body=user=alice")
        let clean = try await cache.data(for: URLRequest(url: URL(string: "http://127.0.0.1:9/search")!))
        #expect(clean.outcome == .miss)
        #expect(clean.text == "body=")
        fatRequest.httpBody = Data("user=bob".utf8)
        let fatAgain = try await cache.data(for: fatRequest)
        #expect(fatAgain.outcome == .bypass)
        #expect(fatAgain.text == "body=user=bob")
        #expect(transport.count == 3)
        #expect(try await cache.data(for: URLRequest(url: URL(string: "http://127.0.0.1:9/search")!)).outcome == .hit)
        #expect(transport.count == 3)
    }

    /// Through the default transport, a GET with content reaches the origin with its content
    /// (on Linux our client sends it; URLSession refuses it before the network), and nothing is
    /// stored either way (RFC 9110 §9.3.1).
    @Test("through the default transport a GET with content stores nothing (RFC 9110 §9.3.1)")
    func getWithContentThroughDefaultTransport() async throws {
        let h = try Harness()
        h.serve("/search", [("Cache-Control", "max-age=600")], body: "plain")
        #if os(Linux)
        let fat = try await h.get("/search", body: Data("user=alice".utf8))
        #expect(fat.outcome == .bypass)
        #expect(h.origin.requests(to: "/search").first?.body == Array("user=alice".utf8))
        #else
        await #expect(throws: (any Error).self) { try await h.get("/search", body: Data("user=alice".utf8)) }
        #endif
        #expect(try await h.get("/search").outcome == .miss)
    }
}

/// Answers every request itself (no network): a storable 200 whose body names the request's
/// content.
final class EchoTransport: HTTPTransport {
    private let sent = Locked(0)
    var count: Int { sent.withLock { $0 } }

    func send(_ request: URLRequest) async throws -> TransportResponse {
        sent.withLock { $0 += 1 }
        let response = HTTPURLResponse(
            url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: ["Cache-Control": "max-age=600"])!
        let content = String(decoding: request.httpBody ?? Data(), as: UTF8.self)
        return TransportResponse(response: response, data: Data("body=\(content)".utf8))
    }
}
