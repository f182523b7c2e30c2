import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `QUERY` (RFC 10008) through `HTTPCache`: a `URLRequest` with method `QUERY` and a body is
/// cached by its content, with no hook.
@Suite("QUERY (RFC 10008)")
struct QueryTests {
    /// A harness whose origin answers `/search` with the method and content it received.
    static func harness(_ headers: [(String, String)] = [("Cache-Control", "max-age=60")]) throws -> Harness {
        let h = try Harness()
        h.origin.route("/search") { request in
            LoopbackOrigin.Response(
                headers: headers + [("ETag", "\"r1\"")],
                body: "\(request.method) " + String(decoding: request.body, as: UTF8.self))
        }
        return h
    }

    static func query(_ h: Harness, _ content: String, type: String = "application/json") async throws
        -> CachedResponse
    {
        try await h.get("/search", method: "QUERY", headers: ["Content-Type": type], body: Data(content.utf8))
    }

    /// §2.7: the second identical QUERY is a hit and the origin saw one; JSON with other white
    /// space is the same query; other content or another media type is another.
    @Test func rfc10008Section2_7SecondIdenticalQueryIsAHit() async throws {
        let h = try Self.harness()
        let first = try await Self.query(h, #"{"name": "smith"}"#)
        let second = try await Self.query(h, #"{"name": "smith"}"#)
        #expect(first.outcome == .miss && second.outcome == .hit)
        #expect(second.text == #"QUERY {"name": "smith"}"#)
        #expect(try await Self.query(h, "{\n  \"name\" : \"smith\"\n}").outcome == .hit)
        #expect(try await Self.query(h, #"{"name": "jones"}"#).outcome == .miss)
        #expect(try await Self.query(h, #"{"name": "smith"}"#, type: "application/sql").outcome == .miss)
        #expect(h.origin.requests(to: "/search").map(\.method) == ["QUERY", "QUERY", "QUERY"])
        #expect(h.origin.requests(to: "/search").first?.body == Array(#"{"name": "smith"}"#.utf8))
    }

    /// §2.6 and RFC 9111 §4.3: a stale stored QUERY response is revalidated with its ETag by a
    /// conditional QUERY that carries the content again, and a 304 freshens it.
    @Test func rfc10008Section2_6StaleResponseIsRevalidatedWithTheContent() async throws {
        let h = try Harness()
        h.origin.route("/search") { request in
            request.header("If-None-Match") == "\"r1\""
                ? LoopbackOrigin.Response(status: 304, headers: [("ETag", "\"r1\""), ("Cache-Control", "max-age=10")])
                : LoopbackOrigin.Response(
                    headers: [("ETag", "\"r1\""), ("Cache-Control", "max-age=10")], body: "result")
        }
        _ = try await Self.query(h, "[1]")
        h.clock.advance(by: 20)
        let revalidated = try await Self.query(h, "[1]")
        #expect(revalidated.outcome == .revalidated && revalidated.text == "result")
        let sent = h.origin.requests(to: "/search")
        #expect(sent.count == 2 && sent[1].method == "QUERY" && sent[1].body == Array("[1]".utf8))
        #expect(sent[1].header("If-None-Match") == "\"r1\"")
    }

    /// §2: QUERY is safe: it invalidates the stored GET response of its URL no more than a GET
    /// would, and a GET is never answered with a QUERY's response.
    @Test func rfc10008Section2QueryInvalidatesNothing() async throws {
        let h = try Self.harness()
        _ = try await h.get("/search")
        _ = try await Self.query(h, "{}")
        let get = try await h.get("/search")
        #expect(get.outcome == .hit && get.text == "GET ")
    }

    /// RFC 9111 §4.4: a successful POST to the URI invalidates its stored QUERY responses, whose
    /// keys hold their content; `remove(url:)` removes them, and so does `Clear-Site-Data: "cache"`
    /// from the origin (W3C Clear Site Data §4.2).
    @Test func rfc9111Section4_4InvalidationAndRemovalReachQueryResponses() async throws {
        let h = try Self.harness()
        h.serve("/logout", [("Clear-Site-Data", "\"cache\"")])
        _ = try await Self.query(h, "{}")
        _ = try await h.get("/search", method: "POST", body: Data("x".utf8))
        #expect(try await Self.query(h, "{}").outcome == .miss)
        #expect(try h.cache.remove(url: h.origin.url("/search")) == 1)
        #expect(try await Self.query(h, "{}").outcome == .miss)
        _ = try await h.get("/logout")
        #expect(try await Self.query(h, "{}").outcome == .miss)
        #expect(h.origin.requests(to: "/search").filter { $0.method == "QUERY" }.count == 4)
    }

    /// Content over 1 MiB is not keyed: the QUERY is sent on and its response not stored.
    @Test func contentOverOneMebibyteIsSentOnUncached() async throws {
        let h = try Self.harness()
        let large = String(repeating: "a", count: (1 << 20) + 1)
        let first = try await Self.query(h, large, type: "text/plain")
        let second = try await Self.query(h, large, type: "text/plain")
        #expect(first.outcome == .bypass && second.outcome == .bypass)
        #expect(first.reasons.contains { $0.description.contains("RFC 10008 §2.7") })
        #expect(h.origin.count("/search") == 2)
    }
}
