/// A bare item of a Structured Field (RFC 9651 §3.3).
public enum StructuredItem: Hashable, Sendable {
    case integer(Int64)
    case decimal(Double)
    case string(String)
    case token(String)
    /// The base64 text between the colons, not decoded.
    case byteSequence(String)
    case boolean(Bool)
    case date(Int64)
    case displayString(String)
}

/// A member of a Structured Field List or Dictionary: an item or an inner list, with
/// parameters (RFC 9651 §3.1).
public enum StructuredMember: Hashable, Sendable {
    case item(StructuredItem, parameters: [(String, StructuredItem)])
    case innerList([(StructuredItem, [(String, StructuredItem)])], parameters: [(String, StructuredItem)])

    public static func == (lhs: StructuredMember, rhs: StructuredMember) -> Bool {
        lhs.serialized == rhs.serialized
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(serialized) }

    var serialized: String {
        switch self {
        case .item(let item, let parameters):
            return StructuredFields.serialize(item) + StructuredFields.serialize(parameters)
        case .innerList(let items, let parameters):
            let inner = items.map { StructuredFields.serialize($0.0) + StructuredFields.serialize($0.1) }
            return "(" + inner.joined(separator: " ") + ")" + StructuredFields.serialize(parameters)
        }
    }
}

/// Parsing and serialization of Structured Field Dictionaries and Lists (RFC 9651 §4), as
/// targeted cache-control fields (RFC 9213) and `Cache-Status` (RFC 9211) need them.
public enum StructuredFields {
    /// Parses a Dictionary (RFC 9651 §4.2.2). `nil` on any syntax error: the RFC's parsers
    /// fail the whole field. A repeated key keeps its last value, in its first position.
    public static func parseDictionary(_ text: some StringProtocol) -> [(key: String, value: StructuredMember)]? {
        var parser = Parser(bytes: Array(text.utf8))
        parser.skip(0x20)
        var result: [(key: String, value: StructuredMember)] = []
        if parser.atEnd { return result }
        while true {
            guard let key = parser.key() else { return nil }
            let member: StructuredMember
            if parser.take(UInt8(ascii: "=")) {
                guard let parsed = parser.itemOrInnerList() else { return nil }
                member = parsed
            } else {
                guard let parameters = parser.parameters() else { return nil }
                member = .item(.boolean(true), parameters: parameters)
            }
            if let existing = result.firstIndex(where: { $0.key == key }) {
                result[existing].value = member
            } else {
                result.append((key, member))
            }
            parser.skipOWS()
            if parser.atEnd { return result }
            guard parser.take(UInt8(ascii: ",")) else { return nil }
            parser.skipOWS()
            if parser.atEnd { return nil }
        }
    }

    /// Parses a List (RFC 9651 §4.2.1); `nil` on any syntax error.
    public static func parseList(_ text: some StringProtocol) -> [StructuredMember]? {
        var parser = Parser(bytes: Array(text.utf8))
        parser.skip(0x20)
        var result: [StructuredMember] = []
        if parser.atEnd { return result }
        while true {
            guard let member = parser.itemOrInnerList() else { return nil }
            result.append(member)
            parser.skipOWS()
            if parser.atEnd { return result }
            guard parser.take(UInt8(ascii: ",")) else { return nil }
            parser.skipOWS()
            if parser.atEnd { return nil }
        }
    }

