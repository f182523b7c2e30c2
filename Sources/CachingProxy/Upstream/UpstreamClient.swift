internal import CCurlHTTPCache
import CacheLocking
import CacheStorage

/// Sends requests to origins with libcurl, fields and bytes passed through exactly.
///
/// What goes out is the request's method, URL path and query, field lines in order with
/// repeated names kept, and its body with a `Content-Length` written from it; libcurl adds
/// nothing but `Host` when the request has none (no `Accept`, `Accept-Encoding`, `Expect`,
/// `User-Agent` or form `Content-Type`). HTTP/1.1 only; redirects are returned, not followed;
/// bodies come back as sent (`Content-Encoding` untouched), with chunked framing removed; only
/// the final response reaches the receiver (interim 1xx responses are skipped).
///
/// Connections are kept alive and reused across requests and threads: idle libcurl handles,
/// each with its connection cache, wait in a pool of at most
/// ``Configuration/maxIdleHandles``. When a kept-alive connection turns out to be closed before
/// any byte of the response, an idempotent request (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) is
/// sent once more on a new connection; any other is never sent twice and fails as
/// ``UpstreamError/Kind/closed`` (RFC 9110 §9.2.2).
///
/// ```swift
/// let client = UpstreamClient()
/// let request = UpstreamRequest(method: "GET", url: "http://127.0.0.1:8080/a", fields: ["Host": "127.0.0.1:8080"])
/// try client.perform(request, receiver)  // blocks; receiver gets the head, then the body
/// ```
package final class UpstreamClient: Sendable {
    /// Timeouts and pooling.
    package struct Configuration: Sendable {
        /// Seconds to wait for a connection (TCP, and TLS for https); 0 or less: libcurl's
        /// default of 300 s.
        package var connectTimeout = 10.0
        /// Abort when no byte arrives for this long.
        ///
        /// Counted once the request is being sent, in both directions (a body the origin does
        /// not read stalls too), and checked about once a second. 0 or less: never.
        package var stallTimeout = 60.0
        /// The most libcurl handles (each with its kept-alive connections) kept for reuse
        /// between requests; beyond it a finished handle and its connections are closed.
        package var maxIdleHandles = 64
        /// The defaults: 10 s to connect, 60 s without a byte, 64 idle handles.
        package init() {}
    }

    private let configuration: Configuration
    /// Idle handles, most recently used last: taking the last one reuses the connection that
    /// has been idle for the shortest time, the likeliest to be still open.
    ///
    /// Each handle keeps its own connection cache. A CURLSH share of connections would let any
    /// handle take any idle connection, but libcurl 7.88's shared connection cache is not safe
    /// across threads (its known bug 11.11). A shared DNS cache is not used either: each handle
    /// caches names for 60 s already, so it would save at most one lookup per handle and name.
    private let idleHandles = Locked<[EasyHandle]>([])

    /// A client with no connections yet; they are made on first use.
    package init(configuration: Configuration = .init()) {
        self.configuration = configuration
    }

    /// Blocking: sends `request` and delivers the response to `receiver` on this thread.
    ///
    /// The receiver gets the final response head, then the body in pieces as they arrive;
    /// returning `false` from either stops the transfer (and closes its connection). Safe to
    /// call from many threads at once.
    /// - Parameters:
    ///   - request: What to send: an absolute `http` or `https` URL; the method as given
    ///     (`HEAD` reads no body; a body, even empty, is sent with `Content-Length`; HEAD's
    ///     body is not sent).
    ///   - receiver: Gets the response.
    /// - Throws: ``UpstreamError``; its ``UpstreamError/receivedHead`` says whether the receiver
    ///   already has the head.
    package func perform(_ request: UpstreamRequest, _ receiver: some UpstreamReceiver) throws(UpstreamError) {
        guard Self.isToken(request.method) else {
            throw UpstreamError(
                kind: .other, description: "cannot send \"\(request.method)\" to \(request.url): not a method token",
                receivedHead: false)
        }
        guard let handle = idleHandles.withLock({ $0.popLast() }) ?? EasyHandle() else {
            throw UpstreamError(
                kind: .other, description: "cannot send a request to \(request.url): libcurl could not start",
                receivedHead: false)
        }
        let transfer = UpstreamTransfer(
            receiver: receiver, idempotent: Self.isIdempotent(request.method),
            stallTimeout: configuration.stallTimeout)
        let code = handle.perform(request, transfer: transfer, configuration: configuration)
        let failure =
            code == CURLE_OK && transfer.stop == nil && transfer.receivedHead
            ? nil
            : UpstreamError(
                code: code, transfer: transfer, request: request, detail: handle.detail(for: code),
                osErrno: handle.osErrno, configuration: configuration)
        idleHandles.withLock { idle in
            if idle.count < configuration.maxIdleHandles { idle.append(handle) }
        }
        // A handle the pool had no room for is cleaned up here, outside the lock.
        if let failure { throw failure }
    }

    /// Idempotent methods (RFC 9110 §9.2.2): sending one twice has the effect of sending it once.
    static func isIdempotent(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": true
        default: false
        }
    }

    /// Whether `method` is a token (RFC 9110 §9.1, §5.6.2), so it cannot split the request line.
    static func isToken(_ method: String) -> Bool {
        !method.isEmpty
            && method.utf8.allSatisfy { byte in
                switch byte {
                case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
                case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
                    UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
                    UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
                    true
                default: false
                }
            }
    }
}
