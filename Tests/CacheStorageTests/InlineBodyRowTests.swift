import CacheSemantics
import CacheSystem
import CacheTestSupport
import Testing

@testable import CacheStorage

@Suite("DiskStore: an inline body's row keeps its checksums")
struct InlineBodyRowTests {
    static func configuration(_ directory: TemporaryDirectory) -> DiskStore.Configuration {
        var configuration = DiskStore.Configuration(directory: directory.path, log: { _ in })
        configuration.sweepsWhenOpened = false
        return configuration
    }

    /// `body` stored under `url` by a store on `directory`, released before this returns.
    static func stored(_ directory: TemporaryDirectory, _ url: String, _ body: [UInt8]) throws -> StoredEntry {
        let store = try DiskStore(configuration(directory))
        return try put(store, head(url), body)
    }

    /// Runs `sql` on the index of `directory` with a connection of its own, as another program would.
    static func edit(_ directory: TemporaryDirectory, _ sql: String) throws {
        try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false).execute(sql)
    }

    /// The `checksums` of `id`'s inline row (`nil` when it has none).
    static func rowChecksums(_ directory: TemporaryDirectory, _ id: EntryID) throws -> [UInt8]? {
        let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
        let query = try connection.statement("SELECT checksums FROM inline_bodies WHERE id = :id")
        let column = try query.column("checksums")
        try query.bind(id.rawValue, to: ":id")
        defer { query.reset() }
        return try query.step() ? query.blob(column) : nil
    }

    @Test("a new inline body's row has its entry's checksums, and the body is found from that row alone")
    func newRowsKeepChecksums() throws {
        let directory = TemporaryDirectory()
        let body = [UInt8](repeating: 9, count: 5_000)
        let entry = try Self.stored(directory, "https://example.com/a", body)
        #expect(try Self.rowChecksums(directory, entry.id) == BlockChecksums.of(body))
        // The entry's own copy no longer takes part: damaged, the body still reads right.
        try Self.edit(directory, "UPDATE entries SET checksums = X'00' WHERE id = '\(entry.id.rawValue)'")
        let reopened = try DiskStore(Self.configuration(directory))
        #expect(try reopened.body(of: entry.id) == body)
    }

    @Test(
        "an inline body committed behind is read from its queued commit, then checksummed where its row is written: a flipped byte is caught"
    )
    func committedBehindIsChecksummedWhereWritten() throws {
        let directory = TemporaryDirectory()
        let body = (0..<9_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let id: EntryID
        do {
            var configuration = Self.configuration(directory)
            configuration.writesBehind = true
            configuration.batchLatency = 600
            let store = try DiskStore(configuration)
            let url = "https://example.com/behind"
            // Looked up first, as a miss is: a commit is queued only for a key known as the index holds it.
            #expect(try store.variants(of: url).isEmpty)
            id = try put(store, head(url), body).id
            #expect(store.memo.withLock { $0.pendingCommits.count } == 1, "the commit is queued")
            #expect(try Self.rowChecksums(directory, id) == nil)
            #expect(try store.body(of: id) == body)
        }  // Released: the open batch is written.
        #expect(try Self.rowChecksums(directory, id) == BlockChecksums.of(body))
        try Self.edit(
            directory,
            "UPDATE inline_bodies SET body = CAST(substr(body, 1, 100) || X'05' || substr(body, 102) AS BLOB) "
                + "WHERE id = '\(id.rawValue)'")
        let error = #expect(throws: StorageError.self) { try DiskStore(Self.configuration(directory)).body(of: id) }
        #expect(error?.kind == .corrupted)
    }

    @Test(
        "the writer checksums inline bodies committed behind before it takes the index's lock, and their rows keep those checksums"
    )
    func writerChecksumsBeforeTheIndexLock() async throws {
        // It holds the index's lock while the writer runs on another thread: off the cooperative pool.
        try await offPool {
            let directory = TemporaryDirectory()
            var bodies: [EntryID: [UInt8]] = [:]
            do {
                var configuration = Self.configuration(directory)
                configuration.writesBehind = true
                configuration.batchLatency = 600
                let store = try DiskStore(configuration)
                for n in 0..<3 {
                    let url = "https://example.com/summed/\(n)"
                    // Looked up first, as a miss is: a commit is queued only for a key known as the index holds it.
                    #expect(try store.variants(of: url).isEmpty)
                    let body = (0..<9_000).map { UInt8(truncatingIfNeeded: $0 &* (n + 3)) }
                    bodies[try put(store, head(url), body).id] = body
                }
                let carried = {
                    store.memo.withLock { memo in
                        memo.pendingCommits.compactMapValues { commit -> [UInt8]? in
                            guard case .inline(_, let checksums) = commit.body else { return nil }
                            return checksums
                        }
                    }
                }
                #expect(carried().isEmpty, "queued with their bytes alone")
                // The writer's commit of the open batch, started while the index's lock is held here.
                let summedWhileHeld = store.state.withLock { state -> [EntryID: [UInt8]] in
                    guard let batch = state.batching.open else { return [:] }
                    store.commitInBackground(batch, after: 0)
                    _ = StoreTestSupport.eventually(within: 20) { carried().count == bodies.count }
                    return carried()
                }
                #expect(summedWhileHeld == bodies.mapValues(BlockChecksums.of))
                #expect(
                    StoreTestSupport.eventually(within: 20) { store.memo.withLock { $0.pendingCommits.isEmpty } },
                    "then written")
            }
            for (id, body) in bodies {
                #expect(try Self.rowChecksums(directory, id) == BlockChecksums.of(body))
            }
        }
    }

    @Test("a flipped byte in an inline body read from its row alone is caught: the entry is removed, a miss")
    func flippedByteCaught() throws {
        let directory = TemporaryDirectory()
        let body = [UInt8](repeating: 4, count: 5_000)
        let entry = try Self.stored(directory, "https://example.com/flip", body)
        try Self.edit(
            directory,
            "UPDATE inline_bodies SET body = CAST(substr(body, 1, 100) || X'05' || substr(body, 102) AS BLOB) "
                + "WHERE id = '\(entry.id.rawValue)'")
        let store = try DiskStore(Self.configuration(directory))
        let error = #expect(throws: StorageError.self) { try store.body(of: entry.id) }
        #expect(error?.kind == .corrupted)
        #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
    }

    @Test(
        "an index made before rows kept checksums gains the column on opening; its old rows read through their entries")
    func olderIndexGainsTheColumn() throws {
        let directory = TemporaryDirectory()
        let old = [UInt8](repeating: 1, count: 3_000)
        let entry = try Self.stored(directory, "https://example.com/old", old)
        try Self.edit(directory, "ALTER TABLE inline_bodies DROP COLUMN checksums")
        let store = try DiskStore(Self.configuration(directory))
        #expect(store.inlineChecksums)
        #expect(try Self.rowChecksums(directory, entry.id) == nil)
        #expect(try store.body(of: entry.id) == old)
        let new = [UInt8](repeating: 2, count: 3_000)
        let added = try put(store, head("https://example.com/new"), new)
        #expect(try store.body(of: added.id) == new)
        #expect(try Self.rowChecksums(directory, added.id) == BlockChecksums.of(new))
    }
}
