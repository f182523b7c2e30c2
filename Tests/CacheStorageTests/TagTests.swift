import CacheSemantics
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorage

private func tagged(_ url: String, _ tags: [String], variant: String = "") -> EntryHead {
    var head = head(url, variant: variant)
    head.tags = tags
    return head
}

/// Tags (`EntryHead.tags`), the index cache groups (RFC 9875) are purged by, on every store.
@Suite("CacheStorage: entries removed by tag")
struct TagTests {
    @Test(
        "remove(tag:) removes exactly the entries carrying the tag, whichever key and variant; the others stay",
        arguments: StoreKind.allCases)
    func removesTagged(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            try put(store, tagged("https://a.example/1", ["g:a", "g:b"]), Array("one".utf8))
            try put(store, tagged("https://a.example/2", ["g:a"], variant: "gzip"), Array("two".utf8))
            try put(store, tagged("https://a.example/2", ["g:c"], variant: "br"), Array("three".utf8))
            try put(store, tagged("https://a.example/3", []), Array("four".utf8))
            #expect(try store.variants(of: "https://a.example/1").first?.head.tags == ["g:a", "g:b"])
            #expect(try store.remove(tag: "g:a") == 2)
            #expect(try store.variants(of: "https://a.example/1").isEmpty)
            #expect(try store.variants(of: "https://a.example/2").map(\.head.variantKey) == ["br"])
            #expect(try store.variants(of: "https://a.example/3").count == 1)
            #expect(try store.remove(tag: "g:a") == 0)
            #expect(try store.remove(tag: "g:b") == 0)
            #expect(try store.remove(tag: "g:c") == 1)
            #expect(store.totals().entries == 1)
        }
    }

    @Test("a replaced entry leaves its old tags behind", arguments: StoreKind.allCases)
    func replacedEntryTakesItsTags(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            try put(store, tagged("https://a.example/r", ["old"]), Array("v1".utf8))
            try put(store, tagged("https://a.example/r", ["new"]), Array("v2".utf8))
            #expect(try store.remove(tag: "old") == 0)
            #expect(try store.variants(of: "https://a.example/r").count == 1)
            #expect(try store.remove(tag: "new") == 1)
            #expect(try store.variants(of: "https://a.example/r").isEmpty)
        }
    }

    @Test("tags survive reopening the disk store, and a tiered store finds memory-only entries by tag")
    func durableAndTiered() throws {
        let directory = TemporaryDirectory()
        let configuration = DiskStore.Configuration(directory: directory.path, capacity: 1 << 20)
        do {
            let store = try DiskStore(configuration)
            try put(store, tagged("https://a.example/d", ["kept"]), Array("disk".utf8))
        }
        let reopened = try DiskStore(configuration)
        #expect(try reopened.variants(of: "https://a.example/d").first?.head.tags == ["kept"])
        let tiered = TieredStore(memory: MemoryStore(capacity: 1 << 20), disk: reopened)
        var memoryOnly = tagged("https://a.example/m", ["kept"])
        memoryOnly.storagePolicy = .memoryOnly
        try put(tiered, memoryOnly, Array("memory".utf8))
        _ = try tiered.openBody(for: try #require(try tiered.variants(of: "https://a.example/d").first))
        #expect(try tiered.remove(tag: "kept") == 2)
        #expect(try tiered.entries().isEmpty)
    }

    @Test("a version 2 index (no tags) is migrated: entries kept, untagged, and new entries are tagged")
    func version2IsMigrated() throws {
        let directory = TemporaryDirectory()
        let configuration = DiskStore.Configuration(directory: directory.path, capacity: 1 << 20)
        do {
            let store = try DiskStore(configuration)
            try put(store, tagged("https://a.example/old", []), Array("old".utf8))
        }
        do {
            let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
            try connection.execute(
                "DROP TABLE tags; ALTER TABLE entries DROP COLUMN tags; PRAGMA user_version = 2;")
            connection.close()
        }
        let reopened = try DiskStore(configuration)
        #expect(try reopened.variants(of: "https://a.example/old").first?.head.tags == [])
        try put(reopened, tagged("https://a.example/new", ["g"]), Array("new".utf8))
        #expect(try reopened.remove(tag: "g") == 1)
        #expect(try reopened.entries().map(\.head.url) == ["https://a.example/old"])
    }

    @Test("removing one tag among 2,000 entries reads only its entries (indexed): a protocol default would scan")
    func indexedNotScanned() throws {
        let directory = TemporaryDirectory()
        let store = try DiskStore(DiskStore.Configuration(directory: directory.path, capacity: 1 << 30))
        for index in 0..<2_000 {
            try put(store, tagged("https://a.example/\(index)", ["g\(index % 100)"]), Array("x".utf8))
        }
        let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
        defer { connection.close() }
        let plan = try connection.statement(
            "EXPLAIN QUERY PLAN SELECT id FROM entries WHERE id IN (SELECT id FROM tags WHERE tag = 'g7')")
        var details: [String] = []
        let detail = try plan.column("detail")
        while try plan.step() { details.append(plan.text(detail)) }
        #expect(details.contains { $0.contains("USING") && $0.contains("tags") }, "\(details)")
        #expect(!details.contains { $0 == "SCAN entries" || $0 == "SCAN tags" }, "\(details)")
        #expect(try store.remove(tag: "g7") == 20)
    }
}
