/// One member of the `Cache-Status` response field (RFC 9211): how one cache handled the
/// request.
///
/// ```swift
/// var status = CacheStatus(cache: "HTTPCache", forward: .stale)
/// status.forwardStatus = 304
/// status.fieldValue  // "HTTPCache; fwd=stale; fwd-status=304"
/// ```
public struct CacheStatus: Hashable, Sendable, CustomStringConvertible {
    /// Why a request went forward (RFC 9211 §2.2), most specific first.
    public enum ForwardReason: String, Hashable, Sendable, CaseIterable {
        /// The cache was configured not to handle this request.
        case bypass
        /// The method's semantics require forwarding.
        case method
        /// Nothing stored for the URI.
        case uriMiss = "uri-miss"
        /// Something stored for the URI, but no variant matches the request's fields.
        case varyMiss = "vary-miss"
        /// No usable stored response (when uri-miss and vary-miss cannot be told apart).
        case miss
        /// A fresh stored response was selected, but the request's directives forbid its use.
        case request
        /// A stored response was selected, but it was stale (or must be validated).
        case stale
        /// A partial stored response did not cover the request.
        case partial
    }

    /// The cache's identifier, serialized as a Token when it is one, else as a String.
    public var cache: String
    /// `hit`: served from the cache without going forward.
    public var hit: Bool
    /// `fwd`: why the request went forward; `nil` for a hit.
    public var forward: ForwardReason?
    /// `fwd-status`: the status the next hop returned.
    public var forwardStatus: Int?
    /// `stored`: whether the response was stored.
    public var stored: Bool?
    /// `collapsed`: whether the request was collapsed with others.
    public var collapsed: Bool?
    /// `ttl`: remaining freshness in seconds, negative when stale.
    public var ttl: Int?
    /// `key`: the cache key.
    public var key: String?
    /// `detail`: implementation-specific information.
    public var detail: String?

    /// A hit.
    public init(cache: String, hit: Bool = true, ttl: Int? = nil, detail: String? = nil) {
        self.cache = cache
        self.hit = hit
        self.ttl = ttl
        self.detail = detail
    }

    /// A request that went forward.
    public init(cache: String, forward: ForwardReason, forwardStatus: Int? = nil, stored: Bool? = nil) {
        self.cache = cache
        self.hit = false
        self.forward = forward
        self.forwardStatus = forwardStatus
        self.stored = stored
    }

    /// The member as Structured Field text (RFC 9651 §4.1), e.g. `HTTPCache; hit; ttl=42`:
    /// the parameters in this order, a `true` Boolean as the bare key (§4.1.1.2). Written into
    /// one string (every answer that is not a plain hit makes one).
    public var fieldValue: String {
        let cache = StructuredFields.isToken(cache) ? cache : StructuredFields.serialize(.string(cache))
        let key = key.map { StructuredFields.serialize(.string($0)) }
        let detail = detail.map { StructuredFields.isToken($0) ? $0 : StructuredFields.serialize(.string($0)) }
        // Written into one string of at most this many bytes: the parameters' names and
        // punctuation take under 80, each number at most 20.
        let capacity = cache.utf8.count + (key?.utf8.count ?? 0) + (detail?.utf8.count ?? 0) + 80 + 2 * 20
        return String(unsafeUninitializedCapacity: capacity) { buffer in
            var text = TextWriter(buffer)
            text.append(cache)
            if hit { text.append("; hit") }
            if let forward {
                text.append("; fwd=")
                text.append(forward.rawValue)
            }
            if let forwardStatus {
                text.append("; fwd-status=")
                text.append(forwardStatus)
            }
            if let stored { text.append(stored ? "; stored" : "; stored=?0") }
            if let collapsed { text.append(collapsed ? "; collapsed" : "; collapsed=?0") }
            if let ttl {
                text.append("; ttl=")
                text.append(ttl)
            }
            if let key {
                text.append("; key=")
                text.append(key)
            }
            if let detail {
                text.append("; detail=")
                text.append(detail)
            }
            return text.count
        }
    }

    /// `existing` with this member appended: caches closer to the user come last
    /// (RFC 9211 §2).
    public func appended(to existing: String?) -> String {
        StructuredFields.appending(fieldValue, to: existing)
    }

    public var description: String { fieldValue }
}

extension CacheStatus {
    /// A stored response served because the origin failed (RFC 9111 §4.2.4, RFC 5861 §4).
    ///
    /// After a `5xx` the request was forwarded and answered: `fwd` (why it went forward) and
    /// `fwd-status` (the origin's status; RFC 9211 §2.3, §2.4: only meaningful with `fwd`), with
    /// `detail=stale-if-error`. When no response came at all, the cache alone answered: `hit`
    /// with `detail=stale-if-error` or `detail=disconnected` (a `fwd` without `fwd-status`
    /// would claim the origin sent the status served).
    package init(cache: String, servedStale use: CachedUse, after failure: OriginFailure, forward: ForwardReason) {
        let ttl = Int(use.timeToLive.rounded(.down))
        if case .serverError(let code) = failure {
            self.init(cache: cache, forward: forward, forwardStatus: code)
            self.ttl = ttl
            detail = "stale-if-error"
        } else {
            self.init(cache: cache, hit: true, ttl: ttl)
            detail =
                use.reasons.contains { if case .staleIfError = $0 { true } else { false } }
                ? "stale-if-error"
                : use.reasons.contains { if case .savedForOffline = $0 { true } else { false } }
                    ? "saved-offline" : "disconnected"
        }
    }
}
