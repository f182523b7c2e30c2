import CacheSemantics
import CacheStorage
import CacheTestSupport
import Testing

@_spi(Fuzzing) @testable import CacheStorageRedis

@Suite("CacheStorageRedis: the RESP client, addresses and hash slots")
struct RedisClientTests {
    private func parse(_ text: String) throws -> [RESPValue] {
        var parser = RESPParser()
        Array(text.utf8).withUnsafeBytes { parser.feed($0) }
        var values: [RESPValue] = []
        while let value = try parser.next() { values.append(value) }
        return values
    }

    @Test("replies of every RESP2 type are read, also when they arrive a byte at a time")
    func repliesParse() throws {
        let text =
            "+OK\r\n-ERR wrong\r\n:42\r\n:-7\r\n$5\r\nhe\r\no\r\n$-1\r\n*-1\r\n*2\r\n$1\r\na\r\n*1\r\n:1\r\n$0\r\n\r\n"
        let expected: [RESPValue] = [
            .simple("OK"), .error("ERR wrong"), .integer(42), .integer(-7), .bulk(Array("he\r\no".utf8)), .null, .null,
            .array([.bulk([UInt8(ascii: "a")]), .array([.integer(1)])]), .bulk([]),
        ]
        #expect(try parse(text) == expected)
        var parser = RESPParser()
        var values: [RESPValue] = []
        for byte in Array(text.utf8) {
            [byte].withUnsafeBytes { parser.feed($0) }
            while let value = try parser.next() { values.append(value) }
        }
        #expect(values == expected)
    }

    @Test(
        "a reply that breaks the protocol is an error, never a crash or a huge allocation",
        arguments: [
            "?what\r\n", ":12a\r\n", "$abc\r\n", "$-5\r\n", "$3\r\nabcXY", "*-2\r\n", ":99999999999999999999999\r\n",
            "$999999999999\r\n", "*99999999999\r\n", String(repeating: "*1\r\n", count: 100) + ":1\r\n",
        ])
    func malformedReplies(text: String) {
        #expect(throws: RESPParser.ProtocolError.self) { _ = try parse(text) }
    }

    @Test("an incomplete reply waits for more bytes")
    func incompleteReplies() throws {
        for text in ["+OK", "$5\r\nab", "*2\r\n:1\r\n", ":4"] { #expect(try parse(text).isEmpty) }
    }

    @Test("commands are written as arrays of bulk strings")
    func encoding() {
        var buffer: [UInt8] = []
        RESPEncoder.append([Array("SET".utf8), Array("k".utf8), []], to: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n")
    }

    @Test("Redis Cluster's hash slots: CRC16/XMODEM, hash tags between the first { and the next }")
    func hashSlots() {
        #expect(HashSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(HashSlot.slot(of: Array("foo".utf8)) == 12182)
        #expect(HashSlot.slot(of: Array("{user1000}.following".utf8)) == HashSlot.slot(of: Array("user1000".utf8)))
        // An empty tag does not count: the whole key is hashed.
        #expect(HashSlot.slot(of: Array("foo{}{bar}".utf8)) == HashSlot.slot(of: Array("foo{}{bar}".utf8)))
        #expect(HashSlot.slot(of: Array("foo{}{bar}".utf8)) != HashSlot.slot(of: Array("bar".utf8)))
    }

    @Test("redis:// URLs with user, password, port and database; Cluster node lists; bad ones say what to write")
    func addresses() throws {
        let full = try RedisConfiguration(url: "redis://cache:p%40ss@redis.internal:6380/2")
        #expect(full.nodes == [.init(host: "redis.internal", port: 6380)])
        #expect(full.user == "cache" && full.password == "p@ss" && full.database == 2 && !full.isCluster)
        let bare = try RedisConfiguration(url: "redis://127.0.0.1")
        #expect(bare.nodes == [.init(host: "127.0.0.1", port: 6379)] && bare.password == nil)
        let passwordOnly = try RedisConfiguration(url: "redis://:secret@[::1]:7000")
        #expect(passwordOnly.user == nil && passwordOnly.password == "secret")
        #expect(passwordOnly.nodes == [.init(host: "::1", port: 7000)])
        let cluster = try RedisConfiguration(clusterNodes: "127.0.0.1:7000,127.0.0.1:7001")
        #expect(cluster.isCluster && cluster.nodes.count == 2)
        for bad in ["http://x:1", "redis://host:99999", "redis://host:port", "redis://host/x", "redis://"] {
            #expect(throws: RedisConfiguration.InvalidAddress.self) { try RedisConfiguration(url: bad) }
        }
        #expect(throws: RedisConfiguration.InvalidAddress.self) { try RedisConfiguration(clusterNodes: ",") }
    }

    @Test("an unreachable Redis fails fast with what to do, and is not tried again until its backoff ends")
    func unreachable() throws {
        var configuration = RedisConfiguration(nodes: [.init(host: "127.0.0.1", port: 1)])
        configuration.keyPrefix = "unreachable:"
        let store = RedisStore(configuration)
        #expect(throws: StorageError.self) { try store.checkConnection() }
        #expect(!store.isReachable)
        let error = #expect(throws: StorageError.self) { _ = try store.variants(of: "k") }
        #expect(error?.message.contains("unreachable") == true)
        #expect(store.metrics.errors == 1)
    }

    @Test("password authentication: the right password opens, a wrong one is a clear error")
    func authentication() async throws {
        try await offPool {
            let redis = try RedisServer(arguments: ["--requirepass", "s3cret"])
            var right = try RedisConfiguration(url: "redis://:s3cret@\(redis.address)")
            right.keyPrefix = "auth:"
            right.commandTimeout = 1
            try RedisStore(right).checkConnection()
            let wrong = try RedisConfiguration(url: "redis://:nope@\(redis.address)")
            let error = #expect(throws: StorageError.self) { try RedisStore(wrong).checkConnection() }
            #expect(error?.message.contains("WRONGPASS") == true || error?.message.contains("invalid") == true)
            // An ACL user.
            try redis.cli(["-a", "s3cret", "ACL", "SETUSER", "cache", "on", ">pw", "~*", "&*", "+@all"])
            try RedisStore(try RedisConfiguration(url: "redis://cache:pw@\(redis.address)")).checkConnection()
        }
    }

    @Test("a body that reads as an entry record is never listed as an entry (ls reads records, not bodies)")
    func bodyLookingLikeARecord() async throws {
        try await offPool {
            var configuration = try RedisConfiguration(url: try RedisServer.shared().url)
            configuration.keyPrefix = "lookalike-\(UInt64.random(in: 0...UInt64.max)):"
            configuration.commandTimeout = 1  // beside other suites on two cores, 50 ms is sometimes passed
            let store = RedisStore(configuration)
            let fake = EntryRecord(
                entry: StoredEntry(
                    id: EntryID(),
                    head: EntryHead(
                        primaryKey: "https://evil.example/", url: "https://evil.example/", status: 200, fields: [],
                        facts: []),
                    bodySize: 0, storedAt: 0, lastAccess: 0),
                expiresAt: nil, body: .inline(checksum: 0, pieces: [], tail: []))
            let writer = try store.makeWriter(
                for: EntryHead(
                    primaryKey: "https://a.example/", url: "https://a.example/", status: 200, fields: [], facts: []))
            try writer.append(fake.serialized())
            try writer.commit()
            #expect(try store.entries().map(\.head.url) == ["https://a.example/"])
            #expect(store.totals().entries == 1)
        }
    }
}
