#if os(Linux)
import CacheTestSupport
import Testing

/// `httpcache serve` says which hits No-Vary-Search made (draft-ietf-httpbis-no-vary-search).
@Suite("httpcache serve: Cache-Status of No-Vary-Search hits")
struct SearchVarianceStatusTests {
    @Test("RFC 9211 §2.8: a hit No-Vary-Search made says detail=no-vary-search (draft §6, §7)")
    func hitSaysNoVarySearch() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/n", [("Cache-Control", "max-age=60"), ("No-Vary-Search", "params=(\"utm\")")], body: "n")
            _ = try harness.get("/n?utm=1&x=1")
            let equivalent = try harness.get("/n?x=1&utm=2")
            #expect(equivalent.isHit)
            #expect(equivalent.cacheStatus?.hasSuffix("; detail=no-vary-search") == true)
            let same = try harness.get("/n?utm=1&x=1")
            #expect(same.isHit)
            #expect(same.cacheStatus?.contains("detail") == false)
        }
    }
}
#endif
