import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import Synchronization
import Testing

@testable import CacheStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The keys the index may hold (``KnownKeys``): a lookup of a key it does not hold — a miss —
/// is answered from memory, without reading the index or waiting for its lock; never for a key
/// the index holds, whoever wrote it and whenever.
@Suite("DiskStore: known keys")
struct KnownKeysTests {
    let directory = StoreTestSupport.makeDirectory("known-keys")

    /// Builds `store`'s known keys now, on this thread; whether they are used.
    @discardableResult
    func build(_ store: DiskStore, chunk: Int = DiskStore.knownKeysChunk, afterChunk: () -> Void = {}) -> Bool {
        DiskStore.buildKnownKeys({ store }, chunk: chunk, afterChunk: afterChunk)
    }

    func isComplete(_ store: DiskStore) -> Bool {
        guard let count = store.changes?.value else { return false }
        return store.memo.withLock { $0.knownKeys.isComplete(at: count) }
    }

    /// The variants of `key` as a lookup that remembers nothing of it finds them.
    func lookUp(_ store: DiskStore, key: Int) throws -> [StoredEntry] {
        let primaryKey = StressBodies.primaryKey(key: key)
        store.memo.withLock { $0.heads.removeValue(for: primaryKey) }
        return try store.variants(of: primaryKey)
    }

    @Test(
        "A key the index does not hold is looked up while a commit holds the index's lock; one it holds is not taken for missing"
    )
    func missWithoutTheLock() async throws {
        // It blocks (a lock held on another thread, a wait for it): off the cooperative pool.
        try await offPool {
            defer { StoreTestSupport.removeDirectory(directory) }
            let store = try StoreTestSupport.openStore(directory)
            let stored = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
            #expect(build(store))
            #expect(isComplete(store))
            // The index's lock held, as a batch's commit holds it, for up to 5 s.
            let held = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let released = Atomic<Bool>(false)
            Thread.detachNewThread {
                store.state.withLock { _ in
                    held.signal()
                    _ = release.wait(timeout: .now() + 5)
                    released.store(true, ordering: .sequentiallyConsistent)
                }
            }
            held.wait()
            #expect(try lookUp(store, key: 2).isEmpty)
            let waited = released.load(ordering: .sequentiallyConsistent)
            #expect(!waited, "the lookup of a missing key waited for the lock")
            release.signal()
            #expect(try lookUp(store, key: 1).map(\.id) == [stored.id])
        }
    }

