// The libFuzzer targets FuzzRequestHead and FuzzChunkedBody: the proxy's server-side wire
// parsers (HTTPWire, reached through its narrow `@_spi(Fuzzing)` surface) on arbitrary bytes, fed
// in one piece and in several, every answer checked against a reading of RFC 9112 written here,
// in the fuzz package, apart from the product.
import CacheSemantics
import FuzzSupport
@_spi(Fuzzing) import HTTPWire

#if canImport(Glibc)
import Glibc
#endif

/// Runs the proxy's wire parsers on arbitrary bytes and traps when an answer is wrong.
///
/// Each entry point
///
/// - parses the input in one piece, one byte at a time and in pieces whose sizes the input
///   chooses, and requires the same answer every way, since a socket splits anywhere;
/// - parses it again with a parser that served a message before, as connections reuse theirs;
/// - checks the answer against a plain reading of the grammar (RFC 9112 §2–§7, RFC 9110
///   §5.5, §5.6), written here apart from the parsers: what the parser accepts must be valid
///   and read the same, and what is valid must be accepted.
///
/// A disagreement traps with a message that shows the input, and libFuzzer keeps the input.
///
/// ```swift
/// import RequestOracle
///
/// // Byte 0 chooses the pieces, byte 1 the limits; the request follows.
/// RequestOracle.requestHead(Array("\u{0}\u{0}GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
/// ```
public enum RequestOracle {
    /// Parses a request head (RFC 9112 §2–§6) from `input` as the server does.
    ///
    /// `input[0]` chooses the sizes of the pieces the bytes arrive in; `input[1]` the limits:
    /// below `0xC0` the server's defaults, otherwise small ones, so that heads too large (`431`)
    /// and bodies too large (`413`) are reached with short inputs. The request starts at `input[2]`.
    ///
    /// Traps when the answers differ between splits or from a reused parser; when an
    /// accepted head has no Host or two (HTTP/1.1), a field name that is not a token, a value
    /// with CR, LF or NUL, both Content-Length and Transfer-Encoding, or a framing, a
    /// keep-alive or a field that the grammar reads differently; or when a valid head is refused.
    ///
    /// - Parameter input: Arbitrary bytes.
    public static func requestHead(_ input: [UInt8]) {
        guard input.count >= 2 else { return }
        let limits = Self.limits(input[1])
        let bytes = Array(input.dropFirst(2))
        let whole = parseHead(bytes, ends: [bytes.count], limits)
        for ends in [pieceEnds(bytes.count, choice: 0), pieceEnds(bytes.count, choice: input[0])] {
            let split = parseHead(bytes, ends: ends, limits)
            require(
                split == whole || bothRefusedTooLong(whole, split, bytes.count, limits), bytes,
                "pieces \(ends) give \(split), one piece \(whole)")
        }
        // A connection's parser is reset between requests, not made anew.
        if parseHead(previousRequest, ends: [previousRequest.count], limits).decision == .complete {
            let again = parseHead(
                bytes, ends: pieceEnds(bytes.count, choice: input[0]), limits, after: previousRequest)
            require(
                again == whole || bothRefusedTooLong(whole, again, bytes.count, limits), bytes,
                "a reset parser gives \(again), a new one \(whole)")
        }
        checkHead(whole, bytes, limits)
    }

    /// Decodes a chunked request body (RFC 9112 §7.1) from `input` as the server does.
    ///
    /// `input[0]` chooses the sizes of the pieces the bytes arrive in, `input[1]` the limits
    /// as for ``requestHead(_:)``; the body starts at `input[2]`.
    ///
    /// Traps when the decision, the bytes consumed or the body decoded differ between splits;
    /// when the decoder finishes where the grammar does not (or does not where it does), or
    /// decodes another body; or when it consumes bytes it was not given.
    ///
    /// - Parameter input: Arbitrary bytes.
    public static func chunkedBody(_ input: [UInt8]) {
        guard input.count >= 2 else { return }
        let limits = Self.limits(input[1])
        let bytes = Array(input.dropFirst(2))
        let whole = decodeBody(bytes, ends: [bytes.count], limits)
        for ends in [pieceEnds(bytes.count, choice: 0), pieceEnds(bytes.count, choice: input[0])] {
            let split = decodeBody(bytes, ends: ends, limits)
            require(split == whole, bytes, "pieces \(ends) give \(split), one piece \(whole)")
        }
        checkBody(whole, bytes, limits)
    }
}

