/// The parts of an absolute URI that cache keys and invalidation need (RFC 3986 §3).
struct URIParts: Hashable {
    var scheme: String
    var authority: String?
    var path: String
    var query: String?

    /// Splits `text`; `nil` when it has no valid scheme.
    init?(_ text: some StringProtocol) {
        let value = Substring(text)
        guard let colon = value.utf8.firstIndex(of: UInt8(ascii: ":")), let first = value.utf8.first,
            ASCII.isAlpha(first)
        else {
            return nil
        }
        let scheme = value[..<colon]
        guard
            scheme.utf8.allSatisfy({
                ASCII.isAlpha($0) || ASCII.isDigit($0) || $0 == UInt8(ascii: "+") || $0 == UInt8(ascii: "-")
                    || $0 == UInt8(ascii: ".")
            })
        else { return nil }
        self.scheme = ASCII.lowercased(scheme)
        var rest = value[value.utf8.index(after: colon)...]
        if let hash = rest.utf8.firstIndex(of: UInt8(ascii: "#")) { rest = rest[..<hash] }
        if let question = rest.utf8.firstIndex(of: UInt8(ascii: "?")) {
            query = String(rest[rest.utf8.index(after: question)...])
            rest = rest[..<question]
        }
        if ASCII.startsWith(rest, "//") {
            let afterSlashes = Substring(rest.utf8.dropFirst(2))
            let end = afterSlashes.utf8.firstIndex(of: UInt8(ascii: "/")) ?? afterSlashes.endIndex
            authority = String(afterSlashes[..<end])
            path = String(afterSlashes[end...])
        } else {
            path = String(rest)
        }
    }

    init(scheme: String, authority: String?, path: String, query: String?) {
        self.scheme = scheme
        self.authority = authority
        self.path = path
        self.query = query
    }

    /// The origin (scheme, host, port; no userinfo) after normalization, for same-origin
    /// checks (RFC 9110 §4.3.1).
    var origin: String {
        var authority = Substring(normalizedAuthority ?? "")
        if let at = authority.utf8.lastIndex(of: UInt8(ascii: "@")) {
            authority = authority[authority.utf8.index(after: at)...]
        }
        return "\(scheme)://\(authority)"
    }

    /// Host lowered, default port and empty port removed, the port without leading zeros
    /// (RFC 9110 §4.2.3, RFC 3986 §6.2.3).
    var normalizedAuthority: String? {
        guard let authority else { return nil }
        var userinfo = ""
        var hostPort = Substring(authority)
        if let at = hostPort.utf8.lastIndex(of: UInt8(ascii: "@")) {
            userinfo = String(hostPort[..<hostPort.utf8.index(after: at)])
            hostPort = hostPort[hostPort.utf8.index(after: at)...]
        }
        // host = IP-literal / reg-name, then [ ":" port ] (RFC 3986 §3.2.2, §3.2.3).
        var host = hostPort
        var port: Substring = ""
        let hostEnd =
            ASCII.startsWith(hostPort, "[")
            ? hostPort.utf8.firstIndex(of: UInt8(ascii: "]")).map(hostPort.utf8.index(after:)) : nil
        if let colon = hostPort[(hostEnd ?? hostPort.startIndex)...].utf8.firstIndex(of: UInt8(ascii: ":")) {
            host = hostPort[..<colon]
            port = hostPort[hostPort.utf8.index(after: colon)...]
        }
        guard port.utf8.allSatisfy(ASCII.isDigit) else {
            // Not a valid port: keep the authority as it is, only its case folded.
            return userinfo + ASCII.lowercased(hostPort)
        }
        let defaultPort = scheme == "http" ? 80 : scheme == "https" ? 443 : nil
        var result = userinfo + ASCII.lowercased(host)
        // The same number is the same port: `080` is `80`. Beyond 65535 it is no port: kept as written.
        if let number = ASCII.parseDigits(port, cap: 65536), number != defaultPort {
            result += ":" + (number <= 65535 ? String(number) : String(port))
        }
        return result
    }

    /// The form a cache key holds (RFC 9110 §4.2.3): scheme and host lowered, the default port
    /// removed, an empty path as "/", the fragment dropped. The path and query stay byte for
    /// byte as they are: a proxy forwards them unchanged (RFC 9110 §7.7), and two spellings
    /// that RFC 3986 §6.2.2 calls equivalent (`%7E` and `~`, `/a/../b` and `/b`) may still be
    /// two resources to an origin that reads them differently; one stored response must never
    /// answer both.
    var normalized: String {
        var out = scheme + ":"
        if let authority = normalizedAuthority { out += "//" + authority }
        out += authority != nil && path.isEmpty ? "/" : path
        if let query { out += "?" + query }
        return out
    }

