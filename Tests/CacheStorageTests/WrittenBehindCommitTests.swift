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

/// Commits written behind, as a caching proxy's store writes a miss (issue 30): queued in the
/// open batch and returned at once, found by their store's every read from then on, written to
/// the index when the batch commits (or before any other write), and never bringing back an
/// entry a removal took after the commit returned.
@Suite("DiskStore: commits written behind")
struct WrittenBehindCommitTests {
    let directory = StoreTestSupport.makeDirectory("commit-behind")

    /// A store written behind whose batches stay open `latency` seconds.
    func openStore(
        latency: Double = 600, readers: Int = 0, headBytes: Int? = nil, queuedLimit: Int? = nil,
        queuedBytes: Int? = nil, log: StoreTestSupport.Log? = nil
    ) throws -> DiskStore {
        var configuration = DiskStore.Configuration(directory: directory, log: { _ in })
        if let log { configuration.log = log.sink }
        if let queuedLimit { configuration.queuedCommitLimit = queuedLimit }
        if let queuedBytes { configuration.queuedBodyByteLimit = queuedBytes }
        configuration.batchLatency = latency
        configuration.writesBehind = true
        configuration.readingConnections = readers
        if let headBytes { configuration.headMemoryBytes = headBytes }
        return try DiskStore(configuration)
    }

    func pending(_ store: DiskStore) -> Int { store.memo.withLock { $0.pendingCommits.count } }

    func bodyFiles() -> [String] { StoreCheck.files(in: directory + "/bodies") }

    /// Polls `condition` for up to 20 s (the machine is shared and busy).
    func eventually(_ condition: () throws -> Bool) rethrows -> Bool {
        try StoreTestSupport.eventually(within: 20, condition)
    }

    // MARK: - A commit never waits for a batch's commit

    @Test(
        "A commit made while a batch commits is queued for the next batch, opened in the same hold of the index's lock: it waits for no lock; with none made, no batch is left open"
    )
    func queuedWhileCommitting() async throws {
        // It blocks (a lock held on another thread, a wait for it): off the cooperative pool.
        try await offPool {
            defer { StoreTestSupport.removeDirectory(directory) }
            let store = try openStore()
            let other = try openStore()
            let first = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
            // The next key looked up first, as a miss is.
            #expect(try store.variants(of: StressBodies.primaryKey(key: 2)).isEmpty)
            let meanwhile = Locked<StoredEntry?>(nil)
            let waited = Locked(false)
            // What the background commit does, holding the index's lock throughout.
            store.unlinkBodies(
                store.state.withLock { state -> [String] in
                    let files = (try? store.commitBatch(&state, queueingNext: true)) ?? []
                    let done = DispatchSemaphore(value: 0)
                    Thread.detachNewThread {
                        let entry = try? StoreTestSupport.write(store, key: 2, generation: 0, size: 100)
                        meanwhile.withLock { $0 = entry }
                        done.signal()
                    }
                    waited.withLock { $0 = done.wait(timeout: .now() + 5) == .timedOut }
                    return files + store.openBatchForQueued(&state)
                })
            #expect(!waited.withLock { $0 }, "the commit waited for the lock the batch's commit holds")
            let second = try #require(meanwhile.withLock { $0 })
            #expect(pending(store) == 1)
            let open = store.state.withLock { $0.batching.open }
            #expect(open != nil, "the next batch is open for it")
            #expect(try other.variants(of: first.head.primaryKey).map(\.id) == [first.id])
            #expect(try other.variants(of: second.head.primaryKey).isEmpty)
            #expect(try store.variants(of: second.head.primaryKey).map(\.id) == [second.id])
            try store.flush()
            #expect(try other.variants(of: second.head.primaryKey).map(\.id) == [second.id])
            // Nothing queued while it commits: no batch is left open.
            let third = try StoreTestSupport.write(store, key: 3, generation: 0, size: 100)
            let left = store.state.withLock { state -> (Int?, [String]) in
                let files = (try? store.commitBatch(&state, queueingNext: true)) ?? []
                return (state.batching.open, files + store.openBatchForQueued(&state))
            }
            store.unlinkBodies(left.1)
            let queuedFor = store.memo.withLock { $0.openBatch }
            #expect(left.0 == nil && queuedFor == nil)
            #expect(try other.variants(of: third.head.primaryKey).map(\.id) == [third.id])
        }
    }