// MARK: - Pieces and limits

extension RequestOracle {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A

    /// The server's limits, or small ones for `selector` ≥ 0xC0 (as the server's event loop
    /// clamps them).
    static func limits(_ selector: UInt8) -> WireFuzzing.Limits {
        guard selector >= 0xC0 else { return .serverDefaults }
        return WireFuzzing.Limits(
            maxHeaderBytes: 64 + Int(selector & 0x0F) * 16, maxFieldCount: 1 + Int(selector >> 4 & 0x03),
            maxBodyBytes: Int64(selector & 0x07) * 5)
    }

    /// Traps with the input shown when `condition` is false (`fatalError`, as
    /// `preconditionFailure` drops its message in optimized builds).
    static func require(
        _ condition: @autoclosure () -> Bool, _ input: some Collection<UInt8>, _ message: @autoclosure () -> String
    ) {
        guard !condition() else { return }
        fatalError("\(message()); input \(quoted(input))")
    }

    /// The bytes as a Swift string literal, every byte visible.
    static func quoted(_ bytes: some Collection<UInt8>) -> String {
        var text = "\""
        for byte in bytes {
            switch byte {
            case cr: text += "\\r"
            case lf: text += "\\n"
            case 0x09: text += "\\t"
            case 0x22: text += "\\\""
            case 0x5C: text += "\\\\"
            case 0x20..<0x7F: text.unicodeScalars.append(Unicode.Scalar(byte))
            default: text += "\\u{" + String(byte, radix: 16) + "}"
            }
        }
        return text + "\""
    }
}

// MARK: - The grammar, spelled out

