/// Base64 ([RFC 4648 §4](https://www.rfc-editor.org/rfc/rfc4648#section-4)), the alphabet of
/// Structured Fields byte sequences (RFC 9651 §3.3.5) and so of digest values (RFC 9530 §2).
package enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// `bytes` in base64, padded with `=`.
    package static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let remaining = bytes.count - index
            let first = bytes[index]
            let second = remaining > 1 ? bytes[index + 1] : 0
            let third = remaining > 2 ? bytes[index + 2] : 0
            output.append(alphabet[Int(first >> 2)])
            output.append(alphabet[Int((first & 0x03) << 4 | second >> 4)])
            output.append(remaining > 1 ? alphabet[Int((second & 0x0F) << 2 | third >> 6)] : UInt8(ascii: "="))
            output.append(remaining > 2 ? alphabet[Int(third & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes `text` encodes, or nil when it is not base64: a character outside the alphabet, a
    /// length that is not a multiple of four, padding anywhere but the end, or bits set in the
    /// padding (RFC 4648 §3.5 lets a decoder refuse those; a digest with them was not made by a
    /// conforming encoder).
    package static func decode(_ text: Substring) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard characters.count % 4 == 0 else { return nil }
        var output: [UInt8] = []
        output.reserveCapacity(characters.count / 4 * 3)
        var index = 0
        while index < characters.count {
            let isLast = index + 4 == characters.count
            let padding = isLast ? characters[index...].reversed().prefix(while: { $0 == UInt8(ascii: "=") }).count : 0
            guard padding <= 2 else { return nil }
            var group: UInt32 = 0
            for offset in 0..<4 {
                let character = characters[index + offset]
                let value: UInt32
                if offset >= 4 - padding {
                    value = 0
                } else if let sextet = sextet(character) {
                    value = sextet
                } else {
                    return nil
                }
                group = group << 6 | value
            }
            let count = 3 - padding
            let bytes = [UInt8(group >> 16 & 0xFF), UInt8(group >> 8 & 0xFF), UInt8(group & 0xFF)]
            // Bits the padding leaves unused must be zero.
            guard bytes[count...].allSatisfy({ $0 == 0 }) else { return nil }
            output.append(contentsOf: bytes[..<count])
            index += 4
        }
        return output
    }

    private static func sextet(_ character: UInt8) -> UInt32? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt32(character - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt32(character - UInt8(ascii: "a")) + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(character - UInt8(ascii: "0")) + 52
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }
}
