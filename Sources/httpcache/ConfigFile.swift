import CacheSystem

/// A configuration file for `httpcache serve --config FILE`: a subset of TOML (v1.0.0).
///
/// One `key = value` per line; `#` starts a comment; values are strings (`"…"` with TOML's
/// escapes, or `'…'` taken as written), integers (`4`, `1_000`), booleans (`true`, `false`)
/// and arrays of strings (`["a.pem", "b.pem"]`, which may span lines). No tables, no dotted
/// keys, no floats, no dates: `serve`'s options need none of them. Chosen over JSON because
/// operators comment their configuration files, and JSON has no comments.
///
/// The parser takes any bytes: what it cannot read is an ``Problem`` naming the line and
/// what to write instead, never a crash.
struct ConfigFile: Sendable, Equatable {
    /// A value as the file writes it.
    enum Value: Sendable, Equatable {
        case string(String)
        case integer(Int64)
        case boolean(Bool)
        case strings([String])

        /// The value as the file would write it.
        var written: String {
            switch self {
            case .string(let text): return Self.quoted(text)
            case .integer(let number): return String(number)
            case .boolean(let flag): return String(flag)
            case .strings(let texts): return "[" + texts.map(Self.quoted).joined(separator: ", ") + "]"
            }
        }

        /// What kind of value it is, for messages.
        var kind: String {
            switch self {
            case .string: return "a string"
            case .integer: return "an integer"
            case .boolean: return "a boolean"
            case .strings: return "an array"
            }
        }

        /// `text` as a TOML basic string.
        static func quoted(_ text: String) -> String {
            var result = ""
            JSONString.append(text, to: &result)
            return result
        }
    }

    /// One `key = value` line.
    struct Setting: Sendable, Equatable {
        var key: String
        var value: Value
        /// The line the key is on, from 1.
        var line: Int
    }

    /// Why a file cannot be read: the line and what to write instead.
    struct Problem: Error, Sendable, Equatable {
        var line: Int
        var message: String
    }

    /// The settings in the order the file gives them, each key once.
    var settings: [Setting]

    /// Parses `bytes`.
    /// - Throws: ``Problem`` for bytes that are not UTF-8, a line that is not `key = value`, a
    ///   value of a kind this subset lacks, or a key given twice.
    init(parsing bytes: [UInt8]) throws(Problem) {
        var reader = Reader(bytes: bytes)
        settings = []
        var lines: [String: Int] = [:]
        while let setting = try reader.nextSetting() {
            if let first = lines[setting.key] {
                throw Problem(
                    line: setting.line,
                    message:
                        "\(setting.key) is set twice (first on line \(first)); keep one line (an array for several values)"
                )
            }
            lines[setting.key] = setting.line
            settings.append(setting)
        }
    }
}

extension ConfigFile {
    /// A TOML integer: decimal, an optional sign, `_` between digits.
    static func integer(_ word: String) -> Int64? {
        let digits = word.first == "+" || word.first == "-" ? word.dropFirst() : Substring(word)
        guard let first = digits.first, first.isASCII, first.isNumber, digits.last?.isNumber == true,
            !digits.contains("__"), digits.allSatisfy({ $0 == "_" || ($0.isASCII && $0.isNumber) }),
            first != "0" || digits.count == 1
        else { return nil }
        return Int64(word.filter { $0 != "_" && $0 != "+" })
    }
}

/// Reads settings from bytes, one after another, counting lines.
private struct Reader {
    let bytes: [UInt8]
    var index = 0
    var line = 1

    init(bytes: [UInt8]) { self.bytes = bytes }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func problem(_ message: String) -> ConfigFile.Problem { ConfigFile.Problem(line: line, message: message) }

    private mutating func skipSpaces() {
        while let byte = current, byte == 0x20 || byte == 0x09 { index += 1 }
    }

    /// Skips a comment up to the end of the line (not the newline itself).
    private mutating func skipComment() throws(ConfigFile.Problem) {
        guard current == UInt8(ascii: "#") else { return }
        let start = index
        while let byte = current, byte != 0x0A, byte != 0x0D { index += 1 }
        // A comment may hold any text, but it must be text: TOML forbids control characters.
        if let control = bytes[start..<index].first(where: Self.isControl) {
            throw problem("control character \(Self.describe(control)) in a comment: remove it")
        }
        _ = try text(bytes[start..<index])
    }

    /// Consumes a line end (LF or CRLF), or the end of the file.
    private mutating func endOfLine() throws(ConfigFile.Problem) {
        skipSpaces()
        try skipComment()
        if current == 0x0D, index + 1 < bytes.count, bytes[index + 1] == 0x0A { index += 1 }
        guard let byte = current else { return }
        guard byte == 0x0A else {
            throw problem("unexpected \(Self.describe(byte)) after the value; put a comment after #")
        }
        index += 1
        line += 1
    }

    /// Skips blank lines, comment lines and white space.
    private mutating func skipBlank() throws(ConfigFile.Problem) {
        while true {
            skipSpaces()
            try skipComment()
            if current == 0x0D, index + 1 < bytes.count, bytes[index + 1] == 0x0A { index += 1 }
            guard current == 0x0A else { return }
            index += 1
            line += 1
        }
    }

    mutating func nextSetting() throws(ConfigFile.Problem) -> ConfigFile.Setting? {
        if index == 0, bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        try skipBlank()
        guard let first = current else { return nil }
        if first == UInt8(ascii: "[") {
            throw problem("tables ([name]) are not supported: write every key = value at the top level")
        }
        let keyLine = line
        let start = index
        while let byte = current, Self.isKeyByte(byte) { index += 1 }
        guard index > start else {
            throw problem("expected a key such as origin = \"http://127.0.0.1:8081\", found \(Self.describe(first))")
        }
        let key = String(decoding: bytes[start..<index], as: UTF8.self)
        skipSpaces()
        if current == UInt8(ascii: ".") {
            throw problem("dotted keys are not supported: write \(key) = value with the option's name")
        }
        guard current == UInt8(ascii: "=") else {
            throw problem("expected = after \(key): write \(key) = value")
        }
        index += 1
        skipSpaces()
        let value = try self.value(for: key)
        try endOfLine()
        return ConfigFile.Setting(key: key, value: value, line: keyLine)
    }