extension RequestOracle {
    /// Byte classes written out from the RFCs' ABNF rather than taken from `HTTPBytes`' bit
    /// tables, which they check.
    enum Grammar {
        /// `tchar` (RFC 9110 §5.6.2).
        static let token = table("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        /// `unreserved` and `sub-delims` (RFC 3986 §2.2, §2.3): a reg-name's bytes besides `%XX`.
        static let regName = table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=")

        /// `uri-host [":" port]` (RFC 3986 §3.2.2-3.2.3) as an `http` authority: a host that is
        /// not empty (RFC 9110 §4.2.1), a port that is digits only and names a TCP port (1-65535)
        /// or is empty (the default). IPv6 literals are checked with `inet_pton`, which reads the
        /// same grammar (RFC 4291 §2.2) independently of the product.
        static func isAuthority(_ value: ArraySlice<UInt8>) -> Bool {
            var rest = value[...]
            if rest.first == UInt8(ascii: "[") {
                guard let close = rest.firstIndex(of: UInt8(ascii: "]")) else { return false }
                let literal = rest[rest.index(after: rest.startIndex)..<close]
                guard isIPv6(literal) || isIPvFuture(literal) else { return false }
                rest = rest[rest.index(after: close)...]
            } else {
                let host = rest.prefix { $0 != UInt8(ascii: ":") }
                guard !host.isEmpty, isRegName(host) else { return false }
                rest = rest[host.endIndex...]
            }
            guard let colon = rest.first else { return true }
            guard colon == UInt8(ascii: ":") else { return false }
            let port = rest.dropFirst()
            guard port.allSatisfy({ (0x30...0x39).contains($0) }) else { return false }
            guard !port.isEmpty else { return true }
            let significant = port.drop { $0 == 0x30 }
            guard significant.count <= 5 else { return false }
            return (1...65535).contains(significant.reduce(0) { $0 * 10 + Int($1 - 0x30) })
        }

        private static func isRegName(_ bytes: ArraySlice<UInt8>) -> Bool {
            var index = bytes.startIndex
            while index < bytes.endIndex {
                if bytes[index] == UInt8(ascii: "%") {
                    let digits = bytes[(index + 1)...].prefix(2)
                    guard digits.count == 2, digits.allSatisfy(isHexDigit) else { return false }
                    index += 3
                } else {
                    guard regName[Int(bytes[index])] else { return false }
                    index += 1
                }
            }
            return true
        }

        private static func isIPv6(_ bytes: ArraySlice<UInt8>) -> Bool {
            guard !bytes.isEmpty, bytes.count < 64, !bytes.contains(0) else { return false }
            var address = in6_addr()
            return inet_pton(AF_INET6, String(decoding: bytes, as: UTF8.self), &address) == 1
        }

        /// `"v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )`.
        private static func isIPvFuture(_ bytes: ArraySlice<UInt8>) -> Bool {
            guard let first = bytes.first, first | 0x20 == UInt8(ascii: "v"),
                let dot = bytes.firstIndex(of: UInt8(ascii: "."))
            else { return false }
            let version = bytes[(bytes.startIndex + 1)..<dot]
            let rest = bytes[(dot + 1)...]
            return !version.isEmpty && version.allSatisfy(isHexDigit) && !rest.isEmpty
                && rest.allSatisfy { regName[Int($0)] || $0 == UInt8(ascii: ":") }
        }

        private static func isHexDigit(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
        }

        private static func table(_ members: String) -> [Bool] {
            var table = [Bool](repeating: false, count: 256)
            for byte in members.utf8 { table[Int(byte)] = true }
            return table
        }

        static func isToken(_ byte: UInt8) -> Bool { token[Int(byte)] }

        /// `field-vchar`, SP, HTAB, with obs-text (RFC 9110 §5.5).
        static func isFieldValue(_ byte: UInt8) -> Bool { byte == 0x09 || (byte >= 0x20 && byte != 0x7F) }

        static func isOWS(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

        static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
            var result = bytes
            while let first = result.first, isOWS(first) { result = result.dropFirst() }
            while let last = result.last, isOWS(last) { result = result.dropLast() }
            return result
        }

        /// ASCII letters folded to lower case, for comparing names and tokens (RFC 9110 §5.1).
        static func lowercased(_ bytes: some Sequence<UInt8>) -> String {
            String(decoding: bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
        }

        /// A list value's members, trimmed; empty ones kept (RFC 9110 §5.6.1).
        static func members(_ value: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
            value.split(separator: 0x2C, omittingEmptySubsequences: false).map(trimmed)
        }

        /// `field-name ":" OWS field-value OWS` (RFC 9112 §5): the name and the trimmed value.
        static func fieldLine(_ line: ArraySlice<UInt8>) -> (name: ArraySlice<UInt8>, value: ArraySlice<UInt8>)? {
            guard let colon = line.firstIndex(of: 0x3A) else { return nil }
            let name = line[..<colon]
            let value = line[(colon + 1)...]
            guard !name.isEmpty, name.allSatisfy(isToken), value.allSatisfy(isFieldValue) else { return nil }
            return (name, trimmed(value))
        }
    }
}

// MARK: - Request heads

extension RequestOracle {
    typealias HeadAnswer = WireFuzzing.HeadAnswer
    typealias Limits = WireFuzzing.Limits

    /// A request with every field the parser keeps state for, parsed before `reset`.
    static let previousRequest = Array(
        ("POST /previous HTTP/1.1\r\nHost: previous\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
            + "Expect: 100-continue\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n").utf8)

    static func parseHead(_ bytes: [UInt8], ends: [Int], _ limits: Limits, after previous: [UInt8]? = nil)
        -> HeadAnswer
    {
        WireFuzzing.parseRequestHead(bytes, ends: ends, limits: limits, after: previous)
    }

    /// A line longer than the limit is refused as too large (`431`) when it arrives at once,
    /// but as malformed (`400`) when a prefix of it already shows a bad byte: both refuse.
    /// (A request-line the limit cuts gets one status however it arrives: ``cutRequestLineStatus``.)
    static func bothRefusedTooLong(_ one: HeadAnswer, _ other: HeadAnswer, _ count: Int, _ limits: Limits) -> Bool {
        guard count > limits.maxHeaderBytes else { return false }
        return [one.decision, other.decision].allSatisfy { if case .rejected = $0 { true } else { false } }
    }

