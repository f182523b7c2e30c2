import Foundation
import FuzzSupport
@_spi(Fuzzing) import OfflinePages

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// OfflinePages' WARC files (ISO 28500 / WARC 1.1): the streaming reader, plain and gzip, the HTTP
// response in a record's block, and the writer, SHA-1 and gzip behind them.
//
// Input: byte 0 chooses the mode (its value modulo 3; the value divided by 3 is a choice within
// it), the rest is:
//   0  a WARC file, written to a file of this process's and read record by record. Unless it
//      starts with gzip's magic bytes, it is then read again as two gzip members (split where the
//      choice says), which the reader must read alike: a gzip file may be split into members
//      anywhere.
//   1  the block of a response record (the choice's low bit: a revisit's, whose payload may be
//      left out), parsed as an HTTP response.
//   2  a round trip: a flags byte (bit 0: the response is chunked; bit 1: a warcinfo record first;
//      bit 2: a request record too; bits 3–7: the piece size gzip is read in), 5 bytes of
//      WARC-Date seconds and 1 of their fraction, a length byte and that many bytes of target URI,
//      then the payload; written plain and gzip with WARCWriter and read back.
//
// Traps when
// - reading does not end (more outcomes than the file has room for records), or a record's
//   block is not its Content-Length long, or a record or error offset is outside the file, or
//   offsets go back (plain: each record starts after the one before, header and CRLF CRLF
//   included), or a returned record has a SHA-1 WARC-Block-Digest that is not its block's, or
//   `isCompressed` is not whether the file starts with 1f 8b, or after an error about the file
//   the next `next()` does not throw that error again;
// - a file and the same bytes gzip-compressed in two members read differently (records, digest
//   mismatches, failures, in order);
// - `HTTPResponseBlock(record:)` disagrees with `init(parsing:payloadMayBeOmitted:)` on the
//   block, a parsed response's head is longer than the block, its payload is not the rest of the
//   block (unless de-chunked, and then shorter, with a Transfer-Encoding), or the response written
//   out again canonically (status line, fields, payload chunked if it was) parses otherwise;
// - in a round trip: writing a field value with a line break does not throw, or one without
//   does; a record reads back with other fields (values without surrounding SP and HT), block or
//   offset than written, the payload or its chunked transfer differs, a digest is not the SHA-1 of
//   FIPS 180-4 (computed here) in RFC 4648 base32, SHA-1 in pieces differs from SHA-1 at once,
//   WARC-Date is not the date to the second, the writer's offset is not the file's size, or the
//   gzip file's members do not decompress to the plain file, one member per record, at the
//   offsets the writer returned.

let directory = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
/// This process's files, reused for every input.
let readPath = URL(fileURLWithPath: directory).appendingPathComponent("fuzz-warc-\(getpid()).warc").path
let plainPath = URL(fileURLWithPath: directory).appendingPathComponent("fuzz-warc-\(getpid())-plain.warc").path
let gzipPath = URL(fileURLWithPath: directory).appendingPathComponent("fuzz-warc-\(getpid())-gzip.warc.gz").path

/// Traps with `message` when `condition` is false (`fatalError`: `precondition` drops its
/// message in optimized builds).
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    guard !condition() else { return }
    fatalError(message())
}

func writeFile(_ path: String, _ bytes: [UInt8]) {
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    require(descriptor >= 0, "cannot create \(path): errno \(errno)")
    defer { close(descriptor) }
    bytes.withUnsafeBytes { buffer in
        var done = 0
        while done < buffer.count {
            let count = write(descriptor, buffer.baseAddress! + done, buffer.count - done)
            require(count > 0, "cannot write \(path): errno \(errno)")
            done += count
        }
    }
}

/// The file's bytes. (Not `FileManager.contents(atPath:)`, which leaks 4 KiB for each empty file
/// it reads in Swift 6.3's Foundation.)
func readFile(_ path: String) -> [UInt8] {
    let descriptor = open(path, O_RDONLY)
    require(descriptor >= 0, "cannot open \(path): errno \(errno)")
    defer { close(descriptor) }
    var bytes: [UInt8] = []
    var piece = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = piece.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        require(count >= 0, "cannot read \(path): errno \(errno)")
        if count == 0 { return bytes }
        bytes += piece[..<count]
    }
}

