import Foundation

// The URLs a stylesheet refers to, found by a tokenizer that follows CSS Syntax Module Level 3
// (https://www.w3.org/TR/css-syntax-3/), never by regular expressions over the text, and the
// decoding of a stylesheet's bytes (§3.2). Foundation is used only for the legacy single-byte
// code pages.

/// A URL a stylesheet refers to, as written (escapes resolved), not yet resolved against a base.
public struct CSSReference: Hashable, Sendable {
    /// What the URL is for.
    public enum Kind: Hashable, Sendable {
        /// `@import url(...)` or `@import "..."` — another stylesheet, fetched and parsed in turn.
        case `import`
        /// `url(...)` or `url("...")`/`src: url(...)`, `image-set("a.png" 1x)`, etc. anywhere else: an image, font, cursor…
        case url
    }

    /// What the URL is for.
    public var kind: Kind
    /// The URL as written, with CSS escapes resolved; never empty.
    public var url: String

    /// Creates a reference.
    public init(kind: Kind, url: String) {
        self.kind = kind
        self.url = url
    }
}

/// Finds the URLs in CSS text and decodes stylesheet bytes.
///
/// The text is tokenized as [CSS Syntax Level 3 §4](https://www.w3.org/TR/css-syntax-3/#tokenization) says,
/// then the tokens are read with just enough of the block structure of
/// [§5](https://www.w3.org/TR/css-syntax-3/#parsing) to know where an `@import` prelude ends:
/// - a `<url-token>`, or the first string inside `url(` or `src(` (the quoted form,
///   [CSS Values 4 §4.5](https://www.w3.org/TR/css-values-4/#urls)), is a reference;
/// - a string directly inside `image-set(` or `-webkit-image-set(`
///   ([CSS Images 4 §2.2](https://www.w3.org/TR/css-images-4/#image-set-notation)) is a reference;
/// - any other string (`content: "x.png"`) is not, nor is anything in a comment, a `<bad-url-token>`,
///   a `<bad-string-token>` or an empty URL;
/// - `@import` at the top level of a stylesheet makes its URL an `.import` (tolerantly: anywhere at the
///   top level, not only before the first style rule); the rest of its prelude (media queries,
///   `supports(...)`) is not a reference. An `@import` inside a block, or in a declaration list, is
///   invalid and fetches nothing, so it yields nothing.
/// - the preludes of `@namespace` (a namespace name, never fetched) and `@document`/`@-moz-document`
///   (URLs to match against, never fetched) yield nothing.
public enum CSSReferences {
    /// Every reference in a stylesheet, in order of appearance.
    public static func inStylesheet(_ text: String) -> [CSSReference] {
        references(in: text, topLevelImports: true)
    }

    /// Every reference in a declaration list: an HTML `style` attribute (no @import there).
    public static func inDeclarations(_ text: String) -> [CSSReference] {
        references(in: text, topLevelImports: false)
    }

    /// Decodes a stylesheet's bytes as CSS Syntax §3.2 says: a BOM wins, then the `charset` of Content-Type, then an `@charset "…";` rule at the very start, then the referring document's encoding, then UTF-8. Unknown labels fall through to the next step.
    ///
    /// See [CSS Syntax Level 3 §3.2](https://www.w3.org/TR/css-syntax-3/#input-byte-stream) and the
    /// [Encoding Standard](https://encoding.spec.whatwg.org/#decode). Labels are matched as the Encoding
    /// Standard's "get an encoding" does (ASCII case-insensitively, surrounding whitespace ignored; a
    /// quoted Content-Type parameter value is unquoted). Supported: UTF-8, UTF-16LE/BE, windows-1252
    /// (also the labels `iso-8859-1`, `latin1`, `us-ascii`…, as the Encoding Standard says),
    /// ISO-8859-2, windows-1250 and windows-1251. Malformed input decodes with U+FFFD; this never fails.
    public static func decodeStylesheet(_ bytes: [UInt8], contentTypeCharset: String?, referrerCharset: String?)
        -> String
    {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return TextEncoding.utf8.decode(bytes.dropFirst(3)) }
        if bytes.starts(with: [0xFE, 0xFF]) { return TextEncoding.utf16BE.decode(bytes.dropFirst(2)) }
        if bytes.starts(with: [0xFF, 0xFE]) { return TextEncoding.utf16LE.decode(bytes.dropFirst(2)) }
        let encoding =
            contentTypeCharset.flatMap(TextEncoding.init(label:)) ?? charsetRuleEncoding(bytes)
            ?? referrerCharset.flatMap(TextEncoding.init(label:)) ?? .utf8
        return encoding.decode(bytes[...])
    }
}

