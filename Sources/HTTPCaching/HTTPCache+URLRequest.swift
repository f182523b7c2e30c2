import CacheSemantics
import CacheStorage
import Foundation
@_exported import HTTPCacheCore

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// HTTPCache in URLRequest / HTTPURLResponse terms: each call becomes the HTTPCacheCore call on a
// `FetchRequest`, and each `HTTPTransport` an `OriginTransport`.

extension HTTPCache {
    /// Creates a cache on the configured store: ``Configuration/store`` when set, else memory in
    /// front of a disk store in ``Configuration/directory``, or memory alone.
    ///
    /// - Parameters:
    ///   - configuration: How it behaves.
    ///   - transport: The network; by default `HTTPClientTransport` (the package's own client) on
    ///     Linux, a ``URLSessionTransport`` on Apple platforms.
    /// - Throws: `StorageError` when the directory cannot be used.
    public convenience init(
        configuration: Configuration = Configuration(), transport: (any HTTPTransport)? = nil
    ) throws(StorageError) {
        try self.init(
            configuration: configuration, transport: transport.map(URLRequestTransport.init) ?? Self.platformTransport()
        )
    }

    /// The network of a cache given none.
    static func platformTransport() -> any OriginTransport {
        #if os(Linux)
        defaultTransport()
        #else
        URLRequestTransport(URLSessionTransport())
        #endif
    }

    /// Creates a cache on a store of your own (for example one shared by several caches).
    public convenience init(
        configuration: Configuration = Configuration(), store: any CacheStore, transport: any HTTPTransport
    ) {
        self.init(configuration: configuration, store: store, transport: URLRequestTransport(transport))
    }

    /// Fetches `request` through the cache and returns the whole body.
    ///
    /// The request's `cachePolicy` (all six) and its `Cache-Control` are honoured
    /// (RFC 9111 §5.2.1). When the origin cannot be reached, a stored response is served
    /// where RFC 9111 §4.2.4 allows it (outcome `CacheOutcome.stale`), a `504` when it
    /// forbids it (`must-revalidate`), and otherwise the transport's error is thrown — always
    /// under `.reloadIgnoringLocalCacheData` and `.reloadIgnoringLocalAndRemoteCacheData`,
    /// which promise a load from the origin.
    public func data(for request: URLRequest) async throws -> CachedResponse {
        try await data(for: try FetchRequest(fetching: request))
    }

    /// Fetches `request` through the cache and returns as soon as the response head is
    /// known; the body streams (from the store, or from the origin while it is stored).
    public func bytes(for request: URLRequest) async throws -> (CachedResponseHead, ResponseBody) {
        try await bytes(for: try FetchRequest(fetching: request))
    }

    /// The new responses stale-while-revalidate refreshes store for `request`'s key
    /// (``updates(for:)-(FetchRequest)``, given a `URLRequest`).
    ///
    /// - Throws: `URLError` when the URL is not an `http` or `https` URL with a host.
    public func updates(for request: URLRequest) throws -> AsyncStream<CachedResponse> {
        try updates(for: try FetchRequest(fetching: request))
    }

    /// Downloads `request`'s response body to the file `destination`, resuming where an earlier
    /// attempt stopped: the download of a `FetchRequest` (see ResumableDownloads) for a
    /// `URLRequest`.
    public func download(_ request: URLRequest, to destination: URL, retries: Int = 5) -> Download {
        guard let url = request.url else {
            return Download(
                failing: DownloadError(.invalidRequest, "only http and https URLs can be downloaded, not none"),
                destination: destination)
        }
        return download(FetchRequest(request, url: url), to: destination, retries: retries)
    }
}

