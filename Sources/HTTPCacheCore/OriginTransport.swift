import CacheSemantics
import Foundation

/// A request as the cache handles it: what is sent, and the cache policy it is answered by.
///
/// The HTTPCaching library makes one from a `URLRequest`; a program that uses this library
/// alone (without FoundationNetworking) makes it directly:
///
/// ```swift
/// let request = FetchRequest(url: url, fields: ["Accept": "application/json"])
/// let result = try await cache.data(for: request)
/// ```
public struct FetchRequest: Sendable {
    /// The URL (`http` or `https`).
    public var url: URL
    /// The method, `GET` by default.
    public var method: String
    /// The request fields, in the order sent (RFC 9110 §5.3: repeated names are kept).
    public var fields: HeaderFields
    /// The content, if any.
    public var body: Data?
    /// How the cache may answer (`URLRequest.CachePolicy`'s six policies).
    public var cachePolicy: CachePolicy
    /// Seconds the transport waits for the origin without progress before it gives up.
    /// Default 60, as `URLRequest`'s.
    public var timeoutInterval: Double
    /// The cache partition the request is answered in: responses stored in one partition are
    /// never served in another, nor to a request in none (`CachePartition`). `nil` takes
    /// ``HTTPCache/Configuration/partition``. A name is a non-empty UTF-8 string of at most
    /// 512 bytes without control characters; the request fails with ``InvalidPartition``
    /// otherwise. It is never sent.
    public var partition: String?
    /// The request of a platform's own type this one was made from (a `URLRequest`), for a
    /// transport that speaks it: what the cache changes is set on it, the rest (cookie and
    /// network-access settings) is kept.
    package var platformRequest: (any Sendable)?
    /// The content comes as a stream the platform request holds, not as ``body``.
    package var hasBodyStream = false

    /// Creates a request.
    public init(
        url: URL, method: String = "GET", fields: HeaderFields = [:], body: Data? = nil,
        cachePolicy: CachePolicy = .useProtocolCachePolicy, timeoutInterval: Double = 60, partition: String? = nil
    ) {
        self.url = url
        self.method = method
        self.fields = fields
        self.body = body
        self.cachePolicy = cachePolicy
        self.timeoutInterval = timeoutInterval
        self.partition = partition
    }
}

/// A response from the origin: its head, with the body still arriving.
public struct OriginResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The response fields, in the order received.
    public var fields: HeaderFields
    /// The URL that answered.
    public var url: URL
    /// The body, in chunks as they arrive. It ends with an error when the connection fails
    /// before the body is complete.
    public var body: AsyncThrowingStream<Data, any Error>
    /// The content codings the transport undid (`gzip` …), their `Content-Encoding` dropped:
    /// the body is not the content its `Content-Digest` and `Repr-Digest` describe, so those
    /// are not checked (RFC 9530). Empty when the body is as the origin sent it.
    public var decodedContentCodings: [String] = []

    /// Creates a response whose body streams.
    public init(status: Int, fields: HeaderFields, url: URL, body: AsyncThrowingStream<Data, any Error>) {
        self.status = status
        self.fields = fields
        self.url = url
        self.body = body
    }

    /// Creates a response whose body is already known.
    public init(status: Int, fields: HeaderFields, url: URL, data: Data) {
        self.init(
            status: status, fields: fields, url: url,
            body: AsyncThrowingStream { continuation in
                if !data.isEmpty { continuation.yield(data) }
                continuation.finish()
            })
    }
}

/// What sends requests to the origin. The cache depends on nothing else of the network.
///
/// A transport must not cache, must not follow redirects (the cache follows them itself, so
/// each hop is cached under its own URL), delivers bodies decoded from their content coding with
/// the fields describing the bytes delivered (no `Content-Encoding`, no `Content-Length` of the
/// encoded bytes), and reports a connection failure (refused, DNS, timeout, no network) by
/// throwing. The HTTPCaching library runs its `HTTPTransport`s (a `URLSession`) through this one.
public protocol OriginTransport: Sendable {
    /// Sends `request` and returns as soon as the final response head has arrived.
    func send(_ request: FetchRequest) async throws -> OriginResponse
}
