import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A loop's lookups of a disk store that would wait for its index's lock, made off the loop
/// (``TieredStore/makeLookupChannel()``, ``IndexLookups``).
@Suite("TieredStore: index lookups off the loop")
struct IndexLookupsTests {
    let directory = StoreTestSupport.makeDirectory("index-lookups")

    /// Entries of 5,000 bytes for `keys`, committed by a store then released, and a tiered
    /// store over the same directory that remembers none of them (a new process's), whose disk
    /// has `readers` reading connections (with none, a lookup it must read the index for waits
    /// for the index's lock).
    func storedBefore(keys: ClosedRange<Int>, readers: Int = 0) throws -> (TieredStore, [StoredEntry]) {
        var configuration = DiskStore.Configuration(directory: directory, log: { _ in })
        configuration.readingConnections = readers
        configuration.batchLatency = 600
        let writer = try DiskStore(configuration)
        let written = try keys.map { key throws(StorageError) in
            try StoreTestSupport.write(writer, key: key, generation: 0, size: 5_000)
        }
        let store = TieredStore(memory: MemoryStore(capacity: 1 << 20), disk: try DiskStore(configuration))
        return (store, written)
    }

    /// Calls the channel's `descriptorReady()` each time its descriptor is readable until
    /// `answered()`; `false` when that did not come within `seconds`.
    func pump(_ channel: any LookupChannel, seconds: Double = 20, until answered: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while !answered() {
            guard Date() < end else { return false }
            var readable = pollfd(fd: channel.descriptor, events: Int16(POLLIN), revents: 0)
            if poll(&readable, 1, 100) > 0 { channel.descriptorReady() }
        }
        return true
    }

    @Test("A key the head memo lacks is read at once while the index is free: remembered, nothing queued")
    func freeIndexIsReadAtOnce() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let (store, written) = try storedBefore(keys: 1...2)
        let key = written[0].head.primaryKey
        let channel = try #require(store.makeLookupChannel())
        #expect(store.disk.readsIndex(for: key))
        #expect(!channel.lookUp(key) {})
        #expect(!store.disk.readsIndex(for: key))
        #expect(store.disk.readsIndex(for: written[1].head.primaryKey), "only the key looked up is read")
        channel.close()
    }

    @Test(
        "While another thread holds the index and no reading connection can answer, the lookup is queued: read off the caller's thread once the index is free, remembered, its body promoted to memory"
    )
    func heldIndexIsReadOffTheCallersThread() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let (store, written) = try storedBefore(keys: 3...4)
        let entry = written[0]
        let channel = try #require(store.makeLookupChannel())
        var release = DispatchSemaphore(value: 0)
        var hold = ReadingConnectionTests.holdIndex(of: store.disk, until: release)
        var answered = 0
        // No reading connection: any lookup may wait for the index.
        #expect(channel.mayQueue(entry.head.primaryKey))
        #expect(channel.lookUp(entry.head.primaryKey) { answered += 1 })
        // Not answered while the index is held: the read waits for it, off this thread.
        #expect(!pump(channel, seconds: 0.3) { answered == 1 })
        release.signal()
        hold.done.wait()
        #expect(hold.released.withLock { $0 })
        #expect(pump(channel) { answered == 1 })
        // Remembered: answered while the index is held again (without the memo the lookup
        // would wait until the hold ends by its timeout), its body from memory.
        release = DispatchSemaphore(value: 0)
        hold = ReadingConnectionTests.holdIndex(of: store.disk, until: release)
        #expect(!channel.lookUp(entry.head.primaryKey) { answered += 1 })
        #expect(try store.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
        #expect(store.memory.heldBody(of: entry.id) == StoreTestSupport.expectedBody(entry))
        release.signal()
        hold.done.wait()
        #expect(hold.released.withLock { $0 }, "the lookup waited for the index's lock")
        #expect(answered == 1)
        // The other key was not read: still not remembered, nor in memory.
        #expect(store.disk.readsIndex(for: written[1].head.primaryKey))
        #expect(store.memory.heldBody(of: written[1].id) == nil)
        channel.close()
    }

    @Test(
        "With reading connections a lookup waits only inside an open batch: between batches it is left to the loop's own lookup, which a reading connection answers (and the channel says at once it will not queue it); inside one it is queued"
    )
    func readersLeaveOnlyOpenBatchesQueued() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let (store, written) = try storedBefore(keys: 5...6, readers: 1)
        let channel = try #require(store.makeLookupChannel())
        var release = DispatchSemaphore(value: 0)
        var hold = ReadingConnectionTests.holdIndex(of: store.disk, until: release)
        #expect(!channel.mayQueue(written[0].head.primaryKey))
        #expect(!channel.lookUp(written[0].head.primaryKey) {})
        #expect(try store.variants(of: written[0].head.primaryKey).map(\.id) == [written[0].id])
        release.signal()
        hold.done.wait()
        #expect(hold.released.withLock { $0 }, "the lookup waited for the index's lock")
        // A batch open (a write in it): a reading connection cannot see its rows.
        store.disk.beginBatchedWrites()
        _ = try StoreTestSupport.write(store.disk, key: 7, generation: 0, size: 5_000)
        release = DispatchSemaphore(value: 0)
        hold = ReadingConnectionTests.holdIndex(of: store.disk, until: release)
        var answered = false
        #expect(channel.mayQueue(written[1].head.primaryKey))
        #expect(channel.lookUp(written[1].head.primaryKey) { answered = true })
        release.signal()
        hold.done.wait()
        #expect(pump(channel) { answered })
        #expect(!store.disk.readsIndex(for: written[1].head.primaryKey))
        try store.disk.endBatchedWrites()
        #expect(!channel.mayQueue(written[1].head.primaryKey))
        channel.close()
    }

    @Test(
        "While the writer holds the index between batches, a lookup off the loop reads through a reading connection and remembers what it read"
    )
    func readBesideIsRemembered() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let (store, written) = try storedBefore(keys: 8...8, readers: 1)
        let key = written[0].head.primaryKey
        let release = DispatchSemaphore(value: 0)
        let hold = ReadingConnectionTests.holdIndex(of: store.disk, until: release)
        #expect(try store.disk.rememberVariants(of: key).map(\.id) == [written[0].id])
        #expect(!store.disk.readsIndex(for: key))
        release.signal()
        hold.done.wait()
        #expect(hold.released.withLock { $0 }, "the lookup waited for the index's lock")
    }

    @Test("Closing the channel lets the lookups still waiting go on at once, and says which descriptor closes")
    func closeAnswersTheWaiting() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let (store, written) = try storedBefore(keys: 4...4)
        let channel = try #require(store.makeLookupChannel())
        let descriptor = channel.descriptor
        var closing: Int32?
        channel.willClose = { closing = $0 }
        let release = DispatchSemaphore(value: 0)
        let hold = ReadingConnectionTests.holdIndex(of: store.disk, until: release)
        var answered = 0
        #expect(channel.lookUp(written[0].head.primaryKey) { answered += 1 })
        channel.close()
        #expect(answered == 1)
        #expect(closing == descriptor && channel.descriptor == -1)
        #expect(!channel.mayQueue(written[0].head.primaryKey))
        #expect(!channel.lookUp(written[0].head.primaryKey) { answered += 1 })
        release.signal()
        hold.done.wait()
        #expect(answered == 1)
    }
}
