import Foundation
@_spi(Fuzzing) import OfflinePages
import Testing

/// 2026-12-01T10:00:00Z.
private let fixedDate = Date(timeIntervalSince1970: 1_796_119_200)

private let pagePayload = Array(
    String(repeating: "<p>Hello, offline world: a page kept for reading later.</p>\n", count: 1500).utf8)
private let stylePayload = Array("body { color: #333; font-family: serif }\n".utf8)

/// warcinfo, two responses and a request, as the exporter writes them.
private func sampleRecords() -> [WARCRecord] {
    let info = WARCRecord.warcinfo(
        filename: "pages.warc.gz", fields: [("software", "httpcache"), ("format", "WARC File Format 1.1")],
        date: fixedDate)
    let page = WARCRecord.response(
        targetURI: "https://example.com/page", date: fixedDate,
        httpHead: Array(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: \(pagePayload.count)\r\n\r\n"
                .utf8),
        payload: pagePayload)
    let request = WARCRecord.request(
        targetURI: "https://example.com/page", date: fixedDate,
        httpHead: Array("GET /page HTTP/1.1\r\nHost: example.com\r\nAccept: text/html\r\n\r\n".utf8),
        concurrentTo: page.recordID)
    let style = WARCRecord.response(
        targetURI: "https://example.com/style.css", date: fixedDate,
        httpHead: Array(
            "HTTP/1.1 200 OK\r\nContent-Type: text/css\r\nContent-Length: \(stylePayload.count)\r\n\r\n".utf8),
        payload: stylePayload)
    return [info, page, request, style]
}

/// Writes `records` to `path`, returning where each starts.
@discardableResult
private func write(_ records: [WARCRecord], to path: String, gzip: Bool) throws -> [Int64] {
    let writer = try WARCWriter(path: path, gzip: gzip)
    var offsets: [Int64] = []
    for record in records { offsets.append(try writer.write(record)) }
    try writer.close()
    return offsets
}

/// Every record of the file up to the first error, and that error.
private func readAll(_ path: String) throws -> (records: [WARCRecord], error: WARCError?) {
    var reader = try WARCReader(path: path)
    var records: [WARCRecord] = []
    do {
        while let record = try reader.next() { records.append(record) }
        return (records, nil)
    } catch {
        return (records, error)
    }
}

/// A hand-made record: the version line, `fields` and the block, with `newline` ending header lines.
private func rawRecord(
    version: String = "WARC/1.1", fields: [String], block: String, newline: String = "\r\n", end: String = "\r\n\r\n"
) -> [UInt8] {
    Array((([version] + fields).map { $0 + newline }.joined() + newline + block + end).utf8)
}

@Suite("OfflinePages: WARC files")
struct WARCTests {
    // MARK: - Interoperability with warcio