    @Test("Keys stored before the store opened, while its keys were scanned, and after, all found; the scan is trusted")
    func everyKeyFound() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        var entries: [Int: EntryID] = [:]
        do {
            let earlier = try StoreTestSupport.openStore(directory)
            for key in 1...40 {
                entries[key] = try StoreTestSupport.write(earlier, key: key, generation: 0, size: 100).id
            }
        }
        let store = try StoreTestSupport.openStore(directory)
        var next = 41
        // Seven keys a chunk; between chunks, keys written that sort before and after the scan's place.
        #expect(
            build(store, chunk: 7) {
                for key in [next, next + 1000] {
                    entries[key] = try? StoreTestSupport.write(store, key: key, generation: 0, size: 100).id
                }
                next += 1
            })
        #expect(next > 41, "the scan took more than one chunk")
        for key in [next, next + 1000] {
            entries[key] = try StoreTestSupport.write(store, key: key, generation: 0, size: 100).id
        }
        #expect(isComplete(store))
        for (key, id) in entries.sorted(by: { $0.key < $1.key }) {
            #expect(try lookUp(store, key: key).map(\.id) == [id], "key \(key)")
        }
        #expect(try lookUp(store, key: 5_000).isEmpty)
    }

    @Test(
        "Queued commits (written behind) are found before and after their batch is written, with the known keys in use")
    func writtenBehind() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, writesBehind: true)
        #expect(build(store))
        // A miss's lookup remembers the key as missing, so its commit is queued.
        #expect(try lookUp(store, key: 1).isEmpty)
        let queued = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        let queuedCount = store.memo.withLock { $0.pendingCommits.count }
        #expect(queuedCount == 1)
        #expect(try lookUp(store, key: 1).map(\.id) == [queued.id])
        try store.flush()
        let left = store.memo.withLock { $0.pendingCommits.count }
        #expect(left == 0)
        #expect(isComplete(store))
        #expect(try lookUp(store, key: 1).map(\.id) == [queued.id])
    }

    @Test(
        "holdsNone: true only for a key the trusted known keys lack and no queued commit has; never for one stored, queued, or written by another store"
    )
    func holdsNone() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, writesBehind: true)
        let other = try StoreTestSupport.openStore(directory)
        let key = { StressBodies.primaryKey(key: $0) }
        // Not built: it cannot tell.
        #expect(!store.holdsNone(key(1)))
        try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        try store.flush()
        #expect(build(store))
        #expect(store.holdsNone(key(2)))
        #expect(!store.holdsNone(key(1)), "a key in the index")
        // Queued, not written yet.
        #expect(try lookUp(store, key: 3).isEmpty)
        try StoreTestSupport.write(store, key: 3, generation: 0, size: 100)
        #expect(store.memo.withLock { $0.pendingCommits.count } == 1)
        #expect(!store.holdsNone(key(3)), "a queued commit")
        try store.flush()
        #expect(!store.holdsNone(key(3)), "written")
        // Asking remembers nothing.
        #expect(store.memo.withLock { $0.heads.value(for: key(2)) } == nil)
        // Another store's write: untrusted until built again.
        try StoreTestSupport.write(other, key: 4, generation: 0, size: 100)
        #expect(!store.holdsNone(key(4)))
        #expect(!store.holdsNone(key(2)))
        #expect(build(store))
        #expect(store.holdsNone(key(2)) && !store.holdsNone(key(4)))
    }

    @Test("Another store's write leaves them untrusted: the key it wrote is found; a build then trusts them again")
    func anotherWriter() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory)
        let other = try StoreTestSupport.openStore(directory)
        #expect(build(store))
        let written = try StoreTestSupport.write(other, key: 7, generation: 0, size: 100)
        #expect(!isComplete(store))
        #expect(try lookUp(store, key: 7).map(\.id) == [written.id])
        // A build left behind by another's write meanwhile is not used.
        #expect(!build(store, chunk: 1) { _ = try? StoreTestSupport.write(other, key: 8, generation: 0, size: 100) })
        #expect(!isComplete(store))
        #expect(build(store))
        #expect(isComplete(store))
        #expect(try lookUp(store, key: 8).count == 1)
    }

    @Test("Evictions and removals of its own leave them trusted (keys only go); the removed keys are missing")
    func evictionsAndRemovals() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        var configuration = DiskStore.Configuration(directory: directory, log: { _ in })
        configuration.capacity = 20_000
        let store = try DiskStore(configuration)
        #expect(build(store))
        for key in 1...60 { try StoreTestSupport.write(store, key: key, generation: 0, size: 1_000) }
        #expect(try lookUp(store, key: 1).isEmpty, "evicted")
        #expect(try lookUp(store, key: 60).count == 1)
        #expect(try store.remove(primaryKey: StressBodies.primaryKey(key: 60)) == 1)
        #expect(isComplete(store))
        #expect(try lookUp(store, key: 60).isEmpty)
        try StoreTestSupport.write(store, key: 60, generation: 1, size: 1_000)
        #expect(try lookUp(store, key: 60).count == 1)
    }

    @Test(
        "A build is wanted once lookups read the index, then only once grown by half, or after another's write and a pause"
    )
    func whenBuilt() {
        var keys = KnownKeys()
        var claims = [keys.claimBuild(at: 10, time: 0)]
        keys.indexReads = KnownKeys.indexReadsBeforeBuild
        claims += [keys.claimBuild(at: 10, time: 0), keys.claimBuild(at: 10, time: 0)]
        #expect(claims == [false, true, false], "wanted after lookups read the index, claimed once until it starts")
        let started = keys.startBuild(at: 10, time: 0)
        claims = [keys.claimBuild(at: 10, time: 100)]
        #expect(started != nil && claims == [false], "not while one runs")
        keys.insert(2_000)
        keys.counted(10)
        var scanned = Set((1...1_000).map(UInt64.init))
        let used = keys.finishBuild(scanned: &scanned, at: 11)
        #expect(used)
        #expect(!keys.holdsNone(2_000, at: 11), "a key written during the build")
        #expect(keys.holdsNone(5_000, at: 11) && !keys.holdsNone(5, at: 11) && !keys.holdsNone(5_000, at: 12))
        for hash in 2_001..<(2_000 + 501 + KnownKeys.growthAllowance) { keys.insert(UInt64(hash)) }
        claims = [keys.claimBuild(at: 11, time: 100)]
        keys.insert(1_000_000)
        claims.append(keys.claimBuild(at: 11, time: 100))
        #expect(claims == [false, true], "due once grown by half and the allowance")
        var left = KnownKeys()
        _ = left.startBuild(at: 1, time: 0)
        var none = Set<UInt64>()
        left.finishBuild(scanned: &none, at: 1)
        claims = [left.claimBuild(at: 2, time: KnownKeys.rebuildInterval / 2)]
        claims.append(left.claimBuild(at: 2, time: KnownKeys.rebuildInterval))
        #expect(claims == [false, true], "left behind by another's write: again after a pause")
    }
}