    @Test(
        "A batch whose COMMIT fails (the index cannot grow: a file size limit) stores none of its entries and serves none; a commit made meanwhile is stored once the index can grow"
    )
    func commitFails() async {
        // An exit test: the file size limit (RLIMIT_FSIZE) is set in a child process, so it
        // cannot reach the tests that run in parallel in this one. Its issues are reported here.
        await #expect(processExitsWith: .success) {
            func check(_ condition: Bool, _ message: Comment) {
                if !condition {
                    Issue.record(message)
                    exit(1)
                }
            }
            let directory = StoreTestSupport.makeDirectory("commit-fails")
            defer { StoreTestSupport.removeDirectory(directory) }
            do {
                let store = try StoreTestSupport.openStore(directory, writesBehind: true)
                let other = try StoreTestSupport.openStore(directory)
                let kept = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
                try store.flush()
                // Queued in the open batch: rows the index has no room for yet (160 KB of
                // inline bodies, where its files hold a few pages).
                var lost: [StoredEntry] = []
                for key in 2...9 {
                    lost.append(try StoreTestSupport.write(store, key: key, generation: 0, size: 20_000))
                }
                check(store.memo.withLock { $0.pendingCommits.count } == 8, "8 commits queued")
                // No file may grow: SIGXFSZ ignored, so that write() fails with EFBIG.
                signal(SIGXFSZ, SIG_IGN)
                var saved = rlimit()
                check(getrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved) == 0, "getrlimit")
                var limited = saved
                limited.rlim_cur = rlim_t(
                    ["", "-wal", "-shm"].map { StoreTestSupport.fileSize(directory + "/index.sqlite" + $0) }.max()!)
                check(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limited) == 0, "setrlimit")
                // What the background writer does, holding the index's lock throughout, with a
                // commit made on another thread meanwhile. What this store remembers of its keys
                // is not trusted after the failure (the batch was rolled back), so that commit
                // reads the index: it waits for the lock, and is made once it is let go.
                let meanwhile = Locked<StoredEntry?>(nil)
                let done = DispatchSemaphore(value: 0)
                var failure: StorageError?
                store.unlinkBodies(
                    store.state.withLock { state -> [String] in
                        var files: [String] = []
                        do throws(StorageError) {
                            files = try store.commitBatch(&state, queueingNext: true)
                        } catch {
                            failure = error
                        }
                        Thread.detachNewThread {
                            let entry = try? StoreTestSupport.write(store, key: 10, generation: 0, size: 100)
                            meanwhile.withLock { $0 = entry }
                            done.signal()
                        }
                        _ = done.wait(timeout: .now() + 0.2)
                        return files + store.openBatchForQueued(&state)
                    })
                check(
                    failure?.message.contains("could not store 8 entries") == true,
                    "the batch's COMMIT did not fail as expected: \(String(describing: failure))")
                check(done.wait(timeout: .now() + 20) == .success, "the commit made meanwhile never returned")
                guard let queued = meanwhile.withLock({ $0 }) else {
                    return check(false, "the commit made meanwhile failed")
                }
                // The failed batch's entries: rolled back, and neither store serves them.
                for entry in lost {
                    check(try store.variants(of: entry.head.primaryKey).isEmpty, "\(entry.head.url) still served")
                    check(try other.variants(of: entry.head.primaryKey).isEmpty, "\(entry.head.url) in the index")
                }
                check(try store.variants(of: queued.head.primaryKey).map(\.id) == [queued.id], "meanwhile: not found")
                // The index can grow again: the commit made meanwhile is stored, and new ones.
                check(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved) == 0, "restoring the limit")
                try store.flush()
                check(try other.variants(of: queued.head.primaryKey).map(\.id) == [queued.id], "meanwhile: not stored")
                check(try other.body(of: queued.id) == StoreTestSupport.expectedBody(queued), "meanwhile: its body")
                check(try other.body(of: kept.id) == StoreTestSupport.expectedBody(kept), "the entry before: its body")
                let again = try StoreTestSupport.write(store, key: 2, generation: 1, size: 20_000)
                try store.flush()
                check(try other.body(of: again.id) == StoreTestSupport.expectedBody(again), "written again: its body")
            } catch {
                check(false, "unexpected error \(error)")
            }
        }
    }

    // MARK: - Reads find a queued entry at once

    @Test(
        "A queued entry is found at once (variants, entry, openBody inline and in a file, with and without reading connections); another store only once its batch commits",
        arguments: [0, 2])
    func foundAtOnce(readers: Int) throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(latency: 1, readers: readers)
        let other = try openStore()
        let inline = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        let inFile = try StoreTestSupport.write(store, key: 2, generation: 0, size: 100_000)
        // Both queued, in no index yet: the memo of the entries' keys is forgotten too.
        #expect(pending(store) == 2)
        store.memo.withLock { memo in
            for key in [inline, inFile].map(\.head.primaryKey) { memo.heads.removeValue(for: key) }
        }
        for entry in [inline, inFile] {
            #expect(try store.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
            #expect(try store.entry(entry.id)?.head == entry.head)
            #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
            #expect(try other.variants(of: entry.head.primaryKey).isEmpty)
        }
        #expect(store.totals().entries == 2)
        // Written by the batch's commit, unasked, within its latency.
        #expect(try eventually { try other.variants(of: inFile.head.primaryKey).map(\.id) == [inFile.id] })
        #expect(pending(store) == 0)
        for entry in [inline, inFile] {
            #expect(try other.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
            #expect(try other.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
            #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
        }
    }

    @Test("The 64th queued commit has the batch written and committed at once, long before its latency")
    func committedAtTheLimit() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let other = try openStore()
        let entries = try (0..<DiskStore.batchLimit).map {
            try StoreTestSupport.write(store, key: $0, generation: 0, size: 100)
        }
        #expect(eventually { pending(store) == 0 && other.totals().entries == DiskStore.batchLimit })
        #expect(try other.variants(of: entries[63].head.primaryKey).map(\.id) == [entries[63].id])
    }

    @Test(
        "A commit that finds the queue full writes some of it before it is queued when the index is free: queued commits stay bounded"
    )
    func queueBounded() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(queuedLimit: 3)
        let other = try openStore()
        var entries = try (0..<3).map { try StoreTestSupport.write(store, key: $0, generation: 0, size: 100) }
        #expect(pending(store) == 3)
        entries.append(try StoreTestSupport.write(store, key: 3, generation: 0, size: 100_000))
        #expect(pending(store) == 1)
        entries.append(try StoreTestSupport.write(store, key: 4, generation: 0, size: 100))
        #expect(pending(store) == 2)
        for entry in entries {
            #expect(try store.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
            #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
        }
        // Written into the open batch, not committed: another process sees them with the batch.
        #expect(other.totals().entries == 0)
        try store.endBatchedWrites()
        #expect(other.totals().entries == 5)
    }

    @Test(
        "The queue is full at its bytes of bodies kept in the index too, whatever their number: the commit that finds them writes some of it first"
    )
    func queueBoundedByBytes() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(queuedBytes: 250)
        let other = try openStore()
        var entries = try (0..<3).map { try StoreTestSupport.write(store, key: $0, generation: 0, size: 100) }
        #expect(pending(store) == 3)
        // 300 bytes queued, over 250: this commit writes the three into the open batch first.
        entries.append(try StoreTestSupport.write(store, key: 3, generation: 0, size: 100))
        #expect(pending(store) == 1)
        // A body kept in its own file holds no bytes in the queue.
        entries.append(try StoreTestSupport.write(store, key: 4, generation: 0, size: 100_000))
        entries.append(try StoreTestSupport.write(store, key: 5, generation: 0, size: 100))
        #expect(pending(store) == 3)
        #expect(store.memo.withLock { $0.pendingInlineBytes } == 200)
        for entry in entries {
            #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
        }
        try store.endBatchedWrites()
        #expect(store.memo.withLock { $0.pendingInlineBytes } == 0)
        #expect(other.totals().entries == 6)
    }

    @Test(
        "Queued commits are written in the order they were queued, a chunk at a time too: of a key's two commits in one chunk, the newer is the one stored"
    )
    func chunkWrittenInOrder() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let chunk = DiskStore.pendingCommitChunk
        let store = try openStore(queuedLimit: chunk + 2)
        let other = try openStore()
        let older = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        let newer = try StoreTestSupport.write(store, key: 1, generation: 1, size: 100)
        for key in 2...chunk + 1 { _ = try StoreTestSupport.write(store, key: key, generation: 0, size: 100) }
        #expect(pending(store) == chunk + 2)
        // The queue is full: this commit writes the oldest chunk (both of key 1's) and is queued.
        _ = try StoreTestSupport.write(store, key: chunk + 2, generation: 0, size: 100)
        #expect(pending(store) == 3)
        try store.endBatchedWrites()
        #expect(other.totals().entries == chunk + 2)
        #expect(try other.variants(of: newer.head.primaryKey).map(\.id) == [newer.id])
        #expect(try other.body(of: newer.id) == StoreTestSupport.expectedBody(newer))
        #expect(try other.entry(older.id) == nil)
    }

    @Test(
        "RFC 9111 §2 (storing is optional): a commit that finds the queue full while the index is busy never waits: queued up to four times the bound, refused past it leaving no body file"
    )
    func queueFullWhileBusy() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(queuedLimit: 3)
        let other = try openStore()
        var entries = try (0..<3).map { try StoreTestSupport.write(store, key: $0, generation: 0, size: 100) }
        #expect(pending(store) == 3)
        // Each key looked up first, as a miss is: its commit need not read the index.
        for key in 3...12 { #expect(try store.variants(of: StressBodies.primaryKey(key: key)).isEmpty) }
        // The index's lock held by another thread, as the background writer holds it through a
        // batch's commit on a stalled disk, until the commits below have returned (or, were one
        // to wait for the lock, 5 s: it then gets the lock and writes, which fails the test).
        let held = DispatchSemaphore(value: 0)
        let returned = DispatchSemaphore(value: 0)
        let released = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            store.state.withLock { _ in
                held.signal()
                _ = returned.wait(timeout: .now() + 5)
            }
            released.signal()
        }
        held.wait()
        var refused: StorageError?
        do throws(StorageError) {
            for key in 3..<12 {
                entries.append(try StoreTestSupport.write(store, key: key, generation: 0, size: 100_000))
            }
            _ = try StoreTestSupport.write(store, key: 12, generation: 0, size: 100_000)
        } catch {
            refused = error
        }
        let queued = pending(store)
        returned.signal()
        released.wait()
        #expect(queued == 12)
        #expect(refused?.kind == .busy)
        #expect(refused?.message.contains("not stored") == true, "\(String(describing: refused))")
        #expect(try store.variants(of: StressBodies.primaryKey(key: 12)).isEmpty)
        #expect(bodyFiles().count == 9, "the refused body's file is removed: \(bodyFiles())")
        // With the index free, the next commit writes some of the queued ones (8 at most: a
        // bounded piece of work) and is queued.
        entries.append(try StoreTestSupport.write(store, key: 13, generation: 0, size: 100_000))
        #expect(pending(store) == 12 - DiskStore.pendingCommitChunk + 1)
        try store.endBatchedWrites()
        #expect(other.totals().entries == 13)
        for entry in entries {
            #expect(try other.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
            #expect(try other.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
        }
        #expect(bodyFiles().count == 10)
    }

    @Test("The memo forgetting a queued entry's key (its LRU is full) does not hide the entry")
    func memoDroppingTheKey() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(headBytes: 0)
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100_000)
        // The smallest memo holds 1,024 keys: reading 1,100 others pushes the entry's key out.
        for key in 2...1_100 { _ = try store.variants(of: StressBodies.primaryKey(key: key)) }
        #expect(store.memo.withLock { $0.heads.value(for: entry.head.primaryKey) } == nil)
        #expect(pending(store) == 1)
        #expect(try store.variants(of: entry.head.primaryKey).map(\.id) == [entry.id])
        #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
    }

    // MARK: - Removals always win

    @Test("A removal made after a commit returned always removes it, though the commit was still queued")
    func removalsAfterTheCommit() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let removals: [(String, (DiskStore, StoredEntry) throws -> Void)] = [
            ("primary key", { _ = try $0.remove(primaryKey: $1.head.primaryKey) }),
            ("identity", { try $0.remove($1.id) }),
            ("URL prefix", { _ = try $0.remove(urlPrefix: $1.head.url) }),
            ("primary-key prefix", { _ = try $0.remove(primaryKeyPrefix: $1.head.primaryKey) }),
            ("tag", { _ = try $0.remove(tag: "t\($1.head.primaryKey)") }),
        ]
        var removed: [StoredEntry] = []
        for (index, (name, remove)) in removals.enumerated() {
            var head = StressBodies.head(key: index, generation: 0, size: 50_000)
            // A key the prefix removal finds, and no other key starts with.
            head.primaryKey += "?"
            head.tags = ["t\(head.primaryKey)"]
            let entry = try writeEntry(store, head, StressBodies.body(for: head.url, size: 50_000))
            #expect(pending(store) >= 1, "\(name)")
            try remove(store, entry)
            #expect(try store.variants(of: head.primaryKey).isEmpty, "\(name)")
            #expect(try store.entry(entry.id) == nil, "\(name)")
            removed.append(entry)
        }
        try store.flush()
        for entry in removed {
            #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
            #expect(!bodyFiles().contains(entry.id.rawValue))
        }
        #expect(store.totals().entries == 0)
        let reopened = try openStore()
        #expect(try reopened.entries().isEmpty)
    }

    @Test("removeAll after commits returned removes every one of them, queued or not")
    func removeAllAfterTheCommits() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let entries = try (0..<20).map { try StoreTestSupport.write(store, key: $0, generation: 0, size: 40_000) }
        #expect(pending(store) == 20)
        try store.removeAll()
        for entry in entries { #expect(try store.variants(of: entry.head.primaryKey).isEmpty) }
        try store.flush()
        #expect(store.totals().entries == 0)
        #expect(bodyFiles().isEmpty)
        #expect(try openStore().entries().isEmpty)
    }

    @Test("Removals racing commits on two threads: no entry removed after its commit returned ever comes back")
    func removalsRacingCommits() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(latency: 0.002)
        let rounds = 300
        // Entries whose commit returned, handed to the remover.
        let committed = Locked<[StoredEntry]>([])
        let removed = Locked<[StoredEntry]>([])
        let done = Locked(false)
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            do {
                if worker == 0 {
                    defer { done.withLock { $0 = true } }
                    for round in 0..<rounds {
                        let entry = try StoreTestSupport.write(
                            store, key: round, generation: 0, size: round % 2 == 0 ? 100 : 40_000)
                        committed.withLock { $0.append(entry) }
                        // Kept entries alongside, in the same batches.
                        try StoreTestSupport.write(store, key: rounds + round, generation: 0, size: 100)
                    }
                } else {
                    var round = 0
                    while true {
                        let finished = done.withLock { $0 }
                        let taken = committed.withLock { list in
                            defer { list = [] }
                            return list
                        }
                        for entry in taken {
                            switch round % 3 {
                            case 0: _ = try store.remove(primaryKey: entry.head.primaryKey)
                            case 1: try store.remove(entry.id)
                            default: _ = try store.remove(urlPrefix: entry.head.url)
                            }
                            round += 1
                            if try !store.variants(of: entry.head.primaryKey).isEmpty {
                                Issue.record("\(entry.head.url) is found right after its removal")
                            }
                            removed.withLock { $0.append(entry) }
                        }
                        if finished && taken.isEmpty { break }
                    }
                }
            } catch {
                Issue.record("\(error)")
            }
        }
        #expect(removed.withLock { $0.count } == rounds)
        // The batches written behind have all committed: nothing they held comes back.
        try store.flush()
        usleep(50_000)
        let reopened = try openStore()
        let files = Set(bodyFiles())
        for entry in removed.withLock({ $0 }) {
            #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
            #expect(try reopened.variants(of: entry.head.primaryKey).isEmpty)
            #expect(!files.contains(entry.id.rawValue))
        }
        for key in rounds..<(2 * rounds) {
            let stored = try reopened.variants(of: StressBodies.primaryKey(key: key))
            #expect(stored.count == 1)
            if let first = stored.first {
                #expect(try reopened.body(of: first.id) == StoreTestSupport.expectedBody(first))
            }
        }
    }

    @Test("Another store's removal waits for the batch holding a queued commit, then removes it")
    func removalByAnotherStore() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore(latency: 0.2)
        let other = try StoreTestSupport.openStore(directory)
        let first = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        let queued = try StoreTestSupport.write(store, key: 2, generation: 0, size: 100_000)
        #expect(pending(store) == 2)
        // Blocks on the index's write lock, which the open batch holds, until it commits.
        #expect(try other.remove(primaryKey: queued.head.primaryKey) == 1)
        #expect(try other.remove(primaryKey: first.head.primaryKey) == 1)
        #expect(try store.variants(of: queued.head.primaryKey).isEmpty)
        try store.flush()
        #expect(try openStore().entries().isEmpty)
    }

    // MARK: - Updates and replacements of queued entries

    @Test("A head update of a queued entry is kept: read at once, stored when written")
    func updateOfAQueuedEntry() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        let freshened = HeaderFields([("Cache-Control", "max-age=600"), ("X-Freshened", "1")])
        try store.update(entry.id, fields: freshened, facts: [9])
        #expect(pending(store) == 1)
        #expect(try store.variants(of: entry.head.primaryKey).map(\.head.fields) == [freshened])
        #expect(try store.entry(entry.id)?.head.facts == [9])
        try store.flush()
        let other = try StoreTestSupport.openStore(directory)
        #expect(try other.variants(of: entry.head.primaryKey).map(\.head.fields) == [freshened])
        #expect(try other.variants(of: entry.head.primaryKey).map(\.head.facts) == [[9]])
    }

    @Test("A newer commit of a queued entry's key replaces it: one row, the older body file unlinked")
    func newerCommitReplacesAQueuedOne() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let older = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100_000)
        let newer = try StoreTestSupport.write(store, key: 1, generation: 1, size: 90_000)
        #expect(pending(store) == 2)
        #expect(try store.variants(of: newer.head.primaryKey).map(\.id) == [newer.id])
        try store.flush()
        #expect(try store.variants(of: newer.head.primaryKey).map(\.id) == [newer.id])
        #expect(store.totals().entries == 1)
        #expect(bodyFiles() == [newer.id.rawValue])
        let other = try StoreTestSupport.openStore(directory)
        #expect(try other.entries().map(\.id) == [newer.id])
        #expect(try other.body(of: newer.id) == StoreTestSupport.expectedBody(newer))
        _ = older
    }

    @Test(
        "An entry a queued commit replaces is gone at once for reads by identity, its file kept till the batch commits")
    func replacedByAQueuedCommit() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let other = try StoreTestSupport.openStore(directory)
        let old = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100_000)
        try store.flush()
        let new = try StoreTestSupport.write(store, key: 1, generation: 1, size: 100_000)
        #expect(pending(store) == 1)
        // A 304 for the old one must not find it (RFC 9111 §4.3.4: it no longer selects a stored response).
        #expect(try store.entry(old.id) == nil)
        #expect {
            _ = try store.openBody(of: old.id)
        } throws: {
            ($0 as? StorageError)?.kind == .notFound
        }
        #expect(try store.variants(of: old.head.primaryKey).map(\.id) == [new.id])
        // The committed index, which other processes read, still has it whole.
        #expect(store.sweep() == 0)
        #expect(try other.body(of: old.id) == StoreTestSupport.expectedBody(old))
        try store.flush()
        #expect(try other.variants(of: old.head.primaryKey).map(\.id) == [new.id])
        #expect(bodyFiles() == [new.id.rawValue])
    }

    @Test("A commit replacing a pinned entry keeps the pin, queued or written")
    func replacementKeepsThePin() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let old = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        #expect(try store.setPinned(true, primaryKey: old.head.primaryKey) == 1)
        // Read (and remembered) before the commit: the queued entry takes the pin from there.
        #expect(try store.variants(of: old.head.primaryKey).map(\.isPinned) == [true])
        let new = try StoreTestSupport.write(store, key: 1, generation: 1, size: 100)
        #expect(new.isPinned)
        #expect(try store.variants(of: old.head.primaryKey).map(\.isPinned) == [true])
        try store.flush()
        #expect(try StoreTestSupport.openStore(directory).variants(of: old.head.primaryKey).map(\.isPinned) == [true])
    }

    // MARK: - Sweeps, failures

    @Test("No sweep, of this store or another, takes a queued entry's body file")
    func sweepKeepsQueuedFiles() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try openStore()
        let other = try StoreTestSupport.openStore(directory)
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100_000)
        #expect(pending(store) == 1)
        #expect(store.sweep() == 0)
        #expect(other.sweep() == 0)
        #expect(bodyFiles() == [entry.id.rawValue])
        #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
        try store.flush()
        #expect(try other.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
    }

    @Test("A queued commit the index refuses is logged and dropped: a miss, its body file removed, never a wrong body")
    func failedWriteIsAMiss() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let log = StoreTestSupport.Log()
        let store = try openStore(log: log)
        // Another connection makes the index refuse one URL's row (a real SQLite failure).
        let connection = try DiskStore.openConnection(store.configuration)
        try connection.execute(
            """
            CREATE TRIGGER refuse BEFORE INSERT ON entries WHEN NEW.url LIKE '%/item/7?%'
            BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
            """)
        connection.close()
        let refused = try StoreTestSupport.write(store, key: 7, generation: 0, size: 100_000)
        let inline = try StoreTestSupport.write(store, key: 7, generation: 1, size: 100)
        #expect(pending(store) == 2)
        #expect(try store.variants(of: refused.head.primaryKey).map(\.id) == [inline.id])
        try store.flush()
        #expect(pending(store) == 0)
        #expect(log.all.contains { $0.contains("not stored") && $0.contains("refused by the test") })
        #expect(try store.variants(of: refused.head.primaryKey).isEmpty)
        for id in [refused.id, inline.id] {
            #expect(try store.entry(id) == nil)
            #expect {
                _ = try store.openBody(of: id)
            } throws: {
                ($0 as? StorageError)?.kind == .notFound
            }
        }
        #expect(bodyFiles().isEmpty)
        // Later commits are written as usual.
        let later = try StoreTestSupport.write(store, key: 8, generation: 0, size: 100)
        try store.flush()
        #expect(try StoreTestSupport.openStore(directory).variants(of: later.head.primaryKey).map(\.id) == [later.id])
    }

    @Test("Releasing the store writes its queued commits")
    func releaseWrites() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let entry: StoredEntry
        do {
            let store = try openStore()
            entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100_000)
            #expect(pending(store) == 1)
        }
        // Released when its last reference goes: the sweep it started on opening may hold it a
        // moment longer on a busy machine, and its queued commit is written then.
        let reopened = try StoreTestSupport.openStore(directory)
        #expect(try eventually { try reopened.variants(of: entry.head.primaryKey).map(\.id) == [entry.id] })
        #expect(try reopened.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
    }

    @Test(
        "Under steady writes the WAL starts over after its checkpoints: it stays near the checkpoint threshold instead of growing by every byte stored"
    )
    func walStartsOver() async throws {
        // It blocks (thousands of writes, the background writer's batches): off the cooperative pool.
        try await offPool {
            defer { StoreTestSupport.removeDirectory(directory) }
            // Batches of 64, each opened as the one before commits: writes never pause.
            let store = try openStore(latency: 0.05)
            let (largest, last) = try StoreTestSupport.largestWAL(writing: 5_000, into: store, directory: directory)
            // The threshold is 1,000 pages (4 MB): a checkpoint and a batch or two past it.
            #expect(largest < 32 << 20, "the WAL reached \(largest) bytes")
            #expect(try StoreTestSupport.openStore(directory).variants(of: last.head.primaryKey).map(\.id) == [last.id])
        }
    }
}
