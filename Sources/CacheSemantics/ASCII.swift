// Byte-level helpers shared by the parsers. Everything here works on UTF-8 bytes and
// treats anything outside ASCII as "not a token character", so no input can trap.

@usableFromInline
package enum ASCII {
    @inlinable
    package static func lower(_ byte: UInt8) -> UInt8 {
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
    package static func isTokenChar(_ byte: UInt8) -> Bool {
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

    /// Runs `body` on the UTF-8 bytes of `s` where they are (a native or small string's),
    /// without the copy `String.withUTF8` needs, being mutating: a retain and a release of the
    /// string's storage, two atomic operations, each time a string of 16 bytes or more is
    /// read so (a revalidation read ~100). A string bridged from elsewhere is copied.
    @inlinable @inline(__always)
    package static func withUTF8<R>(_ s: String, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let result = try s.utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = s
        return try copy.withUTF8(body)
    }

    /// Runs `body` on the UTF-8 bytes of `s` where they are, as the one for a string does.
    @inlinable @inline(__always)
    package static func withUTF8<R>(_ s: Substring, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        if let result = try s.utf8.withContiguousStorageIfAvailable(body) { return result }
        var copy = s
        return try copy.withUTF8(body)
    }

    /// The text of `bytes` when they are valid UTF-8, else `nil`. ASCII, as nearly every field
    /// is, takes a byte loop and the standard library's ASCII constructor: the general
    /// `String(validating:as:)` is generic over the encoding, unspecialized in the standard
    /// library, and cost about 1,000 instructions a field read back from a store.
    package static func validatedText(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Where the first `byte` (ASCII, so a character's start) is in `s`, found in its bytes in
    /// place: the UTF-8 view's general `firstIndex(of:)` and `contains(_:)` cost some 25
    /// instructions a byte.
    package static func firstIndex(of byte: UInt8, in s: Substring) -> Substring.Index? {
        withUTF8(s) { $0.firstIndex(of: byte) }.map { s.utf8.index(s.startIndex, offsetBy: $0) }
    }

    /// ``firstIndex(of:in:)-(_,Substring)`` in a string.
    package static func firstIndex(of byte: UInt8, in s: String) -> String.Index? {
        firstIndex(of: byte, in: Substring(s))
    }

    @inlinable
    package static func equalsIgnoringCase(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
        guard x.count == y.count else { return false }
        for index in 0..<x.count {
            let a = x[index]
            let b = y[index]
            if a != b && lower(a) != lower(b) { return false }
        }
        return true
    }

    /// Whether `a` and `b` are equal, compared exactly; the lengths first: most field names a
    /// lookup passes differ in length, read from a string in a few instructions, where `==`
    /// between two different strings takes the standard library's general comparison (some 27
    /// instructions; a revalidation compared names about 150 times).
    @inlinable
    package static func equal(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a == b
    }

    /// Whether `names` holds `name`, compared exactly (``equal(_:_:)``).
    package static func contains(_ names: [String], _ name: String) -> Bool {
        names.contains { equal($0, name) }
    }

    /// Whether `a` and `b` are equal ignoring ASCII case.
    package static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && withUTF8(a) { x in withUTF8(b) { y in equalsIgnoringCase(x, y) } }
    }

    /// Whether `a` and `b` are equal ignoring ASCII case.
    @inlinable
    package static func equalsIgnoringCase(_ a: Substring, _ b: String) -> Bool {
        withUTF8(a) { x in withUTF8(b) { y in equalsIgnoringCase(x, y) } }
    }

    /// Whether `lowered` (in lower case already) is `name` with its ASCII letters lowered:
    /// a field lookup without making a lowered copy of the name asked for.
    @inlinable
    package static func isLowercased(_ lowered: String, of name: String) -> Bool {
        guard lowered.utf8.count == name.utf8.count else { return false }
        return withUTF8(lowered) { x in
            withUTF8(name) { y in
                for index in 0..<x.count where x[index] != lower(y[index]) { return false }
                return true
            }
        }
    }

    /// `s` with ASCII letters lowered; other bytes unchanged.
    @usableFromInline
    package static func lowercased(_ s: String) -> String {
        withUTF8(s) { lowercased($0) } ?? s
    }

    /// The text of `bytes` with ASCII letters lowered, other bytes unchanged; `nil` when none is
    /// upper case (lowering leaves the text as it is). Written in place: no intermediate array,
    /// and no allocation at all for short names.
    package static func lowercased(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        guard bytes.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) else { return nil }
        return String(unsafeUninitializedCapacity: bytes.count) { buffer in
            for index in 0..<bytes.count { buffer[index] = lower(bytes[index]) }
            return bytes.count
        }
    }

    /// `s` with ASCII letters lowered; other bytes unchanged.
    package static func lowercased(_ s: Substring) -> String { lowercased(String(s)) }

    /// The offsets of `bytes` without leading and trailing OWS.
    @inline(__always)
    package static func trimmedRange(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Range<Int> {
        var start = range.lowerBound
        var end = range.upperBound
        while start < end && isOWS(bytes[start]) { start += 1 }
        while end > start && isOWS(bytes[end - 1]) { end -= 1 }
        return start..<end
    }

    /// `s` without leading and trailing OWS.
    package static func trimmed(_ s: Substring) -> Substring {
        var start = s.utf8.startIndex
        var end = s.utf8.endIndex
        while start < end && isOWS(s.utf8[start]) { start = s.utf8.index(after: start) }
        while end > start && isOWS(s.utf8[s.utf8.index(before: end)]) { end = s.utf8.index(before: end) }
        return Substring(s.utf8[start..<end])
    }

    /// Whether `s` starts with the bytes of `prefix` (byte-wise: a combining mark after the
    /// prefix does not hide it, as it would for `Character` comparison).
    static func startsWith(_ s: Substring, _ prefix: String) -> Bool { s.utf8.starts(with: prefix.utf8) }

    /// Whether `s` is a non-empty `token`.
    static func isToken(_ s: Substring) -> Bool {
        withUTF8(s) { bytes in !bytes.isEmpty && bytes.allSatisfy(isTokenChar) }
    }

    /// Whether `s` is a non-empty `token`.
    static func isToken(_ s: String) -> Bool {
        withUTF8(s) { bytes in !bytes.isEmpty && bytes.allSatisfy(isTokenChar) }
    }

    /// Parses `1*DIGIT`; `nil` for anything else. Values above `cap` become `cap`, so an
    /// overflowing number never wraps (RFC 9111 §1.2.2).
    @inlinable
    static func parseDigits(_ bytes: UnsafeBufferPointer<UInt8>, cap: Int) -> Int? {
        if bytes.isEmpty { return nil }
        var value = 0
        for byte in bytes {
            guard isDigit(byte) else { return nil }
            if value < cap {
                // Checked before multiplying: with a cap near Int64.max / 2, `value * 10` overflows.
                let digit = Int(byte - 0x30)
                value = value > (cap - digit) / 10 ? cap : value * 10 + digit
            }
        }
        return value
    }

    /// Parses `1*DIGIT`; see ``parseDigits(_:cap:)-(UnsafeBufferPointer<UInt8>,_)``.
    package static func parseDigits(_ s: String, cap: Int) -> Int? { withUTF8(s) { parseDigits($0, cap: cap) } }

    /// Parses `1*DIGIT`; see ``parseDigits(_:cap:)-(UnsafeBufferPointer<UInt8>,_)``.
    static func parseDigits(_ s: Substring, cap: Int) -> Int? { withUTF8(s) { parseDigits($0, cap: cap) } }

    /// Calls `member` with the offsets of each member of a comma-separated list
    /// (RFC 9110 §5.6.1) in `bytes`: split at commas outside quoted strings, OWS trimmed,
    /// empty members skipped; an unterminated quote runs to the end. Stops, returning
    /// `false`, as soon as `member` does.
    @inline(__always)
    static func forEachListMember(_ bytes: UnsafeBufferPointer<UInt8>, _ member: (Range<Int>) -> Bool) -> Bool {
        var memberStart = 0
        var index = 0
        var inQuotes = false
        while index < bytes.count {
            let byte = bytes[index]
            if inQuotes {
                if byte == UInt8(ascii: "\\") {
                    index += 1
                    if index == bytes.count { break }
                } else if byte == UInt8(ascii: "\"") {
                    inQuotes = false
                }
            } else if byte == UInt8(ascii: "\"") {
                inQuotes = true
            } else if byte == UInt8(ascii: ",") {
                let range = trimmedRange(bytes, memberStart..<index)
                if !range.isEmpty && !member(range) { return false }
                memberStart = index + 1
            }
            index += 1
        }
        let range = trimmedRange(bytes, memberStart..<bytes.count)
        return range.isEmpty || member(range)
    }

    /// Splits a comma-separated list (RFC 9110 §5.6.1) into trimmed, non-empty members, as
    /// ``forEachListMember(_:_:)`` does.
    static func splitList(_ s: Substring) -> [Substring] {
        var members: [Substring] = []
        splitList(s, into: &members)
        return members
    }

    /// The same, appending the members to `members` (a field's lines into one list, no array
    /// made per line).
    static func splitList(_ s: Substring, into members: inout [Substring]) {
        let utf8 = s.utf8
        _ = withUTF8(s) { bytes in
            forEachListMember(bytes) { range in
                let start = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
                members.append(Substring(utf8[start..<utf8.index(start, offsetBy: range.count)]))
                return true
            }
        }
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