    private mutating func value(for key: String) throws(ConfigFile.Problem) -> ConfigFile.Value {
        guard let byte = current, byte != 0x0A, byte != 0x0D, byte != UInt8(ascii: "#") else {
            throw problem("\(key) has no value: write \(key) = \"...\", a number, true or false")
        }
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "'"):
            return .string(try string())
        case UInt8(ascii: "["):
            return .strings(try strings(for: key))
        case UInt8(ascii: "{"):
            throw problem("inline tables are not supported: write \(key) = \"...\"")
        default:
            // A bare word runs to white space or a comment: `listen = 127.0.0.1:80` is one word.
            let start = index
            while let next = current, next > 0x20, next != 0x7F, next != UInt8(ascii: "#") { index += 1 }
            let word = String(decoding: bytes[start..<index], as: UTF8.self)
            if word == "true" { return .boolean(true) }
            if word == "false" { return .boolean(false) }
            if let number = ConfigFile.integer(word) { return .integer(number) }
            let shown = word.isEmpty ? Self.describe(byte) : word
            throw problem(
                "\(key) = \(shown) is not a value: quote text (\(key) = \"\(word)\"); numbers are integers, switches true or false"
            )
        }
    }

    private mutating func strings(for key: String) throws(ConfigFile.Problem) -> [String] {
        index += 1  // [
        var values: [String] = []
        while true {
            try skipBlank()
            guard let byte = current else { throw problem("the array of \(key) is not closed: end it with ]") }
            if byte == UInt8(ascii: "]") {
                index += 1
                return values
            }
            guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") else {
                throw problem(
                    "the array of \(key) holds strings only: write \(key) = [\"first\", \"second\"]")
            }
            values.append(try string())
            try skipBlank()
            if current == nil {
                throw problem("the array of \(key) is not closed: end it with ]")
            } else if current == UInt8(ascii: ",") {
                index += 1
            } else if current != UInt8(ascii: "]") {
                throw problem("expected , or ] in the array of \(key): write \(key) = [\"first\", \"second\"]")
            }
        }
    }

    /// A basic (`"…"`) or literal (`'…'`) string on one line.
    private mutating func string() throws(ConfigFile.Problem) -> String {
        let quote = bytes[index]
        index += 1
        if index + 1 < bytes.count, bytes[index] == quote, bytes[index + 1] == quote {
            throw problem("multi-line strings are not supported: write the value on one line")
        }
        var result: [UInt8] = []
        while true {
            guard let byte = current, byte != 0x0A else {
                throw problem("a string is not closed: end it with \(quote == 0x22 ? "\"" : "'") on the same line")
            }
            index += 1
            if byte == quote { break }
            if Self.isControl(byte) {
                throw problem("control character \(Self.describe(byte)) in a string: write it as an escape such as \\t")
            }
            if byte == UInt8(ascii: "\\"), quote == UInt8(ascii: "\"") {
                try escape(into: &result)
            } else {
                result.append(byte)
            }
        }
        return try text(result[...])
    }

    /// After a backslash in a basic string: `\" \\ \b \f \n \r \t \uXXXX \UXXXXXXXX`.
    private mutating func escape(into result: inout [UInt8]) throws(ConfigFile.Problem) {
        guard let byte = current else { throw problem("a string ends with \\: write \\\\ for a backslash") }
        index += 1
        let simple: [UInt8: UInt8] = [
            UInt8(ascii: "\""): 0x22, UInt8(ascii: "\\"): 0x5C, UInt8(ascii: "b"): 0x08, UInt8(ascii: "f"): 0x0C,
            UInt8(ascii: "n"): 0x0A, UInt8(ascii: "r"): 0x0D, UInt8(ascii: "t"): 0x09,
        ]
        if let replacement = simple[byte] {
            result.append(replacement)
            return
        }
        let length = byte == UInt8(ascii: "u") ? 4 : byte == UInt8(ascii: "U") ? 8 : 0
        guard length > 0 else {
            throw problem("unknown escape \\\(Self.describe(byte)) in a string: write \\\\ for a backslash")
        }
        guard index + length <= bytes.count,
            let code = UInt32(String(decoding: bytes[index..<index + length], as: UTF8.self), radix: 16),
            bytes[index..<index + length].allSatisfy({ Self.isHexDigit($0) }),
            let scalar = Unicode.Scalar(code)
        else {
            throw problem("\\\(Character(Unicode.Scalar(byte))) needs \(length) hex digits of a Unicode scalar value")
        }
        index += length
        result.append(contentsOf: Array(String(Character(scalar)).utf8))
    }

    /// `slice` as text, when it is UTF-8.
    private func text(_ slice: ArraySlice<UInt8>) throws(ConfigFile.Problem) -> String {
        guard let text = String(validating: slice, as: UTF8.self) else {
            throw problem("the line is not UTF-8 text: save the file as UTF-8")
        }
        return text
    }

    /// A control character TOML does not allow as written in strings and comments (tab is allowed).
    private static func isControl(_ byte: UInt8) -> Bool { (byte < 0x20 && byte != 0x09) || byte == 0x7F }

    private static func isKeyByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }

    /// A byte for a message: the character when printable ASCII, else its code.
    private static func describe(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
    }
}