// MARK: - Reading any file

/// What one `next()` gave, offsets aside.
enum Outcome: Equatable {
    case record(fields: [WARCField], block: [UInt8])
    /// A record whose SHA-1 block digest is not its block's: the reader goes on.
    case digestMismatch
    /// An error about the file: nothing after it.
    case failure
}

/// The smallest record: `WARC/1.0` LF, `Content-Length:0` LF, LF, the block, CRLF CRLF.
let smallestRecord: Int64 = 9 + 17 + 1 + 4

/// Reads every record of the file at `path` (which holds `file`), checking each.
func readAll(_ path: String, _ file: [UInt8], _ context: @autoclosure () -> String) -> [Outcome] {
    var reader: WARCReader
    do { reader = try WARCReader(path: path) } catch { fatalError("\(context()): cannot open: \(error)") }
    let compressed = file.count >= 2 && file[0] == 0x1F && file[1] == 0x8B
    require(reader.isCompressed == compressed, "\(context()): isCompressed is \(reader.isCompressed)")
    let size = Int64(file.count)
    // Deflate expands at most 1032 times; every outcome but the last takes a record's bytes.
    let limit = (compressed ? file.count * 1100 : file.count) / Int(smallestRecord) + 2
    var outcomes: [Outcome] = []
    var earliest: Int64 = 0
    /// Where the next record may start at the earliest, once one has started at `offset`.
    func started(at offset: Int64, blockCount: Int) {
        require(offset >= earliest, "\(context()): a record at \(offset), before \(earliest)")
        if compressed {
            require(offset < size, "\(context()): a record in a member at \(offset), past the end")
            earliest = offset
        } else {
            earliest = offset + smallestRecord + Int64(blockCount)
            require(earliest <= size, "\(context()): a record at \(offset) of \(blockCount) bytes is past the end")
        }
    }
    while true {
        require(outcomes.count <= limit, "\(context()): more than \(limit) outcomes: reading does not end")
        let next: WARCRecord?
        do { next = try reader.next() } catch {
            require((0...size).contains(error.offset), "\(context()): \(error) is outside the file")
            // The reader's word for the one error it goes on after.
            if error.message.hasPrefix("block digest mismatch") {
                started(at: error.offset, blockCount: 0)
                outcomes.append(.digestMismatch)
                continue
            }
            do {
                let after = try reader.next()
                fatalError("\(context()): after \(error), next() gave \(String(describing: after))")
            } catch let again {
                require(again == error, "\(context()): after \(error), next() threw \(again)")
            }
            outcomes.append(.failure)
            return outcomes
        }
        guard let record = next else { return outcomes }
        let about = "\(context()): the record at \(record.offset)"
        started(at: record.offset, blockCount: record.block.count)
        let length = record[field: "Content-Length"] ?? ""
        require(
            !length.isEmpty && length.utf8.allSatisfy { (0x30...0x39).contains($0) }
                && Int(length) == record.block.count,
            "\(about): Content-Length \(length.debugDescription) for a block of \(record.block.count) bytes")
        checkBlockDigests(record, about)
        checkResponse(record, about)
        outcomes.append(.record(fields: record.fields, block: record.block))
    }
}

/// Every SHA-1 WARC-Block-Digest of a record the reader returned is its block's (base32 or hex).
func checkBlockDigests(_ record: WARCRecord, _ context: String) {
    var digest: [UInt8]?
    for field in record.fields where asciiLowercased(field.name) == "warc-block-digest" {
        guard let colon = field.value.firstIndex(of: ":") else { continue }
        let algorithm = field.value[..<colon].lowercased()
        guard algorithm == "sha1" || algorithm == "sha-1" else { continue }
        let text = trimmed(String(field.value[field.value.index(after: colon)...]))
        let actual = digest ?? referenceSHA1(record.block)
        digest = actual
        require(
            text.uppercased() == referenceBase32(actual) || text.lowercased() == hex(actual),
            "\(context): WARC-Block-Digest \(field.value) is not the block's, \(referenceBase32(actual))")
    }
}

