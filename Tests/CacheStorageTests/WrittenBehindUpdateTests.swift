import CacheSemantics
import CacheSystem
import Foundation
import Testing

@testable import CacheStorage

/// Heads a `304` freshened (RFC 9111 §4.3.4), written behind as a caching proxy's store writes
/// them: queued, read by their store at once, written to the index by a background writer, and
/// never bringing back an entry removed or replaced meanwhile (RFC 9111 §4.4).
@Suite("DiskStore: head updates written behind")
struct WrittenBehindUpdateTests {
    let directory = StoreTestSupport.makeDirectory("update-behind")

    static let freshened = HeaderFields([("Cache-Control", "max-age=600"), ("ETag", "\"v2\""), ("X-Freshened", "1")])

    @Test("A queued update is read by its store at once (variants, entry) and by another once flushed")
    func readAtOnce() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, writesBehind: true)
        let other = try StoreTestSupport.openStore(directory)
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        try store.flush()
        let count = store.changeCount
        try store.update(entry.id, fields: Self.freshened, facts: [7, 7])
        // A reader that derives things from the change count reads again.
        #expect(store.changeCount != count)
        #expect(store.memo.withLock { $0.pendingUpdates.count } == 1)
        let read = try store.variants(of: entry.head.primaryKey)
        #expect(read.map(\.head.fields) == [Self.freshened])
        #expect(read.map(\.head.facts) == [[7, 7]])
        #expect(try store.entry(entry.id)?.head.fields == Self.freshened)
        // Still only in this store's memory: the index has the old head.
        #expect(try other.variants(of: entry.head.primaryKey).map(\.head.fields) == [entry.head.fields])
        try store.flush()
        #expect(store.memo.withLock { $0.pendingUpdates.isEmpty })
        #expect(try other.variants(of: entry.head.primaryKey).map(\.head.fields) == [Self.freshened])
        #expect(try other.variants(of: entry.head.primaryKey).map(\.head.facts) == [[7, 7]])
        // The body is untouched.
        #expect(try other.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
    }

    @Test("Queued updates are written by the background writer within the batch latency, unasked")
    func writtenInTheBackground() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, latency: 0.05, writesBehind: true)
        let other = try StoreTestSupport.openStore(directory)
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        try store.update(entry.id, fields: Self.freshened, facts: [7])
        let deadline = MonotonicClock.seconds() + 20
        while try other.variants(of: entry.head.primaryKey).first?.head.fields != Self.freshened,
            MonotonicClock.seconds() < deadline
        {
            usleep(10_000)
        }
        #expect(try other.variants(of: entry.head.primaryKey).map(\.head.fields) == [Self.freshened])
        #expect(store.memo.withLock { $0.pendingUpdates.isEmpty })
    }

    @Test("The 64th queued update has them written at once, long before the latency")
    func writtenAtTheLimit() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, latency: 600, writesBehind: true)
        let entries = try (0..<DiskStore.batchLimit).map {
            try StoreTestSupport.write(store, key: $0, generation: 0, size: 100)
        }
        for entry in entries { try store.update(entry.id, fields: Self.freshened, facts: [1]) }
        let deadline = MonotonicClock.seconds() + 20
        while !store.memo.withLock({ $0.pendingUpdates.isEmpty }), MonotonicClock.seconds() < deadline {
            usleep(10_000)
        }
        #expect(store.memo.withLock { $0.pendingUpdates.isEmpty })
        for entry in entries {
            #expect(try store.variants(of: entry.head.primaryKey).map(\.head.fields) == [Self.freshened])
        }
    }

    @Test("A PURGE of a queued update's entry is final: the update never brings it back, here or on reopening")
    func removalWins() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let entry: StoredEntry
        do {
            let store = try StoreTestSupport.openStore(directory, writesBehind: true)
            entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
            let inFile = try StoreTestSupport.write(store, key: 2, generation: 0, size: 100_000)
            try store.update(entry.id, fields: Self.freshened, facts: [7])
            try store.update(inFile.id, fields: Self.freshened, facts: [7])
            #expect(try store.remove(primaryKey: entry.head.primaryKey) == 1)
            try store.remove(inFile.id)
            #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
            #expect(try store.entry(entry.id) == nil)
            try store.flush()
            #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
            #expect(try store.variants(of: inFile.head.primaryKey).isEmpty)
            #expect(store.totals().entries == 0)
            // Queued again after the removal: still nothing.
            try store.update(entry.id, fields: Self.freshened, facts: [7])
            #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
        }
        let reopened = try StoreTestSupport.openStore(directory)
        #expect(try reopened.variants(of: entry.head.primaryKey).isEmpty)
        #expect(try reopened.entries().isEmpty)
    }

    @Test("An update queued for a response replaced meanwhile leaves the newer one as it was stored")
    func replacementWins() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, writesBehind: true)
        let old = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        try store.update(old.id, fields: Self.freshened, facts: [7])
        let newer = try StoreTestSupport.write(store, key: 1, generation: 1, size: 200)
        #expect(try store.variants(of: newer.head.primaryKey).map(\.id) == [newer.id])
        #expect(try store.variants(of: newer.head.primaryKey).map(\.head.fields) == [newer.head.fields])
        try store.flush()
        let other = try StoreTestSupport.openStore(directory)
        let stored = try other.variants(of: newer.head.primaryKey)
        #expect(stored.map(\.id) == [newer.id])
        #expect(stored.map(\.head.fields) == [newer.head.fields])
        #expect(try other.body(of: newer.id) == StoreTestSupport.expectedBody(newer))
    }

    @Test("The last of two queued updates of one entry is the one stored")
    func lastUpdateWins() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, writesBehind: true)
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        try store.update(entry.id, fields: ["ETag": "\"a\""], facts: [1])
        try store.update(entry.id, fields: Self.freshened, facts: [2])
        #expect(try store.variants(of: entry.head.primaryKey).map(\.head.facts) == [[2]])
        try store.flush()
        let other = try StoreTestSupport.openStore(directory)
        #expect(try other.variants(of: entry.head.primaryKey).map(\.head.fields) == [Self.freshened])
        #expect(try other.variants(of: entry.head.primaryKey).map(\.head.facts) == [[2]])
    }

    @Test("Releasing the store writes its queued updates")
    func releaseWrites() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let entry: StoredEntry
        do {
            let store = try StoreTestSupport.openStore(directory, writesBehind: true)
            entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
            try store.update(entry.id, fields: Self.freshened, facts: [7])
        }
        // Released when its last reference goes: the sweep it started on opening may hold it a
        // moment longer on a busy machine, and its queued update is written then.
        let reopened = try StoreTestSupport.openStore(directory)
        #expect(
            try StoreTestSupport.eventually(within: 20) {
                try reopened.variants(of: entry.head.primaryKey).map(\.head.fields) == [Self.freshened]
            })
    }

    @Test("Not written behind, an update is in the index at once and an unknown one throws notFound")
    func notWrittenBehind() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory)
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        try store.update(entry.id, fields: Self.freshened, facts: [7])
        #expect(store.memo.withLock { $0.pendingUpdates.isEmpty })
        let other = try StoreTestSupport.openStore(directory)
        #expect(try other.variants(of: entry.head.primaryKey).map(\.head.fields) == [Self.freshened])
        #expect {
            try store.update(EntryID(), fields: Self.freshened, facts: [])
        } throws: {
            ($0 as? StorageError)?.kind == .notFound
        }
    }

    @Test("Updates, removals, replacements and reads from several threads: no removed entry comes back")
    func concurrent() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, latency: 0.01, writesBehind: true)
        let keys = 32
        let entries = try (0..<keys).map { try StoreTestSupport.write(store, key: $0, generation: 0, size: 100) }
        let removed = Locked(Set<Int>())
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            for round in 0..<200 {
                let key = (round * 7 + worker) % keys
                do {
                    switch worker {
                    case 0:
                        if round % 5 == 0 {
                            _ = try store.remove(primaryKey: entries[key].head.primaryKey)
                            removed.withLock { _ = $0.insert(key) }
                        }
                    case 1:
                        if round % 9 == 0 {
                            _ = try StoreTestSupport.write(store, key: key + keys, generation: round, size: 100)
                        }
                        fallthrough
                    default:
                        try store.update(entries[key].id, fields: Self.freshened, facts: [UInt8(worker)])
                        _ = try store.variants(of: entries[key].head.primaryKey)
                    }
                } catch {
                    Issue.record("\(error)")
                }
            }
        }
        try store.flush()
        let reopened = try StoreTestSupport.openStore(directory)
        for key in removed.withLock({ $0 }) {
            #expect(try store.variants(of: entries[key].head.primaryKey).isEmpty)
            #expect(try reopened.variants(of: entries[key].head.primaryKey).isEmpty)
        }
        for key in 0..<keys where !removed.withLock({ $0.contains(key) }) {
            let stored = try reopened.variants(of: entries[key].head.primaryKey)
            #expect(stored.map(\.id) == [entries[key].id])
            #expect(stored.map(\.head.fields) == [Self.freshened])
            #expect(try reopened.body(of: entries[key].id) == StoreTestSupport.expectedBody(entries[key]))
        }
    }
}
