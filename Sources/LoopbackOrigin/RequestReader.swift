/// One request read off a connection, before it becomes a ``LoopbackOrigin/Request``.
struct ParsedRequest {
    var method: String
    var target: String
    /// 0 for HTTP/1.0, 1 for HTTP/1.1 (and any later 1.x).
    var minorVersion: Int
    var fields: [(name: String, value: String)]
    var body: [UInt8]
    /// The client asked for the connection to end after this exchange (RFC 9112 §9.3).
    var wantsClose: Bool
}

/// What reading the next request from a connection gave.
enum ReadOutcome {
    case request(ParsedRequest)
    /// The client closed (or the socket was shut down) between requests or mid-request: just close.
    case closed
    /// The input is not acceptable HTTP/1.1: answer with `status` and close (RFC 9112 §2.2, §6.3).
    case reject(status: Int, reason: String)
}

/// Reads HTTP/1.1 requests from a connection (blocking): request line, fields, then a body framed by
/// Content-Length or chunked Transfer-Encoding (decoded). Never traps on any input; anything it
/// cannot frame safely is a ``ReadOutcome/reject(status:reason:)``.
struct RequestReader {
    /// The most bytes a request line plus fields (and the empty line) may take.
    static let maxHeadBytes = 64 * 1024
    /// The largest request body accepted; more is answered with 413.
    static let maxBodyBytes = 64 * 1024 * 1024
    private static let maxChunkSizeLineBytes = 4 * 1024

    private let stream: OriginStream
    private var buffer: [UInt8] = []
    private var start = 0  // first byte not yet consumed
    private var scanned = 0  // bytes after `start` already known to hold no LF
    private var scratch = [UInt8](repeating: 0, count: 16 * 1024)

    /// - Parameter stream: A connection; the reader receives from it, and sends on it only
    ///   `100 Continue` when a client waits for it (RFC 9110 §10.1.1).
    init(stream: OriginStream) {
        self.stream = stream
    }

    /// Reads the next complete request, blocking until it has arrived.
    mutating func next() -> ReadOutcome {
        var headBytes = 0
        var requestLine: [UInt8] = []
        // A server ignores empty lines received before a request line (RFC 9112 §2.2).
        while requestLine.isEmpty {
            switch readLine(limit: Self.maxHeadBytes - headBytes) {
            case .line(let line, let consumed):
                headBytes += consumed
                requestLine = line
            case .tooLong: return .reject(status: 414, reason: "request line longer than 64 KiB")
            case .end: return .closed
            case .bareCR: return .reject(status: 400, reason: "bare CR in request line")
            }
        }
        let method: String
        let target: String
        let minorVersion: Int
        switch Self.parseRequestLine(requestLine) {
        case .success(let parsed): (method, target, minorVersion) = parsed
        case .failure(let rejection): return .reject(status: rejection.status, reason: rejection.reason)
        }

        var fields: [(name: String, value: String)] = []
        while true {
            switch readLine(limit: Self.maxHeadBytes - headBytes) {
            case .line(let line, let consumed):
                headBytes += consumed
                if line.isEmpty {
                    return finish(method, target, minorVersion, fields)
                }
                guard let field = Self.parseField(line) else {
                    return .reject(status: 400, reason: "malformed header field")
                }
                fields.append(field)
            case .tooLong: return .reject(status: 431, reason: "request head longer than 64 KiB")
            case .end: return .closed
            case .bareCR: return .reject(status: 400, reason: "bare CR in a header field")
            }
        }
    }

