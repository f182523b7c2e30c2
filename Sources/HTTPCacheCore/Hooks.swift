import CacheExchange
import CacheSemantics
import Foundation

/// The key a request is cached under (RFC 9111 §4.1 "cache key"), as chosen by
/// ``HTTPCache/Configuration/keyForRequest`` (HTTPCaching's `cacheKey`).
public struct RequestKey: Hashable, Sendable {
    /// The URL the response is stored and looked up under, normally the request's URL.
    public var url: URL
    /// Keys a `POST` by its body as well as its URL, and makes it cacheable like a `GET`:
    /// for query APIs (GraphQL and the like) that use `POST` to send a query, not to change
    /// anything. Such a `POST` invalidates nothing. Ignored for other methods (a `QUERY` is
    /// always keyed by its content, RFC 10008 §2.7).
    public var includesBody: Bool

    /// Creates a key.
    public init(url: URL, includesBody: Bool = false) {
        self.url = url
        self.includesBody = includesBody
    }

    /// The request's own URL.
    public static func standard(_ request: FetchRequest) -> RequestKey? {
        RequestKey(url: request.url)
    }

    /// The request's URL without the query items named in `names` (cache-busting or
    /// tracking parameters), so requests differing only in them share one entry.
    public static func dropping(queryItems names: Set<String>, from request: FetchRequest) -> RequestKey? {
        dropping(queryItems: names, from: request.url)
    }

    /// `url` without the query items named in `names`.
    public static func dropping(queryItems names: Set<String>, from url: URL) -> RequestKey {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let items = components.queryItems
        else { return RequestKey(url: url) }
        let kept = items.filter { !names.contains($0.name) }
        components.queryItems = kept.isEmpty ? nil : kept
        return RequestKey(url: components.url ?? url)
    }
}

/// What a will-store hook decides about a response the cache is about to store
/// (``HTTPCache/Configuration/willStoreResponse``, HTTPCaching's `willStore`).
public struct StoreChoice: Sendable {
    /// Where the response goes.
    public enum Action: Sendable {
        /// Store it if RFC 9111 allows it (with ``StoreChoice/fields`` if set).
        case store
        /// Store it in the memory tier only; it never touches the disk.
        case memoryOnly
        /// Do not store it.
        case doNotStore
    }

    /// Where the response goes.
    public var action: Action
    /// Fields to store instead of the response's own, for example with `Cache-Control:
    /// max-age=60` added when the origin sent none. Storability and freshness are decided on
    /// these fields.
    public var fields: [(name: String, value: String)]?
    /// Bytes kept with the entry and returned with every response served from it
    /// (``CachedResponse/userInfo``).
    public var userInfo: Data?

    /// Creates a choice.
    public init(_ action: Action = .store, fields: [(name: String, value: String)]? = nil, userInfo: Data? = nil) {
        self.action = action
        self.fields = fields
        self.userInfo = userInfo
    }

    /// Store the response as it is, if RFC 9111 allows it.
    public static let store = StoreChoice(.store)
    /// Keep the response in memory only.
    public static let memoryOnly = StoreChoice(.memoryOnly)
    /// Do not store the response.
    public static let doNotStore = StoreChoice(.doNotStore)
}

/// A response about to be stored, as a will-store hook sees it
/// (``HTTPCache/Configuration/willStoreResponse``).
public struct OfferedResponse: Sendable {
    /// The request (as sent to the origin, without the cache's validators).
    public var request: FetchRequest
    /// The status code.
    public var status: Int
    /// The URL of the response.
    public var url: URL
    /// The response fields in the order received.
    public var fields: [(name: String, value: String)]
    /// Whether RFC 9111 allows storing the response with its own fields, and why not.
    public var refusals: [Reason]

    /// Creates a description of a response offered to the store.
    public init(
        request: FetchRequest, status: Int, url: URL, fields: [(name: String, value: String)], refusals: [Reason]
    ) {
        self.request = request
        self.status = status
        self.url = url
        self.fields = fields
        self.refusals = refusals
    }

    /// Whether the response as received may be stored.
    public var isStorable: Bool { refusals.isEmpty }

    /// The fields with `Cache-Control` replaced by `cacheControl` and `Expires` and `Pragma`
    /// removed: for a hook that forces a lifetime.
    public func fields(withCacheControl cacheControl: String) -> [(name: String, value: String)] {
        Self.fields(fields, withCacheControl: cacheControl)
    }

    /// Whether the origin said anything about freshness (`Cache-Control` or `Expires`).
    public var hasCachingFields: Bool { Self.hasCachingFields(fields) }

    /// `fields` with `Cache-Control` replaced by `cacheControl`, `Expires` and `Pragma` removed.
    package static func fields(
        _ fields: [(name: String, value: String)], withCacheControl cacheControl: String
    ) -> [(name: String, value: String)] {
        let dropped: Set<String> = ["cache-control", "expires", "pragma"]
        return fields.filter { !dropped.contains($0.name.lowercased()) } + [("Cache-Control", cacheControl)]
    }

