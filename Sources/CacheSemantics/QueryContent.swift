/// The content of a `QUERY` request as its cache key holds it (RFC 10008 §2.7): "The cache key
/// for a QUERY request MUST incorporate the request content and related metadata", and a cache
/// may first remove differences that do not change what the query means.
///
/// What this cache removes, and only when the request has no `Content-Encoding` and no
/// `Cache-Control: no-transform` (RFC 9111 §5.2.1.6: the client asks that nothing be changed):
/// - JSON (`application/json` and every `+json` type, RFC 6839 §3.1): white space outside
///   strings (RFC 8259 §2), when the content is valid JSON. Members are never reordered: the
///   order of an object's members may mean something to the application that reads it.
/// - `application/x-www-form-urlencoded`: percent-encoding, as RFC 3986 §6.2.2.1–6.2.2.2
///   normalizes it (hex digits in upper case, unreserved characters decoded). Fields keep their
///   order: the order of fields, and of repeated names, may be significant to the application.
/// - Anything else: nothing; the bytes as sent.
///
/// The metadata kept beside the bytes is the media type with its parameters, normalized as
/// RFC 9110 §8.3.1 allows (`Text/HTML;Charset="UTF-8"` is `text/html;charset=utf-8`), and the
/// content codings. Coded content is not decoded: it is keyed as sent, under its codings, so
/// the same query sent `gzip` and plain takes two entries, and never the wrong answer.
public struct QueryContent: Hashable, Sendable {
    /// How the content was normalized.
    public enum Normalization: Hashable, Sendable, CustomStringConvertible {
        /// The bytes as sent.
        case none
        /// JSON without white space outside strings (RFC 8259 §2).
        case json
        /// Form fields with their percent-encoding normalized (RFC 3986 §6.2.2).
        case formURLEncoded

        public var description: String {
            switch self {
            case .none: "the bytes as sent"
            case .json: "JSON without white space outside strings"
            case .formURLEncoded: "form fields with percent-encoding normalized"
            }
        }
    }

    /// The media type and parameters (`Content-Type`, RFC 9110 §8.3), normalized; empty when the
    /// request has none.
    public var mediaType: String
    /// The content codings (`Content-Encoding`, RFC 9110 §8.4), in lower case, comma-separated
    /// without spaces, `identity` left out; empty when the content is not coded.
    public var contentCoding: String
    /// How ``bytes`` were made from the content.
    public var normalization: Normalization
    /// The content as keyed.
    public var bytes: [UInt8]

    /// The keyed form of `content`, sent with request fields `fields`.
    public init(content: [UInt8], fields: HeaderFields) {
        mediaType = fields[.contentType].map(Self.normalizedMediaType) ?? ""
        let codings = (fields[.contentEncoding] ?? "").split(separator: ",").map { ASCII.lowercased(ASCII.trimmed($0)) }
        contentCoding = codings.filter { !$0.isEmpty && $0 != "identity" }.joined(separator: ",")
        normalization = .none
        bytes = content
        guard contentCoding.isEmpty, !RequestCacheControl(fields: fields).noTransform else { return }
        let essence = mediaType.prefix { $0 != ";" }
        if essence == "application/json" || essence.hasSuffix("+json") {
            if let minified = Self.jsonWithoutWhiteSpace(content) { (normalization, bytes) = (.json, minified) }
        } else if essence == "application/x-www-form-urlencoded",
            let normalized = Self.normalizedPercentEncoding(content)
        {
            (normalization, bytes) = (.formURLEncoded, normalized)
        }
    }

    // MARK: Media type

    /// `value` as `type/subtype;name=value…` with type, subtype and parameter names in lower
    /// case, no white space, quoted values unquoted where they are tokens, and `charset` values
    /// in lower case (RFC 9110 §8.3.1, §8.3.2: all case-insensitive); parameters keep their
    /// order. A value that is not a media type is kept as sent, trimmed: it cannot be mistaken
    /// for a normalized one, which always is.
    static func normalizedMediaType(_ value: String) -> String {
        let trimmed = String(ASCII.trimmed(Substring(value)))
        var parser = MediaTypeParser(Array(trimmed.utf8))
        return parser.normalized() ?? trimmed
    }

