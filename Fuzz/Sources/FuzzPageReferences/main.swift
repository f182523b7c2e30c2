import Foundation
import FuzzSupport
import OfflinePages

// What a saved page needs: OfflinePages' HTML references (libxml2's parser behind them), the
// CSS Syntax tokenizer that finds a stylesheet's URLs, and stylesheet decoding (CSS Syntax §3.2).
//
// Input: byte 0 chooses the mode (its value modulo 4), byte 1 is a choice within the mode, the
// rest (at most 64 KiB) is the document:
//   0  HTML, parsed as https://example.com/dir/page.html; byte 1 picks the Content-Type charset.
//   1  a stylesheet (the bytes as UTF-8, invalid sequences repaired); byte 1 seeds the rewrite of
//      its line breaks and U+FFFDs (see the third oracle below).
//   2  a declaration list (a `style` attribute), as 1; and the text as a URL, escaped in CSS.
//   3  stylesheet bytes to decode; byte 1 picks the Content-Type charset (low 4 bits) and the
//      referring document's encoding (high 4 bits).
//
// Traps when
// - an HTML subresource or link is not an absolute http(s) URL with a host and no fragment, or
//   is listed twice; parsing the same bytes twice differs; a charset label that names no
//   encoding gives other references than no charset at all (HTML's encoding sniffing algorithm
//   uses the transport's encoding only when it is supported, and goes on sniffing otherwise).
//   The last two only where a bug of libxml2 2.9 cannot make parses differ (see parsesAlike);
// - a CSS reference is empty, or a declaration list yields an `@import`;
// - the references of a text differ from those of the same text after CSS Syntax §3.3
//   preprocessing, or after any rewrite that preprocessing undoes (LF as CR LF, FF or a lone CR,
//   U+FFFD as NUL): the tokenizer sees only the preprocessed code points;
// - the references of a declaration list differ from those of the same text as a stylesheet
//   without its `.import`s: the documented difference is the top-level `@import` alone;
// - a URL written with every code point but ASCII letters and digits as a CSS escape
//   (`\hex `, §4.3.7) is not found, in `url()`, a string in `url("")`, `image-set()`, or
//   `@import` (as a string or `url()`), exactly as it was (with NUL as U+FFFD, as §4.3.7 says);
// - decoding breaks a rule of CSS Syntax §3.2 and the Encoding Standard: a BOM wins over every
//   label; labels match ASCII case-insensitively around ASCII white space; a supported
//   Content-Type label wins over `@charset` and the referrer; `@charset "label";` at the start
//   wins over the referrer, with UTF-16 labels meaning UTF-8; UTF-8 and UTF-16 decode as the
//   Encoding Standard's decoders do; windows-1250/1251/1252 and ISO-8859-2 map every byte to
//   one code point, ASCII to itself, never U+FFFD.

let documentURL = URL(string: "https://example.com/dir/page.html")!

/// Content-Type charsets for HTML mode; the last names no encoding.
let htmlCharsets: [String?] = [
    nil, "utf-8", "UTF-8", "iso-8859-1", "windows-1252", "shift_jis", "utf-16le", unknownCharset,
]
let unknownCharset = "x-no-such-charset"

/// Labels for decode mode (16: byte 1's nibbles pick them) and what get an encoding makes of
/// each: an encoding decodeStylesheet supports, one it does not (documented: it then goes on as
/// if there were no label, where §3.2 would use it, so no oracle applies), or failure.
let cssLabels: [(label: String?, meaning: LabelMeaning)] = [
    (nil, .failure), ("utf-8", .supported(.utf8)), ("UTF8", .supported(.utf8)),
    ("unicode-1-1-utf-8", .supported(.utf8)), ("utf-16le", .supported(.utf16LE)),
    ("utf-16be", .supported(.utf16BE)), ("utf-16", .supported(.utf16LE)), ("windows-1252", .supported(.singleByte)),
    ("latin1", .supported(.singleByte)), ("us-ascii", .supported(.singleByte)),
    ("iso-8859-2", .supported(.singleByte)), ("windows-1250", .supported(.singleByte)),
    ("cp1251", .supported(.singleByte)), ("koi8-r", .unsupported), ("x-no-such-charset", .failure), ("", .failure),
]

enum Encoding {
    case utf8, utf16LE, utf16BE, singleByte
}