/// The HTTP response in a record's block, as `init(record:)` reads it.
func checkResponse(_ record: WARCRecord, _ context: String) {
    let omitted = record.type == "revisit"
    let parsed: HTTPResponseBlock?
    do { parsed = try HTTPResponseBlock(record: record) } catch {
        require(error.offset == record.offset, "\(context): \(error) is not at the record's offset")
        parsed = nil
    }
    let direct = try? HTTPResponseBlock(parsing: record.block, payloadMayBeOmitted: omitted)
    require(
        parsed == direct,
        "\(context): init(record:) gives \(String(describing: parsed)), not \(String(describing: direct))")
    checkHTTPBlock(record.block, payloadMayBeOmitted: omitted, context)
}

// MARK: - The HTTP response in a block

func checkHTTPBlock(_ block: [UInt8], payloadMayBeOmitted: Bool, _ context: @autoclosure () -> String) {
    guard let parsed = try? HTTPResponseBlock(parsing: block, payloadMayBeOmitted: payloadMayBeOmitted) else {
        return
    }
    let about = "\(context()): \(parsed)"
    require(parsed.headLength > 0 && parsed.headLength <= block.count, "\(about): head of \(parsed.headLength)")
    // Bytes, not Characters: a combining mark after the slash makes "/" part of another
    // Character, and `hasPrefix` on the String then says no though the bytes begin with it.
    require(parsed.version.utf8.starts(with: "HTTP/".utf8), "\(about): version")
    require((0...999).contains(parsed.statusCode), "\(about): status code")
    let rest = block[parsed.headLength...]
    if parsed.wasChunked {
        require(parsed.combinedValue(field: "Transfer-Encoding") != nil, "\(about): chunked without Transfer-Encoding")
        require(parsed.payload.count <= rest.count, "\(about): de-chunked payload longer than the chunks")
    } else {
        require(parsed.payload[...] == rest, "\(about): the payload is not the rest of the block")
        require(parsed.trailerFields.isEmpty, "\(about): trailers without chunks")
    }
    let written = serialize(parsed)
    do {
        let again = try HTTPResponseBlock(parsing: written, payloadMayBeOmitted: payloadMayBeOmitted)
        require(
            again.version == parsed.version && again.statusCode == parsed.statusCode && again.reason == parsed.reason
                && again.fields == parsed.fields && again.trailerFields == parsed.trailerFields
                && again.payload == parsed.payload && again.wasChunked == parsed.wasChunked,
            "\(about): written again as \(String(decoding: written, as: UTF8.self).debugDescription), reads \(again)")
    } catch {
        fatalError("\(about): written again as \(String(decoding: written, as: UTF8.self).debugDescription): \(error)")
    }
}

/// A response as a sender would write it: status line, one line per field, CRLF, the payload
/// (in one chunk, then trailers, when it was chunked).
func serialize(_ response: HTTPResponseBlock) -> [UInt8] {
    let code = String(response.statusCode)
    var text = response.version + " " + String(repeating: "0", count: 3 - code.count) + code
    if !response.reason.isEmpty { text += " " + response.reason }
    text += "\r\n"
    for field in response.fields { text += "\(field.name): \(field.value)\r\n" }
    text += "\r\n"
    var bytes = Array(text.utf8)
    guard response.wasChunked else { return bytes + response.payload }
    bytes += chunked(response.payload, pieceSize: max(response.payload.count, 1))
    bytes.removeLast(2)  // The empty line after the trailers, which come first.
    for field in response.trailerFields { bytes += Array("\(field.name): \(field.value)\r\n".utf8) }
    return bytes + [0x0D, 0x0A]
}

/// `payload` in chunks of `pieceSize` bytes (the last may be shorter), the last chunk, no
/// trailers (RFC 9112 §7.1).
func chunked(_ payload: [UInt8], pieceSize: Int) -> [UInt8] {
    var bytes: [UInt8] = []
    var start = 0
    while start < payload.count {
        let end = min(payload.count, start + pieceSize)
        bytes += Array((String(end - start, radix: 16) + "\r\n").utf8) + payload[start..<end] + [0x0D, 0x0A]
        start = end
    }
    return bytes + Array("0\r\n\r\n".utf8)
}

// MARK: - Round trip

