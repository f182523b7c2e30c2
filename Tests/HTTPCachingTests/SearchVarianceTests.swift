import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// No-Vary-Search (draft-ietf-httpbis-no-vary-search) in an app's cache: the hits it makes
/// say so, and it composes with the app's key hook.
@Suite("No-Vary-Search in HTTPCache: Cache-Status detail, key hooks")
struct SearchVarianceTests {
    static let ignoringUTM = [
        ("Cache-Control", "max-age=60, stale-while-revalidate=600"), ("No-Vary-Search", "params=(\"utm\")"),
    ]

    @Test("RFC 9211 §2.8: a hit No-Vary-Search made says detail=no-vary-search (draft §6, §7)")
    func hitSaysNoVarySearch() async throws {
        let h = try Harness()
        h.serve("/n", Self.ignoringUTM, body: "n")
        #expect(try await h.get("/n?utm=1&x=1").outcome == .miss)
        let equivalent = try await h.get("/n?x=1&utm=2")
        #expect(equivalent.outcome == .hit)
        #expect(equivalent.cacheStatus.detail == "no-vary-search")
        #expect(equivalent.field("Cache-Status")?.hasSuffix("detail=no-vary-search") == true)
        // The URL it was stored for: a plain hit, nothing to say.
        let same = try await h.get("/n?utm=1&x=1")
        #expect(same.outcome == .hit && same.cacheStatus.detail == nil)
        // Served stale-while-revalidate through No-Vary-Search: both said.
        h.clock.advance(by: 120)
        let stale = try await h.get("/n?utm=3&x=1")
        #expect(stale.outcome == .stale)
        #expect(stale.cacheStatus.detail == "stale-while-revalidate no-vary-search")
        await h.cache.waitForBackgroundWork()
    }

    /// The hook comes first (it drops `session`), No-Vary-Search then ignores the parameters
    /// the response names (`sort`) in the hook's URL: requests equal but for both share one
    /// response, and a parameter neither drops still keeps them apart.
    @Test("A key hook and No-Vary-Search compose: the hook maps the URL, then the params are ignored (draft §6, §7)")
    func keyHookThenNoVarySearch() async throws {
        let h = try Harness { $0.cacheKey = { .dropping(queryItems: ["session"], from: $0) } }
        h.origin.route("/l") { [clock = h.clock] request in
            LoopbackOrigin.Response(
                headers: [
                    ("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now()))),
                    ("Cache-Control", "max-age=60"), ("No-Vary-Search", "params=(\"sort\")"),
                ], body: request.target)
        }
        #expect(try await h.get("/l?q=1&sort=a&session=1").outcome == .miss)
        let equivalent = try await h.get("/l?session=2&q=1&sort=b")
        #expect(equivalent.outcome == .hit)
        #expect(equivalent.text == "/l?q=1&sort=a&session=1")
        #expect(equivalent.cacheStatus.detail == "no-vary-search")
        #expect(try await h.get("/l?q=1").outcome == .hit)
        let other = try await h.get("/l?q=2&sort=a&session=1")
        #expect(other.outcome == .miss)
        #expect(h.origin.count("/l") == 2)
    }
}
