#if os(Linux)
import CacheSemantics

/// Where a request goes: the URL sent to the origin and what the cache keys it by.
struct Target: Sendable, Equatable {
    /// `http://authority/path?query`, as the origin will be asked for it: the authority in
    /// normal form, the path and query exactly as the client sent them (RFC 9110 §7.7).
    var url: String
    /// The authority (`host[:port]`, the host in lower case, no default port, RFC 9110
    /// §4.2.3), the forwarded `Host` (RFC 9112 §3.2.2).
    var authority: String

    /// The path and query of ``url``: what goes on the request line (RFC 9112 §3.2.1).
    var pathAndQuery: Substring {
        Substring(url.utf8.dropFirst("http://".utf8.count + authority.utf8.count))
    }
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
        for member in fields.listMembers(named: .connection) { names.insert(ASCII.lowercased(String(member))) }
        guard fields.contains(where: { names.contains($0.lowercasedName) }) else { return fields }
        return HeaderFields(fields.filter { !names.contains($0.lowercasedName) })
    }

    /// Appends this proxy to `Via` (RFC 9110 §7.6.3): `1.1 name` for a message received
    /// over HTTP/1.1.
    static func addingVia(_ fields: inout HeaderFields, minorVersion: Int, name: String) {
        fields.append(name: .via, value: "1.\(minorVersion) \(name)")
    }

    /// An absolute-form target (`http://host[:port]/path?query`, RFC 9112 §3.2.2) as a
    /// ``Target``: the authority checked (RFC 3986 §3.2.2–§3.2.3, RFC 9110 §4.2.1, §4.2.4) and
    /// normalized, the path and query kept byte for byte, an empty path sent as `/` (RFC 9112
    /// §3.2.1), a fragment dropped.
    /// - Returns: `nil` when `target` is not an `http` URL.
    /// - Throws: ``URIAuthority/Invalid`` when its authority is not `host[:port]`.
    static func absoluteTarget(_ target: String) throws(URIAuthority.Invalid) -> Target? {
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

    /// A path as the most lenient origin might read it, for telling the proxy's own paths and
    /// dot segments apart from everything else; never what is forwarded or keyed.
    ///
    /// Percent-escapes are decoded until none is left (`%255F` is `_`), `\` counts as `/`,
    /// runs of `/` as one, `;parameters` are dropped from each segment, and dot segments are
    /// removed (RFC 3986 §5.2.4).
    /// - Returns: The path so read, and whether a `..` reached above the root.
    static func lenientReading(ofPath path: Substring) -> (path: String, climbsAboveRoot: Bool) {
        var bytes = Array(path.utf8)
        while let decoded = percentDecoded(bytes) { bytes = decoded }
        var segments: [ArraySlice<UInt8>] = []
        var climbsAboveRoot = false
        var endsWithSlash = false
        for raw in bytes.split(omittingEmptySubsequences: false, whereSeparator: { $0 == 0x2F || $0 == 0x5C }) {
            let segment = raw.prefix { $0 != UInt8(ascii: ";") }
            endsWithSlash = segment.isEmpty || segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8)
            if segment.elementsEqual("..".utf8) {
                if segments.popLast() == nil { climbsAboveRoot = true }
            } else if !endsWithSlash {
                segments.append(segment)
            }
        }
        var reading = segments.reduce(into: [UInt8]()) { $0 += [UInt8(ascii: "/")] + $1 }
        if endsWithSlash || reading.isEmpty { reading.append(UInt8(ascii: "/")) }
        return (String(decoding: reading, as: UTF8.self), climbsAboveRoot)
    }

    /// `bytes` with each `%XX` decoded; `nil` when there is none.
    private static func percentDecoded(_ bytes: [UInt8]) -> [UInt8]? {
        var out: [UInt8] = []
        var index = 0
        var decodedAny = false
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count, let high = ASCII.hexValue(bytes[index + 1]),
                let low = ASCII.hexValue(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
                decodedAny = true
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return decodedAny ? out : nil
    }

    /// The fields and body of the proxy's own answers (errors, purge results): a line of plain
    /// text saying what happened, never stored.
    static func plainText(_ text: String) -> (fields: HeaderFields, body: [UInt8]) {
        (["Content-Type": "text/plain; charset=utf-8", "Cache-Control": "no-store"], Array((text + "\n").utf8))
    }
}
#endif
