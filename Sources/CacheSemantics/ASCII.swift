// Byte-level helpers shared by the parsers. Everything here works on UTF-8 bytes and
// treats anything outside ASCII as "not a token character", so no input can trap.

@usableFromInline
enum ASCII {
    @inlinable
    static func lower(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    @inlinable
    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    @inlinable
    static func isAlpha(_ byte: UInt8) -> Bool { (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A }

    /// Optional white space: SP or HTAB (RFC 9110 §5.6.3).
    @inlinable
    static func isOWS(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// `tchar` (RFC 9110 §5.6.2).
    @inlinable
    static func isTokenChar(_ byte: UInt8) -> Bool {
        if isAlpha(byte) || isDigit(byte) { return true }
        switch byte {
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
            UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
            UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// Whether `a` and `b` are equal ignoring ASCII case.
    @inlinable
    static func equalsIgnoringCase(_ a: some StringProtocol, _ b: some StringProtocol) -> Bool {
        var left = a.utf8.makeIterator()
        var right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return true
            case (let x?, let y?):
                if x != y && lower(x) != lower(y) { return false }
            default: return false
            }
        }
    }

    /// `s` with ASCII letters lowered; other bytes unchanged.
    static func lowercased(_ s: some StringProtocol) -> String {
        if !s.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) { return String(s) }
        return String(decoding: s.utf8.map(lower), as: UTF8.self)
    }

    /// `s` without leading and trailing OWS.
    static func trimmed(_ s: Substring) -> Substring {
        var start = s.utf8.startIndex
        var end = s.utf8.endIndex
        while start < end && isOWS(s.utf8[start]) { start = s.utf8.index(after: start) }
        while end > start && isOWS(s.utf8[s.utf8.index(before: end)]) { end = s.utf8.index(before: end) }
        return Substring(s.utf8[start..<end])
    }

    /// Whether `s` is a non-empty `token`.
    static func isToken(_ s: some StringProtocol) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy(isTokenChar)
    }

    /// Parses `1*DIGIT`; `nil` for anything else. Values above `cap` become `cap`, so an
    /// overflowing number never wraps (RFC 9111 §1.2.2).
    static func parseDigits(_ s: some StringProtocol, cap: Int) -> Int? {
        if s.isEmpty { return nil }
        var value = 0
        for byte in s.utf8 {
            guard isDigit(byte) else { return nil }
            if value < cap {
                // Checked before multiplying: with a cap near Int64.max / 2, `value * 10` overflows.
                let digit = Int(byte - 0x30)
                value = value > (cap - digit) / 10 ? cap : value * 10 + digit
            }
        }
        return value
    }

    /// Splits a comma-separated list (RFC 9110 §5.6.1) into trimmed, non-empty members.
    /// Commas inside quoted strings do not split; an unterminated quote runs to the end.
    static func splitList(_ s: Substring) -> [Substring] {
        var members: [Substring] = []
        let bytes = s.utf8
        var memberStart = bytes.startIndex
        var index = bytes.startIndex
        var inQuotes = false
        while index < bytes.endIndex {
            let byte = bytes[index]
            if inQuotes {
                if byte == UInt8(ascii: "\\") {
                    index = bytes.index(after: index)
                    if index == bytes.endIndex { break }
                } else if byte == UInt8(ascii: "\"") {
                    inQuotes = false
                }
            } else if byte == UInt8(ascii: "\"") {
                inQuotes = true
            } else if byte == UInt8(ascii: ",") {
                let member = trimmed(Substring(bytes[memberStart..<index]))
                if !member.isEmpty { members.append(member) }
                memberStart = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        let last = trimmed(Substring(bytes[memberStart..<bytes.endIndex]))
        if !last.isEmpty { members.append(last) }
        return members
    }

    /// Parses a `quoted-string` (RFC 9110 §5.6.4) that makes up all of `s`, removing the
    /// quotes and quoted-pair escapes. `nil` when `s` is not exactly one quoted string.
    static func unquote(_ s: Substring) -> String? {
        let bytes = Array(s.utf8)
        guard bytes.count >= 2, bytes.first == UInt8(ascii: "\""), bytes.last == UInt8(ascii: "\"") else {
            return nil
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count - 2)
        var i = 1
        while i < bytes.count - 1 {
            let byte = bytes[i]
            if byte == UInt8(ascii: "\\") {
                i += 1
                guard i < bytes.count - 1 else { return nil }
                out.append(bytes[i])
            } else if byte == UInt8(ascii: "\"") {
                return nil
            } else {
                out.append(byte)
            }
            i += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `s` as a `quoted-string`, escaping `"` and `\`.
    static func quote(_ s: String) -> String {
        var out = "\""
        for ch in s.unicodeScalars {
            if ch == "\"" || ch == "\\" { out.unicodeScalars.append("\\") }
            out.unicodeScalars.append(ch)
        }
        out += "\""
        return out
    }
}
