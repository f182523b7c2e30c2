import CacheSemantics
import Foundation

/// One named field of a WARC record header (ISO 28500 / WARC 1.1 "WARC record header", "Named
/// fields"): `Name: value`.
public struct WARCField: Sendable, Hashable {
    /// The field name, as written (field names are compared case-insensitively).
    public var name: String
    /// The field value, without surrounding white space; continuation lines are joined with a
    /// space.
    public var value: String

    /// Creates a field.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// One WARC record (ISO 28500 / WARC 1.1 "File and record model"): a header of named fields and
/// a block of `Content-Length` bytes.
public struct WARCRecord: Sendable, Hashable {
    /// The header's named fields, in order.
    public var fields: [WARCField]
    /// The record block: for `response`, `request` and `revisit` records an HTTP message (or its
    /// head), for `warcinfo` `application/warc-fields` text.
    public var block: [UInt8]
    /// Byte offset in the file where the record starts (its gzip member in a .gz file), for error
    /// messages. 0 for records not read from a file.
    public var offset: Int64

    /// Creates a record from its fields and block. `Content-Length` is added by `WARCWriter` when
    /// it is missing.
    public init(fields: [WARCField], block: [UInt8], offset: Int64 = 0) {
        self.fields = fields
        self.block = block
        self.offset = offset
    }

    /// The value of the first field called `name` (compared case-insensitively), or nil.
    ///
    /// Setting replaces the first such field's value (or appends the field); setting nil removes
    /// every field called `name`. Every named field is reached this way, including those of
    /// `revisit` records (ISO 28500 / WARC 1.1 "'revisit'"): `WARC-Refers-To-Target-URI`,
    /// `WARC-Refers-To-Date`, `WARC-Payload-Digest`, `WARC-Profile`.
    public subscript(field name: String) -> String? {
        get { fields.first { WARCSyntax.namesEqual($0.name, name) }?.value }
        set {
            guard let newValue else {
                fields.removeAll { WARCSyntax.namesEqual($0.name, name) }
                return
            }
            if let index = fields.firstIndex(where: { WARCSyntax.namesEqual($0.name, name) }) {
                fields[index].value = newValue
            } else {
                fields.append(WARCField(name, newValue))
            }
        }
    }

    /// `WARC-Type` ("WARC-Type (mandatory)"): `warcinfo`, `response`, `resource`, `request`,
    /// `metadata`, `revisit`, `conversion` or `continuation`.
    public var type: String? { self[field: "WARC-Type"] }

    /// `WARC-Target-URI`, with surrounding `<` `>` removed when present (as WARC 1.0 examples
    /// wrote it).
    public var targetURI: String? {
        guard let value = self[field: "WARC-Target-URI"] else { return nil }
        if value.hasPrefix("<") && value.hasSuffix(">") && value.count >= 2 {
            return String(value.dropFirst().dropLast())
        }
        return value
    }

    /// `WARC-Record-ID` ("WARC-Record-ID (mandatory)"), e.g. `<urn:uuid:…>`.
    public var recordID: String? { self[field: "WARC-Record-ID"] }
}

/// A WARC file that cannot be read or written: where, what happened and what to do.
///
/// `description` reads `WARC record at offset 1234: <what> — <what to do>`.
public struct WARCError: Error, CustomStringConvertible, Sendable, Hashable {
    /// Byte offset in the file of the record concerned (of its gzip member in a .gz file; for a
    /// corrupt gzip member, of that member).
    public var offset: Int64
    /// What happened and what to do.
    public var message: String

    /// Creates an error.
    public init(offset: Int64, message: String) {
        self.offset = offset
        self.message = message
    }

    public var description: String { "WARC record at offset \(offset): \(message)" }
}

// MARK: - Making records

extension WARCRecord {
    /// `application/http;msgtype=response`, the `Content-Type` of `response` records.
    public static let httpResponseContentType = "application/http;msgtype=response"
    /// `application/http;msgtype=request`, the `Content-Type` of `request` records.
    public static let httpRequestContentType = "application/http;msgtype=request"

