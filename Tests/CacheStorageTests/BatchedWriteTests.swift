import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorage

/// A disk store's batched writes (`beginBatchedWrites`), as a page save makes them: many entries
/// in one index transaction, seen by this store at once and by other processes when it commits.
@Suite("DiskStore: batched writes")
struct BatchedWriteTests {
    let directory = StoreTestSupport.makeDirectory("batch")

    /// A store on the test's directory whose batches stay open for `latency` seconds.
    func openStore(latency: Double = 600, writesBehind: Bool = false) throws -> DiskStore {
        try StoreTestSupport.openStore(directory, latency: latency, writesBehind: writesBehind)
    }

    @Test("A batch's entries are read by their store at once; by another store (its own connection) once it commits")
    func visibility() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let other = try openStore()
        store.beginBatchedWrites()
        let inline = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        let inFile = try StoreTestSupport.write(store, key: 2, generation: 0, size: 200_000)
        _ = try store.setPinned(true, primaryKey: inFile.head.primaryKey)
        for entry in [inline, inFile] {
            #expect(try store.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
            #expect(try other.variants(of: entry.head.primaryKey).isEmpty)
        }
        // Another store's sweep sees a body file its index does not name: the batch's lock keeps it.
        #expect(other.sweep() == 0)
        try store.endBatchedWrites()
        for entry in [inline, inFile] {
            let seen = try other.variants(of: entry.head.primaryKey)
            #expect(seen.map(\.id) == [entry.id])
            #expect(try other.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
        }
        #expect(try other.variants(of: inFile.head.primaryKey).first?.isPinned == true)
    }

    @Test("A batch commits by itself after 64 entries, and after its latency when no more come")
    func commitsByItself() async throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let other = try openStore()
        store.beginBatchedWrites()
        var written: [StoredEntry] = []
        for key in 0..<64 { written.append(try StoreTestSupport.write(store, key: key, generation: 0, size: 1_000)) }
        for entry in written { #expect(try other.variants(of: entry.head.primaryKey).count == 1) }
        try store.endBatchedWrites()

        let quick = try openStore(latency: 0.05)
        quick.beginBatchedWrites()
        let late = try StoreTestSupport.write(quick, key: 100, generation: 0, size: 1_000)
        let deadline = MonotonicClock.seconds() + 10
        while try other.variants(of: late.head.primaryKey).isEmpty, MonotonicClock.seconds() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try other.variants(of: late.head.primaryKey).map(\.id) == [late.id])
        try quick.endBatchedWrites()
    }

    @Test("A power-loss-safe store batches nothing: each commit is durable, and seen by others, when it returns")
    func powerLossSafeCommitsEachEntry() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        var configuration = DiskStore.Configuration(directory: directory, durability: .powerLossSafe, log: { _ in })
        configuration.batchLatency = 600
        let store = try DiskStore(configuration)
        let other = try openStore()
        store.beginBatchedWrites()
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        #expect(try other.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
        try store.endBatchedWrites()
    }

    @Test("Nested scopes: the batch commits when the last one ends")
    func nestedScopes() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let other = try openStore()
        store.beginBatchedWrites()
        store.beginBatchedWrites()
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        try store.endBatchedWrites()
        #expect(try other.variants(of: entry.head.primaryKey).isEmpty)
        try store.endBatchedWrites()
        #expect(try other.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
    }

    // MARK: Written behind (the caching proxy's store)

    @Test("Written behind: a commit joins a batch with no scope open; its store reads it at once, others after flush()")
    func writesBehindWithoutAScope() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(writesBehind: true)
        let other = try openStore()
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        #expect(try store.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
        #expect(try other.variants(of: entry.head.primaryKey).isEmpty)
        try store.flush()
        #expect(try other.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
        #expect(try other.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
    }

    @Test(
        "Written behind: a head a 304 freshened (RFC 9111 §4.3.4) joins the batch: its store reads it at once, others after flush()"
    )
    func updateJoinsTheBatch() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(writesBehind: true)
        let other = try openStore()
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        try store.flush()
        let freshened = HeaderFields([("Cache-Control", "max-age=600"), ("ETag", "\"v2\"")])
        try store.update(entry.id, fields: freshened, facts: [7])
        #expect(try store.variants(of: entry.head.primaryKey).first?.head.fields == freshened)
        #expect(try other.variants(of: entry.head.primaryKey).first?.head.fields == entry.head.fields)
        try store.flush()
        #expect(try other.variants(of: entry.head.primaryKey).first?.head.fields == freshened)
        // Written behind, an update of an identity not stored is dropped when it is written:
        // it stores nothing.
        let unknown = EntryID()
        try store.update(unknown, fields: freshened, facts: [])
        try store.flush()
        #expect(try store.entry(unknown) == nil)
        #expect(store.totals().entries == 1)
    }

    @Test("Written behind: the 64th write of a batch queues its commit, long before its latency: others read them")
    func writesBehindCommitAtTheLimit() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(latency: 600, writesBehind: true)
        let other = try openStore()
        let entries = try (0..<DiskStore.batchLimit).map {
            try StoreTestSupport.write(store, key: $0, generation: 0, size: 100)
        }
        let deadline = MonotonicClock.seconds() + 10
        while try other.variants(of: entries[entries.count - 1].head.primaryKey).isEmpty
            && MonotonicClock.seconds() < deadline
        {
            usleep(1_000)
        }
        for entry in entries { #expect(try other.variants(of: entry.head.primaryKey).map(\.id) == [entry.id]) }
    }

    @Test("Written behind: a commit after a checkpoint reuses the WAL file, never cutting it back inside the commit")
    func writesBehindKeepsTheWAL() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(writesBehind: true)
        for key in 0..<20 { _ = try StoreTestSupport.write(store, key: key, generation: 0, size: 20_000) }
        try store.flush()
        try store.withAccessWriter { connection throws(StorageError) in
            try connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
        }
        func walBytes() -> Int64 {
            var status = stat()
            return lstat(directory + "/index.sqlite-wal", &status) == 0 ? Int64(status.st_size) : -1
        }
        let checkpointed = walBytes()
        #expect(checkpointed > 300_000)
        // Starts the WAL over (everything was copied): with no limit to keep, the commit would cut it to what it wrote.
        _ = try StoreTestSupport.write(store, key: 100, generation: 0, size: 100)
        try store.flush()
        #expect(walBytes() == checkpointed)
    }

    @Test(
        "Written behind: access times join the batch on the store's own connection, never SQLite's write lock on another; others read them after flush()"
    )
    func writesBehindRecordsAccessInTheBatch() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(writesBehind: true)
        let entries = try (0..<(DiskStore.accessChunkRows + 10)).map {
            try StoreTestSupport.write(store, key: $0, generation: 0, size: 100)
        }
        for entry in entries { store.recordAccess(entry.id, at: 4_000_000_000) }
        store.recordAccess(entries[0].id, at: 4_000_000_001)
        try store.flush()
        #expect(store.accessWriter.withLock { $0 == nil }, "a second connection was opened to write access times")
        let other = try openStore()
        let read = try other.entries()
        #expect(read.count == entries.count)
        #expect(read.allSatisfy { $0.lastAccess >= 4_000_000_000 })
        #expect(read.first { $0.id == entries[0].id }?.hits == 2)
    }

    @Test("The savepoint journals of a batch's commits stay in memory (temp_store MEMORY), never a temporary file")
    func batchJournalsInMemory() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(writesBehind: true)
        let tempStore = try store.state.withLock { state throws(StorageError) -> Int64 in
            let pragma = try state.connection.statement("PRAGMA temp_store")
            let column = try pragma.column("temp_store")
            defer { pragma.reset() }
            return try pragma.step() ? pragma.int(column) : -1
        }
        #expect(tempStore == 2)
    }

    @Test("Written behind: a removal racing the queued commit in the same store is never undone by it")
    func removalInTheSameStoreWins() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(writesBehind: true)
        let kept = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        let removed = try StoreTestSupport.write(store, key: 2, generation: 0, size: 200_000)
        #expect(try store.remove(primaryKey: removed.head.primaryKey) == 1)
        // A write queued after the removal is queued again, then the batch commits.
        let later = try StoreTestSupport.write(store, key: 3, generation: 0, size: 100)
        try store.flush()
        let reopened = try openStore()
        #expect(try reopened.variants(of: removed.head.primaryKey).isEmpty)
        #expect(try reopened.variants(of: kept.head.primaryKey).map(\.id) == [kept.id])
        #expect(try reopened.variants(of: later.head.primaryKey).map(\.id) == [later.id])
        #expect(StoreCheck.files(in: directory + "/bodies").contains(removed.id.rawValue) == false)
    }

    @Test("Written behind: another store's removal waits for the queued commit, then wins: the entry never comes back")
    func removalByAnotherStoreWins() async throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(latency: 0.2, writesBehind: true)
        let other = try openStore()
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        #expect(try other.variants(of: entry.head.primaryKey).isEmpty)
        // Blocks on the index's write lock, which the open batch holds, until the batch commits.
        #expect(try other.remove(primaryKey: entry.head.primaryKey) == 1)
        #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
        try store.flush()
        #expect(try openStore().variants(of: entry.head.primaryKey).isEmpty)
    }

    @Test("A sweep while a batch is open keeps the body file the batch replaced: the committed index names it")
    func sweepKeepsWhatTheOpenBatchReplaced() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(writesBehind: true)
        let other = try openStore()
        let old = try StoreTestSupport.write(store, key: 1, generation: 0, size: 200_000)
        try store.flush()
        let new = try StoreTestSupport.write(store, key: 1, generation: 1, size: 200_000)
        #expect(try store.variants(of: old.head.primaryKey).map(\.id) == [new.id])
        #expect(store.sweep() == 0)
        // What another process reads (and what a crash now would leave) is still whole.
        #expect(try other.variants(of: old.head.primaryKey).map(\.id) == [old.id])
        #expect(try other.body(of: old.id) == StoreTestSupport.expectedBody(old))
        try store.flush()
        #expect(try other.variants(of: old.head.primaryKey).map(\.id) == [new.id])
        #expect(StoreCheck.files(in: directory + "/bodies").contains(old.id.rawValue) == false)
    }

    @Test(
        "Writing thousands of entries in one scope, the WAL starts over after its checkpoints: it stays near the checkpoint threshold instead of growing by every byte stored"
    )
    func walStartsOverInScope() async throws {
        // It blocks (thousands of writes): off the cooperative pool.
        try await offPool {
            defer { StoreTestSupport.removeDirectory(directory) }
            let store = try openStore(latency: 600)
            store.beginBatchedWrites()
            // Batches of 64 inside the scope, each opened by the write after the one before commits.
            let (largest, last) = try StoreTestSupport.largestWAL(writing: 5_000, into: store, directory: directory)
            try store.endBatchedWrites()
            #expect(largest < 32 << 20, "the WAL reached \(largest) bytes")
            #expect(try openStore().variants(of: last.head.primaryKey).map(\.id) == [last.id])
        }
    }
}
