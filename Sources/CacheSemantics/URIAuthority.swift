/// The `host [ ":" port ]` of an `http` URI or a `Host` field value, checked against RFC 3986's
/// grammar (§3.2.2 `host`, §3.2.3 `port = *DIGIT`) and RFC 9110's rules for `http` URIs: a host
/// is never empty (§4.2.1) and user information is an error (§4.2.4).
///
/// Beyond the grammar, a port must be one a TCP connection can use (1–65535): `h:99999` and
/// `h:0` name no server. An empty port (`h:`) is the scheme's default (RFC 3986 §3.2.3).
package struct URIAuthority: Hashable, Sendable {
    /// The host as written: a registered name or IPv4 address, or an IP literal in its brackets.
    package var host: String
    /// The port; `nil` when there is none or it is empty, meaning the scheme's default.
    package var port: UInt16?

    /// Why a text is not an authority: a sentence a log or a `400` can carry.
    package struct Invalid: Error, Hashable, CustomStringConvertible {
        package var description: String
    }

    /// Parses `text`.
    /// - Throws: ``Invalid``, saying what is wrong.
    package init(_ text: some StringProtocol) throws(Invalid) {
        var text = String(text)
        let parsed = text.withUTF8 { Self.parse($0) }
        switch parsed {
        case .success(let (hostCount, port)):
            host = String(decoding: text.utf8.prefix(hostCount), as: UTF8.self)
            self.port = port
        case .failure(let invalid):
            throw invalid
        }
    }

    /// Checks `bytes` without building a value: `nil` when they are an authority.
    package static func check(_ bytes: UnsafeBufferPointer<UInt8>) -> Invalid? {
        if case .failure(let invalid) = parse(bytes) { return invalid }
        return nil
    }

    /// `host[:port]` in normal form (RFC 9110 §4.2.3, RFC 3986 §6.2.3): the host in lower case,
    /// the port in decimal without leading zeros, left out when it is `defaultPort`.
    package func normalized(defaultPort: UInt16?) -> String {
        let host = ASCII.lowercased(host)
        guard let port, port != defaultPort else { return host }
        return host + ":" + String(port)
    }

    /// The host as a name lookup takes it: an IP literal without its brackets.
    package var lookupHost: String {
        guard host.utf8.first == UInt8(ascii: "["), host.utf8.last == UInt8(ascii: "]") else { return host }
        return String(decoding: host.utf8.dropFirst().dropLast(), as: UTF8.self)
    }

    // MARK: Grammar

    /// The host's length and the port.
    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<(Int, UInt16?), Invalid> {
        if let at = bytes.firstIndex(of: UInt8(ascii: "@")) {
            return .failure(
                Invalid(
                    description:
                        "it has user information (\"\(text(bytes[..<at]))@\"), which an http URI must not carry (RFC 9110 §4.2.4)"
                ))
        }
        var index = 0
        if bytes.first == UInt8(ascii: "[") {
            // IP-literal = "[" ( IPv6address / IPvFuture ) "]"
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else {
                return .failure(Invalid(description: "its IP literal has no closing ']' (RFC 3986 §3.2.2)"))
            }
            let literal = UnsafeBufferPointer(rebasing: bytes[1..<close])
            guard isIPv6(literal) || isIPvFuture(literal) else {
                return .failure(
                    Invalid(
                        description: "[\(text(literal[...]))] is not an IPv6 address or IPvFuture (RFC 3986 §3.2.2)"))
            }
            index = close + 1
        } else {
            // reg-name = *( unreserved / pct-encoded / sub-delims ); IPv4address is one.
            while index < bytes.count, bytes[index] != UInt8(ascii: ":") {
                let byte = bytes[index]
                if byte == UInt8(ascii: "%") {
                    guard index + 2 < bytes.count, ASCII.hexValue(bytes[index + 1]) != nil,
                        ASCII.hexValue(bytes[index + 2]) != nil
                    else {
                        return .failure(
                            Invalid(description: "its host has a '%' that does not start %XX (RFC 3986 §2.1)"))
                    }
                    index += 3
                    continue
                }
                guard ASCII.isUnreserved(byte) || isSubDelimiter(byte) else {
                    return .failure(
                        Invalid(
                            description:
                                "its host contains \(describe(byte)); a host is letters, digits, -._~!$&'()*+,;= and %XX (RFC 3986 §3.2.2)"
                        ))
                }
                index += 1
            }
            guard index > 0 else { return .failure(Invalid(description: "its host is empty (RFC 9110 §4.2.1)")) }
        }
        let hostCount = index
        guard index < bytes.count else { return .success((hostCount, nil)) }
        guard bytes[index] == UInt8(ascii: ":") else {
            return .failure(
                Invalid(
                    description:
                        "its host is followed by \(describe(bytes[index])), where only \":port\" may be (RFC 3986 §3.2)"
                ))
        }
        let digits = bytes[(index + 1)...]
        guard !digits.isEmpty else { return .success((hostCount, nil)) }
        guard digits.allSatisfy(ASCII.isDigit) else {
            return .failure(
                Invalid(
                    description: "its port \"\(text(digits))\" is not a number: a port is digits only (RFC 3986 §3.2.3)"
                ))
        }
        // Saturated past 65535: the number is only reported.
        let value = digits.reduce(0) { min($0 * 10 + Int($1 - 0x30), 1 << 20) }
        guard value <= Int(UInt16.max) else {
            return .failure(Invalid(description: "its port \(text(digits)) is larger than 65535, the largest TCP port"))
        }
        guard value > 0 else {
            return .failure(Invalid(description: "its port is 0, which no server can be reached on"))
        }
        return .success((hostCount, UInt16(value)))
    }

    /// IPv6address (RFC 3986 §3.2.2): eight 16-bit groups of 1–4 hex digits, the last two
    /// possibly an IPv4address, with at most one "::" standing for one or more zero groups.
    private static func isIPv6(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var doubleColon: Int?
        var index = 0
        while index + 1 < bytes.count {
            if bytes[index] == UInt8(ascii: ":") && bytes[index + 1] == UInt8(ascii: ":") {
                guard doubleColon == nil else { return false }
                doubleColon = index
                index += 2
            } else {
                index += 1
            }
        }
        let head: Slice<UnsafeBufferPointer<UInt8>>
        let tail: Slice<UnsafeBufferPointer<UInt8>>?
        if let doubleColon {
            head = bytes[..<doubleColon]
            tail = bytes[(doubleColon + 2)...]
        } else {
            head = bytes[...]
            tail = nil
        }
        guard let headGroups = groups(head, endsAddress: tail == nil) else { return false }
        guard let tail else { return headGroups == 8 }
        guard let tailGroups = groups(tail, endsAddress: true) else { return false }
        return headGroups + tailGroups <= 7
    }

    /// How many 16-bit groups `part` (`h16 *( ":" h16 )`, or empty) holds; an IPv4address
    /// last counts two, when `part` ends the address.
    private static func groups(_ part: Slice<UnsafeBufferPointer<UInt8>>, endsAddress: Bool) -> Int? {
        guard !part.isEmpty else { return 0 }
        let pieces = part.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        var count = 0
        for (number, piece) in pieces.enumerated() {
            if endsAddress, number == pieces.count - 1, piece.contains(UInt8(ascii: ".")) {
                guard isIPv4(piece) else { return nil }
                count += 2
            } else {
                guard (1...4).contains(piece.count), piece.allSatisfy({ ASCII.hexValue($0) != nil }) else { return nil }
                count += 1
            }
        }
        return count
    }

    /// IPv4address = dec-octet "." dec-octet "." dec-octet "." dec-octet; a dec-octet is 0–255
    /// without leading zeros (RFC 3986 §3.2.2).
    private static func isIPv4(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> Bool {
        let octets = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return octets.count == 4
            && octets.allSatisfy { octet in
                (1...3).contains(octet.count) && octet.allSatisfy(ASCII.isDigit)
                    && (octet.count == 1 || octet.first != UInt8(ascii: "0"))
                    && octet.reduce(0, { $0 * 10 + Int($1 - 0x30) }) <= 255
            }
    }

    /// IPvFuture = "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ) (RFC 3986 §3.2.2).
    private static func isIPvFuture(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = bytes.first, ASCII.lower(first) == UInt8(ascii: "v"),
            let dot = bytes.firstIndex(of: UInt8(ascii: ".")), dot > 1, dot + 1 < bytes.count
        else { return false }
        return bytes[1..<dot].allSatisfy { ASCII.hexValue($0) != nil }
            && bytes[(dot + 1)...].allSatisfy {
                ASCII.isUnreserved($0) || isSubDelimiter($0) || $0 == UInt8(ascii: ":")
            }
    }

    /// sub-delims = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "=" (RFC 3986 §2.2).
    private static func isSubDelimiter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="):
            return true
        default:
            return false
        }
    }

    private static func text(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    private static func describe(_ byte: UInt8) -> String {
        byte > 0x20 && byte < 0x7F ? "'\(Character(Unicode.Scalar(byte)))'" : "the byte 0x\(String(byte, radix: 16))"
    }
}
