// The request head parser: RFC 9112 §2–§6 over raw bytes, strict where the RFC says a
// server must reject (smuggling vectors, obs-fold, bare CR/LF) and line by line, so bytes
// arriving one at a time are scanned once.
import CacheSemantics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The limits `httpcache serve` applies unless told otherwise.
@_spi(Wire) public enum WireDefaults {
    /// The largest request head (and trailer section).
    public static let maxHeaderBytes = 16 * 1024
    /// The most field lines in a head.
    public static let maxFieldCount = 100
    /// The largest request body.
    public static let maxBodyBytes: Int64 = 8 << 20
}

/// Why a request is refused: the status and a short reason for the client and the log.
@_spi(Wire) public struct Rejection: Error {
    public var status: Int
    public var reason: String

    public init(status: Int, reason: String) {
        self.status = status
        self.reason = reason
    }
}

/// Where a field line's name and value sit, as offsets from the start of the request.
@_spi(Wire) public struct FieldSpan {
    public var nameStart: Int
    public var nameCount: Int
    public var valueStart: Int
    public var valueCount: Int
}

/// How a request's body is delimited (RFC 9112 §6.3).
@_spi(Wire) public enum RequestFraming: Equatable {
    case none
    case length(Int64)
    case chunked
}

/// Parses one request head. `parse` is called again with the same start and more bytes
/// until it completes or rejects; `reset` before the next request.
@_spi(Wire) public struct RequestHeadParser {
    public let maxHeaderBytes: Int
    public let maxFieldCount: Int
    public let maxBodyBytes: Int64

    // Progress: the start of the first line not parsed yet, and where the LF search resumes.
    private var lineStart = 0
    private var scanFrom = 0
    /// Whether this request's request-line has been read (its method and target are known).
    public private(set) var sawRequestLine = false

    // The request-line.
    public private(set) var methodStart = 0
    public private(set) var methodCount = 0
    public private(set) var targetStart = 0
    public private(set) var targetCount = 0
    public private(set) var minorVersion = 1
    public private(set) var isHead = false

    // The field section and what the server itself acts on.
    /// The field lines' places; only the first `fieldCount` belong to this request (the
    /// array is reused from request to request).
    public private(set) var fields: [FieldSpan] = []
    public private(set) var fieldCount = 0
    public private(set) var headLength = 0
    private var hostCount = 0
    private var contentLength: Int64?
    private var transferEncodingSeen = false
    private var chunkedIsLast = false
    private var chunkedCount = 0
    private var otherCoding: String?
    private var connectionClose = false
    private var connectionKeepAlive = false
    public private(set) var expectsContinue = false
    private var unknownExpectation: String?

    /// What the complete head says about the body.
    public private(set) var framing = RequestFraming.none

