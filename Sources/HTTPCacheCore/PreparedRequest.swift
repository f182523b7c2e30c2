import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

/// A request as the cache handles it: its key (from the key hook), the rules that match it,
/// and the request the exchange sees.
struct PreparedRequest: Sendable {
    /// The request as the caller made it.
    var request: FetchRequest
    var url: URL
    var urlString: String
    /// The method sent to the origin.
    var method: String
    /// The request as the exchange sees it: method `GET` for a `POST` keyed by its body.
    var exchange: ExchangeRequest
    /// A rule forces this lifetime on stored responses.
    var forcedLifetime: Int?
    /// A rule pins what is stored.
    var pin = false
    /// Store the response even when RFC 9111 would not (manifest pre-fetches): as
    /// `max-age=0`, so it is validated whenever the origin can be reached.
    var forceStore = false

    var primaryKey: String? { exchange.primaryKey }
}

/// What a request's URL is sent and keyed as (``HTTPCache/target(of:)``).
struct RequestTarget: Sendable {
    /// The URL sent when it is not the request's own: without dot segments (``HTTPCache/sentURI(_:)``).
    var sentURL: URL?
    /// The URL sent, as a string.
    var urlString: String
    /// The key of a `GET` of it; `nil` when it cannot be parsed as a URI.
    var key: CacheKey?
}

/// A partition name that cannot be used (``FetchRequest/partition``,
/// ``HTTPCache/Configuration/partition``): empty, longer than 512 bytes of UTF-8, or holding
/// a control character.
public struct InvalidPartition: Error, Hashable, Sendable, CustomStringConvertible {
    /// What is wrong with the name, and what a name may be.
    public var message: String

    init(_ problem: String) {
        message =
            "\(problem); name a partition with at most \(CachePartition.maximumLength) bytes of UTF-8 and no control characters"
    }

    public var description: String { message }
}

extension HTTPCache {
    var now: Timestamp { Timestamp(secondsSince1970: configuration.clock()) }

    /// The URI `url` is sent and keyed as: without dot segments (RFC 3986 §5.2.4), as URLSession
    /// on Linux sends it (libcurl turns `/a/./b/../c` into `/a/c`). Escapes and case stay as
    /// written, as URLSession leaves them; ``CacheKey`` then folds only scheme, host and port.
    static func sentURI(_ url: URL) -> String { CacheKey.removingDotSegments(url.absoluteString) }