func roundTrip(_ input: [UInt8]) {
    guard input.count >= 8 else { return }
    let flags = input[0]
    let isChunked = flags & 1 != 0
    let seconds = input[1..<6].reduce(Int64(0)) { $0 << 8 | Int64($1) }
    // 0000-01-01T00:00:00Z to 9999-12-31T23:59:59Z, W3C-ISO8601's four-digit years.
    let second = seconds % 315_569_520_000 - 62_167_219_200
    let date = Date(timeIntervalSince1970: Double(second) + Double(input[6]) / 256)
    let uriEnd = min(input.count, 8 + Int(input[7]))
    let uri = String(decoding: input[8..<uriEnd], as: UTF8.self)
    let payload = Array(input[uriEnd...])
    let context = "round trip of \(input)"
    checkSHA1(payload, split: Int(input[6]), context)

    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        + (isChunked ? "Transfer-Encoding: chunked\r\n\r\n" : "Content-Length: \(payload.count)\r\n\r\n")
    let body = isChunked ? chunked(payload, pieceSize: 1 + Int(flags >> 3) * 7) : payload
    let response = WARCRecord.response(targetURI: uri, date: date, httpHead: Array(head.utf8), payload: body)
    var records: [WARCRecord] = []
    if flags & 2 != 0 {
        records.append(
            .warcinfo(
                filename: "fuzz.warc.gz", fields: [("software", "FuzzWARCReader"), ("format", "WARC File Format 1.1")],
                date: date))
    }
    if flags & 4 != 0 {
        let request = Array("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n".utf8)
        records.append(
            .request(targetURI: uri, date: date, httpHead: request, concurrentTo: response.recordID))
    }
    records.append(response)

    // Written plain and gzip, one member per record.
    let breaksLine = uri.utf8.contains { $0 == 0x0A || $0 == 0x0D }
    var written: [WARCRecord] = []
    var offsets: [Bool: [Int64]] = [:]
    for gzip in [false, true] {
        let path = gzip ? gzipPath : plainPath
        let writer: WARCWriter
        do { writer = try WARCWriter(path: path, gzip: gzip) } catch { fatalError("\(context): \(error)") }
        written = []
        for record in records {
            do {
                offsets[gzip, default: []].append(try writer.write(record))
                written.append(record)
                require(!breaksLine || record.targetURI == nil, "\(context): a line break in a value was written")
            } catch {
                require(breaksLine && record.targetURI != nil, "\(context): \(error)")
            }
        }
        do { try writer.close() } catch { fatalError("\(context): \(error)") }
        let size = readFile(path).count
        require(writer.offset == Int64(size), "\(context): the writer's offset \(writer.offset) for \(size) bytes")
    }
    let plain = readFile(plainPath)
    let compressed = readFile(gzipPath)
    checkMembers(
        compressed, decompressed: plain, offsets: offsets[true] ?? [], pieceSize: 1 + Int(flags >> 3) * 33, context)

    for (path, gzip) in [(plainPath, false), (gzipPath, true)] {
        let about = "\(context), \(gzip ? "gzip" : "plain")"
        var reader: WARCReader
        do { reader = try WARCReader(path: path) } catch { fatalError("\(about): \(error)") }
        // An empty file (every record refused) is not gzip.
        require(reader.isCompressed == (gzip && !written.isEmpty), "\(about): isCompressed")
        for (index, expected) in written.enumerated() {
            let record: WARCRecord?
            do { record = try reader.next() } catch { fatalError("\(about): record \(index): \(error)") }
            guard let record else { fatalError("\(about): record \(index) is missing") }
            let fields = expected.fields.map { WARCField($0.name, trimmed($0.value)) }
            require(record.fields == fields, "\(about): fields \(record.fields), not \(fields)")
            require(record.block == expected.block, "\(about): record \(index)'s block")
            require(record.offset == offsets[gzip]?[index], "\(about): record \(index) at \(record.offset)")
            require(
                record[field: "WARC-Block-Digest"] == "sha1:" + referenceBase32(referenceSHA1(record.block)),
                "\(about): WARC-Block-Digest \(record[field: "WARC-Block-Digest"] ?? "none")")
            let warcDate = record[field: "WARC-Date"] ?? ""
            require(secondsOfWARCDate(warcDate) == second, "\(about): WARC-Date \(warcDate) for \(date)")
            checkResponse(record, about)
            guard record.type == "response" else { continue }
            require(
                record[field: "WARC-Payload-Digest"] == "sha1:" + referenceBase32(referenceSHA1(body)),
                "\(about): WARC-Payload-Digest \(record[field: "WARC-Payload-Digest"] ?? "none")")
            do {
                let http = try HTTPResponseBlock(record: record)
                require(
                    http.payload == payload && http.wasChunked == isChunked && http.statusCode == 200
                        && http.headLength == head.utf8.count,
                    "\(about): the response reads as \(http)")
            } catch {
                fatalError("\(about): \(error)")
            }
        }
        do {
            let extra = try reader.next()
            require(extra == nil, "\(about): a record more: \(String(describing: extra))")
        } catch {
            fatalError("\(about): after the last record: \(error)")
        }
    }
}

