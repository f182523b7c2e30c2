import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import Testing

@_spi(Fuzzing) @testable import OfflinePages

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `response` record of `body` for `uri`, as `WARCRecord.response` writes it.
func responseRecord(_ uri: String, _ body: String, fields: [(String, String)] = []) -> WARCRecord {
    var head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n"
    for (name, value) in fields { head += "\(name): \(value)\r\n" }
    return WARCRecord.response(
        targetURI: uri, date: Date(timeIntervalSince1970: 1_800_000_000), httpHead: Array((head + "\r\n").utf8),
        payload: Array(body.utf8))
}

/// A WARC file of `records` (gzipped record by record), with the offset of each.
func writeWARC(_ path: String, _ records: [WARCRecord]) throws -> [Int64] {
    let writer = try WARCWriter(path: path, gzip: path.hasSuffix(".gz"))
    let offsets = try records.map { record throws(WARCError) in try writer.write(record) }
    try writer.close()
    return offsets
}

/// A cache on an empty directory that never reaches the network, with the store's largest entry
/// `maximumEntrySize`.
func importCache(_ directory: TemporaryDirectory, maximumEntrySize: Int64? = nil) throws -> HTTPCache {
    var configuration = HTTPCache.Configuration()
    configuration.directory = directory.path
    configuration.maximumEntrySize = maximumEntrySize
    configuration.log = { _ in }
    return try HTTPCache(configuration: configuration, transport: LoopbackFence())
}

