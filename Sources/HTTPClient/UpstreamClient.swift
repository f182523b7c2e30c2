#if os(Linux)
import CacheSystem
@_spi(Wire) import HTTPWire
import Glibc

/// Sends requests to origins over HTTP/1.1 and reads their responses, with every byte of the
/// framing under its own control (RFC 9112 §6.3).
///
/// What goes out is the request's method, the URL's path and query, field lines in order with
/// repeated names kept, and its body with a `Content-Length` written from it; nothing is added
/// but `Host` when the request has none (see ``UpstreamRequest``'s `wire()`). Redirects are
/// returned, not followed; bodies come back as sent (`Content-Encoding` untouched), with
/// chunked framing removed; interim 1xx heads reach the receiver apart from the final one
/// (``UpstreamReceiver/receive(interim:)``). Only `http`: the proxy reaches https origins through `CONNECT`
/// tunnels, never through this client.
///
/// Responses are framed by ``ResponseFramer``. One whose framing is ambiguous or not decoded
/// (`Content-Length` with `Transfer-Encoding`, a `Transfer-Encoding` other than `chunked`,
/// differing `Content-Length`s) fails with ``UpstreamError/Kind/protocolError`` before its
/// head reaches the receiver; one cut short (a body shorter than its `Content-Length`, a chunked
/// body without its last chunk, a reset) fails with ``UpstreamError/Kind/closed``, never looks
/// complete.
///
/// Connections are kept alive (RFC 9112 §9.3) and reused across requests and threads, from a
/// pool of at most ``Configuration/maxIdleConnections`` for at most
/// ``Configuration/idleConnectionLifetime``. A connection goes back to the pool only after a
/// complete response that lets it persist, with no byte received beyond the response's end;
/// after excess bytes (RFC 9112 §6.3, last paragraph), a body delimited by the close, an error
/// or a receiver that stopped, it is closed. A pooled connection on which anything arrived
/// while it was idle (bytes, EOF) is closed when taken, never used.
///
/// When a reused connection closes or resets before any byte of the response, an idempotent
/// request (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) is sent once more on a new connection; any
/// other is never sent twice and fails as ``UpstreamError/Kind/closed`` (RFC 9110 §9.2.2).
///
/// ```swift
/// let client = UpstreamClient()
/// let request = UpstreamRequest(method: "GET", url: "http://127.0.0.1:8080/a", fields: ["Host": "127.0.0.1:8080"])
/// try client.perform(request, receiver)  // blocks; receiver gets the head, then the body
/// ```
package final class UpstreamClient: Sendable {
    /// Timeouts and pooling.
    package struct Configuration: Sendable {
        /// Seconds to wait for a TCP connection, all of a name's addresses together; 0 or
        /// less: no limit.
        package var connectTimeout = 10.0
        /// Abort when no byte moves in either direction for this long: while the request is
        /// sent (an origin that does not read it) and while the response is awaited or read.
        /// 0 or less: never.
        package var stallTimeout = 60.0
        /// The most idle connections kept for reuse, all origins together; beyond it the one
        /// idle for the longest time is closed. 0: none kept.
        package var maxIdleConnections = 64
        /// Seconds an idle connection is kept; an older one is closed rather than reused. (One
        /// the origin closed sooner is found closed when taken, and not used.)
        package var idleConnectionLifetime = 60.0
        /// The defaults: 10 s to connect, 60 s without a byte, 64 idle connections for 60 s (as
        /// nginx keeps upstream connections).
        package init() {}
    }

    /// Opens a connected, non-blocking socket to a host and port within a timeout in seconds.
    typealias Connector = @Sendable (String, UInt16, Double) -> Result<Int32, OriginSocket.Failure>

    private let configuration: Configuration
    private let pool: ConnectionPool
    private let connector: Connector
    private let limits: ResponseFramer.Limits
    private let readSize: Int

    /// A client with no connections yet; they are made on first use.
    package convenience init(configuration: Configuration = .init()) {
        self.init(configuration: configuration) { host, port, timeout in
            OriginSocket.connect(host: host, port: port, timeout: timeout, blocking: false)
        }
    }

    /// A client whose connections come from `connector` (the fuzzer's sockets), with `limits`
    /// on responses and at most `readSize` bytes per `recv`.
    init(
        configuration: Configuration, limits: ResponseFramer.Limits = .init(), readSize: Int = 64 * 1024,
        connector: @escaping Connector
    ) {
        self.configuration = configuration
        pool = ConnectionPool(
            capacity: max(0, configuration.maxIdleConnections), lifetime: configuration.idleConnectionLifetime)
        self.connector = connector
        self.limits = limits
        self.readSize = readSize
    }

    /// Blocking: sends `request` and delivers the response to `receiver` on this thread.
    ///
    /// The receiver gets the final response head, then the body in pieces as they arrive;
    /// returning `false` from either stops the transfer (and closes its connection). Safe to
    /// call from many threads at once.
    /// - Parameters:
    ///   - request: What to send: an absolute `http` URL; the method as given (`HEAD` reads no
    ///     body and sends none; a body, even empty, is sent with `Content-Length`).
    ///   - receiver: Gets the response.
    /// - Throws: ``UpstreamError``; its ``UpstreamError/receivedHead`` says whether the receiver
    ///   already has the head.
    package func perform(_ request: UpstreamRequest, _ receiver: some UpstreamReceiver) throws(UpstreamError) {
        let wire = try request.wire()
        var connection = try connect(wire, request, fresh: false)
        var outcome = exchange(on: connection, wire, request, receiver)
        if case .unanswered(let detail) = outcome, connection.reused {
            connection.close()
            guard Self.isIdempotent(request.method) else {
                throw UpstreamError(
                    kind: .closed,
                    description: "the kept-alive connection to \(request.url) closed before any response (\(detail)); "
                        + "\(request.method) is not idempotent, so it was not sent again (RFC 9110 §9.2.2)",
                    receivedHead: false)
            }
            connection = try connect(wire, request, fresh: true)
            outcome = exchange(on: connection, wire, request, receiver)
        }
        switch outcome {
        case .complete(let reusable):
            if reusable {
                pool.put(connection.detach(), key: wire.poolKey)
            } else {
                connection.close()
            }
        case .unanswered(let detail):
            connection.close()
            throw UpstreamError(
                kind: .closed,
                description: "the connection to \(request.url) closed before any response (\(detail)); "
                    + "is the origin closing connections it accepts?",
                receivedHead: false)
        case .failed(let error):
            connection.close()
            throw error
        }
    }

    /// A pooled connection to the request's origin (unless `fresh`), else a new one.
    private func connect(_ wire: UpstreamRequest.Wire, _ request: UpstreamRequest, fresh: Bool) throws(UpstreamError)
        -> UpstreamConnection
    {
        if !fresh, let fd = pool.take(wire.poolKey) {
            return UpstreamConnection(
                fd: fd, reused: true, stallTimeout: configuration.stallTimeout, readSize: readSize)
        }
        switch connector(wire.host, wire.port, configuration.connectTimeout) {
        case .success(let fd):
            return UpstreamConnection(
                fd: fd, reused: false, stallTimeout: configuration.stallTimeout, readSize: readSize)
        case .failure(let failure):
            let url = request.url
            switch failure.kind {
            case .timedOut:
                throw UpstreamError(
                    kind: .timeout,
                    description:
                        "could not connect to \(url) within \(OriginSocket.seconds(configuration.connectTimeout)); "
                        + "is the origin up and reachable?",
                    receivedHead: false, connectFailure: failure.description,
                    connectFailureKind: failure.kind)
            case .unresolved:
                throw UpstreamError(
                    kind: .connect, description: "could not connect to \(url): \(failure); is the host name right?",
                    receivedHead: false, connectFailure: failure.description,
                    connectFailureKind: failure.kind)
            case .failed:
                throw UpstreamError(
                    kind: .connect, description: "could not connect to \(url) (\(failure)); is the origin running?",
                    receivedHead: false, connectFailure: failure.description,
                    connectFailureKind: failure.kind)
            }
        }
    }

    /// How one exchange on one connection ended.
    private enum Outcome {
        /// The response is complete; whether the connection may carry another request.
        case complete(reusable: Bool)
        /// Not one byte of a response came before the connection closed or reset, or the
        /// request could not be sent (the detail says which).
        case unanswered(String)
        case failed(UpstreamError)
    }

    /// Sends the request on `connection` and delivers its response to `receiver`.
    private func exchange(
        on connection: UpstreamConnection, _ wire: UpstreamRequest.Wire, _ request: UpstreamRequest,
        _ receiver: some UpstreamReceiver
    ) -> Outcome {
        let url = request.url
        var receivedHead = false
        func failure(_ kind: UpstreamError.Kind, _ description: String) -> Outcome {
            .failed(UpstreamError(kind: kind, description: description, receivedHead: receivedHead))
        }
        var sendFailure = wire.head.withUnsafeBytes { connection.send($0) }
        if sendFailure == nil, wire.sendsBodyApart, let body = request.body {
            sendFailure = body.withUnsafeBytes { connection.send($0) }
        }
        if sendFailure == .stalled {
            return failure(
                .timeout,
                "could not send the request to \(url) for \(OriginSocket.seconds(configuration.stallTimeout)): "
                    + "the origin is not reading it")
        }
        // After a failed send a response may still have arrived (an early 413, say): read it.
        var framer = ResponseFramer(requestMethod: request.method, limits: limits)
        var receivedAny = false
        while true {
            let (event, consumed) = framer.parse(connection.pending)
            switch event {
            case .needMore:
                connection.consume(consumed)
                let received = connection.receive()
                switch received {
                case .bytes:
                    receivedAny = true
                    continue
                case .stalled:
                    let what = receivedHead ? "the response body" : "a response"
                    return failure(
                        .timeout,
                        "no byte from \(url) for \(OriginSocket.seconds(configuration.stallTimeout)) "
                            + "while waiting for \(what)")
                case .closed:
                    guard receivedAny else { return .unanswered(sendFailure?.description ?? "EOF") }
                    guard case .error(let error) = framer.finish() else { return .complete(reusable: false) }
                    return failure(
                        .closed,
                        "the response from \(url) was cut off: \(error); "
                            + "it is incomplete and must not be used as complete")
                case .failed(let code):
                    let detail = errnoText(code)
                    guard receivedAny else { return .unanswered(sendFailure?.description ?? detail) }
                    return failure(
                        .closed,
                        "the connection to \(url) was reset (\(detail)) before the response was complete; "
                            + "it is incomplete and must not be used as complete")
                }
            case .interim(let head):
                connection.consume(consumed)
                receiver.receive(interim: head)
            case .head(let head):
                connection.consume(consumed)
                receivedHead = true
                guard receiver.receive(head: head) else {
                    return failure(.aborted, "the transfer from \(url) was stopped by its receiver")
                }
            case .body(let range):
                let bytes = UnsafeRawBufferPointer(rebasing: connection.pending[range])
                let wanted = receiver.receive(body: bytes)
                connection.consume(consumed)
                guard wanted else { return failure(.aborted, "the transfer from \(url) was stopped by its receiver") }
            case .end:
                connection.consume(consumed)
                // Bytes beyond the response's end are not a response to anything: the
                // connection is closed rather than reused (RFC 9112 §6.3, last paragraph).
                let excess = !connection.pending.isEmpty
                return .complete(
                    reusable: framer.keepsAlive && !excess && !wire.closesConnection && sendFailure == nil)
            case .error(let error):
                return failure(
                    .protocolError,
                    "the response from \(url) was refused: \(error); "
                        + "nothing of it is used or stored, and the connection was closed")
            }
        }
    }

    /// Idempotent methods (RFC 9110 §9.2.2): sending one twice has the effect of sending it once.
    static func isIdempotent(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": true
        default: false
        }
    }
}
#endif