    /// Frames and reads the body (RFC 9112 §6.3), then returns the request.
    private mutating func finish(
        _ method: String, _ target: String, _ minorVersion: Int, _ fields: [(name: String, value: String)]
    ) -> ReadOutcome {
        func tokens(_ name: String) -> [String] {
            fields.filter { ASCII.equalsIgnoringCase($0.name, name) }
                .flatMap { $0.value.split(separator: ",") }
                .map { ASCII.lowercased(ASCII.trimmed($0)) }
                .filter { !$0.isEmpty }
        }
        let connection = tokens("connection")
        let wantsClose = minorVersion == 0 ? !connection.contains("keep-alive") : connection.contains("close")
        let transferCodings = tokens("transfer-encoding")
        let hasTransferEncoding = fields.contains { ASCII.equalsIgnoringCase($0.name, "transfer-encoding") }
        let lengths = fields.filter { ASCII.equalsIgnoringCase($0.name, "content-length") }
            .flatMap { $0.value.split(separator: ",", omittingEmptySubsequences: false) }
            .map { ASCII.trimmed($0) }
        let expectsContinue = minorVersion >= 1 && tokens("expect").contains("100-continue")

        var body: [UInt8] = []
        if hasTransferEncoding {
            // RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 means faulty framing; with Content-Length too, the
            // server may reject (and we do: that pairing is the classic request-smuggling shape).
            guard minorVersion >= 1 else { return .reject(status: 400, reason: "Transfer-Encoding in HTTP/1.0") }
            guard lengths.isEmpty else {
                return .reject(status: 400, reason: "both Transfer-Encoding and Content-Length")
            }
            guard transferCodings.last == "chunked" else {
                return .reject(status: 400, reason: "Transfer-Encoding does not end in chunked")
            }
            guard transferCodings == ["chunked"] else {
                return .reject(status: 501, reason: "unsupported transfer coding")
            }
            if expectsContinue, !sendContinue() { return .closed }
            switch readChunkedBody() {
            case .success(let decoded): body = decoded
            case .failure(let rejection):
                return rejection.status == 0 ? .closed : .reject(status: rejection.status, reason: rejection.reason)
            }
        } else if !lengths.isEmpty {
            // RFC 9110 §8.6: a list of identical values is one value; anything else is unrecoverable framing.
            guard let length = Self.decimal(lengths.first ?? ""), lengths.allSatisfy({ Self.decimal($0) == length })
            else { return .reject(status: 400, reason: "invalid Content-Length") }
            guard length <= Self.maxBodyBytes else {
                return .reject(status: 413, reason: "request body larger than 64 MiB")
            }
            if length > 0 {
                if expectsContinue, !sendContinue() { return .closed }
                guard let bytes = readBytes(length) else { return .closed }
                body = bytes
            }
        }
        return .request(
            ParsedRequest(
                method: method, target: target, minorVersion: minorVersion, fields: fields, body: body,
                wantsClose: wantsClose))
    }