    static func checkHead(_ answer: HeadAnswer, _ bytes: [UInt8], _ limits: Limits) {
        let expected = expectedHead(bytes, limits)
        switch answer.decision {
        case .needMore:
            require(expected == nil, bytes, "a valid head is not complete; the grammar reads \(expected!)")
            return
        case .rejected(let status):
            require([400, 413, 414, 417, 431, 501, 505].contains(status), bytes, "refused with \(status)")
            require(expected == nil, bytes, "a valid head is refused with \(status); the grammar reads \(expected!)")
            if let cut = cutRequestLineStatus(bytes, limits) {
                require(status == cut, bytes, "a request-line the limit cuts is refused with \(status), not \(cut)")
            }
            return
        case .complete:
            break
        }
        // What RFC 9112 forbids a server to accept, whatever else the head holds.
        let hosts = answer.fields.filter { Grammar.lowercased($0.name.utf8) == "host" }
        require(
            answer.minorVersion == 1 ? hosts.count == 1 : hosts.count <= 1, bytes,
            "\(hosts.count) Host fields accepted (RFC 9112 §3.2)")
        for field in answer.fields {
            require(
                !field.name.isEmpty && field.name.utf8.allSatisfy(Grammar.isToken), bytes,
                "the field name \(quoted(field.name.utf8)) is accepted (RFC 9110 §5.1)")
            require(
                !field.value.utf8.contains(where: { $0 == cr || $0 == lf || $0 == 0 }), bytes,
                "the value \(quoted(field.value.utf8)) is accepted (RFC 9110 §5.5)")
        }
        let names = Set(answer.fields.map { Grammar.lowercased($0.name.utf8) })
        require(
            !(names.contains("content-length") && names.contains("transfer-encoding")), bytes,
            "Content-Length and Transfer-Encoding accepted together (RFC 9112 §6.3)")
        require(answer.headLength <= limits.maxHeaderBytes, bytes, "a head over the limit accepted")
        require(answer.fields.count <= limits.maxFieldCount, bytes, "more fields than the limit accepted")
        if case .length(let length) = answer.framing {
            require(length > 0 && length <= limits.maxBodyBytes, bytes, "a body of \(length) bytes accepted")
        }
        require(
            expected == answer, bytes,
            "accepted as \(answer); the grammar reads \(expected.map { "\($0)" } ?? "invalid")")
    }

    /// The status of a request-line that does not end within the head limit (RFC 9112 §3),
    /// read from the limit's bytes alone; nil when a line ends within them. `400` for a byte no
    /// request-line may have there; else by where the limit falls: in the method `501` (longer
    /// than any the server implements), in the request-target `414` (RFC 9110 §15.5.15),
    /// after it `400` when what follows is longer than `HTTP/1.1` and its CR, else `414`. The
    /// CR of an empty line at the limit is no request-line: `431`.
    static func cutRequestLineStatus(_ bytes: [UInt8], _ limits: Limits) -> Int? {
        guard bytes.count > limits.maxHeaderBytes else { return nil }
        let head = bytes[..<limits.maxHeaderBytes]
        var start = 0
        while start + 1 < head.count, head[start] == cr, head[start + 1] == lf { start += 2 }
        let line = head[start...]
        guard !line.isEmpty, !line.contains(lf) else { return nil }
        if line.elementsEqual([cr]) { return 431 }
        let method = line.prefix(while: Grammar.isToken)
        guard method.endIndex < line.endIndex else { return 501 }
        guard !method.isEmpty, line[method.endIndex] == 0x20 else { return 400 }
        let target = line[(method.endIndex + 1)...].prefix { $0 > 0x20 && $0 < 0x7F }
        guard target.endIndex < line.endIndex else { return 414 }
        guard line[target.endIndex] == 0x20 else { return 400 }
        return line.endIndex - (target.endIndex + 1) > 9 ? 400 : 414
    }