    /// Whether `uri` is already in the form ``normalized`` gives it, so that a key is made of it
    /// as it is, with no string split and built again (most request targets a cache sees,
    /// every key it made itself): ASCII, a scheme in lower case, then `//` and an authority
    /// without upper-case letters, userinfo or an IP literal, and with no port or a port of
    /// digits without a leading zero that is not the scheme's default, a path that is not
    /// empty, and no fragment. One pass over the bytes; `false` is only "not sure": the URI is
    /// then split and normalized.
    static func isNormalized(_ uri: String) -> Bool {
        ASCII.withUTF8(uri) { bytes in
            let count = bytes.count
            guard count > 0, bytes[0] >= UInt8(ascii: "a"), bytes[0] <= UInt8(ascii: "z") else { return false }
            // scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 §3.1), in lower case.
            var index = 0
            while index < count, bytes[index] != UInt8(ascii: ":") {
                let byte = bytes[index]
                guard
                    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || ASCII.isDigit(byte)
                        || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
                else { return false }
                index += 1
            }
            let scheme = UnsafeBufferPointer(rebasing: bytes[0..<index])
            guard index + 2 < count, bytes[index + 1] == UInt8(ascii: "/"), bytes[index + 2] == UInt8(ascii: "/")
            else { return false }
            index += 3
            // The authority ends at the path or the query (RFC 3986 §3.2).
            var colon: Int?
            while index < count, bytes[index] != UInt8(ascii: "/"), bytes[index] != UInt8(ascii: "?") {
                switch bytes[index] {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "@"), UInt8(ascii: "["), UInt8(ascii: "#"),
                    0x80...:
                    return false
                case UInt8(ascii: ":") where colon == nil: colon = index
                default: break
                }
                index += 1
            }
            // An empty path is written "/".
            guard index < count, bytes[index] == UInt8(ascii: "/") else { return false }
            if let colon {
                let port = UnsafeBufferPointer(rebasing: bytes[(colon + 1)..<index])
                guard let first = port.first, first != UInt8(ascii: "0"),
                    let number = ASCII.parseDigits(port, cap: 65536),
                    number != (scheme.elementsEqual("http".utf8) ? 80 : scheme.elementsEqual("https".utf8) ? 443 : nil)
                else { return false }
            }
            // The path and query as they are; no fragment, and nothing to escape.
            while index < count {
                guard bytes[index] != UInt8(ascii: "#"), bytes[index] < 0x80 else { return false }
                index += 1
            }
            return true
        }
    }

    /// Resolves `reference` against this URI (RFC 3986 §5.2.2).
    func resolve(_ reference: String) -> URIParts? {
        if let absolute = URIParts(reference), !ASCII.startsWith(Substring(reference), "/") { return absolute }
        var rest = Substring(reference)
        if let hash = rest.utf8.firstIndex(of: UInt8(ascii: "#")) { rest = rest[..<hash] }
        var referenceQuery: String?
        if let question = rest.utf8.firstIndex(of: UInt8(ascii: "?")) {
            referenceQuery = String(rest[rest.utf8.index(after: question)...])
            rest = rest[..<question]
        }
        if ASCII.startsWith(rest, "//") {
            let afterSlashes = Substring(rest.utf8.dropFirst(2))
            let end = afterSlashes.utf8.firstIndex(of: UInt8(ascii: "/")) ?? afterSlashes.endIndex
            return URIParts(
                scheme: scheme, authority: String(afterSlashes[..<end]),
                path: URIParts.removeDotSegments(String(afterSlashes[end...])), query: referenceQuery)
        }
        if rest.isEmpty {
            return URIParts(scheme: scheme, authority: authority, path: path, query: referenceQuery ?? query)
        }
        if ASCII.startsWith(rest, "/") {
            return URIParts(
                scheme: scheme, authority: authority, path: URIParts.removeDotSegments(String(rest)),
                query: referenceQuery)
        }
        let base: Substring
        if authority != nil && path.isEmpty {
            base = "/"
        } else if let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) {
            base = path[..<path.utf8.index(after: slash)]
        } else {
            base = ""
        }
        return URIParts(
            scheme: scheme, authority: authority, path: URIParts.removeDotSegments(String(base) + rest),
            query: referenceQuery)
    }

    /// RFC 3986 §5.2.4.
    static func removeDotSegments(_ path: String) -> String {
        guard path.utf8.contains(UInt8(ascii: ".")) else { return path }
        var output: [Substring] = []
        // Split on the "/" byte: a Character split would miss "/" followed by a combining mark.
        let segments = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(
            Substring.init)
        for (index, segment) in segments.enumerated() {
            let isLast = index == segments.count - 1
            if segment.utf8.elementsEqual(".".utf8) {
                if isLast { output.append("") }
            } else if segment.utf8.elementsEqual("..".utf8) {
                if output.count > 1 || (output.count == 1 && !output[0].isEmpty) { output.removeLast() }
                if isLast { output.append("") }
            } else {
                output.append(segment)
            }
        }
        var result = output.joined(separator: "/")
        if ASCII.startsWith(Substring(path), "/") && !ASCII.startsWith(Substring(result), "/") { result = "/" + result }
        return result
    }
}

