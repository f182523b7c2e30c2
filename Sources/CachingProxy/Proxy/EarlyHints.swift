#if os(Linux)
import CacheSemantics
import CacheStorage
import CacheSystem

/// `103 Early Hints` (RFC 8297) the proxy sends itself: the `Link` members with `rel=preload` or
/// `rel=preconnect` of the last response it stored for a URL, sent at once when a request for
/// that URL must wait for the origin (a miss, a revalidation, `no-cache`), so that the client
/// fetches the page's resources meanwhile. A `103` from the origin is merged: members already
/// sent are not sent twice.
///
/// Learned only from responses the cache stores (RFC 9111 §3): nothing of a `no-store` or
/// `private` response is kept, not even its links. Bounded like the proxy's other memos (LRU by
/// count and bytes); at most 16 members and 2 KiB per URL.
final class EarlyHints: Sendable {
    private let links: Locked<LRUCache<String, [String]>>
    static let membersPerURL = 16
    static let bytesPerURL = 2048

    init(capacity: Int, byteLimit: Int) {
        links = Locked(LRUCache(capacity: capacity, byteLimit: byteLimit))
    }

    /// Remembers the hints of `fields`, a response stored for `url`; a response with none
    /// forgets what was remembered (its page no longer names them).
    func learn(url: String, fields: HeaderFields) {
        let hints = Self.hintMembers(fields)
        links.withLock { cache in
            if hints.isEmpty {
                cache.removeValue(for: url)
            } else {
                let cost = MemoryCost.string(url) + hints.reduce(0) { $0 + MemoryCost.string($1) }
                cache.set(hints, for: url, cost: cost)
            }
        }
    }

    /// The `Link` members to send for `url` before its response, if any are known.
    func hints(for url: String) -> [String]? {
        links.withLock { $0.value(for: url) }
    }

    /// The `Link` members (RFC 8288 §3) of `fields` whose relation types include `preload` or
    /// `preconnect`, each as sent, within the bounds per URL. Anything that does not parse as a
    /// link is skipped (RFC 8288 §3 lets a parser ignore what it cannot read).
    static func hintMembers(_ fields: HeaderFields) -> [String] {
        var kept: [String] = []
        var bytes = 0
        for value in fields.values(named: "Link") {
            for member in members(of: Substring(value)) where isHint(member) {
                let text = String(member)
                guard kept.count < membersPerURL, bytes + text.utf8.count <= bytesPerURL else { return kept }
                if !kept.contains(text) {
                    kept.append(text)
                    bytes += text.utf8.count
                }
            }
        }
        return kept
    }

    /// `value` split at the commas between link members: not those inside `<…>` or a quoted
    /// string. Each trimmed of spaces; empty ones dropped.
    static func members(of value: Substring) -> [Substring] {
        var result: [Substring] = []
        var start = value.startIndex
        var inTarget = false
        var inQuotes = false
        var escaped = false
        var index = value.startIndex
        while index < value.endIndex {
            let character = value[index]
            if escaped {
                escaped = false
            } else if inQuotes {
                if character == "\\" { escaped = true } else if character == "\"" { inQuotes = false }
            } else if inTarget {
                if character == ">" { inTarget = false }
            } else if character == "<" {
                inTarget = true
            } else if character == "\"" {
                inQuotes = true
            } else if character == "," {
                result.append(value[start..<index])
                start = value.index(after: index)
            }
            index = value.index(after: index)
        }
        result.append(value[start...])
        return result.map(ASCII.trimmed).filter { !$0.isEmpty }
    }

    /// Whether `member` is `<target>` followed by parameters whose `rel` names `preload` or
    /// `preconnect` (relation types are compared ignoring case, RFC 8288 §2.1).
    static func isHint(_ member: Substring) -> Bool {
        guard member.first == "<", let close = member.firstIndex(of: ">") else { return false }
        for parameter in member[member.index(after: close)...].split(separator: ";") {
            let parts = parameter.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, ASCII.trimmed(parts[0]).lowercased() == "rel" else { continue }
            var relations = ASCII.trimmed(parts[1])
            if relations.first == "\"" && relations.last == "\"" && relations.count >= 2 {
                relations = relations.dropFirst().dropLast()
            }
            // Only the first rel parameter counts (RFC 8288 §3.3).
            return relations.split(separator: " ").contains { relation in
                let lowered = relation.lowercased()
                return lowered == "preload" || lowered == "preconnect"
            }
        }
        return false
    }
}

#endif
