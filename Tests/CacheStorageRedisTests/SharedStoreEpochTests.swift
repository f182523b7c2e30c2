import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorageRedis

/// A read of Redis that a change overtook (an invalidation heard, a write of this cache's own
/// between the read and its use) must not make the local tier trusted, roll back what the local
/// tier holds, or put an older version in it: no message would come to correct it.
@Suite("SharedStore: reads of Redis that a change overtook")
struct SharedStoreEpochTests {
    static let key = "https://api.example/item"

    /// A store with a local tier on the shared test Redis, under a key prefix of its own, not
    /// subscribed (the test delivers the invalidations), holding one entry of `key`.
    static func storeWithEntry() throws -> (SharedStore, MemoryStore, StoredEntry) {
        var redis = try RedisConfiguration(url: try RedisServer.shared().url)
        redis.keyPrefix = "epoch-\(UInt64.random(in: 0...UInt64.max)):"
        redis.commandTimeout = 10
        redis.connectTimeout = 10
        let store = SharedStore(redis: RedisStore(redis), localCapacity: 1 << 20, listens: false)
        let entry = try write(store, version: 1)
        return (store, try #require(store.local), entry)
    }

    /// Version `version` of `key`, written through `store`.
    static func write(_ store: SharedStore, version: Int) throws -> StoredEntry {
        let writer = try store.makeWriter(
            for: EntryHead(primaryKey: key, url: key, status: 200, fields: ["ETag": "\"\(version)\""], facts: []))
        try writer.append(Array("v\(version)".utf8))
        return try writer.commit()
    }

    /// What Redis holds for `key`, read as `variants(of:)` reads it, with the epoch it began under.
    static func read(_ store: SharedStore) throws -> ([StoredEntry], SharedStore.Epoch) {
        let epoch = store.state.withLock { $0.epoch(of: key) }
        return (try store.redis.variants(of: key), epoch)
    }

    func trusted(_ store: SharedStore) -> Int? { store.state.withLock { $0.synced[Self.key] } }

    @Test("a read an invalidation overtook does not make the local tier trusted; a read under the current epoch does")
    func overtakenReadIsNotTrusted() async throws {
        try await offPool {
            let (store, local, entry) = try Self.storeWithEntry()
            let (remote, epoch) = try Self.read(store)
            #expect(remote.map(\.id) == [entry.id])
            // Another cache changed the key: the message arrives while the read is in flight,
            // and something puts the version read back in the local tier meanwhile.
            store.invalidated(Self.key)
            local.insert(entry, body: Array("v1".utf8))
            store.reconcile(Self.key, remote, local, since: epoch)
            #expect(trusted(store) == nil)
            // The same read made now is trusted: the local tier holds all Redis has.
            store.reconcile(Self.key, remote, local, since: store.state.withLock { $0.epoch(of: Self.key) })
            #expect(trusted(store) == 1)
        }
    }

    @Test("a read that a newer write of this cache overtook neither removes nor replaces it in the local tier")
    func overtakenReadDoesNotRollBack() async throws {
        try await offPool {
            let (store, local, entry) = try Self.storeWithEntry()
            let (remote, epoch) = try Self.read(store)
            // A newer version of the key is written by this cache before the read is applied.
            let newer = try Self.write(store, version: 2)
            store.reconcile(Self.key, remote, local, since: epoch)
            // The local tier keeps the newer version; the older read neither removed nor
            // replaced it, nor made it trusted.
            #expect(try local.variants(of: Self.key).map(\.id) == [newer.id])
            #expect(trusted(store) == nil)
            #expect(try store.variants(of: Self.key).map(\.id) == [newer.id])
            #expect(entry.id != newer.id)
        }
    }

    @Test("a body read before an invalidation is not promoted into the local tier; one read after it is")
    func overtakenPromotionIsDropped() async throws {
        try await offPool {
            let (store, local, entry) = try Self.storeWithEntry()
            store.invalidated(Self.key)  // the local tier no longer holds the entry
            #expect(try local.variants(of: Self.key).isEmpty)
            let epoch = store.state.withLock { $0.epoch(of: Self.key) }
            store.invalidated(Self.key)
            store.promote(entry, body: Array("v1".utf8), since: epoch, into: local)
            #expect(try local.variants(of: Self.key).isEmpty)
            store.promote(
                entry, body: Array("v1".utf8), since: store.state.withLock { $0.epoch(of: Self.key) }, into: local)
            #expect(try local.variants(of: Self.key).map(\.id) == [entry.id])
        }
    }

    @Test("removing a key forgets it again once Redis has removed it")
    func removalForgetsAfterRedis() async throws {
        try await offPool {
            let (store, _, _) = try Self.storeWithEntry()
            let before = store.state.withLock { $0.epoch(of: Self.key) }
            #expect(try store.remove(primaryKey: Self.key) == 1)
            // Forgotten before the removal and once more after it.
            #expect(store.state.withLock { $0.epoch(of: Self.key) }.key == before.key &+ 2)
        }
    }
}