    /// What `url` is sent and keyed as, remembered per URL string (bounded): working it out
    /// (the scheme and host read from `URL`, dot segments, the key's normalization) cost more
    /// than the rest of a memory hit together.
    ///
    /// - Throws: `URLError` when `url` is not an `http` or `https` URL with a host.
    func target(of url: URL) throws -> RequestTarget {
        let string = url.absoluteString
        if let known = targets.withLock({ $0.value(for: string) }) { return known }
        guard let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme) else {
            throw URLError(
                .unsupportedURL,
                userInfo: [NSLocalizedDescriptionKey: "only http and https URLs can be fetched through the cache"])
        }
        guard let host = url.host, !host.isEmpty else {
            throw URLError(.badURL, userInfo: [NSLocalizedDescriptionKey: "the URL has no host: \(url)"])
        }
        var target = RequestTarget(sentURL: nil, urlString: string, key: nil)
        let sent = Self.sentURI(url)
        if sent != string, let sentURL = URL(string: sent) {
            target.sentURL = sentURL
            target.urlString = sentURL.absoluteString
        }
        target.key = CacheKey(method: "GET", uri: target.urlString)
        let cost =
            MemoryCost.string(string) + MemoryCost.string(target.urlString) + MemoryCost.string(target.key?.uri ?? "")
            + (target.sentURL == nil ? 0 : MemoryCost.allocation(128))
        targets.withLock { $0.set(target, for: string, cost: cost) }
        return target
    }

    /// Works out the key, the policy and the rules of `request`.
    ///
    /// The request is sent with its URL as ``sentURI(_:)`` gives it, whatever the transport, so
    /// that what is keyed is what goes on the wire.
    func prepare(_ request: FetchRequest) throws -> PreparedRequest {
        var request = request
        let target = try target(of: request.url)
        if let sentURL = target.sentURL { request.url = sentURL }
        let url = request.url
        let urlString = target.urlString
        let method = request.method.uppercased()
        let fields = request.fields
        var policy = request.cachePolicy
        if policy == .useProtocolCachePolicy { policy = configuration.defaultPolicy }
        var prepared = PreparedRequest(
            request: request, url: url, urlString: urlString, method: method,
            exchange: ExchangeRequest(
                head: RequestHead(method: method, uri: urlString, fields: fields), policy: policy, primaryKey: nil,
                resumesIncomplete: true))
        let partition = request.partition ?? configuration.partition
        if let partition {
            if let problem = CachePartition.problem(with: partition) { throw InvalidPartition(problem) }
            prepared.exchange.partition = partition
        }

        if method == "GET" || method == "HEAD", !(request.body?.isEmpty ?? true) || request.hasBodyStream {
            // Content in a GET or HEAD has no meaning the key could hold (RFC 9110 §9.3.1): such
            // a request is sent on, and its response neither stored nor served from the store.
            prepared.exchange.bypassReasons = [
                .configured("a GET or HEAD with content is sent on and never stored (RFC 9110 §9.3.1)")
            ]
            return prepared
        }
        let rules = self.rules.filter { $0.pattern.matches(urlString) }
        if let never = rules.first(where: { $0.action == .neverCache }) {
            prepared.exchange.bypassReasons = [.configured("rule \"\(never)\": the cache is not used")]
            return prepared
        }
        for rule in rules {
            switch rule.action {
            case .forceLifetime(let seconds): prepared.forcedLifetime = prepared.forcedLifetime ?? seconds
            case .pin: prepared.pin = true
            case .neverCache: break
            }
        }
        let key: RequestKey?
        if let hook = configuration.keyForRequest { key = hook(request) } else { key = RequestKey(url: url) }
        guard let key else {
            prepared.exchange.bypassReasons = [.configured("the cache-key hook chose not to cache this request")]
            return prepared
        }
        if method == "QUERY" {
            return keyedByContent(prepared, key: try keyed(key, target: target), partition: partition)
        }
        let keyedByBody = key.includesBody && method == "POST"
        let keyMethod = keyedByBody || method == "HEAD" ? "GET" : method
        var cacheKey = try keyed(key, target: target)
        cacheKey.method = keyMethod
        if keyedByBody {
            // A POST used as a query (GraphQL, search): keyed by its body, stored and reused as
            // a GET would be, and it invalidates nothing.
            let body = Array(request.body ?? Data())
            let digest = [XXH64.hash(body), XXH64.hash(body, seed: 0x9E37_79B9)].map { String($0, radix: 16) }
            prepared.exchange.primaryKey = CachePartition.key(
                "POST \(cacheKey.uri) body=\(body.count):\(digest.joined(separator: ":"))", in: partition)
            prepared.exchange.head.method = "GET"
            prepared.exchange.invalidates = false
        } else {
            prepared.exchange.primaryKey = CachePartition.key(cacheKey.primaryKey, in: partition)
            if method == "POST" {
                // Where a later GET of this URL looks: a response to this POST may be stored
                // there (RFC 9110 §9.3.3).
                var get = request
                get.method = "GET"
                get.body = nil
                get.hasBodyStream = false
                let getKey = configuration.keyForRequest.map { $0(get) } ?? RequestKey(url: url)
                prepared.exchange.targetKey = getKey.flatMap { CacheKey(method: "GET", uri: Self.sentURI($0.url)) }
                    .map { CachePartition.key($0.primaryKey, in: partition) }
            }
        }
        return prepared
    }

    /// The `GET` key of `key`: without a key hook the request's URL, in the form it is sent already.
    private func keyed(_ key: RequestKey, target: RequestTarget) throws -> CacheKey {
        let keyed =
            configuration.keyForRequest == nil ? target.key : CacheKey(method: "GET", uri: Self.sentURI(key.url))
        guard let keyed else {
            throw URLError(.badURL, userInfo: [NSLocalizedDescriptionKey: "the URL cannot be parsed: \(key.url)"])
        }
        return keyed
    }

    /// The largest `QUERY` content the cache keys (RFC 10008 §2.7); a larger one is sent on, and
    /// its response neither stored nor served from the store.
    static let maximumQueryContentLength = 1 << 20

    /// Keys a `QUERY` by its URL and its content (``QueryContentKey``): stored and reused like a
    /// `GET`, and, being safe (RFC 10008 §2), invalidating nothing.
    private func keyedByContent(_ prepared: PreparedRequest, key: CacheKey, partition: String?) -> PreparedRequest {
        var prepared = prepared
        let request = prepared.request
        let content = request.body ?? Data()
        if request.hasBodyStream || content.count > Self.maximumQueryContentLength {
            let what = request.hasBodyStream ? "a body stream" : "\(content.count) bytes of content"
            prepared.exchange.bypassReasons = [
                .configured(
                    "a QUERY with \(what) is sent on and never stored: its key needs the content, and the cache keys at most \(Self.maximumQueryContentLength) bytes of it (RFC 10008 §2.7)"
                )
            ]
            return prepared
        }
        var queryKey = key
        queryKey.method = "QUERY"
        let contentKey = QueryContentKey(content: Array(content), fields: prepared.exchange.head.fields)
        prepared.exchange.primaryKey = CachePartition.key(contentKey.primaryKey(for: queryKey), in: partition)
        return prepared
    }
}
