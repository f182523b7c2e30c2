// A plain reading of RFC 9112 for HTTP/1.1 responses, written for the fuzzer apart from the
// proxy's ResponseFramer, whose answers it checks: one pass over all the bytes at hand, line by
// line, the way the RFC's grammar reads.

/// A field line as read: name and value.
public struct Field: Equatable, Sendable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A response head as read.
public struct Head: Equatable, Sendable {
    public var status: Int
    public var reason: String
    public var fields: [Field]
}

/// Bounds on a response: the proxy's or the fuzzer's small ones.
public struct Limits: Sendable {
    public var maxHeadBytes: Int
    public var maxFieldCount: Int
    public var maxInterimResponses: Int

    public init(maxHeadBytes: Int, maxFieldCount: Int, maxInterimResponses: Int) {
        self.maxHeadBytes = maxHeadBytes
        self.maxFieldCount = maxFieldCount
        self.maxInterimResponses = maxInterimResponses
    }
}

/// What the bytes of one response say, read at once.
public struct ResponseReading: Equatable, Sendable {
    /// Why reading stopped.
    public enum Ending: Equatable, Sendable {
        /// The response is complete.
        case complete
        /// More bytes are needed (the connection is still open).
        case incomplete
        /// The bytes break the grammar or a rule: the response is refused.
        case malformed
        /// The connection closed before the response was complete.
        case truncated
    }

    /// Interim (1xx) heads, in order.
    public var interim: [Head] = []
    /// The final head.
    public var head: Head?
    /// The body bytes read (de-chunked), complete or not.
    public var body: [UInt8] = []
    public var ending = Ending.incomplete
    /// When complete: how many bytes the response took.
    public var length = 0
    /// When complete: whether the connection may carry another request (RFC 9112 §9.3).
    public var persists = false

    /// Reads the response to a `method` request at the start of `bytes`; `closed`: the
    /// connection closed after them.
    public init(method: String, bytes: [UInt8], closed: Bool, limits: Limits) {
        var reader = Reader(bytes: bytes, closed: closed, limits: limits, reading: self)
        reader.read(isHead: method == "HEAD")
        self = reader.reading
    }
}

private let cr: UInt8 = 0x0D
private let lf: UInt8 = 0x0A

/// One pass over the bytes; `reading` collects the answer.
private struct Reader {
    let bytes: [UInt8]
    let closed: Bool
    let limits: Limits
    var reading: ResponseReading
    var position = 0

    /// Stops with `ending`; `.incomplete` becomes `.truncated` when the connection closed.
    mutating func stop(_ ending: ResponseReading.Ending) {
        reading.ending = ending == .incomplete && closed ? .truncated : ending
    }

    mutating func read(isHead: Bool) {
        var interimCount = 0
        while true {
            guard let (head, minor) = readHead() else { return }
            if head.status == 101 { return stop(.malformed) }
            if head.status < 200 {
                interimCount += 1
                guard interimCount <= limits.maxInterimResponses else { return stop(.malformed) }
                reading.interim.append(head)
                continue
            }
            guard let framing = Framing(head, minor: minor, isHead: isHead) else { return stop(.malformed) }
            reading.head = Self.forwarded(head, framing)
            switch framing {
            case .none:
                finish(persists: persists(head, minor: minor))
            case .length(let length):
                let available = bytes.count - position
                reading.body = Array(bytes[position..<(position + min(available, length))])
                guard available >= length else { return stop(.incomplete) }
                position += length
                finish(persists: persists(head, minor: minor))
            case .chunked:
                guard readChunked() else { return }
                finish(persists: persists(head, minor: minor))
            case .untilClose:
                reading.body = Array(bytes[position...])
                position = bytes.count
                guard closed else { return stop(.incomplete) }
                finish(persists: false)
            }
            return
        }
    }

    /// The head as the proxy sends it on: a `204`'s Content-Length dropped (RFC 9110 §8.6), and
    /// repeated Content-Length lines or list members replaced with one line, in the first one's
    /// place and with its name, holding the length in decimal (RFC 9112 §6.3 item 5).
    private static func forwarded(_ head: Head, _ framing: Framing) -> Head {
        var head = head
        let isLength = { (field: Field) in lowercased(field.name) == "content-length" }
        switch framing {
        case .none where head.status == 204:
            head.fields.removeAll(where: isLength)
        case .length(let length):
            let lines = head.fields.filter(isLength)
            guard lines.count > 1 || lines[0].value.contains(","), let first = head.fields.firstIndex(where: isLength)
            else { break }
            head.fields[first].value = String(length)
            head.fields = head.fields.enumerated().filter { $0.offset == first || !isLength($0.element) }.map(\.element)
        default:
            break
        }
        return head
    }

    mutating func finish(persists: Bool) {
        reading.ending = .complete
        reading.length = position
        reading.persists = persists
    }

    // MARK: Heads (RFC 9112 §2–§5)