enum LabelMeaning: Equatable {
    case supported(Encoding)
    case unsupported
    case failure
}

/// Traps with `message` when `condition` is false (`fatalError`: `precondition` drops its
/// message in optimized builds).
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) {
    guard !condition() else { return }
    fatalError(message())
}

// MARK: - HTML

/// What `html` refers to; traps when libxml2 cannot be loaded (there would be nothing to fuzz).
func parseHTML(_ html: [UInt8], charset: String?) -> HTMLReferences {
    do {
        return try HTMLReferences(parsing: html, url: documentURL, charset: charset)
    } catch {
        fatalError("\(error)")
    }
}

func checkHTML(_ html: [UInt8], charset: String?) {
    let references = parseHTML(html, charset: charset)
    let context = "\(String(decoding: html, as: UTF8.self).debugDescription) (charset \(charset ?? "none"))"
    checkURLs(references.subresources.map(\.url), "subresource", context)
    checkURLs(references.links, "link", context)
    guard parsesAlike(html, charset: charset) else { return }
    let again = parseHTML(html, charset: charset)
    require(again == references, "\(context): parsed \(references), then \(again)")
    if charset == unknownCharset {
        let sniffed = parseHTML(html, charset: nil)
        require(
            sniffed.subresources == references.subresources && sniffed.links == references.links
                && sniffed.baseURL == references.baseURL,
            "\(context): an unknown charset label is not ignored: \(references) but without it \(sniffed)")
    }
}

/// Content-Type charsets that name an ASCII-compatible encoding libxml2 knows (it then ignores
/// `<meta>`), in which no byte of a multi-byte character is below 0x40.
let asciiCompatibleCharsets: Set<String> = ["utf-8", "UTF-8", "iso-8859-1", "windows-1252", "shift_jis"]

/// Whether two parses of `html` (with `charset`, or without any) are sure to agree, given a bug
/// of libxml2 2.9 (reported apart): `htmlParseNameComplex`, which reads names with a non-ASCII
/// character, grows the input every 100 characters, and when the buffer moved (as `realloc`
/// decides) it starts again from where it is, dropping what it had read; so a longer name (an
/// entity name after `&` in an attribute, say) comes out whole or cut from one parse to the next.
///
/// They agree when no name can have 102 characters with a non-ASCII one:
/// - without a charset (or with one libxml2 does not know), in a document of ASCII but NUL with
///   nothing that could name an encoding (`charset`, an XML declaration's `encoding`): it stays
///   ASCII, and ASCII names take the fast path;
/// - with an ASCII-compatible charset, when the first bytes cannot make libxml2 detect a wide
///   encoding (a NUL or a UTF-16 BOM in them) and no 100 bytes in a row are free of ASCII white
///   space and the punctuation below 0x40 that ends a name (no byte of a character is there).
func parsesAlike(_ html: [UInt8], charset: String?) -> Bool {
    guard let charset, charset != unknownCharset else {
        guard html.allSatisfy({ (0x01...0x7F).contains($0) }) else { return false }
        let text = String(decoding: html, as: UTF8.self).lowercased()
        return !text.contains("charset") && !text.contains("encoding")
    }
    guard asciiCompatibleCharsets.contains(charset), !html.prefix(4).contains(0),
        !html.starts(with: [0xFE, 0xFF]), !html.starts(with: [0xFF, 0xFE])
    else { return false }
    var run = 0
    for byte in html {
        let endsNames = byte < 0x40 && !(0x30...0x3A).contains(byte) && byte != 0x2D && byte != 0x2E
        run = endsNames ? 0 : run + 1
        if run >= 100 { return false }
    }
    return true
}

/// Each URL absolute, `http` or `https`, with a host and without a fragment; none twice.
func checkURLs(_ urls: [URL], _ what: String, _ context: String) {
    for url in urls {
        let scheme = url.scheme?.lowercased()
        require(scheme == "http" || scheme == "https", "\(context): \(what) \(url.absoluteString) is not http(s)")
        require(url.host?.isEmpty == false, "\(context): \(what) \(url.absoluteString) has no host")
        require(url.fragment == nil, "\(context): \(what) \(url.absoluteString) has a fragment")
    }
    require(
        Set(urls.map(\.absoluteString)).count == urls.count,
        "\(context): a \(what) is listed twice: \(urls.map(\.absoluteString))")
}

// MARK: - CSS references

