import Foundation

/// An `http` or `https` URL as a browser parses it: the
/// [WHATWG URL Standard](https://url.spec.whatwg.org/)'s basic URL parser for special schemes,
/// written here because Foundation's `URL(string:relativeTo:)` follows RFC 3986 and reads some
/// URLs differently from the browser whose page is being saved (`http://a\@b/` is host `a` to a
/// browser, a backslash being a path separator in special schemes; `http://0x7f.1/` is
/// `127.0.0.1`).
///
/// What a save fetches is decided on this parse, and the URL it requests is this parse's
/// serialization, so that what is checked is what is sent:
/// - leading and trailing C0 controls and spaces are trimmed, tabs and newlines anywhere removed
///   (§4.4 "basic URL parser", first steps);
/// - `\` is `/` everywhere a special URL allows it; `http:foo` against an `http` base is relative
///   (§4.4 "special relative or authority state"), against another base an authority;
/// - hosts go through the host parser (§3.5): percent-decoded, lower-cased, IDNA (here NFKC,
///   lower-casing, the ideographic full stops as `.`, and Punycode, RFC 3492: the parts of UTS #46
///   that decide which host a name is), and a name that ends in a number is an IPv4 address in
///   any of its forms (`2130706433`, `0x7f.1`, `0177.0.0.1`; §3.5 "IPv4 parser"); IPv6 literals
///   are parsed and compressed (§3.5 "IPv6 parser", §3.6);
/// - the path's `.` and `..` segments are resolved and every part percent-encoded with the
///   standard's sets (§1.3); the query is encoded as UTF-8; the fragment is dropped (it is never
///   sent).
struct BrowserURL: Sendable, Hashable {
    enum Scheme: String, Sendable {
        case http, https

        var defaultPort: Int { self == .http ? 80 : 443 }
    }

    /// A host (§3.1): a domain (ASCII, lower-cased), an IPv4 address or an IPv6 address.
    enum Host: Sendable, Hashable, CustomStringConvertible {
        case domain(String)
        case ipv4(UInt32)
        /// Eight 16-bit pieces.
        case ipv6([UInt16])

        /// The host serializer (§3.6).
        var description: String {
            switch self {
            case .domain(let name): return name
            case .ipv4(let address):
                return [24, 16, 8, 0].map { String((address >> UInt32($0)) & 0xFF) }.joined(separator: ".")
            case .ipv6(let pieces): return "[" + BrowserURL.serializeIPv6(pieces) + "]"
            }
        }
    }

    var scheme: Scheme
    /// Percent-encoded; empty when there is none.
    var username = ""
    var password = ""
    var host: Host
    /// `nil` for the scheme's default port.
    var port: Int?
    /// Percent-encoded path segments (at least one).
    var path: [String] = [""]
    /// Percent-encoded, without the `?`.
    var query: String?

    /// The URL serializer (§4.5), without a fragment.
    var serialization: String {
        var text = scheme.rawValue + "://"
        if !username.isEmpty || !password.isEmpty {
            text += username + (password.isEmpty ? "" : ":" + password) + "@"
        }
        text += host.description
        if let port { text += ":\(port)" }
        text += "/" + path.joined(separator: "/")
        if let query { text += "?" + query }
        return text
    }

    /// The origin (§4.7 / HTML "tuple origin"): scheme, host and port.
    var origin: Origin { Origin(scheme: scheme, host: host, port: port ?? scheme.defaultPort) }

    struct Origin: Sendable, Hashable, CustomStringConvertible {
        var scheme: Scheme
        var host: Host
        var port: Int

        var description: String {
            "\(scheme.rawValue)://\(host)" + (port == scheme.defaultPort ? "" : ":\(port)")
        }
    }

    /// The URL as Foundation's `URL`, for the transport; `nil` when Foundation cannot read the
    /// serialization or reads another host from it (then it is not requested at all).
    var foundationURL: URL? {
        guard let url = URL(string: serialization), let host = url.host(percentEncoded: true) else { return nil }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let expected: String
        if case .ipv6(let pieces) = self.host {
            expected = Self.serializeIPv6(pieces)
        } else {
            expected = self.host.description
        }
        return bare.lowercased() == expected ? url : nil
    }