/// The gzip file decompresses to the plain one, one member per record at the writer's offsets;
/// every chunk from one member, none longer than asked.
func checkMembers(_ compressed: [UInt8], decompressed: [UInt8], offsets: [Int64], pieceSize: Int, _ context: String) {
    let reader: GzipFileReader
    do { reader = try GzipFileReader(path: gzipPath) } catch { fatalError("\(context): \(error)") }
    var bytes: [UInt8] = []
    var starts: [Int64] = []
    var inside = false
    while true {
        let chunk: GzipChunk?
        do { chunk = try reader.read(maxLength: pieceSize) } catch { fatalError("\(context): gzip: \(error)") }
        guard let chunk else { break }
        require(chunk.bytes.count <= pieceSize && !chunk.bytes.isEmpty, "\(context): a chunk of \(chunk.bytes.count)")
        require(chunk.startsMember != inside, "\(context): a member starts inside another")
        if chunk.startsMember { starts.append(chunk.memberOffset) }
        require(chunk.memberOffset == starts.last, "\(context): a chunk of the member at \(chunk.memberOffset)")
        inside = !chunk.endsMember
        bytes += chunk.bytes
    }
    require(!inside, "\(context): the last member does not end")
    require(bytes == decompressed, "\(context): the gzip file decompresses to other bytes")
    require(starts == offsets, "\(context): members at \(starts), records at \(offsets)")
}

/// SHA-1 at once, in pieces (a slice, an array, raw bytes) and as FIPS 180-4 computes it agree.
func checkSHA1(_ bytes: [UInt8], split: Int, _ context: String) {
    let first = bytes.count * split / 256
    let second = first + (bytes.count - first) / 2
    var hash = SHA1()
    hash.update(bytes[..<first])
    hash.update(Array(bytes[first..<second]))
    bytes[second...].withUnsafeBytes { hash.update($0) }
    let expected = referenceSHA1(bytes)
    require(hash.finalize() == expected, "\(context): SHA-1 in pieces at \(first), \(second)")
    require(SHA1.hash(bytes) == expected, "\(context): SHA-1")
    require(hash.warcDigest == "sha1:" + referenceBase32(expected), "\(context): warcDigest \(hash.warcDigest)")
    let sample = Array(bytes.prefix(split % 41))
    require(Base32.encode(sample) == referenceBase32(sample), "\(context): base32 of \(sample)")
    require(Base32.decode(referenceBase32(sample)) == sample, "\(context): base32 decoding")
    require(Base32.decode(referenceBase32(sample).lowercased()) == sample, "\(context): lowercase base32")
}

// MARK: - References written from the specifications

/// SHA-1 (FIPS 180-4 §6.1).
func referenceSHA1(_ message: [UInt8]) -> [UInt8] {
    var state: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
    var padded = message + [0x80]
    padded += [UInt8](repeating: 0, count: (119 - message.count % 64) % 64)
    let bits = UInt64(message.count) * 8
    padded += (0..<8).map { UInt8(truncatingIfNeeded: bits >> (56 - 8 * UInt64($0))) }
    func rotate(_ value: UInt32, _ count: UInt32) -> UInt32 { value << count | value >> (32 - count) }
    var schedule = [UInt32](repeating: 0, count: 80)
    for block in stride(from: 0, to: padded.count, by: 64) {
        for t in 0..<16 {
            schedule[t] = padded[block + 4 * t..<block + 4 * t + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        for t in 16..<80 {
            schedule[t] = rotate(schedule[t - 3] ^ schedule[t - 8] ^ schedule[t - 14] ^ schedule[t - 16], 1)
        }
        var (a, b, c, d, e) = (state[0], state[1], state[2], state[3], state[4])
        for t in 0..<80 {
            let f: UInt32
            let k: UInt32
            switch t {
            case 0..<20: (f, k) = (b & c | ~b & d, 0x5A82_7999)
            case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
            case 40..<60: (f, k) = (b & c | b & d | c & d, 0x8F1B_BCDC)
            default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
            }
            let temporary = rotate(a, 5) &+ f &+ e &+ k &+ schedule[t]
            (e, d, c, b, a) = (d, c, rotate(b, 30), a, temporary)
        }
        for (index, value) in [a, b, c, d, e].enumerated() { state[index] &+= value }
    }
    return state.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> (24 - 8 * UInt32($0))) } }
}