    /// Serializes a bare item (RFC 9651 §4.1.3).
    public static func serialize(_ item: StructuredItem) -> String {
        switch item {
        case .integer(let value): return String(value)
        case .decimal(let value):
            let rounded = (value * 1000).rounded(.toNearestOrEven) / 1000
            var text = String(rounded)
            if !text.contains(".") { text += ".0" }
            return text
        case .string(let value):
            var out = "\""
            for scalar in value.unicodeScalars where scalar.value >= 0x20 && scalar.value < 0x7F {
                if scalar == "\"" || scalar == "\\" { out.unicodeScalars.append("\\") }
                out.unicodeScalars.append(scalar)
            }
            return out + "\""
        case .token(let value): return value
        case .byteSequence(let value): return ":\(value):"
        case .boolean(let value): return value ? "?1" : "?0"
        case .date(let value): return "@\(value)"
        case .displayString(let value):
            var out = "%\""
            for byte in value.utf8 {
                if byte == UInt8(ascii: "%") || byte == UInt8(ascii: "\"") || byte < 0x20 || byte >= 0x7F {
                    let hex = Array("0123456789abcdef".utf8)
                    out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 0xF)]], as: UTF8.self)
                } else {
                    out.unicodeScalars.append(Unicode.Scalar(byte))
                }
            }
            return out + "\""
        }
    }

    /// Serializes parameters (RFC 9651 §4.1.1.2); a `true` boolean is written as the key alone.
    public static func serialize(_ parameters: [(String, StructuredItem)]) -> String {
        // A loop rather than `map` and `joined()`, as in ``member(_:_:)``: the unspecialized
        // `joined()` has the Swift runtime look up an associated type's conformance, a scan of
        // every conformance in the binary (0.2M instructions, on every hit of the CLI).
        var text = ""
        for (key, value) in parameters {
            text += ";"
            appendParameter(key, value, to: &text)
        }
        return text
    }

    /// `key`, or `key=value` unless `value` is `true` (RFC 9651 §4.1.1.2).
    private static func appendParameter(_ key: String, _ value: StructuredItem, to text: inout String) {
        text += key
        if value != .boolean(true) { text += "=" + serialize(value) }
    }

    /// A List member naming an intermediary, as `Cache-Status` (RFC 9211 §2) and
    /// `Proxy-Status` (RFC 9209 §2) have them: `name` as a Token when it is one, else as a
    /// String, then `parameters`, separated by "; " (the spacing both RFCs' examples use; RFC
    /// 9651 §4.2.3.2 allows it).
    public static func member(_ name: String, _ parameters: [(String, StructuredItem)]) -> String {
        var text = isToken(name) ? name : serialize(.string(name))
        text.reserveCapacity(text.utf8.count + 16 * parameters.count)  // one allocation, not one a doubling
        for (key, value) in parameters {
            text += "; "
            appendParameter(key, value, to: &text)
        }
        return text
    }

    /// `existing` (a List, possibly empty or absent) with `member` appended as its last member.
    public static func appending(_ member: String, to existing: String?) -> String {
        guard let existing, !ASCII.trimmed(Substring(existing)).isEmpty else { return member }
        return existing + ", " + member
    }

    /// Whether `text` can be serialized as a Token (RFC 9651 §3.3.4).
    public static func isToken(_ text: String) -> Bool {
        guard let first = text.utf8.first, ASCII.isAlpha(first) || first == UInt8(ascii: "*") else { return false }
        return ASCII.withUTF8(text) { bytes in
            bytes.allSatisfy { ASCII.isTokenChar($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: "/") }
        }
    }

    private struct Parser {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index >= bytes.count }
        var peek: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func take(_ byte: UInt8) -> Bool {
            guard peek == byte else { return false }
            index += 1
            return true
        }

        mutating func skip(_ byte: UInt8) { while peek == byte { index += 1 } }
        mutating func skipOWS() { while let byte = peek, ASCII.isOWS(byte) { index += 1 } }

        mutating func key() -> String? {
            guard let first = peek, (first >= 0x61 && first <= 0x7A) || first == UInt8(ascii: "*") else { return nil }
            let start = index
            while let byte = peek,
                (byte >= 0x61 && byte <= 0x7A) || ASCII.isDigit(byte) || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "*")
            {
                index += 1
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }

        mutating func parameters() -> [(String, StructuredItem)]? {
            var result: [(String, StructuredItem)] = []
            while take(UInt8(ascii: ";")) {
                skip(0x20)
                guard let key = key() else { return nil }
                var value = StructuredItem.boolean(true)
                if take(UInt8(ascii: "=")) {
                    guard let item = bareItem() else { return nil }
                    value = item
                }
                if let existing = result.firstIndex(where: { $0.0 == key }) {
                    result[existing].1 = value
                } else {
                    result.append((key, value))
                }
            }
            return result
        }

        mutating func itemOrInnerList() -> StructuredMember? {
            if take(UInt8(ascii: "(")) {
                var items: [(StructuredItem, [(String, StructuredItem)])] = []
                while true {
                    skip(0x20)
                    if take(UInt8(ascii: ")")) {
                        guard let parameters = parameters() else { return nil }
                        return .innerList(items, parameters: parameters)
                    }
                    guard let item = bareItem(), let parameters = parameters() else { return nil }
                    items.append((item, parameters))
                    guard peek == 0x20 || peek == UInt8(ascii: ")") else { return nil }
                }
            }
            guard let item = bareItem(), let parameters = parameters() else { return nil }
            return .item(item, parameters: parameters)
        }

        mutating func bareItem() -> StructuredItem? {
            guard let first = peek else { return nil }
            switch first {
            case UInt8(ascii: "-"), 0x30...0x39: return number()
            case UInt8(ascii: "\""): return string().map(StructuredItem.string)
            case UInt8(ascii: ":"): return byteSequence()
            case UInt8(ascii: "?"):
                index += 1
                if take(UInt8(ascii: "1")) { return .boolean(true) }
                if take(UInt8(ascii: "0")) { return .boolean(false) }
                return nil
            case UInt8(ascii: "@"):
                index += 1
                guard case .integer(let seconds)? = number() else { return nil }
                return .date(seconds)
            case UInt8(ascii: "%"):
                index += 1
                return displayString()
            default:
                guard ASCII.isAlpha(first) || first == UInt8(ascii: "*") else { return nil }
                let start = index
                while let byte = peek, ASCII.isTokenChar(byte) || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "/")
                {
                    index += 1
                }
                return .token(String(decoding: bytes[start..<index], as: UTF8.self))
            }
        }

        mutating func number() -> StructuredItem? {
            let negative = take(UInt8(ascii: "-"))
            var integerDigits: [UInt8] = []
            var fractionDigits: [UInt8] = []
            var isDecimal = false
            while let byte = peek {
                if ASCII.isDigit(byte) {
                    if isDecimal { fractionDigits.append(byte) } else { integerDigits.append(byte) }
                } else if byte == UInt8(ascii: "."), !isDecimal {
                    guard integerDigits.count <= 12 else { return nil }
                    isDecimal = true
                } else {
                    break
                }
                index += 1
                if !isDecimal && integerDigits.count > 15 { return nil }
                if fractionDigits.count > 3 { return nil }
            }
            guard !integerDigits.isEmpty else { return nil }
            let integerPart = integerDigits.reduce(Int64(0)) { $0 * 10 + Int64($1 - 0x30) }
            if !isDecimal { return .integer(negative ? -integerPart : integerPart) }
            guard !fractionDigits.isEmpty else { return nil }
            // At most 15 significant digits, so the scaled integer and the division are exact
            // up to one correct rounding: the nearest Double to the decimal.
            let scaled = fractionDigits.reduce(integerPart) { $0 * 10 + Int64($1 - 0x30) }
            let divisor = [10.0, 100.0, 1000.0][fractionDigits.count - 1]
            let value = Double(scaled) / divisor
            return .decimal(negative ? -value : value)
        }

        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            var out: [UInt8] = []
            while let byte = peek {
                index += 1
                if byte == UInt8(ascii: "\\") {
                    guard let next = peek, next == UInt8(ascii: "\"") || next == UInt8(ascii: "\\") else { return nil }
                    out.append(next)
                    index += 1
                } else if byte == UInt8(ascii: "\"") {
                    return String(decoding: out, as: UTF8.self)
                } else if byte < 0x20 || byte >= 0x7F {
                    return nil
                } else {
                    out.append(byte)
                }
            }
            return nil
        }

        mutating func byteSequence() -> StructuredItem? {
            guard take(UInt8(ascii: ":")) else { return nil }
            let start = index
            while let byte = peek, byte != UInt8(ascii: ":") {
                guard
                    ASCII.isAlpha(byte) || ASCII.isDigit(byte) || byte == UInt8(ascii: "+")
                        || byte == UInt8(ascii: "/") || byte == UInt8(ascii: "=")
                else { return nil }
                index += 1
            }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            return take(UInt8(ascii: ":")) ? .byteSequence(text) : nil
        }

        mutating func displayString() -> StructuredItem? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            var out: [UInt8] = []
            while let byte = peek {
                index += 1
                if byte == UInt8(ascii: "%") {
                    guard index + 1 < bytes.count, let high = hex(bytes[index]), let low = hex(bytes[index + 1]) else {
                        return nil
                    }
                    out.append(high << 4 | low)
                    index += 2
                } else if byte == UInt8(ascii: "\"") {
                    guard let text = String(validating: out, as: UTF8.self) else { return nil }
                    return .displayString(text)
                } else if byte < 0x20 || byte >= 0x7F {
                    return nil
                } else {
                    out.append(byte)
                }
            }
            return nil
        }

        /// Lower-case hex digits only (RFC 9651 §4.2.10).
        func hex(_ byte: UInt8) -> UInt8? {
            if ASCII.isDigit(byte) { return byte - 0x30 }
            if byte >= 0x61 && byte <= 0x66 { return byte - 0x61 + 10 }
            return nil
        }
    }
}
