import CacheSystem
import Foundation
import HTTPCacheCore

#if os(Linux)
import CacheSemantics
import HTTPClient
@_spi(Wire) import HTTPWire
#elseif canImport(HTTPCaching)
import HTTPCaching
#endif

/// How the command-line tool reaches origins: on Linux the package's own HTTP/1.1 client
/// (HTTPClient), so that the process never loads FoundationNetworking and libcurl; elsewhere
/// URLSession.
enum Network {
    /// The transport of a fetching command.
    ///
    /// - Parameter timeout: Seconds without progress (and to connect) before giving up; `nil`
    ///   for the client's defaults.
    static func transport(timeout: Double?) -> any OriginTransport {
        #if os(Linux)
        return ClientTransport(timeout: timeout)
        #else
        return URLRequestTransport(URLSessionTransport())
        #endif
    }
}

#if os(Linux)
/// An `OriginTransport` on HTTPClient's `UpstreamClient`: each request blocks a thread of its
/// own (never one of Swift's cooperative pool) while the body streams to the reader.
///
/// The client sends what it is given and delivers the body as sent: no `Accept-Encoding` is
/// added, so an origin answers with identity unless `-H` asks otherwise, and then the coded
/// bytes are stored with their `Content-Encoding`, as curl without `--compressed` does. Only
/// `http` until the client speaks TLS.
struct ClientTransport: OriginTransport {
    private let client: UpstreamClient

    init(timeout: Double?) {
        var configuration = UpstreamClient.Configuration()
        if let timeout {
            configuration.connectTimeout = timeout
            configuration.stallTimeout = timeout
        }
        client = UpstreamClient(configuration: configuration)
    }

    func send(_ request: FetchRequest) async throws -> OriginResponse {
        guard request.url.scheme?.lowercased() == "http" else {
            throw URLError(
                .unsupportedURL,
                userInfo: [
                    NSLocalizedDescriptionKey:
                        "https is not available in this build of httpcache (its client has no TLS yet); "
                        + "fetch the http URL, or put `httpcache serve --forward` in front"
                ])
        }
        let upstream = UpstreamRequest(
            method: request.method, url: request.url.absoluteString, fields: request.fields,
            body: request.body.map { Array($0) })
        let client = self.client
        return try await withCheckedThrowingContinuation { continuation in
            let receiver = StreamingReceiver(url: request.url, head: continuation)
            do {
                try SystemThread.detached(name: "httpcache fetch") {
                    do {
                        try client.perform(upstream, receiver)
                        receiver.end(nil)
                    } catch {
                        receiver.end(error)
                    }
                }
            } catch {
                receiver.end(
                    URLError(
                        .cannotConnectToHost,
                        userInfo: [
                            NSLocalizedDescriptionKey: "no thread to fetch \(request.url.absoluteString): \(error)"
                        ]
                    ))
            }
        }
    }
}

/// Hands what the client receives on its thread to the cache: the head resumes the caller, the
/// body goes into the response's stream. A reader that stops (cancelled, or done with a
/// response it does not read) stops the transfer at the next piece.
private final class StreamingReceiver: UpstreamReceiver, @unchecked Sendable {
    // `head` is used on the fetching thread only, after `init`; `stopped` is behind its lock.
    private var head: CheckedContinuation<OriginResponse, any Error>?
    private let url: URL
    private let body: AsyncThrowingStream<Data, any Error>
    private let continuation: AsyncThrowingStream<Data, any Error>.Continuation
    private let stopped = Locked(false)

    init(url: URL, head: CheckedContinuation<OriginResponse, any Error>) {
        self.url = url
        self.head = head
        (body, continuation) = AsyncThrowingStream.makeStream()
        continuation.onTermination = { [stopped] termination in
            if case .cancelled = termination { stopped.withLock { $0 = true } }
        }
    }

    func receive(head response: UpstreamResponseHead) -> Bool {
        head?.resume(returning: OriginResponse(status: response.status, fields: response.fields, url: url, body: body))
        head = nil
        return !stopped.withLock { $0 }
    }

    func receive(body bytes: UnsafeRawBufferPointer) -> Bool {
        continuation.yield(Data(bytes))
        return !stopped.withLock { $0 }
    }

    /// The transfer is over: complete, or failed with `error`.
    func end(_ error: (any Error)?) {
        let failure = error.map(Self.urlError)
        if let head {
            self.head = nil
            head.resume(throwing: failure ?? URLError(.badServerResponse))
        } else if let failure {
            continuation.finish(throwing: failure)
        } else {
            continuation.finish()
        }
    }

    /// The client's error as the `URLError` the cache and the command's messages expect.
    private static func urlError(_ error: any Error) -> URLError {
        guard let error = error as? UpstreamError else {
            return error as? URLError ?? URLError(.unknown, userInfo: [NSLocalizedDescriptionKey: "\(error)"])
        }
        let code: URLError.Code
        switch error.kind {
        case .connect: code = .cannotConnectToHost
        case .timeout: code = .timedOut
        case .closed: code = .networkConnectionLost
        case .aborted: code = .cancelled
        case .protocolError: code = .badServerResponse
        case .other: code = .badURL
        }
        return URLError(code, userInfo: [NSLocalizedDescriptionKey: error.connectFailure ?? error.description])
    }
}
#endif