// MARK: - Finding references in tokens

extension CSSReferences {
    /// What an open function or block means for the strings directly inside it.
    private enum Role {
        case plain
        /// `url(` or `src(`: its first token, if a string, is a URL.
        case url
        /// `url(` or `src(` as the URL of a top-level `@import`.
        case importURL
        /// `image-set(`: every string directly inside is a URL.
        case imageSet
    }

    /// An open simple block or function (§5.4): what closes it and what it means.
    private struct Frame {
        var closer: Token
        var role: Role
        var atStart = true
    }

    /// The prelude of an at-rule whose URLs are handled specially, open at a nesting depth.
    private struct Prelude {
        var depth: Int
        var awaitingImportURL: Bool
    }

    private static func references(in text: String, topLevelImports: Bool) -> [CSSReference] {
        var tokenizer = Tokenizer(text)
        var found: [CSSReference] = []
        var frames: [Frame] = []
        var prelude: Prelude?
        func add(_ kind: CSSReference.Kind, _ url: String) {
            if !url.isEmpty { found.append(CSSReference(kind: kind, url: url)) }
        }
        while let token = tokenizer.next() {
            if token == .whitespace { continue }
            let isFirstInFrame = frames.last?.atStart ?? false
            if !frames.isEmpty { frames[frames.count - 1].atStart = false }
            let atPreludeLevel = prelude?.depth == frames.count
            let awaitingImport = atPreludeLevel && prelude?.awaitingImportURL == true
            if atPreludeLevel { prelude?.awaitingImportURL = false }
            switch token {
            case .atKeyword(let name):
                // At-rules start only in lists of rules or declarations: the top level or a `{}` block.
                guard prelude == nil, frames.last.map({ $0.closer == .closeCurly }) ?? true else { break }
                switch asciiLowercased(name) {
                case "import":
                    prelude = Prelude(depth: frames.count, awaitingImportURL: topLevelImports && frames.isEmpty)
                case "namespace", "document", "-moz-document":
                    prelude = Prelude(depth: frames.count, awaitingImportURL: false)
                default: break
                }
            case .url(let url):
                if awaitingImport {
                    add(.import, url)
                } else if prelude == nil {
                    add(.url, url)
                }
            case .string(let string):
                if awaitingImport {
                    add(.import, string)
                } else if let frame = frames.last {
                    switch frame.role {
                    case .importURL where isFirstInFrame: add(.import, string)
                    case .url where isFirstInFrame && prelude == nil: add(.url, string)
                    case .imageSet where prelude == nil: add(.url, string)
                    default: break
                    }
                }
            case .function(let name):
                let role: Role
                switch asciiLowercased(name) {
                case "url", "src": role = awaitingImport ? .importURL : .url
                case "image-set", "-webkit-image-set": role = .imageSet
                default: role = .plain
                }
                frames.append(Frame(closer: .closeParen, role: role))
            case .openParen: frames.append(Frame(closer: .closeParen, role: .plain))
            case .openSquare: frames.append(Frame(closer: .closeSquare, role: .plain))
            case .openCurly:
                if atPreludeLevel { prelude = nil }
                frames.append(Frame(closer: .closeCurly, role: .plain))
            case .closeParen, .closeSquare, .closeCurly:
                // A `}` ends an at-rule nested in a block, and the block; elsewhere a closer that does
                // not match the innermost open block is just a token inside it.
                if atPreludeLevel && token == .closeCurly && !frames.isEmpty { prelude = nil }
                if frames.last?.closer == token { frames.removeLast() }
            case .semicolon:
                if atPreludeLevel { prelude = nil }
            default: break
            }
        }
        return found
    }
}

// MARK: - Tokenizer (§4)

extension CSSReferences {
    /// A token of [CSS Syntax Level 3 §4](https://www.w3.org/TR/css-syntax-3/#tokenization). Numbers
    /// keep their representation only: nothing here needs their value.
    enum Token: Equatable {
        case ident(String)
        case function(String)
        case atKeyword(String)
        case hash(String, isID: Bool)
        case string(String)
        case badString
        case url(String)
        case badURL
        case delim(Unicode.Scalar)
        case number(String)
        case percentage(String)
        case dimension(String, unit: String)
        case whitespace
        case cdo
        case cdc
        case colon
        case semicolon
        case comma
        case openSquare
        case closeSquare
        case openParen
        case closeParen
        case openCurly
        case closeCurly
    }

