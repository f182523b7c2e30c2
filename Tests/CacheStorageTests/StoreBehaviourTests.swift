import CacheSemantics
import CacheStorageRedis
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorage

/// The behaviour every store promises (the `CacheStore` protocol), checked on the memory, disk
/// and tiered stores alike.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case memory, disk, tiered
    /// The disk store encrypted at rest (`DiskStore.Configuration.encryptionKey`).
    case encryptedDisk
    /// `RedisStore` on a real standalone Redis, and on a real Redis Cluster of three masters.
    case redis, redisCluster
    /// `SharedStore`: a local memory tier in front of the standalone Redis.
    case redisShared
    /// `RedisStore` on the standalone Redis with an encryption key.
    case encryptedRedis

    var testDescription: String { rawValue }

    /// A store with room for `capacity` bytes of bodies, in a fresh directory.
    func make(capacity: Int64 = 1 << 20, directory: TemporaryDirectory, clock: Clock = Clock()) throws -> any CacheStore
    {
        let configuration = DiskStore.Configuration(
            directory: directory.path, capacity: capacity, maximumEntrySize: capacity / 2, inlineBodyLimit: 1024,
            log: { _ in })
        switch self {
        case .memory: return MemoryStore(capacity: capacity, maximumEntrySize: capacity / 2, clock: clock.now)
        case .disk: return try DiskStore(configuration, clock: clock.now)
        case .encryptedDisk:
            var encrypted = configuration
            encrypted.encryptionKey = EncryptionKey(bytes: Array(repeating: 7, count: 32))
            return try DiskStore(encrypted, clock: clock.now)
        case .tiered:
            return TieredStore(
                memory: MemoryStore(capacity: capacity, maximumEntrySize: capacity / 2, clock: clock.now),
                disk: try DiskStore(configuration, clock: clock.now))
        case .redis:
            return RedisStore(
                try Self.redisConfiguration(cluster: false, maximumEntrySize: capacity / 2), clock: clock.now)
        case .redisCluster:
            return RedisStore(
                try Self.redisConfiguration(cluster: true, maximumEntrySize: capacity / 2), clock: clock.now)
        case .encryptedRedis:
            var encrypted = try Self.redisConfiguration(cluster: false, maximumEntrySize: capacity / 2)
            encrypted.encryptionKey = EncryptionKey(bytes: Array(repeating: 9, count: 32))
            return RedisStore(encrypted, clock: clock.now)
        case .redisShared:
            return SharedStore(
                redis: RedisStore(
                    try Self.redisConfiguration(cluster: false, maximumEntrySize: capacity / 2), clock: clock.now),
                localCapacity: capacity, clock: clock.now)
        }
    }

    /// The stores that keep to a byte capacity of their own (Redis' is its `maxmemory`).
    static let bounded: [StoreKind] = [.memory, .disk, .encryptedDisk, .tiered]

    /// A configuration with a key prefix no other test uses.
    static func redisConfiguration(cluster: Bool, maximumEntrySize: Int64 = 1 << 30) throws -> RedisConfiguration {
        var configuration =
            cluster
            ? try RedisConfiguration(clusterNodes: RedisCluster.shared().seeds)
            : try RedisConfiguration(url: RedisServer.shared().url)
        configuration.keyPrefix = "test-\(UInt64.random(in: 0...UInt64.max)):"
        // The defaults (50 ms a command, 100 ms a connection) are a cache's; what these tests
        // check is the store's behaviour, so a busy machine must not turn a slow connection into
        // a node marked unreachable (then every command on it fails for the backoff time).
        configuration.commandTimeout = 2
        configuration.connectTimeout = 2
        configuration.maximumEntrySize = maximumEntrySize
        return configuration
    }
}

/// A clock tests advance by hand.
final class Clock: Sendable {
    private let time = Locked(1_000_000.0)
    var now: @Sendable () -> Double { { [self] in time.withLock { $0 } } }
    func advance(_ seconds: Double) { time.withLock { $0 += seconds } }
}

func head(_ url: String, variant: String = "", fields: HeaderFields = ["Content-Type": "text/plain"]) -> EntryHead {
    EntryHead(
        primaryKey: url, variantKey: variant, url: url, status: 200, fields: fields, facts: [1, 2, 3],
        userInfo: Array("info:\(url)".utf8))
}

/// Writes in 700-byte chunks, to exercise bodies arriving in pieces.
@discardableResult
func put(_ store: any CacheStore, _ head: EntryHead, _ body: [UInt8], chunk: Int = 700) throws -> StoredEntry {
    try writeEntry(store, head, body, chunk: chunk)
}

