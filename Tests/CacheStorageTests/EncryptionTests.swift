import CacheCrypto
import CacheSemantics
import CacheStorageRedis
import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Encryption at rest of the disk store (issue 32): what the files hold, what a wrong key or a
/// tampered file does, and rekeying.
@Suite("CacheStorage: encryption at rest")
struct EncryptionTests {
    static let keyA = EncryptionKey(bytes: Array(repeating: 0xA1, count: 32))!
    static let keyB = EncryptionKey(bytes: Array(repeating: 0xB2, count: 32))!

    static func configuration(_ directory: String, key: EncryptionKey?) -> DiskStore.Configuration {
        var configuration = DiskStore.Configuration(directory: directory, inlineBodyLimit: 1024, log: { _ in })
        configuration.encryptionKey = key
        return configuration
    }

    /// A body whose text is easy to find: `marker` over and over, `size` bytes in all.
    static func body(_ marker: String, size: Int) -> [UInt8] {
        let unit = Array(marker.utf8)
        return (0..<size).map { unit[$0 % unit.count] }
    }

    static func head(_ url: String, tag: String) -> EntryHead {
        EntryHead(
            primaryKey: url, url: url, status: 200, fields: ["X-Secret-Header": "header-\(url)"], facts: [1, 2, 3],
            userInfo: Array("user-info-\(url)".utf8), tags: [tag])
    }