    private struct MediaTypeParser {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        mutating func normalized() -> String? {
            guard let type = token(), take(UInt8(ascii: "/")), let subtype = token() else { return nil }
            var result = "\(ASCII.lowercased(type))/\(ASCII.lowercased(subtype))"
            while true {
                skipWhiteSpace()
                if position == bytes.count { return result }
                guard take(UInt8(ascii: ";")) else { return nil }
                skipWhiteSpace()
                // RFC 9110 §5.6.6 allows an empty parameter (`text/plain;`).
                if position == bytes.count { return result }
                guard let name = token(), take(UInt8(ascii: "=")) else { return nil }
                let lowered = ASCII.lowercased(name)
                guard var value = position < bytes.count && bytes[position] == UInt8(ascii: "\"") ? quoted() : token()
                else { return nil }
                if lowered == "charset" { value = ASCII.lowercased(value) }
                result += ";\(lowered)=\(ASCII.isToken(value) ? value : Self.quoting(value))"
            }
        }

        private mutating func token() -> String? {
            let start = position
            while position < bytes.count, ASCII.isTokenChar(bytes[position]) { position += 1 }
            return position > start ? String(decoding: bytes[start..<position], as: UTF8.self) : nil
        }

        private mutating func take(_ byte: UInt8) -> Bool {
            guard position < bytes.count, bytes[position] == byte else { return false }
            position += 1
            return true
        }

        private mutating func skipWhiteSpace() {
            while position < bytes.count, ASCII.isOWS(bytes[position]) { position += 1 }
        }

        /// A `quoted-string` (RFC 9110 §5.6.4), unescaped.
        private mutating func quoted() -> String? {
            position += 1
            var value: [UInt8] = []
            while position < bytes.count {
                let byte = bytes[position]
                position += 1
                switch byte {
                case UInt8(ascii: "\""): return String(decoding: value, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard position < bytes.count else { return nil }
                    value.append(bytes[position])
                    position += 1
                default: value.append(byte)
                }
            }
            return nil
        }

        static func quoting(_ value: String) -> String {
            var quoted = "\""
            for character in value {
                if character == "\"" || character == "\\" { quoted.append("\\") }
                quoted.append(character)
            }
            return quoted + "\""
        }
    }

    // MARK: JSON

    /// `content` without the white space RFC 8259 §2 allows around structural characters and
    /// values; `nil` when `content` is not one JSON text (RFC 8259 §2–§7), so that two invalid
    /// texts are never made equal. Strings are kept byte for byte, escapes included.
    static func jsonWithoutWhiteSpace(_ content: [UInt8]) -> [UInt8]? {
        enum Expecting { case value, valueOrEnd, name, nameOrEnd, colon, commaOrEnd, nothing }
        var result: [UInt8] = []
        result.reserveCapacity(content.count)
        var open: [UInt8] = []  // `{` and `[` not yet closed
        var expecting = Expecting.value
        var index = 0
        func afterValue() -> Expecting { open.isEmpty ? .nothing : .commaOrEnd }
        while index < content.count {
            let byte = content[index]
            if byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
                index += 1
                continue
            }
            var end = index + 1
            switch (expecting, byte) {
            case (.valueOrEnd, UInt8(ascii: "]")), (.nameOrEnd, UInt8(ascii: "}")):
                open.removeLast()
                expecting = afterValue()
            case (.commaOrEnd, UInt8(ascii: "]")) where open.last == UInt8(ascii: "["),
                (.commaOrEnd, UInt8(ascii: "}")) where open.last == UInt8(ascii: "{"):
                open.removeLast()
                expecting = afterValue()
            case (.commaOrEnd, UInt8(ascii: ",")):
                expecting = open.last == UInt8(ascii: "{") ? .name : .value
            case (.colon, UInt8(ascii: ":")):
                expecting = .value
            case (.name, UInt8(ascii: "\"")), (.nameOrEnd, UInt8(ascii: "\"")):
                guard let stringEnd = jsonStringEnd(content, from: index) else { return nil }
                end = stringEnd
                expecting = .colon
            case (.value, _), (.valueOrEnd, _):
                switch byte {
                case UInt8(ascii: "{"):
                    open.append(byte)
                    expecting = .nameOrEnd
                case UInt8(ascii: "["):
                    open.append(byte)
                    expecting = .valueOrEnd
                case UInt8(ascii: "\""):
                    guard let stringEnd = jsonStringEnd(content, from: index) else { return nil }
                    end = stringEnd
                    expecting = afterValue()
                default:
                    guard let scalarEnd = jsonNumberEnd(content, from: index) ?? jsonLiteralEnd(content, from: index)
                    else { return nil }
                    end = scalarEnd
                    expecting = afterValue()
                }
            default:
                return nil
            }
            result.append(contentsOf: content[index..<end])
            index = end
        }
        return expecting == .nothing ? result : nil
    }

