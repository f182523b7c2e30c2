/// Partitions of one cache: a user, a top-level site, a tenant. A cache key may hold more than
/// the method and target URI (RFC 9111 §2); a partition's name is part of every key stored in
/// it, so a response stored in one partition is never found by a request in another, nor by
/// one in none (the unpartitioned cache, whose keys are as they always were).
///
/// A partitioned key is `U+001F`, the name, `U+001F`, then the key within the partition. A
/// name holds no control character and no key of the unpartitioned cache starts with one (a
/// URI, a method or a marker do not), so the encoding is unambiguous: a partition named like a
/// URL or like another key cannot collide with it.
public enum CachePartition {
    /// Names are at most this many bytes of UTF-8.
    public static let maximumLength = 512

    private static let separator: Character = "\u{1F}"

    /// Why `name` cannot name a partition, in words; `nil` when it can. A name is any
    /// non-empty UTF-8 string of at most ``maximumLength`` bytes without control characters.
    public static func problem(with name: String) -> String? {
        if name.isEmpty { return "a partition name cannot be empty" }
        if name.utf8.count > maximumLength {
            return "a partition name is at most \(maximumLength) bytes of UTF-8, not \(name.utf8.count)"
        }
        if let control = name.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
            let code = String(control.value, radix: 16, uppercase: true)
            let padded = String(repeating: "0", count: max(0, 4 - code.count)) + code
            return "a partition name cannot hold control characters (it holds U+\(padded))"
        }
        return nil
    }

    /// `key` (a primary key or an index tag) as stored in `partition`; `key` itself for none
    /// (inlined: an unpartitioned request's key costs nothing more).
    @inlinable
    public static func key(_ key: String, in partition: String?) -> String {
        guard let partition else { return key }
        return prefix(of: partition) + key
    }

    /// What every key stored in `partition` starts with.
    public static func prefix(of partition: String) -> String {
        String(separator) + partition + String(separator)
    }

    /// The partition `key` is stored in (`nil`: none) and the key within it.
    public static func split(_ key: String) -> (partition: String?, key: String) {
        guard key.first == separator else { return (nil, key) }
        let rest = key.dropFirst()
        guard let end = rest.firstIndex(of: separator) else { return (nil, key) }
        return (String(rest[..<end]), String(rest[rest.index(after: end)...]))
    }

    /// The prefixes of every primary key under which a response of `origin` (`scheme://host[:port]`,
    /// as ``CacheGroups/origin(of:)`` gives it) is stored in `partition`: its `GET` key, a
    /// `POST` keyed by its body, a `QUERY` (keyed by its content), and the exchange's
    /// No-Vary-Search marker of its paths.
    public static func keyPrefixes(of origin: String, in partition: String?) -> [String] {
        ["", "POST ", "NVS ", "QUERY "].map { key($0 + origin + "/", in: partition) }
    }
}

/// `Clear-Site-Data` (W3C Clear Site Data): a response asking that what is kept for its origin
/// be removed. A cache acts on the `"cache"` and `"*"` types.
public enum ClearSiteData {
    /// Whether `fields` ask for the origin's cache to be cleared: a member of the field's
    /// comma-separated list is exactly `"cache"` or `"*"`, quotes included (§3.1; §4.2 parses
    /// each member with whitespace trimmed and ignores types it does not know, and any member
    /// that is not such a quoted string).
    public static func clearsCache(_ fields: HeaderFields) -> Bool {
        for line in fields.values(named: .clearSiteData) {
            for member in line.split(separator: ",", omittingEmptySubsequences: false) {
                let type = ASCII.trimmed(member)
                if type == "\"cache\"" || type == "\"*\"" { return true }
            }
        }
        return false
    }

    /// The origin whose stored responses a response to a request for `uri` with `fields`
    /// removes; `nil` when it removes none. The header is honoured only from a potentially
    /// trustworthy URL (§4.1: `https`, or a loopback host: `localhost`, `*.localhost`,
    /// `127.0.0.0/8`, `[::1]`), as browsers do; from any other it is ignored.
    public static func clearedOrigin(uri: String, fields: HeaderFields) -> String? {
        guard fields.contains(.clearSiteData), clearsCache(fields), let parts = URIParts(uri),
            isPotentiallyTrustworthy(parts)
        else { return nil }
        return parts.origin
    }

    static func isPotentiallyTrustworthy(_ parts: URIParts) -> Bool {
        if parts.scheme == "https" || parts.scheme == "wss" { return true }
        guard let origin = URIParts(parts.origin), var host = origin.normalizedAuthority else { return false }
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            return host[host.index(after: host.startIndex)..<close] == "::1"
        }
        if let colon = host.lastIndex(of: ":") { host = String(host[..<colon]) }
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127"
            && octets.allSatisfy { ASCII.parseDigits($0, cap: 256).map { $0 <= 255 } ?? false }
    }
}