    /// What parsing a string gave.
    enum Parsed: Sendable, Hashable {
        /// An `http` or `https` URL.
        case url(BrowserURL)
        /// A URL of another scheme (lower-cased, without the `:`): `data`, `file`, `javascript`…
        case otherScheme(String)
        /// Not a URL: why.
        case failure(String)
    }

    /// Parses `input`, relative to `base` when it is not absolute (§4.4, basic URL parser, for
    /// special schemes).
    static func parse(_ input: String, base: BrowserURL? = nil) -> Parsed {
        var parser = Parser(input)
        return parser.run(base: base)
    }

    /// Parses an absolute URL given as Foundation's `URL`.
    init?(_ url: URL) {
        guard case .url(let parsed) = Self.parse(url.absoluteString) else { return nil }
        self = parsed
    }

    init(scheme: Scheme, host: Host) {
        self.scheme = scheme
        self.host = host
    }
}

// MARK: - The basic URL parser (§4.4), special schemes only

extension BrowserURL {
    private struct Parser {
        let input: [Unicode.Scalar]
        var pointer = 0

        init(_ text: String) {
            var scalars = Array(text.unicodeScalars)
            // Leading and trailing C0 control or space removed; ASCII tab or newline removed
            // everywhere.
            let isC0OrSpace: (Unicode.Scalar) -> Bool = { $0.value <= 0x20 }
            let start = scalars.firstIndex { !isC0OrSpace($0) } ?? scalars.endIndex
            let end = scalars.lastIndex { !isC0OrSpace($0) }.map { $0 + 1 } ?? start
            scalars = Array(scalars[start..<max(start, end)])
            scalars.removeAll { $0 == "\t" || $0 == "\n" || $0 == "\r" }
            input = scalars
        }

        var current: Unicode.Scalar? { pointer < input.count ? input[pointer] : nil }

        func isSlash(_ scalar: Unicode.Scalar?) -> Bool { scalar == "/" || scalar == "\\" }

        mutating func run(base: BrowserURL?) -> Parsed {
            // Scheme start and scheme states.
            if let first = current, isASCIIAlpha(first) {
                var end = 1
                while end < input.count, isSchemeCodePoint(input[end]) { end += 1 }
                if end < input.count, input[end] == ":" {
                    let scheme = String(String.UnicodeScalarView(input[0..<end])).lowercased()
                    pointer = end + 1
                    guard let special = Scheme(rawValue: scheme) else { return .otherScheme(scheme) }
                    if let base, base.scheme == special {
                        // Special relative or authority state.
                        if current == "/", pointer + 1 < input.count, input[pointer + 1] == "/" {
                            pointer += 2
                            return authority(special)
                        }
                        return relative(to: base)
                    }
                    // Special authority slashes, then ignore slashes.
                    return authority(special)
                }
            }
            // No scheme state.
            guard let base else { return .failure("a relative reference with no base URL to resolve it against") }
            return relative(to: base)
        }

        /// Relative state and relative slash state.
        mutating func relative(to base: BrowserURL) -> Parsed {
            var url = base
            if isSlash(current) {
                pointer += 1
                if isSlash(current) {
                    pointer += 1
                    return authority(base.scheme)
                }
                url.path = []
                url.query = nil
                return pathState(url)
            }
            switch current {
            case nil: return .url(url)
            case "?":
                pointer += 1
                url.query = queryState()
                return .url(url)
            case "#": return .url(url)
            default:
                url.query = nil
                if !url.path.isEmpty { url.path.removeLast() }
                return pathState(url)
            }
        }

