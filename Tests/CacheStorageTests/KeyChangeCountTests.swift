import CacheSemantics
import CacheSystem
import Foundation
import Testing

@testable import CacheStorage

/// A key's own change count (``DiskStore/changeCount(of:)``): it stays while only other keys
/// are stored, freshened or removed by this store, moves with every change to the key's
/// variants (a commit, a replacement, an update queued or written, a removal) and never goes
/// back to a value it had; a write by another store moves every key's count. What a reader
/// derived from a key's variants is reused while that count stands still, so a wrong count
/// would serve what is no longer stored.
@Suite("DiskStore: each key's change count")
struct KeyChangeCountTests {
    let directory = StoreTestSupport.makeDirectory("key-changes")

    static let freshened = HeaderFields([("Cache-Control", "max-age=600"), ("ETag", "\"v2\""), ("X-Freshened", "1")])

    /// The counts seen for one key, each new one checked to be one it never had.
    final class Seen {
        private(set) var values: [UInt64] = []

        /// Notes `value`: it must be new when the key changed, the last one when it did not.
        func note(_ value: UInt64?, changed: Bool, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
            guard let value else {
                Issue.record("no count after \(what)", sourceLocation: sourceLocation)
                return
            }
            if changed {
                #expect(
                    !values.contains(value), "the count after \(what) is one it had", sourceLocation: sourceLocation)
            } else {
                #expect(value == values.last, "the count moved after \(what)", sourceLocation: sourceLocation)
            }
            values.append(value)
        }
    }

    @Test(
        "Another key's commit, replacement, update and removal leave a key's count; its own update, replacement and removal move it, never back",
        arguments: [false, true])
    func ownChangesOnly(writesBehind: Bool) throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, writesBehind: writesBehind)
        let first = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        let second = try StoreTestSupport.write(store, key: 2, generation: 0, size: 100)
        try store.flush()
        let key = first.head.primaryKey
        #expect(try store.variants(of: key).map(\.id) == [first.id])
        let seen = Seen()
        seen.note(store.changeCount(of: key), changed: true, "the first read")
        let before = store.changeCount

        try StoreTestSupport.write(store, key: 3, generation: 0, size: 100)
        seen.note(store.changeCount(of: key), changed: false, "another key's commit")
        #expect(store.changeCount != before)
        try store.update(second.id, fields: Self.freshened, facts: [7])
        seen.note(store.changeCount(of: key), changed: false, "another key's update")
        try StoreTestSupport.write(store, key: 2, generation: 1, size: 100)
        seen.note(store.changeCount(of: key), changed: false, "another key's replacement")
        try store.flush()
        seen.note(store.changeCount(of: key), changed: false, "writing them to the index")
        #expect(try store.remove(primaryKey: second.head.primaryKey) == 1)
        // A removal is not told apart by key: every key is read again once.
        seen.note(store.changeCount(of: key), changed: true, "another key's removal")
        #expect(try store.variants(of: key).map(\.id) == [first.id])
        seen.note(store.changeCount(of: key), changed: false, "reading the key again")

        try store.update(first.id, fields: Self.freshened, facts: [8])
        seen.note(store.changeCount(of: key), changed: true, "its own update")
        #expect(try store.variants(of: key).map(\.head.fields) == [Self.freshened])
        try store.flush()
        // Written behind, the update's row is the key's next change; otherwise it was written at once.
        seen.note(store.changeCount(of: key), changed: writesBehind, "its update written")
        let replacement = try StoreTestSupport.write(store, key: 1, generation: 1, size: 100)
        seen.note(store.changeCount(of: key), changed: true, "its replacement")
        #expect(try store.variants(of: key).map(\.id) == [replacement.id])
        try store.flush()
        seen.note(store.changeCount(of: key), changed: writesBehind, "its replacement written")
        try store.remove(replacement.id)
        seen.note(store.changeCount(of: key), changed: true, "its removal")
        #expect(try store.variants(of: key).isEmpty)
        #expect(seen.values == seen.values.sorted())
    }

    @Test("A write by another store on the same directory moves every key's count")
    func anotherStoreWrites() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, writesBehind: true)
        let other = try StoreTestSupport.openStore(directory)
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        try store.flush()
        _ = try store.variants(of: entry.head.primaryKey)
        let count = store.changeCount(of: entry.head.primaryKey)
        #expect(store.changeCount(of: entry.head.primaryKey) == count)
        try StoreTestSupport.write(other, key: 2, generation: 0, size: 100)
        #expect(store.changeCount(of: entry.head.primaryKey) != count)
    }

    @Test("A key with a commit queued has no count of its own until the commit is written")
    func queuedCommit() throws {
        defer { StoreTestSupport.removeDirectory(directory) }
        let store = try StoreTestSupport.openStore(directory, writesBehind: true)
        let entry = try StoreTestSupport.write(store, key: 1, generation: 0, size: 100)
        #expect(store.memo.withLock { $0.pendingCommits.count } == 1)
        _ = try store.variants(of: entry.head.primaryKey)
        #expect(store.changeCount(of: entry.head.primaryKey) == store.changeCount)
        let counted = try #require(store.changeCount(of: entry.head.primaryKey))
        try StoreTestSupport.write(store, key: 2, generation: 0, size: 100)
        #expect(store.changeCount(of: entry.head.primaryKey) != counted)
        try store.flush()
        let written = try #require(store.changeCount(of: entry.head.primaryKey))
        #expect(written > counted)
        try StoreTestSupport.write(store, key: 3, generation: 0, size: 100)
        #expect(store.changeCount(of: entry.head.primaryKey) == written)
    }
}
