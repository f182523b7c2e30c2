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
/// Learned only from responses the cache stores (RFC 9111 §3), and only what a stored response
/// may give any request without validation: nothing of a `no-store` or `private` response, and
/// no `Link` that a qualified `no-cache` or `private` names (§5.2.2.4, §5.2.2.7). A response that
/// varies (`Vary`, §4.1) hints only requests that would select it: the hints are kept with the
/// request's values of the fields it varies on, so one user's links never reach another whose
/// `Cookie` differs. A `PURGE` of the URL, and a request with an unsafe method to it (§4.4),
/// forget them. Bounded like the proxy's other memos (LRU by count and bytes); at most 16
/// members and 2 KiB per URL.
final class EarlyHints: Sendable {
    /// A URL's hints and the request values of the fields its response varied on.
    private struct Learned {
        let vary: Vary
        let values: [String?]
        let members: [String]
    }

    private let links: Locked<LRUCache<String, Learned>>
    static let membersPerURL = 16
    static let bytesPerURL = 2048

    init(capacity: Int, byteLimit: Int) {
        links = Locked(LRUCache(capacity: capacity, byteLimit: byteLimit))
    }

    /// Remembers the hints of `response`, the fields of a response stored for `url` in answer
    /// to a request with `request`'s fields; `withheld` are the (lowered) field names its
    /// directives keep from answers without validation, worked out only when it has hints. A
    /// response with none forgets what was remembered (its page no longer names them).
    func learn(url: String, response: HeaderFields, request: HeaderFields, withheld: () -> [String]) {
        let hints = Self.hintMembers(response)
        guard !hints.isEmpty, !withheld().contains("link") else { return forget(url: url) }
        let vary = Vary(fields: response)
        let learned = Learned(vary: vary, values: vary.requestValues(request), members: hints)
        var cost = MemoryCost.string(url) + hints.reduce(0) { $0 + MemoryCost.string($1) }
        cost += vary.fieldNames.reduce(0) { $0 + MemoryCost.string($1) }
        cost += learned.values.reduce(0) { $0 + ($1.map(MemoryCost.string) ?? 0) }
        links.withLock { $0.set(learned, for: url, cost: cost) }
    }

    /// The `Link` members to send for `url` before the response to a request with `request`'s
    /// fields: those learned from a response that request would select (RFC 9111 §4.1).
    func hints(for url: String, request: HeaderFields) -> [String]? {
        guard let learned = links.withLock({ $0.value(for: url) }) else { return nil }
        guard learned.vary.isEmpty || learned.vary.requestValues(request) == learned.values else { return nil }
        return learned.members
    }

    /// Forgets the hints of `url` (purged, or invalidated by an unsafe method).
    func forget(url: String) {
        links.withLock { $0.removeValue(for: url) }
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