        /// Special authority ignore slashes, authority, host and port states.
        mutating func authority(_ scheme: Scheme) -> Parsed {
            while isSlash(current) { pointer += 1 }
            var end = pointer
            while end < input.count, !["/", "\\", "?", "#"].contains(input[end]) { end += 1 }
            var authority = Array(input[pointer..<end])
            pointer = end
            var url = BrowserURL(scheme: scheme, host: .domain(""))
            if let at = authority.lastIndex(of: "@") {
                // Every earlier `@` is part of the credentials (§4.4 authority state).
                let credentials = authority[..<at]
                if let colon = credentials.firstIndex(of: ":") {
                    url.username = percentEncode(credentials[..<colon], .userinfo)
                    url.password = percentEncode(credentials[(colon + 1)...], .userinfo)
                } else {
                    url.username = percentEncode(credentials, .userinfo)
                }
                authority = Array(authority[(at + 1)...])
                guard !authority.isEmpty else { return .failure("there is no host after the credentials") }
            }
            // Host state: a `:` outside brackets starts the port.
            var insideBrackets = false
            var colon: Int?
            for (index, scalar) in authority.enumerated() {
                if scalar == "[" { insideBrackets = true }
                if scalar == "]" { insideBrackets = false }
                if scalar == ":", !insideBrackets {
                    colon = index
                    break
                }
            }
            let hostText = Array(authority[..<(colon ?? authority.count)])
            guard !hostText.isEmpty else { return .failure("the host is empty") }
            switch BrowserURL.parseHost(hostText) {
            case .success(let host): url.host = host
            case .failure(let reason): return .failure(reason.text)
            }
            if let colon {
                let digits = authority[(colon + 1)...]
                guard digits.allSatisfy(isASCIIDigit) else {
                    return .failure("the port \"\(String(String.UnicodeScalarView(digits)))\" is not a number")
                }
                if !digits.isEmpty {
                    // Leading zeros do not count (`:0080` is 80).
                    let significant = String(String.UnicodeScalarView(digits.drop { $0 == "0" }))
                    guard significant.count <= 5, let port = significant.isEmpty ? 0 : Int(significant), port <= 65535
                    else { return .failure("the port is over 65535") }
                    url.port = port == scheme.defaultPort ? nil : port
                }
            }
            // Path start state.
            url.path = []
            if isSlash(current) { pointer += 1 }
            return pathState(url)
        }

        /// Path state, then query state.
        mutating func pathState(_ url: BrowserURL) -> Parsed {
            var url = url
            var buffer: [Unicode.Scalar] = []
            while true {
                let scalar = current
                if let scalar, !isSlash(scalar), scalar != "?", scalar != "#" {
                    buffer.append(scalar)
                    pointer += 1
                } else {
                    let segment = percentEncode(buffer[...], .path)
                    let endsSegment = isSlash(scalar)
                    switch segment.lowercased() {
                    case "..", ".%2e", "%2e.", "%2e%2e":
                        if !url.path.isEmpty { url.path.removeLast() }
                        if !endsSegment { url.path.append("") }
                    case ".", "%2e":
                        if !endsSegment { url.path.append("") }
                    default:
                        url.path.append(segment)
                    }
                    buffer = []
                    pointer += 1
                    if scalar == "?" {
                        url.query = queryState()
                        return .url(url)
                    }
                    if scalar == nil || scalar == "#" { return .url(url) }
                }
            }
        }

        /// Query state, up to the fragment.
        mutating func queryState() -> String {
            let start = pointer
            while let scalar = current, scalar != "#" { pointer += 1 }
            return percentEncode(input[start..<pointer], .specialQuery)
        }
    }
}

// MARK: - Code points and percent-encoding (§1.3, §4.2)

private func isASCIIAlpha(_ scalar: Unicode.Scalar) -> Bool {
    ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar)
}

private func isASCIIDigit(_ scalar: Unicode.Scalar) -> Bool { ("0"..."9").contains(scalar) }

private func isSchemeCodePoint(_ scalar: Unicode.Scalar) -> Bool {
    isASCIIAlpha(scalar) || isASCIIDigit(scalar) || scalar == "+" || scalar == "-" || scalar == "."
}

/// The percent-encode sets of §1.3 that special URLs use.
private enum EncodeSet {
    case path, specialQuery, userinfo

    func contains(_ scalar: Unicode.Scalar) -> Bool {
        // The C0 control percent-encode set: C0 controls and everything above U+007E.
        if scalar.value < 0x20 || scalar.value > 0x7E { return true }
        // The query percent-encode set adds space, ", #, <, >; the special-query set adds '.
        if " \"#<>'".unicodeScalars.contains(scalar) { return scalar != "'" || self == .specialQuery }
        switch self {
        case .specialQuery: return false
        // The path percent-encode set: the query set (without ') and ?, ^, `, {, }.
        case .path: return "?^`{}".unicodeScalars.contains(scalar)
        // The userinfo percent-encode set: the path set and /, :, ;, =, @, [ to ^, |.
        case .userinfo: return "?^`{}/:;=@[\\]|".unicodeScalars.contains(scalar)
        }
    }
}

