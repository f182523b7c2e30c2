/// A reply from Redis in RESP2, the protocol Redis speaks to clients
/// (<https://redis.io/docs/latest/develop/reference/protocol-spec/>).
@_spi(Fuzzing) public enum RESPValue: Hashable, Sendable {
    case simple(String)
    case error(String)
    case integer(Int64)
    case bulk([UInt8])
    /// A null bulk string or a null array: a key that does not exist.
    case null
    case array([RESPValue])

    /// The bytes of a bulk or simple string.
    var bytes: [UInt8]? {
        switch self {
        case .bulk(let bytes): return bytes
        case .simple(let text): return Array(text.utf8)
        default: return nil
        }
    }

    var integer: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    var array: [RESPValue]? {
        if case .array(let values) = self { return values }
        return nil
    }

    var errorMessage: String? {
        if case .error(let message) = self { return message }
        return nil
    }
}

/// Writes commands as RESP arrays of bulk strings.
@_spi(Fuzzing) public enum RESPEncoder {
    /// Appends `arguments` as one command.
    public static func append(_ arguments: [[UInt8]], to buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "*"))
        appendDecimal(arguments.count, to: &buffer)
        for argument in arguments {
            buffer.append(UInt8(ascii: "$"))
            appendDecimal(argument.count, to: &buffer)
            buffer.append(contentsOf: argument)
            buffer.append(contentsOf: [13, 10])
        }
    }

    private static func appendDecimal(_ value: Int, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: String(value).utf8)
        buffer.append(contentsOf: [13, 10])
    }
}

/// Reads RESP2 replies from bytes as they arrive: ``next()`` returns a reply once all of it is
/// buffered. Replies that break the protocol throw; nothing a server sends can make it crash
/// or allocate more than the bytes it sent (lengths are checked against what arrived), and no
/// reply is buffered beyond ``maximumBulkLength`` for one string or ``maximumReplyLength`` in
/// all: memory stays bounded whatever Redis holds.
@_spi(Fuzzing) public struct RESPParser {
    public struct ProtocolError: Error, CustomStringConvertible {
        public var description: String
        /// Set when the reply is too large to be read (``maximumBulkLength``,
        /// ``maximumReplyLength``): the stream cannot be read on without it.
        public var oversized: Oversized?

        init(description: String, oversized: Oversized? = nil) {
            self.description = description
            self.oversized = oversized
        }
    }

    /// A reply, or a string in it, longer than the parser accepts.
    public struct Oversized: Sendable {
        /// Where the string is in the reply: the index in each array around it, outermost
        /// first; empty when the reply as a whole is too long.
        public var path: [Int]
        /// Its length in bytes (for a whole reply: what was buffered of it).
        public var length: Int64
    }

    /// The longest bulk string accepted: 8 MiB. The store never writes a value longer than a
    /// body's chunk (1 MiB, `RedisStore.chunkSize`) or an inline body with its record (at most
    /// 256 KiB and a head) plus the sealing's few bytes: a longer one under its keys was put
    /// there by something else. It is refused as soon as its length line arrives, without
    /// waiting for (or buffering) its bytes.
    public static let maximumBulkLength: Int64 = 8 << 20
    /// The most bytes one reply may take before it is whole: 64 MiB (an entry's hash with
    /// hundreds of variants of inline bodies, or eight chunks, take less).
    public static let maximumReplyLength = 64 << 20
    /// The most elements an array may have: 1,048,576. The store's replies have at most a few
    /// thousand (a `SCAN` batch, a hash's fields); a count this large is refused before its
    /// elements, each held in a value many times the bytes it took, are read.
    public static let maximumArrayCount: Int64 = 1 << 20

    private(set) var buffer: [UInt8] = []
    private var start = 0
    /// Nesting deeper than this is refused (Redis' replies nest two or three levels).
    private let maximumDepth = 32

    /// A parser with nothing buffered.
    public init() {}

    /// Whether every byte fed was returned in a reply.
    var isDrained: Bool { start == buffer.count }