    @Test("warcio checks our .warc.gz (every digest passes) and indexes every URL and payload digest")
    func warcioReadsOurFile() async throws {
        let directory = WARCTestDirectory()
        let path = directory.file("pages.warc.gz")
        let records = sampleRecords()
        try write(records, to: path, gzip: true)
        let warcio = try WARCCheckers.executable("warcio")

        let check = try await runWARCProcess(warcio, ["check", "-v", path])
        #expect(check.status == 0, "warcio check: \(check.output) \(check.errorOutput)")
        #expect(!check.output.contains("failed") && !check.output.lowercased().contains("invalid"), "\(check.output)")
        // Every record has a block digest (the responses a payload digest too): each passes.
        #expect(check.output.components(separatedBy: "digest pass").count - 1 == records.count, "\(check.output)")

        let index = try await runWARCProcess(
            warcio, ["index", "-f", "warc-type,warc-target-uri,warc-payload-digest", path])
        #expect(index.status == 0, "warcio index: \(index.errorOutput)")
        let entries = try index.output.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        }
        #expect(entries.map { $0["warc-type"] } == ["warcinfo", "response", "request", "response"])
        #expect(
            entries.contains {
                $0["warc-target-uri"] == "https://example.com/page"
                    && $0["warc-payload-digest"] == SHA1.warcDigest(pagePayload)
            })
        #expect(
            entries.contains {
                $0["warc-target-uri"] == "https://example.com/style.css"
                    && $0["warc-payload-digest"] == SHA1.warcDigest(stylePayload)
            })
        #expect(entries.filter { $0["warc-target-uri"] == "https://example.com/page" }.count == 2)
    }

    @Test("records read back as written, at offsets that are where each gzip member (or record) starts")
    func roundTrip() async throws {
        for gzip in [true, false] {
            let directory = WARCTestDirectory()
            let path = directory.file(gzip ? "pages.warc.gz" : "pages.warc")
            let records = sampleRecords()
            let offsets = try write(records, to: path, gzip: gzip)
            let (read, error) = try readAll(path)
            #expect(error == nil)
            #expect(read.map(\.fields) == records.map(\.fields))
            #expect(read.map(\.block) == records.map(\.block))
            #expect(read.map(\.offset) == offsets)
            #expect(offsets.first == 0 && zip(offsets, offsets.dropFirst()).allSatisfy { $0 < $1 })
            #expect(try WARCReader(path: path).isCompressed == gzip)

            let bytes = try warcFileBytes(path)
            for offset in offsets {
                let start = bytes[Int(offset)...]
                #expect(gzip ? start.starts(with: [0x1F, 0x8B]) : start.starts(with: "WARC/1.1\r\n".utf8))
            }
            // warcio's own offsets agree.
            let index = try await runWARCProcess(
                try WARCCheckers.executable("warcio"), ["index", "-f", "offset", path])
            let warcioOffsets = index.output.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])?["offset"]
            }
            #expect(warcioOffsets == offsets.map(String.init), "\(index.errorOutput)")
        }
    }

    @Test("files warcio writes read: chunked payloads de-chunked, revisit fields, gzip WARC/1.0 and plain WARC/1.1")
    func readsFilesWarcioWrites() async throws {
        let directory = WARCTestDirectory()
        let gzPath = directory.file("warcio.warc.gz")
        let plainPath = directory.file("warcio.warc")
        let css = Array("body { color: red }\n".utf8)
        let script = """
            import sys
            from io import BytesIO
            from warcio.warcwriter import WARCWriter
            from warcio.statusandheaders import StatusAndHeaders

            chunked = b'4;ext=1\\r\\nWiki\\r\\n6\\r\\npedia \\r\\nE ; a=b\\r\\nin \\r\\n\\r\\nchunks.\\r\\n0\\r\\nX-Trailer: done\\r\\n\\r\\n'
            css = b'body { color: red }\\n'

            def write(path, gzip, version):
                with open(path, 'wb') as out:
                    writer = WARCWriter(out, gzip=gzip, warc_version=version)
                    writer.write_record(writer.create_warcinfo_record('test.warc', {'software': 'warcio test'}))
                    headers = StatusAndHeaders('200 OK', [('Content-Type', 'text/plain'),
                                                          ('Transfer-Encoding', 'chunked')], protocol='HTTP/1.1')
                    writer.write_record(writer.create_warc_record('http://example.com/chunked', 'response',
                                        payload=BytesIO(chunked), length=len(chunked), http_headers=headers))
                    headers = StatusAndHeaders('200 OK', [('Content-Type', 'text/css'),
                                                          ('Content-Length', str(len(css)))], protocol='HTTP/1.1')
                    writer.write_record(writer.create_warc_record('http://example.com/style.css', 'response',
                                        payload=BytesIO(css), length=len(css), http_headers=headers))
                    writer.write_record(writer.create_revisit_record('http://example.com/style-again.css',
                                        digest=sys.argv[3], refers_to_uri='http://example.com/style.css',
                                        refers_to_date='2026-12-01T10:00:00Z', http_headers=headers))

            write(sys.argv[1], True, '1.0')
            write(sys.argv[2], False, '1.1')
            """
        let python = try WARCCheckers.executable("python")
        let run = try await runWARCProcess(python, ["-c", script, gzPath, plainPath, SHA1.warcDigest(css)])
        try #require(run.status == 0, "the warcio script failed: \(run.errorOutput)")

        for (path, version) in [(gzPath, "1.0"), (plainPath, "1.1")] {
            #expect(try warcFileBytes(path).starts(with: path == gzPath ? [0x1F, 0x8B] : Array("WARC/1.1".utf8)))
            let (records, error) = try readAll(path)
            #expect(error == nil)
            try #require(records.count == 4)
            #expect(records.map(\.type) == ["warcinfo", "response", "response", "revisit"])
            #expect(String(decoding: records[0].block, as: UTF8.self).contains("software: warcio test"))

            #expect(records[1].targetURI == "http://example.com/chunked")
            let chunked = try HTTPResponseBlock(record: records[1])
            #expect(chunked.statusCode == 200 && chunked.reason == "OK" && chunked.version == "HTTP/1.1")
            #expect(chunked.wasChunked)
            #expect(chunked.payload == Array("Wikipedia in \r\n\r\nchunks.".utf8))
            #expect(chunked.trailerFields == [HTTPResponseBlock.Field("X-Trailer", "done")])
            #expect(chunked[field: "content-type"] == "text/plain")

            let style = try HTTPResponseBlock(record: records[2])
            #expect(records[2].targetURI == "http://example.com/style.css")
            #expect(!style.wasChunked && style.payload == css)

            let revisit = records[3]
            #expect(revisit.targetURI == "http://example.com/style-again.css")
            #expect(revisit[field: "WARC-Refers-To-Target-URI"] == "http://example.com/style.css")
            #expect(revisit[field: "warc-refers-to-date"] == "2026-12-01T10:00:00Z")
            #expect(revisit[field: "WARC-Payload-Digest"] == SHA1.warcDigest(css))
            #expect(
                revisit[field: "WARC-Profile"]
                    == "http://netpreserve.org/warc/\(version)/revisit/identical-payload-digest")
            let head = try HTTPResponseBlock(record: revisit)
            #expect(
                head.statusCode == 200 && head.payload.isEmpty && head[field: "Content-Length"] == String(css.count))
            #expect(head.headLength == revisit.block.count)
        }
    }

    // MARK: - Damaged files

    @Test("a .warc.gz cut anywhere in a record: the records before it, then an error at that record's offset")
    func truncatedGzip() throws {
        let directory = WARCTestDirectory()
        let path = directory.file("whole.warc.gz")
        let records = sampleRecords()
        let offsets = try write(records, to: path, gzip: true)
        let bytes = try warcFileBytes(path)
        let (second, third) = (Int(offsets[1]), Int(offsets[2]))
        // In the first member; 1 and 5 bytes into the second (its gzip header); in its deflate data;
        // in its CRC-32 and length trailer; 1 byte short of its end; in the third member.
        let cuts: [(at: Int, recordsBefore: Int, offset: Int64)] = [
            (Int(offsets[1]) / 2, 0, 0), (second + 1, 1, offsets[1]), (second + 5, 1, offsets[1]),
            ((second + third) / 2, 1, offsets[1]), (third - 6, 1, offsets[1]), (third - 1, 1, offsets[1]),
            (third + 20, 2, offsets[2]),
        ]
        for cut in cuts {
            let cutPath = directory.file("cut-\(cut.at).warc.gz")
            try writeWARCFile(cutPath, bytes[..<cut.at])
            let (read, error) = try readAll(cutPath)
            #expect(read.map(\.fields) == records.prefix(cut.recordsBefore).map(\.fields), "cut at \(cut.at)")
            let failure = try #require(error, "cut at \(cut.at)")
            #expect(failure.offset == cut.offset, "cut at \(cut.at): \(failure)")
            #expect(failure.message.hasPrefix("truncated: the file ends inside the record"), "\(failure)")
            #expect(failure.message.contains("nothing from this record on was read"))
            #expect(failure.description.hasPrefix("WARC record at offset \(cut.offset): truncated"))
        }
        // Cut exactly between members: a shorter but valid file.
        let boundaryPath = directory.file("boundary.warc.gz")
        try writeWARCFile(boundaryPath, bytes[..<third])
        let (read, error) = try readAll(boundaryPath)
        #expect(error == nil && read.count == 2)
    }

    @Test("a record that decompresses to exactly 64 KiB (the reader's chunk) is not returned when its member is cut")
    func truncatedAtChunkBoundary() throws {
        let directory = WARCTestDirectory()
        let path = directory.file("boundary.warc.gz")
        let info = WARCRecord.warcinfo(filename: "boundary.warc.gz", fields: [("software", "httpcache")])
        // "WARC/1.1\r\n" + "WARC-Type: resource\r\n" + "Content-Length: N\r\n" + "\r\n" + N + "\r\n\r\n" = 65,536.
        let length = 65_536 - ("WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 65479\r\n\r\n\r\n\r\n".utf8.count)
        let record = WARCRecord(
            fields: [WARCField("WARC-Type", "resource")], block: Array(repeating: UInt8(ascii: "a"), count: length))
        let offsets = try write([info, record, info], to: path, gzip: true)
        let bytes = try warcFileBytes(path)
        // Cut in the member's trailer, or damage its CRC-32 or its length: the data all decompresses,
        // but the member is not intact, so the record is not returned.
        var variants: [(name: String, bytes: [UInt8], says: String)] = [
            ("cut", Array(bytes[..<(Int(offsets[2]) - 3)]), "truncated")
        ]
        for delta in [8, 3] {
            var damaged = bytes
            damaged[Int(offsets[2]) - delta] ^= 1
            variants.append(("damaged \(delta) from the end", damaged, "corrupt gzip data"))
        }
        for variant in variants {
            let variantPath = directory.file("variant.warc.gz")
            try writeWARCFile(variantPath, variant.bytes)
            let (read, error) = try readAll(variantPath)
            #expect(read.map(\.type) == ["warcinfo"], "\(variant.name)")
            #expect(error?.offset == offsets[1], "\(variant.name)")
            #expect(error?.message.hasPrefix(variant.says) == true, "\(variant.name): \(String(describing: error))")
        }
    }

    @Test("a damaged byte in the second gzip member: the first record, then an error at that member's offset")
    func corruptGzipMember() throws {
        let directory = WARCTestDirectory()
        let path = directory.file("whole.warc.gz")
        let records = sampleRecords()
        let offsets = try write(records, to: path, gzip: true)
        let bytes = try warcFileBytes(path)
        let (second, third) = (Int(offsets[1]), Int(offsets[2]))
        // In its CRC-32 (8 bytes before its end), in its deflate data, in its gzip header's method byte.
        for (position, mustSayGzip) in [(third - 8, true), ((second + third) / 2, false), (second + 2, true)] {
            var damaged = bytes
            damaged[position] ^= 0x55
            let damagedPath = directory.file("damaged-\(position).warc.gz")
            try writeWARCFile(damagedPath, damaged)
            let (read, error) = try readAll(damagedPath)
            #expect(read.map(\.fields) == [records[0].fields], "byte \(position)")
            let failure = try #require(error, "byte \(position)")
            #expect(failure.offset == offsets[1], "byte \(position): \(failure)")
            if mustSayGzip { #expect(failure.message.contains("corrupt gzip data"), "\(failure)") }
            // The reader stops for good: the same error again.
            var reader = try WARCReader(path: damagedPath)
            _ = try reader.next()
            #expect(throws: failure) { _ = try reader.next() }
            #expect(throws: failure) { _ = try reader.next() }
        }
    }

    @Test("an uncompressed WARC cut in the header, the block or the final CRLFs of a record")
    func truncatedPlain() throws {
        let directory = WARCTestDirectory()
        let path = directory.file("whole.warc")
        let records = sampleRecords()
        let offsets = try write(records, to: path, gzip: false)
        let bytes = try warcFileBytes(path)
        let second = Int(offsets[1])
        let headerLength = try #require(bytes[second...].firstRange(of: Array("\r\n\r\n".utf8))).upperBound
        let cuts: [(at: Int, part: String)] = [
            (second + 3, "in its version line"), (second + 40, "in its header"),
            (headerLength + 10, "in its block: 10 of its"), (Int(offsets[2]) - 3, "before the CRLF CRLF"),
        ]
        for cut in cuts {
            let cutPath = directory.file("cut-\(cut.at).warc")
            try writeWARCFile(cutPath, bytes[..<cut.at])
            let (read, error) = try readAll(cutPath)
            #expect(read.map(\.fields) == [records[0].fields])
            let failure = try #require(error)
            #expect(failure.offset == offsets[1])
            #expect(failure.message.hasPrefix("truncated: the file ends inside the record (\(cut.part)"), "\(failure)")
        }
    }

    @Test("a changed payload byte fails the block digest; the reader goes on with the next record")
    func blockDigestMismatch() throws {
        let directory = WARCTestDirectory()
        let path = directory.file("whole.warc")
        let records = sampleRecords()
        let offsets = try write(records, to: path, gzip: false)
        var bytes = try warcFileBytes(path)
        let second = Int(offsets[1])
        let payloadIndex = try #require(bytes[second...].firstRange(of: Array("Hello, offline".utf8))).lowerBound
        bytes[payloadIndex] = UInt8(ascii: "J")
        try writeWARCFile(path, bytes)

        var reader = try WARCReader(path: path)
        #expect(try reader.next()?.type == "warcinfo")
        let failure = try #require(
            throws: WARCError.self,
            performing: {
                _ = try reader.next()
            })
        #expect(failure.offset == offsets[1])
        #expect(failure.message.hasPrefix("block digest mismatch"), "\(failure)")
        #expect(failure.message.contains(records[1][field: "WARC-Block-Digest"]!))
        #expect(try reader.next()?.type == "request")
        #expect(try reader.next()?.targetURI == "https://example.com/style.css")
        #expect(try reader.next() == nil)
    }

    @Test("a digest in hex is checked too; other algorithms are not")
    func digestForms() throws {
        let directory = WARCTestDirectory()
        let block = "hello"
        let hex = SHA1.hash(Array(block.utf8)).map {
            String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16)
        }.joined()
        let good = rawRecord(
            fields: ["WARC-Type: resource", "WARC-Block-Digest: sha1:\(hex)", "Content-Length: 5"], block: block)
        let unknown = rawRecord(
            fields: ["WARC-Type: resource", "WARC-Block-Digest: md5:XXXX", "Content-Length: 5"], block: block)
        let bad = rawRecord(
            fields: ["WARC-Type: resource", "WARC-Block-Digest: SHA1:\(hex.uppercased())", "Content-Length: 5"],
            block: "jello")
        let path = directory.file("digests.warc")
        try writeWARCFile(path, good + unknown + bad)
        let (read, error) = try readAll(path)
        #expect(read.count == 2)
        #expect(error?.offset == Int64(good.count + unknown.count))
        #expect(error?.message.hasPrefix("block digest mismatch") == true)
    }

    // MARK: - Gzip layouts and size

    @Test("a .warc.gz that is one gzip member holding every record reads the same, all at offset 0")
    func singleMemberGzip() throws {
        let directory = WARCTestDirectory()
        let plainPath = directory.file("pages.warc")
        let records = sampleRecords()
        try write(records, to: plainPath, gzip: false)
        let gzPath = directory.file("one-member.warc.gz")
        try writeWARCFile(gzPath, Gzip.compress(try warcFileBytes(plainPath)))
        let (read, error) = try readAll(gzPath)
        #expect(error == nil)
        #expect(read.map(\.fields) == records.map(\.fields) && read.map(\.block) == records.map(\.block))
        #expect(read.allSatisfy { $0.offset == 0 })

        // Cut: every record wholly decompressed before the cut is returned, the error is at offset 0
        // and says where in the member the record starts.
        let compressed = try warcFileBytes(gzPath)
        try writeWARCFile(gzPath, compressed.dropLast(12))
        let (some, failure) = try readAll(gzPath)
        #expect(some.count < records.count)
        #expect(failure?.offset == 0)
        #expect(failure?.message.hasPrefix("truncated") == true)
    }

    @Test("a record with a 5 MB payload streams through, gzip and plain")
    func largeRecord() throws {
        // 64 KiB of pseudo-random letters (more than deflate's 32 KiB window), repeated: 5 MB.
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let piece = (0..<65_536).map { _ -> UInt8 in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 59) + UInt8(ascii: "a")
        }
        var payload = Array(repeating: piece, count: 77).flatMap { $0 }
        payload[4_000_000] = 0  // not all periodic
        #expect(payload.count > 5_000_000)
        let record = WARCRecord.response(
            targetURI: "https://example.com/big.bin", date: fixedDate,
            httpHead: Array("HTTP/1.1 200 OK\r\nContent-Length: \(payload.count)\r\n\r\n".utf8), payload: payload)
        let small = WARCRecord.request(
            targetURI: "https://example.com/big.bin", date: fixedDate,
            httpHead: Array("GET /big.bin HTTP/1.1\r\nHost: example.com\r\n\r\n".utf8), concurrentTo: record.recordID)
        for gzip in [true, false] {
            let directory = WARCTestDirectory()
            let path = directory.file("big.warc")
            let offsets = try write([record, small, record], to: path, gzip: gzip)
            let (read, error) = try readAll(path)
            #expect(error == nil)
            try #require(read.count == 3)
            #expect(read.map(\.offset) == offsets)
            let parsed = try HTTPResponseBlock(record: read[2])
            #expect(parsed.payload.count == payload.count && parsed.payload == payload)
            #expect(read[1].type == "request")
        }
    }

    @Test("the gzip reader: members, an empty member, offsets, small reads, cut and garbage input")
    func gzipReader() throws {
        let directory = WARCTestDirectory()
        let parts: [[UInt8]] = [
            Array("first member\n".utf8), [], Array(repeating: 7, count: 200_000), Array("end".utf8),
        ]
        let members = parts.map(Gzip.compress)
        var memberOffsets: [Int64] = []
        var file: [UInt8] = []
        for member in members {
            memberOffsets.append(Int64(file.count))
            file += member
        }
        let path = directory.file("members.gz")
        try writeWARCFile(path, file)

        let reader = try GzipFileReader(path: path)
        var decompressed: [[UInt8]] = Array(repeating: [], count: parts.count)
        var starts: [Int64] = []
        var ends = 0
        while let chunk = try reader.read(maxLength: 4096) {
            #expect(chunk.bytes.count <= 4096)
            if chunk.startsMember { starts.append(chunk.memberOffset) }
            if chunk.endsMember { ends += 1 }
            decompressed[try #require(memberOffsets.firstIndex(of: chunk.memberOffset))] += chunk.bytes
        }
        #expect(starts == memberOffsets && ends == parts.count)
        #expect(decompressed == parts)

        // Cut inside the third member.
        try writeWARCFile(path, file[..<(Int(memberOffsets[2]) + 100)])
        let cut = try GzipFileReader(path: path)
        let cutError = try #require(
            throws: GzipError.self,
            performing: {
                while try cut.read() != nil {}
            })
        #expect(cutError.kind == .truncated && cutError.memberOffset == memberOffsets[2])

        // Bytes after the last member that are not gzip.
        try writeWARCFile(path, file + Array("trailing junk".utf8))
        let junk = try GzipFileReader(path: path)
        let junkError = try #require(
            throws: GzipError.self,
            performing: {
                while try junk.read() != nil {}
            })
        #expect(junkError.kind == .corrupt && junkError.memberOffset == Int64(file.count))
        #expect(junkError.description.hasPrefix("gzip member at offset \(file.count): corrupt gzip data"))

        #expect(throws: GzipError.self) { _ = try GzipFileReader(path: directory.file("missing.gz")) }
    }

    @Test("Gzip.compress makes one member gunzip reads (empty, small, 3 MB)")
    func gzipCompressInterop() async throws {
        let directory = WARCTestDirectory()
        for input in [[], Array("a".utf8), (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 % 251) }] {
            let path = directory.file("one.gz")
            let member = Gzip.compress(input)
            #expect(member.starts(with: [0x1F, 0x8B, 8]))
            try writeWARCFile(path, member)
            let python = try WARCCheckers.executable("python")
            let run = try await runWARCProcess(
                python,
                [
                    "-c", "import gzip, hashlib, sys; print(hashlib.sha1(gzip.open(sys.argv[1]).read()).hexdigest())",
                    path,
                ])
            let hex = SHA1.hash(input).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            #expect(run.output.trimmingCharacters(in: .whitespacesAndNewlines) == hex, "\(run.errorOutput)")
        }
    }

    // MARK: - Record syntax

    @Test("WARC/1.0, bare LF header lines, continuation lines and <URI> targets are accepted")
    func tolerantHeaders() throws {
        let directory = WARCTestDirectory()
        let first = rawRecord(
            version: "WARC/1.0",
            fields: [
                "WARC-Type: resource", "WARC-Target-URI: <http://example.com/a>", "X-Note: one", "  two\tthree",
                "Content-Length: 3",
            ], block: "abc", newline: "\n")
        let second = rawRecord(
            fields: ["warc-type:response", "WARC-Target-URI:   http://example.com/b  ", "content-length: 0"], block: "")
        let path = directory.file("tolerant.warc")
        try writeWARCFile(path, first + second)
        let (read, error) = try readAll(path)
        #expect(error == nil)
        try #require(read.count == 2)
        #expect(read[0].targetURI == "http://example.com/a")
        #expect(read[0][field: "x-note"] == "one two\tthree")
        #expect(read[0].block == Array("abc".utf8))
        #expect(read[1].type == "response" && read[1].targetURI == "http://example.com/b")
        #expect(read[1].offset == Int64(first.count) && read[1].block.isEmpty)
        // An empty file has no records.
        let emptyPath = directory.file("empty.warc")
        try writeWARCFile(emptyPath, [])
        #expect(try readAll(emptyPath).records.isEmpty && readAll(emptyPath).error == nil)
    }

    @Test(
        "malformed records fail at their offset, saying what is wrong",
        arguments: [
            ("WARC/2.0", "bad version line \"WARC/2.0\""), ("<html>", "bad version line \"<html><body>"),
            ("no-length", "has no Content-Length"), ("bad-length", "Content-Length \"12a\" is not a number"),
            ("long-length", "not CRLF CRLF"), ("no-colon", "is not `Name: value`"), ("WAR", "bad version line"),
        ])
    func malformedRecords(kind: String, expected: String) throws {
        let good = rawRecord(fields: ["WARC-Type: resource", "Content-Length: 2"], block: "ok")
        let bad: [UInt8] =
            switch kind {
            case "WARC/2.0": rawRecord(version: "WARC/2.0", fields: ["Content-Length: 2"], block: "no")
            case "<html>": Array("<html><body>not a WARC file</body></html>\n".utf8)
            case "no-length": rawRecord(fields: ["WARC-Type: resource"], block: "")
            case "bad-length": rawRecord(fields: ["Content-Length: 12a"], block: "")
            case "long-length": rawRecord(fields: ["Content-Length: 4"], block: "abcdef")
            case "no-colon": rawRecord(fields: ["WARC-Type resource", "Content-Length: 0"], block: "")
            default: Array("WAR".utf8)
            }
        let directory = WARCTestDirectory()
        let path = directory.file("bad.warc")
        try writeWARCFile(path, good + bad + good)
        var reader = try WARCReader(path: path)
        #expect(try reader.next()?.block == Array("ok".utf8))
        let failure = try #require(
            throws: WARCError.self,
            performing: {
                _ = try reader.next()
            })
        #expect(failure.offset == Int64(good.count))
        #expect(failure.message.contains(expected), "\(failure)")
        #expect(failure.message.contains(" — "), "says what to do: \(failure)")
        #expect(throws: failure) { _ = try reader.next() }
    }

    @Test("opening a file that does not exist fails with its path")
    func missingFile() {
        let error = #expect(throws: WARCError.self) { _ = try WARCReader(path: "/nonexistent/dir/pages.warc") }
        #expect(error?.offset == 0 && error?.message.contains("/nonexistent/dir/pages.warc") == true)
    }

    // MARK: - Writing

    @Test("the writer: record layout, Content-Length added or checked, fields that would break the header")
    func writerRules() throws {
        let directory = WARCTestDirectory()
        let path = directory.file("written.warc")
        let writer = try WARCWriter(path: path, gzip: false)
        let record = WARCRecord(fields: [WARCField("WARC-Type", "resource")], block: Array("xyz".utf8))
        #expect(try writer.write(record) == 0)
        #expect(writer.offset == 59)
        var wrongLength = record
        wrongLength[field: "Content-Length"] = "4"
        #expect(throws: WARCError.self) { try writer.write(wrongLength) }
        var lineBreak = record
        lineBreak[field: "WARC-Target-URI"] = "http://example.com/\r\nWARC-Type: injected"
        #expect(throws: WARCError.self) { try writer.write(lineBreak) }
        var badName = record
        badName.fields.append(WARCField("Bad Name", "x"))
        #expect(throws: WARCError.self) { try writer.write(badName) }
        try writer.close()
        #expect(throws: WARCError.self) { try writer.write(record) }
        let expected = "WARC/1.1\r\nWARC-Type: resource\r\nContent-Length: 3\r\n\r\nxyz\r\n\r\n"
        #expect(try warcFileBytes(path) == Array(expected.utf8))

        // Subscript: case-insensitive, set replaces, nil removes.
        var edited = record
        edited[field: "warc-type"] = "metadata"
        #expect(edited.fields == [WARCField("WARC-Type", "metadata")])
        edited[field: "WARC-TYPE"] = nil
        #expect(edited.fields.isEmpty && edited.type == nil)

        #expect(throws: WARCError.self) { _ = try WARCWriter(path: directory.file("no/such/dir/x.warc"), gzip: true) }
    }

    @Test("made records: IDs, dates, content types, digests, concurrency")
    func madeRecords() throws {
        let records = sampleRecords()
        let (info, page, request) = (records[0], records[1], records[2])
        #expect(info.type == "warcinfo" && info[field: "Content-Type"] == "application/warc-fields")
        #expect(info.block == Array("software: httpcache\r\nformat: WARC File Format 1.1\r\n".utf8))
        #expect(info[field: "WARC-Filename"] == "pages.warc.gz")
        #expect(page[field: "WARC-Date"] == "2026-12-01T10:00:00Z")
        #expect(page[field: "Content-Type"] == "application/http;msgtype=response")
        #expect(request[field: "Content-Type"] == "application/http;msgtype=request")
        #expect(page[field: "WARC-Payload-Digest"] == SHA1.warcDigest(pagePayload))
        #expect(page[field: "WARC-Block-Digest"] == SHA1.warcDigest(page.block))
        #expect(page[field: "Content-Length"] == String(page.block.count))
        #expect(request[field: "WARC-Concurrent-To"] == page.recordID)
        let id = try #require(page.recordID)
        #expect(id.hasPrefix("<urn:uuid:") && id.hasSuffix(">") && id.count == 47 && id != info.recordID)
        #expect(WARCRecord.warcDate(Date(timeIntervalSince1970: 1_709_251_199.9)) == "2024-02-29T23:59:59Z")
        #expect(WARCRecord.warcDate(Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59Z")
        #expect(WARCRecord.warcDate(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
    }

    // MARK: - HTTP blocks

    @Test("HTTP blocks: chunk extensions and trailers, Content-Length checks, bare LF, no-content statuses")
    func httpBlocks() throws {
        let chunked = try HTTPResponseBlock(
            parsing: Array(
                ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\nX-Folded: a\r\n b\r\n\r\n"
                    + "3;name=\"quoted;value\"\r\nabc\r\n0001\r\nd\r\n0;last\r\nExpires: never\r\nX-Two: 2\r\n\r\n")
                    .utf8))
        #expect(chunked.wasChunked && chunked.payload == Array("abcd".utf8))
        #expect(
            chunked.trailerFields == [
                HTTPResponseBlock.Field("Expires", "never"), HTTPResponseBlock.Field("X-Two", "2"),
            ])
        #expect(chunked[field: "x-folded"] == "a b")
        // The final empty line may be missing at the very end.
        let noFinalLine = try HTTPResponseBlock(
            parsing: Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n".utf8))
        #expect(noFinalLine.payload == Array("hi".utf8))

        let bareLF = try HTTPResponseBlock(parsing: Array("HTTP/1.0 404 Not Found\nContent-Length: 4\n\ngone".utf8))
        #expect(bareLF.statusCode == 404 && bareLF.reason == "Not Found" && bareLF.payload == Array("gone".utf8))
        #expect(bareLF.headLength == "HTTP/1.0 404 Not Found\nContent-Length: 4\n\n".utf8.count)
        let notModified = try HTTPResponseBlock(
            parsing: Array("HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n".utf8))
        #expect(notModified.statusCode == 304 && notModified.payload.isEmpty)
        let sameLengths = try HTTPResponseBlock(
            parsing: Array("HTTP/1.1 200\r\nContent-Length: 2, 2\r\n\r\nok".utf8))
        #expect(sameLengths.reason.isEmpty && sameLengths.payload == Array("ok".utf8))

        let failures: [(String, String)] = [
            ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "cut off when it was archived"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\ntoo long", "more than the 2 Content-Length says"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx", "not one number"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc", "cut off when it was archived"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", "without its last chunk"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "not a hexadecimal size"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", "not CRLF"),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nextra", "follow the end of the chunked"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 0", "does not end"),
            ("ICY 200 OK\r\n\r\n", "is not `HTTP/x.y NNN reason`"), ("", "the block is empty"),
        ]
        for (block, expected) in failures {
            let error = #expect(throws: HTTPBlockError.self) { _ = try HTTPResponseBlock(parsing: Array(block.utf8)) }
            #expect(error?.message.contains(expected) == true, "\(String(describing: error))")
        }
        // A revisit's head alone: no payload, whatever Content-Length says; not so for a response.
        let head = Array("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
        #expect(try HTTPResponseBlock(parsing: head, payloadMayBeOmitted: true).payload.isEmpty)
        #expect(throws: HTTPBlockError.self) { _ = try HTTPResponseBlock(parsing: head) }
        let record = WARCRecord(fields: [WARCField("WARC-Type", "response")], block: head, offset: 77)
        let error = #expect(throws: WARCError.self) { _ = try HTTPResponseBlock(record: record) }
        #expect(error?.offset == 77 && error?.message.hasPrefix("the HTTP response in the block: ") == true)
    }

    // MARK: - SHA-1 and base32

    @Test(
        "SHA-1 matches the FIPS 180-4 example vectors",
        arguments: [
            ("abc", 1, "a9993e364706816aba3e25717850c26c9cd0d89d"), ("", 1, "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
            ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1, "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
            ("a", 1_000_000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"),
        ])
    func sha1Vectors(text: String, repeats: Int, expected: String) {
        let message = Array(repeating: Array(text.utf8), count: repeats).flatMap { $0 }
        let hex = { (digest: [UInt8]) in digest.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined() }
        #expect(hex(SHA1.hash(message)) == expected)
        // Fed in uneven pieces (across the 64-byte blocks), the digest is the same.
        var pieces = SHA1()
        var index = 0
        for size in [1, 63, 64, 65, 7, 1000, 200_003] where index < message.count {
            let end = min(message.count, index + size)
            pieces.update(message[index..<end])
            index = end
        }
        pieces.update(Array(message[index...]))
        #expect(hex(pieces.finalize()) == expected)
        #expect(pieces.finalize() == pieces.finalize())
    }

    @Test("SHA-1 digests of 55, 56 and 64 bytes (the padding boundaries) match Python's hashlib")
    func sha1PaddingBoundaries() async throws {
        let python = try WARCCheckers.executable("python")
        for length in [55, 56, 63, 64, 119, 120] {
            let message = String(repeating: "x", count: length)
            let run = try await runWARCProcess(
                python, ["-c", "import hashlib, sys; print(hashlib.sha1(sys.argv[1].encode()).hexdigest())", message])
            let hex = SHA1.hash(Array(message.utf8)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
            #expect(hex == run.output.trimmingCharacters(in: .whitespacesAndNewlines), "length \(length)")
        }
    }

    @Test("base32 matches RFC 4648 §10's vectors and decodes them back; WARC digests are 32 characters")
    func base32() {
        let vectors = [
            ("", ""), ("f", "MY======"), ("fo", "MZXQ===="), ("foo", "MZXW6==="), ("foob", "MZXW6YQ="),
            ("fooba", "MZXW6YTB"), ("foobar", "MZXW6YTBOI======"),
        ]
        for (text, encoded) in vectors {
            #expect(Base32.encode(Array(text.utf8)) == encoded)
            #expect(Base32.decode(encoded) == Array(text.utf8))
            #expect(Base32.decode(encoded.lowercased()) == Array(text.utf8))
        }
        #expect(Base32.decode("MZXW6YT1") == nil)  // 1 is not in the alphabet
        #expect(Base32.decode("MZX") == nil)  // no whole byte
        #expect(Base32.decode("MZ=X") == nil)
        #expect(SHA1.warcDigest(Array("abc".utf8)) == "sha1:VGMT4NSHA2AWVOR6EVYXQUGCNSONBWE5")
        #expect(SHA1.warcDigest([]) == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ")
    }
}