func checkCSS(_ text: String, seed: UInt8, declarations: Bool) {
    let find = declarations ? CSSReferences.inDeclarations : CSSReferences.inStylesheet
    let references = find(text)
    for reference in references {
        require(!reference.url.isEmpty, "\(text.debugDescription): an empty URL")
        require(
            !declarations || reference.kind != .import, "\(text.debugDescription): an @import in a declaration list")
    }
    let preprocessed = preprocess(text)
    let samePreprocessed = find(preprocessed)
    require(
        samePreprocessed == references,
        "\(text.debugDescription): \(references) but preprocessed, \(preprocessed.debugDescription): \(samePreprocessed)"
    )
    let rewritten = rewrite(preprocessed, seed: seed)
    let sameRewritten = find(rewritten)
    require(
        sameRewritten == references,
        "\(text.debugDescription): \(references) but rewritten as \(rewritten.debugDescription): \(sameRewritten)")
    let stylesheet = declarations ? CSSReferences.inStylesheet(text) : references
    let inDeclarations = declarations ? references : CSSReferences.inDeclarations(text)
    require(
        inDeclarations == stylesheet.filter { $0.kind == .url },
        "\(text.debugDescription): as a stylesheet \(stylesheet), as declarations \(inDeclarations)")
}

/// CSS Syntax §3.3, written from the specification: CR LF, CR and FF become LF; NUL becomes U+FFFD.
func preprocess(_ text: String) -> String {
    var result = String.UnicodeScalarView()
    var scalars = text.unicodeScalars.makeIterator()
    var pending = scalars.next()
    while let scalar = pending {
        pending = scalars.next()
        switch scalar {
        case "\r":
            result.append("\n")
            if pending == "\n" { pending = scalars.next() }
        case "\u{0C}": result.append("\n")
        case "\0": result.append("\u{FFFD}")
        default: result.append(scalar)
        }
    }
    return String(result)
}

/// `preprocessed` (which holds no CR, FF or NUL) with each LF written as LF, CR LF, FF or (when
/// no LF follows, which would join it) CR, and each U+FFFD as itself or NUL, as `seed` picks:
/// text that §3.3 preprocesses back to `preprocessed`.
func rewrite(_ preprocessed: String, seed: UInt8) -> String {
    var state = UInt32(seed) &* 2_654_435_761 | 1
    func pick(_ count: UInt32) -> UInt32 {
        state = state &* 1_664_525 &+ 1_013_904_223
        return (state >> 16) % count
    }
    let scalars = Array(preprocessed.unicodeScalars)
    var result = String.UnicodeScalarView()
    for (index, scalar) in scalars.enumerated() {
        switch scalar {
        case "\n":
            let lfFollows = index + 1 < scalars.count && scalars[index + 1] == "\n"
            switch pick(lfFollows ? 3 : 4) {
            case 0: result.append("\n")
            case 1: result.append(contentsOf: ["\r", "\n"])
            case 2: result.append("\u{0C}")
            default: result.append("\r")
            }
        case "\u{FFFD}": result.append(pick(2) == 0 ? "\u{FFFD}" : "\0")
        default: result.append(scalar)
        }
    }
    return String(result)
}

/// The text as a URL (its first 256 code points), every code point but ASCII letters and digits
/// written as an escape: found as written in every form that holds a URL.
func checkEscapedURL(_ text: String) {
    let scalars = text.unicodeScalars.prefix(256)
    var escaped = ""
    var expected = String.UnicodeScalarView()
    for scalar in scalars {
        // §4.3.7: an escaped zero is U+FFFD (a String holds no surrogates, nothing is above U+10FFFF).
        expected.append(scalar == "\0" ? "\u{FFFD}" : scalar)
        if scalar.properties.isASCIIHexDigit || ("g"..."z").contains(scalar) || ("G"..."Z").contains(scalar) {
            escaped.unicodeScalars.append(scalar)
        } else {
            escaped += "\\" + String(scalar.value, radix: 16) + " "
        }
    }
    let url = String(expected)
    func expect(_ kind: CSSReference.Kind) -> [CSSReference] {
        url.isEmpty ? [] : [CSSReference(kind: kind, url: url)]
    }
    let cases: [(text: String, declarations: Bool, expected: [CSSReference])] = [
        ("a { background: url(\(escaped)) }", false, expect(.url)),
        ("a { background: url( \"\(escaped)\" ) }", false, expect(.url)),
        ("@import \"\(escaped)\" screen;", false, expect(.import)),
        ("@import url(\(escaped)) supports(display: grid);", false, expect(.import)),
        ("background-image: -webkit-image-set('\(escaped)' 1x)", true, expect(.url)),
        ("src: url(\(escaped)) format(\"woff2\")", true, expect(.url)),
    ]
    for (css, declarations, expected) in cases {
        let found = declarations ? CSSReferences.inDeclarations(css) : CSSReferences.inStylesheet(css)
        require(found == expected, "\(css.debugDescription): \(found), not \(expected)")
    }
}