@Suite("CacheStorage: what every store promises")
struct StoreBehaviourTests {
    @Test(
        "an entry written in chunks reads back whole, by range and as a stream, with its head",
        arguments: StoreKind.allCases)
    func roundTrip(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            for size in [0, 1, 1000, 1025, 70_000, 200_000] {
                let url = "https://example.com/\(size)"
                let body = StressBodies.body(for: url, size: size)
                let stored = try put(store, head(url), body)
                let found = try store.variants(of: url)
                #expect(found.count == 1)
                #expect(found.first?.id == stored.id)
                #expect(found.first?.head == head(url))
                #expect(found.first?.bodySize == Int64(size))
                #expect(try store.body(of: stored.id) == body)
                if size > 10 {
                    let range: ClosedRange<Int64> = 3...Int64(size - 2)
                    #expect(try store.body(of: stored.id, range: range) == Array(body[3...(size - 2)]))
                    #expect(
                        try store.body(of: stored.id, range: Int64(size - 5)...Int64(size + 100))
                            == Array(body[(size - 5)...]))
                }
                var streamed: [UInt8] = []
                try store.streamBody(of: stored.id) { chunk in
                    streamed += chunk
                    return true
                }
                #expect(streamed == body)
            }
            #expect(store.totals().entries == 6)
            let expectedBytes: Int64 = 272_026  // 0 + 1 + 1000 + 1025 + 70000 + 200000
            #expect(store.totals().bodyBytes == expectedBytes)
        }
    }

    @Test("several variants live under one primary key; the same variant key replaces", arguments: StoreKind.allCases)
    func variants(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            let url = "https://example.com/v"
            try put(store, head(url, variant: "gzip"), Array("gzip-1".utf8))
            try put(store, head(url, variant: "br"), Array("br".utf8))
            let replacement = try put(store, head(url, variant: "gzip"), Array("gzip-2".utf8))
            let found = try store.variants(of: url).sorted { $0.head.variantKey < $1.head.variantKey }
            #expect(found.map(\.head.variantKey) == ["br", "gzip"])
            #expect(found.last?.id == replacement.id)
            #expect(try store.body(of: replacement.id) == Array("gzip-2".utf8))
            #expect(store.totals().entries == 2)
        }
    }

    @Test(
        "a Vary field absent and the same field empty are two variants in every store (RFC 9111 §4.1)",
        arguments: StoreKind.allCases)
    func absentAndEmptyVaryFieldsAreTwoVariants(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            let url = "https://example.com/flag"
            func key(_ values: [String?]) -> String { varyingFacts(["x-flag", "x-other"], values).variantKey }
            // The engine's keys, and keys with a U+0000 in them: every store keeps a key byte for byte.
            let keys = [key([nil, "1"]), key(["", "1"]), key([nil, "2"]), "a\u{0}b", "a"]
            #expect(Set(keys).count == keys.count)
            for (index, variant) in keys.enumerated() { try put(store, head(url, variant: variant), [UInt8(index)]) }
            let found = try store.variants(of: url)
            #expect(Set(found.map(\.head.variantKey)) == Set(keys))
            for entry in found {
                #expect(try store.body(of: entry.id) == [UInt8(keys.firstIndex(of: entry.head.variantKey) ?? 99)])
            }
        }
    }

    @Test("an aborted or abandoned writer leaves nothing behind", arguments: StoreKind.allCases)
    func abortLeavesNothing(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            let writer = try store.makeWriter(for: head("https://example.com/a"))
            try writer.append([UInt8](repeating: 7, count: 50_000))
            writer.abort()
            do {
                let abandoned = try store.makeWriter(for: head("https://example.com/b"))
                try abandoned.append([UInt8](repeating: 8, count: 50_000))
            }
            #expect(try store.variants(of: "https://example.com/a").isEmpty)
            #expect(try store.variants(of: "https://example.com/b").isEmpty)
            #expect(store.totals() == StoreTotals())
            let bodies = (try? FileManager.default.contentsOfDirectory(atPath: directory.path + "/bodies")) ?? []
            #expect(bodies.isEmpty, "left behind: \(bodies)")
            #expect(throws: StorageError.self) { try writer.commit() }
        }
    }

    @Test(
        "what was written before a transfer broke is kept as an incomplete entry (RFC 9111 §3.3)",
        arguments: StoreKind.allCases)
    func incompleteEntries(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            let writer = try store.makeWriter(for: head("https://example.com/partial"))
            try writer.append([UInt8](repeating: 3, count: 40_000))
            let entry = try writer.commitIncomplete(facts: [9, 9])
            let stored = try #require(try store.variants(of: "https://example.com/partial").first)
            #expect(stored.id == entry.id)
            #expect(!stored.head.isComplete)
            #expect(stored.head.facts == [9, 9])
            #expect(stored.bodySize == 40_000)
            #expect(try store.body(of: entry.id) == [UInt8](repeating: 3, count: 40_000))
        }
    }

    @Test("fields and facts are updated without rewriting the body (a 304)", arguments: StoreKind.allCases)
    func updateKeepsBody(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            let url = "https://example.com/u"
            let body = StressBodies.body(for: url, size: 5_000)
            let stored = try put(store, head(url), body)
            try store.update(stored.id, fields: ["ETag": "\"v2\""], facts: [9, 9])
            let found = try #require(try store.variants(of: url).first)
            #expect(found.id == stored.id)
            #expect(found.head.fields == ["ETag": "\"v2\""])
            #expect(found.head.facts == [9, 9])
            #expect(try store.body(of: stored.id) == body)
            #expect(throws: StorageError.self) { try store.update(EntryID(), fields: [:], facts: []) }
        }
    }

    @Test("remove by id, by primary key, by URL prefix and all", arguments: StoreKind.allCases)
    func removal(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            let a = try put(store, head("https://a.example/1"), [1])
            try put(store, head("https://a.example/2"), [2])
            try put(store, head("https://a.example/2", variant: "x"), [2, 2])
            try put(store, head("https://b.example/1"), [3])
            try store.remove(a.id)
            #expect(try store.variants(of: "https://a.example/1").isEmpty)
            #expect(throws: StorageError.self) { try store.body(of: a.id) }
            #expect(try store.remove(primaryKey: "https://a.example/2") == 2)
            try put(store, head("https://a.example/3"), [4])
            #expect(try store.remove(urlPrefix: "https://a.example/") == 1)
            #expect(try store.entries().map(\.head.url) == ["https://b.example/1"])
            try store.removeAll()
            #expect(store.totals() == StoreTotals())
            #expect(try store.entries().isEmpty)
        }
    }

    @Test(
        "remove by primary-key prefix removes exactly the keys that start with it, and their body files",
        arguments: StoreKind.allCases)
    func removalByPrimaryKeyPrefix(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(directory: directory)
            let partition = "\u{1F}café\u{1F}"
            func keyed(_ key: String, variant: String = "") -> EntryHead {
                var head = head(key, variant: variant)
                head.url = String(key.drop { $0 != "h" })
                return head
            }
            let body = [UInt8](repeating: 7, count: 5000)  // above the inline limit: in a file on disk
            for key in [
                partition + "https://a.example/1", partition + "https://a.example/\u{10FFFF}",
                partition + "POST https://a.example/q body=1:2",
            ] {
                try put(store, keyed(key), body)
            }
            try put(store, keyed(partition + "https://a.example/1", variant: "gzip"), body)
            let kept = [
                "https://a.example/1", partition + "https://a.example.org/1", partition + "https://a.example:8080/1",
                "\u{1F}cafe\u{1F}https://a.example/1", "\u{1F}café2\u{1F}https://a.example/1",
            ]
            for key in kept { try put(store, keyed(key), body) }
            let files = StoreCheck.files(in: directory.path + "/bodies").count
            #expect(try store.remove(primaryKeyPrefix: partition + "https://a.example/") == 3)
            #expect(try store.remove(primaryKeyPrefix: partition + "POST https://a.example/") == 1)
            #expect(try Set(store.entries().map(\.head.primaryKey)) == Set(kept))
            #expect(store.totals().entries == kept.count)
            #expect(store.totals().bodyBytes == Int64(kept.count * body.count))
            if kind == .disk || kind == .tiered {
                #expect(StoreCheck.files(in: directory.path + "/bodies").count == files - 4)
            }
            #expect(try store.remove(primaryKeyPrefix: partition) == 2)
            #expect(try store.remove(primaryKeyPrefix: "\u{1F}nobody\u{1F}") == 0)
            #expect(try store.entries().count == kept.count - 2)
        }
    }

    @Test(
        "least recently used entries are evicted beyond the capacity; reading an entry keeps it",
        arguments: StoreKind.bounded)
    func leastRecentlyUsedEviction(kind: StoreKind) throws {
        let directory = TemporaryDirectory()
        let clock = Clock()
        // A memory store charges each entry its overhead too (its head, its bookkeeping): room
        // for that of the five entries besides 10,000 bytes of bodies.
        let overhead = MemoryStore.cost(
            of: StoredEntry(
                id: EntryID(), head: head("https://example.com/0"), bodySize: 0, storedAt: 0, lastAccess: 0),
            body: [])
        let store = try kind.make(
            capacity: 10_000 + (kind == .memory ? 5 * overhead : 0), directory: directory, clock: clock)
        var ids: [EntryID] = []
        for index in 0..<4 {
            clock.advance(1)
            ids.append(try put(store, head("https://example.com/\(index)"), [UInt8](repeating: 1, count: 2_000)).id)
        }
        clock.advance(1)
        store.recordAccess(ids[0], at: clock.now())  // 0 is now the most recently used
        try (store as? DiskStore)?.flush()
        try (store as? TieredStore)?.disk.flush()
        clock.advance(1)
        try put(store, head("https://example.com/4"), [UInt8](repeating: 1, count: 4_000))
        // 12,000 bytes for a 10,000-byte store: only the least recently used, 1, has to go;
        // 0 is older but was read since.
        let left = Set(try store.entries().map(\.head.url))
        #expect(
            left == [
                "https://example.com/0", "https://example.com/2", "https://example.com/3", "https://example.com/4",
            ])
        #expect(store.totals().bodyBytes == 10_000)
    }

    @Test("pinned entries are never evicted; unpinning makes them evictable again", arguments: StoreKind.bounded)
    func pinning(kind: StoreKind) throws {
        let directory = TemporaryDirectory()
        let clock = Clock()
        let store = try kind.make(capacity: 10_000, directory: directory, clock: clock)
        try put(store, head("https://example.com/pinned"), [UInt8](repeating: 1, count: 4_000))
        #expect(try store.setPinned(true, primaryKey: "https://example.com/pinned") == 1)
        #expect(store.totals().pinnedBytes == 4_000)
        for index in 0..<5 {
            clock.advance(1)
            try put(store, head("https://example.com/\(index)"), [UInt8](repeating: 2, count: 3_000))
        }
        let urls = Set(try store.entries().map(\.head.url))
        #expect(urls.contains("https://example.com/pinned"))
        #expect(try store.entries().first { $0.head.url.hasSuffix("pinned") }?.isPinned == true)
        #expect(try store.setPinned(false, primaryKey: "https://example.com/pinned") == 1)
        clock.advance(1)
        try put(store, head("https://example.com/last"), [UInt8](repeating: 3, count: 5_000))
        #expect(!Set(try store.entries().map(\.head.url)).contains("https://example.com/pinned"))
    }

    @Test(
        "an entry that replaces a pinned variant is pinned too (a new 200 keeps a pin); other variants are not",
        arguments: StoreKind.allCases)
    func replacementOfAPinnedVariantStaysPinned(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let clock = Clock()
            let store = try kind.make(capacity: 10_000, directory: directory, clock: clock)
            let url = "https://example.com/pinned"
            try put(store, head(url, variant: "a"), [UInt8](repeating: 1, count: 4_000))
            #expect(try store.setPinned(true, primaryKey: url) == 1)
            let replacement = try put(store, head(url, variant: "a"), [UInt8](repeating: 2, count: 3_000))
            #expect(replacement.isPinned)
            try put(store, head(url, variant: "b"), [UInt8](repeating: 3, count: 1_000))
            let variants = try store.variants(of: url).sorted { $0.head.variantKey < $1.head.variantKey }
            #expect(variants.map(\.isPinned) == [true, false])
            #expect(store.totals().pinnedBytes == 3_000)
            // Being pinned, the replacement outlives eviction.
            for index in 0..<5 {
                clock.advance(1)
                try put(store, head("https://example.com/\(index)"), [UInt8](repeating: 4, count: 3_000))
            }
            #expect(try store.variants(of: url).contains { $0.id == replacement.id && $0.isPinned })
        }
    }

    @Test(
        "a body above the maximum entry size is refused with a reason, never dropped silently",
        arguments: StoreKind.allCases)
    func maximumEntrySize(kind: StoreKind) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let store = try kind.make(capacity: 100_000, directory: directory)
            let writer = try store.makeWriter(for: head("https://example.com/big"))
            let error = #expect(throws: StorageError.self) {
                try writer.append([UInt8](repeating: 1, count: 60_000))
            }
            #expect(error?.kind == .tooLarge)
            #expect(error?.message.contains("maximum entry size") == true)
            #expect(try store.variants(of: "https://example.com/big").isEmpty)
        }
    }
}

