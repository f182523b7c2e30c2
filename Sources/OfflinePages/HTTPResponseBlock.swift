/// The HTTP response in the block of a WARC `response` or `revisit` record (ISO 28500 / WARC 1.1
/// "'response'", "'revisit'"; `Content-Type: application/http;msgtype=response`): status line,
/// header fields, and the payload.
///
/// When the head says `Transfer-Encoding: chunked` (as the final transfer coding), the block
/// holds the payload as it came over the wire, in chunks; `payload` is then the de-chunked
/// content (RFC 9112 §7.1 "Chunked Transfer Coding", chunk extensions ignored, trailer fields in
/// `trailerFields`) and `wasChunked` is true: that payload is what callers store. The fields are
/// left as they were, `Transfer-Encoding` included.
///
/// Otherwise a `Content-Length` in the head must match the payload: a shorter payload means the
/// response was cut when it was archived, and is an error (as is a longer one). A `revisit`
/// record's block may be the head alone (ISO 28500 / WARC 1.1 "'revisit'"): see
/// `init(parsing:payloadMayBeOmitted:)` and `init(record:)`.
public struct HTTPResponseBlock: Sendable, Hashable {
    /// One HTTP header or trailer field (RFC 9110 §5): `name: value`.
    public struct Field: Sendable, Hashable {
        /// The field name as written (compared case-insensitively).
        public var name: String
        /// The field value without surrounding white space (obsolete line folding joined with a
        /// space).
        public var value: String

        /// Creates a field.
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The HTTP version of the status line, e.g. `HTTP/1.1`.
    public var version: String
    /// The status code, e.g. 200.
    public var statusCode: Int
    /// The reason phrase (may be empty).
    public var reason: String
    /// The header fields, in order.
    public var fields: [Field]
    /// The trailer fields of a chunked payload (RFC 9112 §7.1.2), in order.
    public var trailerFields: [Field]
    /// The payload: the block after the head, de-chunked when it was chunked.
    public var payload: [UInt8]
    /// Whether the block's payload was in chunked transfer coding (and `payload` is de-chunked).
    public var wasChunked: Bool
    /// The length of the head in the block: status line, fields and the empty line.
    public var headLength: Int

    /// The value of the first header field called `name` (compared case-insensitively), or nil.
    public subscript(field name: String) -> String? {
        fields.first { WARCSyntax.namesEqual($0.name, name) }?.value
    }

    /// The values of every header field called `name`, joined with `, ` (RFC 9110 §5.3), or nil.
    public func combinedValue(field name: String) -> String? { HTTPResponseBlock.combined(fields, name) }