    /// The index after the string that starts at `start` (a `"`); `nil` when it does not end
    /// or holds a control character or a bad escape (RFC 8259 §7).
    private static func jsonStringEnd(_ content: [UInt8], from start: Int) -> Int? {
        var index = start + 1
        while index < content.count {
            let byte = content[index]
            switch byte {
            case UInt8(ascii: "\""): return index + 1
            case UInt8(ascii: "\\"):
                guard index + 1 < content.count else { return nil }
                switch content[index + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                    UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    index += 2
                case UInt8(ascii: "u"):
                    guard index + 5 < content.count,
                        content[(index + 2)...(index + 5)].allSatisfy({ ASCII.hexValue($0) != nil })
                    else { return nil }
                    index += 6
                default: return nil
                }
            case 0..<0x20: return nil
            default: index += 1
            }
        }
        return nil
    }

    /// The index after the number that starts at `start` (RFC 8259 §6); `nil` when none does.
    private static func jsonNumberEnd(_ content: [UInt8], from start: Int) -> Int? {
        var index = start
        func digits() -> Int {
            let first = index
            while index < content.count, ASCII.isDigit(content[index]) { index += 1 }
            return index - first
        }
        if index < content.count, content[index] == UInt8(ascii: "-") { index += 1 }
        guard index < content.count, ASCII.isDigit(content[index]) else { return nil }
        if content[index] == UInt8(ascii: "0") { index += 1 } else { _ = digits() }
        if index < content.count, content[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { return nil }
        }
        if index < content.count, ASCII.lower(content[index]) == UInt8(ascii: "e") {
            index += 1
            if index < content.count, content[index] == UInt8(ascii: "+") || content[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits() > 0 else { return nil }
        }
        return index
    }

    /// The index after `true`, `false` or `null` at `start` (RFC 8259 §3); `nil` when none is there.
    private static func jsonLiteralEnd(_ content: [UInt8], from start: Int) -> Int? {
        for literal in ["true", "false", "null"] where content[start...].starts(with: literal.utf8) {
            return start + literal.utf8.count
        }
        return nil
    }

    // MARK: Form fields

    /// `content` with every `%XX` in upper case, and decoded when it encodes an unreserved
    /// character (ALPHA, DIGIT, `-`, `.`, `_`, `~`), as RFC 3986 §6.2.2.1 and §6.2.2.2 make
    /// equivalent URIs; other bytes as sent. `nil` when a `%` is not followed by two hex digits:
    /// decoding next to it could make a new escape (`%4%41` would become `%4A`, another query).
    static func normalizedPercentEncoding(_ content: [UInt8]) -> [UInt8]? {
        var result: [UInt8] = []
        result.reserveCapacity(content.count)
        var index = 0
        while index < content.count {
            let byte = content[index]
            guard byte == UInt8(ascii: "%") else {
                result.append(byte)
                index += 1
                continue
            }
            guard index + 2 < content.count, let high = ASCII.hexValue(content[index + 1]),
                let low = ASCII.hexValue(content[index + 2])
            else { return nil }
            let decoded = high << 4 | low
            if ASCII.isUnreserved(decoded) {
                result.append(decoded)
            } else {
                result += [byte, ASCII.upperHex(high), ASCII.upperHex(low)]
            }
            index += 3
        }
        return result
    }
}
