import CacheSemantics

/// Reads one response head (a status line, field lines and the empty line that ends them) once
/// ``ResponseFramer`` has found all of its bytes.
///
/// - The status line is `HTTP/1.x SP 3DIGIT [SP reason]` (RFC 9112 §4, §2.3); another version,
///   or a status below 100, is malformed. The reason may be empty or missing.
/// - Lines end in LF, a CR right before it dropped (RFC 9112 §2.2 lets a recipient accept a bare
///   LF); any other CR, and NUL, reads as SP (RFC 9110 §5.5, RFC 9112 §2.2), in the status line
///   too.
/// - Field lines keep their order and repeated names (RFC 9110 §5.2, §5.3); white space around
///   names and values is removed (RFC 9112 §5.1, which tells a proxy to remove it before the
///   colon, §5.5).
/// - An obs-fold line continues the field line right before it and is joined to its value with
///   one SP, as a proxy must before forwarding (RFC 9112 §5.2); after a line that was ignored,
///   it is ignored too.
/// - A line without a colon, or whose name is not a token (RFC 9110 §5.1), is ignored rather
///   than forwarded with a name no recipient reads alike.
/// - More than `maxFieldCount` fields make the head malformed.
///
/// Bytes become text as UTF-8 when valid, otherwise as ISO 8859-1 (one scalar per byte), so
/// no byte is replaced.
@_spi(Wire) public enum ResponseHeadParser {
    /// A head as read: its version's minor digit (for persistence, RFC 9112 §9.3) and the
    /// head the receiver gets.
    public struct Head: Equatable {
        public var minorVersion: Int
        public var head: UpstreamResponseHead
    }

    /// Reads `bytes`, which hold exactly one head: lines up to and including the empty line.
    /// - Returns: The head, or why it is malformed.
    public static func parse(_ bytes: UnsafeRawBufferPointer, maxFieldCount: Int) -> Result<Head, FramingError> {
        var lines = Lines(bytes)
        guard let statusLine = lines.next().map(Array.init) else {
            return .failure(FramingError("an empty response head"))
        }
        guard let (minorVersion, status, reason) = Self.statusLine(statusLine) else {
            return .failure(
                FramingError("the status line \(Self.quoted(statusLine)) is not HTTP/1.x NNN (RFC 9112 §4)"))
        }
        var fields: [HeaderField] = []
        /// Whether the last line was a kept field line or its continuation: only then does an
        /// obs-fold line continue a field (RFC 9112 §5.2).
        var continuesField = false
        while let line = lines.next(), !line.isEmpty {
            if line.first == 0x20 || line.first == 0x09 {
                if continuesField { unfold(line, into: &fields) }
                continue
            }
            continuesField = false
            guard let colon = line.firstIndex(of: 0x3A) else { continue }
            let name = trimmed(line[..<colon])
            guard !name.isEmpty, name.allSatisfy(HTTPBytes.isToken) else { continue }
            guard fields.count < maxFieldCount else {
                return .failure(FramingError("the response head has more than \(maxFieldCount) fields"))
            }
            fields.append(HeaderField(name: text(name), value: text(trimmed(line[(colon + 1)...]))))
            continuesField = true
        }
        let head = UpstreamResponseHead(status: status, reason: reason, fields: HeaderFields(fields))
        return .success(Head(minorVersion: minorVersion, head: head))
    }

    /// `HTTP/1.1 200 OK` → minor version 1, status 200, reason "OK".
    private static func statusLine(_ line: [UInt8]) -> (minorVersion: Int, status: Int, reason: String)? {
        // "HTTP/1." DIGIT SP 3DIGIT, then the end of the line or SP and the reason.
        guard line.count >= 12, line[..<7].elementsEqual("HTTP/1.".utf8), isDigit(line[7]), line[8] == 0x20 else {
            return nil
        }
        let digits = line[9..<12]
        guard digits.allSatisfy(isDigit), line.count == 12 || line[12] == 0x20 else { return nil }
        let status = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        guard status >= 100 else { return nil }
        return (Int(line[7] - 0x30), status, text(trimmed(line[12...])))
    }

    /// Joins a continuation line to the last field's value with one SP (RFC 9112 §5.2).
    private static func unfold(_ line: ArraySlice<UInt8>, into fields: inout [HeaderField]) {
        let more = text(trimmed(line))
        guard !more.isEmpty, let last = fields.indices.last else { return }
        fields[last].value = fields[last].value.isEmpty ? more : fields[last].value + " " + more
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// `bytes` without leading and trailing SP and HTAB (OWS, RFC 9110 §5.6.3).
    public static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var result = bytes
        while let first = result.first, HTTPBytes.isOWS(first) { result = result.dropFirst() }
        while let last = result.last, HTTPBytes.isOWS(last) { result = result.dropLast() }
        return result
    }

    /// UTF-8 when valid, else ISO 8859-1 (each byte one scalar), so no byte is lost.
    public static func text(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.withUnsafeBufferPointer { buffer in
            // ASCII, as nearly every head is, needs no validation: decoding it replaces nothing.
            if buffer.allSatisfy({ $0 < 0x80 }) { return String(decoding: buffer, as: UTF8.self) }
            if let text = String(validating: buffer, as: UTF8.self) { return text }
            var result = ""
            result.unicodeScalars.append(contentsOf: buffer.lazy.map { Unicode.Scalar($0) })
            return result
        }
    }

    /// At most 80 bytes of `line`, quoted, for an error message.
    public static func quoted(_ line: [UInt8]) -> String { "\"" + text(line.prefix(80)) + "\"" }

    /// The lines of a head: split after each LF, without the LF and a CR before it, with
    /// every other CR and NUL replaced by SP. The head is copied once, not line by line.
    private struct Lines {
        let bytes: [UInt8]
        var position = 0

        init(_ head: UnsafeRawBufferPointer) {
            var bytes = [UInt8](head)
            for index in bytes.indices where bytes[index] == 0 || bytes[index] == HTTPBytes.cr {
                if bytes[index] == 0 || index + 1 == bytes.count || bytes[index + 1] != HTTPBytes.lf {
                    bytes[index] = 0x20
                }
            }
            self.bytes = bytes
        }

        mutating func next() -> ArraySlice<UInt8>? {
            guard position < bytes.count else { return nil }
            let start = position
            let end = bytes[start...].firstIndex(of: HTTPBytes.lf) ?? bytes.count
            position = end + 1
            return bytes[start..<(end > start && bytes[end - 1] == HTTPBytes.cr ? end - 1 : end)]
        }
    }
}

/// Why a response's bytes cannot be read as a message (RFC 9112): a sentence naming the rule.
@_spi(Wire) public struct FramingError: Error, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// The final (non-1xx) response head from an origin.
@_spi(Wire) public struct UpstreamResponseHead: Sendable, Equatable {
    public var status: Int
    public var reason: String
    /// Field lines in the order received, repeated names kept.
    public var fields: HeaderFields

    public init(status: Int, reason: String, fields: HeaderFields) {
        self.status = status
        self.reason = reason
        self.fields = fields
    }
}
