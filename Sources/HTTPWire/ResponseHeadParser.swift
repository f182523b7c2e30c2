import CacheSemantics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
    /// A head as read: the head the receiver gets, and its version's minor digit (for
    /// persistence, RFC 9112 §9.3).
    public struct Head: Equatable {
        public var head: UpstreamResponseHead
        public var minorVersion: Int { head.minorVersion }
    }

    /// Reads `bytes`, which hold exactly one head: lines up to and including the empty line.
    /// - Returns: The head, or why it is malformed.
    public static func parse(_ bytes: UnsafeRawBufferPointer, maxFieldCount: Int) -> Result<Head, FramingError> {
        let input = bytes.assumingMemoryBound(to: UInt8.self)
        // Nearly every head has no NUL and no CR but those ending its lines: read in place.
        // Otherwise they read as SP, in a copy (RFC 9110 §5.5, RFC 9112 §2.2).
        guard hasOnlyLineEndingCRs(input) else {
            return spacingOutStrayCRs(input).withUnsafeBufferPointer { parseLines($0, maxFieldCount: maxFieldCount) }
        }
        return parseLines(input, maxFieldCount: maxFieldCount)
    }

    /// Reads a head whose only CRs end lines and which has no NUL.
    private static func parseLines(_ input: UnsafeBufferPointer<UInt8>, maxFieldCount: Int) -> Result<
        Head, FramingError
    > {
        var lines = Lines(input)
        guard let statusLine = lines.next() else { return .failure(FramingError("an empty response head")) }
        guard let (minorVersion, status, reason) = Self.statusLine(input, statusLine) else {
            return .failure(
                FramingError(
                    "the status line \(Self.quoted(Array(input[statusLine]))) is not HTTP/1.x NNN (RFC 9112 §4)"))
        }
        // Room for a field a line, the status line's and the empty one's spare (two more: the
        // fields a relay adds, `Via` and `Cache-Status`, without a copy): grown as lines come,
        // the array was copied four times a head. At most 32: the array may be the stored
        // head's, whose capacity a memory tier's entry keeps and is not charged for, and lines
        // that are not fields (ignored below) count too; a longer head grows as before.
        var fields: [HeaderField] = []
        fields.reserveCapacity(Self.lineCount(input, atMost: 32))
        /// Whether the last line was a kept field line or its continuation: only then does an
        /// obs-fold line continue a field (RFC 9112 §5.2).
        var continuesField = false
        while let line = lines.next(), !line.isEmpty {
            let first = input[line.lowerBound]
            if first == HTTPBytes.space || first == HTTPBytes.tab {
                if continuesField { unfold(input, line, into: &fields) }
                continue
            }
            continuesField = false
            var colon = line.lowerBound
            while colon < line.upperBound && input[colon] != HTTPBytes.colon { colon += 1 }
            guard colon < line.upperBound else { continue }
            let name = ASCII.trimmedRange(input, line.lowerBound..<colon)
            guard !name.isEmpty, name.allSatisfy({ HTTPBytes.isToken(input[$0]) }) else { continue }
            guard fields.count < maxFieldCount else {
                return .failure(FramingError("the response head has more than \(maxFieldCount) fields"))
            }
            let (fieldName, lowercased) = HTTPBytes.fieldName(input.baseAddress! + name.lowerBound, name.count)
            fields.append(
                HeaderField(
                    name: fieldName, lowercasedName: lowercased,
                    value: text(input, ASCII.trimmedRange(input, colon + 1..<line.upperBound))))
            continuesField = true
        }
        let head = UpstreamResponseHead(
            status: status, reason: reason, fields: HeaderFields(fields), minorVersion: minorVersion)
        return .success(Head(head: head))
    }

    /// `HTTP/1.1 200 OK` → minor version 1, status 200, reason "OK".
    private static func statusLine(_ input: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> (
        minorVersion: Int, status: Int, reason: String
    )? {
        // "HTTP/1." DIGIT SP 3DIGIT, then the end of the line or SP and the reason.
        let line = UnsafeBufferPointer(rebasing: input[range])
        guard line.count >= 12, line[..<7].elementsEqual("HTTP/1.".utf8), isDigit(line[7]), line[8] == 0x20 else {
            return nil
        }
        guard isDigit(line[9]), isDigit(line[10]), isDigit(line[11]), line.count == 12 || line[12] == 0x20 else {
            return nil
        }
        let status = (Int(line[9]) - 0x30) * 100 + (Int(line[10]) - 0x30) * 10 + Int(line[11]) - 0x30
        guard status >= 100 else { return nil }
        return (Int(line[7] - 0x30), status, text(line, ASCII.trimmedRange(line, 12..<line.count)))
    }

    /// Joins a continuation line to the last field's value with one SP (RFC 9112 §5.2).
    private static func unfold(
        _ input: UnsafeBufferPointer<UInt8>, _ line: Range<Int>, into fields: inout [HeaderField]
    ) {
        let more = text(input, ASCII.trimmedRange(input, line))
        guard !more.isEmpty, let last = fields.indices.last else { return }
        fields[last].value = fields[last].value.isEmpty ? more : fields[last].value + " " + more
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// How many LFs `input` has (its lines), counted up to `limit`.
    private static func lineCount(_ input: UnsafeBufferPointer<UInt8>, atMost limit: Int) -> Int {
        var count = 0
        var position = 0
        while count < limit, position < input.count,
            let found = memchr(input.baseAddress! + position, Int32(HTTPBytes.lf), input.count - position)
        {
            count += 1
            position = input.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self)) + 1
        }
        return count
    }

    /// UTF-8 when valid, else ISO 8859-1 (each byte one scalar), so no byte is lost.
    public static func text(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.withUnsafeBufferPointer { text($0, 0..<$0.count) }
    }

    /// ``text(_:)`` of the bytes of `input` in `range`.
    private static func text(_ input: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
        let buffer = UnsafeBufferPointer(rebasing: input[range])
        if let text = ASCII.validatedText(buffer) { return text }
        var result = ""
        result.unicodeScalars.append(contentsOf: buffer.lazy.map { Unicode.Scalar($0) })
        return result
    }

    /// At most 80 bytes of `line`, quoted, for an error message.
    public static func quoted(_ line: [UInt8]) -> String { "\"" + text(line.prefix(80)) + "\"" }

    /// Whether `input` has no NUL and no CR but right before an LF.
    private static func hasOnlyLineEndingCRs(_ input: UnsafeBufferPointer<UInt8>) -> Bool {
        // Eight bytes at a time: only a word with a byte below 0x0E (exact for such bytes)
        // is looked at byte by byte.
        let ones: UInt64 = 0x0101_0101_0101_0101
        var index = 0
        while index + 8 <= input.count {
            let word = UnsafeRawPointer(input.baseAddress! + index).loadUnaligned(as: UInt64.self)
            if (word &- ones &* 0x0E) & ~word & (ones &* 0x80) != 0 {
                for offset in index..<index + 8 where isStray(input, offset) { return false }
            }
            index += 8
        }
        while index < input.count {
            if isStray(input, index) { return false }
            index += 1
        }
        return true
    }

    /// Whether the byte at `index` is a NUL, or a CR not right before an LF: read as SP.
    private static func isStray(_ input: UnsafeBufferPointer<UInt8>, _ index: Int) -> Bool {
        let byte = input[index]
        return byte == 0 || (byte == HTTPBytes.cr && (index + 1 == input.count || input[index + 1] != HTTPBytes.lf))
    }

    /// A copy of `input` with every stray byte (``isStray(_:_:)``) replaced by SP.
    private static func spacingOutStrayCRs(_ input: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var bytes = Array(input)
        for index in input.indices where isStray(input, index) { bytes[index] = HTTPBytes.space }
        return bytes
    }

    /// The lines of a head, as ranges of its bytes: split after each LF, without the LF and a
    /// CR before it.
    private struct Lines {
        let input: UnsafeBufferPointer<UInt8>
        var position = 0

        init(_ input: UnsafeBufferPointer<UInt8>) { self.input = input }

        mutating func next() -> Range<Int>? {
            guard position < input.count else { return nil }
            let start = position
            let end =
                memchr(input.baseAddress! + start, Int32(HTTPBytes.lf), input.count - start).map {
                    input.baseAddress!.distance(to: $0.assumingMemoryBound(to: UInt8.self))
                } ?? input.count
            position = end + 1
            return start..<(end > start && input[end - 1] == HTTPBytes.cr ? end - 1 : end)
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
    /// The minor digit of the status line's `HTTP/1.x`: `0` for a response received over
    /// HTTP/1.0, which a proxy's `Via` names (RFC 9110 §7.6.3).
    public var minorVersion: Int

    public init(status: Int, reason: String, fields: HeaderFields, minorVersion: Int = 1) {
        self.status = status
        self.reason = reason
        self.fields = fields
        self.minorVersion = minorVersion
    }

    /// The version as `Via` names it (RFC 9110 §7.6.3): `1.0`, or `1.1` (a later minor version
    /// is read as 1.1, RFC 9110 §2.5).
    public var version: String { minorVersion == 0 ? "1.0" : "1.1" }
}
