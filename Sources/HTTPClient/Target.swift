#if os(Linux)
import CacheSemantics

/// Where a request goes: the URL sent to the origin and what the cache keys it by.
package struct Target: Sendable, Equatable {
    /// `http://authority/path?query`, as the origin will be asked for it: the authority in
    /// normal form, the path and query exactly as the client sent them (RFC 9110 §7.7).
    package var url: String
    /// The authority (`host[:port]`, the host in lower case, no default port, RFC 9110
    /// §4.2.3), the forwarded `Host` (RFC 9112 §3.2.2).
    package var authority: String

    /// The path and query of ``url``: what goes on the request line (RFC 9112 §3.2.1).
    package var pathAndQuery: Substring {
        Substring(url.utf8.dropFirst("http://".utf8.count + authority.utf8.count))
    }

    package init(url: String, authority: String) {
        self.url = url
        self.authority = authority
    }

    /// An absolute-form target (`http://host[:port]/path?query`, RFC 9112 §3.2.2) as a
    /// target: the authority checked (RFC 3986 §3.2.2–§3.2.3, RFC 9110 §4.2.1, §4.2.4) and
    /// normalized, the path and query kept byte for byte, an empty path sent as `/` (RFC 9112
    /// §3.2.1), a fragment dropped.
    /// - Returns: `nil` when `target` is not an `http` URL.
    /// - Throws: ``URIAuthority/Invalid`` when its authority is not `host[:port]`.
    package static func absolute(_ target: String) throws(URIAuthority.Invalid) -> Target? {
        let bytes = target.utf8
        let scheme = "http://".utf8
        guard bytes.count >= scheme.count, zip(bytes, scheme).allSatisfy({ ASCII.lower($0.0) == $0.1 }) else {
            return nil
        }
        let rest = Substring(target.utf8.dropFirst(scheme.count))
        let end =
            rest.utf8.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? rest.endIndex
        let authority = try URIAuthority(rest[..<end]).normalized(defaultPort: 80)
        var pathAndQuery = rest[end...]
        if let hash = pathAndQuery.utf8.firstIndex(of: UInt8(ascii: "#")) { pathAndQuery = pathAndQuery[..<hash] }
        let path = pathAndQuery.utf8.first == UInt8(ascii: "/") ? pathAndQuery : "/" + pathAndQuery
        return Target(url: "http://" + authority + path, authority: authority)
    }
}
#endif