@Suite("CacheStorage: disk store specifics")
struct DiskStoreTests {
    @Test("the directory is 0700, its files 0600, and bodies are named by random ids, never by URL")
    func permissionsAndNames() throws {
        let directory = TemporaryDirectory()
        let store = try StoreKind.disk.make(directory: directory)
        try put(store, head("https://example.com/a/b?c=d"), [UInt8](repeating: 1, count: 5_000))
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path + "/bodies") {
            #expect(EntryID(rawValue: name) != nil, "unexpected body file name \(name)")
            let file = try FileManager.default.attributesOfItem(atPath: directory.path + "/bodies/" + name)
            #expect((file[.posixPermissions] as? Int) == 0o600)
        }
        let index = try FileManager.default.attributesOfItem(atPath: directory.path + "/index.sqlite")
        #expect((index[.posixPermissions] as? Int) == 0o600)
    }

    @Test("the WAL is checkpointed into the index (in the background, not in a commit) once it passes 1,000 pages")
    func walCheckpointedInBackground() async throws {
        let directory = TemporaryDirectory()
        let store = try DiskStore(DiskStore.Configuration(directory: directory.path, capacity: 100_000_000))
        let index = directory.path + "/index.sqlite"
        let size = StoreTestSupport.fileSize
        let before = size(index)
        // 300 inline bodies of 20,000 bytes: about 1,800 pages of commits.
        for key in 0..<300 {
            try put(store, head("https://example.com/\(key)"), [UInt8](repeating: UInt8(key % 256), count: 20_000))
        }
        var checkpointed = false
        // Up to 20 s: the machine is shared and busy.
        for _ in 0..<400 where !checkpointed {
            checkpointed = size(index) >= before + 4_000_000
            if !checkpointed { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(checkpointed, "the index file is still \(size(index)) bytes")
        #expect(
            try store.body(of: try #require(try store.variants(of: "https://example.com/299").first).id).count == 20_000
        )
    }

    /// Closing never checkpoints (each short-lived process would wait for two `fdatasync`s and
    /// the next one create the WAL again), but a WAL longer than 100 pages is in the index by
    /// the time its store is released, and the next write starts the WAL file over: it never
    /// grows without bound.
    @Test("releasing the store leaves a short WAL as it is, copies a long one into the index")
    func walLeftOnCloseUntilLong() async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let index = directory.path + "/index.sqlite"
            let size = StoreTestSupport.fileSize
            // Waits up to 5 s: the last reference to a store may go on a background thread of
            // its own (a checkpoint holds it while it runs), and its release, checkpoint
            // included, then ends there a moment after the weak reference reads nil.
            func eventually(_ condition: () -> Bool) -> Bool { StoreTestSupport.eventually(within: 5, condition) }
            func writeAndRelease(_ keys: Range<Int>) throws {
                weak var released: DiskStore?
                do {
                    let store = try DiskStore(.init(directory: directory.path, capacity: 100_000_000, log: { _ in }))
                    released = store
                    for key in keys {
                        try put(
                            store, head("https://example.com/\(key)"),
                            [UInt8](repeating: UInt8(key % 256), count: 20_000))
                    }
                }
                #expect(eventually { released == nil })
            }
            try writeAndRelease(0..<3)
            let before = size(index)
            #expect(size(index + "-wal") > 60_000, "the three bodies are still in the WAL")
            try writeAndRelease(3..<300)
            #expect(eventually { size(index) >= before + 5_000_000 }, "the index file is still \(size(index)) bytes")
            try writeAndRelease(300..<301)
            #expect(
                eventually { size(index + "-wal") < 100 * 4_120 }, "the WAL file is still \(size(index + "-wal")) bytes"
            )
            // Each store's entries are read back by the next.
            let store = try DiskStore(.init(directory: directory.path, capacity: 100_000_000, log: { _ in }))
            #expect(try store.entries().count == 301)
        }
    }

    @Test("entries, pins and access counts survive closing and reopening the store")
    func survivesReopen() async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let body = StressBodies.body(for: "x", size: 100_000)
            var id: EntryID?
            weak var released: DiskStore?
            do {
                let store = try StoreKind.disk.make(directory: directory)
                released = store as? DiskStore
                id = try put(store, head("https://example.com/x"), body).id
                _ = try store.setPinned(true, primaryKey: "https://example.com/x")
                store.recordAccess(id!, at: 2_000_000)
            }
            // Buffered accesses are written when the store goes, which is once its background
            // work (the sweep, a queued flush) lets go of it.
            for _ in 0..<200 where released != nil { usleep(25_000) }
            #expect(released == nil)
            let reopened = try StoreKind.disk.make(directory: directory)
            let entry = try #require(try reopened.variants(of: "https://example.com/x").first)
            #expect(entry.id == id)
            #expect(entry.isPinned)
            #expect(entry.hits == 1)
            #expect(entry.lastAccess == 2_000_000)
            #expect(try reopened.body(of: entry.id) == body)
            #expect(reopened.totals() == StoreTotals(entries: 1, bodyBytes: 100_000, pinnedBytes: 100_000))
        }
    }

    /// Each flush is a commit of another connection, after which the reading connection drops
    /// its page cache and its mapping of the index: hits must not cause one every second.
    @Test("access times reach the index in the background every 30 s, not sooner; the next hit after that sends them")
    func accessTimesAreFlushedEveryThirtySeconds() async throws {
        let directory = TemporaryDirectory()
        let clock = Clock()
        let store = try DiskStore(DiskStore.Configuration(directory: directory.path), clock: clock.now)
        let other = try DiskStore(DiskStore.Configuration(directory: directory.path))
        let stored = try put(store, head("https://example.com/hit"), [1, 2, 3])
        let indexed = { () throws -> StoredEntry? in try other.entries().first }
        clock.advance(10)
        store.recordAccess(stored.id, at: clock.now())
        try await Task.sleep(for: .milliseconds(300))
        #expect(try indexed()?.hits == 0)
        #expect(try indexed()?.lastAccess == stored.storedAt)
        clock.advance(DiskStore.accessFlushInterval)
        store.recordAccess(stored.id, at: clock.now())
        let deadline = MonotonicClock.seconds() + 10
        while try indexed()?.hits == 0, MonotonicClock.seconds() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(try indexed()?.hits == 2)
        #expect(try indexed()?.lastAccess == clock.now())
    }

    /// A hit goes into a buffer of its thread's own, handed to the store every 64 hits: a flush
    /// takes the full ones and those partly filled, whichever thread filled them.
    @Test("hits recorded on several threads all reach the index, from full and partly filled buffers alike")
    func hitsFromManyThreadsAreAllFlushed() throws {
        let directory = TemporaryDirectory()
        let clock = Clock()
        let store = try DiskStore(DiskStore.Configuration(directory: directory.path), clock: clock.now)
        let stored = try (0..<3).map { try put(store, head("https://example.com/threads/\($0)"), [1, 2, 3]) }
        // Within the 30 s between flushes: only flush() writes them.
        let start = clock.now() + 1
        let threads = 6
        let hitsPerThread = 150  // two full buffers and part of a third, spread over the entries
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for hit in 0..<hitsPerThread {
                store.recordAccess(stored[hit % 3].id, at: start + Double(thread * 1_000 + hit) / 1_000)
            }
        }
        try store.flush()
        let indexed = try DiskStore(DiskStore.Configuration(directory: directory.path)).entries()
        for (index, entry) in stored.enumerated() {
            let read = try #require(indexed.first { $0.id == entry.id })
            #expect(read.hits == threads * hitsPerThread / 3)
            // The latest hit on it: the last thread's last hit with `hit % 3 == index`.
            let lastHit = (hitsPerThread - 1) - ((hitsPerThread - 1 - index) % 3)
            #expect(read.lastAccess == start + Double((threads - 1) * 1_000 + lastHit) / 1_000)
        }
    }

    /// A flush that cannot write (another connection holds the index's write lock past the
    /// busy timeout) keeps what it took; the next flush writes it with the hits recorded since.
    @Test("access times a failed flush took are kept and added to the later hits of the same entry")
    func accessTimesOfAFailedFlushAreKept() throws {
        let directory = TemporaryDirectory()
        let clock = Clock()
        let configuration = DiskStore.Configuration(directory: directory.path, busyTimeoutMilliseconds: 50)
        let store = try DiskStore(configuration, clock: clock.now)
        let stored = try put(store, head("https://example.com/retried"), [1, 2, 3])
        let start = clock.now() + 1
        for hit in 0..<3 { store.recordAccess(stored.id, at: start + Double(hit)) }
        let blocker = try DiskStore(DiskStore.Configuration(directory: directory.path))
        try blocker.state.withLock { state throws(StorageError) in try state.connection.execute("BEGIN IMMEDIATE") }
        #expect(throws: StorageError.self) { try store.flush() }
        try blocker.state.withLock { state throws(StorageError) in try state.connection.execute("ROLLBACK") }
        store.recordAccess(stored.id, at: start - 1)  // earlier than those kept: their time stays
        store.recordAccess(stored.id, at: start + 1)
        try store.flush()
        let indexed = try #require(try DiskStore(DiskStore.Configuration(directory: directory.path)).entries().first)
        #expect(indexed.hits == 5)
        #expect(indexed.lastAccess == start + 2)
    }

    /// The access writer is a second connection to an index that exists; were it to create one,
    /// a store whose index was deleted under it would leave an empty `index.sqlite` behind (and a
    /// directory removed while the store flushed could not be removed).
    @Test("access times flushed after the index file was deleted fail and create no empty index")
    func accessFlushAfterTheIndexIsDeletedCreatesNoIndex() throws {
        let directory = TemporaryDirectory()
        let store = try DiskStore(DiskStore.Configuration(directory: directory.path))
        let stored = try put(store, head("https://example.com/deleted"), [1, 2, 3])
        for suffix in ["", "-wal", "-shm"] { unlink(directory.path + "/index.sqlite" + suffix) }
        store.recordAccess(stored.id, at: 2_000_000_000)
        #expect(throws: StorageError.self) { try store.flush() }
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/index.sqlite"))
    }

    @Test("two store instances on one directory see each other's writes and removals")
    func twoInstances() throws {
        let directory = TemporaryDirectory()
        let first = try StoreKind.disk.make(directory: directory)
        let second = try StoreKind.disk.make(directory: directory)
        let stored = try put(first, head("https://example.com/shared"), [1, 2, 3])
        #expect(try second.variants(of: "https://example.com/shared").map(\.id) == [stored.id])
        #expect(try second.body(of: stored.id) == [1, 2, 3])
        try second.remove(stored.id)
        #expect(try first.variants(of: "https://example.com/shared").isEmpty)
    }

    /// Variants are kept in memory between index writes; a write by another instance (its
    /// own connection, its own memory) bumps the shared change counter, so the next lookup
    /// reads the index again instead of returning what it remembered.
    @Test("remembered variants are read again after another instance adds, updates, pins or removes")
    func rememberedVariantsFollowOtherWriters() throws {
        let directory = TemporaryDirectory()
        let reader = try StoreKind.disk.make(directory: directory)
        let writer = try StoreKind.disk.make(directory: directory)
        let key = "https://example.com/remembered"
        #expect(try reader.variants(of: key).isEmpty)
        let first = try put(writer, head(key), [1])
        #expect(try reader.variants(of: key).map(\.id) == [first.id])
        var second = head(key)
        second.variantKey = "fr"
        let added = try put(writer, second, [2])
        #expect(Set(try reader.variants(of: key).map(\.id)) == [first.id, added.id])
        try writer.update(first.id, fields: ["X-Updated": "1"], facts: [1, 2])
        #expect(try reader.variants(of: key).first { $0.id == first.id }?.head.fields["X-Updated"] == "1")
        try writer.setPinned(true, primaryKey: key)
        #expect(try reader.variants(of: key).allSatisfy(\.isPinned))
        try writer.remove(primaryKey: key)
        #expect(try reader.variants(of: key).isEmpty)
    }

    /// Stores opening one fresh directory at once (each its own connection, as separate
    /// processes have) must agree on one index; none may find it half-made, or locked while
    /// another switches it to WAL, and move it aside.
    @Test("eight stores opening one fresh directory at once share one index")
    func concurrentFirstOpen() throws {
        for _ in 0..<40 {
            let directory = TemporaryDirectory()
            let messages = Locked<[String]>([])
            let failures = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { index in
                do {
                    let store = try DiskStore(
                        DiskStore.Configuration(
                            directory: directory.path, log: { message in messages.withLock { $0.append(message) } }))
                    _ = try put(store, head("https://example.com/open/\(index)"), [UInt8(index)])
                } catch {
                    failures.withLock { $0.append(String(describing: error)) }
                }
            }
            #expect(failures.withLock { $0 }.isEmpty)
            #expect(messages.withLock { $0 }.isEmpty)
            let store = try DiskStore(DiskStore.Configuration(directory: directory.path, log: { _ in }))
            #expect(store.totals().entries == 8)
        }
    }

    @Test("a tiered store keeps memory-only entries off the disk")
    func memoryOnlyNeverTouchesDisk() throws {
        let directory = TemporaryDirectory()
        let store = try #require(try StoreKind.tiered.make(directory: directory) as? TieredStore)
        var memoryOnly = head("https://example.com/secret")
        memoryOnly.storagePolicy = .memoryOnly
        let stored = try put(store, memoryOnly, [UInt8](repeating: 5, count: 3_000))
        #expect(try store.variants(of: "https://example.com/secret").map(\.id) == [stored.id])
        #expect(try store.disk.variants(of: "https://example.com/secret").isEmpty)
        #expect(try store.body(of: stored.id) == [UInt8](repeating: 5, count: 3_000))
        #expect(store.disk.totals().entries == 0)
        #expect(store.totals().entries == 1)
    }

    @Test("the default maximum entry size lets a 30 MB response be stored with default settings")
    func thirtyMegabytesFitByDefault() throws {
        let directory = TemporaryDirectory()
        let configuration = DiskStore.Configuration(directory: directory.path, log: { _ in })
        #expect(configuration.maximumEntrySize >= 30_000_000)
        let store = try DiskStore(configuration)
        let body = [UInt8](repeating: 0xAB, count: 30_000_000)
        let stored = try put(store, head("https://example.com/30mb"), body, chunk: 1 << 20)
        #expect(stored.bodySize == 30_000_000)
        #expect(try store.body(of: stored.id, range: 29_999_990...29_999_999) == [UInt8](repeating: 0xAB, count: 10))
    }

    @Test("the default directory is $HTTPCACHE_DIR when set")
    func defaultDirectory() {
        let path = DiskStore.defaultDirectory()
        if let explicit = ProcessInfo.processInfo.environment["HTTPCACHE_DIR"], !explicit.isEmpty {
            #expect(path == explicit)
        } else {
            #expect(path.hasSuffix("/httpcache"))
        }
    }
}