/// UTF-8 percent-encodes the code points of `scalars` that are in `set`.
private func percentEncode(_ scalars: ArraySlice<Unicode.Scalar>, _ set: EncodeSet) -> String {
    var text = ""
    for scalar in scalars {
        guard set.contains(scalar) else {
            text.unicodeScalars.append(scalar)
            continue
        }
        for byte in String(scalar).utf8 {
            text += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
        }
    }
    return text
}

/// The bytes of `scalars` with `%XX` sequences decoded (§1.3 "percent-decode"); a `%` not
/// followed by two hex digits stays as it is.
private func percentDecode(_ scalars: [Unicode.Scalar]) -> [UInt8] {
    let bytes = Array(String(String.UnicodeScalarView(scalars)).utf8)
    var decoded: [UInt8] = []
    decoded.reserveCapacity(bytes.count)
    var index = 0
    while index < bytes.count {
        if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = hexValue(bytes[index + 1]),
            let low = hexValue(bytes[index + 2])
        {
            decoded.append(high << 4 | low)
            index += 3
        } else {
            decoded.append(bytes[index])
            index += 1
        }
    }
    return decoded
}

private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
    default: nil
    }
}

// MARK: - Hosts (§3.5)

extension BrowserURL {
    struct HostError: Error {
        var text: String
    }

    /// The host parser for special URLs (§3.5): an IPv6 literal in brackets, else a domain
    /// (percent-decoded, mapped to ASCII) that is an IPv4 address when it ends in a number.
    static func parseHost(_ input: [Unicode.Scalar]) -> Result<Host, HostError> {
        let written = String(String.UnicodeScalarView(input))
        if input.first == "[" {
            guard input.last == "]", input.count >= 2 else {
                return .failure(HostError(text: "the IPv6 address \(written) has no closing ]"))
            }
            guard let pieces = parseIPv6(Array(input[1..<(input.count - 1)])) else {
                return .failure(HostError(text: "\(written) is not an IPv6 address"))
            }
            return .success(.ipv6(pieces))
        }
        let decoded = String(decoding: percentDecode(input), as: UTF8.self)
        guard !decoded.unicodeScalars.contains("\u{FFFD}"), let ascii = domainToASCII(decoded) else {
            return .failure(HostError(text: "the host \(written) is not a valid domain name"))
        }
        if let forbidden = ascii.unicodeScalars.first(where: isForbiddenDomainCodePoint) {
            return .failure(
                HostError(
                    text: "the host \(written) contains \"\(forbidden.escaped(asASCII: true))\", which no host may"))
        }
        guard endsInANumber(ascii) else { return .success(.domain(ascii)) }
        guard let address = parseIPv4(ascii) else {
            return .failure(HostError(text: "the host \(written) ends in a number but is not an IPv4 address"))
        }
        return .success(.ipv4(address))
    }

    /// §3.2 "forbidden domain code point".
    private static func isForbiddenDomainCodePoint(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value <= 0x20 || scalar.value == 0x7F || "#/:<>?@[\\]^|%".unicodeScalars.contains(scalar)
    }

    /// "domain to ASCII" (§3.3) as far as it decides which host a name is: ASCII names are
    /// lower-cased; others are NFKC-normalized and lower-cased, the ideographic full stops
    /// (U+3002, U+FF0E, U+FF61) become `.`, and each non-ASCII label is Punycode-encoded
    /// (RFC 3492) with the `xn--` prefix. `nil` when it cannot be encoded or is empty.
    static func domainToASCII(_ domain: String) -> String? {
        var name = domain
        if !name.unicodeScalars.allSatisfy(\.isASCII) {
            name = name.precomposedStringWithCompatibilityMapping.lowercased()
            name = String(
                String.UnicodeScalarView(
                    name.unicodeScalars.map { ["\u{3002}", "\u{FF0E}", "\u{FF61}"].contains($0) ? "." : $0 }))
        }
        var labels: [String] = []
        for label in name.split(separator: ".", omittingEmptySubsequences: false) {
            if label.unicodeScalars.allSatisfy(\.isASCII) {
                labels.append(label.lowercased())
            } else {
                guard let encoded = punycode(Array(label.unicodeScalars)) else { return nil }
                labels.append("xn--" + encoded)
            }
        }
        let ascii = labels.joined(separator: ".")
        return ascii.isEmpty ? nil : ascii
    }

