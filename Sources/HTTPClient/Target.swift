#if os(Linux)
import CacheSemantics

/// Where a request goes: the URL sent to the origin and what the cache keys it by.
package struct Target: Sendable, Equatable {
    /// The URL schemes the client speaks (RFC 9110 §4.2).
    package enum Scheme: String, Sendable {
        /// `http` (RFC 9110 §4.2.1): TCP, port 80 unless the URL names one.
        case http
        /// `https` (RFC 9110 §4.2.2): TLS over TCP, port 443 unless the URL names one.
        case https

        /// The port of a URL that names none.
        package var defaultPort: UInt16 { self == .http ? 80 : 443 }
    }

    /// `http://authority/path?query` or `https://…`, as the origin will be asked for it: the
    /// scheme in lower case, the authority in normal form, the path and query exactly as the
    /// client sent them (RFC 9110 §7.7).
    ///
    /// Always what ``absolute(_:)`` makes of it: `scheme://`, the authority in normal form, a
    /// path that begins with `/` and no fragment. Targets are made only by ``absolute(_:)`` and
    /// ``forwarding(_:)``, so a request made from one is sent without reading its URL again.
    package private(set) var url: String
    /// The authority (`host[:port]`, the host in lower case, no default port, RFC 9110
    /// §4.2.3), the forwarded `Host` (RFC 9112 §3.2.2).
    package private(set) var authority: String

    /// The scheme of ``url``: `http` and `https` URLs with one authority are different
    /// origins (RFC 9110 §4.3.1), never keyed, pooled or answered as one another. Kept, not
    /// read from ``url`` each time: a request asked it five times.
    package private(set) var scheme: Scheme

    /// The path and query of ``url``: what goes on the request line (RFC 9112 §3.2.1).
    package var pathAndQuery: Substring {
        Substring(url.utf8.dropFirst(scheme.rawValue.utf8.count + "://".utf8.count + authority.utf8.count))
    }

    /// ``pathAndQuery`` without its trailing slashes: what a reverse proxy puts the paths it
    /// forwards under (``forwarding(_:)``); empty for an origin's root.
    package var basePath: Substring {
        let path = pathAndQuery
        // Counted in the bytes in place: dropping a character at a time cost ~1,000
        // instructions a request.
        let slashes = ASCII.withUTF8(path) { bytes in bytes.reversed().prefix { $0 == UInt8(ascii: "/") }.count }
        return Substring(path.utf8.dropLast(slashes))
    }

    /// The target a reverse proxy in front of this origin forwards `pathAndQuery` (a
    /// request-target in origin-form, RFC 9112 §3.2.1) to: ``basePath`` then `pathAndQuery`,
    /// byte for byte (RFC 9110 §7.7), on this scheme and authority. A fragment is dropped and
    /// an empty path sent as `/`, as ``absolute(_:)`` does.
    package func forwarding(_ pathAndQuery: Substring) -> Target {
        var tail = pathAndQuery
        if let hash = ASCII.firstIndex(of: UInt8(ascii: "#"), in: tail) { tail = tail[..<hash] }
        // This URL through its base path (empty, or beginning with `/`), then the path
        // forwarded, written into one string.
        let base = basePath
        let through = url.utf8.count - self.pathAndQuery.utf8.count + base.utf8.count
        let slash = base.isEmpty && tail.utf8.first != UInt8(ascii: "/")
        var forwarded = ""
        forwarded.reserveCapacity(through + 1 + tail.utf8.count)
        forwarded += Substring(url.utf8.prefix(through))
        if slash { forwarded += "/" }
        forwarded += tail
        return Target(url: forwarded, authority: authority, scheme: scheme)
    }

    /// A target of `url` as ``absolute(_:)`` would make it, its scheme read from it: for tests, to
    /// compare with (only ``absolute(_:)`` and ``forwarding(_:)`` make the targets requests use).
    init(url: String, authority: String) {
        self.init(url: url, authority: authority, scheme: url.utf8.starts(with: "https:".utf8) ? .https : .http)
    }

    private init(url: String, authority: String, scheme: Scheme) {
        self.url = url
        self.authority = authority
        self.scheme = scheme
    }

    /// An absolute-form target (`http://host[:port]/path?query` or `https://…`, RFC 9112
    /// §3.2.2) as a target: the scheme lower-cased, the authority checked (RFC 3986
    /// §3.2.2–§3.2.3, RFC 9110 §4.2.1, §4.2.4) and normalized (the scheme's default port
    /// dropped, RFC 9110 §4.2.3), the path and query kept byte for byte, an empty path sent as
    /// `/` (RFC 9112 §3.2.1), a fragment dropped.
    /// - Returns: `nil` when `target` is not an `http` or `https` URL.
    /// - Throws: ``URIAuthority/Invalid`` when its authority is not `host[:port]`.
    package static func absolute(_ target: String) throws(URIAuthority.Invalid) -> Target? {
        guard let scheme = [Scheme.https, .http].first(where: { hasScheme(target, $0) }) else { return nil }
        let rest = Substring(target.utf8.dropFirst(scheme.rawValue.utf8.count + "://".utf8.count))
        let end =
            rest.utf8.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? rest.endIndex
        let authority = try URIAuthority(rest[..<end]).normalized(defaultPort: scheme.defaultPort)
        var pathAndQuery = rest[end...]
        if let hash = pathAndQuery.utf8.firstIndex(of: UInt8(ascii: "#")) { pathAndQuery = pathAndQuery[..<hash] }
        let path = pathAndQuery.utf8.first == UInt8(ascii: "/") ? pathAndQuery : "/" + pathAndQuery
        return Target(url: scheme.rawValue + "://" + authority + path, authority: authority, scheme: scheme)
    }

    /// Whether `target` begins with `scheme://`, the scheme in any case (RFC 3986 §3.1).
    private static func hasScheme(_ target: String, _ scheme: Scheme) -> Bool {
        let prefix = (scheme.rawValue + "://").utf8
        let bytes = target.utf8
        return bytes.count >= prefix.count && zip(bytes, prefix).allSatisfy { ASCII.lower($0.0) == $0.1 }
    }
}
#endif