@Suite("CacheStorage: tiered store")
struct TieredStoreTests {
    @Test(
        "a tiered store's totals are the disk's plus the memory-only entries', counted through writes, pins, evictions and removals"
    )
    func totalsCountMemoryOnlyEntries() throws {
        let directory = TemporaryDirectory()
        let disk = try DiskStore(DiskStore.Configuration(directory: directory.path))
        // Room for a few 4,000-byte bodies: memory-only entries are evicted as others come.
        let memory = MemoryStore(capacity: 20_000)
        let store = TieredStore(memory: memory, disk: disk)
        // What the totals must be, counted the slow way: every memory-only entry held.
        func expected() throws -> StoreTotals {
            var totals = disk.totals()
            for entry in try memory.entries() where entry.head.storagePolicy == .memoryOnly { totals.add(entry) }
            return totals
        }
        var checked = 0
        func check(_ step: String) throws {
            #expect(store.totals() == (try expected()), "after \(step)")
            checked += 1
        }
        for index in 0..<12 {
            var entryHead = head("https://example.com/\(index)")
            if index % 3 != 0 { entryHead.storagePolicy = .memoryOnly }
            _ = try put(store, entryHead, [UInt8](repeating: UInt8(index), count: 4_000))
            try check("writing entry \(index)")
        }
        #expect(store.totals().entries > disk.totals().entries, "memory-only entries are held")
        #expect(try memory.entries().count < 12, "some were evicted")
        #expect(try store.setPinned(true, primaryKey: "https://example.com/11") == 1)
        try check("pinning")
        #expect(store.totals().pinnedBytes == 4_000)
        _ = try store.setPinned(false, primaryKey: "https://example.com/11")
        try check("unpinning")
        _ = try store.remove(primaryKey: "https://example.com/10")
        try check("a removal")
        try store.removeAll()
        try check("removing all")
        #expect(store.totals() == StoreTotals() && checked == 16)
    }

