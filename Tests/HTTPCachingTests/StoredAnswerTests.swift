import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCacheCore
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `HTTPCache.storedData(for:upTo:)`, the synchronous answer `CachingURLProtocol.startLoading` gives
/// when the store answers at once: the same response `data(for:)` gives, or `nil` with nothing
/// done whenever the origin would be asked or a redirect followed.
@Suite("Answers from the store without a task")
struct StoredAnswerTests {
    func fetch(_ h: Harness, _ path: String, policy: URLRequest.CachePolicy = .useProtocolCachePolicy) throws
        -> FetchRequest
    {
        try FetchRequest(fetching: h.request(path, policy: policy))
    }

    /// A fresh response (RFC 9111 §4.2) is answered whole, counted once as a hit, the origin untouched.
    @Test("A fresh stored response is answered at once, counted as one hit (RFC 9111 §4.2)")
    func aFreshHitIsAnsweredAtOnce() async throws {
        let h = try Harness()
        h.serve("/fresh", [("Cache-Control", "max-age=60")], body: "fresh body")
        _ = try await h.get("/fresh")
        let before = h.cache.statistics
        let answer = try #require(h.cache.storedData(for: try fetch(h, "/fresh"), upTo: 1 << 20))
        #expect(answer.text == "fresh body" && answer.outcome == .hit && answer.statusCode == 200)
        #expect(answer.field("Cache-Status")?.contains("hit") == true)
        #expect(h.cache.statistics.hits == before.hits + 1)
        #expect(h.cache.statistics.bytesServedFromCache == before.bytesServedFromCache + 10)
        #expect(h.origin.count("/fresh") == 1)
    }

    /// Nothing stored, or a stored response that must be validated (RFC 9111 §4.3): `nil`,
    /// nothing sent and nothing counted; `data(for:)` then does the work.
    @Test("A miss or a stale response to validate is left to data(for:): nothing sent, nothing counted (RFC 9111 §4.3)")
    func whatNeedsTheOriginIsLeftAlone() async throws {
        let h = try Harness()
        h.serveValidated("/stale", [("Cache-Control", "max-age=60")], body: "validated body")
        #expect(h.cache.storedData(for: try fetch(h, "/stale"), upTo: 1 << 20) == nil)
        #expect(h.origin.count("/stale") == 0)
        _ = try await h.get("/stale")
        h.clock.advance(by: 120)
        let before = h.cache.statistics
        #expect(h.cache.storedData(for: try fetch(h, "/stale"), upTo: 1 << 20) == nil)
        #expect(h.origin.count("/stale") == 1)
        #expect(h.cache.statistics == before)
        let revalidated = try await h.get("/stale")
        #expect(revalidated.outcome == .revalidated && revalidated.text == "validated body")
    }

    /// `returnCacheDataDontLoad` with nothing stored: the cache's own 504 (RFC 9111 §5.2.1.7,
    /// only-if-cached), at once.
    @Test("only-if-cached with nothing stored: the cache's 504 at once (RFC 9111 §5.2.1.7)")
    func onlyIfCachedWithNothingStoredIs504() throws {
        let h = try Harness()
        let answer = try #require(
            h.cache.storedData(for: try fetch(h, "/none", policy: .returnCacheDataDontLoad), upTo: 1 << 20))
        #expect(answer.statusCode == 504)
        #expect(h.origin.count("/none") == 0)
    }

    /// A stored redirect the cache follows (RFC 9110 §15.4) is left to `data(for:)`, which
    /// follows it; the store's answer is not the final one.
    @Test("A stored redirect the cache would follow is left to data(for:) (RFC 9110 §15.4)")
    func aStoredRedirectIsLeftToDataFor() async throws {
        let h = try Harness()
        h.serve("/moved", status: 301, [("Location", "/target"), ("Cache-Control", "max-age=60")], body: "")
        h.serve("/target", [("Cache-Control", "max-age=60")], body: "the target")
        _ = try await h.get("/moved")
        #expect(h.cache.storedData(for: try fetch(h, "/moved"), upTo: 1 << 20) == nil)
        #expect(try await h.get("/moved").text == "the target")
    }

    /// stale-while-revalidate (RFC 5861 §3): the stale response at once, validated behind it.
    @Test("stale-while-revalidate: the stale response at once, the validation behind it (RFC 5861 §3)")
    func staleWhileRevalidateValidatesBehind() async throws {
        let h = try Harness()
        h.serveValidated("/swr", [("Cache-Control", "max-age=1, stale-while-revalidate=600")], body: "swr body")
        _ = try await h.get("/swr")
        h.clock.advance(by: 30)
        let answer = try #require(h.cache.storedData(for: try fetch(h, "/swr"), upTo: 1 << 20))
        #expect(answer.text == "swr body" && answer.outcome == .stale)
        await h.cache.waitForBackgroundWork()
        #expect(h.origin.count("/swr") == 2)
        #expect(h.origin.requests(to: "/swr").last?.header("If-None-Match") == "\"v1\"")
    }

    /// A body over the limit is left to `data(for:)`, which streams it: nothing read whole at once.
    @Test func aBodyOverTheLimitIsLeftToDataFor() async throws {
        let h = try Harness()
        h.serve("/big", [("Cache-Control", "max-age=60")], body: String(repeating: "b", count: 4096))
        _ = try await h.get("/big")
        #expect(h.cache.storedData(for: try fetch(h, "/big"), upTo: 4095) == nil)
        #expect(h.cache.storedData(for: try fetch(h, "/big"), upTo: 4096)?.data.count == 4096)
    }
}
