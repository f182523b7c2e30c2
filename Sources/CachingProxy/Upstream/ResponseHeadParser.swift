import CacheSemantics

/// Builds the final response head from the head lines libcurl passes on one at a time.
///
/// libcurl hands over every line as received, interim (1xx) heads and trailers included,
/// and does not unfold continuation lines. This parser
/// - skips interim responses (RFC 9110 §15.2) except `101`, which ends the head exchange;
/// - keeps field lines in order with repeated names (RFC 9110 §5.2, §5.3);
/// - removes white space around names and values (RFC 9112 §5.1, §5.5);
/// - replaces each obs-fold with one SP, as a proxy must before forwarding (RFC 9112 §5.2);
/// - ignores lines after the final head (trailer fields) and field lines without a colon;
/// - refuses a head whose `Content-Length` is not one number (repeats of the same number
///   allowed), when it has no `Transfer-Encoding`: its framing is unknowable, and a proxy
///   must discard such a response (RFC 9112 §6.3, item 5).
///
/// Bytes become text as UTF-8 when valid, otherwise as ISO 8859-1 (one scalar per byte), so
/// no byte is replaced.
struct ResponseHeadParser {
    /// What a line completed.
    enum Event: Equatable {
        /// Nothing yet: more lines are needed.
        case none
        /// The final head is complete.
        case head(status: Int, reason: String, fields: [HeaderField])
        /// The line cannot start a response: a bad status line.
        case malformed(String)
    }

    private var status: Int?
    private var reason = ""
    private var fields: [HeaderField] = []
    /// Whether the last line was a field line (or its continuation): only then does an
    /// obs-fold line continue a field (RFC 9112 §5.2).
    private var continuesField = false
    /// Whether the final head has been returned; later lines are trailers and ignored.
    private(set) var isComplete = false

    /// Forgets a partly received head (the request is about to be sent again).
    mutating func restart() {
        status = nil
        reason = ""
        fields.removeAll(keepingCapacity: true)
        continuesField = false
        isComplete = false
    }

    /// Consumes one line, with or without its CRLF.
    mutating func consume(_ raw: UnsafeRawBufferPointer) -> Event {
        guard !isComplete else { return .none }
        var line = raw[...]
        if line.last == 0x0A { line = line.dropLast() }
        if line.last == 0x0D { line = line.dropLast() }
        guard let status else {
            return startHead(line)
        }
        if line.isEmpty {
            // 101 switches protocols: no further head follows (RFC 9110 §15.2.2).
            if (100...199).contains(status) && status != 101 {
                restart()
                return .none
            }
            isComplete = true
            guard Self.hasValidFraming(fields) else {
                return .malformed("Content-Length is not one number")
            }
            return .head(status: status, reason: reason, fields: fields)
        }
        // A bare CR or a NUL becomes SP before anything reads the line (RFC 9110 §5.5,
        // RFC 9112 §2.2).
        guard line.contains(where: { $0 == 0x0D || $0 == 0x00 }) else {
            fieldLine(line)
            return .none
        }
        [UInt8](line.map { $0 == 0x0D || $0 == 0x00 ? 0x20 : $0 }).withUnsafeBytes { fieldLine($0[...]) }
        return .none
    }

    /// A field line, or an obs-fold line continuing the one before.
    private mutating func fieldLine(_ line: Slice<UnsafeRawBufferPointer>) {
        if line.first == 0x20 || line.first == 0x09 {
            if continuesField { unfold(line) }
            return
        }
        continuesField = false
        guard let colon = line.firstIndex(of: 0x3A) else { return }
        let name = Self.trimmed(line[..<colon])
        guard !name.isEmpty else { return }
        let value = Self.trimmed(line[(colon + 1)...])
        fields.append(HeaderField(name: Self.text(name), value: Self.text(value)))
        continuesField = true
    }

    /// `HTTP/1.1 200 OK` → status 200, reason "OK" (RFC 9112 §4); the reason may be empty.
    private mutating func startHead(_ line: Slice<UnsafeRawBufferPointer>) -> Event {
        let prefix: [UInt8] = Array("HTTP/".utf8)
        guard line.starts(with: prefix), let space = line.firstIndex(of: 0x20) else {
            return .malformed("bad status line \"\(Self.text(line.prefix(80)))\"")
        }
        let digits = line[(space + 1)...].prefix { $0 != 0x20 }
        guard digits.count == 3, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return .malformed("bad status code in \"\(Self.text(line.prefix(80)))\"")
        }
        status = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        reason = Self.text(Self.trimmed(line[digits.endIndex...]))
        continuesField = false
        return .none
    }

    /// Joins a continuation line to the previous field's value with one SP (RFC 9112 §5.2).
    private mutating func unfold(_ line: Slice<UnsafeRawBufferPointer>) {
        guard !fields.isEmpty else { return }
        let more = Self.text(Self.trimmed(line))
        guard !more.isEmpty else { return }
        let last = fields.count - 1
        fields[last].value = fields[last].value.isEmpty ? more : fields[last].value + " " + more
    }

    /// Whether every `Content-Length` line names the same decimal number (RFC 9110 §8.6), or
    /// `Transfer-Encoding` decides the framing instead (RFC 9112 §6.3, item 3).
    static func hasValidFraming(_ fields: [HeaderField]) -> Bool {
        if fields.contains(where: { RequestFieldList.equalsIgnoringCase($0.name, "transfer-encoding") }) { return true }
        var length: Substring?
        for field in fields where RequestFieldList.equalsIgnoringCase(field.name, "content-length") {
            for member in field.value.split(separator: ",", omittingEmptySubsequences: false) {
                var digits = member
                while digits.first == " " || digits.first == "\t" { digits.removeFirst() }
                while digits.last == " " || digits.last == "\t" { digits.removeLast() }
                guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
                if let length, length != digits { return false }
                length = digits
            }
        }
        return true
    }

    /// `bytes` without leading and trailing SP and HTAB (OWS, RFC 9110 §5.6.3).
    static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
        var result = bytes
        while let first = result.first, first == 0x20 || first == 0x09 { result = result.dropFirst() }
        while let last = result.last, last == 0x20 || last == 0x09 { result = result.dropLast() }
        return result
    }

    /// UTF-8 when valid, else ISO 8859-1 (each byte one scalar), so no byte is lost.
    static func text(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        var result = ""
        result.unicodeScalars.append(contentsOf: bytes.map { Unicode.Scalar($0) })
        return result
    }
}
