#if os(Linux)
import CacheSemantics

/// Where a request goes: the URL sent to the origin and what the cache keys it by.
struct Target: Sendable, Equatable {
    /// `http://authority/path?query`, as the origin will be asked for it.
    var url: String
    /// The authority (`host[:port]`), the forwarded `Host` (RFC 9112 §3.2.2).
    var authority: String
}

enum Messages {
    /// Fields that describe one connection, never forwarded or stored (RFC 9110 §7.6.1):
    /// these, and every field `Connection` names.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
    ]

    /// `fields` without hop-by-hop fields and the ones `Connection` nominates.
    static func removingHopByHop(_ fields: HeaderFields) -> HeaderFields {
        var names = hopByHop
        for member in fields.listMembers(named: "Connection") { names.insert(ASCII.lowercased(String(member))) }
        guard fields.contains(where: { names.contains($0.lowercasedName) }) else { return fields }
        return HeaderFields(fields.filter { !names.contains($0.lowercasedName) })
    }

    /// Appends this proxy to `Via` (RFC 9110 §7.6.3): `1.1 name` for a message received
    /// over HTTP/1.1.
    static func addingVia(_ fields: inout HeaderFields, minorVersion: Int, name: String) {
        fields.append(name: "Via", value: "1.\(minorVersion) \(name)")
    }

    /// Splits an absolute-form target (`http://host[:port]/path?query`, RFC 9112 §3.2.2).
    /// `nil` when it is not an `http` URL with an authority.
    static func absoluteTarget(_ target: String) -> Target? {
        let bytes = Array(target.utf8)
        let scheme = Array("http://".utf8)
        guard bytes.count > scheme.count,
            zip(bytes, scheme).allSatisfy({ ASCII.lower($0.0) == $0.1 })
        else { return nil }
        let rest = bytes[scheme.count...]
        let end =
            rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? rest.endIndex
        let authority = String(decoding: rest[..<end], as: UTF8.self)
        guard !authority.isEmpty, !authority.utf8.contains(UInt8(ascii: "@")) else { return nil }
        var path = String(decoding: rest[end...], as: UTF8.self)
        if let hash = path.utf8.firstIndex(of: UInt8(ascii: "#")) { path = String(path[..<hash]) }
        if !path.hasPrefix("/") { path = "/" + path }
        return Target(url: "http://" + authority + path, authority: authority)
    }

    /// `target` with its URL normalized (RFC 3986 §6.2.2, RFC 9110 §4.2.3): host in lower
    /// case, default port dropped, dot segments removed, percent-encodings in upper case with
    /// unreserved characters decoded.
    static func normalized(_ target: Target) -> Target? {
        CacheKey.normalize(target.url).flatMap(absoluteTarget)
    }

    /// An origin-form path and query (`/a/../b?q`), normalized as ``normalized(_:)`` does;
    /// `nil` when it does not start with `/`.
    static func normalizedPathAndQuery(_ pathAndQuery: String) -> String? {
        guard pathAndQuery.hasPrefix("/"), let url = CacheKey.normalize("http://h" + pathAndQuery) else { return nil }
        return String(url.dropFirst("http://h".count))
    }

    /// The fields and body of the proxy's own answers (errors, purge results): a line of plain
    /// text saying what happened, never stored.
    static func plainText(_ text: String) -> (fields: HeaderFields, body: [UInt8]) {
        (["Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"], Array((text + "\n").utf8))
    }
}
#endif
