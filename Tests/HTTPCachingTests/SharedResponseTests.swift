import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Answers from one stored entry share one `HTTPURLResponse` while their status, URL and fields
/// are the same (an `HTTPURLResponse` costs more to make than the rest of a hit), and never
/// when they differ: `Age` and `Cache-Status` are current on every answer (RFC 9111 §4.2.3,
/// §5.1; RFC 9211 §2.2), and a replaced entry's answer carries only its own fields.
@Suite("Answers from a stored entry share their HTTPURLResponse only while they are the same")
struct SharedResponseTests {
    /// RFC 9111 §5.1: `Age` is the current age of each answer, so a later second gets a new
    /// response with the new `Age` (and the new `ttl` in `Cache-Status`).
    @Test("Age and Cache-Status are current on every hit; hits in one second share one response (RFC 9111 §5.1)")
    func ageIsCurrentOnEveryHit() async throws {
        let h = try Harness()
        h.serve("/age", [("Cache-Control", "max-age=600")], body: "aged")
        _ = try await h.get("/age")
        let first = try await h.get("/age").response
        let second = try await h.get("/age").response
        #expect(first === second)
        #expect(first.value(forHTTPHeaderField: "Age") == "0")
        h.clock.advance(by: 7)
        let later = try await h.get("/age").response
        #expect(later !== first)
        #expect(later.value(forHTTPHeaderField: "Age") == "7")
        #expect(later.value(forHTTPHeaderField: "Cache-Status") == "HTTPCache; hit; ttl=593")
        #expect(first.value(forHTTPHeaderField: "Age") == "0")
        #expect(first.value(forHTTPHeaderField: "Cache-Status") == "HTTPCache; hit; ttl=600")
    }

    /// A response stored in place of another (RFC 9111 §3, §4.4) is answered with its own
    /// fields only, never with a response made for the one it replaced.
    @Test("A replaced entry is answered with the new response's fields only (RFC 9111 §3)")
    func aReplacedEntryGivesTheNewResponse() async throws {
        let h = try Harness()
        h.serve("/replaced", [("Cache-Control", "max-age=60"), ("X-Version", "1")], body: "one")
        _ = try await h.get("/replaced")
        let old = try await h.get("/replaced")
        #expect(old.response.value(forHTTPHeaderField: "X-Version") == "1")
        h.serve("/replaced", [("Cache-Control", "max-age=60"), ("Content-Language", "en")], body: "two")
        h.clock.advance(by: 120)
        let fetched = try await h.get("/replaced")
        #expect(fetched.outcome == .miss && fetched.text == "two")
        let hit = try await h.get("/replaced")
        #expect(hit.outcome == .hit && hit.text == "two")
        #expect(hit.response !== old.response)
        #expect(hit.response.value(forHTTPHeaderField: "X-Version") == nil)
        #expect(hit.response.value(forHTTPHeaderField: "Content-Language") == "en")
        #expect(hit.response.value(forHTTPHeaderField: "Age") == "0")
    }

    /// Two URLs a key hook stores under one entry each get a response with their own URL.
    @Test func urlsSharingAnEntryKeepTheirOwnURL() async throws {
        let h = try Harness { $0.cacheKey = { RequestKey.dropping(queryItems: ["utm"], from: $0) } }
        h.serve("/shared", [("Cache-Control", "max-age=60")], body: "shared")
        _ = try await h.get("/shared?utm=a")
        let a = try await h.get("/shared?utm=a")
        let b = try await h.get("/shared?utm=b")
        #expect(a.outcome == .hit && b.outcome == .hit)
        #expect(a.response.url == h.origin.url("/shared?utm=a"))
        #expect(b.response.url == h.origin.url("/shared?utm=b"))
        #expect(try await h.get("/shared?utm=a").response.url == h.origin.url("/shared?utm=a"))
        #expect(h.origin.count("/shared") == 1)
    }
}
