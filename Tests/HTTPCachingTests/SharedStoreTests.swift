import CacheStorageRedis
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `HTTPCache.Configuration.store` with a `SharedStore` on a real Redis: two caches (two app
/// servers) share what they cache.
@Suite("HTTPCache on a shared Redis store")
struct SharedStoreTests {
    @Test("what one HTTPCache stores is a hit in another on the same Redis; a removal in one reaches the other")
    func twoCachesShareOneRedis() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/api") { _ in .init(headers: [("Cache-Control", "max-age=300")], body: "shared answer") }
        var redis = try RedisConfiguration(url: try RedisServer.shared().url)
        redis.keyPrefix = "httpcache-test-\(UInt64.random(in: 0...UInt64.max)):"
        func cache() throws -> HTTPCache {
            var configuration = HTTPCache.Configuration()
            configuration.store = SharedStore(redis: RedisStore(redis), localCapacity: 1 << 20)
            configuration.log = { _ in }
            return try HTTPCache(configuration: configuration)
        }
        let first = try cache()
        let second = try cache()
        let request = URLRequest(url: origin.url("/api"))
        let stored = try await first.data(for: request)
        #expect(stored.outcome == .miss)
        let shared = try await second.data(for: request)
        #expect(shared.outcome == .hit)
        #expect(String(decoding: shared.data, as: UTF8.self) == "shared answer")
        #expect(origin.count("/api") == 1)

        #expect(try first.remove(url: origin.url("/api")) == 1)
        try await Task.sleep(for: .milliseconds(100))
        #expect(try await second.data(for: request).outcome == .miss)
        #expect(origin.count("/api") == 2)
    }
}