    /// A `warcinfo` record (ISO 28500 / WARC 1.1 "'warcinfo'") describing the file: `fields`
    /// become the `application/warc-fields` block, one `name: value` line each (for example
    /// `("software", "httpcache")`, `("format", "WARC File Format 1.1")`).
    public static func warcinfo(filename: String, fields: [(String, String)], date: Date = Date()) -> WARCRecord {
        var block: [UInt8] = []
        for (name, value) in fields { block.append(contentsOf: Array("\(name): \(value)\r\n".utf8)) }
        return WARCRecord(
            fields: [
                WARCField("WARC-Type", "warcinfo"), WARCField("WARC-Record-ID", newRecordID()),
                WARCField("WARC-Date", warcDate(date)), WARCField("WARC-Filename", filename),
                WARCField("Content-Type", "application/warc-fields"),
                WARCField("WARC-Block-Digest", SHA1.warcDigest(block)),
                WARCField("Content-Length", String(block.count)),
            ],
            block: block)
    }

    /// A `response` record (ISO 28500 / WARC 1.1 "'response'") of an HTTP response: the block is
    /// `httpHead` (status line, fields and the empty line, as received) followed by `payload`.
    ///
    /// Sets `WARC-Payload-Digest` (SHA-1 of `payload`) and `WARC-Block-Digest` (SHA-1 of the
    /// whole block). When the payload is stored de-chunked, the head should not say
    /// `Transfer-Encoding: chunked`.
    public static func response(
        targetURI: String, date: Date, httpHead: [UInt8], payload: [UInt8], concurrentTo: String? = nil
    ) -> WARCRecord {
        httpRecord(
            type: "response", contentType: httpResponseContentType, targetURI: targetURI, date: date,
            httpHead: httpHead, payload: payload, payloadDigest: true, concurrentTo: concurrentTo)
    }

    /// A `request` record (ISO 28500 / WARC 1.1 "'request'") of the HTTP request that fetched a
    /// response: the block is `httpHead` followed by `payload` (usually empty). `concurrentTo` is
    /// the `WARC-Record-ID` of the response record ("WARC-Concurrent-To").
    public static func request(
        targetURI: String, date: Date, httpHead: [UInt8], payload: [UInt8] = [], concurrentTo: String?
    ) -> WARCRecord {
        httpRecord(
            type: "request", contentType: httpRequestContentType, targetURI: targetURI, date: date,
            httpHead: httpHead, payload: payload, payloadDigest: !payload.isEmpty, concurrentTo: concurrentTo)
    }

    private static func httpRecord(
        type: String, contentType: String, targetURI: String, date: Date, httpHead: [UInt8], payload: [UInt8],
        payloadDigest: Bool, concurrentTo: String?
    ) -> WARCRecord {
        var blockHash = SHA1()
        blockHash.update(httpHead)
        blockHash.update(payload)
        let fields = httpRecordFields(
            type: type, contentType: contentType, targetURI: targetURI, date: date,
            payloadDigest: payloadDigest ? SHA1.warcDigest(payload) : nil, blockDigest: blockHash.warcDigest,
            blockLength: Int64(httpHead.count + payload.count), concurrentTo: concurrentTo)
        return WARCRecord(fields: fields, block: httpHead + payload)
    }

    /// The header fields of a `response` or `request` record with a new `WARC-Record-ID`, whose
    /// block of `blockLength` bytes has these digests (`sha1:` and base 32, as
    /// ``SHA1/warcDigest`` writes them): for a record written in pieces
    /// (``WARCWriter/write(fields:blockLength:block:)``), its digests taken before.
    static func httpRecordFields(
        type: String, contentType: String, targetURI: String, date: Date, payloadDigest: String?,
        blockDigest: String, blockLength: Int64, concurrentTo: String?
    ) -> [WARCField] {
        var fields = [
            WARCField("WARC-Type", type), WARCField("WARC-Record-ID", newRecordID()),
            WARCField("WARC-Date", warcDate(date)), WARCField("WARC-Target-URI", targetURI),
        ]
        if let concurrentTo { fields.append(WARCField("WARC-Concurrent-To", concurrentTo)) }
        fields.append(WARCField("Content-Type", contentType))
        if let payloadDigest { fields.append(WARCField("WARC-Payload-Digest", payloadDigest)) }
        fields.append(WARCField("WARC-Block-Digest", blockDigest))
        fields.append(WARCField("Content-Length", String(blockLength)))
        return fields
    }

