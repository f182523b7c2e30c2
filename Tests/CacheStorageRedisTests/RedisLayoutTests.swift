import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorageRedis

/// How an entry is laid out in a real Redis: one key per entry with an inline body, cut so that
/// Redis allocates little for it; what Redis holds that the store did not write as it is now
/// (earlier layouts, damaged or misplaced records) is a miss, never a crash or a wrong body.
@Suite("RedisStore: the entry layout in Redis")
struct RedisLayoutTests {
    /// A store on the shared test Redis under a key prefix of its own.
    private static func store() throws -> (RedisStore, RedisServer, String) {
        let server = try RedisServer.shared()
        var configuration = try RedisConfiguration(url: server.url)
        configuration.keyPrefix = "layout-\(UInt64.random(in: 0...UInt64.max)):"
        configuration.commandTimeout = 5  // beside other suites on two cores
        configuration.connectTimeout = 5
        return (RedisStore(configuration), server, configuration.keyPrefix)
    }

    private static func keys(_ server: RedisServer, _ prefix: String) throws -> [String] {
        try server.cli(["--scan", "--pattern", prefix + "*"]).split(separator: "\n").map(String.init).sorted()
    }

    /// An integer reply (`:42`) as a number.
    private static func integer(_ reply: String) -> Int? { reply.first == ":" ? Int(reply.dropFirst()) : nil }

    @discardableResult
    private static func write(_ store: RedisStore, _ key: String, _ body: [UInt8]) throws -> StoredEntry {
        let now = Timestamp(secondsSince1970: Date().timeIntervalSince1970)
        let facts = StoredResponseFacts(
            status: 200, requestTime: now, responseTime: now, date: now, freshnessLifetime: 300,
            lifetimeSource: .maxAge)
        let writer = try store.makeWriter(
            for: EntryHead(
                primaryKey: key, url: key, status: 200, fields: ["Content-Type": "application/octet-stream"],
                facts: facts.serialized()))
        try writer.append(body)
        return try writer.commit()
    }