    /// §3.5 "ends in a number checker".
    static func endsInANumber(_ domain: String) -> Bool {
        var parts = domain.split(separator: ".", omittingEmptySubsequences: false)
        if parts.last == "" {
            guard parts.count > 1 else { return false }
            parts.removeLast()
        }
        guard let last = parts.last, !last.isEmpty else { return false }
        if last.unicodeScalars.allSatisfy(isASCIIDigit) { return true }
        return ipv4Number(last) != nil
    }

    /// §3.5 "IPv4 number parser": decimal, octal with a leading `0`, hexadecimal with `0x`.
    /// Values too large for 64 bits are returned as `UInt64.max` (they fail the range checks).
    private static func ipv4Number(_ text: Substring) -> UInt64? {
        guard !text.isEmpty else { return nil }
        var digits = text
        var radix: UInt64 = 10
        if digits.count >= 2, digits.hasPrefix("0x") || digits.hasPrefix("0X") {
            digits = digits.dropFirst(2)
            radix = 16
        } else if digits.count >= 2, digits.hasPrefix("0") {
            digits = digits.dropFirst()
            radix = 8
        }
        var value: UInt64 = 0
        for scalar in digits.unicodeScalars {
            guard scalar.isASCII, let digit = hexValue(UInt8(scalar.value)), UInt64(digit) < radix else { return nil }
            let (times, overflow) = value.multipliedReportingOverflow(by: radix)
            value = overflow ? UInt64.max : min(UInt64.max - UInt64(digit), times) + UInt64(digit)
        }
        return value
    }

    /// §3.5 "IPv4 parser": one to four numbers, the last filling the remaining bytes.
    static func parseIPv4(_ text: String) -> UInt32? {
        var parts = text.split(separator: ".", omittingEmptySubsequences: false)
        if parts.last == "", parts.count > 1 { parts.removeLast() }
        guard parts.count <= 4 else { return nil }
        var numbers: [UInt64] = []
        for part in parts {
            guard let number = ipv4Number(part) else { return nil }
            numbers.append(number)
        }
        guard let last = numbers.last, numbers.dropLast().allSatisfy({ $0 <= 255 }) else { return nil }
        guard last < UInt64(1) << (8 * (5 - numbers.count)) else { return nil }
        var address = last
        for (counter, number) in numbers.dropLast().enumerated() { address += number << (8 * (3 - counter)) }
        return UInt32(address)
    }

    /// §3.5 "IPv6 parser": eight pieces, `::` compression, a trailing dotted IPv4 part.
    static func parseIPv6(_ input: [Unicode.Scalar]) -> [UInt16]? {
        var address = [UInt16](repeating: 0, count: 8)
        var pieceIndex = 0
        var compress: Int?
        var pointer = 0
        func at(_ index: Int) -> Unicode.Scalar? { index < input.count ? input[index] : nil }
        if at(0) == ":" {
            guard at(1) == ":" else { return nil }
            pointer = 2
            pieceIndex = 1
            compress = 1
        }
        while let scalar = at(pointer) {
            guard pieceIndex < 8 else { return nil }
            if scalar == ":" {
                guard compress == nil else { return nil }
                pointer += 1
                pieceIndex += 1
                compress = pieceIndex
                continue
            }
            var value: UInt16 = 0
            var length = 0
            while length < 4, let digit = at(pointer), digit.isASCII, let nibble = hexValue(UInt8(digit.value)) {
                value = value << 4 | UInt16(nibble)
                pointer += 1
                length += 1
            }
            if at(pointer) == "." {
                guard length > 0, pieceIndex <= 6 else { return nil }
                pointer -= length
                var numbersSeen = 0
                while at(pointer) != nil {
                    if numbersSeen > 0 {
                        guard at(pointer) == ".", numbersSeen < 4 else { return nil }
                        pointer += 1
                    }
                    guard let first = at(pointer), isASCIIDigit(first) else { return nil }
                    var piece: Int?
                    while let digit = at(pointer), isASCIIDigit(digit) {
                        let number = Int(digit.value - 0x30)
                        if let current = piece {
                            guard current != 0 else { return nil }
                            piece = current * 10 + number
                        } else {
                            piece = number
                        }
                        guard let value = piece, value <= 255 else { return nil }
                        pointer += 1
                    }
                    address[pieceIndex] = address[pieceIndex] << 8 | UInt16(piece ?? 0)
                    numbersSeen += 1
                    if numbersSeen == 2 || numbersSeen == 4 { pieceIndex += 1 }
                }
                guard numbersSeen == 4 else { return nil }
                break
            } else if at(pointer) == ":" {
                pointer += 1
                guard at(pointer) != nil else { return nil }
            } else if at(pointer) != nil {
                return nil
            }
            address[pieceIndex] = value
            pieceIndex += 1
        }
        if let compress {
            var swaps = pieceIndex - compress
            pieceIndex = 7
            while pieceIndex != 0, swaps > 0 {
                address.swapAt(pieceIndex, compress + swaps - 1)
                pieceIndex -= 1
                swaps -= 1
            }
        } else if pieceIndex != 8 {
            return nil
        }
        return address
    }

