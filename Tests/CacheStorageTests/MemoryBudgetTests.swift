import CacheSemantics
import Foundation
import Testing

@testable import CacheStorage

/// A memory store's capacity bounds the memory its entries take, not only their bodies: each
/// entry is charged its head and its bookkeeping (`MemoryCost`), so many tiny bodies cannot
/// hold far more memory than the capacity (the proxy's `--memory`, `HTTPCache`'s memory tier
/// and the Redis store's local tier are all this store).
@Suite struct MemoryBudgetTests {
    static func url(_ number: Int) -> String { "http://127.0.0.1:8081/u/\(number)" }

    static func put(_ store: MemoryStore, _ number: Int) throws {
        let url = url(number)
        let writer = try store.makeWriter(
            for: EntryHead(
                primaryKey: url, url: url, status: 200,
                fields: ["Cache-Control": "max-age=3600", "Content-Length": "1"],
                facts: [1, 2, 3]))
        try writer.append([UInt8(truncatingIfNeeded: number)])
        try writer.commit()
    }

    @Test func manyTinyEntriesStayWithinTheCapacityWithTheirOverhead() throws {
        let capacity: Int64 = 1 << 20
        let store = MemoryStore(capacity: capacity)
        for number in 0..<200_000 { try Self.put(store, number) }
        let totals = store.totals()
        #expect(store.accountedBytes <= capacity)
        // Each entry is charged at least its bookkeeping: far fewer than a million one-byte
        // bodies fit.
        #expect(totals.entries < 200_000)
        #expect(totals.entries <= Int(capacity) / MemoryStore.entryOverhead)
        #expect(totals.bodyBytes == Int64(totals.entries))
        // The most recently stored are kept, the oldest evicted.
        #expect(try store.variants(of: Self.url(199_999)).count == 1)
        #expect(try store.variants(of: Self.url(0)).isEmpty)
    }

    @Test func anEntryIsChargedItsHeadAndFieldsThatGrowAreChargedWhenUpdated() throws {
        let store = MemoryStore(capacity: 1 << 20)
        try Self.put(store, 1)
        let charged = store.accountedBytes
        let entry = try #require(try store.variants(of: Self.url(1)).first)
        // The body the store holds, not a new [1]: an array's capacity is what malloc gave it,
        // and a chunk malloc could not split is 16 bytes larger than asked for.
        let body = try #require(store.heldBody(of: entry.id))
        #expect(body == [1])
        #expect(charged == MemoryStore.cost(of: entry, body: body))
        #expect(charged > Int64(MemoryStore.entryOverhead + MemoryCost.string(Self.url(1)) * 2))
        var fields = entry.head.fields
        fields.append(name: "X-Large", value: String(repeating: "v", count: 10_000))
        try store.update(entry.id, fields: fields, facts: entry.head.facts)
        #expect(store.accountedBytes >= charged + 10_000)
        try store.remove(entry.id)
        #expect(store.accountedBytes == 0)
    }

    @Test func anEntryWhoseHeadAloneIsLargerThanTheCapacityIsRefusedWithAReason() throws {
        let store = MemoryStore(capacity: 4_096, maximumEntrySize: 4_096)
        let url = Self.url(1)
        let writer = try store.makeWriter(
            for: EntryHead(
                primaryKey: url, url: url, status: 200, fields: ["X-Large": String(repeating: "v", count: 5_000)],
                facts: []))
        try writer.append([1])
        let error = #expect(throws: StorageError.self) { try writer.commit() }
        #expect(error?.kind == .tooLarge)
        #expect(error?.message.contains("memory capacity 4096") == true)
        #expect(store.totals().entries == 0)
    }

    /// An empty body used to cost nothing, so a store of capacity 0 (`--memory 0`) kept every
    /// bodiless response forever.
    @Test func aStoreOfCapacityZeroKeepsNothing() throws {
        let store = MemoryStore(capacity: 0)
        let writer = try store.makeWriter(
            for: EntryHead(primaryKey: "k", url: "k", status: 204, fields: [:], facts: []))
        #expect(throws: StorageError.self) { try writer.commit() }
        #expect(store.totals().entries == 0)
    }
}