    /// The next head and its version's minor digit; nil after stopping.
    mutating func readHead() -> (Head, Int)? {
        let available = bytes[position...]
        // A response starts with "HTTP/" (§4): other bytes are refused as soon as they are seen.
        guard zip(available, "HTTP/".utf8).allSatisfy({ $0 == $1 }) else {
            stop(.malformed)
            return nil
        }
        // Lines after each LF; the head ends at the first empty one after the status line (§2.2:
        // a bare LF ends a line, a CR before it is dropped).
        var lines: [ArraySlice<UInt8>] = []
        var start = position
        var end: Int?
        while let newline = bytes[start...].firstIndex(of: lf) {
            var line = bytes[start..<newline]
            if line.last == cr { line = line.dropLast() }
            start = newline + 1
            if line.isEmpty && !lines.isEmpty {
                end = start
                break
            }
            lines.append(line)
        }
        guard let end else {
            stop(bytes.count - position > limits.maxHeadBytes ? .malformed : .incomplete)
            return nil
        }
        guard end - position <= limits.maxHeadBytes else {
            stop(.malformed)
            return nil
        }
        position = end
        // A bare CR or NUL anywhere in a line is SP (RFC 9110 §5.5).
        let cleaned = lines.map { $0.map { $0 == cr || $0 == 0 ? 0x20 : $0 }[...] }
        guard let (minor, status, reason) = statusLine(cleaned[0]) else {
            stop(.malformed)
            return nil
        }
        var fields: [Field] = []
        var folding = false
        for line in cleaned.dropFirst() {
            if line.first == 0x20 || line.first == 0x09 {
                // obs-fold: continues the field line before it, joined with one SP (§5.2).
                let more = text(trimmed(line))
                if folding && !more.isEmpty {
                    fields[fields.count - 1].value += fields[fields.count - 1].value.isEmpty ? more : " " + more
                }
                continue
            }
            folding = false
            guard let colon = line.firstIndex(of: 0x3A) else { continue }
            let name = trimmed(line[..<colon])
            guard !name.isEmpty, name.allSatisfy(isToken) else { continue }
            guard fields.count < limits.maxFieldCount else {
                stop(.malformed)
                return nil
            }
            fields.append(Field(name: text(name), value: text(trimmed(line[(colon + 1)...]))))
            folding = true
        }
        return (Head(status: status, reason: reason, fields: fields), minor)
    }

    /// `HTTP/1.x SP 3DIGIT [SP reason]`, status from 100 (§4, RFC 9110 §15).
    func statusLine(_ line: ArraySlice<UInt8>) -> (Int, Int, String)? {
        let bytes = Array(line)
        guard bytes.count >= 12, bytes[0..<7] == Array("HTTP/1.".utf8)[...], isDigit(bytes[7]), bytes[8] == 0x20,
            bytes[9..<12].allSatisfy(isDigit), bytes.count == 12 || bytes[12] == 0x20
        else { return nil }
        let status = Int(String(decoding: bytes[9..<12], as: UTF8.self))!
        guard status >= 100 else { return nil }
        return (Int(bytes[7] - 0x30), status, text(trimmed(bytes[12...])))
    }

    /// RFC 9112 §9.3: `close` ends the connection; HTTP/1.0 needs `keep-alive`.
    func persists(_ head: Head, minor: Int) -> Bool {
        let options = head.fields.filter { lowercased($0.name) == "connection" }.flatMap { listMembers($0.value) }
            .map(lowercased)
        if options.contains("close") { return false }
        return minor >= 1 || options.contains("keep-alive")
    }

    // MARK: Chunked bodies (RFC 9112 §7.1)

    /// Reads a chunked body to its end; false after stopping.
    mutating func readChunked() -> Bool {
        while true {
            // chunk-size [ chunk-ext ] CRLF, at most 4,096 bytes with its CRLF.
            guard let line = chunkLine(limit: 4096) else { return false }
            let digits = line.prefix(while: { hexValue($0) != nil })
            let rest = line[digits.endIndex...]
            let afterWhiteSpace = rest.drop(while: { $0 == 0x20 || $0 == 0x09 })
            guard !digits.isEmpty,
                afterWhiteSpace.isEmpty
                    || (afterWhiteSpace.first == 0x3B && afterWhiteSpace.allSatisfy(isFieldValue))
            else {
                stop(.malformed)
                return false
            }
            // A size beyond Int64 cannot be a length (a body that large never arrives anyway).
            let significant = digits.drop(while: { $0 == 0x30 })
            guard significant.count < 16 || (significant.count == 16 && significant.first! <= 0x37) else {
                stop(.malformed)
                return false
            }
            let size = significant.reduce(0) { $0 << 4 | Int(hexValue($1)!) }
            if size == 0 { break }
            let available = bytes.count - position
            reading.body += bytes[position..<(position + min(available, size))]
            guard available >= size else {
                stop(.incomplete)
                return false
            }
            position += size
            // chunk-data CRLF: anything but CR refused at once.
            let after = bytes[position...].prefix(2)
            guard after.first ?? cr == cr, after.count < 2 || after.last == lf else {
                stop(.malformed)
                return false
            }
            guard after.count == 2 else {
                stop(.incomplete)
                return false
            }
            position += 2
        }
        // trailer-section: field lines, checked and dropped, within the head's limits (§7.1.2).
        var trailerBytes = 0
        var trailerFields = 0
        while true {
            let start = position
            guard let line = chunkLine(limit: limits.maxHeadBytes - trailerBytes) else { return false }
            if line.isEmpty { return true }
            trailerBytes += position - start
            trailerFields += 1
            guard isFieldLine(line), trailerFields <= limits.maxFieldCount else {
                stop(.malformed)
                return false
            }
        }
    }

