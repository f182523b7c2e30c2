/// The six request cache policies of `URLRequest.CachePolicy`, as decisions this engine makes
/// (see ``CacheEngine/lookup(_:candidates:now:)``).
public enum CachePolicy: String, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    /// RFC 9111 decides: fresh responses are served, stale ones revalidated.
    case useProtocolCachePolicy
    /// The stored responses are not used, not even when the origin cannot be reached (the
    /// failure is passed on); the response may still be stored.
    case reloadIgnoringLocalCacheData
    /// Like ``reloadIgnoringLocalCacheData`` and also asks caches on the way not to answer:
    /// the forwarded request carries `Cache-Control: no-cache` and `Pragma: no-cache`.
    case reloadIgnoringLocalAndRemoteCacheData
    /// Any stored response, fresh or stale, is used; otherwise the network.
    case returnCacheDataElseLoad
    /// Any stored response, fresh or stale, is used; the network never is. A miss is a 504.
    case returnCacheDataDontLoad
    /// A stored response is always validated with the origin before use.
    case reloadRevalidatingCacheData

    public var description: String { rawValue }
}
