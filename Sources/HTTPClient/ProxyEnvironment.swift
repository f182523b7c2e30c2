#if os(Linux)
import CacheSemantics
import CacheSystem
import Glibc

/// The proxy a request goes through, chosen from environment variables the way curl (and so
/// URLSession on Linux) reads them.
///
/// - `http` URLs: `http_proxy`, in lower case only. A CGI script runs with the request's
///   `Proxy:` field in `HTTP_PROXY`, so the upper-case name could be set by any client
///   ("httpoxy", CVE-2016-5385); curl never reads it, nor does this.
/// - `https` URLs: `https_proxy`, else `HTTPS_PROXY`.
/// - Either, when its own variable is not set: `all_proxy`, else `ALL_PROXY`.
/// - A variable set to the empty string means no proxy (the search stops there, as in curl).
/// - `no_proxy`, else `NO_PROXY`: hosts reached directly whatever the variables above say
///   (see ``bypasses(host:)``).
///
/// A proxy is written `[http://][user[:password]@]host[:port]` with an optional trailing `/`;
/// the port defaults to 1080 as in curl. Only `http://` proxies are spoken to; any other scheme
/// (`https://`, `socks5://`…) is reported as unsupported rather than ignored, so a request never
/// goes direct when the environment asked for a proxy.
///
/// Pure logic: the variables are read once, into a value (``current()``).
package struct ProxyEnvironment: Sendable, Equatable {
    /// A proxy server (`http://`), and the credentials for its `Proxy-Authorization` (RFC 9110 §11.7.2).
    package struct Server: Sendable, Equatable {
        /// The host (an IPv6 literal in brackets) and the port, as the URL of the proxy:
        /// `http://host:port`, what ``UpstreamRequest/proxy`` takes.
        package var url: String
        /// The user name, percent-decoded; nil when the proxy URL has none.
        package var user: String?
        /// The password, percent-decoded; nil when the proxy URL has none.
        package var password: String?

        package init(url: String, user: String? = nil, password: String? = nil) {
            self.url = url
            self.user = user
            self.password = password
        }
    }

    /// How a request is to be sent.
    package enum Route: Sendable, Equatable {
        /// To the origin.
        case direct
        /// Through this proxy.
        case proxy(Server)
        /// Nowhere: the variable (named) holds a proxy that cannot be used; the text says why.
        case unusable(variable: String, reason: String)
    }

    /// The variables curl reads, by name, those that are set.
    package var variables: [String: String]

    /// The names this reads, in the order curl looks for them.
    package static let names = [
        "http_proxy", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
    ]

    /// The environment given, e.g. `["https_proxy": "http://proxy.test:3128", "no_proxy": "localhost"]`.
    package init(_ variables: [String: String]) {
        self.variables = variables.filter { Self.names.contains($0.key) }
    }

    /// The process's environment, as it is now.
    package static func current() -> ProxyEnvironment {
        var variables: [String: String] = [:]
        for name in names { variables[name] = FileDescriptor.environment(name) }
        return ProxyEnvironment(variables)
    }

    /// Where a request to `scheme://host` goes.
    /// - Parameters:
    ///   - scheme: `http` or `https` (any case); other schemes get `all_proxy` only.
    ///   - host: The URL's host: a name, an IPv4 address, or an IPv6 address with or without
    ///     its brackets.
    package func route(scheme: String, host: String) -> Route {
        if bypasses(host: host) { return .direct }
        let scheme = scheme.lowercased()
        // http: lower case only (httpoxy); others: lower case, then upper case.
        var candidates = ["\(scheme)_proxy"]
        if scheme != "http" { candidates.append("\(scheme.uppercased())_PROXY") }
        candidates += ["all_proxy", "ALL_PROXY"]
        guard let (name, value) = candidates.lazy.compactMap({ name in self.variables[name].map { (name, $0) } }).first
        else { return .direct }
        if value.isEmpty { return .direct }
        switch Self.server(value) {
        case .success(let server): return .proxy(server)
        case .failure(let failure): return .unusable(variable: name, reason: failure.reason)
        }
    }

    // MARK: no_proxy

    /// Whether `host` is reached directly by `no_proxy` (else `NO_PROXY`), as curl 7.86 and
    /// later match it:
    /// - `*` alone: every host.
    /// - Otherwise a list separated by commas (or blanks): a name matches that host and every
    ///   host in its domain (`example.com` and `.example.com` both match `example.com` and
    ///   `www.example.com`, never `notexample.com`), without regard to case, a trailing dot
    ///   ignored on either side.
    /// - For an IP-address host, the members are addresses compared as addresses, or networks
    ///   in CIDR notation (`10.0.0.0/8`, `fd00::/8`); an IPv6 address is written without brackets
    ///   (brackets are accepted too).
    /// - Ports play no part: the request's is ignored, and a member's (`example.com:8080`) too.
    package func bypasses(host: String) -> Bool {
        guard let list = variables["no_proxy"] ?? variables["NO_PROXY"], !list.isEmpty else { return false }
        if list == "*" { return true }
        let members = list.split { $0 == "," || $0 == " " || $0 == "\t" }
        var host = Substring(host)
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        if let address = IPAddress(host) {
            return members.contains { member in
                NetworkPattern(Self.withoutPort(member)).map { $0.contains(address) } ?? false
            }
        }
        let name = Self.withoutTrailingDot(host).lowercased()
        guard !name.isEmpty else { return false }
        return members.contains { member in
            var pattern = Self.withoutTrailingDot(Self.withoutPort(member))
            if pattern.hasPrefix(".") { pattern = pattern.dropFirst() }
            let domain = pattern.lowercased()
            guard !domain.isEmpty else { return false }
            return name == domain || name.hasSuffix("." + domain)
        }
    }

    private static func withoutTrailingDot(_ text: Substring) -> Substring {
        text.hasSuffix(".") ? text.dropLast() : text
    }

    /// `host` of `host:port`, `[v6]:port` and `[v6]`; a bare IPv6 address (several colons) as it is.
    private static func withoutPort(_ member: Substring) -> Substring {
        if member.hasPrefix("["), let close = member.firstIndex(of: "]") {
            return member[member.index(after: member.startIndex)..<close]
        }
        let colons = member.indices.filter { member[$0] == ":" }
        guard colons.count == 1, let colon = colons.first else { return member }
        let port = member[member.index(after: colon)...]
        guard !port.isEmpty, port.allSatisfy(\.isASCII), port.allSatisfy(\.isNumber) else { return member }
        return member[..<colon]
    }

    // MARK: The proxy's URL

    /// Why a proxy variable cannot be used.
    struct Unusable: Error {
        var reason: String
    }

    /// The server in `value`: `[http://][user[:password]@]host[:port][/]`.
    static func server(_ value: String) -> Result<Server, Unusable> {
        var rest = Substring(value)
        if let schemeEnd = rest.firstRange(of: "://") {
            let scheme = rest[..<schemeEnd.lowerBound].lowercased()
            guard scheme == "http" else {
                return .failure(
                    Unusable(
                        reason: "\(value) is a \(scheme):// proxy; only http:// proxies are supported"))
            }
            rest = rest[schemeEnd.upperBound...]
        }
        // A path after the authority ("http://proxy:3128/") is ignored, as curl ignores it.
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        var user: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userInformation = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let colon = userInformation.firstIndex(of: ":")
            user = percentDecoded(userInformation[..<(colon ?? userInformation.endIndex)])
            if let colon { password = percentDecoded(userInformation[userInformation.index(after: colon)...]) }
            guard user != nil, colon == nil || password != nil else {
                return .failure(
                    Unusable(reason: "the user information of the proxy \(value) is not valid percent-encoding"))
            }
        }
        let authority: URIAuthority
        do { authority = try URIAuthority(rest) } catch {
            return .failure(Unusable(reason: "the proxy \(value) is not [http://]host[:port]: \(error)"))
        }
        let port = authority.port ?? 1080
        return .success(Server(url: "http://\(authority.host):\(port)", user: user, password: password))
    }

    /// `%XX` decoded (UTF-8); nil when a `%` is not followed by two hexadecimal digits or the
    /// result is not UTF-8.
    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// An IPv4 or IPv6 address, as bytes in network order.
