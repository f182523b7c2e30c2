/// JSON strings as RFC 8259 §7 writes them, for the package's hand-written JSON (the
/// command-line tool's `--json`, the proxy's JSON access log).
package enum JSONString {
    /// Appends `text` quoted: `"` and `\` escaped, `\n`, `\r` and `\t` by name, other control
    /// characters and DEL as `\u00XX`. Swift strings hold valid Unicode only: bytes that were
    /// not UTF-8 arrive here as U+FFFD. The result is also a TOML basic string.
    package static func append(_ text: String, to output: inout String) {
        output += "\""
        // Most values need no escape: copied whole.
        if text.utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) {
            output += text
        } else {
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": output += "\\\""
                case "\\": output += "\\\\"
                case "\n": output += "\\n"
                case "\r": output += "\\r"
                case "\t": output += "\\t"
                case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                    output += "\\u00" + hexDigits[Int(scalar.value >> 4)] + hexDigits[Int(scalar.value & 0xF)]
                default: output.unicodeScalars.append(scalar)
                }
            }
        }
        output += "\""
    }

    /// `text` quoted (see ``append(_:to:)``); `null` for `nil`.
    package static func quoted(_ text: String?) -> String {
        guard let text else { return "null" }
        var output = ""
        append(text, to: &output)
        return output
    }

    private static let hexDigits = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f"]
}
