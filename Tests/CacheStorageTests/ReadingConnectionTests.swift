import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorage

/// A disk store's reading connections (``DiskStore/Configuration/readingConnections``): bodies
/// found through connections of their own, the one that writes consulted only for what they
/// cannot see yet.
@Suite("DiskStore: reading connections")
struct ReadingConnectionTests {
    let directory = StoreTestSupport.makeDirectory("readers")

    func openStore(readers: Int, writesBehind: Bool = true) throws -> DiskStore {
        var configuration = DiskStore.Configuration(directory: directory, log: { _ in })
        configuration.batchLatency = 600
        configuration.writesBehind = writesBehind
        configuration.readingConnections = readers
        return try DiskStore(configuration)
    }

    @Test("Bodies of an open batch are read through the writing connection; once committed, through a reader")
    func openBatchThenCommitted() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(readers: 2)
        store.beginBatchedWrites()
        let inline = try StoreTestSupport.write(store, key: 1, generation: 0, size: 5_000)
        let inFile = try StoreTestSupport.write(store, key: 2, generation: 0, size: 200_000)
        // The readers do not see the batch: while it is open the writing connection finds both.
        for entry in [inline, inFile] {
            #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
            #expect(store.withReader { try? DiskStore.location(of: entry.id, $0) } ?? nil == nil)
        }
        try store.endBatchedWrites()
        for entry in [inline, inFile] {
            #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
            // Found by a reader: its own query, never the writer's (which would give the same).
            #expect(store.withReader { try? DiskStore.location(of: entry.id, $0) }??.size == entry.bodySize)
        }
        #expect(store.readers.withLock { ($0.open, $0.idle.count) } == (1, 1))
    }

    @Test("A removed entry is gone for every later lookup, and its body once the removal commits")
    func removalWins() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(readers: 1)
        let entry = try StoreTestSupport.write(store, key: 3, generation: 0, size: 5_000)
        try store.endBatchedWrites()
        #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
        store.beginBatchedWrites()
        #expect(try store.remove(primaryKey: entry.head.primaryKey) == 1)
        // What decides a hit is the variants, read through the writing connection: none.
        #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
        try store.endBatchedWrites()
        #expect(throws: StorageError.self) { try store.openBody(of: entry.id) }
        // A newer version under the same key is what is read, never the old body.
        let newer = try StoreTestSupport.write(store, key: 3, generation: 1, size: 5_000)
        try store.endBatchedWrites()
        #expect(try store.variants(of: newer.head.primaryKey).map(\.id) == [newer.id])
        #expect(try store.body(of: newer.id) == StoreTestSupport.expectedBody(newer))
    }

    @Test("An entry replaced in an open batch is not opened, though the committed index still has it")
    func replacedInAnOpenBatch() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(readers: 2)
        let inline = try StoreTestSupport.write(store, key: 5, generation: 0, size: 5_000)
        let inFile = try StoreTestSupport.write(store, key: 6, generation: 0, size: 200_000)
        try store.endBatchedWrites()
        for entry in [inline, inFile] {
            #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
        }
        #expect(store.readers.withLock { $0.open } >= 1)
        // The replacements sit in an open batch.
        store.beginBatchedWrites()
        let newer = [
            try StoreTestSupport.write(store, key: 5, generation: 1, size: 5_000),
            try StoreTestSupport.write(store, key: 6, generation: 1, size: 200_000),
        ]
        // A reader still finds both old rows in the committed index ...
        for entry in [inline, inFile] {
            #expect(store.withReader { try? DiskStore.location(of: entry.id, $0) }??.size == entry.bodySize)
        }
        // ... but the store answers as its own writes have it.
        for entry in [inline, inFile] {
            #expect(throws: StorageError.self) { try store.openBody(of: entry.id) }
        }
        for entry in newer { #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry)) }
        try store.endBatchedWrites()
        for entry in [inline, inFile] {
            #expect(throws: StorageError.self) { try store.openBody(of: entry.id) }
        }
        for entry in newer { #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry)) }
    }

    /// Entries of 5,000 bytes for `keys`, written and committed by a store that is then released.
    func committedByAnotherStore(keys: ClosedRange<Int>) throws -> [StoredEntry] {
        let store = try openStore(readers: 1, writesBehind: false)
        let written = try keys.map { key throws(StorageError) in
            try StoreTestSupport.write(store, key: key, generation: 0, size: 5_000)
        }
        try store.endBatchedWrites()
        return written
    }

    /// Holds `store`'s index lock on another thread until `release` is signalled (or 20 s
    /// pass); returns once it holds it. `released` says, after `done`, which ended the hold.
    static func holdIndex(
        of store: DiskStore, until release: DispatchSemaphore
    ) -> (done: DispatchSemaphore, released: Locked<Bool>) {
        let held = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let released = Locked(false)
        Thread.detachNewThread {
            store.state.withLock { _ in
                held.signal()
                let signalled = release.wait(timeout: .now() + 20) == .success
                released.withLock { $0 = signalled }
            }
            done.signal()
        }
        held.wait()
        return (done, released)
    }

    @Test(
        "A key's variants are read through a reader while another thread holds the index (a writer checkpointing between batches); not while a batch is open"
    )
    func variantsWhileTheIndexIsHeld() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let written = try committedByAnotherStore(keys: 12...13)
        // A new process's store: nothing of the keys remembered, so a lookup reads the index.
        let store = try openStore(readers: 1, writesBehind: false)
        let release = DispatchSemaphore(value: 0)
        var hold = Self.holdIndex(of: store, until: release)
        // Answered while the lock is held: the hold ends only when this thread signals it.
        #expect(try store.variants(of: written[0].head.primaryKey).map(\.id) == [written[0].id])
        release.signal()
        hold.done.wait()
        #expect(hold.released.withLock { $0 }, "the lookup waited for the index's lock")

        // A replacement in an open batch: the committed rows still have the old version, so
        // the lookup waits for the writing connection, which sees the batch.
        store.beginBatchedWrites()
        let newer = try StoreTestSupport.write(store, key: 13, generation: 1, size: 5_000)
        // The key has left the head memo since (many others read after it).
        store.memo.withLock { $0.heads.removeValue(for: newer.head.primaryKey) }
        hold = Self.holdIndex(of: store, until: release)
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) { release.signal() }
        #expect(try store.variants(of: newer.head.primaryKey).map(\.id) == [newer.id])
        hold.done.wait()
        try store.endBatchedWrites()
        #expect(try store.variants(of: newer.head.primaryKey).map(\.id) == [newer.id])
    }

    @Test(
        "An open batch that has only added rows leaves committed bodies to the readers; one that removed a row does not"
    )
    func openBatchWithoutRemovals() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let committed = try committedByAnotherStore(keys: 7...8)
        // A new process's store: no reading connection open yet.
        let store = try openStore(readers: 1, writesBehind: false)
        store.beginBatchedWrites()
        let added = try StoreTestSupport.write(store, key: 9, generation: 0, size: 5_000)
        #expect(store.batchTransitions.value & 1 == 1)
        #expect(store.readers.withLock { $0.open } == 0)
        // Found by a reader, though the batch is open: it removed nothing.
        #expect(try store.body(of: committed[0].id) == StoreTestSupport.expectedBody(committed[0]))
        #expect(store.readers.withLock { ($0.open, $0.idle.count) } == (1, 1))
        // The entry the batch added is not in the committed index: the writing connection finds it.
        #expect(try store.body(of: added.id) == StoreTestSupport.expectedBody(added))
        // Once the batch has removed a row (replaced an entry), the writing connection answers,
        // though a reader still finds the row in the committed index.
        let newer = try StoreTestSupport.write(store, key: 8, generation: 1, size: 5_000)
        #expect(store.withReader { try? DiskStore.location(of: committed[1].id, $0) }??.size == committed[1].bodySize)
        #expect(throws: StorageError.self) { try store.openBody(of: committed[1].id) }
        #expect(try store.body(of: newer.id) == StoreTestSupport.expectedBody(newer))
        try store.endBatchedWrites()
        #expect(throws: StorageError.self) { try store.openBody(of: committed[1].id) }
        #expect(try store.body(of: committed[0].id) == StoreTestSupport.expectedBody(committed[0]))
    }

    @Test("Without reading connections none is opened")
    func noneByDefault() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(readers: 0, writesBehind: false)
        let entry = try StoreTestSupport.write(store, key: 4, generation: 0, size: 5_000)
        #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
        #expect(store.withReader { _ in true } == nil)
        #expect(store.readers.withLock { $0.open } == 0)
    }

    @Test("Threads reading bodies at once while another writes: every body right, at most the configured readers")
    func concurrentReaders() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(readers: 2)
        var written: [StoredEntry] = []
        for key in 0..<40 {
            let size = key % 2 == 0 ? 16_384 : 70_000
            written.append(try StoreTestSupport.write(store, key: key, generation: 0, size: size))
        }
        try store.endBatchedWrites()
        let entries = written
        let failures = Locked(0)
        let reads = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 5) { thread in
            if thread == 4 {
                // The writer: new keys, in batches that commit as they fill.
                for key in 100..<164 { _ = try? StoreTestSupport.write(store, key: key, generation: 0, size: 16_384) }
                try? store.endBatchedWrites()
                return
            }
            for round in 0..<200 {
                let entry = entries[(round * 7 + thread * 13) % entries.count]
                let body = try? store.body(of: entry.id)
                reads.withLock { $0 += 1 }
                if body != StoreTestSupport.expectedBody(entry) { failures.withLock { $0 += 1 } }
            }
        }
        #expect(reads.withLock { $0 } == 800)
        #expect(failures.withLock { $0 } == 0)
        let (open, idle) = store.readers.withLock { ($0.open, $0.idle.count) }
        #expect(open >= 1 && open <= 2)
        #expect(idle == open)
    }
}