    /// The head at the start of `bytes` as RFC 9112 reads it, or `nil` when there is no
    /// complete valid one within the limits.
    static func expectedHead(_ bytes: [UInt8], _ limits: Limits) -> HeadAnswer? {
        // Lines end in CRLF; empty lines before the request-line are ignored (§2.2).
        var lines: [ArraySlice<UInt8>] = []
        var start = 0
        var headLength = 0
        while headLength == 0 {
            guard let end = bytes[start...].firstIndex(of: lf) else { return nil }
            guard end + 1 <= limits.maxHeaderBytes, end > start, bytes[end - 1] == cr else { return nil }
            let line = bytes[start..<(end - 1)]
            start = end + 1
            if line.isEmpty {
                if !lines.isEmpty { headLength = start }
            } else {
                lines.append(line)
            }
        }
        // request-line = method SP request-target SP HTTP-version (§3).
        let parts = lines[0].split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy(Grammar.isToken), !parts[1].isEmpty,
            parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        // HTTP/1.0, or 1.1 and any later minor version, read as 1.1 (§2.3).
        let version = Array(parts[2])
        guard version.count == 8, version[..<7].elementsEqual("HTTP/1.".utf8), (0x30...0x39).contains(version[7]) else {
            return nil
        }
        let minorVersion = version[7] == UInt8(ascii: "0") ? 0 : 1
        guard lines.count - 1 <= limits.maxFieldCount else { return nil }
        var fields: [(name: ArraySlice<UInt8>, value: ArraySlice<UInt8>)] = []
        for line in lines.dropFirst() {
            guard let field = Grammar.fieldLine(line) else { return nil }
            fields.append(field)
        }
        func values(_ name: String) -> [ArraySlice<UInt8>] {
            fields.filter { Grammar.lowercased($0.name) == name }.map(\.value)
        }
        // Exactly one Host in HTTP/1.1, at most one in HTTP/1.0, empty or an authority (§3.2).
        let hosts = values("host")
        guard hosts.count == minorVersion || hosts.count == 1,
            hosts.allSatisfy({ $0.isEmpty || Grammar.isAuthority($0) })
        else { return nil }
        // Framing (§6.1, §6.3): Transfer-Encoding is chunked once and alone, HTTP/1.1 only, no
        // Content-Length beside it; Content-Length is one decimal number, repeated or not.
        let codings = values("transfer-encoding")
        let lengths = values("content-length")
        var framing = WireFuzzing.Framing.none
        if !codings.isEmpty {
            let members = codings.flatMap(Grammar.members).filter { !$0.isEmpty }
            guard lengths.isEmpty, minorVersion == 1, codings.count == 1, members.count == 1 else { return nil }
            let name = members[0].prefix(while: Grammar.isToken)
            let rest = Grammar.trimmed(members[0][name.endIndex...])
            guard Grammar.lowercased(name) == "chunked", rest.isEmpty || rest.first == 0x3B else { return nil }
            framing = .chunked
        } else if !lengths.isEmpty {
            var length: Int64?
            for member in lengths.flatMap(Grammar.members) {
                guard !member.isEmpty, member.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
                let significant = member.drop { $0 == 0x30 }
                guard significant.count <= 18 else { return nil }  // beyond any limit
                let value = significant.reduce(Int64(0)) { $0 * 10 + Int64($1 - 0x30) }
                guard length == nil || length == value else { return nil }
                length = value
            }
            guard let length, length <= limits.maxBodyBytes else { return nil }
            if length > 0 { framing = .length(length) }
        }
        // The only expectation is 100-continue (RFC 9110 §10.1.1).
        var expectsContinue = false
        for member in values("expect").flatMap(Grammar.members) where !member.isEmpty {
            guard Grammar.lowercased(member) == "100-continue" else { return nil }
            expectsContinue = true
        }
        // Persistence (§9.3).
        let connection = Set(values("connection").flatMap(Grammar.members).map(Grammar.lowercased))
        let keepAlive = !connection.contains("close") && (minorVersion == 1 || connection.contains("keep-alive"))
        return HeadAnswer(
            decision: .complete, method: String(decoding: parts[0], as: UTF8.self),
            target: String(decoding: parts[1], as: UTF8.self), minorVersion: minorVersion,
            fields: fields.map {
                HeaderField(
                    name: String(decoding: $0.name, as: UTF8.self), value: String(decoding: $0.value, as: UTF8.self))
            },
            headLength: headLength, framing: framing, keepAlive: keepAlive,
            expectsContinue: expectsContinue && minorVersion == 1 && framing != .none,
            isHead: String(decoding: parts[0], as: UTF8.self) == "HEAD")
    }
}

// MARK: - Chunked bodies

extension RequestOracle {
    typealias BodyAnswer = WireFuzzing.BodyAnswer