extension HTTPCache.Configuration {
    /// Chooses the key a request is cached under; `nil` returned means "do not cache this
    /// request". Default: the request's URL (`RequestKey.standard(_:)`). A response's
    /// `No-Vary-Search` applies after it, to the URL it returns.
    /// (``keyForRequest``, given the request as a `URLRequest`.)
    public var cacheKey: (@Sendable (URLRequest) -> RequestKey?)? {
        get {
            guard let hook = keyForRequest else { return nil }
            return { @Sendable (request: URLRequest) -> RequestKey? in
                request.url.flatMap { hook(FetchRequest(request, url: $0)) }
            }
        }
        set {
            guard let hook = newValue else { return keyForRequest = nil }
            keyForRequest = { @Sendable (request: FetchRequest) -> RequestKey? in hook(URLRequest(request)) }
        }
    }

    /// Sees every response the cache could store and decides: store as is, store with
    /// other fields, memory only, or not at all; with `userInfo` to keep.
    /// (``willStoreResponse``, given the response as an `HTTPURLResponse`.)
    public var willStore: (@Sendable (ResponseToStore) -> StoreChoice)? {
        get {
            guard let hook = willStoreResponse else { return nil }
            return { @Sendable (candidate: ResponseToStore) -> StoreChoice in hook(OfferedResponse(candidate)) }
        }
        set {
            guard let hook = newValue else { return willStoreResponse = nil }
            // HTTPURLResponse's initializer fails for no status and fields a cache stores; a
            // response it cannot describe is stored as RFC 9111 says.
            willStoreResponse = { @Sendable (offered: OfferedResponse) -> StoreChoice in
                ResponseToStore(offered).map(hook) ?? .store
            }
        }
    }
}

extension RequestKey {
    /// The request's own URL.
    public static func standard(_ request: URLRequest) -> RequestKey? {
        request.url.map { RequestKey(url: $0) }
    }

    /// The request's URL without the query items named in `names` (cache-busting or
    /// tracking parameters), so requests differing only in them share one entry.
    public static func dropping(queryItems names: Set<String>, from request: URLRequest) -> RequestKey? {
        request.url.map { dropping(queryItems: names, from: $0) }
    }
}

/// The earlier name of ``ResponseToStore``.
@available(*, deprecated, renamed: "ResponseToStore")
public typealias StoreCandidate = ResponseToStore

/// A response about to be stored, as a will-store hook sees it (``OfferedResponse`` in
/// `URLRequest` and `HTTPURLResponse` terms).
public struct ResponseToStore: @unchecked Sendable {
    /// The request (as sent to the origin, without the cache's validators).
    public var request: URLRequest
    /// The response from the origin.
    public var response: HTTPURLResponse
    /// The response fields in the order received.
    public var fields: [(name: String, value: String)]
    /// Whether RFC 9111 allows storing the response with its own fields, and why not.
    public var refusals: [Reason]

    /// Whether the response as received may be stored.
    public var isStorable: Bool { refusals.isEmpty }

    /// The fields with `Cache-Control` replaced by `cacheControl` and `Expires` and `Pragma`
    /// removed: for a hook that forces a lifetime.
    public func fields(withCacheControl cacheControl: String) -> [(name: String, value: String)] {
        OfferedResponse.fields(fields, withCacheControl: cacheControl)
    }

    /// Whether the origin said anything about freshness (`Cache-Control` or `Expires`).
    public var hasCachingFields: Bool { OfferedResponse.hasCachingFields(fields) }

    /// `offered` with Foundation's types; `nil` when `HTTPURLResponse` cannot describe it.
    init?(_ offered: OfferedResponse) {
        guard
            let response = HTTPURLResponse(
                url: offered.url, statusCode: offered.status, httpVersion: "HTTP/1.1",
                headerFields: Dictionary(
                    offered.fields.map { ($0.name, $0.value) }, uniquingKeysWith: { "\($0), \($1)" }))
        else { return nil }
        self.init(
            request: URLRequest(offered.request), response: response, fields: offered.fields, refusals: offered.refusals
        )
    }