// MARK: - Decoding

func checkDecoding(_ bytes: [UInt8], choice: UInt8) {
    let contentType = cssLabels[Int(choice & 0x0F)]
    let referrer = cssLabels[Int(choice >> 4)]
    let context = "\(bytes) (Content-Type \(contentType.label ?? "none"), referrer \(referrer.label ?? "none"))"
    let decoded = CSSReferences.decodeStylesheet(
        bytes, contentTypeCharset: contentType.label, referrerCharset: referrer.label)
    require(String(validating: decoded.utf8, as: UTF8.self) == decoded, "\(context): not valid")
    for reference in CSSReferences.inStylesheet(decoded) {
        require(!reference.url.isEmpty, "\(context): an empty URL in \(decoded.debugDescription)")
    }
    // Get an encoding matches labels ASCII case-insensitively, around ASCII white space.
    if let label = contentType.label {
        let variant = " \t" + label.uppercased() + "\n\u{0C}\r"
        let again = CSSReferences.decodeStylesheet(bytes, contentTypeCharset: variant, referrerCharset: referrer.label)
        require(again == decoded, "\(context): the label \(variant.debugDescription) decodes otherwise")
    }
    // §3.2: a BOM, else the Content-Type label, else `@charset`, else the referrer, else UTF-8.
    if let (encoding, bomLength) = byteOrderMark(bytes) {
        checkDecoded(decoded, bytes[bomLength...], encoding, context)
        return
    }
    switch contentType.meaning {
    case .supported(let encoding):
        checkDecoded(decoded, bytes[...], encoding, context)
        let withoutReferrer = CSSReferences.decodeStylesheet(
            bytes, contentTypeCharset: contentType.label, referrerCharset: nil)
        require(withoutReferrer == decoded, "\(context): the referrer counts after a supported Content-Type")
        return
    case .unsupported: return
    case .failure: break
    }
    if let label = charsetRuleLabel(bytes) {
        guard let known = cssLabels.first(where: { $0.label?.lowercased() == label.lowercased() }) else { return }
        switch known.meaning {
        case .supported(let encoding):
            // "If the return value was utf-16be or utf-16le, return utf-8."
            let chosen = encoding == .utf16LE || encoding == .utf16BE ? Encoding.utf8 : encoding
            checkDecoded(decoded, bytes[...], chosen, context)
            let asContentType = CSSReferences.decodeStylesheet(
                bytes, contentTypeCharset: chosen == .utf8 ? "utf-8" : label, referrerCharset: nil)
            require(asContentType == decoded, "\(context): @charset \(label) is not the encoding used")
            return
        case .unsupported: return
        case .failure: break
        }
    }
    switch referrer.meaning {
    case .supported(let encoding): checkDecoded(decoded, bytes[...], encoding, context)
    case .unsupported: return
    case .failure: checkDecoded(decoded, bytes[...], .utf8, context)
    }
}

/// The text against what the Encoding Standard's decoder of `encoding` makes of `bytes`, or (for
/// the single-byte encodings) against what it must be like.
func checkDecoded(_ decoded: String, _ bytes: ArraySlice<UInt8>, _ encoding: Encoding, _ context: String) {
    let scalars = Array(decoded.unicodeScalars)
    switch encoding {
    case .utf8:
        // Swift's repair is the Encoding Standard's UTF-8 decoder: U+FFFD for each maximal subpart.
        let expected = Array(String(decoding: bytes, as: UTF8.self).unicodeScalars)
        require(scalars == expected, "\(context): not UTF-8 decoded: \(decoded.debugDescription)")
    case .utf16LE, .utf16BE:
        require(
            scalars == decodeUTF16(bytes, bigEndian: encoding == .utf16BE),
            "\(context): not \(encoding) decoded: \(decoded.debugDescription)")
    case .singleByte:
        require(scalars.count == bytes.count, "\(context): \(scalars.count) code points for \(bytes.count) bytes")
        for (byte, scalar) in zip(bytes, scalars) {
            require(
                byte < 0x80 ? scalar.value == UInt32(byte) : scalar.value >= 0x80 && scalar != "\u{FFFD}",
                "\(context): byte \(byte) decodes as U+\(String(scalar.value, radix: 16))")
        }
    }
}