    private func sendContinue() -> Bool {
        stream.sendAll(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
    }

    /// A reason to reject input; status 0 means "the connection ended", not a reply.
    struct Rejection: Error {
        var status: Int
        var reason: String
    }

    /// Reads chunks until the last one, then the trailer section, which is dropped (RFC 9112 §7.1).
    private mutating func readChunkedBody() -> Result<[UInt8], Rejection> {
        var body: [UInt8] = []
        while true {
            let sizeLine: [UInt8]
            switch readLine(limit: Self.maxChunkSizeLineBytes) {
            case .line(let line, _): sizeLine = line
            case .tooLong, .bareCR: return .failure(Rejection(status: 400, reason: "malformed chunk size line"))
            case .end: return .failure(Rejection(status: 0, reason: ""))
            }
            guard let size = Self.chunkSize(sizeLine) else {
                return .failure(Rejection(status: 400, reason: "malformed chunk size"))
            }
            if size == 0 { break }
            guard size <= Self.maxBodyBytes - body.count else {
                return .failure(Rejection(status: 413, reason: "request body larger than 64 MiB"))
            }
            guard let data = readBytes(size) else { return .failure(Rejection(status: 0, reason: "")) }
            body.append(contentsOf: data)
            switch readLine(limit: 2) {
            case .line(let line, _) where line.isEmpty: continue
            case .end: return .failure(Rejection(status: 0, reason: ""))
            default: return .failure(Rejection(status: 400, reason: "chunk data not followed by CRLF"))
            }
        }
        var trailerBytes = 0
        while true {
            switch readLine(limit: Self.maxHeadBytes - trailerBytes) {
            case .line(let line, let consumed):
                if line.isEmpty { return .success(body) }
                trailerBytes += consumed
            case .tooLong, .bareCR: return .failure(Rejection(status: 400, reason: "malformed trailer section"))
            case .end: return .failure(Rejection(status: 0, reason: ""))
            }
        }
    }

    // MARK: Parsing

    /// `method SP request-target SP HTTP-version` (RFC 9112 §3).
    static func parseRequestLine(_ line: [UInt8]) -> Result<(String, String, Int), Rejection> {
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(Rejection(status: 400, reason: "malformed request line")) }
        let method = parts[0]
        let target = parts[1]
        let version = Array(parts[2])
        guard !method.isEmpty, method.allSatisfy(ASCII.isTokenByte) else {
            return .failure(Rejection(status: 400, reason: "malformed method"))
        }
        guard !target.isEmpty, target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .failure(Rejection(status: 400, reason: "malformed request target"))
        }
        // HTTP-version = "HTTP/" DIGIT "." DIGIT (RFC 9112 §2.3)
        guard version.count == 8, version.starts(with: Array("HTTP/".utf8)), version[6] == 0x2E,
            ASCII.isDigit(version[5]), ASCII.isDigit(version[7])
        else { return .failure(Rejection(status: 400, reason: "malformed HTTP version")) }
        guard version[5] == 0x31 else {
            return .failure(Rejection(status: 505, reason: "only HTTP/1.x is served"))
        }
        let minor = version[7] == 0x30 ? 0 : 1
        return .success((ASCII.text(method), ASCII.text(target), minor))
    }

    /// `field-name ":" OWS field-value OWS` (RFC 9112 §5); nil when malformed. A line starting with
    /// whitespace (obs-fold) fails because whitespace is not a token byte.
    static func parseField(_ line: [UInt8]) -> (name: String, value: String)? {
        guard let colon = line.firstIndex(of: 0x3A), colon > 0 else { return nil }
        let name = line[..<colon]
        guard name.allSatisfy(ASCII.isTokenByte) else { return nil }
        let value = ASCII.trimmed(line[(colon + 1)...])
        // RFC 9110 §5.5: NUL, CR, LF and other controls (but HTAB) are invalid in a field value.
        guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else { return nil }
        return (ASCII.text(name), ASCII.text(value))
    }

    /// `1*HEXDIG [ chunk-ext ]`, at most 15 hex digits so it cannot overflow; nil when malformed.
    static func chunkSize(_ line: [UInt8]) -> Int? {
        let digits = ASCII.trimmed(line.prefix { $0 != 0x3B })  // drop chunk-ext (RFC 9112 §7.1.1)
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var size = 0
        for byte in digits {
            guard let digit = ASCII.hexValue(byte) else { return nil }
            size = size * 16 + digit
        }
        return size
    }

    /// `1*DIGIT`, at most 18 digits; nil otherwise.
    static func decimal(_ text: some Collection<UInt8>) -> Int? {
        guard !text.isEmpty, text.count <= 18 else { return nil }
        var value = 0
        for byte in text {
            guard ASCII.isDigit(byte) else { return nil }
            value = value * 10 + Int(byte - 0x30)
        }
        return value
    }

    static func decimal(_ text: String) -> Int? { decimal(Array(text.utf8)) }

    // MARK: Buffering

    private enum Line {
        /// A line without its CRLF (or bare LF), and how many bytes it took.
        case line([UInt8], consumed: Int)
        case tooLong
        case end
        case bareCR
    }

    /// The next line, if it (with its terminator) fits in `limit` bytes.
    private mutating func readLine(limit: Int) -> Line {
        while true {
            var index = start + scanned
            while index < buffer.count, buffer[index] != 0x0A { index += 1 }
            if index < buffer.count {
                let consumed = index + 1 - start
                var end = index
                if end > start, buffer[end - 1] == 0x0D { end -= 1 }
                let line = Array(buffer[start..<end])
                start = index + 1
                scanned = 0
                if consumed > limit { return .tooLong }
                if line.contains(0x0D) { return .bareCR }
                return .line(line, consumed: consumed)
            }
            scanned = buffer.count - start
            if scanned >= limit { return .tooLong }
            guard fill() else { return .end }
        }
    }

    /// Exactly `count` bytes, or nil when the stream ends first.
    private mutating func readBytes(_ count: Int) -> [UInt8]? {
        while buffer.count - start < count {
            guard fill() else { return nil }
        }
        let bytes = Array(buffer[start..<(start + count)])
        start += count
        scanned = 0
        return bytes
    }

    /// Receives more bytes; false at end of stream or on error (including a shutdown by `stop()`).
    private mutating func fill() -> Bool {
        if start > 0 {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        let received = scratch.withUnsafeMutableBytes { stream.receive(into: $0) }
        guard received > 0 else { return false }
        buffer.append(contentsOf: scratch[0..<received])
        return true
    }
}

/// Byte-level helpers for the ASCII parts of HTTP/1.1.
enum ASCII {
    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 0x30...0x39: Int(byte - 0x30)
        case 0x41...0x46: Int(byte - 0x41 + 10)
        case 0x61...0x66: Int(byte - 0x61 + 10)
        default: nil
        }
    }

    /// tchar (RFC 9110 §5.6.2).
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }

    /// Without leading and trailing SP / HTAB (OWS).
    static func trimmed<C: BidirectionalCollection<UInt8>>(_ bytes: C) -> C.SubSequence {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }) else { return bytes[bytes.endIndex...] }
        let last = bytes.lastIndex(where: { !isSpace($0) }) ?? first
        return bytes[first...last]
    }

    static func trimmed(_ text: Substring) -> String {
        String(decoding: trimmed(Array(text.utf8)), as: UTF8.self)
    }

    static func lowercased(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    static func equalsIgnoringCase(_ text: String, _ lowercaseASCII: String) -> Bool {
        text.utf8.count == lowercaseASCII.utf8.count && lowercased(text) == lowercaseASCII
    }

    /// UTF-8 when valid, else ISO 8859-1 (each byte one scalar), so no byte is lost or replaced.
    static func text(_ bytes: some Collection<UInt8>) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
    }
}
