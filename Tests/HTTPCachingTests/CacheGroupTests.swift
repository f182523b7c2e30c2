import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Purging by cache group (RFC 9875) from an app: `HTTPCache.remove(group:origin:)`.
@Suite("HTTPCache: cache groups (RFC 9875)")
struct CacheGroupTests {
    @Test("RFC 9875 §2.1: remove(group:origin:) removes the group in that origin only; without an origin, in every one")
    func removeByGroup() async throws {
        let harness = try Harness()
        let other = try LoopbackOrigin()
        defer { other.stop() }
        for origin in [harness.origin, other] {
            for (path, groups) in [("/a", "\"news\", \"front\""), ("/b", "\"news\""), ("/c", "\"sport\"")] {
                origin.route(path) { _ in
                    LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=600"), ("Cache-Groups", groups)], body: path)
                }
            }
        }
        func fetchAll() async throws {
            for origin in [harness.origin, other] {
                for path in ["/a", "/b", "/c"] {
                    _ = try await harness.cache.data(for: URLRequest(url: origin.url(path)))
                }
            }
        }
        try await fetchAll()
        #expect(harness.cache.totals.all.entries == 6)
        #expect(try harness.cache.remove(group: "news", origin: harness.origin.url("/anything")) == 2)
        #expect(try harness.cache.remove(group: "news", origin: harness.origin.url("/")) == 0)
        #expect(try harness.cache.remove(group: "News") == 0)  // case-sensitive (§2.1)
        #expect(try harness.cache.remove(group: "front") == 1)  // /a of the other origin
        #expect(try harness.cache.remove(group: "sport") == 2)
        #expect(try harness.cache.entries().map(\.url) == [other.url("/b").absoluteString])
        _ = try await harness.cache.data(for: URLRequest(url: harness.origin.url("/a")))
        #expect(harness.origin.count("/a") == 2)
    }
}