    private static func combined(_ fields: [Field], _ name: String) -> String? {
        let values = fields.filter { WARCSyntax.namesEqual($0.name, name) }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// Parses the block of a `response` record, or of a `revisit` record (whose payload may be
    /// left out).
    ///
    /// Throws `WARCError` at the record's offset when the block is not an HTTP response or its
    /// payload is malformed or cut.
    public init(record: WARCRecord) throws(WARCError) {
        do {
            try self.init(parsing: record.block, payloadMayBeOmitted: record.type == "revisit")
        } catch {
            throw WARCError(offset: record.offset, message: "the HTTP response in the block: \(error.message)")
        }
    }

    /// Parses `block`: an HTTP/1.x response head (RFC 9112 §4 status line, §5 field lines; a bare
    /// LF is tolerated for CRLF) and the payload after it.
    ///
    /// With `payloadMayBeOmitted` (for `revisit` records, and for responses to HEAD requests), a
    /// block that ends with the head has an empty payload whatever the head's `Content-Length` or
    /// `Transfer-Encoding` say.
    public init(parsing block: [UInt8], payloadMayBeOmitted: Bool = false) throws(HTTPBlockError) {
        guard let head = try HTTPResponseBlock.parseHead(block[...]) else {
            throw HTTPBlockError(
                message: block.isEmpty
                    ? "the block is empty — a response record's block starts with the HTTP status line"
                    : "the HTTP head does not end (no empty line after its fields) — the block is not an HTTP"
                        + " response, or it was cut")
        }
        (version, statusCode, reason, fields, headLength) = (
            head.version, head.statusCode, head.reason, head.fields, head.length
        )
        let rest = block[head.length...]
        trailerFields = []
        wasChunked = false
        switch try HTTPResponseBlock.framing(of: head, restLength: rest.count, payloadMayBeOmitted: payloadMayBeOmitted)
        {
        case .empty:
            payload = []
        case .whole:
            payload = Array(rest)
        case .chunked:
            var decoder = ChunkedPayloadDecoder()
            var decoded: [UInt8] = []
            try decoder.feed(rest, into: &decoded)
            trailerFields = try decoder.finish()
            payload = decoded
            wasChunked = true
        }
    }

    /// The head of an HTTP response: what comes before the payload.
    struct Head: Sendable, Hashable {
        var version: String
        var statusCode: Int
        var reason: String
        var fields: [Field]
        /// Its length in the block: status line, fields and the empty line.
        var length: Int
    }

    /// Parses the HTTP/1.x response head at the start of `bytes` (RFC 9112 §4 status line, §5
    /// field lines; a bare LF is tolerated for CRLF); nil when its end (the empty line) is not
    /// in `bytes`.
    static func parseHead(_ bytes: ArraySlice<UInt8>) throws(HTTPBlockError) -> Head? {
        var index = bytes.startIndex
        var lines: [ArraySlice<UInt8>] = []
        while true {
            guard let newline = bytes[index...].firstIndex(of: 0x0A) else { return nil }
            var line = bytes[index..<newline]
            if line.last == 0x0D { line = line.dropLast() }
            index = newline + 1
            if line.isEmpty { break }
            lines.append(line)
        }
        guard let statusLine = lines.first else {
            throw HTTPBlockError(
                message: "the block starts with an empty line, not an HTTP status line — it is not an HTTP response")
        }
        let (version, statusCode, reason) = try parseStatusLine(statusLine)
        return Head(
            version: version, statusCode: statusCode, reason: reason,
            fields: try parseFields(lines.dropFirst(), kind: "header"),
            length: index - bytes.startIndex)
    }

    /// How a payload follows its head.
    enum Framing: Sendable, Hashable {
        /// No payload (a `revisit` record's head alone).
        case empty
        /// The rest of the block, as it is.
        case whole
        /// The rest of the block, in chunked transfer coding (RFC 9112 §7.1).
        case chunked
    }

    /// How the payload after `head` is framed when `restLength` bytes of the block follow it;
    /// throws when its `Content-Length` does not match them.
    ///
    /// With `payloadMayBeOmitted` (`revisit` records, responses to HEAD requests) a head with
    /// nothing after it has no payload whatever its fields say.
    static func framing(
        of head: Head, restLength: Int, payloadMayBeOmitted: Bool
    ) throws(HTTPBlockError) -> Framing {
        if payloadMayBeOmitted && restLength == 0 { return .empty }
        // RFC 9112 §6.3: 1xx, 204 and 304 responses have no content whatever their fields say.
        if (100..<200).contains(head.statusCode) || head.statusCode == 204 || head.statusCode == 304 { return .whole }
        if let codings = combined(head.fields, "Transfer-Encoding") {
            let last = codings.split(separator: ",").last.map { String($0).lowercased() } ?? ""
            // Not chunked last: the payload runs to the end (RFC 9112 §6.3).
            return WARCSyntax.text(WARCSyntax.trimmed(Array(last.utf8)[...])) == "chunked" ? .chunked : .whole
        }
        if let lengthText = combined(head.fields, "Content-Length") {
            // RFC 9110 §8.6: a list of identical values is one value.
            let values = Set(
                lengthText.split(separator: ",").map { WARCSyntax.text(WARCSyntax.trimmed(Array($0.utf8)[...])) })
            guard values.count == 1, let text = values.first, !text.isEmpty, text.utf8.count <= 18,
                text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), let length = Int(text)
            else {
                throw HTTPBlockError(
                    message: "Content-Length \"\(lengthText)\" is not one number of bytes — the response head is"
                        + " malformed")
            }
            guard restLength == length else {
                throw HTTPBlockError(
                    message: restLength < length
                        ? "the payload has \(restLength) bytes but Content-Length says \(length) — the response was"
                            + " cut off when it was archived; its payload is incomplete"
                        : "the payload has \(restLength) bytes, more than the \(length) Content-Length says — the"
                            + " block holds more than this response; the record is malformed")
            }
        }
        return .whole
    }