/// The BOM at the start of `bytes`: its encoding and length (Encoding Standard "BOM sniff").
func byteOrderMark(_ bytes: [UInt8]) -> (Encoding, Int)? {
    if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return (.utf8, 3) }
    if bytes.starts(with: [0xFE, 0xFF]) { return (.utf16BE, 2) }
    if bytes.starts(with: [0xFF, 0xFE]) { return (.utf16LE, 2) }
    return nil
}

/// The label of `@charset "…";` at the start (CSS Syntax §3.2 step 2: any ASCII byte but `"`),
/// with ASCII white space trimmed as "get an encoding" does.
func charsetRuleLabel(_ bytes: [UInt8]) -> String? {
    let prefix = Array("@charset \"".utf8)
    guard bytes.starts(with: prefix) else { return nil }
    let rest = bytes[prefix.count..<min(bytes.count, 1024)]
    guard let quote = rest.firstIndex(of: UInt8(ascii: "\"")), quote + 1 < rest.endIndex,
        rest[quote + 1] == UInt8(ascii: ";"), rest[..<quote].allSatisfy({ $0 <= 0x7F })
    else { return nil }
    let whitespace: Set<UInt8> = [0x09, 0x0A, 0x0C, 0x0D, 0x20]
    let label = rest[..<quote].drop { whitespace.contains($0) }.reversed().drop { whitespace.contains($0) }.reversed()
    return String(decoding: Array(label), as: UTF8.self)
}

/// The Encoding Standard's shared UTF-16 decoder, written from the specification.
func decodeUTF16(_ bytes: ArraySlice<UInt8>, bigEndian: Bool) -> [Unicode.Scalar] {
    var result: [Unicode.Scalar] = []
    var leadByte: UInt8?
    var leadSurrogate: UInt16?
    var queue = Array(bytes.reversed())
    while true {
        guard let byte = queue.popLast() else {
            if leadByte != nil || leadSurrogate != nil { result.append("\u{FFFD}") }
            return result
        }
        guard let first = leadByte else {
            leadByte = byte
            continue
        }
        leadByte = nil
        let unit = bigEndian ? UInt16(first) << 8 | UInt16(byte) : UInt16(first) | UInt16(byte) << 8
        if let lead = leadSurrogate {
            leadSurrogate = nil
            if (0xDC00...0xDFFF).contains(unit) {
                result.append(Unicode.Scalar(0x10000 + (UInt32(lead) - 0xD800) << 10 + (UInt32(unit) - 0xDC00))!)
                continue
            }
            // The code unit goes back in the queue and is read again after the error.
            queue += bigEndian ? [UInt8(unit & 0xFF), UInt8(unit >> 8)] : [UInt8(unit >> 8), UInt8(unit & 0xFF)]
            result.append("\u{FFFD}")
            continue
        }
        if (0xD800...0xDBFF).contains(unit) {
            leadSurrogate = unit
        } else {
            result.append((0xDC00...0xDFFF).contains(unit) ? "\u{FFFD}" : Unicode.Scalar(unit)!)
        }
    }
}

// MARK: - The target

runFuzzer { data, size in
    let bytes = fuzzBytes(data, min(size, 2 + 64 * 1024))
    guard bytes.count >= 2 else { return 0 }
    let choice = bytes[1]
    let document = Array(bytes[2...])
    switch bytes[0] % 4 {
    case 0: checkHTML(document, charset: htmlCharsets[Int(choice) % htmlCharsets.count])
    case 1: checkCSS(String(decoding: document, as: UTF8.self), seed: choice, declarations: false)
    case 2:
        let text = String(decoding: document, as: UTF8.self)
        checkCSS(text, seed: choice, declarations: true)
        checkEscapedURL(text)
    default: checkDecoding(document, choice: choice)
    }
    return 0
}