/// Base32 (RFC 4648 §6), padded.
func referenceBase32(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    var bits = bytes.flatMap { byte in (0..<8).map { byte >> (7 - $0) & 1 } }
    bits += [UInt8](repeating: 0, count: (5 - bits.count % 5) % 5)
    var text = String(
        stride(from: 0, to: bits.count, by: 5).map { start in
            alphabet[Int(bits[start..<start + 5].reduce(0) { $0 << 1 | $1 })]
        })
    text += String(repeating: "=", count: (8 - text.count % 8) % 8)
    return text
}

/// `text` with ASCII letters lower-cased, as field names compare.
func asciiLowercased(_ text: String) -> String {
    String(
        String.UnicodeScalarView(
            text.unicodeScalars.map { ("A"..."Z").contains($0) ? Unicode.Scalar($0.value + 32)! : $0 }))
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { String($0 >> 4, radix: 16) + String($0 & 0x0F, radix: 16) }.joined()
}

/// Without leading and trailing SP and HT (what a WARC header line's value loses).
func trimmed(_ text: String) -> String {
    var scalars = Substring(text).unicodeScalars
    while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
    while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
    return String(scalars)
}

/// The seconds since 1970 that a `YYYY-MM-DDThh:mm:ssZ` date stands for (proleptic Gregorian,
/// days from the civil date), or nil when it is not one.
func secondsOfWARCDate(_ text: String) -> Int64? {
    let bytes = Array(text.utf8)
    guard bytes.count == 20, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x54, bytes[13] == 0x3A,
        bytes[16] == 0x3A, bytes[19] == 0x5A
    else { return nil }
    func number(_ range: Range<Int>) -> Int64? {
        var value: Int64 = 0
        for byte in bytes[range] {
            guard (0x30...0x39).contains(byte) else { return nil }
            value = value * 10 + Int64(byte - 0x30)
        }
        return value
    }
    guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
        let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
        (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60
    else { return nil }
    let shiftedYear = month <= 2 ? year - 1 : year
    let era = (shiftedYear >= 0 ? shiftedYear : shiftedYear - 399) / 400
    let yearOfEra = shiftedYear - era * 400
    let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
    let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
    let days = era * 146_097 + dayOfEra - 719_468
    return days * 86_400 + hour * 3_600 + minute * 60 + second
}

// MARK: - The target

atexit {
    for path in [readPath, plainPath, gzipPath] { unlink(path) }
}

runFuzzer { data, size in
    let bytes = fuzzBytes(data, size)
    guard let selector = bytes.first else { return 0 }
    let input = Array(bytes.dropFirst())
    let choice = Int(selector / 3)
    switch selector % 3 {
    case 0:
        writeFile(readPath, input)
        let outcomes = readAll(readPath, input, "\(input)")
        guard input.count < 2 || input[0] != 0x1F || input[1] != 0x8B else { return 0 }
        let split = input.count * choice / 85
        let members = Gzip.compress(Array(input[..<split])) + Gzip.compress(Array(input[split...]))
        writeFile(readPath, members)
        let fromMembers = readAll(readPath, members, "\(input) in gzip members split at \(split)")
        require(
            fromMembers == outcomes,
            "\(input): plain \(outcomes), in gzip members split at \(split) \(fromMembers)")
    case 1: checkHTTPBlock(input, payloadMayBeOmitted: choice & 1 != 0, "\(input)")
    default: roundTrip(input)
    }
    return 0
}