    private static func parseStatusLine(
        _ line: ArraySlice<UInt8>
    ) throws(HTTPBlockError) -> (version: String, statusCode: Int, reason: String) {
        let bad = HTTPBlockError(
            message: "the status line \(WARCSyntax.quoted(line)) is not `HTTP/x.y NNN reason` (RFC 9112 §4)"
                + " — the block is not an HTTP response")
        guard line.starts(with: "HTTP/".utf8), let space = line.firstIndex(of: 0x20) else { throw bad }
        let version = WARCSyntax.text(line[..<space])
        let afterVersion = line[(space + 1)...]
        let digits = afterVersion.prefix(3)
        guard digits.count == 3, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let code = Int(WARCSyntax.text(digits))
        else { throw bad }
        let afterCode = afterVersion.dropFirst(3)
        guard afterCode.isEmpty || afterCode.first == 0x20 else { throw bad }
        return (version, code, WARCSyntax.text(WARCSyntax.trimmed(afterCode)))
    }

    private static func parseFields(
        _ lines: ArraySlice<ArraySlice<UInt8>>, kind: String
    ) throws(HTTPBlockError) -> [Field] {
        var fields: [Field] = []
        for line in lines {
            if WARCSyntax.isBlank(line[line.startIndex]) {
                // Obsolete line folding (RFC 9112 §5.2): the value continues.
                guard !fields.isEmpty else {
                    throw HTTPBlockError(
                        message: "the first \(kind) field line starts with white space — the response head is"
                            + " malformed")
                }
                let more = WARCSyntax.text(WARCSyntax.trimmed(line))
                if !more.isEmpty {
                    let previous = fields[fields.count - 1].value
                    fields[fields.count - 1].value = previous.isEmpty ? more : previous + " " + more
                }
                continue
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")),
                !WARCSyntax.trimmed(line[..<colon]).isEmpty
            else {
                throw HTTPBlockError(
                    message: "the \(kind) field line \(WARCSyntax.quoted(line)) is not `name: value` (RFC 9112 §5)"
                        + " — the response head is malformed")
            }
            fields.append(
                Field(
                    WARCSyntax.text(WARCSyntax.trimmed(line[..<colon])),
                    WARCSyntax.text(WARCSyntax.trimmed(line[(colon + 1)...]))))
        }
        return fields
    }

    static func parseTrailer(_ lines: [[UInt8]]) throws(HTTPBlockError) -> [Field] {
        try parseFields(lines.map { $0[...] }[...], kind: "trailer")
    }
}

/// The content of a chunked payload (RFC 9112 §7.1), decoded as the block's bytes come:
/// `chunk-size [chunk-ext] CRLF chunk-data CRLF` repeated, a last chunk of size 0, trailer
/// fields, and an empty line (which may be missing at the very end). A bare LF is tolerated for
/// CRLF. Lines are bounded (64 KiB each, the trailer section in all), so memory is too.
struct ChunkedPayloadDecoder {
    private enum State {
        case sizeLine
        case data(size: Int, remaining: Int)
        /// After a chunk's data: its CRLF (`sawCR` once the CR is in).
        case dataEnd(size: Int, sawCR: Bool)
        case trailer
        case done
    }

    static let lineLimit = 64 * 1024
    private var state = State.sizeLine
    /// The line being read, without its LF.
    private var line: [UInt8] = []
    private var trailerLines: [[UInt8]] = []
    private var trailerBytes = 0
    private var decoded = 0
    /// Bytes after the end of the payload.
    private var extra = 0
    private let cut = "the response was cut off when it was archived; its payload is incomplete"

