import CacheSemantics
@_spi(Wire) import HTTPWire

/// HTTPWire's request head parser and chunked decoder as a fuzzer drives them: bytes in, in the
/// pieces a socket may deliver them in, and what the parser made of them out, as the server
/// feeds them. What the answers should be is not here: ``RequestOracle`` reads RFC 9112 itself.
///
/// ```swift
/// let bytes = Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
/// let answer = WireFuzzing.parseRequestHead(bytes, ends: [5, bytes.count], limits: .serverDefaults)
/// ```
enum WireFuzzing {
    /// The limits a parser works within.
    struct Limits: Sendable {
        var maxHeaderBytes: Int
        var maxFieldCount: Int
        var maxBodyBytes: Int64

        /// What `httpcache serve` uses unless told otherwise.
        static let serverDefaults = Limits(
            maxHeaderBytes: WireDefaults.maxHeaderBytes, maxFieldCount: WireDefaults.maxFieldCount,
            maxBodyBytes: WireDefaults.maxBodyBytes)
    }

    /// How a request's body is delimited (RFC 9112 §6.3).
    enum Framing: Equatable, Sendable {
        case none
        case length(Int64)
        case chunked
    }

    /// What the request head parser said, and what a complete head holds.
    struct HeadAnswer: Equatable, Sendable, CustomStringConvertible {
        enum Decision: Equatable, Sendable {
            case needMore
            case complete
            case rejected(status: Int)
        }

        var decision: Decision
        var method = ""
        var target = ""
        var minorVersion = 0
        var fields: [HeaderField] = []
        var headLength = 0
        var framing = Framing.none
        var keepAlive = false
        var expectsContinue = false
        var isHead = false

        var description: String {
            guard decision == .complete else { return "\(decision)" }
            let lines = fields.map { "\($0.name): \($0.value)" }
            return
                "complete \(method) \(target) HTTP/1.\(minorVersion) \(lines) head \(headLength) bytes, \(framing), "
                + "keepAlive \(keepAlive), expectsContinue \(expectsContinue), isHead \(isHead)"
        }
    }

    /// Parses a request head from `bytes` as the server does: the bytes up to each of `ends` in
    /// turn, each time in a buffer of exactly what has arrived. With `after`, the parser first
    /// parses that request and is reset, as a connection's parser is between requests.
    static func parseRequestHead(
        _ bytes: [UInt8], ends: [Int], limits: Limits, after previous: [UInt8]? = nil
    ) -> HeadAnswer {
        var parser = RequestHeadParser(
            maxHeaderBytes: limits.maxHeaderBytes, maxFieldCount: limits.maxFieldCount,
            maxBodyBytes: limits.maxBodyBytes)
        if let previous {
            guard parse(previous, ends: [previous.count], with: &parser).decision == .complete else {
                return HeadAnswer(decision: .needMore)
            }
            parser.reset()
        }
        return parse(bytes, ends: ends, with: &parser)
    }

    private static func parse(_ bytes: [UInt8], ends: [Int], with parser: inout RequestHeadParser) -> HeadAnswer {
        for end in ends {
            let received = Array(bytes[..<end])
            let outcome = received.withUnsafeBufferPointer { parser.parse($0.baseAddress!, count: end) }
            switch outcome {
            case .needMore:
                continue
            case .rejected(let rejection):
                return HeadAnswer(decision: .rejected(status: rejection.status))
            case .complete:
                let head = received.withUnsafeBufferPointer { parser.parsedHead($0.baseAddress!) }
                let framing: Framing
                switch parser.framing {
                case .none: framing = .none
                case .length(let length): framing = .length(length)
                case .chunked: framing = .chunked
                }
                return HeadAnswer(
                    decision: .complete, method: head.method, target: head.target, minorVersion: head.minorVersion,
                    fields: Array(head.fields), headLength: parser.headLength, framing: framing,
                    keepAlive: parser.keepAlive, expectsContinue: parser.expectsContinue, isHead: parser.isHead)
            }
        }
        return HeadAnswer(decision: .needMore)
    }

    /// What the chunked decoder said, how many bytes it consumed and what it decoded.
    struct BodyAnswer: Equatable, Sendable {
        enum Decision: Equatable, Sendable {
            case needMore
            case done
            case rejected(status: Int)
        }

        var decision: Decision
        var consumed: Int
        var body: [UInt8]
    }

    /// The longest chunk-size line the decoder reads (RFC 9112 §7.1).
    static let maxChunkSizeLineBytes = ChunkedDecoder.maxSizeLineBytes

    /// Decodes a chunked body from `bytes` as the server does: bytes not consumed stay at the
    /// front of the next buffer, which holds exactly what has arrived; the trailer has the head's
    /// limits. Traps when the decoder says it consumed bytes it was not given.
    static func decodeChunkedBody(_ bytes: [UInt8], ends: [Int], limits: Limits) -> BodyAnswer {
        var decoder = ChunkedDecoder(
            maxBodyBytes: limits.maxBodyBytes, maxTrailerBytes: limits.maxHeaderBytes,
            maxTrailerFields: limits.maxFieldCount)
        var pending: [UInt8] = []
        var consumed = 0
        var body: [UInt8] = []
        for end in ends {
            pending = pending + bytes[(consumed + pending.count)..<end]
            let count = pending.count
            let (used, outcome) = pending.withUnsafeBufferPointer {
                decoder.decode($0.baseAddress!, count: count, into: &body)
            }
            precondition(used >= 0 && used <= count, "the decoder consumed \(used) of \(count) bytes")
            consumed += used
            pending.removeFirst(used)
            switch outcome {
            case .needMore:
                continue
            case .done:
                return BodyAnswer(decision: .done, consumed: consumed, body: body)
            case .rejected(let rejection):
                return BodyAnswer(decision: .rejected(status: rejection.status), consumed: consumed, body: body)
            }
        }
        return BodyAnswer(decision: .needMore, consumed: consumed, body: body)
    }
}