    /// A new `WARC-Record-ID` ("WARC-Record-ID (mandatory)"): `<urn:uuid:…>` with a random UUID.
    public static func newRecordID() -> String { "<urn:uuid:\(UUID().uuidString.lowercased())>" }

    /// `date` as `WARC-Date` writes it ("WARC-Date (mandatory)", W3C-ISO8601 in UTC): to the
    /// second, e.g. `2026-12-01T10:00:00Z`.
    public static func warcDate(_ date: Date) -> String {
        HTTPDate.iso8601(Timestamp(secondsSince1970: date.timeIntervalSince1970))
    }
}

// MARK: - Writing

/// Writes WARC records (ISO 28500 / WARC 1.1) to a file, each as `WARC/1.1`, its fields, an empty
/// line, the block and two CRLFs ("WARC record header"); with `gzip`, each record is one gzip
/// member of its own ("record-at-time compression"), so readers can start at any record's offset.
///
/// Not thread-safe: use one writer from one task at a time.
public final class WARCWriter {
    /// The file written.
    public let path: String
    /// Whether each record is compressed as its own gzip member.
    public let gzip: Bool
    /// Bytes written so far: the offset where the next record will start.
    public private(set) var offset: Int64 = 0
    private var handle: FileHandle?

    /// Creates the file at `path` (truncating it if it exists).
    public init(path: String, gzip: Bool) throws(WARCError) {
        self.path = path
        self.gzip = gzip
        do {
            guard FileManager.default.createFile(atPath: path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown)
            }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle.truncate(atOffset: 0)
            self.handle = handle
        } catch {
            throw WARCError(
                offset: 0,
                message: "could not create the WARC file \(path): \(error.localizedDescription)"
                    + " — check that its directory exists and is writable")
        }
    }

    deinit { try? handle?.close() }

    /// Appends `record`, returning the offset where it starts.
    ///
    /// Adds `Content-Length` when the record has none. Throws when a field would break the
    /// header (a line break in a value, a name that is not a token), when `Content-Length`
    /// disagrees with the block, or when writing fails (the file then ends with an incomplete
    /// record, from the returned offset on).
    @discardableResult
    public func write(_ record: WARCRecord) throws(WARCError) -> Int64 {
        try write(fields: record.fields, blockLength: Int64(record.block.count)) { emit in try emit(record.block) }
    }

    /// Appends a record whose block of `blockLength` bytes `block` hands over in pieces, each
    /// written (and compressed) before the next is asked for: a record larger than memory is
    /// written in the memory of one piece. Throws as ``write(_:)`` does, also when the pieces
    /// come to more or fewer bytes than `blockLength`, and rethrows what `block` throws, wrapped
    /// (the file then ends with an incomplete record).
    @discardableResult
    func write(
        fields: [WARCField], blockLength: Int64, block: (_ emit: ([UInt8]) throws(WARCError) -> Void) throws -> Void
    ) throws(WARCError) -> Int64 {
        guard let handle else {
            throw WARCError(
                offset: offset, message: "the WARC writer is closed — write every record before calling close()")
        }
        let start = offset
        let header = try self.header(fields, blockLength: blockLength)
        var fileBytes: Int64 = 0
        func put(_ bytes: [UInt8]) throws(WARCError) {
            guard !bytes.isEmpty else { return }
            do { try handle.write(contentsOf: bytes) } catch {
                throw WARCError(
                    offset: start,
                    message: "could not write the record to \(path): \(error.localizedDescription)"
                        + " — check free space and permissions; the file is incomplete from this offset on")
            }
            fileBytes += Int64(bytes.count)
        }
        let member = gzip ? GzipMember() : nil
        func emit(_ bytes: [UInt8]) throws(WARCError) {
            if let member { try member.add(bytes, to: put) } else { try put(bytes) }
        }
        try emit(header)
        var written: Int64 = 0
        do {
            try block { (bytes: [UInt8]) throws(WARCError) in
                written += Int64(bytes.count)
                guard written <= blockLength else {
                    throw WARCError(
                        offset: start,
                        message: "the block is longer than its Content-Length \(blockLength) — the file is incomplete"
                            + " from this offset on")
                }
                try emit(bytes)
            }
        } catch let error as WARCError {
            throw error
        } catch {
            throw WARCError(
                offset: start,
                message: "the record's block could not be read: \(error) — the file is incomplete from this offset on")
        }
        guard written == blockLength else {
            throw WARCError(
                offset: start,
                message: "the block has \(written) bytes but its Content-Length is \(blockLength) — the file is"
                    + " incomplete from this offset on")
        }
        try emit([0x0D, 0x0A, 0x0D, 0x0A])
        if let member { try member.finish(to: put) }
        offset += fileBytes
        return start
    }

