import CacheSemantics
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorage

/// A reader that started on a stored body finishes that version, whatever happens to the entry
/// meanwhile: a response that has started going out is never cut off, nor spliced with a newer
/// version (the bar a shared cache is held to: a body served is one the origin sent, whole).
@Suite("CacheStorage: a body being read is the version that was opened")
struct VersionedReadTests {
    /// 3 MiB: several stream chunks, and larger than the stores' maximum entry size in memory.
    static let size = 3 << 20

    @Test(
        "a body streamed while a new version replaces its entry arrives whole, as the old version",
        arguments: StoreKind.allCases)
    func streamedWhileReplaced(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(capacity: 64 << 20, directory: directory)
            let url = "https://example.com/large"
            let old = StressBodies.body(for: url + "#1", size: Self.size)
            let new = StressBodies.body(for: url + "#2", size: Self.size)
            try put(store, head(url), old, chunk: 256 << 10)
            let original = try #require(try store.variants(of: url).first)
            var received: [UInt8] = []
            var replaced = false
            try store.streamBody(of: original.id) { chunk in
                received += chunk
                if !replaced {
                    replaced = true
                    try put(store, head(url), new, chunk: 256 << 10)
                }
                return true
            }
            #expect(replaced)
            #expect(received.count == old.count)
            #expect(received == old)
            // The store now holds the new version only.
            let now = try store.variants(of: url)
            #expect(now.count == 1 && now.first?.id != original.id)
            #expect(try now.first.map { try store.body(of: $0.id) } == new)
        }
    }

    @Test(
        "an opened body stays readable, whole and by range, after its entry is removed or purged",
        arguments: StoreKind.allCases)
    func readableAfterRemoval(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(capacity: 64 << 20, directory: directory)
            let url = "https://example.com/gone"
            let body = StressBodies.body(for: url, size: Self.size)
            let entry = try put(store, head(url), body, chunk: 256 << 10)
            let opened = try store.openBody(of: entry.id)
            try store.remove(primaryKey: url)
            #expect(try store.variants(of: url).isEmpty)
            #expect(opened.size == Int64(body.count))
            #expect(try opened.read(100_000...199_999) == Array(body[100_000...199_999]))
            #expect(try opened.readAll() == body)
            // Opening it now says it is gone, so a cache looks again instead of failing.
            #expect(throws: StorageError.self) { try store.openBody(of: entry.id) }
            do {
                _ = try store.openBody(of: entry.id)
            } catch let error as StorageError {
                #expect(error.kind == .notFound)
            }
        }
    }

    @Test("an opened disk body is served from its file even after a sweep runs and a writer reuses the directory")
    func openedDiskBodySurvivesSweep() throws {
        let directory = TemporaryDirectory()
        let store = try StoreKind.disk.make(capacity: 64 << 20, directory: directory)
        let url = "https://example.com/swept"
        let old = StressBodies.body(for: url + "#1", size: Self.size)
        let entry = try put(store, head(url), old, chunk: 256 << 10)
        let opened = try store.openBody(of: entry.id)
        try put(store, head(url), StressBodies.body(for: url + "#2", size: Self.size), chunk: 256 << 10)
        (store as? DiskStore)?.sweep()
        #expect(try opened.readAll() == old)
    }
}