/// A record that cannot be stored is skipped with its offset and the import goes on; the pack
/// lists only what was stored, and says it is not complete.
@Suite("Importing WARC files record by record")
struct WARCImportTests {
    @Test("A hostless WARC-Target-URI (http://) amid good records is skipped with its offset; the rest are stored")
    func hostlessRecordIsSkipped() async throws {
        let files = WARCTestDirectory()
        let path = files.file("hostless.warc.gz")
        let offsets = try writeWARC(
            path,
            [
                responseRecord("http://127.0.0.1:9/a.txt", "a"), responseRecord("http://", "no host"),
                responseRecord("http:///x", "no host either"), responseRecord("http://127.0.0.1:9/b.txt", "b"),
            ])
        let directory = TemporaryDirectory("warc-import")
        let cache = try importCache(directory)
        let imported = try await cache.importWARC(from: path, name: "hostless")
        #expect(imported.stored == 2 && imported.refused == 2)
        #expect(imported.skipped.map(\.offset) == [offsets[1], offsets[2]])
        #expect(imported.skipped.allSatisfy { $0.kind == .notHTTP && $0.reason.contains("http://") })
        #expect(imported.refusedByKind == [.notHTTP: 2])
        let pack = try #require(try cache.pack(named: "hostless"))
        #expect(pack.resources.map(\.url) == ["http://127.0.0.1:9/a.txt", "http://127.0.0.1:9/b.txt"])
        #expect(!pack.isComplete && pack.problems.count == 2)
        #expect(pack.problems.first?.url == "record at offset \(offsets[1])")
        for url in pack.resources.map(\.url) {
            let served = try await cache.data(for: URLRequest(url: try #require(URL(string: url))))
            #expect(served.statusCode == 200 && served.cacheStatus.fieldValue.contains("saved-offline"))
        }
    }

    @Test("A record larger than the store takes is refused and not listed; the records after it are stored")
    func overTheStoreLimit() async throws {
        let files = WARCTestDirectory()
        let path = files.file("large.warc.gz")
        let offsets = try writeWARC(
            path,
            [
                responseRecord("http://127.0.0.1:9/big.bin", String(repeating: "x", count: 300_000)),
                responseRecord("http://127.0.0.1:9/small.txt", "small"),
            ])
        let directory = TemporaryDirectory("warc-import")
        let cache = try importCache(directory, maximumEntrySize: 100_000)
        let imported = try await cache.importWARC(from: path, name: "large")
        #expect(imported.stored == 1 && imported.refused == 1)
        let skipped = try #require(imported.skipped.first)
        #expect(skipped.offset == offsets[0] && skipped.kind == .notStored)
        #expect(skipped.reason.contains("big.bin") && skipped.reason.contains("100000"), "\(skipped.reason)")
        let pack = try #require(try cache.pack(named: "large"))
        #expect(pack.resources.map(\.url) == ["http://127.0.0.1:9/small.txt"] && !pack.isComplete)
        #expect(try cache.entries(for: try #require(URL(string: "http://127.0.0.1:9/big.bin"))).isEmpty)
    }

    @Test("A block that does not match its digest, or a chunked payload cut short, stores nothing of it")
    func damagedRecordsStoreNothing() async throws {
        let files = WARCTestDirectory()
        let path = files.file("damaged.warc.gz")
        var wrongDigest = responseRecord("http://127.0.0.1:9/tampered.txt", "original", fields: [("ETag", "\"v1\"")])
        wrongDigest.block = Array(
            String(decoding: wrongDigest.block, as: UTF8.self).replacing("original", with: "tampered").utf8)
        let cutHead = "HTTP/1.1 200 OK\r\nETag: \"v1\"\r\nTransfer-Encoding: chunked\r\n\r\n"
        let cut = WARCRecord.response(
            targetURI: "http://127.0.0.1:9/cut.txt", date: Date(), httpHead: Array(cutHead.utf8),
            payload: Array("5\r\nhello\r\n10\r\nonly part".utf8))
        let offsets = try writeWARC(path, [wrongDigest, cut, responseRecord("http://127.0.0.1:9/fine.txt", "fine")])
        let directory = TemporaryDirectory("warc-import")
        let cache = try importCache(directory)
        let imported = try await cache.importWARC(from: path, name: "damaged")
        #expect(imported.skipped.map(\.offset) == [offsets[0], offsets[1]])
        #expect(imported.skipped.map(\.kind) == [.damaged, .malformed], "\(imported.skipped)")
        #expect(imported.stored == 1)
        // Not even a part kept to complete later (RFC 9111 §3.3): the record is wrong, not cut off.
        for url in ["http://127.0.0.1:9/tampered.txt", "http://127.0.0.1:9/cut.txt"] {
            #expect(try cache.entries(for: try #require(URL(string: url))).isEmpty, "\(url)")
        }
    }

    @Test(
        "A payload that does not match its SHA-1 WARC-Payload-Digest (no block digest to catch it) is not stored; a chunked payload may match as sent or decoded; other algorithms are not checked"
    )
    func payloadDigestChecked() async throws {
        let files = WARCTestDirectory()
        let path = files.file("payload.warc")
        /// `record` with its block digest dropped and its payload digest set to `digest`.
        func declaring(_ digest: String, _ record: WARCRecord) -> WARCRecord {
            var record = record
            record.fields.removeAll { $0.name == "WARC-Block-Digest" }
            for index in record.fields.indices where record.fields[index].name == "WARC-Payload-Digest" {
                record.fields[index].value = digest
            }
            return record
        }
        var tampered = responseRecord("http://127.0.0.1:9/tampered.txt", "original")
        tampered.block = Array(
            String(decoding: tampered.block, as: UTF8.self).replacing("original", with: "tampered").utf8)
        let chunkedHead = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        let chunked = WARCRecord.response(
            targetURI: "http://127.0.0.1:9/chunked.txt", date: Date(), httpHead: chunkedHead,
            payload: Array("5\r\nhello\r\n0\r\n\r\n".utf8))
        let offsets = try writeWARC(
            path,
            [
                declaring(SHA1.warcDigest(Array("original".utf8)), tampered),
                declaring(SHA1.warcDigest(Array("hello".utf8)), chunked),
                declaring("sha256:unchecked", responseRecord("http://127.0.0.1:9/other.txt", "other")),
            ])
        let directory = TemporaryDirectory("warc-import")
        let cache = try importCache(directory)
        let imported = try await cache.importWARC(from: path, name: "payload")
        #expect(imported.skipped.map(\.offset) == [offsets[0]])
        #expect(imported.skipped.map(\.kind) == [.payloadDamaged], "\(imported.skipped)")
        #expect(imported.stored == 2)
        #expect(try cache.entries(for: try #require(URL(string: "http://127.0.0.1:9/tampered.txt"))).isEmpty)
    }

    @Test("Importing again under a pack's name replaces it: what only the old pack held is unpinned and removed")
    func importAgainReplacesThePack() async throws {
        let files = WARCTestDirectory()
        let (first, second) = (files.file("first.warc"), files.file("second.warc"))
        _ = try writeWARC(
            first,
            [responseRecord("http://127.0.0.1:9/one.txt", "one"), responseRecord("http://127.0.0.1:9/both.txt", "b")])
        _ = try writeWARC(
            second,
            [responseRecord("http://127.0.0.1:9/both.txt", "b"), responseRecord("http://127.0.0.1:9/two.txt", "2")])
        let directory = TemporaryDirectory("warc-import")
        let cache = try importCache(directory)
        _ = try await cache.importWARC(from: first, name: "a")
        _ = try await cache.importWARC(from: second, name: "a")
        let pack = try #require(try cache.pack(named: "a"))
        #expect(pack.resources.map(\.url).sorted() == ["http://127.0.0.1:9/both.txt", "http://127.0.0.1:9/two.txt"])
        #expect(try cache.entries(for: try #require(URL(string: "http://127.0.0.1:9/one.txt"))).isEmpty)
        #expect(try cache.entries(for: try #require(URL(string: "http://127.0.0.1:9/both.txt"))).count == 1)
        try cache.removePack(named: "a")
        for name in ["both", "two"] {
            #expect(try cache.entries(for: try #require(URL(string: "http://127.0.0.1:9/\(name).txt"))).isEmpty)
        }
    }

    @Test("The same URL recorded twice is listed once, with the later record")
    func laterRecordReplacesEarlier() async throws {
        let files = WARCTestDirectory()
        let path = files.file("twice.warc")
        _ = try writeWARC(
            path,
            [
                responseRecord("http://127.0.0.1:9/a.txt", "first"), responseRecord("http://127.0.0.1:9/b.txt", "b"),
                responseRecord("http://127.0.0.1:9/a.txt", "second!"),
            ])
        let directory = TemporaryDirectory("warc-import")
        let cache = try importCache(directory)
        let imported = try await cache.importWARC(from: path, name: "twice")
        #expect(imported.stored == 2 && imported.bytes == 8 && imported.refused == 0)
        let pack = try #require(try cache.pack(named: "twice"))
        #expect(pack.resources.map(\.url) == ["http://127.0.0.1:9/b.txt", "http://127.0.0.1:9/a.txt"])
        #expect(pack.resources.last?.size == 7 && pack.isComplete)
        let served = try await cache.data(for: URLRequest(url: try #require(URL(string: "http://127.0.0.1:9/a.txt"))))
        #expect(String(decoding: served.data, as: UTF8.self) == "second!")
    }

    @Test("The import's list of records tells apart URLs whose hashes collide")
    func hashedIndexCollisions() throws {
        // Every key reads back as itself from its offset; a colliding hash is forced by giving
        // two keys the same offset reader.
        var index = HashedIndex()
        var lines: [UInt64: String] = [:]
        for (offset, key) in ["a", "b", "c"].enumerated() {
            lines[UInt64(offset)] = key
            try index.set(key, UInt64(offset), reading: { lines[$0] ?? "" })
        }
        #expect(try index.offset(of: "b", reading: { lines[$0] ?? "" }) == 1)
        #expect(try index.offset(of: "d", reading: { lines[$0] ?? "" }) == nil)
        // A reader that answers another key for every line: each key is then a collision.
        try index.set("a", 7, reading: { _ in "not a" })
        #expect(try index.offset(of: "a", reading: { _ in "not a" }) == 7)
    }
}