    /// Whether `fields` say anything about freshness (`Cache-Control` or `Expires`).
    package static func hasCachingFields(_ fields: [(name: String, value: String)]) -> Bool {
        fields.contains { ["cache-control", "expires"].contains($0.name.lowercased()) }
    }
}

/// A URL pattern, with `*` matching any run of characters (including `/`) and every other
/// character matching itself.
///
/// A pattern that starts with `/` is matched against the URL's request-target — its path and
/// query, as in the request line (RFC 9112 §3.2.1 origin-form; `/` when the path is empty,
/// never the fragment) — on any host: `/live/*` matches `https://example.com/live/score` and
/// `http://127.0.0.1:8080/live/score?period=2`, and `/search?q=*` only searches with a `q`.
/// Any other pattern is matched against the whole URL: `https://api.example.com/v1/*` matches
/// everything under `/v1/` on that host, `*.png` every URL ending in `.png`, `*/live/*` any URL
/// with `/live/` in it.
public struct URLPattern: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The pattern text.
    public let pattern: String
    private let parts: [[UInt8]]

    /// Creates a pattern.
    public init(_ pattern: String) {
        self.pattern = pattern
        parts = pattern.utf8.split(separator: UInt8(ascii: "*"), omittingEmptySubsequences: false).map(Array.init)
    }

    public init(stringLiteral value: String) { self.init(value) }

    public var description: String { pattern }

    /// Whether `url` (an absolute URL) matches: its request-target when the pattern starts
    /// with `/`, else the whole URL.
    public func matches(_ url: String) -> Bool {
        let text = pattern.utf8.first == UInt8(ascii: "/") ? Self.requestTarget(of: url) : Array(url.utf8)
        guard parts.count > 1 else { return text == parts[0] }
        guard text.starts(with: parts[0]) else { return false }
        var position = parts[0].count
        for part in parts.dropFirst().dropLast() where !part.isEmpty {
            guard let found = find(part, in: text, from: position) else { return false }
            position = found + part.count
        }
        let last = parts[parts.count - 1]
        return text.count - position >= last.count && text.suffix(last.count).elementsEqual(last)
    }

    /// The path and query of `url`: from the first `/` or `?` after the authority to the end
    /// or a `#`, with a `/` put in front when the path is empty (RFC 9112 §3.2.1).
    static func requestTarget(of url: String) -> [UInt8] {
        let text = Array(url.utf8)
        let slash = UInt8(ascii: "/")
        var start = 0
        if let scheme = text.indices.dropLast(2).first(where: {
            text[$0] == UInt8(ascii: ":") && text[$0 + 1] == slash && text[$0 + 2] == slash
        }) {
            start = scheme + 3
        }
        let path = text[start...].firstIndex { $0 == slash || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
        let from = path ?? text.count
        let target = text[from..<(text[from...].firstIndex(of: UInt8(ascii: "#")) ?? text.count)]
        return target.first == slash ? Array(target) : [slash] + target
    }

    private func find(_ needle: [UInt8], in text: [UInt8], from start: Int) -> Int? {
        guard needle.count <= text.count - start else { return nil }
        for index in start...(text.count - needle.count)
        where text[index..<(index + needle.count)].elementsEqual(needle) {
            return index
        }
        return nil
    }
}

/// A rule applied to every request whose URL matches a pattern
/// (``HTTPCache/Configuration/rules``). The first matching rule of each kind applies.
///
/// ```swift
/// configuration.rules = [
///     CacheRule("/live/*", .neverCache),                               // path (and query) on any host
///     CacheRule("https://cdn.example.com/*", .forceLifetime(seconds: 3600)),  // one host: the whole URL
///     CacheRule("*.png", .pin),
/// ]
/// ```
///
/// ``URLPattern`` says how a pattern matches: one that starts with `/` matches the path and
/// query, any other the whole URL. To force a lifetime from code that looks at the response
/// rather than the URL, use ``HTTPCache/Configuration/willStoreResponse`` (``StoreChoice/fields``).
public struct CacheRule: Hashable, Sendable, CustomStringConvertible {
    /// What the rule does.
    public enum Action: Hashable, Sendable {
        /// Never use or store the cache for these URLs: the request goes to the origin and
        /// the outcome is `CacheOutcome.bypass`.
        case neverCache
        /// Store responses as if the origin had sent `Cache-Control: max-age=` this many
        /// seconds (replacing its `Cache-Control`, `Expires` and `Pragma`).
        case forceLifetime(seconds: Int)
        /// Pin stored responses: eviction never removes them (for offline use).
        case pin
    }

    /// The URLs the rule applies to.
    public var pattern: URLPattern
    /// What it does.
    public var action: Action

    /// Creates a rule.
    public init(_ pattern: URLPattern, _ action: Action) {
        self.pattern = pattern
        self.action = action
    }

    public var description: String {
        switch action {
        case .neverCache: return "never cache \(pattern)"
        case .forceLifetime(let seconds): return "force max-age=\(seconds) for \(pattern)"
        case .pin: return "pin \(pattern)"
        }
    }
}
