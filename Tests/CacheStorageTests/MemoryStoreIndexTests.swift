import CacheSemantics
import CacheSystem
import CacheTestSupport
import Testing

@testable import CacheStorage

/// The memory store's indexes: slots found by identity and by primary key through
/// `SlotIndex` (8 bytes an entry, not a dictionary's copy of the key), and the variants of a
/// key linked from node to node.
@Suite struct MemoryStoreIndexTests {
    /// Keys whose slot is found by comparing with this table, as the store compares nodes.
    struct Model {
        var index = SlotIndex()
        var keys: [Int?] = []

        mutating func insert(_ key: Int, hash: Int) -> Int {
            keys.append(key)
            index.insert(keys.count - 1, hash: hash)
            return keys.count - 1
        }

        func slot(of key: Int, hash: Int) -> Int? { index.slot(hash: hash) { keys[$0] == key } }
    }

    @Test func slotsWhoseHashesCollideAreFoundAndRemovedWithoutLosingTheOthers() {
        var model = Model()
        // One hash for all: a single run of buckets, each removal shifting the rest back.
        let slots = (0..<40).map { model.insert($0, hash: 7) }
        #expect(slots.allSatisfy { model.slot(of: $0, hash: 7) == $0 })
        for removed in stride(from: 0, to: 40, by: 3) {
            model.index.remove(slots[removed], hash: 7)
            model.keys[removed] = nil
        }
        for key in 0..<40 {
            #expect(model.slot(of: key, hash: 7) == (key % 3 == 0 ? nil : key))
        }
        #expect(model.index.count == 26)
    }

    @Test func randomInsertionsAndRemovalsAgreeWithADictionary() {
        var model = Model()
        var expected: [Int: Int] = [:]
        var random = SplitMix64(seed: 30)
        for _ in 0..<20_000 {
            // Few distinct hashes, so that runs wrap around the table's end and overlap.
            let key = Int(random.next() % 3_000)
            let hash = key % 61 == 0 ? Int.max : key &* 40_503
            if let slot = expected[key] {
                model.index.remove(slot, hash: hash)
                model.keys[slot] = nil
                expected[key] = nil
            } else {
                expected[key] = model.insert(key, hash: hash)
            }
        }
        #expect(model.index.count == expected.count)
        for key in 0..<3_000 {
            let hash = key % 61 == 0 ? Int.max : key &* 40_503
            #expect(model.slot(of: key, hash: hash) == expected[key])
        }
    }

    @Test func aSlotIndexedAgainUnderTheSameHashIsFoundAtItsNewSlot() {
        var model = Model()
        let first = model.insert(1, hash: 5)
        let second = model.insert(2, hash: 5)
        model.keys.append(1)
        model.index.replace(first, with: 2, hash: 5)
        model.keys[first] = nil
        #expect(model.slot(of: 1, hash: 5) == 2)
        #expect(model.slot(of: 2, hash: 5) == second)
    }

    static func head(_ url: String, variant: String) -> EntryHead {
        EntryHead(primaryKey: url, variantKey: variant, url: url, status: 200, fields: [:], facts: [1])
    }

    static func put(_ store: MemoryStore, _ head: EntryHead, _ body: [UInt8] = [1]) throws -> StoredEntry {
        let writer = try store.makeWriter(for: head)
        try writer.append(body)
        return try writer.commit()
    }

    @Test func variantsKeepTheirOrderWhenOneIsRemovedOrReplacedAndItsSlotReused() throws {
        let store = MemoryStore(capacity: 1 << 20)
        let url = "https://example.com/v"
        let ids = try ["a", "b", "c", "d"].map { try Self.put(store, Self.head(url, variant: $0)).id }
        try store.remove(ids[1])
        #expect(try store.variants(of: url).map(\.head.variantKey) == ["a", "c", "d"])
        try store.remove(ids[0])
        #expect(try store.variants(of: url).map(\.head.variantKey) == ["c", "d"])
        // The freed slots go to another key; this key's variants are not linked to them.
        _ = try Self.put(store, Self.head("https://example.com/other", variant: ""))
        _ = try Self.put(store, Self.head(url, variant: "e"))
        _ = try Self.put(store, Self.head(url, variant: "c"))
        #expect(try store.variants(of: url).map(\.head.variantKey) == ["d", "e", "c"])
        #expect(try store.variants(of: "https://example.com/other").count == 1)
        #expect(try store.remove(primaryKey: url) == 3)
        #expect(try store.variants(of: url).isEmpty)
        #expect(store.totals().entries == 1)
    }

    @Test func manyKeysAreEvictedLeastRecentlyUsedFirstAndTheirCostsComeBackToZero() throws {
        func url(_ number: Int) -> String { "https://example.com/" + String(100_000 + number).dropFirst() }
        let body = [UInt8](repeating: 0, count: 10_000)
        // Room for the first thousand entries and half of one more. What an entry is charged
        // varies by a few bytes with the capacity malloc gives its body, so the boundary may
        // move by an entry.
        let probe = MemoryStore(capacity: 1 << 30)
        for number in 0..<1_000 { _ = try Self.put(probe, Self.head(url(number), variant: ""), body) }
        let store = MemoryStore(capacity: probe.accountedBytes + 5_000)
        var ids = try (0..<1_000).map { try Self.put(store, Self.head(url($0), variant: ""), body).id }
        #expect(store.totals().entries == 1_000)
        for id in ids[..<100] { store.recordAccess(id, at: 1) }
        ids += try (1_000..<1_100).map { try Self.put(store, Self.head(url($0), variant: ""), body).id }
        // The hundred read again stay; the hundred stored after them and never read go.
        let kept = Set(try store.entries().map(\.id))
        #expect(kept.isSuperset(of: ids[..<100] + ids[201...]))
        #expect(kept.isDisjoint(with: ids[100..<199]))
        #expect(store.accountedBytes <= store.capacity)
        for id in ids { try store.remove(id) }
        #expect(store.accountedBytes == 0)
        #expect(store.totals() == StoreTotals())
    }

    /// Hits are recorded in buffers of the recording thread's own, not under the store's lock
    /// (`AccessBuffers`): every one counts all the same, in the listing and in what an eviction
    /// keeps, however many threads record them and whether or not a buffer filled.
    @Test func accessesRecordedOnManyThreadsAllCount() async throws {
        let store = MemoryStore(capacity: 1 << 20)
        let ids = try (0..<8).map { try Self.put(store, Self.head("https://example.com/\($0)", variant: "")).id }
        // 4 threads × 1,000 hits on the first entry (buffers fill and are applied), and
        // 5 hits on the second (left in a buffer until the listing).
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask { for time in 1...1_000 { store.recordAccess(ids[0], at: 4e9 + Double(time)) } }
            }
            group.addTask { for _ in 0..<5 { store.recordAccess(ids[1], at: 4e9) } }
        }
        let listed = try store.entries()
        let first = try #require(listed.first { $0.id == ids[0] })
        #expect(first.hits == 4_000)
        // The latest, whichever thread's buffer was applied last.
        #expect(first.lastAccess == 4e9 + 1_000)
        #expect(listed.first { $0.id == ids[1] }?.hits == 5)
        // The two read are the most recently used; the six never read are older.
        #expect(Set(listed.prefix(2).map(\.id)) == [ids[0], ids[1]])
    }
}
