import CacheSemantics
import CacheStorage
import CacheStorageRedis
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import OfflinePages
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The shared test Redis under a key prefix of its own (started off the cooperative pool when
/// this is the first test to ask for it).
private func testRedis(_ prefix: String) async throws -> RedisConfiguration {
    var redis = try RedisConfiguration(url: try await offPool { try RedisServer.shared().url })
    redis.keyPrefix = "\(prefix)-\(UInt64.random(in: 0...UInt64.max)):"
    // Beside other suites and stress-ng on two cores, 50 ms and even 1 s are sometimes passed;
    // these tests are about sharing, not timeouts.
    redis.commandTimeout = 10
    redis.connectTimeout = 10
    return redis
}

/// Whether `condition` holds within 10 s, checked every 10 ms: a change made through one store
/// reaches another's local tier through Redis pub/sub, which beside other suites on two cores
/// can take far longer than its usual millisecond.
private func eventually(_ condition: () throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(10)
    repeat {
        if try condition() { return true }
        try await Task.sleep(for: .milliseconds(10))
    } while Date() < deadline
    return false
}

/// An HTTPCache on a `SharedStore` over `redis`: one app server of several, on `clock` (the
/// app servers share it, as their synchronised clocks do).
private func sharedCache(_ redis: RedisConfiguration, clock: ManualClock) throws -> HTTPCache {
    var configuration = HTTPCache.Configuration()
    configuration.clock = clock.function
    configuration.store = SharedStore(
        redis: RedisStore(redis, clock: clock.function), localCapacity: 1 << 20, clock: clock.function)
    configuration.log = { _ in }
    return try HTTPCache(configuration: configuration)
}

/// `HTTPCache.Configuration.store` with a `SharedStore` on a real Redis: two caches (two app
/// servers) share what they cache.
@Suite("HTTPCache on a shared Redis store")
struct SharedStoreTests {
    @Test("what one HTTPCache stores is a hit in another on the same Redis; a removal in one reaches the other")
    func twoCachesShareOneRedis() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        origin.route("/api") { _ in .init(headers: [("Cache-Control", "max-age=300")], body: "shared answer") }
        let redis = try await testRedis("httpcache-test")
        let clock = ManualClock()
        let first = try sharedCache(redis, clock: clock)
        let second = try sharedCache(redis, clock: clock)
        let request = URLRequest(url: origin.url("/api"))
        let stored = try await first.data(for: request)
        #expect(stored.outcome == .miss)
        let shared = try await second.data(for: request)
        #expect(shared.outcome == .hit)
        #expect(String(decoding: shared.data, as: UTF8.self) == "shared answer")
        #expect(origin.count("/api") == 1)

        #expect(try first.remove(url: origin.url("/api")) == 1)
        #expect(try await eventually { try second.entries(for: origin.url("/api")).isEmpty })
        #expect(try await second.data(for: request).outcome == .miss)
        #expect(origin.count("/api") == 2)
    }
}

/// The local tier of one `SharedStore` follows what another one changes in Redis.
@Suite("SharedStore: local tiers follow other caches' changes")
struct SharedStoreLocalTierTests {
    @Test("a 304 freshening and a removal through one store reach another store's local tier")
    func localTierFollowsChanges() async throws {
        var redis = try RedisConfiguration(url: try await offPool { try RedisServer.shared().url })
        redis.keyPrefix = "local-tier-\(UInt64.random(in: 0...UInt64.max)):"
        // A freshening Redis did not take in time is kept in the writer's local tier only (and
        // nobody is told), so a timeout here would be a failure of the machine, not the store.
        redis.commandTimeout = 10
        redis.connectTimeout = 10
        let first = SharedStore(redis: RedisStore(redis), localCapacity: 1 << 20)
        let second = SharedStore(redis: RedisStore(redis), localCapacity: 1 << 20)
        defer {
            first.close()
            second.close()
        }
        // Both subscribed before anything changes: only a subscribed store keeps a local tier.
        // Beside the other suites on two cores a subscription has taken more than 5 s (its
        // reconnect backoff grows from 0.1 s), so the wait is long and its end checked.
        let deadline = Date().addingTimeInterval(30)
        while (first.changeCount == nil || second.changeCount == nil) && Date() < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        try #require(first.changeCount != nil && second.changeCount != nil, "not subscribed to Redis within 30 s")
        let key = "https://api.example/item"
        let writer = try first.makeWriter(
            for: EntryHead(primaryKey: key, url: key, status: 200, fields: ["ETag": "\"1\""], facts: []))
        try writer.append(Array("v1".utf8))
        let stored = try writer.commit()
        // The second store reads it whole (into its local tier), then answers from there. A
        // subscription a busy machine lost (and the store made again) empties the local tier,
        // as it must: then the read is repeated until the entry is kept.
        #expect(
            try await eventually {
                guard let seen = try second.variants(of: key).first,
                    try second.openBody(for: seen).readAll() == Array("v1".utf8)
                else { return false }
                _ = try second.variants(of: key)
                return second.local?.totals().entries == 1
            }, "the second store's local tier: \(second.local?.totals().entries ?? -1) entries")