    /// §3.6 "IPv6 serializer": lower-case hex, the first longest run of two or more zero
    /// pieces as `::`.
    static func serializeIPv6(_ pieces: [UInt16]) -> String {
        var best: (start: Int, length: Int)?
        var index = 0
        while index < pieces.count {
            guard pieces[index] == 0 else {
                index += 1
                continue
            }
            var end = index
            while end < pieces.count, pieces[end] == 0 { end += 1 }
            if end - index >= 2, end - index > (best?.length ?? 0) { best = (index, end - index) }
            index = end
        }
        var text = ""
        var ignoring = false
        for (index, piece) in pieces.enumerated() {
            if let best, index >= best.start, index < best.start + best.length {
                if !ignoring { text += index == 0 ? "::" : ":" }
                ignoring = true
                continue
            }
            ignoring = false
            text += String(piece, radix: 16)
            if index != 7 { text += ":" }
        }
        return text
    }

    /// Punycode (RFC 3492 §6.3, the encoding procedure) of one label; `nil` on overflow.
    static func punycode(_ label: [Unicode.Scalar]) -> String? {
        let base = 36
        let tMin = 1
        let tMax = 26
        func digit(_ value: Int) -> Unicode.Scalar {
            Unicode.Scalar(UInt8(value < 26 ? 0x61 + value : 0x30 + value - 26))
        }
        func adapt(_ delta: Int, _ points: Int, _ first: Bool) -> Int {
            var delta = first ? delta / 700 : delta / 2
            delta += delta / points
            var k = 0
            while delta > ((base - tMin) * tMax) / 2 {
                delta /= base - tMin
                k += base
            }
            return k + (base - tMin + 1) * delta / (delta + 38)
        }
        let codes = label.map { Int($0.value) }
        var output = String.UnicodeScalarView(label.filter(\.isASCII))
        let basic = output.count
        var handled = basic
        if basic > 0 { output.append("-") }
        var n = 128
        var delta = 0
        var bias = 72
        while handled < codes.count {
            guard let m = codes.filter({ $0 >= n }).min() else { return nil }
            let (step, overflow) = (m - n).multipliedReportingOverflow(by: handled + 1)
            guard !overflow, delta <= Int(Int32.max) - step else { return nil }
            delta += step
            n = m
            for code in codes {
                if code < n { delta += 1 }
                guard code == n else { continue }
                var q = delta
                var k = base
                while true {
                    let t = k <= bias ? tMin : (k >= bias + tMax ? tMax : k - bias)
                    if q < t { break }
                    output.append(digit(t + (q - t) % (base - t)))
                    q = (q - t) / (base - t)
                    k += base
                }
                output.append(digit(q))
                bias = adapt(delta, handled + 1, handled == basic)
                delta = 0
                handled += 1
            }
            delta += 1
            n += 1
        }
        return String(output)
    }
}
