#if os(Linux)
import CacheSystem
import CacheTLS
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
/// (``UpstreamReceiver/receive(interim:)``). `http` and `https` URLs (TLS to the origin,
/// verified; through a proxy's `CONNECT` tunnel when the request names a proxy).
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
        /// PEM files of certificate authorities trusted for `https` origins besides the
        /// system's trust store (`/etc/ssl/certs`, or `SSL_CERT_FILE` and `SSL_CERT_DIR`): for
        /// origins with certificates from a private CA. Verification itself is never turned off.
        package var extraTrustRoots: [String] = []
        /// How the user trusts another authority, named in the error about a certificate from an
        /// unknown one: `--cacert FILE` for the CLI, `--origin-cacert FILE` for the proxy.
        package var trustAdvice = "--cacert FILE"
        /// The defaults: 10 s to connect (the TLS handshake 10 s more), 60 s without a byte, 64
        /// idle connections for 60 s (as nginx keeps upstream connections), the system's trust
        /// store alone.
        package init() {}
    }

    /// Opens a connected, non-blocking socket to a host and port within a timeout in seconds.
    typealias Connector = @Sendable (String, UInt16, Double) -> Result<Int32, OriginSocket.Failure>

    let configuration: Configuration
    let pool: ConnectionPool
    private let connector: Connector
    /// What every `https` connection of this client shares: the trusted authorities, ALPN
    /// `http/1.1`, the sessions kept for resumption. `nil`: `https` URLs are refused.
    private let tls: TLSClientContext?
    private let limits: ResponseFramer.Limits
    let readSize: Int

    /// A client with no connections yet; they are made on first use. Its TLS context reads
    /// ``Configuration/extraTrustRoots`` now, and sets up OpenSSL with the system's trust store
    /// on the first `https` connection.
    /// - Throws: ``UpstreamError/Kind/tls`` when an extra trust root cannot be read or holds no
    ///   certificate, or OpenSSL cannot make the context; the description says which file and why.
    package convenience init(configuration: Configuration = .init()) throws(UpstreamError) {
        self.init(configuration: configuration, tls: try Self.tlsContext(configuration)) { host, port, timeout in
            OriginSocket.connect(host: host, port: port, timeout: timeout, blocking: false)
        }
    }

    /// A client on a TLS context shared with others (the clients of different timeouts).
    convenience init(configuration: Configuration, tls: TLSClientContext) {
        self.init(configuration: configuration, tls: tls) { host, port, timeout in
            OriginSocket.connect(host: host, port: port, timeout: timeout, blocking: false)
        }
    }

    /// The TLS context of `configuration`: the system's trust store and its extra trust roots.
    /// - Throws: ``UpstreamError/Kind/tls`` naming the file and why it cannot be used.
    static func tlsContext(_ configuration: Configuration) throws(UpstreamError) -> TLSClientContext {
        do {
            return try TLSClientContext(
                .init(extraTrustRoots: configuration.extraTrustRoots, trustAdvice: configuration.trustAdvice))
        } catch {
            throw UpstreamError(kind: .tls, description: "cannot set up TLS: \(error)", receivedHead: false)
        }
    }

    /// A client whose connections come from `connector` (the fuzzer's sockets), with `limits`
    /// on responses and at most `readSize` bytes per `recv`; `https` with `tls` only.
    init(
        configuration: Configuration, tls: TLSClientContext? = nil, limits: ResponseFramer.Limits = .init(),
        readSize: Int = 64 * 1024, connector: @escaping Connector
    ) {
        self.configuration = configuration
        pool = ConnectionPool(
            capacity: max(0, configuration.maxIdleConnections), lifetime: configuration.idleConnectionLifetime)
        self.connector = connector
        self.tls = tls
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
    package func perform(_ request: UpstreamRequest, _ receiver: any UpstreamReceiver) throws(UpstreamError) {
        let wire = try request.wire()
        var connection = try connect(wire, request, fresh: false)
        var outcome = exchange(on: connection, wire, request, receiver).run()
        if case .unanswered(let detail) = outcome, connection.reused {
            connection.close()
            try checkIdempotent(request, detail)
            connection = try connect(wire, request, fresh: true)
            outcome = exchange(on: connection, wire, request, receiver).run()
        }
        try conclude(outcome, connection, wire, request)
    }

    /// An exchange of `request` on `connection`, not started.
    func exchange(
        on connection: UpstreamConnection, _ wire: UpstreamRequest.Wire, _ request: UpstreamRequest,
        _ receiver: any UpstreamReceiver
    ) -> UpstreamExchange {
        UpstreamExchange(
            on: connection, wire, request, receiver, limits: limits, stallTimeout: configuration.stallTimeout)
    }

    /// Throws unless `request` may be sent again after its kept-alive connection closed before
    /// any response (RFC 9110 §9.2.2).
    func checkIdempotent(_ request: UpstreamRequest, _ detail: String) throws(UpstreamError) {
        guard !Self.isIdempotent(request.method) else { return }
        throw UpstreamError(
            kind: .closed,
            description: "the kept-alive connection to \(request.url) closed before any response (\(detail)); "
                + "\(request.method) is not idempotent, so it was not sent again (RFC 9110 §9.2.2)",
            receivedHead: false)
    }

    /// Ends an exchange: its connection back to the pool when it may carry another request,
    /// else closed; the error, if it failed.
    func conclude(
        _ outcome: UpstreamExchange.Outcome, _ connection: UpstreamConnection, _ wire: UpstreamRequest.Wire,
        _ request: UpstreamRequest
    ) throws(UpstreamError) {
        switch outcome {
        case .complete(let reusable):
            if reusable, let stream = connection.detach() {
                pool.put(stream, key: wire.poolKey)
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

    /// A pooled connection to the request's origin (unless `fresh`), else a new one: TCP to
    /// the origin or the proxy, a tunnel through the proxy for `https`, TLS for `https`.
    private func connect(_ wire: UpstreamRequest.Wire, _ request: UpstreamRequest, fresh: Bool) throws(UpstreamError)
        -> UpstreamConnection
    {
        if !fresh, let stream = pool.take(wire.poolKey) {
            return UpstreamConnection(
                stream: stream, reused: true, stallTimeout: configuration.stallTimeout, readSize: readSize)
        }
        var socket = try tcpConnection(wire, request)
        if let tunnel = wire.tunnel {
            socket = try openTunnel(on: socket, to: tunnel.target, through: tunnel.proxy, request)
        }
        let stream: any UpstreamStream = wire.scheme == .https ? try secured(socket, wire, request) : socket
        return UpstreamConnection(
            stream: stream, reused: false, stallTimeout: configuration.stallTimeout, readSize: readSize)
    }

    /// A new TCP connection to the origin, or to the proxy when there is one.
    private func tcpConnection(_ wire: UpstreamRequest.Wire, _ request: UpstreamRequest) throws(UpstreamError)
        -> SocketStream
    {
        let failure: OriginSocket.Failure
        switch connector(wire.host, wire.port, configuration.connectTimeout) {
        case .success(let fd): return SocketStream(fd: fd)
        case .failure(let given): failure = given
        }
        let url = request.url
        let what = request.proxy.map { "the proxy \($0) for \(url)" } ?? url
        let server = request.proxy == nil ? "origin" : "proxy"
        switch failure.kind {
        case .timedOut:
            throw UpstreamError(
                kind: .timeout,
                description:
                    "could not connect to \(what) within \(OriginSocket.seconds(configuration.connectTimeout)); "
                    + "is the \(server) up and reachable?",
                receivedHead: false, connectFailure: failure.description, connectFailureKind: failure.kind)
        case .unresolved:
            throw UpstreamError(
                kind: .connect, description: "could not connect to \(what): \(failure); is the host name right?",
                receivedHead: false, connectFailure: failure.description, connectFailureKind: failure.kind)
        case .failed:
            throw UpstreamError(
                kind: .connect, description: "could not connect to \(what) (\(failure)); is the \(server) running?",
                receivedHead: false, connectFailure: failure.description, connectFailureKind: failure.kind)
        }
    }

    /// Asks the proxy on `socket` for a tunnel to `target` (`CONNECT host:port`, RFC 9110
    /// §9.3.6); returns the socket, now a tunnel to the origin, once the proxy answered 2xx.
    /// - Throws: ``UpstreamError/Kind/connect`` naming the proxy and what it answered when it
    ///   refused (any status but 2xx) or did not answer; ``UpstreamError/Kind/timeout`` when
    ///   it sent nothing for the stall timeout.
    func openTunnel(
        on socket: SocketStream, to target: String, through proxy: String, _ request: UpstreamRequest
    ) throws(UpstreamError) -> SocketStream {
        let connection = UpstreamConnection(
            stream: socket, reused: false, stallTimeout: configuration.stallTimeout, readSize: readSize)
        func failure(_ kind: UpstreamError.Kind, _ reason: String) -> UpstreamError {
            UpstreamError(
                kind: kind,
                description: "could not reach \(request.url): the proxy \(proxy) \(reason)",
                receivedHead: false, connectFailure: "the proxy \(reason)")
        }
        // The request-target is the authority, and so is Host (RFC 9110 §9.3.6, RFC 9112 §3.2).
        var head: [UInt8] = []
        HeadWriter.appendRequestLine(method: "CONNECT", target: Substring(target), to: &head)
        HeadWriter.appendField(name: "Host", value: target, to: &head)
        HeadWriter.appendEnd(to: &head)
        if let sendFailure = head.withUnsafeBytes({ connection.send($0) }) {
            throw failure(
                sendFailure == .stalled ? .timeout : .connect,
                "did not take the request CONNECT \(target) (\(sendFailure))")
        }
        var framer = ResponseFramer(requestMethod: "CONNECT", limits: limits)
        while true {
            let (event, consumed) = framer.parse(connection.pending)
            connection.consume(consumed)
            switch event {
            case .needMore:
                switch connection.receive() {
                case .bytes: continue
                case .stalled:
                    throw failure(
                        .timeout,
                        "sent no answer to CONNECT \(target) for \(OriginSocket.seconds(configuration.stallTimeout))")
                case .closed:
                    throw failure(.connect, "closed the connection without answering CONNECT \(target)")
                case .failed(let reason):
                    throw failure(.connect, "reset the connection while answering CONNECT \(target) (\(reason))")
                }
            case .interim:
                continue
            case .head(let head) where (200..<300).contains(head.status):
                // The tunnel starts right after the head (RFC 9112 §6.3 item 2); a TLS server
                // speaks only once the client has, so anything already here is not the origin's.
                guard connection.detach() != nil else {
                    throw failure(.connect, "sent bytes after its \(head.status) answer to CONNECT \(target)")
                }
                return socket
            case .head(let head):
                throw failure(
                    .connect,
                    "refused to open a tunnel to \(target): \(head.status) \(head.reason); "
                        + "is the destination allowed by the proxy?")
            case .body, .end, .error:
                let reason = if case .error(let error) = event { "\(error)" } else { "no head" }
                throw failure(.connect, "answered CONNECT \(target) with something that is not HTTP: \(reason)")
            }
        }
    }

    /// `socket` with TLS to the origin over it (RFC 9110 §4.2.2): the certificate verified
    /// for the URL's host, which SNI carries, a session of an earlier connection to the origin
    /// resumed when one is kept; the handshake bounded by the connect timeout.
    /// - Throws: ``UpstreamError/Kind/tls`` naming the origin and the cause in words (expired,
    ///   not yet valid, wrong host name, unknown issuer, protocol version, handshake failure);
    ///   ``UpstreamError/Kind/timeout`` when the handshake did not finish in time.
    private func secured(_ socket: SocketStream, _ wire: UpstreamRequest.Wire, _ request: UpstreamRequest)
        throws(UpstreamError) -> any UpstreamStream
    {
        guard let tls else {
            throw UpstreamError(
                kind: .other, description: "cannot send a request to \(request.url): this client has no TLS",
                receivedHead: false)
        }
        let timeout = configuration.connectTimeout > 0 ? configuration.connectTimeout : configuration.stallTimeout
        do throws(TLSError) {
            let connection = try tls.connection(fd: socket.fd, host: wire.originHost, port: wire.originPort)
            try connection.handshake(timeout: timeout)
            return TLSStream(connection, fd: socket.detach())
        } catch .timedOut {
            throw UpstreamError(
                kind: .timeout,
                description: "could not connect securely to \(request.url): the TLS handshake did not finish within "
                    + "\(OriginSocket.seconds(timeout)); is it a TLS server?",
                receivedHead: false, connectFailure: "TLS handshake timed out")
        } catch {
            throw UpstreamError(
                kind: .tls, description: "could not connect securely to \(request.url): \(error)", receivedHead: false,
                connectFailure: error.description, tlsFailure: error)
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
