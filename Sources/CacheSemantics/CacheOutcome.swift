/// How a response was obtained.
public enum CacheOutcome: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// Served from the cache without contacting the origin, fresh (or allowed by the policy).
    case hit
    /// Fetched from the origin: nothing usable was stored.
    case miss
    /// A stored response was validated with the origin: a `304 (Not Modified)` came back and
    /// the stored body was served with freshened fields (RFC 9111 §4.3.4).
    case revalidated
    /// A stale stored response was served: the origin could not be reached (RFC 9111
    /// §4.2.4), it answered with an error inside `stale-if-error`, during
    /// `stale-while-revalidate` (RFC 5861), or because the request allowed it (`max-stale`,
    /// a `returnCacheData` policy).
    case stale
    /// The cache was not used: the method, a rule or the manifest sent the request straight
    /// to the origin, and nothing was stored.
    case bypass

    public var description: String { rawValue }
}
