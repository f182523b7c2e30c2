import CacheSemantics

/// Where one HTTP/1.1 response begins and ends in the bytes of a connection (RFC 9112 §6.3):
/// a state machine with no I/O, fed bytes in any split.
///
/// Each ``parse(_:)`` call returns one event and how many of the given bytes it consumed. Bytes
/// not consumed (part of a head or of a chunk line) must be given again, followed by the next
/// bytes received; ``finish()`` says what the bytes so far were when the connection closed.
/// Once ``Event/end`` is returned, the bytes not consumed are not part of the response: a
/// client must not process or cache them as another response, and must close the connection
/// (RFC 9112 §6.3, last paragraph).
///
/// ```swift
/// var framer = ResponseFramer(requestMethod: "GET")
/// let (event, consumed) = framer.parse(pending)  // pending: the bytes received, not yet consumed
/// // .head(head); .body(range): pending[range]; .needMore: receive more, call again;
/// // .end: pending[consumed...] is excess, the connection must not be reused; .error: close it.
/// ```
///
/// How the body is delimited, in RFC 9112 §6.3's order:
/// 1. none after the head for a `HEAD` request, a `1xx`, `204` or `304` status (item 1);
///    `1xx` heads other than `101` are interim and another head follows (RFC 9110 §15.2);
///    `101` is an error, as no upgrade is ever asked for;
/// 2. `Transfer-Encoding` with `Content-Length` is an error (item 3, RFC 9112 §6.1): which
///    one a recipient believes decides where the next response starts, so the response is
///    refused, as nginx does since 1.23;
/// 3. one `Transfer-Encoding` line whose value is `chunked` → chunked (§7.1; extensions ignored,
///    trailer fields read and dropped); any other `Transfer-Encoding` (`gzip, chunked`,
///    `identity`, two lines), or any in an HTTP/1.0 response (§6.1), is an error: the proxy
///    cannot forward a transfer coding it does not decode (item 4);
/// 4. `Content-Length` lines whose members are not all one decimal number are an error
///    (item 5); otherwise that many bytes (item 6);
/// 5. otherwise the body runs until the connection closes (item 8), and that connection is
///    never used again.
///
/// When errors are found: a head is judged once its empty line has arrived, except that bytes
/// that cannot begin `HTTP/` are refused at once and a head longer than
/// ``Limits/maxHeadBytes`` is refused as soon as it is. A chunk line is judged when its LF
/// arrives (or when it grows past 4,096 bytes, or the trailer past ``Limits/maxHeadBytes``);
/// chunk data must be followed by CRLF.
@_spi(Wire) public struct ResponseFramer {
    /// Bounds on what an origin can make the client hold or read.
    public struct Limits: Sendable, Equatable {
        /// The largest head (status line, fields, empty line) and trailer section, in bytes.
        public var maxHeadBytes: Int
        /// The most fields in a head or a trailer section.
        public var maxFieldCount: Int
        /// The most interim (1xx) responses before the final one.
        public var maxInterimResponses: Int

        /// The proxy's limits unless others are given: 64 KiB, 256 fields, 16 interim responses.
        public init(maxHeadBytes: Int = 64 * 1024, maxFieldCount: Int = 256, maxInterimResponses: Int = 16) {
            self.maxHeadBytes = maxHeadBytes
            self.maxFieldCount = maxFieldCount
            self.maxInterimResponses = maxInterimResponses
        }
    }

    /// How the body of the final response is delimited.
    public enum Framing: Equatable {
        case none
        case length(Int64)
        case chunked
        case untilClose
    }

    /// What one ``ResponseFramer/parse(_:)`` call found.
    public enum Event: Equatable {
        /// All bytes given were consumed or are kept for later: give them again with more.
        case needMore
        /// An interim (1xx) response head; the final head is still to come (the proxy relays
        /// it to its client).
        case interim(UpstreamResponseHead)
        /// The final response head; its body follows.
        case head(UpstreamResponseHead)
        /// Body bytes (de-chunked): these positions of the input given.
        case body(Range<Int>)
        /// The response is complete.
        case end
        /// The bytes are not a valid response; the connection must be closed.
        case error(FramingError)
    }

    private enum State {
        /// Reading a head: the bytes given so far have been searched for its end up to
        /// `scanned`; `lineStart` is where the line being searched starts.
        case head(scanned: Int, lineStart: Int)
        case length(remaining: Int64)
        case chunked(ChunkedDecoder)
        case untilClose
        case done
        case failed(FramingError)
    }

    private let isHeadRequest: Bool
    private let limits: Limits
    private var state = State.head(scanned: 0, lineStart: 0)
    private var interimResponses = 0
    /// Whether the final head lets the connection carry another request (RFC 9112 §9.3): set
    /// with the final head; always `false` for a body delimited by the close.
    public private(set) var keepsAlive = false

    /// A framer for the response to a request with `requestMethod`.
    public init(requestMethod: String, limits: Limits = Limits()) {
        isHeadRequest = requestMethod == "HEAD"
        self.limits = limits
    }