    @Test(
        "holdsNone: a tiered store holds none of a key only when the disk's known keys lack it and memory has no entry of it, memory-only or not"
    )
    func holdsNone() throws {
        let directory = TemporaryDirectory()
        let disk = try DiskStore(DiskStore.Configuration(directory: directory.path))
        let store = TieredStore(memory: MemoryStore(capacity: 1 << 20), disk: disk)
        #expect(!store.holdsNone("https://example.com/a"), "the known keys are not built")
        #expect(DiskStore.buildKnownKeys({ disk }))
        #expect(store.holdsNone("https://example.com/a"))
        _ = try put(store, head("https://example.com/a"), [1, 2, 3])
        #expect(!store.holdsNone("https://example.com/a"))
        var memoryOnly = head("https://example.com/m")
        memoryOnly.storagePolicy = .memoryOnly
        _ = try put(store, memoryOnly, [4])
        #expect(disk.holdsNone("https://example.com/m") && !store.holdsNone("https://example.com/m"))
        // Memory by its own entries alone.
        #expect(!store.memory.holdsNone("https://example.com/m") && store.memory.holdsNone("https://example.com/z"))
    }

    @Test(
        "a disk body read whole is promoted to memory, by identity or with the entry just read",
        arguments: [false, true])
    func diskBodiesArePromoted(withEntry: Bool) throws {
        let directory = TemporaryDirectory()
        let disk = try DiskStore(DiskStore.Configuration(directory: directory.path))
        let body = [UInt8](repeating: 5, count: 10_000)
        let entry = try put(disk, head("https://example.com/p"), body)
        let store = TieredStore(memory: MemoryStore(capacity: 1 << 20), disk: disk)
        #expect(throws: StorageError.self) { try store.memory.openBody(of: entry.id) }
        let opened = try withEntry ? store.openBody(for: entry) : store.openBody(of: entry.id)
        #expect(try opened.readAll() == body)
        #expect(try store.memory.body(of: entry.id) == body)
        #expect(try store.memory.variants(of: "https://example.com/p").map(\.id) == [entry.id])
    }