    /// Decodes `bytes`, appending the payload's to `output`.
    mutating func feed(_ bytes: ArraySlice<UInt8>, into output: inout [UInt8]) throws(HTTPBlockError) {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            switch state {
            case .data(let size, let remaining):
                let take = min(remaining, bytes.endIndex - index)
                output.append(contentsOf: bytes[index..<index + take])
                index += take
                decoded += take
                state =
                    remaining == take
                    ? .dataEnd(size: size, sawCR: false) : .data(size: size, remaining: remaining - take)
            case .dataEnd(let size, let sawCR):
                let byte = bytes[index]
                if byte == 0x0A {
                    state = .sizeLine
                } else if byte == 0x0D, !sawCR {
                    state = .dataEnd(size: size, sawCR: true)
                } else {
                    throw HTTPBlockError(
                        message: "chunk data of \(size) bytes is followed by"
                            + " \(WARCSyntax.quoted(bytes[(sawCR ? index - 1 : index)...].prefix(8), limit: 8)), not"
                            + " CRLF — the chunk sizes are wrong; the payload is damaged")
                }
                index += 1
            case .sizeLine, .trailer:
                let newline = bytes[index...].firstIndex(of: 0x0A) ?? bytes.endIndex
                line.append(contentsOf: bytes[index..<newline])
                guard line.count <= Self.lineLimit else {
                    throw HTTPBlockError(
                        message: "a line of the chunked payload is longer than \(Self.lineLimit / 1024) KiB — the"
                            + " payload is not chunked as its Transfer-Encoding says")
                }
                index = newline
                guard newline < bytes.endIndex else { break }
                index += 1
                if line.last == 0x0D { line.removeLast() }
                try endLine()
            case .done:
                extra += bytes.endIndex - index
                index = bytes.endIndex
            }
        }
    }

    private mutating func endLine() throws(HTTPBlockError) {
        defer { line.removeAll(keepingCapacity: true) }
        if case .trailer = state {
            // The trailer section (RFC 9112 §7.1.2) ends with an empty line.
            if line.isEmpty {
                state = .done
                return
            }
            trailerBytes += line.count
            guard trailerBytes <= Self.lineLimit else {
                throw HTTPBlockError(
                    message: "the chunked payload's trailer section is longer than \(Self.lineLimit / 1024) KiB"
                        + " — the payload is damaged")
            }
            trailerLines.append(line)
            return
        }
        let digits = line.prefix { WARCSyntax.hexValue($0) != nil }
        let extensions = WARCSyntax.trimmed(line.dropFirst(digits.count))
        guard !digits.isEmpty, digits.count <= 15, extensions.isEmpty || extensions.first == UInt8(ascii: ";") else {
            throw HTTPBlockError(
                message: "the chunk size line \(WARCSyntax.quoted(line[...])) is not a hexadecimal size with"
                    + " optional ;extensions (RFC 9112 §7.1) — the payload is not chunked as its"
                    + " Transfer-Encoding says")
        }
        let size = digits.reduce(0) { $0 << 4 | Int(WARCSyntax.hexValue($1) ?? 0) }
        state = size == 0 ? .trailer : .data(size: size, remaining: size)
    }

    /// The block ended: the trailer fields, or why the payload is not complete.
    mutating func finish() throws(HTTPBlockError) -> [HTTPResponseBlock.Field] {
        switch state {
        case .sizeLine where line.isEmpty:
            throw HTTPBlockError(
                message: "the chunked payload ends after \(decoded) bytes without its last chunk (size 0) — \(cut)")
        case .sizeLine:
            throw HTTPBlockError(
                message: "the chunked payload ends inside a line (\(WARCSyntax.quoted(line[...]))) — \(cut)")
        case .trailer where !line.isEmpty:
            throw HTTPBlockError(
                message: "the chunked payload ends inside a line (\(WARCSyntax.quoted(line[...]))) — \(cut)")
        case .data(let size, let remaining):
            throw HTTPBlockError(
                message: "a chunk of \(size) bytes has only \(size - remaining) left in the block — \(cut)")
        case .dataEnd:
            throw HTTPBlockError(message: "the chunked payload ends right after a chunk's data — \(cut)")
        case .trailer, .done:
            guard extra == 0 else {
                throw HTTPBlockError(
                    message: "\(extra) bytes follow the end of the chunked payload — the block holds"
                        + " more than this response; the record is malformed")
            }
            return try HTTPResponseBlock.parseTrailer(trailerLines)
        }
    }
}

/// A WARC block that is not the HTTP response it should be: what is wrong and what it means.
public struct HTTPBlockError: Error, CustomStringConvertible, Sendable, Hashable {
    /// What is wrong and what it means.
    public var message: String

    /// Creates an error.
    public init(message: String) { self.message = message }

    public var description: String { message }
}