    /// The tokenizer of §4.3 over preprocessed code points (§3.3). Every step consumes at least one
    /// code point and never looks back, so tokenizing is linear in the input.
    struct Tokenizer {
        private let input: [Unicode.Scalar]
        private var position = 0

        init(_ text: String) {
            input = Self.preprocess(text)
        }

        /// §3.3: CR, FF and CR LF become LF; NUL becomes U+FFFD. (A `String` holds no surrogates.)
        static func preprocess(_ text: String) -> [Unicode.Scalar] {
            var result: [Unicode.Scalar] = []
            result.reserveCapacity(text.utf8.count)
            var afterCR = false
            for scalar in text.unicodeScalars {
                if afterCR && scalar == "\n" {
                    afterCR = false
                    continue
                }
                afterCR = scalar == "\r"
                switch scalar {
                case "\r", "\u{0C}": result.append("\n")
                case "\0": result.append("\u{FFFD}")
                default: result.append(scalar)
                }
            }
            return result
        }

        private func peek(_ offset: Int = 0) -> Unicode.Scalar? {
            position + offset < input.count ? input[position + offset] : nil
        }

        /// §4.3.1 Consume a token; `nil` at the end of the input.
        mutating func next() -> Token? {
            consumeComments()
            guard let scalar = peek() else { return nil }
            position += 1
            switch scalar {
            case "\n", "\t", " ":
                while let next = peek(), isWhitespace(next) { position += 1 }
                return .whitespace
            case "\"", "'":
                return consumeString(ending: scalar)
            case "#":
                if let next = peek(), isIdentCodePoint(next) || isValidEscape(next, peek(1)) {
                    let isID = startsIdentSequence(next, peek(1), peek(2))
                    return .hash(consumeIdentSequence(), isID: isID)
                }
                return .delim(scalar)
            case "(": return .openParen
            case ")": return .closeParen
            case "+", ".":
                if startsNumber(scalar, peek(), peek(1)) { return reconsumeNumeric() }
                return .delim(scalar)
            case ",": return .comma
            case "-":
                if startsNumber(scalar, peek(), peek(1)) { return reconsumeNumeric() }
                if peek() == "-" && peek(1) == ">" {
                    position += 2
                    return .cdc
                }
                if startsIdentSequence(scalar, peek(), peek(1)) { return reconsumeIdentLike() }
                return .delim(scalar)
            case ":": return .colon
            case ";": return .semicolon
            case "<":
                if peek() == "!" && peek(1) == "-" && peek(2) == "-" {
                    position += 3
                    return .cdo
                }
                return .delim(scalar)
            case "@":
                if startsIdentSequence(peek(), peek(1), peek(2)) { return .atKeyword(consumeIdentSequence()) }
                return .delim(scalar)
            case "[": return .openSquare
            case "\\":
                if isValidEscape(scalar, peek()) { return reconsumeIdentLike() }
                return .delim(scalar)  // Parse error.
            case "]": return .closeSquare
            case "{": return .openCurly
            case "}": return .closeCurly
            default:
                if isDigit(scalar) { return reconsumeNumeric() }
                if isIdentStart(scalar) { return reconsumeIdentLike() }
                return .delim(scalar)
            }
        }

        /// §4.3.2 Consume comments: an unterminated comment runs to the end of the input.
        private mutating func consumeComments() {
            while peek() == "/" && peek(1) == "*" {
                position += 2
                var closed = false
                while !closed, let scalar = peek() {
                    position += 1
                    if scalar == "*" && peek() == "/" {
                        position += 1
                        closed = true
                    }
                }
            }
        }

        /// §4.3.3 Consume a numeric token (the first code point is reconsumed).
        private mutating func reconsumeNumeric() -> Token {
            position -= 1
            let number = consumeNumber()
            if startsIdentSequence(peek(), peek(1), peek(2)) {
                return .dimension(number, unit: consumeIdentSequence())
            }
            if peek() == "%" {
                position += 1
                return .percentage(number)
            }
            return .number(number)
        }

        /// §4.3.4 Consume an ident-like token (the first code point is reconsumed), with the special
        /// handling of `url(`: a function token when a quote follows, else §4.3.6.
        private mutating func reconsumeIdentLike() -> Token {
            position -= 1
            let name = consumeIdentSequence()
            guard peek() == "(" else { return .ident(name) }
            position += 1
            guard asciiLowercased(name) == "url" else { return .function(name) }
            while let first = peek(), isWhitespace(first), let second = peek(1), isWhitespace(second) {
                position += 1
            }
            let next = peek()
            if next == "\"" || next == "'" { return .function(name) }
            if let next, isWhitespace(next), peek(1) == "\"" || peek(1) == "'" { return .function(name) }
            return consumeURL()
        }