    @Test(
        "a body the index holds inline goes to memory as it is opened and is handed out as memory's; a file's when read",
        arguments: [false, true])
    func inlineBodiesArePromotedWhenOpened(withEntry: Bool) throws {
        let directory = TemporaryDirectory()
        let disk = try DiskStore(DiskStore.Configuration(directory: directory.path))
        let store = TieredStore(memory: MemoryStore(capacity: 1 << 20), disk: disk)
        let inline = [UInt8](repeating: 5, count: disk.configuration.inlineBodyLimit)
        let inFile = [UInt8](repeating: 6, count: disk.configuration.inlineBodyLimit + 1)
        let inlineEntry = try put(disk, head("https://example.com/inline"), inline)
        let fileEntry = try put(disk, head("https://example.com/file"), inFile)
        let open = { (entry: StoredEntry) throws in
            try withEntry ? store.openBody(for: entry) : store.openBody(of: entry.id)
        }
        #expect(try open(inlineEntry).bytesInMemory == inline)
        #expect(store.memory.heldBody(of: inlineEntry.id) == inline)
        let opened = try open(fileEntry)
        #expect(opened.bytesInMemory == nil)
        #expect(store.memory.heldBody(of: fileEntry.id) == nil)
        #expect(try opened.readAll() == inFile)
        #expect(store.memory.heldBody(of: fileEntry.id) == inFile)
    }

    @Test(
        "update: an entry the disk no longer holds is not found, though memory still holds its body; a memory-only entry is updated in memory"
    )
    func updateOfAnEntryGoneFromDisk() throws {
        let directory = TemporaryDirectory()
        let disk = try DiskStore(DiskStore.Configuration(directory: directory.path))
        let store = TieredStore(memory: MemoryStore(capacity: 1 << 20), disk: disk)
        let old = try put(store, head("https://example.com/r"), [1, 2, 3])
        #expect(store.memory.heldBody(of: old.id) == [1, 2, 3])
        // Replaced by a writer of the disk alone (another process sharing the directory).
        _ = try put(disk, head("https://example.com/r"), [4, 5, 6])
        #expect(store.memory.heldBody(of: old.id) != nil)
        #expect(throws: StorageError.self) {
            try store.update(old.id, fields: ["X-Freshened": "yes"], facts: [])
        }
        var memoryOnly = head("https://example.com/m")
        memoryOnly.storagePolicy = .memoryOnly
        let kept = try put(store, memoryOnly, [7])
        try store.update(kept.id, fields: ["X-Freshened": "yes"], facts: [])
        #expect(try store.variants(of: "https://example.com/m").first?.head.fields["X-Freshened"] == "yes")
    }
}