    /// Reads from `input`: the bytes not consumed by the previous call, then any received since.
    /// - Returns: What was found, and how many bytes of `input` it consumed.
    public mutating func parse(_ input: UnsafeRawBufferPointer) -> (event: Event, consumed: Int) {
        switch state {
        case .head(let scanned, let lineStart):
            return head(input, scanned: scanned, lineStart: lineStart)
        case .length(let remaining):
            guard remaining > 0 else {
                state = .done
                return (.end, 0)
            }
            guard !input.isEmpty else { return (.needMore, 0) }
            let take = Int(min(Int64(input.count), remaining))
            state = .length(remaining: remaining - Int64(take))
            return (.body(0..<take), take)
        case .chunked(var decoder):
            guard let base = input.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
                return (.needMore, 0)
            }
            let (consumed, step) = decoder.next(base, count: input.count)
            state = .chunked(decoder)
            switch step {
            case .needMore:
                return (.needMore, consumed)
            case .data(let range):
                return (.body(range), consumed)
            case .done:
                state = .done
                return (.end, consumed)
            case .rejected(let rejection):
                return (fail(FramingError("the chunked body is malformed: " + rejection.reason)), consumed)
            }
        case .untilClose:
            guard !input.isEmpty else { return (.needMore, 0) }
            return (.body(0..<input.count), input.count)
        case .done:
            return (.end, 0)
        case .failed(let error):
            return (.error(error), 0)
        }
    }

    /// The connection closed after the bytes given so far (`unconsumed` of them not consumed).
    /// - Returns: ``Event/end`` when that completes the response (a body delimited by the
    ///   close, or a response already complete), else ``Event/error(_:)`` saying what was cut.
    public mutating func finish() -> Event {
        switch state {
        case .untilClose, .done:
            state = .done
            return .end
        case .head:
            return fail(FramingError("the connection closed before the response head was complete"))
        case .length(let remaining):
            guard remaining > 0 else {
                state = .done
                return .end
            }
            return fail(FramingError("the connection closed \(remaining) bytes before the end of the body"))
        case .chunked:
            return fail(FramingError("the connection closed before the last chunk of the body"))
        case .failed(let error):
            return .error(error)
        }
    }

    private mutating func fail(_ error: FramingError) -> Event {
        state = .failed(error)
        return .error(error)
    }

    // MARK: Heads

    /// Searches for the empty line that ends a head; reads the head once it is there.
    private mutating func head(_ input: UnsafeRawBufferPointer, scanned: Int, lineStart: Int) -> (Event, Int) {
        // Bytes that cannot begin a status line are refused at once (RFC 9112 §4).
        let prefix: StaticString = "HTTP/"
        var index = scanned
        while index < min(input.count, prefix.utf8CodeUnitCount) {
            guard input[index] == prefix.utf8Start[index] else {
                return (fail(FramingError("the response does not start with HTTP/ (RFC 9112 §4)")), 0)
            }
            index += 1
        }
        var lineStart = lineStart
        index = scanned
        while index < input.count {
            guard input[index] == HTTPBytes.lf else {
                index += 1
                continue
            }
            let isEmpty = index == lineStart || (index == lineStart + 1 && input[lineStart] == HTTPBytes.cr)
            if isEmpty && lineStart > 0 {
                let length = index + 1
                guard length <= limits.maxHeadBytes else { break }
                return (headComplete(UnsafeRawBufferPointer(rebasing: input[..<length])), length)
            }
            lineStart = index + 1
            index += 1
        }
        guard input.count <= limits.maxHeadBytes else {
            return (fail(FramingError("the response head is larger than \(limits.maxHeadBytes) bytes")), 0)
        }
        state = .head(scanned: input.count, lineStart: lineStart)
        return (.needMore, 0)
    }

    /// Reads a complete head and decides how its body is delimited.
    private mutating func headComplete(_ bytes: UnsafeRawBufferPointer) -> Event {
        let parsed: ResponseHeadParser.Head
        switch ResponseHeadParser.parse(bytes, maxFieldCount: limits.maxFieldCount) {
        case .success(let head): parsed = head
        case .failure(let error): return fail(error)
        }
        let status = parsed.head.status
        if status == 101 {
            return fail(FramingError("101 Switching Protocols, though no upgrade was asked for (RFC 9110 §15.2.2)"))
        }
        if status < 200 {
            interimResponses += 1
            guard interimResponses <= limits.maxInterimResponses else {
                return fail(FramingError("more than \(limits.maxInterimResponses) interim (1xx) responses"))
            }
            state = .head(scanned: 0, lineStart: 0)
            return .interim(parsed.head)
        }
        let framing: Framing
        switch Self.framing(of: parsed, isHeadRequest: isHeadRequest) {
        case .success(let found): framing = found
        case .failure(let error): return fail(error)
        }
        keepsAlive = framing != .untilClose && Self.persists(parsed)
        var head = parsed.head
        switch framing {
        case .none:
            state = .done
            // RFC 9110 §8.6: a 204 never has Content-Length; one an origin sent goes no further
            // (an HTTP/2 client refuses the response that carries it).
            if status == 204 && head.fields.contains(.contentLength) { head.fields[.contentLength] = nil }
        case .length(let length):
            state = .length(remaining: length)
            // RFC 9112 §6.3 item 5: `5, 5` or two lines of 5 are replaced with a single valid
            // Content-Length before the response is forwarded (or stored).
            if !Self.hasSingleLength(head.fields) { head.fields[.contentLength] = String(length) }
        case .chunked:
            state = .chunked(
                ChunkedDecoder(
                    maxBodyBytes: .max, maxTrailerBytes: limits.maxHeadBytes, maxTrailerFields: limits.maxFieldCount))
        case .untilClose: state = .untilClose
        }
        return .head(head)
    }

    /// Whether `fields` have one `Content-Length` line holding one value (no list).
    private static func hasSingleLength(_ fields: HeaderFields) -> Bool {
        let lengthName = HeaderField.Name.contentLength.lowercasedName
        var lines = 0
        for field in fields where field.isNamed(lengthName) {
            lines += 1
            guard lines == 1, !ASCII.withUTF8(field.value, { $0.contains(UInt8(ascii: ",")) }) else { return false }
        }
        return true
    }

    /// RFC 9112 §6.3, items 1–8, for a final response (see the type's documentation).
    public static func framing(of parsed: ResponseHeadParser.Head, isHeadRequest: Bool) -> Result<
        Framing, FramingError
    > {
        let head = parsed.head
        if isHeadRequest || head.status == 204 || head.status == 304 { return .success(.none) }
        let codingName = HeaderField.Name.transferEncoding.lowercasedName
        let lengthName = HeaderField.Name.contentLength.lowercasedName
        // Looked for before anything is collected: nearly every response has one
        // `Content-Length` line and no `Transfer-Encoding`.
        if head.fields.contains(where: { $0.isNamed(codingName) }) {
            guard !head.fields.contains(where: { $0.isNamed(lengthName) }) else {
                return .failure(
                    FramingError(
                        "the origin sent both Content-Length and Transfer-Encoding (RFC 9112 §6.1), "
                            + "so its length is ambiguous"))
            }
            guard parsed.minorVersion >= 1 else {
                return .failure(
                    FramingError("the origin sent Transfer-Encoding in an HTTP/1.0 response (RFC 9112 §6.1)"))
            }
            let codings = head.fields.filter { $0.isNamed(codingName) }
            guard codings.count == 1, ASCII.equalsIgnoringCase(codings[0].value, "chunked") else {
                let value = codings.map(\.value).joined(separator: ", ")
                return .failure(
                    FramingError(
                        "the origin sent Transfer-Encoding: \(value); only chunked alone is decoded, "
                            + "and a coding the proxy does not decode cannot be forwarded (RFC 9112 §6.1, §6.3)"))
            }
            return .success(.chunked)
        }
        var length: Int64?
        var hasLength = false
        for field in head.fields where field.isNamed(lengthName) {
            hasLength = true
            // Every member of the list (RFC 9112 §6.3 item 5 lets a recipient read `42, 42` as
            // 42), split at each comma byte.
            let agrees = ASCII.withUTF8(field.value) { bytes -> Bool in
                var start = 0
                while true {
                    let end = bytes[start...].firstIndex(of: UInt8(ascii: ",")) ?? bytes.count
                    let member = ASCII.trimmedRange(bytes, start..<end)
                    guard let number = decimal(UnsafeBufferPointer(rebasing: bytes[member])),
                        length == nil || length == number
                    else { return false }
                    length = number
                    guard end < bytes.count else { return true }
                    start = end + 1
                }
            }
            guard agrees else {
                let values = head.fields.filter { $0.isNamed(lengthName) }.map(\.value).joined(separator: "; ")
                return .failure(
                    FramingError("its Content-Length (\(values)) is not one decimal number (RFC 9112 §6.3 item 5)"))
            }
        }
        guard hasLength else { return .success(.untilClose) }
        return .success(.length(length ?? 0))
    }

    /// Whether the connection persists after this response (RFC 9112 §9.3): not with
    /// `Connection: close`; from HTTP/1.1 on by default; in HTTP/1.0 only with
    /// `Connection: keep-alive`.
    public static func persists(_ parsed: ResponseHeadParser.Head) -> Bool {
        let fields = parsed.head.fields
        if fields.listsMember("close", named: .connection) { return false }
        return parsed.minorVersion >= 1 || fields.listsMember("keep-alive", named: .connection)
    }

    /// `1*DIGIT` as a number; nil when empty, not digits, or beyond `Int64`.
    private static func decimal(_ digits: some Collection<UInt8>) -> Int64? {
        guard !digits.isEmpty else { return nil }
        var value: Int64 = 0
        for digit in digits {
            guard digit >= 0x30 && digit <= 0x39 else { return nil }
            let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(Int64(digit - 0x30))
            guard !overflowTimes, !overflowSum else { return nil }
            value = sum
        }
        return value
    }
}