        /// §4.3.5 Consume a string token (the opening quote is consumed).
        private mutating func consumeString(ending: Unicode.Scalar) -> Token {
            var value = String.UnicodeScalarView()
            while let scalar = peek() {
                switch scalar {
                case ending:
                    position += 1
                    return .string(String(value))
                case "\n":
                    return .badString  // Parse error; the newline is reconsumed.
                case "\\":
                    position += 1
                    if let next = peek() {
                        if next == "\n" {
                            position += 1
                        } else {
                            value.append(consumeEscapedCodePoint())
                        }
                    }
                default:
                    position += 1
                    value.append(scalar)
                }
            }
            return .string(String(value))  // Parse error: EOF.
        }

        /// §4.3.6 Consume a url token (after `url(`).
        private mutating func consumeURL() -> Token {
            var value = String.UnicodeScalarView()
            skipWhitespace()
            while let scalar = peek() {
                position += 1
                switch scalar {
                case ")":
                    return .url(String(value))
                case "\n", "\t", " ":
                    skipWhitespace()
                    if peek() == nil { return .url(String(value)) }  // Parse error: EOF.
                    if peek() == ")" {
                        position += 1
                        return .url(String(value))
                    }
                    consumeBadURLRemnants()
                    return .badURL
                case "\"", "'", "(":
                    consumeBadURLRemnants()
                    return .badURL
                case "\\":
                    guard isValidEscape(scalar, peek()) else {
                        consumeBadURLRemnants()
                        return .badURL
                    }
                    value.append(consumeEscapedCodePoint())
                default:
                    if isNonPrintable(scalar) {
                        consumeBadURLRemnants()
                        return .badURL
                    }
                    value.append(scalar)
                }
            }
            return .url(String(value))  // Parse error: EOF.
        }

        /// §4.3.7 Consume an escaped code point (after the `\`).
        private mutating func consumeEscapedCodePoint() -> Unicode.Scalar {
            guard let scalar = peek() else { return "\u{FFFD}" }  // Parse error: EOF.
            position += 1
            guard var value = hexValue(scalar) else { return scalar }
            var digits = 1
            while digits < 6, let next = peek(), let digit = hexValue(next) {
                value = value * 16 + digit
                digits += 1
                position += 1
            }
            if let next = peek(), isWhitespace(next) { position += 1 }
            if value == 0 || (0xD800...0xDFFF).contains(value) || value > 0x10FFFF { return "\u{FFFD}" }
            return Unicode.Scalar(value) ?? "\u{FFFD}"
        }

        /// §4.3.11 Consume an ident sequence.
        private mutating func consumeIdentSequence() -> String {
            var result = String.UnicodeScalarView()
            while let scalar = peek() {
                if isIdentCodePoint(scalar) {
                    position += 1
                    result.append(scalar)
                } else if isValidEscape(scalar, peek(1)) {
                    position += 1
                    result.append(consumeEscapedCodePoint())
                } else {
                    break
                }
            }
            return String(result)
        }

        /// §4.3.12 Consume a number: its representation.
        private mutating func consumeNumber() -> String {
            var repr = String.UnicodeScalarView()
            if let sign = peek(), sign == "+" || sign == "-" {
                repr.append(sign)
                position += 1
            }
            consumeDigits(into: &repr)
            if peek() == ".", let digit = peek(1), isDigit(digit) {
                repr.append(".")
                position += 1
                consumeDigits(into: &repr)
            }
            if let e = peek(), e == "e" || e == "E" {
                if let digit = peek(1), isDigit(digit) {
                    repr.append(e)
                    position += 1
                    consumeDigits(into: &repr)
                } else if let sign = peek(1), sign == "+" || sign == "-", let digit = peek(2), isDigit(digit) {
                    repr.append(e)
                    repr.append(sign)
                    position += 2
                    consumeDigits(into: &repr)
                }
            }
            return String(repr)
        }

        private mutating func consumeDigits(into repr: inout String.UnicodeScalarView) {
            while let digit = peek(), isDigit(digit) {
                repr.append(digit)
                position += 1
            }
        }