@Suite("CacheStorage: index format version")
struct IndexFormatVersionTests {
    @Test("an index of another format version is moved aside with a logged reason, and an empty store starts")
    func otherFormatVersionMovedAside() throws {
        let directory = TemporaryDirectory()
        let messages = MessageLog()
        let configuration = DiskStore.Configuration(directory: directory.path, log: { messages.append($0) })
        do {
            let store = try DiskStore(configuration)
            try put(store, head("https://example.com/old"), [1, 2, 3])
        }
        do {
            let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
            // The released store's background sweep may still hold the index for a moment.
            try connection.execute("PRAGMA busy_timeout = 10000")
            try connection.execute("PRAGMA user_version = \(DiskStore.formatVersion + 1)")
            connection.close()
        }
        let reopened = try DiskStore(configuration)
        #expect(try reopened.entries().isEmpty)
        #expect(
            messages.all.contains {
                $0.contains("format version \(DiskStore.formatVersion + 1)") && $0.contains("moved it to")
            })
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(names.contains { $0.hasPrefix("index.sqlite.unusable-") })
    }

    @Test(
        "a version 1 index (access times in the entries' rows) is migrated: entries, bodies, access times and hits kept"
    )
    func version1IsMigrated() throws {
        let directory = TemporaryDirectory()
        let configuration = DiskStore.Configuration(
            directory: directory.path, capacity: 10_000, maximumEntrySize: 10_000)
        let clock = Clock()
        var ids: [EntryID] = []
        do {
            let store = try DiskStore(configuration, clock: clock.now)
            for index in 0..<3 {
                clock.advance(1)
                ids.append(try put(store, head("https://example.com/\(index)"), [UInt8](repeating: 7, count: 3_000)).id)
            }
            store.recordAccess(ids[0], at: 3_000_000_000)
            store.recordAccess(ids[0], at: 3_000_000_000)
            try store.flush()
        }
        // Turn it into what version 1 wrote: the access columns in `entries`, its recency
        // index and removal trigger, no `access` table.
        do {
            let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
            try connection.execute("PRAGMA busy_timeout = 10000")
            try connection.execute(
                """
                ALTER TABLE entries ADD COLUMN last_access REAL NOT NULL DEFAULT 0;
                ALTER TABLE entries ADD COLUMN hits INTEGER NOT NULL DEFAULT 0;
                UPDATE entries SET last_access = (SELECT last_access FROM access WHERE access.id = entries.id),
                    hits = (SELECT hits FROM access WHERE access.id = entries.id);
                DROP TRIGGER entries_removed;
                DROP TABLE access;
                DROP TABLE tags;
                ALTER TABLE entries DROP COLUMN tags;
                CREATE INDEX entries_by_recency ON entries (pinned, last_access);
                CREATE TRIGGER entries_removed AFTER DELETE ON entries BEGIN
                    UPDATE totals SET entries = entries - 1, body_bytes = body_bytes - OLD.body_size,
                        pinned_bytes = pinned_bytes - OLD.pinned * OLD.body_size WHERE id = 0;
                END;
                PRAGMA user_version = 1;
                """)
            connection.close()
        }
        let reopened = try DiskStore(configuration, clock: clock.now)
        let first = try #require(try reopened.entry(ids[0]))
        #expect(first.hits == 2)
        #expect(first.lastAccess == 3_000_000_000)
        #expect(try reopened.body(of: ids[1]) == [UInt8](repeating: 7, count: 3_000))
        // Eviction follows the migrated access times: 0 was read last, so 1 goes first.
        clock.advance(1)
        try put(reopened, head("https://example.com/3"), [UInt8](repeating: 8, count: 3_000))
        #expect(
            Set(try reopened.entries().map(\.head.url)) == [
                "https://example.com/0", "https://example.com/2", "https://example.com/3",
            ])
        let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
        let version = try connection.statement("PRAGMA user_version")
        let userVersion = try version.column("user_version")
        #expect(try version.step() && version.int(userVersion) == Int64(DiskStore.formatVersion))
        // Removing an entry removes its access row too (the migrated trigger).
        try reopened.remove(ids[0])
        let orphans = try connection.statement(
            "SELECT count(*) AS orphans FROM access WHERE id NOT IN (SELECT id FROM entries)")
        let count = try orphans.column("orphans")
        #expect(try orphans.step() && orphans.int(count) == 0)
        connection.close()
    }
}

extension IndexFormatVersionTests {
    @Test(
        "a version 3 index (variant keys cut off at an absent Vary field) is migrated: keys from the facts, a part whose offset was lost dropped"
    )
    func version3IsMigrated() throws {
        let directory = TemporaryDirectory()
        let configuration = DiskStore.Configuration(directory: directory.path, log: { _ in })
        func facts(_ values: [String?]) -> [UInt8] {
            varyingFacts(["a", "b"].prefix(values.count).map { $0 }, values).serialized()
        }
        // What version 3 left: its key (U+0000 for an absent field, cut there by SQLite's text).
        let rows: [(url: String, oldKey: String, facts: [UInt8], complete: Bool, newKey: String?)] = [
            ("https://example.com/1", "", facts([nil, "x"]), true, "-\u{1}=x"),
            ("https://example.com/1", "a", facts(["a"]), true, "=a"),
            ("https://example.com/1", "a\u{2}8", facts(["a"]), false, "=a\u{2}8"),
            ("https://example.com/2", "", facts([nil]), false, nil),
            ("https://example.com/3", "", facts([]), true, ""),
        ]
        do {
            let store = try DiskStore(configuration)
            for (index, row) in rows.enumerated() {
                try put(
                    store,
                    EntryHead(
                        primaryKey: row.url, variantKey: "v\(index)", url: row.url, status: 200, fields: [:],
                        facts: row.facts, isComplete: row.complete), [UInt8(index)])
            }
        }
        do {
            let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
            try connection.execute("PRAGMA busy_timeout = 10000")
            for (index, row) in rows.enumerated() {
                let update = try connection.statement(
                    "UPDATE entries SET variant_key = :old_key WHERE variant_key = :variant_key")
                try update.bind(row.oldKey, to: ":old_key")
                try update.bind("v\(index)", to: ":variant_key")
                try update.run()
            }
            try connection.execute("PRAGMA user_version = 3")
            connection.close()
        }
        let reopened = try DiskStore(configuration)
        for (index, row) in rows.enumerated() {
            let found = try reopened.variants(of: row.url).first { try reopened.body(of: $0.id) == [UInt8(index)] }
            #expect(found?.head.variantKey == row.newKey, "row \(index)")
        }
        #expect(reopened.totals().entries == 4)
    }
}

/// The facts of a response whose `Vary` nominates `names`, stored for a request with `values`.
func varyingFacts(_ names: [String], _ values: [String?]) -> StoredResponseFacts {
    StoredResponseFacts(
        status: 200, requestTime: Timestamp(secondsSince1970: 0), responseTime: Timestamp(secondsSince1970: 0),
        date: Timestamp(secondsSince1970: 0), freshnessLifetime: 60, lifetimeSource: .maxAge,
        vary: Vary(fieldNames: names), varyValues: values)
}

final class MessageLog: Sendable {
    private let messages = Locked<[String]>([])
    func append(_ message: String) { messages.withLock { $0.append(message) } }
    var all: [String] { messages.withLock { $0 } }
}

@Suite("EntryID: its text and its bytes")
struct EntryIDTests {
    @Test("32 lowercase hex digits that read back as the same identity; 16 bytes, big-endian, the same bits")
    func textAndBytes() throws {
        for _ in 0..<200 {
            let id = EntryID()
            #expect(id.rawValue.utf8.count == 32)
            #expect(id.rawValue.allSatisfy { "0123456789abcdef".contains($0) })
            #expect(EntryID(rawValue: id.rawValue) == id)
            let hex = id.bytes.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
            #expect(hex == id.rawValue)
        }
        let known = try #require(EntryID(rawValue: "000102030405060708090a0b0c0d0e0f"))
        #expect(known.bytes == Array(0..<16))
        #expect(known.rawValue == "000102030405060708090a0b0c0d0e0f")
    }