    static func decodeBody(_ bytes: [UInt8], ends: [Int], _ limits: Limits) -> BodyAnswer {
        WireFuzzing.decodeChunkedBody(bytes, ends: ends, limits: limits)
    }

    static func checkBody(_ answer: BodyAnswer, _ bytes: [UInt8], _ limits: Limits) {
        if case .rejected(let status) = answer.decision {
            require([400, 413, 431].contains(status), bytes, "refused with \(status)")
        }
        require(answer.body.count <= limits.maxBodyBytes, bytes, "a body of \(answer.body.count) bytes decoded")
        let expected = expectedBody(bytes, limits)
        if answer.decision == .done {
            require(
                answer.consumed >= 5 && bytes[(answer.consumed - 4)..<answer.consumed].elementsEqual([cr, lf, cr, lf]),
                bytes, "done after \(answer.consumed) bytes, not after an empty line")
            require(
                expected?.consumed == answer.consumed && expected?.body == answer.body, bytes,
                "done after \(answer.consumed) bytes with body \(quoted(answer.body)); the grammar reads "
                    + (expected.map { "\($0.consumed) bytes, body \(quoted($0.body))" } ?? "no complete body"))
        } else {
            require(
                expected == nil, bytes,
                "\(answer.decision) where the grammar reads a complete body of \(expected!.consumed) bytes")
        }
    }

    /// The chunked body at the start of `bytes` as RFC 9112 §7.1 reads it: bytes consumed and
    /// data, or `nil` when there is no complete valid one within the limits.
    static func expectedBody(_ bytes: [UInt8], _ limits: Limits) -> (consumed: Int, body: [UInt8])? {
        var position = 0
        var body: [UInt8] = []
        /// The next line without its CRLF, and where the one after starts.
        func line() -> (ArraySlice<UInt8>, Int)? {
            guard let end = bytes[position...].firstIndex(of: lf), end > position, bytes[end - 1] == cr else {
                return nil
            }
            return (bytes[position..<(end - 1)], end + 1)
        }
        // chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF; the decoder allows white space
        // after the size and skips extensions, which may hold field-value bytes (§7.1.1).
        while true {
            guard let (sizeLine, next) = line(), next - position <= WireFuzzing.maxChunkSizeLineBytes else {
                return nil
            }
            let digits = sizeLine.prefix { Grammar.hexValue($0) != nil }
            let rest = Grammar.trimmed(sizeLine[digits.endIndex...])
            let extensionStart = sizeLine[digits.endIndex...].drop(while: Grammar.isOWS)
            guard !digits.isEmpty,
                rest.isEmpty || (extensionStart.first == 0x3B && extensionStart.allSatisfy(Grammar.isFieldValue))
            else { return nil }
            let significant = digits.drop { $0 == 0x30 }
            guard significant.count <= 15 else { return nil }  // beyond any limit
            let size = significant.reduce(Int64(0)) { $0 << 4 | Int64(Grammar.hexValue($1)!) }
            position = next
            if size == 0 { break }
            guard size <= limits.maxBodyBytes - Int64(body.count), bytes.count - position >= Int(size) + 2 else {
                return nil
            }
            body += bytes[position..<(position + Int(size))]
            position += Int(size)
            guard bytes[position] == cr, bytes[position + 1] == lf else { return nil }
            position += 2
        }
        // trailer-section = *( field-line CRLF ) CRLF, within the head's limits (§7.1.2).
        var trailerBytes = 0
        var trailerFields = 0
        while true {
            guard let (fieldLine, next) = line() else { return nil }
            trailerBytes += next - position
            guard trailerBytes <= limits.maxHeaderBytes else { return nil }
            position = next
            if fieldLine.isEmpty { return (position, body) }
            trailerFields += 1
            guard trailerFields <= limits.maxFieldCount, Grammar.fieldLine(fieldLine) != nil else { return nil }
        }
    }
}

extension RequestOracle.Grammar {
    /// The value of a `HEXDIG` (RFC 5234 §B.1, either case), or `nil`.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