        /// §4.3.14 Consume the remnants of a bad url: up to and including `)`, skipping escapes.
        private mutating func consumeBadURLRemnants() {
            while let scalar = peek() {
                position += 1
                if scalar == ")" { return }
                if isValidEscape(scalar, peek()) { _ = consumeEscapedCodePoint() }
            }
        }

        private mutating func skipWhitespace() {
            while let scalar = peek(), isWhitespace(scalar) { position += 1 }
        }
    }
}

// MARK: - §4.2 Definitions and §4.3.8–§4.3.10 checks

extension CSSReferences {
    private static func isDigit(_ scalar: Unicode.Scalar) -> Bool {
        ("0"..."9").contains(scalar)
    }

    private static func hexValue(_ scalar: Unicode.Scalar) -> UInt32? {
        switch scalar {
        case "0"..."9": scalar.value - 0x30
        case "a"..."f": scalar.value - 0x61 + 10
        case "A"..."F": scalar.value - 0x41 + 10
        default: nil
        }
    }

    private static func isWhitespace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\n" || scalar == "\t" || scalar == " "
    }

    private static func isIdentStart(_ scalar: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_" || scalar.value >= 0x80
    }

    private static func isIdentCodePoint(_ scalar: Unicode.Scalar) -> Bool {
        isIdentStart(scalar) || isDigit(scalar) || scalar == "-"
    }

    private static func isNonPrintable(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value <= 0x08 || scalar == "\u{0B}" || (0x0E...0x1F).contains(scalar.value) || scalar == "\u{7F}"
    }

    /// §4.3.8 Check if two code points are a valid escape (`nil` is the end of the input).
    private static func isValidEscape(_ first: Unicode.Scalar?, _ second: Unicode.Scalar?) -> Bool {
        first == "\\" && second != "\n"
    }

    /// §4.3.9 Check if three code points would start an ident sequence.
    private static func startsIdentSequence(
        _ first: Unicode.Scalar?, _ second: Unicode.Scalar?, _ third: Unicode.Scalar?
    )
        -> Bool
    {
        guard let first else { return false }
        if first == "-" {
            guard let second else { return false }
            return isIdentStart(second) || second == "-" || isValidEscape(second, third)
        }
        if first == "\\" { return isValidEscape(first, second) }
        return isIdentStart(first)
    }

    /// §4.3.10 Check if three code points would start a number.
    private static func startsNumber(_ first: Unicode.Scalar?, _ second: Unicode.Scalar?, _ third: Unicode.Scalar?)
        -> Bool
    {
        guard let first else { return false }
        if first == "+" || first == "-" {
            if let second, isDigit(second) { return true }
            if second == ".", let third, isDigit(third) { return true }
            return false
        }
        if first == "." { return second.map(isDigit) ?? false }
        return isDigit(first)
    }

    private static func asciiLowercased(_ text: String) -> String {
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            result.append(("A"..."Z").contains(scalar) ? Unicode.Scalar(UInt8(scalar.value) + 0x20) : scalar)
        }
        return String(result)
    }
}

// MARK: - Decoding (§3.2)

extension CSSReferences {
    /// The encodings supported, by their Encoding Standard names.
    enum TextEncoding: Equatable {
        case utf8, utf16LE, utf16BE, windows1252, iso8859_2, windows1250, windows1251

        /// The Encoding Standard's "get an encoding" for the labels of the supported encodings.
        init?(label: String) {
            var label = trimmingASCIIWhitespace(asciiLowercased(label))
            if label.count >= 2 && label.hasPrefix("\"") && label.hasSuffix("\"") {
                label = trimmingASCIIWhitespace(String(label.dropFirst().dropLast()))
            }
            switch label {
            case "unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8", "x-unicode20utf8":
                self = .utf8
            case "csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16", "utf-16le":
                self = .utf16LE
            case "unicodefffe", "utf-16be":
                self = .utf16BE
            case "ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819", "iso-8859-1", "iso-ir-100",
                "iso8859-1", "iso88591", "iso_8859-1", "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252",
                "x-cp1252":
                self = .windows1252
            case "csisolatin2", "iso-8859-2", "iso-ir-101", "iso8859-2", "iso88592", "iso_8859-2",
                "iso_8859-2:1987", "l2", "latin2":
                self = .iso8859_2
            case "cp1250", "windows-1250", "x-cp1250":
                self = .windows1250
            case "cp1251", "windows-1251", "x-cp1251":
                self = .windows1251
            default:
                return nil
            }
        }