private struct IPAddress: Equatable {
    var bytes: [UInt8]

    init?(_ text: Substring) {
        var storage = [UInt8](repeating: 0, count: 16)
        let text = String(text)
        if text.contains(":") {
            guard inet_pton(AF_INET6, text, &storage) == 1 else { return nil }
            bytes = storage
        } else {
            guard inet_pton(AF_INET, text, &storage) == 1 else { return nil }
            bytes = Array(storage.prefix(4))
        }
    }
}

/// An address or a network in CIDR notation (`192.168.0.0/16`, RFC 4632 §3.1; `fd00::/8`, RFC 4291 §2.3).
private struct NetworkPattern {
    var address: IPAddress
    /// How many leading bits must be equal.
    var bits: Int

    init?(_ text: Substring) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else { return nil }
        let length = address.bytes.count * 8
        if parts.count == 2 {
            guard let bits = Int(parts[1]), (0...length).contains(bits) else { return nil }
            self.bits = bits
        } else {
            bits = length
        }
        self.address = address
    }

    func contains(_ other: IPAddress) -> Bool {
        guard other.bytes.count == address.bytes.count else { return false }
        var left = bits
        for (mine, theirs) in zip(address.bytes, other.bytes) where left > 0 {
            let mask: UInt8 = left >= 8 ? 0xFF : ~(0xFF >> UInt8(left))
            guard mine & mask == theirs & mask else { return false }
            left -= 8
        }
        return true
    }
}
#endif
