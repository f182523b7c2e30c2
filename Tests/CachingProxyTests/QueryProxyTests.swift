#if os(Linux)
import CacheTestSupport
import CachingProxy
import Foundation
import LoopbackOrigin
import Testing

/// `QUERY` (RFC 10008) through `httpcache serve`: keyed by its content, over HTTP/1.1 and HTTP/2.
@Suite("QUERY through the proxy (RFC 10008)", .timeLimit(.minutes(5)))
struct QueryProxyTests {
    /// An origin that answers a QUERY with what it received, cacheable for a minute.
    static func queryOrigin(_ origin: LoopbackOrigin, headers: [(String, String)] = []) {
        origin.route("/contacts") { request in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=60"), ("Content-Type", "text/plain")] + headers,
                body: "\(request.method) " + String(decoding: request.body, as: UTF8.self))
        }
    }

    /// §2.7: the second identical QUERY is a hit; the same JSON with other white space is the
    /// same query; other content, or the same content as another media type, is another entry.
    @Test func rfc10008Section2_7SecondIdenticalQueryIsAHit() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            Self.queryOrigin(harness.origin)
            let json = [("Content-Type", "application/json")]
            func query(_ content: String, _ fields: [(String, String)] = json) throws -> Received {
                try harness.get("/contacts", fields, method: "QUERY", body: Array(content.utf8))
            }
            let first = try query(#"{"q": "smith"}"#)
            #expect(first.text == #"QUERY {"q": "smith"}"# && !first.isHit)
            #expect(first.cacheStatus?.contains("fwd=uri-miss") == true, "\(first.cacheStatus ?? "none")")
            let second = try query(#"{"q": "smith"}"#)
            #expect(second.isHit && second.text == first.text)
            #expect(try query("{ \"q\":\"smith\" }\n").isHit)
            #expect(try !query(#"{"q": "jones"}"#).isHit)
            #expect(try !query(#"{"q": "smith"}"#, [("Content-Type", "text/plain")]).isHit)
            #expect(harness.origin.requests(to: "/contacts").map(\.method) == ["QUERY", "QUERY", "QUERY"])
            #expect(harness.origin.requests(to: "/contacts")[0].body == Array(#"{"q": "smith"}"#.utf8))
        }
    }

    /// §2: QUERY is safe: its response invalidates nothing stored for the URL (RFC 9111 §4.4),
    /// and a GET of the URL is not answered with a QUERY's response.
    @Test func rfc10008Section2QueryInvalidatesNothingAndIsNotAGet() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            Self.queryOrigin(harness.origin)
            _ = try harness.get("/contacts")
            #expect(try harness.get("/contacts").isHit)
            let query = try harness.get(
                "/contacts", [("Content-Type", "text/plain")], method: "QUERY", body: Array("all".utf8))
            #expect(query.text == "QUERY all")
            let get = try harness.get("/contacts")
            #expect(get.isHit && get.text == "GET ")
        }
    }

    /// RFC 9111 §4.4: a POST to the URI invalidates its stored QUERY responses too, whose keys
    /// hold their content; a PURGE of the URI removes them.
    @Test func rfc9111Section4_4InvalidatingOrPurgingTheURIRemovesItsQueryResponses() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            Self.queryOrigin(harness.origin)
            let plain = [("Content-Type", "text/plain")]
            func query() throws -> Received {
                try harness.get("/contacts", plain, method: "QUERY", body: Array("all".utf8))
            }
            _ = try query()
            #expect(try query().isHit)
            #expect(try harness.get("/contacts", plain, method: "POST", body: Array("x".utf8)).status == 200)
            #expect(try !query().isHit)
            #expect(try query().isHit)
            #expect(try harness.get("/contacts", method: "PURGE").status == 200)
            #expect(try !query().isHit)
        }
    }

    /// §2.7: content above `--max-query-content` goes to the origin uncached, and the
    /// `Cache-Status` says why (a real `httpcache serve`).
    @Test func rfc10008Section2_7ContentAboveTheLimitIsSentOnUncached() async throws {
        try await offPool {
            let harness = try ProxyHarness(process: ["--max-query-content", "16"], memoryOnly: true)
            Self.queryOrigin(harness.origin)
            let large = Array(String(repeating: "x", count: 17).utf8)
            for _ in 0..<2 {
                let answer = try harness.get(
                    "/contacts", [("Content-Type", "text/plain")], method: "QUERY", body: large)
                #expect(answer.cacheStatus == "httpcache; fwd=bypass; fwd-status=200; detail=query-content-too-large")
            }
            let small = Array(String(repeating: "x", count: 16).utf8)
            for _ in 0..<2 {
                _ = try harness.get("/contacts", [("Content-Type", "text/plain")], method: "QUERY", body: small)
            }
            #expect(harness.origin.count("/contacts") == 3)
        }
    }

    /// §2.7 over HTTP/2 (RFC 9113): the content arrives in DATA frames and is keyed the same way.
    @Test func rfc10008Section2_7OverHTTP2() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            Self.queryOrigin(origin)
            let proxy = try InProcessProxy(origin: origin.baseURL)
            let client = try HTTP2Client(port: proxy.port)
            let request = HTTP2Request(
                "QUERY", "/contacts", fields: [("content-type", "application/x-www-form-urlencoded")],
                body: Array("q=%7esmith".utf8))
            let first = try #require(client.send([request]).first)
            var again = request
            again.body = Array("q=~smith".utf8)
            let second = try #require(client.send([again]).first)
            #expect(first.text == "QUERY q=%7esmith" && second.text == first.text, "\(first) \(second)")
            #expect(second["cache-status"]?.contains("hit") == true, "\(second)")
            #expect(origin.count("/contacts") == 1)
        }
    }
}
#endif