        try first.update(stored.id, fields: ["ETag": "\"1\"", "X-Freshened": "yes"], facts: [])
        #expect(
            try await eventually { try second.variants(of: key).first?.head.fields["X-Freshened"] == "yes" },
            "the first store's Redis: \(first.metrics); the second's: \(second.metrics), changes seen \(second.changeCount.map(String.init) ?? "none (not subscribed)")"
        )

        _ = try first.remove(primaryKey: key)
        #expect(try await eventually { try second.variants(of: key).isEmpty })
        #expect(second.local?.totals().entries == 0)
    }
}

/// Offline packs live in the store: two app servers on one Redis share them.
@Suite("Offline packs on a shared Redis store")
struct SharedStorePackTests {
    @Test("a page saved through one HTTPCache is listed, served offline and removed through another")
    func packsAreShared() async throws {
        let site = try SampleSite(manyImages: 0)
        let redis = try await testRedis("packs-test")
        let clock = ManualClock()
        let first = try sharedCache(redis, clock: clock)
        let second = try sharedCache(redis, clock: clock)
        var options = SaveOptions()
        options.name = "two"
        let pack = try await first.savePage(site.origin.url("/site/page2.html"), options: options).pack
        #expect(pack.resources.count == 2)
        #expect(try second.packs().map(\.name) == ["two"])
        site.origin.stop()
        for resource in pack.resources {
            let served = try await second.data(for: URLRequest(url: try #require(URL(string: resource.url))))
            #expect(served.statusCode == 200, "\(resource.url)")
            #expect(served.cacheStatus.fieldValue.contains("detail=saved-offline"), "\(resource.url)")
        }
        #expect(try second.removePack(named: "two")?.count == 2)
        #expect(try first.packs().isEmpty)
    }
}

/// A body in Redis that cannot be read any more (a chunk evicted while its record stayed) is a
/// miss for `HTTPCache`, never an error for the app.
@Suite("HTTPCache on Redis: a stored body that cannot be read")
struct SharedStoreFaultTests {
    @Test(
        "a chunk gone from Redis: data(for:) answers from the origin, a conditional request gets the origin's 304 (RFC 9111 §4.3.2)"
    )
    func evictedChunkIsAMiss() async throws {
        let origin = try LoopbackOrigin()
        defer { origin.stop() }
        let body = StressBodies.body(for: "/big", size: 1_500_000)
        origin.route("/big") { request in
            let headers = [("Cache-Control", "max-age=300"), ("ETag", "\"v1\"")]
            if request.header("If-None-Match") == "\"v1\"" { return .init(status: 304, headers: headers, body: "") }
            return .init(headers: headers, body: body)
        }
        let redis = try await testRedis("httpcache-fault")
        let server = try await offPool { try RedisServer.shared() }
        func deleteSecondChunk() async throws {
            try await offPool {
                let keys = try server.cli(["--scan", "--pattern", redis.keyPrefix + "*"]).split(separator: "\n")
                let chunk = try #require(keys.first { $0.hasSuffix(":1") && $0.contains("}c:") })
                #expect(try server.command("DEL", String(chunk)) == ":1")
            }
        }
        // No local tier: every read goes to Redis. One clock for both caches.
        let clock = ManualClock()
        func cache() throws -> HTTPCache {
            var configuration = HTTPCache.Configuration()
            configuration.clock = clock.function
            configuration.store = SharedStore(
                redis: RedisStore(redis, clock: clock.function), localCapacity: 0, clock: clock.function)
            configuration.log = { _ in }
            return try HTTPCache(configuration: configuration)
        }
        let writer = try cache()
        let reader = try cache()
        let request = URLRequest(url: origin.url("/big"))
        #expect(try await writer.data(for: request).data == Data(body))

        try await deleteSecondChunk()
        let answer = try await reader.data(for: request)
        #expect(answer.data == Data(body))
        #expect(answer.outcome == .miss)
        #expect(origin.count("/big") == 2)

        try await deleteSecondChunk()
        var conditional = request
        conditional.setValue("\"v1\"", forHTTPHeaderField: "If-None-Match")
        let notModified = try await reader.data(for: conditional)
        #expect(notModified.statusCode == 304)
        #expect(origin.requests(to: "/big").last?.header("If-None-Match") == "\"v1\"")
    }
}