    /// Flushes and closes the file. Further writes throw; closing again does nothing.
    public func close() throws(WARCError) {
        guard let handle else { return }
        self.handle = nil
        do {
            try handle.synchronize()
            try handle.close()
        } catch {
            throw WARCError(
                offset: offset,
                message: "could not close \(path): \(error.localizedDescription) — the file may be incomplete;"
                    + " write it again")
        }
    }

    /// `WARC/1.1`, the fields and an empty line: the header of a record whose block has
    /// `blockLength` bytes (`Content-Length` added when the fields have none).
    private func header(_ fields: [WARCField], blockLength: Int64) throws(WARCError) -> [UInt8] {
        var fields = fields
        if let declared = fields.first(where: { WARCSyntax.namesEqual($0.name, "Content-Length") })?.value {
            guard declared == String(blockLength) else {
                throw WARCError(
                    offset: offset,
                    message: "Content-Length is \(declared) but the block has \(blockLength) bytes"
                        + " — set Content-Length to the block's length or leave it out")
            }
        } else {
            fields.append(WARCField("Content-Length", String(blockLength)))
        }
        var bytes = Array("WARC/1.1\r\n".utf8)
        for field in fields {
            guard !field.name.isEmpty, field.name.utf8.allSatisfy(WARCSyntax.isTokenCharacter) else {
                throw WARCError(
                    offset: offset,
                    message: "the field name \"\(field.name)\" is not a token (RFC 9110 §5.1)"
                        + " — use letters, digits and -")
            }
            guard !field.value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }) else {
                throw WARCError(
                    offset: offset,
                    message: "the value of \(field.name) contains a line break — remove it, a header line cannot"
                        + " hold one")
            }
            bytes.append(contentsOf: Array("\(field.name): \(field.value)\r\n".utf8))
        }
        bytes.append(contentsOf: [0x0D, 0x0A])
        return bytes
    }
}

// MARK: - Shared helpers

/// Byte-level helpers shared by the WARC reader, writer and HTTP block parser.
enum WARCSyntax {
    /// Whether two field names are equal ignoring ASCII case.
    static func namesEqual(_ a: String, _ b: String) -> Bool {
        let (x, y) = (a.utf8, b.utf8)
        guard x.count == y.count else { return false }
        return zip(x, y).allSatisfy { lowercase($0) == lowercase($1) }
    }

    static func lowercase(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
    }

    /// RFC 9110 §5.6.2 `tchar`.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return tokenSymbols.contains(byte)
        }
    }

    private static let tokenSymbols = Array("!#$%&'*+-.^_`|~".utf8)

    /// Text of header bytes: UTF-8 (WARC 1.1 allows it in field values; HTTP fields are ASCII in
    /// practice), invalid sequences replaced.
    static func text(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    /// `bytes` for an error message: printable ASCII as is, others escaped, at most `limit` bytes.
    static func quoted(_ bytes: ArraySlice<UInt8>, limit: Int = 60) -> String {
        var text = "\""
        for byte in bytes.prefix(limit) {
            switch byte {
            case 0x0D: text += "\\r"
            case 0x0A: text += "\\n"
            case 0x22: text += "\\\""
            case 0x20..<0x7F: text.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                text += "\\x" + (hex.count < 2 ? "0" + hex : hex)
            }
        }
        return text + (bytes.count > limit ? "…\"" : "\"")
    }

    /// The value of a hexadecimal digit, or nil.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// Whether `byte` is SP or HTAB.
    static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// `bytes` without leading and trailing SP and HTAB.
    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, isBlank(first) { slice = slice.dropFirst() }
        while let last = slice.last, isBlank(last) { slice = slice.dropLast() }
        return slice
    }
}