    private static func body(_ size: Int) -> [UInt8] { (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) } }

    @Test("jemalloc's size classes, and where a body is cut so that each piece fills one of at most 14 KiB")
    func sizeClasses() {
        #expect(
            [1, 8, 9, 16, 17, 128, 129, 160, 161].map(InlineLayout.sizeClass) == [8, 8, 16, 16, 32, 128, 160, 160, 192])
        #expect(
            [14_336, 16_384, 16_385, 20_480, 20_481, 32_769].map(InlineLayout.sizeClass) == [
                14_336, 16_384, 20_480, 20_480, 24_576, 40_960,
            ])
        // A 16,384-byte string needs 16,390 bytes (a 5-byte header, a NUL): 20 KiB. Cut into
        // 14,330 bytes (14 KiB exactly) and 2,042 (2 KiB exactly), 12 bytes go with the record.
        #expect(InlineLayout.allocation(16_384) == 20_480)
        #expect(InlineLayout.allocation(InlineLayout.pieceLimit) == 14_336)
        #expect(InlineLayout.allocation(2_042) == 2_048)
        #expect(InlineLayout.pieces(bodySize: 16_384, recordSize: 300) == [14_330, 2_042])
        // A small body goes with the record, as does a rest whose cut would save nothing.
        #expect(InlineLayout.pieces(bodySize: 100, recordSize: 300) == [])
        #expect(InlineLayout.pieces(bodySize: 14_330, recordSize: 300) == [14_330])
        #expect(InlineLayout.pieces(bodySize: 14_340, recordSize: 300) == [14_330])
        for size in [0, 1, 100, 5_000, 16_384, 20_000, 100_000, 262_144] {
            let pieces = InlineLayout.pieces(bodySize: size, recordSize: 300)
            let rest = size - pieces.reduce(0, +)
            let cost = InlineLayout.allocation(300 + rest) + pieces.map(InlineLayout.allocation).reduce(0, +)
            #expect(rest >= 0 && pieces.allSatisfy { $0 <= InlineLayout.pieceLimit }, "\(size): \(pieces)")
            #expect(Double(cost) <= Double(size + 300) * 1.06 + 64, "\(size): \(pieces), \(cost) bytes")
        }
    }

    @Test("an entry with a 16 KB body is one key with one TTL: its record and body in one hash, in 16 KiB and a little")
    func oneKeyPerEntry() async throws {
        try await offPool {
            let (store, server, prefix) = try Self.store()
            let body = Self.body(16_384)
            let stored = try Self.write(store, "https://a.example/16k", body)
            let keys = try Self.keys(server, prefix)
            try #require(keys.count == 1, "\(keys)")
            let key = keys[0]
            #expect(key.contains("}e:"))
            #expect(try server.command("TYPE", key) == "+hash")
            let ttl = Self.integer(try server.command("PTTL", key)) ?? -1
            #expect(ttl > 290_000 && ttl <= (300 + 86_400) * 1000, "PTTL \(ttl)")
            // The record (with the body's last 12 bytes) and two pieces.
            #expect(try server.command("HLEN", key) == ":3")
            for (index, length) in [14_330, 2_042].enumerated() {
                let field = RedisStore.bodyField(stored.id, index)
                #expect(try server.command([Array("HSTRLEN".utf8), Array(key.utf8), field]) == ":\(length)")
            }
            let usage = Self.integer(try server.command("MEMORY", "USAGE", key)) ?? .max
            #expect(usage < 17_500, "MEMORY USAGE \(usage)")

            // Another store (nothing of it remembered) reads it whole.
            let other = RedisStore(store.configuration)
            let found = try #require(try other.variants(of: "https://a.example/16k").first)
            #expect(found.id == stored.id)
            #expect(try other.openBody(of: stored.id).readAll() == body)
            #expect(try RedisStore(store.configuration).openBody(of: stored.id).readAll() == body)

            // A small body is the record's value itself: one field.
            let small = try Self.write(store, "https://a.example/small", Self.body(100))
            let smallKey = store.entryKey("https://a.example/small")
            #expect(try server.command([Array("HLEN".utf8), smallKey]) == ":1")
            #expect(try RedisStore(store.configuration).openBody(of: small.id).readAll() == Self.body(100))
        }
    }

    @Test("a freshening keeps the body; a replaced or removed entry leaves no field or key behind")
    func replacementLeavesNothing() async throws {
        try await offPool {
            let (store, server, prefix) = try Self.store()
            let key = "https://a.example/r"
            let first = try Self.write(store, key, Self.body(16_384))
            try store.update(first.id, fields: ["ETag": "\"2\""], facts: first.head.facts)
            let reader = RedisStore(store.configuration)
            #expect(try reader.variants(of: key).first?.head.fields["ETag"] == "\"2\"")
            #expect(try reader.openBody(of: first.id).readAll() == Self.body(16_384))

            // Replaced by a body that goes with its record: the first one's field goes with it.
            let second = try Self.write(store, key, Self.body(100))
            let hash = store.entryKey(key)
            #expect(try server.command([Array("HLEN".utf8), hash]) == ":1")
            #expect(try RedisStore(store.configuration).openBody(of: second.id).readAll() == Self.body(100))
            #expect(throws: StorageError.self) { try RedisStore(store.configuration).openBody(of: first.id) }

            try store.remove(second.id)
            #expect(try Self.keys(server, prefix).isEmpty)
        }
    }

    @Test("evicting an entry's key takes the whole entry: a miss, no body left behind")
    func evictionTakesTheWholeEntry() async throws {
        try await offPool {
            let (store, server, prefix) = try Self.store()
            let stored = try Self.write(store, "https://a.example/e", Self.body(16_384))
            // What allkeys-lru does to the key.
            #expect(try server.command([Array("DEL".utf8), store.entryKey("https://a.example/e")]) == ":1")
            #expect(try Self.keys(server, prefix).isEmpty)
            #expect(try store.variants(of: "https://a.example/e").isEmpty)
            let error = #expect(throws: StorageError.self) {
                try RedisStore(store.configuration).openBody(of: stored.id)
            }
            #expect(error?.kind == .notFound)
        }
    }

    /// A record as version 2 wrote it (under `P{T}v:K`, with its body's description under
    /// `P{T}m:ID`), byte for byte.
    private static func versionTwoRecord(id: String, key: String, size: Int, checksum: UInt64) -> [UInt8] {
        var writer = ByteWriter()
        writer.byte(2)
        for text in [id, key, "", key] { writer.string(text) }
        writer.varint(200)
        writer.blob(HeaderFields().serialized())
        writer.blob([])
        writer.byte(StoragePolicy.allowed.rawValue)
        writer.byte(0)
        writer.byte(1)
        writer.varint(UInt64(size))
        writer.double(0)
        writer.double(0)
        writer.varint(0)
        writer.byte(0)
        writer.varint(0)
        writer.byte(0)
        writer.byte(1)
        writer.fixed64(checksum)
        writer.varint(0)
        return writer.bytes
    }

    @Test("entries of the earlier layout and damaged or misplaced records are misses, removed where they are read")
    func badRecordsAreMisses() async throws {
        try await offPool {
            let (store, server, prefix) = try Self.store()
            let old = "https://a.example/old"
            let body = Self.body(1_000)
            // The earlier layout: a variants hash by URL and a description key.
            let tag = store.tag(of: old)
            let id = tag + String(repeating: "0", count: 28)
            let oldHash = Array("\(prefix){\(tag)}v:\(old)".utf8)
            let record = Self.versionTwoRecord(id: id, key: old, size: body.count, checksum: XXH64.hash(body))
            #expect(
                try server.command([Array("HSET".utf8), oldHash, [], record, [0] + Array("b:\(id)".utf8), body]) == ":2"
            )
            #expect(try server.command("SET", "\(prefix){\(tag)}m:\(id)", "description") == "+OK")
            #expect(try store.variants(of: old).isEmpty)
            #expect(try store.entries().isEmpty)

            // Under the current key: a record of version 2, junk, a body field of no record, a
            // record claiming a huge inline body, one whose body field is cut short, and one
            // that belongs to another URL.
            let key = "https://a.example/new"
            let hash = store.entryKey(key)
            let good = try Self.write(store, key, Self.body(16_384))
            for (name, value) in [
                (Array("v2".utf8), record), (Array("junk".utf8), Array("junk".utf8)),
                ([0] + Array(EntryID().rawValue.utf8), Self.body(100)),
            ] {
                #expect(try server.command([Array("HSET".utf8), hash, name, value]) == ":1")
            }
            // A record that says its inline body is 2^60 bytes, almost all of it in one piece.
            let hashText = String(decoding: hash, as: UTF8.self).suffix(16)
            let huge = EntryRecord(
                entry: StoredEntry(
                    id: try #require(EntryID(rawValue: hashText + String(repeating: "0", count: 16))),
                    head: EntryHead(primaryKey: key, variantKey: "huge", url: key, status: 200, fields: [], facts: []),
                    bodySize: 1 << 60, storedAt: 0, lastAccess: 0),
                expiresAt: nil, body: .inline(checksum: 0, pieces: [(1 << 60) - 5], tail: [1, 2, 3, 4, 5]))
            #expect(try server.command([Array("HSET".utf8), hash, Array("huge".utf8), huge.serialized()]) == ":1")
            #expect(try RedisStore(store.configuration).variants(of: key).map(\.id) == [good.id])
            #expect(try server.command([Array("HLEN".utf8), hash]) == ":3", "the bad fields were not removed")

            #expect(
                try server.command([Array("HSET".utf8), hash, RedisStore.bodyField(good.id, 1), Array("cut".utf8)])
                    == ":0"
            )
            #expect(try RedisStore(store.configuration).variants(of: key).isEmpty)
            #expect(try server.command([Array("EXISTS".utf8), hash]) == ":0", "the broken entry was not removed")

            // A whole record and body copied under another URL's key: not that URL's entry.
            let copied = try Self.write(store, key, Self.body(16_384))
            let other = store.entryKey("https://a.example/other")
            for field in [[], RedisStore.bodyField(copied.id, 0), RedisStore.bodyField(copied.id, 1)] {
                let value = try #require(try store.command([Array("HGET".utf8), hash, field]))
                #expect(try server.command([Array("HSET".utf8), other, field, value]) == ":1")
            }
            #expect(try store.variants(of: "https://a.example/other").isEmpty)
            #expect(try server.command([Array("EXISTS".utf8), other]) == ":0")
            #expect(try store.entries().map(\.id) == [copied.id])
            #expect(try RedisStore(store.configuration).openBody(of: copied.id).readAll() == Self.body(16_384))
        }
    }

    @Test("an inline body altered in Redis fails its checksum: not served, and removed")
    func alteredBodyIsRemoved() async throws {
        try await offPool {
            let (store, server, prefix) = try Self.store()
            let stored = try Self.write(store, "https://a.example/x", Self.body(16_384))
            var altered = Array(Self.body(16_384).prefix(InlineLayout.pieceLimit))
            altered[5_000] ^= 0xFF
            let hash = store.entryKey("https://a.example/x")
            #expect(
                try server.command([Array("HSET".utf8), hash, RedisStore.bodyField(stored.id, 0), altered]) == ":0")
            let reader = RedisStore(store.configuration)
            #expect(try reader.variants(of: "https://a.example/x").count == 1)
            let error = #expect(throws: StorageError.self) { try reader.openBody(of: stored.id) }
            #expect(error?.kind == .corrupted)
            #expect(try Self.keys(server, prefix).isEmpty)
        }
    }
}
