#if os(Linux)
import CacheCrypto
import CacheSemantics
import CacheSystem

/// A dictionary held for Compression Dictionary Transport (RFC 9842): the decoded content of a
/// response that had `Use-As-Dictionary`, with its SHA-256.
package struct CompressionDictionary: Sendable {
    /// Its SHA-256 (RFC 9842 §2.2), and that in base64 (how `Available-Dictionary` names it).
    package let hash: [UInt8]
    package let hashText: String
    package let offer: DictionaryOffer
    package let content: [UInt8]
    /// When it stops being fresh (seconds since 1970): no longer offered by a client (§2.2.1).
    package let expires: Double
    /// Larger for a dictionary stored later (§2.2.3: the most recently fetched wins a tie).
    package let sequence: Int

    /// `Available-Dictionary`'s value for it (RFC 9842 §2.2; RFC 9651 §3.3.5).
    package var fieldValue: String { ":" + hashText + ":" }
}

/// The dictionaries a client or the proxy holds, in memory, bounded in count and bytes (the
/// least recently used dropped first).
package final class CompressionDictionaryStore: Sendable {
    /// The largest dictionary kept.
    package let maxContentBytes: Int
    private let state: Locked<(dictionaries: LRUCache<String, CompressionDictionary>, sequence: Int)>

    package init(maxCount: Int, maxBytes: Int, maxContentBytes: Int) {
        self.maxContentBytes = maxContentBytes
        state = Locked((LRUCache(capacity: maxCount, byteLimit: maxBytes), 0))
    }

    /// Keeps `content`, the decoded body of a response to `url` with `fields`, when those offer
    /// it as a dictionary (RFC 9842 §2.1) and it is not too large; fresh until `expires`.
    package func record(url: String, fields: HeaderFields, content: [UInt8], expires: Double = .infinity) {
        guard content.count <= maxContentBytes, let offer = DictionaryOffer(fields: fields, url: url) else { return }
        let hash = DigestAlgorithm.sha256.hash(content)
        let hashText = Base64.encode(hash)
        state.withLock { state in
            state.sequence += 1
            let dictionary = CompressionDictionary(
                hash: hash, hashText: hashText, offer: offer, content: content, expires: expires,
                sequence: state.sequence)
            state.dictionaries.set(dictionary, for: hashText, cost: content.count + 256)
        }
    }

    /// The dictionary whose hash `hashText` names, when it may be used for `url` (RFC 9842
    /// §2.2.2: the same origin, the URL in its match pattern).
    package func dictionary(named hashText: String, for url: String) -> CompressionDictionary? {
        guard let dictionary = state.withLock({ $0.dictionaries.value(for: hashText) }),
            dictionary.offer.pattern.matches(url)
        else { return nil }
        return dictionary
    }

    /// The dictionary to offer for `url` at `now` (RFC 9842 §2.2.3): among the fresh ones that
    /// match it, the longest `match`, then the most recently fetched. Request destinations are
    /// not known here: every `match-dest` matches (§2.1.2).
    package func best(for url: String, now: Double) -> CompressionDictionary? {
        let candidates = state.withLock { $0.dictionaries.values }
        return
            candidates
            .filter { $0.expires > now && $0.offer.pattern.matches(url) }
            .max { ($0.offer.pattern.text.count, $0.sequence) < ($1.offer.pattern.text.count, $1.sequence) }
    }
}
#endif