    /// Every file under `directory` (the index, its WAL and shared memory, the body files).
    static func files(under directory: String) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: directory)
        var files: [String] = []
        while let name = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let path = directory + "/" + name
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
                files.append(path)
            }
        }
        return files
    }

    /// The files under `directory` holding `needle`, as `grep -r` would find them.
    static func grep(_ needle: String, under directory: String) -> [String] {
        let bytes = Data(needle.utf8)
        return files(under: directory).filter { path in
            (FileManager.default.contents(atPath: path)?.range(of: bytes)) != nil
        }
    }

    @Test("with a key, no file of the cache directory (index, WAL, bodies) holds a URL, a field, a tag or body text")
    func nothingInTheClear() throws {
        let directory = TemporaryDirectory("encrypted-grep")
        let urls = ["https://secret.example/inline-page", "https://secret.example/file-page"]
        do {
            let store = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
            try writeEntry(store, Self.head(urls[0], tag: "tag-one"), Self.body("INLINE-BODY-TEXT ", size: 600))
            try writeEntry(store, Self.head(urls[1], tag: "tag-two"), Self.body("FILE-BODY-TEXT ", size: 200_000))
            try store.update(
                try #require(try store.variants(of: urls[0]).first).id, fields: ["X-Updated": "updated-field"],
                facts: [1])
            #expect(try store.body(of: try #require(try store.variants(of: urls[1]).first).id).count == 200_000)
        }
        let files = Self.files(under: directory.path)
        #expect(files.contains { $0.hasSuffix("index.sqlite-wal") } || files.contains { $0.hasSuffix("index.sqlite") })
        for needle in urls + [
            "secret.example", "INLINE-BODY-TEXT", "FILE-BODY-TEXT", "X-Secret-Header", "header-https", "user-info",
            "tag-one", "tag-two", "updated-field",
        ] {
            #expect(Self.grep(needle, under: directory.path).isEmpty, "\(needle) found in the clear")
        }
        // The same store without a key holds them all: the check above can fail.
        let plain = TemporaryDirectory("plain-grep")
        do {
            let store = try DiskStore(Self.configuration(plain.path, key: nil))
            try writeEntry(store, Self.head(urls[1], tag: "tag-two"), Self.body("FILE-BODY-TEXT ", size: 200_000))
        }
        for needle in [urls[1], "FILE-BODY-TEXT", "X-Secret-Header", "user-info", "tag-two"] {
            #expect(!Self.grep(needle, under: plain.path).isEmpty, "\(needle) not found in a store in the clear")
        }
    }

    @Test("an encrypted store reads back heads and bodies, by key, tag and URL prefix, and after reopening")
    func readsBack() throws {
        let directory = TemporaryDirectory("encrypted-read")
        let body = Self.body("0123456789abcdef", size: 300_000)
        do {
            let store = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
            try writeEntry(store, Self.head("https://a.example/x", tag: "t"), body, chunk: 70_001)
            try writeEntry(store, Self.head("https://b.example/y", tag: "t"), [])
        }
        let store = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
        let entry = try #require(try store.variants(of: "https://a.example/x").first)
        #expect(entry.head == Self.head("https://a.example/x", tag: "t"))
        #expect(try store.body(of: entry.id) == body)
        // Ranges within a block, across blocks, and the last partial block.
        for range: ClosedRange<Int64> in [0...0, 10...20, 65_530...65_545, 131_000...200_000, 299_990...299_999] {
            #expect(
                try store.body(of: entry.id, range: range) == Array(body[Int(range.lowerBound)...Int(range.upperBound)])
            )
        }
        #expect(try store.body(of: try #require(try store.variants(of: "https://b.example/y").first).id) == [])
        #expect(Set(try store.entries().map(\.head.url)) == ["https://a.example/x", "https://b.example/y"])
        #expect(try store.remove(urlPrefix: "https://a.") == 1)
        #expect(try store.remove(tag: "t") == 1)
        #expect(store.totals().entries == 0)
    }

    @Test("opening without the key, with another key, or a store in the clear with a key says so, never 'corrupt'")
    func keyMismatchesAreClearErrors() throws {
        let directory = TemporaryDirectory("encrypted-keys")
        _ = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
        let attempts: [(EncryptionKey?, String)] = [
            (nil, "is encrypted and no key was given"), (Self.keyB, "does not open the cache"),
        ]
        for (key, expected) in attempts {
            #expect {
                _ = try DiskStore(Self.configuration(directory.path, key: key))
            } throws: { error in
                let error = error as? StorageError
                return error?.kind == .encryption && error?.message.contains(expected) == true
                    && error?.message.contains("encrypted-keys-") == true && error?.message.contains("corrupt") == false
            }
        }
        let plain = TemporaryDirectory("plain-keys")
        _ = try DiskStore(Self.configuration(plain.path, key: nil))
        #expect {
            _ = try DiskStore(Self.configuration(plain.path, key: Self.keyA))
        } throws: { error in
            (error as? StorageError)?.kind == .encryption
                && (error as? StorageError)?.message.contains("made without encryption") == true
        }
        // Nothing was moved aside: the right key still opens the store.
        _ = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
        #expect(!Self.files(under: directory.path).contains { $0.contains("unusable") })
    }

    /// Damage to a body file: a flipped bit, a block cut off, blocks swapped, another entry's
    /// file in its place. Each is a miss that removes the entry, never a wrong byte.
    @Test(
        "a body block altered, truncated, reordered or replayed from another entry is a miss and the entry is removed")
    func tamperedBodiesAreMisses() throws {
        let size = 3 * BodySealing.blockSize + 100
        let blockOnDisk = BodySealing.blockSize + BodySealing.overhead
        let damages: [(String, (String, String) throws -> Void)] = [
            (
                "a flipped bit",
                { path, _ in
                    var bytes = try #require(FileManager.default.contents(atPath: path))
                    bytes[blockOnDisk + 100] ^= 1
                    try bytes.write(to: URL(fileURLWithPath: path))
                }
            ),
            ("the last block cut off", { path, _ in #expect(truncate(path, off_t(3 * blockOnDisk)) == 0) }),
            (
                "two blocks swapped",
                { path, _ in
                    let bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
                    let swapped =
                        bytes[blockOnDisk..<(2 * blockOnDisk)] + bytes[..<blockOnDisk] + bytes[(2 * blockOnDisk)...]
                    try Data(swapped).write(to: URL(fileURLWithPath: path))
                }
            ),
            (
                "another entry's file",
                { path, other in
                    unlink(path)
                    #expect(link(other, path) == 0)
                }
            ),
        ]
        for (damage, apply) in damages {
            let directory = TemporaryDirectory("encrypted-tamper")
            let store = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
            let victim = try writeEntry(
                store, Self.head("https://v.example/", tag: "t"), Self.body("victim", size: size))
            let other = try writeEntry(
                store, Self.head("https://o.example/", tag: "t"), Self.body("other!", size: size))
            let bodies = directory.path + "/bodies/"
            try apply(bodies + victim.id.rawValue, bodies + other.id.rawValue)
            #expect(throws: StorageError.self, "\(damage)") {
                let body = try store.openBody(of: victim.id)
                _ = try body.read(0...Int64(size - 1))
            }
            #expect(try store.variants(of: "https://v.example/").isEmpty, "\(damage): the entry was not removed")
        }
    }

    @Test("a body being streamed when a later block fails to authenticate ends there: the blocks before are served")
    func streamedBodyEndsAtTheFailingBlock() throws {
        let directory = TemporaryDirectory("encrypted-stream")
        let store = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
        let body = Self.body("streamed", size: 3 * BodySealing.blockSize)
        let entry = try writeEntry(store, Self.head("https://s.example/", tag: "t"), body)
        let streamed = try store.openBody(of: entry.id)
        let path = directory.path + "/bodies/" + entry.id.rawValue
        // In place: the body already open reads the same file.
        let file = open(path, O_RDWR)
        try #require(file >= 0)
        let offset = off_t(2 * (BodySealing.blockSize + BodySealing.overhead) + 5)
        var byte: UInt8 = 0
        #expect(pread(file, &byte, 1, offset) == 1)
        byte ^= 0x80
        #expect(pwrite(file, &byte, 1, offset) == 1)
        close(file)
        let block = Int64(BodySealing.blockSize)
        #expect(try streamed.read(0...(2 * block - 1)) == Array(body[..<(2 * BodySealing.blockSize)]))
        #expect(throws: StorageError.self) { try streamed.read((2 * block)...(3 * block - 1)) }
        #expect(try store.variants(of: "https://s.example/").isEmpty)
    }

    @Test("a sealed head or inline body moved to another row does not open there")
    func rowsAreBoundToTheirEntry() throws {
        let directory = TemporaryDirectory("encrypted-rows")
        let store = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
        let first = try writeEntry(store, Self.head("https://1.example/", tag: "t"), Self.body("one", size: 100))
        let second = try writeEntry(store, Self.head("https://2.example/", tag: "t"), Self.body("two", size: 100))
        // Another process's connection rewrites the first row with the second's sealed values.
        let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: false)
        try connection.execute(
            """
            UPDATE entries SET (primary_key, fields) = (SELECT primary_key, fields FROM entries
                WHERE id = '\(second.id.rawValue)') WHERE id = '\(first.id.rawValue)';
            UPDATE inline_bodies SET body = (SELECT body FROM inline_bodies WHERE id = '\(second.id.rawValue)')
                WHERE id = '\(first.id.rawValue)';
            """)
        connection.close()
        store.changes?.bump()
        #expect(try store.entry(first.id) == nil)
        #expect(try store.variants(of: "https://2.example/").map(\.id) == [second.id])
        #expect(throws: StorageError.self) { try store.body(of: first.id) }
    }

    @Test("rekey re-encrypts every entry under a new key, from and into the clear too, keeping pins and hits")
    func rekeying() throws {
        let directory = TemporaryDirectory("encrypted-rekey")
        let bodies = (0..<6).map { Self.body("entry \($0) ", size: $0 * 40_000) }
        do {
            let store = try DiskStore(Self.configuration(directory.path, key: nil))
            for (index, body) in bodies.enumerated() {
                try writeEntry(store, Self.head("https://r.example/\(index)", tag: "tag\(index)"), body)
            }
            #expect(try store.setPinned(true, primaryKey: "https://r.example/3") == 1)
        }
        for (from, to) in [(nil, Self.keyA), (Self.keyA, Self.keyB), (Self.keyB, nil)]
            as [(EncryptionKey?, EncryptionKey?)]
        {
            let result = try DiskStore.rekey(Self.configuration(directory.path, key: from), to: to)
            #expect(result == DiskStore.RekeyResult(entries: bodies.count, dropped: 0))
            #expect(throws: StorageError.self) { try DiskStore(Self.configuration(directory.path, key: from)) }
            let store = try DiskStore(Self.configuration(directory.path, key: to))
            for (index, body) in bodies.enumerated() {
                let entry = try #require(try store.variants(of: "https://r.example/\(index)").first)
                #expect(entry.head == Self.head("https://r.example/\(index)", tag: "tag\(index)"))
                #expect(try store.body(of: entry.id) == body)
                #expect(entry.isPinned == (index == 3))
            }
            #expect(try store.remove(tag: "tag5") == 1)
            try writeEntry(store, Self.head("https://r.example/5", tag: "tag5"), bodies[5])
            // Only the new body files are left.
            #expect(store.sweep() == 0)
            let inFiles = try store.entries().filter { $0.bodySize > 1024 }.map(\.id.rawValue)
            #expect(
                Set(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/bodies")) == Set(inFiles))
        }
    }

    @Test("the key of the other side of a rekey is named as such")
    func rekeyedKeysAreNamed() throws {
        let directory = TemporaryDirectory("encrypted-rekey-names")
        _ = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
        _ = try DiskStore.rekey(Self.configuration(directory.path, key: Self.keyA), to: Self.keyB)
        #expect {
            _ = try DiskStore(Self.configuration(directory.path, key: Self.keyA))
        } throws: { error in
            (error as? StorageError)?.message.contains("before it was rekeyed: give its new key") == true
        }
    }

    @Test("with a key, a DUMP of every Redis key (and the key names) holds no URL, field, tag or body text")
    func redisHoldsNothingInTheClear() async throws {
        try await offPool {
            let server = try RedisServer.shared()
            var configuration = try StoreKind.redisConfiguration(cluster: false)
            configuration.encryptionKey = Self.keyA
            let store = RedisStore(configuration)
            // Inline in the hash (small, and in pieces), and in chunks of their own.
            for (path, size) in [("small", 600), ("pieces", 100_000), ("chunks", 2_500_000)] {
                try writeEntry(
                    store, Self.head("https://secret.example/\(path)", tag: "tag-\(path)"),
                    Self.body("REDIS-BODY-TEXT ", size: size))
                let entry = try #require(try store.variants(of: "https://secret.example/\(path)").first)
                #expect(try store.body(of: entry.id) == Self.body("REDIS-BODY-TEXT ", size: size))
            }
            let keys = try server.cli(["--raw", "KEYS", configuration.keyPrefix + "*"]).split(separator: "\n")
            #expect(keys.count >= 5, "\(keys)")
            for key in keys {
                let dump = try server.command("DUMP", String(key))
                for needle in ["secret.example", "REDIS-BODY-TEXT", "X-Secret-Header", "user-info", "tag-"] {
                    #expect(!dump.contains(needle) && !key.contains(needle), "\(needle) in \(key)")
                }
            }
            #expect(try store.remove(tag: "tag-pieces") == 1)
            #expect(try store.remove(urlPrefix: "https://secret.example/sm") == 1)
            #expect(try store.entries().map(\.head.url) == ["https://secret.example/chunks"])
            // Another key reads nothing.
            var other = configuration
            other.encryptionKey = Self.keyB
            #expect(try RedisStore(other).variants(of: "https://secret.example/chunks").isEmpty)
        }
    }

    @Test("caches sharing an encrypted Redis tier hear each other's invalidations (sealed on the channel)")
    func sharedStoresInvalidateEachOther() async throws {
        try await offPool {
            var configuration = try StoreKind.redisConfiguration(cluster: false)
            configuration.encryptionKey = Self.keyA
            let writer = SharedStore(redis: RedisStore(configuration), localCapacity: 1 << 20)
            let reader = SharedStore(redis: RedisStore(configuration), localCapacity: 1 << 20)
            let url = "https://shared.example/page"
            try writeEntry(writer, Self.head(url, tag: "t"), Self.body("shared", size: 500))
            // Listening: the reader's local tier answers for Redis until an invalidation says otherwise.
            var heard = false
            for _ in 0..<100 where !heard {
                heard = try reader.variants(of: url).count == 1
                if !heard { usleep(50_000) }
            }
            #expect(heard)
            #expect(try writer.remove(primaryKey: url) == 1)
            var invalidated = false
            for _ in 0..<100 where !invalidated {
                invalidated = try reader.variants(of: url).isEmpty
                if !invalidated { usleep(50_000) }
            }
            #expect(invalidated, "the reader still answers with the removed entry")
        }
    }

    @Test("a key file is 32 bytes or 64 hex digits (a newline may follow); anything else is refused with what it holds")
    func keyFiles() throws {
        let directory = TemporaryDirectory("key-files")
        let raw = [UInt8](0..<32)
        let hex = raw.map { String(format: "%02x", $0) }.joined()
        let cases: [(String, [UInt8], Bool)] = [
            ("raw", raw, true), ("hex", Array(hex.utf8), true), ("hex-newline", Array((hex + "\n").utf8), true),
            ("upper", Array(hex.uppercased().utf8), true), ("short", Array(raw.dropLast()), false),
            ("hex-short", Array(hex.dropLast(2).utf8), false),
            ("not-hex", Array(("zz" + hex.dropFirst(2)).utf8), false),
            ("two-newlines", Array((hex + "\n\n").utf8), false), ("empty", [], false),
        ]
        for (name, contents, valid) in cases {
            let path = directory.path + "/" + name
            #expect(
                FileManager.default.createFile(
                    atPath: path, contents: Data(contents), attributes: [.posixPermissions: 0o600]))
            var warnings: [String] = []
            let key = try? EncryptionKey(contentsOfFile: path) { warnings.append($0) }
            #expect((key == EncryptionKey(bytes: raw)) == valid, "\(name)")
            #expect(warnings.isEmpty, "\(name)")
        }
        let open = directory.path + "/readable"
        #expect(
            FileManager.default.createFile(atPath: open, contents: Data(raw), attributes: [.posixPermissions: 0o644]))
        var warnings: [String] = []
        _ = try EncryptionKey(contentsOfFile: open) { warnings.append($0) }
        #expect(warnings.count == 1 && warnings[0].contains("chmod 600"))
        #expect {
            _ = try EncryptionKey(contentsOfFile: directory.path + "/short")
        } throws: { error in
            (error as? StorageError)?.kind == .encryption && "\(error)".contains("31 bytes, not a key")
        }
    }

    @Test(
        "a FIFO or a directory given as the key file is refused at once as not a regular file (opening a FIFO waited for a writer)",
        .timeLimit(.minutes(1)))
    func keyFileThatIsNoFile() throws {
        let directory = TemporaryDirectory()
        let fifo = directory.path + "/key.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        for path in [fifo, directory.path] {
            #expect {
                _ = try EncryptionKey(contentsOfFile: path)
            } throws: { error in
                (error as? StorageError)?.kind == .encryption && "\(error)".contains("is not a regular file")
            }
        }
    }
}
