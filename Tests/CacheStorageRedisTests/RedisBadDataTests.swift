import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@_spi(Fuzzing) @testable import CacheStorageRedis

/// What a real Redis holds under the store's own keys that the store did not write: a value far
/// larger than anything it writes, a key of another type. Each is a miss that removes what is
/// there, never a stall, a memory spike, or a URL that can no longer be cached.
@Suite("RedisStore: bad data under its own keys", .serialized)
struct RedisBadDataTests {
    /// A store under a key prefix of its own, and its log lines: on the shared test Redis, or
    /// on `server`, a Redis of the test's own (the tests that make 64 MiB values in Redis hold
    /// it for a moment, which would slow down the other suites' commands on the shared one).
    private static func store(on server: RedisServer? = nil) throws -> (RedisStore, RedisServer, Locked<[String]>) {
        let server = try server ?? RedisServer.shared()
        let lines = Locked<[String]>([])
        var configuration = try RedisConfiguration(url: server.url)
        configuration.keyPrefix = "bad-\(UInt64.random(in: 0...UInt64.max)):"
        configuration.commandTimeout = 5  // beside other suites on two cores
        configuration.connectTimeout = 5
        configuration.log = { line in lines.withLock { $0.append(line) } }
        return (RedisStore(configuration), server, lines)
    }

    private static func body(_ size: Int) -> [UInt8] { (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) } }

    /// Puts a value of `size` bytes in field `field` of the hash `key`, made inside Redis.
    private static func hugeField(_ server: RedisServer, _ key: [UInt8], _ field: [UInt8], size: Int) throws {
        let script = "redis.call('HSET', KEYS[1], ARGV[1], string.rep('x', tonumber(ARGV[2]))) return 1"
        let reply = try server.command([bytes("EVAL"), bytes(script), bytes("1"), key, field, bytes(String(size))])
        #expect(reply == ":1", "\(reply)")
    }

    @Test("a bulk string longer than the client accepts is refused as soon as its length line arrives")
    func oversizedBulkRefusedAtItsLength() throws {
        var parser = RESPParser()
        // A 64 MiB value's length line, and a first byte of it: nothing more needs to arrive.
        Array("*2\r\n$1\r\na\r\n$67108864\r\nx".utf8).withUnsafeBytes { parser.feed($0) }
        #expect(throws: RESPParser.ProtocolError.self) { _ = try parser.next() }
    }

    @Test(
        "a reply still growing past 64 MiB is refused without buffering more, and an array counting more than 1,048,576 elements at its count line"
    )
    func oversizedReplyAndArrayRefused() throws {
        var parser = RESPParser()
        // Nine strings of 8 MiB, each accepted alone: past 64 MiB with the ninth still to come.
        Array("*9\r\n".utf8).withUnsafeBytes { parser.feed($0) }
        let value = Array("$\(8 << 20)\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 8 << 20) + [13, 10]
        for _ in 0..<8 { value.withUnsafeBytes { parser.feed($0) } }
        #expect(throws: RESPParser.ProtocolError.self) { _ = try parser.next() }
        var counting = RESPParser()
        Array("*2000000\r\n:1\r\n".utf8).withUnsafeBytes { counting.feed($0) }
        #expect(throws: RESPParser.ProtocolError.self) { _ = try counting.next() }
    }

    @Test(
        "a 16 MiB value in an entry's hash: the lookup is a miss at once, the hash is removed, one log line says what to do, and the next store and lookup work"
    )
    func oversizedFieldIsRemoved() async throws {
        try await offPool {
            let (store, server, lines) = try Self.store(on: try RedisServer())
            let body = Self.body(1000)
            try RedisLookupChannelTests.write(store, "https://a.test/big", body)
            try RedisLookupChannelTests.write(store, "https://a.test/other", body)
            let key = store.entryKey("https://a.test/big")
            // Twice what is accepted (made in Redis, which a larger one holds for seconds).
            try Self.hugeField(server, key, [], size: 16 << 20)
            let started = MonotonicClock.seconds()
            #expect(try store.variants(of: "https://a.test/big").isEmpty)
            #expect(MonotonicClock.seconds() - started < 1)
            #expect(try server.command([bytes("EXISTS"), key]) == ":0")
            let logged = lines.withLock { $0 }.filter { $0.contains("larger than") }
            #expect(logged.count == 1, "\(lines.withLock { $0 })")
            // The connection was closed; the others and the pool go on.
            #expect(try store.variants(of: "https://a.test/other").count == 1)
            try RedisLookupChannelTests.write(store, "https://a.test/big", body)
            #expect(try store.variants(of: "https://a.test/big").count == 1)
            withExtendedLifetime(server) {}
        }
    }

    @Test("a 64 MiB value under a body's chunk key: opening the body fails at once and the chunk key is removed")
    func oversizedChunkIsRemoved() async throws {
        try await offPool {
            let (store, server, lines) = try Self.store(on: try RedisServer())
            let entry = try RedisLookupChannelTests.write(store, "https://a.test/chunked", Self.body(1_500_000))
            let chunk =
                Array("\(store.configuration.keyPrefix){\(entry.id.rawValue.prefix(16).suffix(4))}c:".utf8)
                + Array("\(entry.id.rawValue):1".utf8)
            #expect(
                try server.command([bytes("SETRANGE"), chunk, bytes(String((64 << 20) - 1)), bytes("x")]) == ":67108864"
            )
            let started = MonotonicClock.seconds()
            #expect(throws: StorageError.self) { _ = try store.openBody(of: entry.id) }
            #expect(MonotonicClock.seconds() - started < 1)
            #expect(try server.command([bytes("EXISTS"), chunk]) == ":0")
            #expect(lines.withLock { $0 }.contains { $0.contains("larger than") }, "\(lines.withLock { $0 })")
            withExtendedLifetime(server) {}
        }
    }

    @Test("a string where an entry's hash belongs (WRONGTYPE): the lookup is a miss and removes it")
    func wrongTypeEntryKeyIsAMissAndRemoved() async throws {
        try await offPool {
            let (store, server, _) = try Self.store()
            let key = store.entryKey("https://a.test/typed")
            #expect(try server.command([bytes("SET"), key, bytes("not a hash")]) == "+OK")
            #expect(try store.variants(of: "https://a.test/typed").isEmpty)
            #expect(try server.command([bytes("EXISTS"), key]) == ":0")
        }
    }

    @Test(
        "a string where an entry's hash belongs (WRONGTYPE), met first by a commit: the response is stored",
        arguments: [1000, 1_500_000])
    func wrongTypeEntryKeyIsReplacedByACommit(size: Int) async throws {
        try await offPool {
            let (store, server, _) = try Self.store()
            let key = store.entryKey("https://a.test/typed")
            #expect(try server.command([bytes("SET"), key, bytes("not a hash")]) == "+OK")
            let body = Self.body(size)
            try RedisLookupChannelTests.write(store, "https://a.test/typed", body)
            #expect(try server.command([bytes("TYPE"), key]) == "+hash")
            let entries = try store.variants(of: "https://a.test/typed")
            #expect(entries.count == 1)
            let opened = try store.openBody(of: try #require(entries.first).id)
            #expect(try opened.readAll() == body)
        }
    }
}