    private init(
        request: URLRequest, response: HTTPURLResponse, fields: [(name: String, value: String)], refusals: [Reason]
    ) {
        self.request = request
        self.response = response
        self.fields = fields
        self.refusals = refusals
    }
}

extension OfferedResponse {
    /// `candidate` in HTTPCacheCore's types.
    init(_ candidate: ResponseToStore) {
        let url = candidate.response.url ?? candidate.request.url ?? URL(fileURLWithPath: "/")
        let request = FetchRequest(candidate.request, url: candidate.request.url ?? url)
        self.init(
            request: request, status: candidate.response.statusCode, url: url, fields: candidate.fields,
            refusals: candidate.refusals)
    }
}

extension CachedResponse {
    /// The response as Foundation's type, made on first use (swift-corelibs-foundation's
    /// initializer costs about 1.5 µs a field, more than the rest of a hit).
    public var response: HTTPURLResponse { head.response }
}

extension CachedResponseHead {
    /// The response as Foundation's type, made on first use (swift-corelibs-foundation's
    /// initializer costs about 1.5 µs a field, more than the rest of a hit).
    public var response: HTTPURLResponse {
        platformResponse.value {
            var dictionary: [String: String] = [:]
            for field in combinedFields { dictionary[field.name] = field.value }
            return HTTPURLResponse(url: url, statusCode: statusCode, httpVersion: "HTTP/1.1", headerFields: dictionary)!
        }
    }
}

extension CachePolicy {
    /// Each `URLRequest.CachePolicy` and the policy of the same name.
    private static let urlRequestPolicies: [(URLRequest.CachePolicy, CachePolicy)] = [
        (.useProtocolCachePolicy, .useProtocolCachePolicy),
        (.reloadIgnoringLocalCacheData, .reloadIgnoringLocalCacheData),
        (.reloadIgnoringLocalAndRemoteCacheData, .reloadIgnoringLocalAndRemoteCacheData),
        (.returnCacheDataElseLoad, .returnCacheDataElseLoad),
        (.returnCacheDataDontLoad, .returnCacheDataDontLoad),
        (.reloadRevalidatingCacheData, .reloadRevalidatingCacheData),
    ]

    /// The policy of a `URLRequest.CachePolicy` (`useProtocolCachePolicy` for one of a later SDK).
    public init(_ policy: URLRequest.CachePolicy) {
        self = Self.urlRequestPolicies.first { $0.0 == policy }?.1 ?? .useProtocolCachePolicy
    }

    /// The `URLRequest.CachePolicy` of the same name.
    var urlRequestPolicy: URLRequest.CachePolicy {
        Self.urlRequestPolicies.first { $0.1 == self }?.0 ?? .useProtocolCachePolicy
    }
}

/// A `URLRequest` held by a ``FetchRequest`` made from it, so that what the cache sends keeps
/// its other settings. Never changed once made.
private final class HeldURLRequest: StreamedContent, @unchecked Sendable {
    let request: URLRequest
    init(_ request: URLRequest) { self.request = request }

    /// All of `httpBodyStream` (for a transport other than URLSession).
    func content() throws -> [UInt8] {
        guard let stream = request.httpBodyStream else { return [] }
        stream.open()
        defer { stream.close() }
        var body: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count == 0 { return body }
            guard count > 0 else {
                let reason = stream.streamError.map { "\($0)" } ?? "the stream failed"
                throw URLError(
                    .requestBodyStreamExhausted,
                    userInfo: [NSLocalizedDescriptionKey: "could not read the request body: \(reason)"])
            }
            body += buffer[..<count]
        }
    }
}