    /// The next line of a chunked body without its CRLF (a bare LF is refused), at most `limit`
    /// bytes with it; nil after stopping.
    mutating func chunkLine(limit: Int) -> ArraySlice<UInt8>? {
        guard let newline = bytes[position...].firstIndex(of: lf) else {
            stop(bytes.count - position > limit ? .malformed : .incomplete)
            return nil
        }
        guard newline + 1 - position <= limit, newline > position, bytes[newline - 1] == cr else {
            stop(.malformed)
            return nil
        }
        defer { position = newline + 1 }
        return bytes[position..<(newline - 1)]
    }

    /// `field-name ":" OWS field-value OWS`, strictly (RFC 9112 §5): a token right before the colon.
    func isFieldLine(_ line: ArraySlice<UInt8>) -> Bool {
        guard let colon = line.firstIndex(of: 0x3A) else { return false }
        let name = line[..<colon]
        return !name.isEmpty && name.allSatisfy(isToken) && line[(colon + 1)...].allSatisfy(isFieldValue)
    }
}

// MARK: - How the body is delimited (RFC 9112 §6.3)

private enum Framing {
    case none
    case length(Int)
    case chunked
    case untilClose

    /// Items 1–8 of RFC 9112 §6.3, with Content-Length beside Transfer-Encoding, and any coding
    /// but one `chunked`, refused (nil).
    init?(_ head: Head, minor: Int, isHead: Bool) {
        if isHead || head.status == 204 || head.status == 304 {
            self = .none
            return
        }
        let codings = head.fields.filter { lowercased($0.name) == "transfer-encoding" }
        let lengths = head.fields.filter { lowercased($0.name) == "content-length" }
        if !codings.isEmpty {
            guard lengths.isEmpty, minor >= 1, codings.count == 1, lowercased(codings[0].value) == "chunked" else {
                return nil
            }
            self = .chunked
            return
        }
        guard !lengths.isEmpty else {
            self = .untilClose
            return
        }
        // Every member of every line the same decimal number.
        let members = lengths.flatMap { $0.value.split(separator: ",", omittingEmptySubsequences: false) }
            .map { trimmed(Array($0.utf8)[...]) }
        guard members.allSatisfy({ !$0.isEmpty && $0.allSatisfy(isDigit) }) else { return nil }
        let values = members.map { $0.drop(while: { $0 == 0x30 }) }
        guard let first = values.first, values.allSatisfy({ $0.elementsEqual(first) }),
            first.count < 19 || (first.count == 19 && String(decoding: first, as: UTF8.self) <= "9223372036854775807")
        else { return nil }
        self = .length(Int(String(decoding: first, as: UTF8.self)) ?? 0)
    }
}

// MARK: - Bytes

private func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

/// `tchar` (RFC 9110 §5.6.2).
private func isToken(_ byte: UInt8) -> Bool {
    "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8.contains(byte)
}

/// HTAB, SP, VCHAR or obs-text (RFC 9110 §5.5).
private func isFieldValue(_ byte: UInt8) -> Bool { byte == 0x09 || (byte >= 0x20 && byte != 0x7F) }

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case 0x30...0x39: byte - 0x30
    case 0x41...0x46: byte - 0x37
    case 0x61...0x66: byte - 0x57
    default: nil
    }
}

private func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
    var result = bytes
    while let first = result.first, first == 0x20 || first == 0x09 { result = result.dropFirst() }
    while let last = result.last, last == 0x20 || last == 0x09 { result = result.dropLast() }
    return result
}

private func lowercased(_ text: String) -> String {
    String(decoding: text.utf8.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
}

/// A list's members (RFC 9110 §5.6.1): split at commas outside quoted strings, trimmed, empty
/// ones dropped.
private func listMembers(_ value: String) -> [String] {
    var members: [String] = []
    var current: [UInt8] = []
    var quoted = false
    var escaped = false
    for byte in value.utf8 {
        if quoted {
            if escaped {
                escaped = false
            } else if byte == 0x5C {
                escaped = true
            } else if byte == 0x22 {
                quoted = false
            }
        } else if byte == 0x22 {
            quoted = true
        } else if byte == 0x2C {
            members.append(text(trimmed(current[...])))
            current = []
            continue
        }
        current.append(byte)
    }
    members.append(text(trimmed(current[...])))
    return members.filter { !$0.isEmpty }
}

/// UTF-8 when valid, else one ISO 8859-1 scalar per byte.
func text(_ bytes: ArraySlice<UInt8>) -> String {
    if let text = String(validating: bytes, as: UTF8.self) { return text }
    var result = ""
    result.unicodeScalars.append(contentsOf: bytes.map { Unicode.Scalar($0) })
    return result
}
