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
        var index = 0
        var lines: [ArraySlice<UInt8>] = []
        while true {
            guard let newline = block[index...].firstIndex(of: 0x0A) else {
                throw HTTPBlockError(
                    message: lines.isEmpty && index == block.count
                        ? "the block is empty — a response record's block starts with the HTTP status line"
                        : "the HTTP head does not end (no empty line after its fields) — the block is not an HTTP"
                            + " response, or it was cut")
            }
            var line = block[index..<newline]
            if line.last == 0x0D { line = line.dropLast() }
            index = newline + 1
            if line.isEmpty { break }
            lines.append(line)
        }
        headLength = index
        guard let statusLine = lines.first else {
            throw HTTPBlockError(
                message: "the block starts with an empty line, not an HTTP status line — it is not an HTTP response")
        }
        (version, statusCode, reason) = try HTTPResponseBlock.parseStatusLine(statusLine)
        fields = try HTTPResponseBlock.parseFields(lines.dropFirst(), kind: "header")
        trailerFields = []
        wasChunked = false
        let rest = block[index...]
        if payloadMayBeOmitted && rest.isEmpty {
            payload = []
            return
        }
        // RFC 9112 §6.3: 1xx, 204 and 304 responses have no content whatever their fields say.
        if (100..<200).contains(statusCode) || statusCode == 204 || statusCode == 304 {
            payload = Array(rest)
            return
        }
        if let codings = HTTPResponseBlock.combined(fields, "Transfer-Encoding") {
            let last = codings.split(separator: ",").last.map { String($0).lowercased() } ?? ""
            if WARCSyntax.text(WARCSyntax.trimmed(Array(last.utf8)[...])) == "chunked" {
                (payload, trailerFields) = try HTTPResponseBlock.dechunk(rest)
                wasChunked = true
            } else {
                // Not chunked last: the payload runs to the end (RFC 9112 §6.3).
                payload = Array(rest)
            }
            return
        }
        if let lengthText = HTTPResponseBlock.combined(fields, "Content-Length") {
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
            guard rest.count == length else {
                throw HTTPBlockError(
                    message: rest.count < length
                        ? "the payload has \(rest.count) bytes but Content-Length says \(length) — the response was"
                            + " cut off when it was archived; its payload is incomplete"
                        : "the payload has \(rest.count) bytes, more than the \(length) Content-Length says — the"
                            + " block holds more than this response; the record is malformed")
            }
        }
        payload = Array(rest)
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

    /// The content of a chunked body (RFC 9112 §7.1): `chunk-size [chunk-ext] CRLF chunk-data CRLF`
    /// repeated, a last chunk of size 0, trailer fields, and an empty line (which may be missing
    /// at the very end). A bare LF is tolerated for CRLF.
    static func dechunk(_ body: ArraySlice<UInt8>) throws(HTTPBlockError) -> (payload: [UInt8], trailers: [Field]) {
        var index = body.startIndex
        var payload: [UInt8] = []
        let cut = "the response was cut off when it was archived; its payload is incomplete"
        func line() throws(HTTPBlockError) -> ArraySlice<UInt8>? {
            guard index < body.endIndex else { return nil }
            guard let newline = body[index...].firstIndex(of: 0x0A) else {
                throw HTTPBlockError(
                    message: "the chunked payload ends inside a line (\(WARCSyntax.quoted(body[index...]))) — \(cut)")
            }
            var text = body[index..<newline]
            if text.last == 0x0D { text = text.dropLast() }
            index = newline + 1
            return text
        }
        while true {
            guard let sizeLine = try line() else {
                throw HTTPBlockError(
                    message: "the chunked payload ends after \(payload.count) bytes without its last chunk (size 0)"
                        + " — \(cut)")
            }
            let digits = sizeLine.prefix { WARCSyntax.hexValue($0) != nil }
            let extensions = WARCSyntax.trimmed(sizeLine.dropFirst(digits.count))
            guard !digits.isEmpty, digits.count <= 15, extensions.isEmpty || extensions.first == UInt8(ascii: ";")
            else {
                throw HTTPBlockError(
                    message: "the chunk size line \(WARCSyntax.quoted(sizeLine)) is not a hexadecimal size with"
                        + " optional ;extensions (RFC 9112 §7.1) — the payload is not chunked as its"
                        + " Transfer-Encoding says")
            }
            let size = digits.reduce(0) { $0 << 4 | Int(WARCSyntax.hexValue($1)!) }
            if size == 0 { break }
            guard body.endIndex - index >= size else {
                throw HTTPBlockError(
                    message: "a chunk of \(size) bytes has only \(body.endIndex - index) left in the block — \(cut)")
            }
            payload.append(contentsOf: body[index..<index + size])
            index += size
            if body[index...].starts(with: [0x0D, 0x0A]) {
                index += 2
            } else if body[index...].first == 0x0A {
                index += 1
            } else if index == body.endIndex {
                throw HTTPBlockError(message: "the chunked payload ends right after a chunk's data — \(cut)")
            } else {
                throw HTTPBlockError(
                    message: "chunk data of \(size) bytes is followed by"
                        + " \(WARCSyntax.quoted(body[index...], limit: 8)), not CRLF — the chunk sizes are wrong;"
                        + " the payload is damaged")
            }
        }
        // The trailer section (RFC 9112 §7.1.2), ended by an empty line or, leniently, the block's end.
        var trailerLines: [ArraySlice<UInt8>] = []
        while let trailer = try line(), !trailer.isEmpty { trailerLines.append(trailer) }
        let trailers = try parseFields(trailerLines[...], kind: "trailer")
        guard index == body.endIndex else {
            throw HTTPBlockError(
                message: "\(body.endIndex - index) bytes follow the end of the chunked payload — the block holds"
                    + " more than this response; the record is malformed")
        }
        return (payload, trailers)
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