    @Test(
        "A new identity begins with the time in milliseconds: ones made in turn sort in turn across milliseconds; 10,000 differ"
    )
    func timeOrdered() throws {
        let before = UInt64(Date().timeIntervalSince1970 * 1000)
        var ids = (0..<5_000).map { _ in EntryID() }
        Thread.sleep(forTimeInterval: 0.002)
        ids += (0..<5_000).map { _ in EntryID() }
        let after = UInt64(Date().timeIntervalSince1970 * 1000)
        #expect(Set(ids).count == ids.count)
        let times = ids.map { UInt64($0.rawValue.prefix(12), radix: 16) ?? 0 }
        #expect(times.allSatisfy { $0 + 1 >= before && $0 <= after + 1 }, "\(before)…\(after): \(times.prefix(3))")
        #expect(times == times.sorted())
        // Within one millisecond the rest is random; across milliseconds the text sorts as made.
        let pairs = zip(zip(ids, times), zip(ids, times).dropFirst())
        #expect(pairs.allSatisfy { earlier, later in earlier.1 == later.1 || earlier.0.rawValue < later.0.rawValue })
        #expect(times.first! < times.last!)
    }
}

extension IndexFormatVersionTests {
    @Test("a version 4 index (inline bodies in the entries' rows) is migrated: the bodies move to a table of their own")
    func version4IsMigrated() throws {
        let directory = TemporaryDirectory()
        let configuration = DiskStore.Configuration(directory: directory.path, log: { _ in })
        let inline = [UInt8](repeating: 4, count: 3_000)
        let inFile = [UInt8](repeating: 5, count: 40_000)
        let (small, large): (StoredEntry, StoredEntry)
        do {
            let store = try DiskStore(configuration)
            small = try put(store, head("https://example.com/small"), inline)
            large = try put(store, head("https://example.com/large"), inFile)
        }
        // What version 4 wrote: the inline body in its entry's row, a removal trigger that
        // knows nothing else.
        do {
            let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
            try connection.execute("PRAGMA busy_timeout = 10000")
            try connection.execute(
                """
                ALTER TABLE entries ADD COLUMN body BLOB;
                UPDATE entries SET body = (SELECT body FROM inline_bodies WHERE inline_bodies.id = entries.id);
                DROP TRIGGER entries_removed;
                DROP TABLE inline_bodies;
                CREATE TRIGGER entries_removed AFTER DELETE ON entries BEGIN
                    UPDATE totals SET entries = entries - 1, body_bytes = body_bytes - OLD.body_size,
                        pinned_bytes = pinned_bytes - OLD.pinned * OLD.body_size WHERE id = 0;
                    DELETE FROM access WHERE id = OLD.id;
                END;
                PRAGMA user_version = 4;
                """)
            connection.close()
        }
        let reopened = try DiskStore(configuration)
        #expect(try reopened.body(of: small.id) == inline)
        #expect(try reopened.body(of: large.id) == inFile)
        let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
        defer { connection.close() }
        func count(_ sql: String) throws -> Int64 {
            let query = try connection.statement("SELECT count(*) AS found FROM \(sql)")
            let found = try query.column("found")
            defer { query.reset() }
            return try query.step() ? query.int(found) : -1
        }
        #expect(try count("pragma_table_info('entries') WHERE name = 'body'") == 0)
        #expect(try count("inline_bodies") == 1)
        let version = try connection.statement("PRAGMA user_version")
        let userVersion = try version.column("user_version")
        #expect(try version.step() && version.int(userVersion) == Int64(DiskStore.formatVersion))
        version.reset()
        // Removing the entry removes its inline body too (the new trigger).
        try reopened.remove(small.id)
        #expect(try count("inline_bodies") == 0)
    }
}

@Suite("CacheStorage: freshening a stored head")
struct HeadUpdateTests {
    @Test(
        "a head update (a 304's, RFC 9111 §4.3.4) writes a few pages of the index, never the inline body's, even when the head grows"
    )
    func headUpdateLeavesTheBody() throws {
        let directory = TemporaryDirectory()
        let store = try DiskStore(.init(directory: directory.path, log: { _ in }))
        let body = [UInt8](repeating: 9, count: 30_000)
        let entry = try put(store, head("https://example.com/inline"), body)
        #expect(try store.location(of: entry.id).inline != nil, "30,000 bytes should be inline")
        func walBytes() -> Int64 {
            var status = stat()
            return lstat(directory.path + "/index.sqlite-wal", &status) == 0 ? Int64(status.st_size) : -1
        }
        let before = walBytes()
        var fields = entry.head.fields
        fields["X-Freshened"] = String(repeating: "y", count: 200)
        try store.update(entry.id, fields: fields, facts: [1, 2, 3, 4])
        let written = walBytes() - before
        #expect(written > 0 && written < 16_384, "the update wrote \(written) bytes to the WAL")
        #expect(try store.variants(of: entry.head.primaryKey).first?.head.fields["X-Freshened"]?.count == 200)
        #expect(try store.body(of: entry.id) == body)
    }

    @Test(
        "a disk store's own commits and head updates keep the variants it remembers of other keys (no index read), and apply to their own; another store's write makes it read again"
    )
    func ownWritesKeepRememberedVariants() throws {
        let directory = TemporaryDirectory()
        let configuration = DiskStore.Configuration(directory: directory.path, log: { _ in })
        let store = try DiskStore(configuration)
        let first = try put(store, head("https://example.com/1"), [1])
        let second = try put(store, head("https://example.com/2"), [2])
        // Remembered: the second's head, and the first's and an empty third's to change below.
        for key in ["https://example.com/1", "https://example.com/2", "https://example.com/3"] {
            _ = try store.variants(of: key)
        }
        #expect(try store.variants(of: second.head.primaryKey).first?.head.url == second.head.url)
        // The index changed behind the store's back, its change counter left alone: only a read
        // of the index shows it.
        do {
            let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
            try connection.execute("PRAGMA busy_timeout = 10000")
            try connection.execute("UPDATE entries SET url = 'https://example.com/edited' WHERE id = '\(second.id)'")
            connection.close()
        }
        var fields = first.head.fields
        fields["ETag"] = "\"v2\""
        try store.update(first.id, fields: fields, facts: [9])
        let third = try put(store, head("https://example.com/3"), [3])
        let replaced = try put(store, head("https://example.com/1", variant: "gzip"), [4])
        #expect(try store.variants(of: second.head.primaryKey).first?.head.url == second.head.url)
        let keys = [first.head.primaryKey, third.head.primaryKey]
        let remembered = try keys.map { try store.variants(of: $0) }
        #expect(remembered[0].map(\.id) == [first.id, replaced.id])
        #expect(remembered[0].first?.head.fields["ETag"] == "\"v2\"")
        // Their own keys as the index has them (opening a store counts as a write).
        let fresh = try DiskStore(configuration)
        for (key, remembered) in zip(keys, remembered) {
            let read = try fresh.variants(of: key)
            #expect(remembered.map(\.id) == read.map(\.id))
            #expect(remembered.map(\.head) == read.map(\.head))
        }
        // Another store's write moves the count past this store's own: it reads the index again.
        #expect(try store.variants(of: second.head.primaryKey).first?.head.url == "https://example.com/edited")
    }
}
