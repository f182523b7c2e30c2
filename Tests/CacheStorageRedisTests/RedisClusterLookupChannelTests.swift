#if os(Linux)
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorageRedis

/// An event loop's lookups in a real Redis Cluster (``RedisClusterLookupChannel``), driven as a
/// loop drives them (`poll` on the channel's descriptor, ``LookupChannel/expire()``): routed to
/// each key's master on a connection per master, and with a slot map that names the wrong
/// master for every key, each lookup following its `MOVED` on the loop; every lookup resumed
/// with its own records and body.
@Suite("RedisStore: Cluster lookups on an event loop's connections to the masters")
struct RedisClusterLookupChannelTests {
    private static func store() throws -> RedisStore {
        var configuration = try RedisConfiguration(clusterNodes: try RedisCluster.shared().seeds)
        configuration.keyPrefix = "cchannel-\(UInt64.random(in: 0...UInt64.max)):"
        configuration.commandTimeout = 30
        configuration.connectTimeout = 5
        return RedisStore(configuration)
    }

    /// A store holding `count` keys (but every fifth), and the masters the keys are on.
    private static func storeHolding(_ count: Int, named name: String) throws -> (
        RedisStore, [String], [RedisConfiguration.Node]
    ) {
        let store = try Self.store()
        let keys = (0..<count).map { "https://example.com/\(name)/\($0)" }
        for (index, key) in keys.enumerated() where index % 5 != 4 {
            try RedisLookupChannelTests.write(store, key, Self.body(index))
        }
        return (store, keys, Array(Set(keys.compactMap { store.client.knownMaster(of: store.entryKey($0)) })))
    }

    private static func body(_ index: Int) -> [UInt8] {
        (0..<(200 + index * 331)).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ index) }
    }

    /// Looks up every key of `keys` in one pass and checks, as each resumes, that the store
    /// answers it with its own entry and body (index % 5 == 4: none stored) from the reply.
    private static func lookUpAll(_ store: RedisStore, _ keys: [String]) throws -> (answered: Int, wrong: [String]) {
        let channel = try #require(store.makeLookupChannel())
        var answered = 0
        var wrong: [String] = []
        for (index, key) in keys.enumerated() {
            let queued = channel.lookUp(key) {
                answered += 1
                let body = index % 5 == 4 ? nil : Self.body(index)
                if let problem = RedisLookupChannelTests.check(store, key, body: body) { wrong.append(problem) }
            }
            if !queued { wrong.append("\(key): not queued") }
        }
        RedisLookupChannelTests.drive(channel, seconds: 60) { answered == keys.count }
        channel.close()
        #expect(channel.descriptor == -1)
        return (answered, wrong)
    }

    @Test("lookups of keys on all three masters, queued in one pass: one write per master, each resumed with its own")
    func routedBySlot() async throws {
        try await offPool {
            let (store, keys, masters) = try Self.storeHolding(45, named: "routed")
            #expect(masters.count == 3, "the keys are on \(masters.count) masters")
            let before = store.metrics
            let (answered, wrong) = try Self.lookUpAll(store, keys)
            #expect(answered == keys.count)
            #expect(wrong.isEmpty, "\(wrong.prefix(3))")
            let after = store.metrics
            #expect(after.lookupsOnLoops - before.lookupsOnLoops == keys.count)
            #expect(after.roundTrips - before.roundTrips == masters.count, "one write per master")
            #expect(after.errors == before.errors)
        }
    }

    @Test("a slot map naming the wrong master for every key: each lookup follows its MOVED on the loop, none a miss")
    func movedFollowed() async throws {
        try await offPool {
            let (store, keys, masters) = try Self.storeHolding(30, named: "moved")
            try #require(masters.count > 1)
            // Each key's slot pointed at another master than its own (read again only when a
            // MOVED comes, by then every lookup is on its way).
            var misrouted = 0
            for key in keys {
                let slot = Int(HashSlot.slot(of: store.entryKey(key)))
                let own = try #require(store.client.knownMaster(of: store.entryKey(key)))
                store.client.setMaster(try #require(masters.first { $0 != own }), ofSlot: slot)
                misrouted += 1
            }
            let before = store.metrics
            let (answered, wrong) = try Self.lookUpAll(store, keys)
            #expect(answered == keys.count)
            #expect(wrong.isEmpty, "\(wrong.prefix(3))")
            let after = store.metrics
            // Each sent twice: to the wrong master, then to the one its MOVED named.
            #expect(after.lookupsOnLoops - before.lookupsOnLoops == keys.count + misrouted)
            #expect(after.errorsByKind["MOVED"] == before.errorsByKind["MOVED"])
            #expect(after.errors == before.errors)
        }
    }
}
#endif