extension FetchRequest {
    /// `request`, whose URL is `url`, as the cache handles it: fields sorted by name (a
    /// `URLRequest` keeps them in a dictionary) without `HTTPCache-Partition`, which names its
    /// ``partition`` (`URLRequest.httpCachePartition`) and is never sent; the
    /// content from `httpBody` or, left in the request, its `httpBodyStream`.
    init(_ request: URLRequest, url: URL) {
        // Most requests have no fields: HeaderFields' generic initializer is not specialized here.
        let dictionary = request.allHTTPHeaderFields ?? [:]
        var fields = HeaderFields()
        var partition: String?
        if !dictionary.isEmpty {
            fields = HeaderFields(
                dictionary.sorted { $0.key < $1.key }.map { HeaderField(name: $0.key, value: $0.value) })
            if let named = fields[.httpCachePartition] {
                partition = named
                fields.removeAll(namedAnyOf: [.httpCachePartition])
            }
        }
        self.init(
            url: url, method: request.httpMethod ?? "GET", fields: fields, body: request.httpBody,
            cachePolicy: CachePolicy(request.cachePolicy), timeoutInterval: request.timeoutInterval,
            partition: partition)
        platformRequest = HeldURLRequest(request)
        hasBodyStream = request.httpBody == nil && request.httpBodyStream != nil
    }

    /// `request` as the cache handles it.
    ///
    /// - Throws: `URLError(.unsupportedURL)` when it has no URL.
    package init(fetching request: URLRequest) throws {
        guard let url = request.url else {
            throw URLError(
                .unsupportedURL,
                userInfo: [NSLocalizedDescriptionKey: "only http and https URLs can be fetched through the cache"])
        }
        self.init(request, url: url)
    }
}

extension URLRequest {
    /// The cache partition ``HTTPCache`` answers this request in (`FetchRequest.partition`):
    /// the `HTTPCache-Partition` field, which the cache takes out before the request is sent,
    /// so the origin never sees it. It works alike through ``HTTPCache/data(for:)-(URLRequest)``
    /// and through ``CachingURLProtocol`` (whose `URLProtocol.setProperty` values do not reach
    /// a protocol on Linux). `nil`: the cache's `Configuration.partition`.
    public var httpCachePartition: String? {
        get { value(forHTTPHeaderField: HeaderField.Name.httpCachePartition.rawName) }
        set { setValue(newValue, forHTTPHeaderField: HeaderField.Name.httpCachePartition.rawName) }
    }

    /// What a transport sends for `request`: the `URLRequest` it was made from, with the URL,
    /// method, fields, content, policy and timeout the cache gave it.
    init(_ request: FetchRequest) {
        var made = (request.platformRequest as? HeldURLRequest)?.request ?? URLRequest(url: request.url)
        made.url = request.url
        made.httpMethod = request.method
        for name in Array((made.allHTTPHeaderFields ?? [:]).keys) { made.setValue(nil, forHTTPHeaderField: name) }
        for field in request.fields { made.addValue(field.value, forHTTPHeaderField: field.name) }
        if !request.hasBodyStream { made.httpBody = request.body }
        made.cachePolicy = request.cachePolicy.urlRequestPolicy
        made.timeoutInterval = request.timeoutInterval
        self = made
    }
}

/// An ``HTTPTransport`` as the cache's `OriginTransport`.
package struct URLRequestTransport: OriginTransport {
    let base: any HTTPTransport

    package init(_ base: any HTTPTransport) { self.base = base }

    package func send(_ request: FetchRequest) async throws -> OriginResponse {
        let received = try await base.send(URLRequest(request))
        let response = received.response
        var origin = OriginResponse(
            status: response.statusCode, fields: Self.fields(of: response), url: response.url ?? request.url,
            body: received.body)
        origin.decodedContentCodings = received.decodedContentCodings
        return origin
    }

    /// A response's fields, sorted by name (`HTTPURLResponse` keeps no order).
    static func fields(of response: HTTPURLResponse) -> HeaderFields {
        HeaderFields(
            response.allHeaderFields.compactMap { name, value -> (String, String)? in
                guard let name = name as? String else { return nil }
                return (name, value as? String ?? String(describing: value))
            }.sorted { $0.0 < $1.0 })
    }
}