    public init(maxHeaderBytes: Int, maxFieldCount: Int, maxBodyBytes: Int64) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxFieldCount = maxFieldCount
        self.maxBodyBytes = maxBodyBytes
    }

    /// Whether the connection stays open after this request's response (RFC 9112 §9.3):
    /// HTTP/1.1 unless `Connection: close`, HTTP/1.0 only with `Connection: keep-alive`.
    public private(set) var keepAlive = true

    /// Whether any byte of the head has been scanned as part of a line.
    public private(set) var hasStarted = false

    public mutating func reset() {
        lineStart = 0
        scanFrom = 0
        sawRequestLine = false
        isHead = false
        minorVersion = 1
        fieldCount = 0
        hasStarted = false
        keepAlive = true
        headLength = 0
        hostCount = 0
        contentLength = nil
        transferEncodingSeen = false
        chunkedIsLast = false
        chunkedCount = 0
        otherCoding = nil
        connectionClose = false
        connectionKeepAlive = false
        expectsContinue = false
        unknownExpectation = nil
        framing = .none
    }

    public enum Outcome {
        case needMore
        case complete
        case rejected(Rejection)
    }

    /// Continues parsing the `count` bytes at `base` (the start of the request).
    public mutating func parse(_ base: UnsafePointer<UInt8>, count: Int) -> Outcome {
        while true {
            guard scanFrom < count, let found = memchr(base + scanFrom, Int32(HTTPBytes.lf), count - scanFrom) else {
                scanFrom = count
                if count > maxHeaderBytes { return .rejected(tooLarge(base, count)) }
                if !sawRequestLine, let rejection = checkPartialRequestLine(base, count) {
                    return .rejected(rejection)
                }
                return .needMore
            }
            let lf = found.assumingMemoryBound(to: UInt8.self) - UnsafeMutablePointer(mutating: base)
            if lf >= maxHeaderBytes { return .rejected(tooLarge(base, lf)) }
            guard lf > lineStart, base[lf - 1] == HTTPBytes.cr else {
                return .rejected(Rejection(status: 400, reason: "a line ends in a bare LF, not CRLF (RFC 9112 §2.2)"))
            }
            let end = lf - 1
            if !sawRequestLine {
                // RFC 9112 §2.2: empty lines before the request-line are ignored.
                if end > lineStart {
                    if let rejection = parseRequestLine(base, lineStart, end) { return .rejected(rejection) }
                    sawRequestLine = true
                }
            } else if end == lineStart {
                headLength = lf + 1
                if let rejection = finishHead() { return .rejected(rejection) }
                return .complete
            } else if let rejection = parseFieldLine(base, lineStart, end) {
                return .rejected(rejection)
            }
            lineStart = lf + 1
            scanFrom = lineStart
            hasStarted = true
        }
    }

    private var headTooLarge: Rejection {
        Rejection(status: 431, reason: "the request head is larger than \(maxHeaderBytes) bytes")
    }

    /// A head over the limit, its first `count` bytes read. While the request-line has not
    /// ended, by where in it the limit falls, read from the bytes within the limit alone (so
    /// the answer is the same however the bytes arrived): a byte no request-line may have
    /// there is `400`; in the method, `501`, a method longer than any the server implements
    /// (it forwards any method token, but none that leaves no room for a request within the
    /// limit); in the request-target, `414`, a target longer than the server parses (RFC 9110
    /// §15.5.15); past it, a version longer than `HTTP/1.1`, `400`
    /// ([RFC 9112 §3](https://www.rfc-editor.org/rfc/rfc9112#section-3)). Otherwise
    /// ``headTooLarge``.
    private func tooLarge(_ base: UnsafePointer<UInt8>, _ count: Int) -> Rejection {
        let end = min(count, maxHeaderBytes)
        // An empty line's CR is not a request-line begun.
        guard !sawRequestLine, end > lineStart, end - lineStart > 1 || base[lineStart] != HTTPBytes.cr else {
            return headTooLarge
        }
        if let malformed = checkPartialRequestLine(base, end) { return malformed }
        guard let methodEnd = memchr(base + lineStart, Int32(HTTPBytes.space), end - lineStart) else {
            return Rejection(
                status: 501,
                reason:
                    "the method is longer than the \(maxHeaderBytes) bytes a request head may have, so longer than "
                    + "any this server implements (RFC 9112 §3)")
        }
        let target = methodEnd.assumingMemoryBound(to: UInt8.self) + 1 - UnsafeMutablePointer(mutating: base)
        if target < end, let targetEnd = memchr(base + target, Int32(HTTPBytes.space), end - target),
            end - (targetEnd.assumingMemoryBound(to: UInt8.self) + 1 - UnsafeMutablePointer(mutating: base)) > 9
        {
            return Rejection(status: 400, reason: "the HTTP-version is not HTTP/DIGIT.DIGIT (RFC 9112 §2.3)")
        }
        return Rejection(
            status: 414,
            reason:
                "the request-target is longer than the \(maxHeaderBytes) bytes a request head may have (RFC 9112 §3)")
    }

    /// The complete head (without its body); `base` is the start of the request the head was
    /// parsed from.
    public func parsedHead(_ base: UnsafePointer<UInt8>) -> ParsedRequestHead {
        var lines: [HeaderField] = []
        lines.reserveCapacity(fieldCount)
        for span in fields[..<fieldCount] {
            let (name, lowercased) = HTTPBytes.fieldName(base + span.nameStart, span.nameCount)
            lines.append(
                HeaderField(
                    name: name, lowercasedName: lowercased,
                    value: HTTPBytes.string(base + span.valueStart, span.valueCount)))
        }
        return ParsedRequestHead(
            method: HTTPBytes.string(base + methodStart, methodCount),
            target: HTTPBytes.string(base + targetStart, targetCount), minorVersion: minorVersion,
            fields: HeaderFields(lines))
    }

    // MARK: request-line (RFC 9112 §3)

    /// Rejects a request-line that cannot become valid whatever follows (a TLS handshake,
    /// binary garbage) without waiting for its end.
    private func checkPartialRequestLine(_ base: UnsafePointer<UInt8>, _ count: Int) -> Rejection? {
        var index = lineStart
        while index < count && HTTPBytes.isToken(base[index]) { index += 1 }
        guard index < count else { return nil }
        let byte = base[index]
        if index == lineStart && byte == HTTPBytes.cr && index + 1 == count { return nil }  // an empty line's CR
        guard byte == HTTPBytes.space, index > lineStart else {
            return requestLineStartRejection(byte, index > lineStart)
        }
        index += 1
        while index < count && HTTPBytes.isTarget(base[index]) { index += 1 }
        guard index < count else { return nil }
        if base[index] != HTTPBytes.space {
            return Rejection(
                status: 400, reason: "the request-target contains \(HTTPBytes.describe(base[index])) (RFC 9112 §3.2)")
        }
        return nil
    }

    private func requestLineStartRejection(_ byte: UInt8, _ hasMethod: Bool) -> Rejection {
        if hasMethod {
            return Rejection(
                status: 400,
                reason: "the method is followed by \(HTTPBytes.describe(byte)), not a space (RFC 9112 §3)")
        }
        return Rejection(
            status: 400,
            reason: "the request-line starts with \(HTTPBytes.describe(byte)), not a method token (RFC 9112 §3)")
    }

    private mutating func parseRequestLine(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Rejection? {
        var index = start
        while index < end && HTTPBytes.isToken(base[index]) { index += 1 }
        guard index < end, index > start, base[index] == HTTPBytes.space else {
            if index == end {
                return Rejection(status: 400, reason: "the request-line has no request-target (RFC 9112 §3)")
            }
            return requestLineStartRejection(base[index], index > start)
        }
        methodStart = start
        methodCount = index - start
        isHead =
            methodCount == 4 && base[start] == 0x48 && base[start + 1] == 0x45 && base[start + 2] == 0x41
            && base[start + 3] == 0x44
        index += 1
        let target = index
        while index < end && HTTPBytes.isTarget(base[index]) { index += 1 }
        guard index > target else {
            return Rejection(
                status: 400, reason: "the request-target is empty or follows more than one space (RFC 9112 §3)")
        }
        guard index < end, base[index] == HTTPBytes.space else {
            if index == end {
                return Rejection(status: 400, reason: "the request-line has no HTTP-version (RFC 9112 §3)")
            }
            return Rejection(
                status: 400, reason: "the request-target contains \(HTTPBytes.describe(base[index])) (RFC 9112 §3.2)")
        }
        targetStart = target
        targetCount = index - target
        index += 1
        // HTTP-version = "HTTP" "/" DIGIT "." DIGIT (RFC 9112 §2.3), case-sensitive.
        let version = base + index
        let isDigit = { (byte: UInt8) in byte &- 0x30 < 10 }
        guard end - index == 8, version[0] == 0x48, version[1] == 0x54, version[2] == 0x54, version[3] == 0x50,
            version[4] == 0x2F, isDigit(version[5]), version[6] == 0x2E, isDigit(version[7])
        else {
            var bad = index
            while bad < end && base[bad] > 0x20 && base[bad] < 0x7F { bad += 1 }
            let detail = bad < end ? " (it contains \(HTTPBytes.describe(base[bad])))" : ""
            return Rejection(
                status: 400, reason: "the HTTP-version is not HTTP/DIGIT.DIGIT\(detail) (RFC 9112 §2.3)")
        }
        let major = Int(version[5] - 0x30)
        let minor = Int(version[7] - 0x30)
        guard major == 1 else {
            return Rejection(
                status: 505, reason: "HTTP/\(major).\(minor) is not supported; this server speaks HTTP/1.1 and HTTP/1.0"
            )
        }
        // A higher minor version is processed as the highest this server speaks, HTTP/1.1
        // ([RFC 9112 §2.3](https://www.rfc-editor.org/rfc/rfc9112#section-2.3)).
        minorVersion = min(minor, 1)
        return nil
    }

    // MARK: field lines (RFC 9112 §5)

    private mutating func parseFieldLine(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Rejection? {
        let line: FieldLine
        switch Self.scanFieldLine(base, start, end) {
        case .success(let scanned): line = scanned
        case .failure(let rejection): return rejection
        }
        guard fieldCount < maxFieldCount else {
            return Rejection(status: 431, reason: "the request has more than \(maxFieldCount) header fields")
        }
        let span = FieldSpan(
            nameStart: start, nameCount: line.nameCount, valueStart: line.valueStart, valueCount: line.valueCount)
        if fieldCount < fields.count {
            fields[fieldCount] = span
        } else {
            fields.append(span)
        }
        fieldCount += 1
        return interpretField(base + start, line.nameCount, base + line.valueStart, line.valueCount)
    }

    /// A field line's name length and its value's place, trimmed of OWS.
    public struct FieldLine {
        public var nameCount: Int
        public var valueStart: Int
        public var valueCount: Int
    }

    /// Checks `field-name ":" OWS field-value OWS` between `start` and `end` (the CR), for
    /// header and trailer sections alike (RFC 9112 §5, RFC 9110 §5.5).
    public static func scanFieldLine(_ base: UnsafePointer<UInt8>, _ start: Int, _ end: Int) -> Result<
        FieldLine, Rejection
    > {
        if HTTPBytes.isOWS(base[start]) {
            return .failure(
                Rejection(status: 400, reason: "a field line starts with white space (obs-fold, RFC 9112 §5.2)"))
        }
        var index = start
        while index < end && HTTPBytes.isToken(base[index]) { index += 1 }
        guard index < end, base[index] == HTTPBytes.colon, index > start else {
            if index == end {
                return .failure(Rejection(status: 400, reason: "a field line has no colon (RFC 9112 §5)"))
            }
            let byte = base[index]
            if HTTPBytes.isOWS(byte) {
                return .failure(
                    Rejection(status: 400, reason: "white space between a field name and its colon (RFC 9112 §5.1)"))
            }
            if index == start {
                return .failure(Rejection(status: 400, reason: "a field line has an empty name (RFC 9112 §5)"))
            }
            return .failure(
                Rejection(status: 400, reason: "a field name contains \(HTTPBytes.describe(byte)) (RFC 9110 §5.1)"))
        }
        let nameCount = index - start
        index += 1
        while index < end && HTTPBytes.isOWS(base[index]) { index += 1 }
        let valueStart = index
        while index < end {
            let byte = base[index]
            if !HTTPBytes.isFieldValue(byte) {
                let name = String(decoding: UnsafeBufferPointer(start: base + start, count: nameCount), as: UTF8.self)
                return .failure(
                    Rejection(
                        status: 400, reason: "the value of \(name) contains \(HTTPBytes.describe(byte)) (RFC 9110 §5.5)"
                    ))
            }
            index += 1
        }
        var valueEnd = end
        while valueEnd > valueStart && HTTPBytes.isOWS(base[valueEnd - 1]) { valueEnd -= 1 }
        return .success(FieldLine(nameCount: nameCount, valueStart: valueStart, valueCount: valueEnd - valueStart))
    }

    /// Acts on the fields that decide framing and connection handling.
    private mutating func interpretField(
        _ name: UnsafePointer<UInt8>, _ nameCount: Int, _ value: UnsafePointer<UInt8>, _ valueCount: Int
    ) -> Rejection? {
        switch nameCount {
        case 4 where HTTPBytes.equalsLowercase(name, 4, "host"):
            hostCount += 1
            if hostCount > 1 {
                return Rejection(status: 400, reason: "more than one Host field line (RFC 9112 §3.2)")
            }
            // Host = uri-host [ ":" port ] (RFC 9110 §7.2), or empty (RFC 9112 §3.2): with an
            // origin-form target the URI's authority is then the server's own (RFC 9112 §3.3).
            return Self.checkHost(UnsafeBufferPointer(start: value, count: valueCount))
        case 14 where HTTPBytes.equalsLowercase(name, 14, "content-length"):
            return interpretContentLength(value, valueCount)
        case 17 where HTTPBytes.equalsLowercase(name, 17, "transfer-encoding"):
            return interpretTransferEncoding(value, valueCount)
        case 10 where HTTPBytes.equalsLowercase(name, 10, "connection"):
            Self.forEachMember(value, valueCount) { member, count in
                if HTTPBytes.equalsLowercase(member, count, "close") { connectionClose = true }
                if HTTPBytes.equalsLowercase(member, count, "keep-alive") { connectionKeepAlive = true }
                return nil
            }
        case 6 where HTTPBytes.equalsLowercase(name, 6, "expect"):
            let expectations = Self.expectations(value, valueCount)
            expectsContinue = expectsContinue || expectations.continues
            unknownExpectation = unknownExpectation ?? expectations.unknown
        default:
            break
        }
        return nil
    }

    /// Checks a `Host` value, or an HTTP/2 `:authority` or `host` (RFC 9113 §8.3.1), as
    /// `uri-host [ ":" port ]` (RFC 9110 §7.2): only bytes a host and port are made of, then
    /// ``URIAuthority``'s grammar, which refuses user information (RFC 9110 §4.2.4), an empty
    /// host, and a port that is not digits or is above 65535 (RFC 3986 §3.2.3). An empty value
    /// passes: a target URI without an authority has an empty `Host` (RFC 9112 §3.2).
    ///
    /// ```swift
    /// RequestHeadParser.checkHost(bytes)  // nil for "example.com:8080", a 400 for "u@example.com"
    /// ```
    /// - Parameters:
    ///   - value: The field value's bytes.
    ///   - field: The field's name, as the reason names it.
    ///   - rule: The section the reason cites.
    /// - Returns: A `400` saying what is wrong; nil when the value is `host[:port]` or empty.
    public static func checkHost(
        _ value: UnsafeBufferPointer<UInt8>, field: String = "Host", rule: String = "RFC 9112 §3.2"
    ) -> Rejection? {
        for byte in value where !HTTPBytes.isHost(byte) {
            return Rejection(status: 400, reason: "the \(field) value contains \(HTTPBytes.describe(byte)) (\(rule))")
        }
        guard !value.isEmpty, let invalid = URIAuthority.check(value) else { return nil }
        return Rejection(status: 400, reason: "the \(field) value is not host[:port] (\(rule)): \(invalid)")
    }

    /// What one `Expect` field value asks (RFC 9110 §10.1.1): whether a member is
    /// `100-continue` (any case), and the first other member, an expectation the server
    /// cannot meet (answered ``unmetExpectation(_:)``).
    public static func expectations(_ value: UnsafePointer<UInt8>, _ count: Int) -> (continues: Bool, unknown: String?)
    {
        var continues = false
        var unknown: String?
        forEachMember(value, count) { member, memberCount in
            if HTTPBytes.equalsLowercase(member, memberCount, "100-continue") {
                continues = true
            } else if unknown == nil {
                unknown = String(decoding: UnsafeBufferPointer(start: member, count: memberCount), as: UTF8.self)
            }
            return nil
        }
        return (continues, unknown)
    }

    /// The `417` for an expectation other than `100-continue` (RFC 9110 §10.1.1).
    public static func unmetExpectation(_ expectation: String) -> Rejection {
        Rejection(status: 417, reason: "the expectation \"\(expectation)\" cannot be met (RFC 9110 §10.1.1)")
    }

    /// Content-Length = 1*DIGIT; a list or repeated lines must all agree (RFC 9112 §6.3 item 5).
    private mutating func interpretContentLength(_ value: UnsafePointer<UInt8>, _ count: Int) -> Rejection? {
        var members = 0
        let rejection = Self.forEachMember(value, count, keepEmpty: true) { member, memberCount in
            members += 1
            var length: Int64 = 0
            guard memberCount > 0 else {
                return Rejection(status: 400, reason: "Content-Length has an empty value (RFC 9112 §6.3)")
            }
            for index in 0..<memberCount {
                let digit = member[index] &- 0x30
                guard digit < 10 else {
                    return Rejection(
                        status: 400, reason: "Content-Length is not a decimal number (RFC 9112 §6.3)")
                }
                // Past 18 digits the value is beyond any limit: keep it saturated, answer 413.
                length = length > 99_999_999_999_999_999 ? Int64.max : length * 10 + Int64(digit)
            }
            if let existing = contentLength, existing != length {
                return Rejection(
                    status: 400, reason: "Content-Length values differ (\(existing) and \(length)) (RFC 9112 §6.3)")
            }
            contentLength = length
            return nil
        }
        if rejection == nil && members == 0 {
            return Rejection(status: 400, reason: "Content-Length has an empty value (RFC 9112 §6.3)")
        }
        return rejection
    }

    /// Transfer-Encoding: the codings in order across all lines (RFC 9112 §6.1).
    private mutating func interpretTransferEncoding(_ value: UnsafePointer<UInt8>, _ count: Int) -> Rejection? {
        transferEncodingSeen = true
        var members = 0
        let rejection = Self.forEachMember(value, count, keepEmpty: false) { member, memberCount in
            members += 1
            var index = 0
            while index < memberCount && HTTPBytes.isToken(member[index]) { index += 1 }
            let nameCount = index
            while index < memberCount && HTTPBytes.isOWS(member[index]) { index += 1 }
            guard nameCount > 0, index == memberCount || member[index] == HTTPBytes.semicolon else {
                return Rejection(status: 400, reason: "Transfer-Encoding is malformed (RFC 9112 §6.1)")
            }
            if HTTPBytes.equalsLowercase(member, nameCount, "chunked") {
                chunkedCount += 1
                chunkedIsLast = true
            } else {
                chunkedIsLast = false
                if otherCoding == nil {
                    otherCoding = String(decoding: UnsafeBufferPointer(start: member, count: nameCount), as: UTF8.self)
                }
            }
            return nil
        }
        if rejection == nil && members == 0 {
            return Rejection(status: 400, reason: "Transfer-Encoding has an empty value (RFC 9112 §6.1)")
        }
        return rejection
    }

    /// Calls `body` with each comma-separated member of a list value, trimmed of OWS
    /// (RFC 9110 §5.6.1); empty members are skipped unless `keepEmpty`. Stops at a rejection.
    @discardableResult
    private static func forEachMember(
        _ value: UnsafePointer<UInt8>, _ count: Int, keepEmpty: Bool = false,
        _ body: (UnsafePointer<UInt8>, Int) -> Rejection?
    ) -> Rejection? {
        guard count > 0 else { return nil }
        var start = 0
        while start <= count {
            var end = start
            while end < count && value[end] != HTTPBytes.comma { end += 1 }
            var first = start
            var last = end
            while first < last && HTTPBytes.isOWS(value[first]) { first += 1 }
            while last > first && HTTPBytes.isOWS(value[last - 1]) { last -= 1 }
            if last > first || keepEmpty, let rejection = body(value + first, last - first) { return rejection }
            start = end + 1
        }
        return nil
    }

    // MARK: the complete head

    private mutating func finishHead() -> Rejection? {
        keepAlive = !connectionClose && (minorVersion == 1 || connectionKeepAlive)
        if minorVersion == 1 && hostCount == 0 {
            return Rejection(status: 400, reason: "an HTTP/1.1 request without Host (RFC 9112 §3.2)")
        }
        if transferEncodingSeen {
            if contentLength != nil {
                return Rejection(
                    status: 400, reason: "Content-Length and Transfer-Encoding together (RFC 9112 §6.3)")
            }
            if minorVersion == 0 {
                return Rejection(status: 400, reason: "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 §6.1)")
            }
            if !chunkedIsLast {
                return Rejection(
                    status: 400, reason: "Transfer-Encoding does not end in chunked (RFC 9112 §6.3)")
            }
            if chunkedCount > 1 {
                return Rejection(status: 400, reason: "chunked is applied more than once (RFC 9112 §7)")
            }
            if let otherCoding {
                return Rejection(
                    status: 501, reason: "the transfer coding \(otherCoding) is not implemented (RFC 9112 §6.1)")
            }
            framing = .chunked
        } else if let contentLength, contentLength > 0 {
            framing = .length(contentLength)
        }
        if let unknownExpectation { return Self.unmetExpectation(unknownExpectation) }
        if case .length(let length) = framing, length > maxBodyBytes {
            return Rejection(
                status: 413, reason: "the body of \(length) bytes is larger than the limit of \(maxBodyBytes) bytes")
        }
        // RFC 9110 §10.1.1: a 100-continue expectation in an HTTP/1.0 request is ignored.
        expectsContinue = expectsContinue && minorVersion == 1 && framing != .none
        return nil
    }
}

/// A request head as read from the wire (RFC 9112 §3, §5).
@_spi(Wire) public struct ParsedRequestHead: Sendable {
    /// The method token, as sent.
    public var method: String
    /// The request-target, as sent.
    public var target: String
    /// `1` for HTTP/1.1, `0` for HTTP/1.0.
    public var minorVersion: Int
    /// Field lines in the order received, values trimmed of OWS.
    public var fields: HeaderFields
}