        /// Decodes with U+FFFD for malformed input (the Encoding Standard's "replacement" error mode).
        func decode(_ bytes: ArraySlice<UInt8>) -> String {
            switch self {
            case .utf8:
                return String(decoding: bytes, as: UTF8.self)
            case .utf16LE, .utf16BE:
                var units: [UInt16] = []
                units.reserveCapacity(bytes.count / 2)
                var index = bytes.startIndex
                while index + 1 < bytes.endIndex {
                    let first = UInt16(bytes[index])
                    let second = UInt16(bytes[index + 1])
                    units.append(self == .utf16LE ? first | second << 8 : first << 8 | second)
                    index += 2
                }
                var text = String(decoding: units, as: UTF16.self)
                // A byte left over is an error, but one error in all when a lead surrogate is
                // pending too (the Encoding Standard's end-of-queue step): that surrogate has
                // already become U+FFFD.
                let pendingLead = units.last.map { (0xD800...0xDBFF).contains($0) } ?? false
                if index < bytes.endIndex, !pendingLead { text.unicodeScalars.append("\u{FFFD}") }
                return text
            case .windows1252: return Self.decode(bytes, upperHalf: Self.windows1252Table)
            case .iso8859_2: return Self.decode(bytes, upperHalf: Self.iso8859_2Table)
            case .windows1250: return Self.decode(bytes, upperHalf: Self.windows1250Table)
            case .windows1251: return Self.decode(bytes, upperHalf: Self.windows1251Table)
            }
        }

        private static func decode(_ bytes: ArraySlice<UInt8>, upperHalf: [Unicode.Scalar]) -> String {
            var scalars = String.UnicodeScalarView()
            for byte in bytes {
                scalars.append(byte < 0x80 ? Unicode.Scalar(byte) : upperHalf[Int(byte - 0x80)])
            }
            return String(scalars)
        }

        // The code points of bytes 0x80–0xFF, from Foundation. The bytes windows-1252 leaves undefined
        // (0x81, 0x8D, 0x8F, 0x90, 0x9D) are the C1 controls of the same value in the Encoding Standard.
        private static let windows1252Table = upperHalf(.windowsCP1252, undefinedIsByteValue: true)
        private static let iso8859_2Table = upperHalf(.isoLatin2)
        private static let windows1250Table = upperHalf(.windowsCP1250)
        private static let windows1251Table = upperHalf(.windowsCP1251)

        private static func upperHalf(_ encoding: String.Encoding, undefinedIsByteValue: Bool = false)
            -> [Unicode.Scalar]
        {
            (UInt8(0x80)...0xFF).map { byte in
                let scalars = String(bytes: [byte], encoding: encoding)?.unicodeScalars
                if let scalars, scalars.count == 1, let scalar = scalars.first { return scalar }
                return undefinedIsByteValue ? Unicode.Scalar(byte) : "\u{FFFD}"
            }
        }
    }

    /// §3.2 step 2: `@charset "label";` as the very first bytes, within the first 1024. A UTF-16 label
    /// means UTF-8 (the text would not have been readable as ASCII otherwise).
    private static func charsetRuleEncoding(_ bytes: [UInt8]) -> TextEncoding? {
        let prefix = Array(#"@charset ""#.utf8)
        guard bytes.starts(with: prefix) else { return nil }
        let end = min(bytes.count, 1024)
        var index = prefix.count
        while index < end, bytes[index] != UInt8(ascii: "\"") {
            let byte = bytes[index]
            guard byte <= 0x7F else { return nil }  // any ASCII byte but `"` (CSS Syntax §3.2)
            index += 1
        }
        guard index + 1 < end, bytes[index + 1] == UInt8(ascii: ";") else { return nil }
        let label = String(decoding: bytes[prefix.count..<index], as: UTF8.self)
        switch TextEncoding(label: label) {
        case .utf16LE, .utf16BE: return .utf8
        case let encoding: return encoding
        }
    }
}

extension CSSReferences {
    /// The Encoding Standard's ASCII whitespace trimmed from both ends.
    private static func trimmingASCIIWhitespace(_ text: String) -> String {
        let scalars = Array(text.unicodeScalars)
        let isContent: (Unicode.Scalar) -> Bool = { !["\t", "\n", "\u{0C}", "\r", " "].contains($0) }
        guard let start = scalars.firstIndex(where: isContent), let end = scalars.lastIndex(where: isContent) else {
            return ""
        }
        var result = String.UnicodeScalarView()
        result.append(contentsOf: scalars[start...end])
        return String(result)
    }
}