extension ASCII {
    static func upperHex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x41 + nibble - 10 }

    /// unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~" (RFC 3986 §2.3).
    static func isUnreserved(_ byte: UInt8) -> Bool {
        isAlpha(byte) || isDigit(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
    }

    /// The value of a hex digit of either case (`HEXDIG`, RFC 3986 §2.1); `nil` for any other byte.
    package static func hexValue(_ byte: UInt8) -> UInt8? {
        if isDigit(byte) { return byte - 0x30 }
        let lowered = lower(byte)
        if lowered >= 0x61 && lowered <= 0x66 { return lowered - 0x61 + 10 }
        return nil
    }
}

/// The primary cache key of a request: its method and target URI (RFC 9111 §2, §4.1), the URI
/// compared as RFC 9110 §4.2.3 allows and no further: scheme and host case-insensitively, the
/// default port the same as none. The path and query are kept byte for byte as the request
/// sends them (RFC 9110 §7.7), so `/a%2Fb`, `/a/b` and `/a/%62` are three keys.
///
/// `GET` and `HEAD` share the `GET` key, because a stored `GET` response answers a `HEAD`
/// request (RFC 9110 §9.3.2). ``primaryKey`` is the URI alone for `GET`, so stored URLs
/// read naturally, and `METHOD URI` otherwise.
public struct CacheKey: Hashable, Sendable, CustomStringConvertible {
    /// The method the stored response answers.
    public var method: String
    /// The target URI, normalized as ``normalize(_:)`` does.
    public var uri: String

    /// The key of a request for `uri` with `method`; `nil` when `uri` is not an absolute URI.
    public init?(method: String, uri: String) {
        guard let normalized = Self.normalize(uri) else { return nil }
        self.method = method == "HEAD" ? "GET" : method
        self.uri = normalized
    }

    /// The key as one string: the URI for `GET`, else `METHOD URI`.
    public var primaryKey: String { method == "GET" ? uri : "\(method) \(uri)" }

    public var description: String { primaryKey }

    /// `uri` in the form a key holds, or `nil` when it is not an absolute URI: scheme and host
    /// in lower case, the default port and an empty one left out, an empty path as `/`, the
    /// fragment dropped (RFC 9110 §4.2.3); path and query unchanged.
    public static func normalize(_ uri: String) -> String? {
        URIParts.isNormalized(uri) ? uri : URIParts(uri)?.normalized
    }

    /// `uri` with the dot segments of its path removed (RFC 3986 §5.2.4) and without its
    /// fragment: the form a client sends, as URLSession on Linux sends `/a/./b/../c` as `/a/c`.
    /// `uri` itself when it has neither, or is not an absolute URI.
    package static func removingDotSegments(_ uri: String) -> String {
        // Most URLs have neither a "/." nor a "#": one pass over the bytes says so.
        let mayChange = ASCII.withUTF8(uri) { bytes in
            var previous: UInt8 = 0
            for byte in bytes {
                if byte == UInt8(ascii: "#") || (byte == UInt8(ascii: ".") && previous == UInt8(ascii: "/")) {
                    return true
                }
                previous = byte
            }
            return false
        }
        guard mayChange, let parts = URIParts(uri) else { return uri }
        var out = parts.scheme + ":"
        if let authority = parts.authority { out += "//" + authority }
        out += URIParts.removeDotSegments(parts.path)
        if let query = parts.query { out += "?" + query }
        return out
    }
}
