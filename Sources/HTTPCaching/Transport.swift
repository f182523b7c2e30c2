import CacheExchange
import CacheStorage
import CacheSystem
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A response from the network: its head, with the body still arriving.
public struct TransportResponse: @unchecked Sendable {
    /// The response head.
    public var response: HTTPURLResponse
    /// The body, in chunks as they arrive. It ends with an error when the connection fails
    /// before the body is complete.
    public var body: AsyncThrowingStream<Data, any Error>
    /// The content codings the transport undid (`gzip` …), whose `Content-Encoding` it dropped
    /// (``OriginResponse/decodedContentCodings``).
    public var decodedContentCodings: [String] = []

    /// Creates a response whose body streams.
    public init(response: HTTPURLResponse, body: AsyncThrowingStream<Data, any Error>) {
        self.response = response
        self.body = body
    }

    /// Creates a response whose body is already known.
    public init(response: HTTPURLResponse, data: Data) {
        self.response = response
        body = AsyncThrowingStream { continuation in
            if !data.isEmpty { continuation.yield(data) }
            continuation.finish()
        }
    }
}

/// What sends requests to the origin. The cache depends on nothing else of the network.
///
/// A transport must not cache, must not follow redirects (the cache follows them itself, so
/// each hop is cached under its own URL), and reports a connection failure (refused, DNS,
/// timeout, no network) by throwing.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns as soon as the response head has arrived.
    func send(_ request: URLRequest) async throws -> TransportResponse
}

/// An ``HTTPTransport`` on a `URLSession` of its own, with no `URLCache`, no cookies kept
/// between requests unless the configuration says so, and redirects handed back unfollowed.
///
/// URLSession decodes `gzip`, `deflate` and `br` content codings itself; for such a response
/// the fields passed on omit `Content-Encoding` and `Content-Length`, so what is stored and
/// served describes the bytes it holds.
///
/// Releasing the transport lets its session go once the requests still running (a body still
/// being read) have finished: its connections, threads and memory. (A session keeps its
/// delegate until it is invalidated, so the delegate is an object of its own, not the
/// transport.)
public final class URLSessionTransport: HTTPTransport, Sendable {
    private let session: URLSession
    private let delegate: SessionDelegate

    /// Creates a transport. The configuration's `urlCache` is removed, its request cache
    /// policy set to ignore local data, and ``CachingURLProtocol`` removed from its protocol
    /// classes so requests the cache sends are never intercepted by the cache itself.
    public init(configuration: URLSessionConfiguration = .ephemeral) {
        let configuration = configuration.copy() as! URLSessionConfiguration
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.protocolClasses = configuration.protocolClasses?.filter { $0 != CachingURLProtocol.self }
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        delegate = SessionDelegate()
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
    }

    deinit { session.finishTasksAndInvalidate() }

    public func send(_ request: URLRequest) async throws -> TransportResponse {
        let task = session.dataTask(with: request)
        let identifier = task.taskIdentifier
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                delegate.tasks.withLock { $0[identifier] = SessionDelegate.TaskState(head: continuation) }
                task.resume()
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// URLSession decodes `gzip`, `deflate` and `br` bodies but keeps the fields that
    /// describe the encoded bytes; the response handed on describes the bytes delivered.
    static func decoded(_ response: HTTPURLResponse) -> HTTPURLResponse {
        let coding = response.value(forHTTPHeaderField: "Content-Encoding")?.lowercased()
            .trimmingCharacters(in: .whitespaces)
        guard let coding, ["gzip", "x-gzip", "deflate", "br"].contains(coding), let url = response.url else {
            return response
        }
        var fields: [String: String] = [:]
        for case (let name as String, let value as String) in response.allHeaderFields
        where !["content-encoding", "content-length"].contains(name.lowercased()) {
            fields[name] = value
        }
        return HTTPURLResponse(url: url, statusCode: response.statusCode, httpVersion: "HTTP/1.1", headerFields: fields)
            ?? response
    }
}

/// The delegate of a ``URLSessionTransport``'s session: hands each task's head and body to the
/// request waiting for it.
private final class SessionDelegate: NSObject, URLSessionDataDelegate, Sendable {
    struct TaskState {
        var head: CheckedContinuation<TransportResponse, any Error>?
        var body: AsyncThrowingStream<Data, any Error>.Continuation?
    }

    let tasks = Locked([Int: TaskState]())

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        let identifier = dataTask.taskIdentifier
        if let http = response as? HTTPURLResponse, (100...199).contains(http.statusCode), http.statusCode != 101 {
            // swift-corelibs-foundation hands interim responses (a 103 Early Hints) to this
            // callback too, before the final one: taken for the final response, the exchange
            // would answer with the 103 and wait for ever on a body that goes elsewhere. They
            // are not the answer (RFC 9110 §15.2); the final response follows.
            completionHandler(.allow)
            return
        }
        guard let http = response as? HTTPURLResponse else {
            let continuation = tasks.withLock { $0.removeValue(forKey: identifier)?.head }
            continuation?.resume(throwing: URLError(.badServerResponse))
            completionHandler(.cancel)
            return
        }
        let (stream, bodyContinuation) = AsyncThrowingStream<Data, any Error>.makeStream()
        bodyContinuation.onTermination = { termination in
            if case .cancelled = termination { dataTask.cancel() }
        }
        let head = tasks.withLock { state -> CheckedContinuation<TransportResponse, any Error>? in
            let head = state[identifier]?.head
            state[identifier] = TaskState(head: nil, body: bodyContinuation)
            return head
        }
        let decoded = URLSessionTransport.decoded(http)
        var response = TransportResponse(response: decoded, body: stream)
        if decoded !== http {
            response.decodedContentCodings = [http.value(forHTTPHeaderField: "Content-Encoding") ?? ""]
        }
        head?.resume(returning: response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let body = tasks.withLock { $0[dataTask.taskIdentifier]?.body }
        body?.yield(data)
    }

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let state = tasks.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let head = state.head {
            // No response head arrived (a redirect handed back arrives here on some platforms).
            if error == nil, let http = task.response as? HTTPURLResponse {
                head.resume(returning: TransportResponse(response: http, data: Data()))
            } else {
                head.resume(throwing: error ?? URLError(.badServerResponse))
            }
        }
        if let error {
            state.body?.finish(throwing: error)
        } else {
            state.body?.finish()
        }
    }
}
