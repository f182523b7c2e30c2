/// The request line and fields of a request, as the engine sees it.
public struct RequestHead: Hashable, Sendable {
    /// The method, e.g. `GET` (case-sensitive, RFC 9110 §9.1).
    public var method: String
    /// The absolute target URI (RFC 9110 §7.1).
    public var uri: String
    /// The request's header fields.
    public var fields: HeaderFields

    /// Creates a request head.
    public init(method: String = "GET", uri: String, fields: HeaderFields = [:]) {
        self.method = method
        self.uri = uri
        self.fields = fields
    }
}

/// The status and fields of a response.
public struct ResponseHead: Hashable, Sendable {
    /// The status code.
    public var status: Int
    /// The response's header fields.
    public var fields: HeaderFields

    /// Creates a response head.
    public init(status: Int, fields: HeaderFields = [:]) {
        self.status = status
        self.fields = fields
    }
}

/// The RFC 9111 engine: pure functions from requests, responses, stored facts and `now` to
/// decisions with reasons.
///
/// The engine has no I/O and no clock. A cache asks it whether and how to store a response
/// (``storageDecision(for:response:requestTime:responseTime:)``), what to do with a request
/// given the stored variants (``lookup(_:candidates:now:)``), what to send when validating,
/// which stored responses a `304` updates, what to do after a network error, and what an
/// unsafe request invalidates.
///
/// ```swift
/// let engine = CacheEngine()  // a private cache, as a client library uses
/// let request = RequestHead(uri: "https://example.com/a")
/// if case .store(let stored) = engine.storageDecision(
///     for: request, response: response, requestTime: sent, responseTime: received) {
///     // keep stored.fields, stored.facts and the body
/// }
/// let decision = engine.lookup(CacheRequest(request), candidates: [stored.facts], now: now)
/// ```
public struct CacheEngine: Hashable, Sendable {
    /// How the engine behaves.
    public struct Configuration: Hashable, Sendable {
        /// Whether this is a shared cache (a proxy or CDN) rather than a private one
        /// (RFC 9111 §1): `s-maxage`, `proxy-revalidate` and `private` then apply, and
        /// responses to requests with `Authorization` are stored only when allowed (§3.5).
        public var isShared: Bool
        /// The targeted cache-control fields this cache obeys, most specific first
        /// (RFC 9213 §2.2). The first valid, non-empty one replaces `Cache-Control` and
        /// `Expires` for a response.
        public var targetedFieldNames: [String]
        /// The fraction of the time since `Last-Modified` used as a heuristic freshness
        /// lifetime (RFC 9111 §4.2.2 suggests 10%).
        public var heuristicFraction: Double
        /// The longest heuristic freshness lifetime, in seconds.
        public var maximumHeuristicLifetime: Double

        /// Creates a configuration.
        public init(
            isShared: Bool = false, targetedFieldNames: [String] = [], heuristicFraction: Double = 0.1,
            maximumHeuristicLifetime: Double = 86_400
        ) {
            self.isShared = isShared
            self.targetedFieldNames = targetedFieldNames
            self.heuristicFraction = heuristicFraction
            self.maximumHeuristicLifetime = maximumHeuristicLifetime
        }

        /// A private cache, as in a user agent or an app (the default).
        public static let privateCache = Configuration()

        /// A shared cache that obeys `CDN-Cache-Control` (RFC 9213 §3) before `Cache-Control`.
        public static let sharedCache = Configuration(
            isShared: true, targetedFieldNames: [HeaderField.Name.cdnCacheControl.rawName])

        /// A shared cache named `name` whose target list is `NAME-Cache-Control`, then
        /// `CDN-Cache-Control` (RFC 9213 §2.2: a field of the cache's own overrides the one
        /// every CDN reads). A name that is not a valid field-name token adds no field of its own.
        public static func sharedCache(named name: String) -> Configuration {
            var configuration = sharedCache
            let own = name + "-Cache-Control"
            if ASCII.isToken(own), !ASCII.equalsIgnoringCase(own, HeaderField.Name.cdnCacheControl.rawName) {
                configuration.targetedFieldNames.insert(own, at: 0)
            }
            return configuration
        }
    }

    /// The configuration.
    public var configuration: Configuration

    /// Creates an engine.
    public init(configuration: Configuration = .privateCache) {
        self.configuration = configuration
    }
}

/// Response status codes that are heuristically cacheable (RFC 9110 §15.1).
let heuristicallyCacheableStatuses: Set<Int> = [200, 203, 204, 206, 300, 301, 308, 404, 405, 410, 414, 501]

/// Status codes whose caching rules this cache implements: all final codes RFC 9110 defines,
/// except 206 and 304, which are never stored as complete responses (RFC 9111 §3).
let understoodStatuses: Set<Int> = [
    200, 201, 202, 203, 204, 205, 300, 301, 302, 303, 305, 307, 308, 400, 401, 402, 403, 404, 405, 406, 407, 408,
    409, 410, 411, 412, 413, 414, 415, 416, 417, 421, 422, 426, 500, 501, 502, 503, 504, 505,
]

/// Methods known to be safe (RFC 9110 §9.2.1, RFC 10008 §2 for `QUERY`); every other method
/// invalidates (RFC 9111 §4.4).
package let safeMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "TRACE", "QUERY"]

/// Whether responses to `method` are stored and reused for the same method: `GET` (RFC 9110
/// §9.3.1) and `QUERY` (RFC 10008 §2.7), keyed by its content as well. (`HEAD` reuses `GET`'s.)
/// Two comparisons, not a set: every lookup asks.
@inlinable
package func isStoredMethod(_ method: String) -> Bool { method == "GET" || method == "QUERY" }

/// The connection-specific fields (RFC 9110 §7.6.1), lowercased: never forwarded by a proxy,
/// never stored, never taken from a `304` (RFC 9111 §3.1, §3.2). Fields `Connection` names are
/// connection-specific too. The one list of the package: the proxy's relay uses it.
package let hopByHopFieldNames = [
    HeaderField.Name.connection, .keepAlive, .proxyConnection, .te, .transferEncoding, .upgrade, .trailer,
].map(\.lowercasedName)

/// Fields never stored and never taken from a `304`: the hop-by-hop ones and those specific to
/// the proxy a cache forwards through (RFC 9111 §3.1).
let fieldNamesNeverStored =
    hopByHopFieldNames
    + [HeaderField.Name.proxyAuthenticate, .proxyAuthenticationInfo, .proxyAuthorization].map(\.lowercasedName)