    public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 65_536 && start * 2 > buffer.count {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole reply, or `nil` when more bytes are needed.
    public mutating func next() throws(ProtocolError) -> RESPValue? {
        var position = start
        guard let value = try parse(&position, depth: 0) else {
            let buffered = buffer.count - start
            guard buffered <= Self.maximumReplyLength else {
                throw ProtocolError(
                    description: "a Redis reply longer than \(Self.maximumReplyLength) bytes",
                    oversized: Oversized(path: [], length: Int64(buffered)))
            }
            return nil
        }
        start = position
        return value
    }

    /// Where the line starting at `position` ends (the index of its CR), or `nil`.
    private func lineEnd(from position: Int) -> Int? {
        var index = position
        while index + 1 < buffer.count {
            if buffer[index] == 13 && buffer[index + 1] == 10 { return index }
            index += 1
        }
        return nil
    }

    private func integer(_ range: Range<Int>) throws(ProtocolError) -> Int64 {
        var value: Int64 = 0
        var negative = false
        var index = range.lowerBound
        if index < range.upperBound && buffer[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard index < range.upperBound, range.count <= 20 else {
            throw ProtocolError(description: "a malformed number in a Redis reply")
        }
        while index < range.upperBound {
            let digit = buffer[index]
            guard digit >= 0x30 && digit <= 0x39 else {
                throw ProtocolError(description: "a malformed number in a Redis reply")
            }
            let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(Int64(digit - 0x30))
            guard !overflow1 && !overflow2 else {
                throw ProtocolError(description: "a number too large in a Redis reply")
            }
            value = sum
            index += 1
        }
        return negative ? -value : value
    }

    private func parse(_ position: inout Int, depth: Int) throws(ProtocolError) -> RESPValue? {
        guard depth <= maximumDepth else { throw ProtocolError(description: "a Redis reply nested too deeply") }
        guard position < buffer.count else { return nil }
        let kind = buffer[position]
        guard let end = lineEnd(from: position + 1) else { return nil }
        let line = (position + 1)..<end
        let afterLine = end + 2
        switch kind {
        case UInt8(ascii: "+"):
            position = afterLine
            return .simple(String(decoding: buffer[line], as: UTF8.self))
        case UInt8(ascii: "-"):
            position = afterLine
            return .error(String(decoding: buffer[line], as: UTF8.self))
        case UInt8(ascii: ":"):
            let value = try integer(line)
            position = afterLine
            return .integer(value)
        case UInt8(ascii: "$"):
            let length = try integer(line)
            if length == -1 {
                position = afterLine
                return .null
            }
            guard length >= 0 else {
                throw ProtocolError(description: "a bulk string of length \(length) in a Redis reply")
            }
            guard length <= Self.maximumBulkLength else {
                throw ProtocolError(
                    description: "a bulk string of \(length) bytes in a Redis reply, longer than the "
                        + "\(Self.maximumBulkLength) accepted",
                    oversized: Oversized(path: [], length: length))
            }
            let bodyEnd = afterLine + Int(length)
            guard bodyEnd + 2 <= buffer.count else { return nil }
            guard buffer[bodyEnd] == 13 && buffer[bodyEnd + 1] == 10 else {
                throw ProtocolError(description: "a bulk string without its CRLF in a Redis reply")
            }
            position = bodyEnd + 2
            return .bulk(Array(buffer[afterLine..<bodyEnd]))
        case UInt8(ascii: "*"):
            let count = try integer(line)
            if count == -1 {
                position = afterLine
                return .null
            }
            // Each element takes at least 3 bytes, so more elements than bytes left means the
            // rest has not arrived; a count larger than any reply the store reads is refused.
            guard count >= 0, count <= Self.maximumArrayCount else {
                throw ProtocolError(description: "an array of \(count) elements in a Redis reply")
            }
            var cursor = afterLine
            var elements: [RESPValue] = []
            elements.reserveCapacity(min(Int(count), (buffer.count - cursor) / 3 + 1))
            for index in 0..<Int(count) {
                do {
                    guard let element = try parse(&cursor, depth: depth + 1) else { return nil }
                    elements.append(element)
                } catch {
                    // Where in the reply a string too long is: its key, for the store.
                    var error = error
                    error.oversized?.path.insert(index, at: 0)
                    throw error
                }
            }
            position = cursor
            return .array(elements)
        default:
            throw ProtocolError(description: "a Redis reply starting with byte \(kind)")
        }
    }
}
