#if os(Linux)
import CEpollHTTPCache
import CacheSystem
import CacheSemantics
@_spi(Wire) import HTTPWire
import Glibc

/// An HTTP/1.1 server on epoll.
///
/// `init` binds and listens (so ``port`` is known even for port 0), ``start()`` runs
/// `configuration.loops` event-loop threads that share the listening socket, and
/// ``shutdown(timeout:)`` stops them. Requests are parsed strictly (RFC 9112) and handed,
/// complete and one at a time per connection, to the ``RequestHandler``; malformed ones are
/// answered by the server itself with a short text/plain explanation and the connection closed.
///
/// ```swift
/// let server = try HTTPServer(configuration: .init(), handler: handler, log: { print($0) })
/// server.start()
/// print("listening on 127.0.0.1:\(server.port)")
/// // …
/// server.shutdown(timeout: 5)
/// ```
package final class HTTPServer: Sendable {
    /// Where the server listens, how many threads it runs and its limits.
    package struct Configuration: Sendable {
        /// An IPv4 or IPv6 address literal, or `localhost`.
        package var host = "127.0.0.1"
        /// `0` lets the system pick a free port; ``HTTPServer/port`` tells which.
        package var port: UInt16 = 0
        /// Event-loop threads.
        package var loops = 1
        /// The largest request head (request-line, fields, CRLFs) accepted; larger is `431`.
        package var maxHeaderBytes = WireDefaults.maxHeaderBytes
        /// The most field lines accepted in a head (and in a chunked body's trailer); more is `431`.
        package var maxFieldCount = WireDefaults.maxFieldCount
        /// The largest request body accepted, declared or de-chunked; larger is `413`.
        package var maxBodyBytes: Int64 = WireDefaults.maxBodyBytes
        /// Seconds for a request head to arrive in full, from its first byte (or from the
        /// connection's start); a slower head is cut (`408`).
        package var headerTimeout = 10.0
        /// Seconds a keep-alive connection may wait for its next request (and a client may
        /// leave a response unread) before it is closed.
        package var idleTimeout = 60.0
        /// Seconds without a body byte before the request is cut (`408`); also the start of
        /// the time a whole body may take (``bodyMinimumRate``).
        package var bodyTimeout = 30.0
        /// Bytes a second a request body must average once ``bodyTimeout`` has passed since it
        /// began: a body may take ``bodyTimeout`` plus one second for each this many bytes
        /// received, and is cut (`408`) beyond that, however steadily it trickles (a slow-body
        /// attack holds a connection with a byte every few seconds). Apache httpd's
        /// `mod_reqtimeout` asks 500 bytes a second by default, after 20 s.
        package var bodyMinimumRate = 1_000
        /// Open connections beyond which new ones get `503` and are closed at once (plain and
        /// TLS together).
        package var maxConnections = 4096
        /// HTTPS: a second listener whose connections speak HTTP/1.1 or HTTP/2 over TLS; nil for none.
        package var tls: TLSListener?
        /// HTTP/2 (RFC 9113): chosen by ALPN `h2` on the TLS listener, and in cleartext by a client
        /// opening with the connection preface (prior knowledge, §3.3) on the plain one.
        package var http2 = false
        /// The name in `Proxy-Status` (RFC 9209 §2) on the answers the server makes itself
        /// (`400`, `408`, `413`, `431`, `503`); `nil`: none.
        package var proxyName: String?
        /// Seconds, for the limit of one log line a second for each kind of rejected request;
        /// the proxy passes its own clock (a test's manual one). Timeouts run on the monotonic
        /// clock whatever this is.
        package var clock: @Sendable () -> Double = MonotonicClock.seconds
        /// The defaults: 127.0.0.1, a port the system picks, one loop, 16 KiB heads, 100 fields,
        /// 8 MiB bodies, timeouts of 10 s (head), 60 s (idle), 30 s (body), 4096 connections.
        package init() {}
    }

    /// Where the TLS listener is and what it presents.
    package struct TLSListener: Sendable {
        /// An IPv4 or IPv6 address literal, or `localhost`.
        package var host: String
        /// `0` lets the system pick a free port; ``HTTPServer/tlsPort`` tells which.
        package var port: UInt16
        /// The certificates; replace them in place to reload.
        package var certificates: ServerCertificates

        package init(host: String, port: UInt16, certificates: ServerCertificates) {
            self.host = host
            self.port = port
            self.certificates = certificates
        }
    }

    /// Counters since the server was created.
    package struct Statistics: Sendable {
        /// Connections open now.
        package var connectionsOpen = 0
        /// Connections accepted and served.
        package var connectionsAccepted = 0
        /// Connections refused because `maxConnections` were open (or during shutdown).
        package var connectionsRefused = 0
        /// Requests handed to the handler.
        package var requests = 0
        /// Requests the server answered itself with an error (malformed, too large, timed out).
        package var requestsRejected = 0
        /// TLS handshakes completed.
        package var tlsHandshakes = 0
        /// TLS handshakes that failed or did not finish within the header timeout.
        package var tlsHandshakesFailed = 0
        /// Connections that spoke HTTP/2.
        package var http2Connections = 0
        /// HTTP/2 streams handed to the handler (also counted in `requests`).
        package var http2Streams = 0
        /// GOAWAY frames sent, by error code (RFC 9113 §7: 0 NO_ERROR, 1 PROTOCOL_ERROR, 11
        /// ENHANCE_YOUR_CALM, …).
        package var http2GoAways: [UInt32: Int] = [:]
    }

    /// The protocols ALPN may choose toward clients on the TLS listener (RFC 7301), most
    /// preferred first: `h2` when the server speaks HTTP/2, then `http/1.1`.
    package static func applicationProtocols(http2: Bool) -> [String] { http2 ? ["h2", "http/1.1"] : ["http/1.1"] }

    private let core: ServerCore

    /// The listening sockets of a server not made yet: bound first, so that a process can give
    /// up its privileges (`httpcache serve --user`) between binding and opening anything else.
    package struct Listeners: Sendable {
        fileprivate let plain: (fd: Int32, port: UInt16)
        fileprivate let tls: (fd: Int32, port: UInt16)?

        /// Closes the sockets of a server that will not be made.
        package func close() {
            Glibc.close(plain.fd)
            if let tls { Glibc.close(tls.fd) }
        }
    }

    /// Binds and listens on `configuration.host:configuration.port` (and the TLS listener's
    /// address); nothing is accepted before a server made with them is started.
    /// - Throws: ``ServerError`` when the address cannot be used, e.g. "cannot listen on
    ///   127.0.0.1:8080: Address already in use; choose another --listen port".
    package static func listen(_ configuration: Configuration) throws(ServerError) -> Listeners {
        let listener = try openListener(host: configuration.host, port: configuration.port)
        var tlsListener: (fd: Int32, port: UInt16)?
        if let tls = configuration.tls {
            do {
                tlsListener = try openListener(host: tls.host, port: tls.port, option: "--tls-listen")
            } catch {
                Glibc.close(listener.fd)
                throw error
            }
        }
        return Listeners(plain: listener, tls: tlsListener)
    }

    /// Binds and listens on `configuration.host:configuration.port`; nothing is accepted
    /// before ``start()``.
    ///
    /// - Parameters:
    ///   - configuration: address, threads, limits and timeouts.
    ///   - handler: called for every complete request, on the connection's loop thread.
    ///   - log: called with a line for each rejected request and for rare server events
    ///     (refused connections are summed up once a second); from any thread.
    /// - Throws: ``ServerError`` when the address cannot be used (see ``listen(_:)``).
    package convenience init(
        configuration: Configuration, handler: any RequestHandler, log: @escaping @Sendable (String) -> Void
    ) throws(ServerError) {
        self.init(configuration: configuration, listeners: try Self.listen(configuration), handler: handler, log: log)
    }

    /// A server accepting on `listeners`, bound by ``listen(_:)`` with the same configuration.
    package init(
        configuration: Configuration, listeners: Listeners, handler: any RequestHandler,
        log: @escaping @Sendable (String) -> Void
    ) {
        core = ServerCore(
            configuration: configuration, handler: handler, log: log, listenFD: listeners.plain.fd,
            port: listeners.plain.port, tlsListener: listeners.tls)
    }

    deinit {
        core.shutdown(timeout: 0)
    }

    /// The port the server listens on (the one the system chose when configured with 0).
    package var port: UInt16 { core.port }

    /// The port the TLS listener listens on; nil without one.
    package var tlsPort: UInt16? { core.tlsListener?.port }

    /// Starts the event-loop threads; they accept, read and answer until ``shutdown(timeout:)``.
    /// Calling it again does nothing.
    package func start() { core.start() }

    /// Stops the server: no more connections are accepted, idle keep-alive connections are
    /// closed, responses in flight may finish (a connection that is still busy after
    /// `timeout` seconds is closed), then the threads end. Returns when they have; further
    /// calls return at once. Called on a loop thread (from a handler) it starts the same
    /// shutdown but cannot wait for it.
    package func shutdown(timeout: Double) { core.shutdown(timeout: timeout) }

    /// The counters now.
    package var statistics: Statistics { core.statistics }

    /// Sends GOAWAY(NO_ERROR) on every HTTP/2 connection (RFC 9113 §6.8): their streams finish,
    /// new ones go to new connections (after a certificate reload, with the new certificates).
    package func goAwayHTTP2() { core.goAway() }

    /// Calls `answered` once every event loop has taken a turn after this call: the loops are
    /// alive and not stuck in one connection's work (the watchdog of `httpcache serve`). Never
    /// called when a loop does not answer, or has stopped.
    package func whenLoopsAnswer(_ answered: @escaping @Sendable () -> Void) { core.whenLoopsAnswer(answered) }
}

/// Why ``HTTPServer`` could not be created.
package struct ServerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong and what to do, in one line.
    package var description: String
}

/// The server's mutable state behind a lock: the loops and their threads.
private final class ServerCore: @unchecked Sendable {
    let configuration: HTTPServer.Configuration
    let handler: any RequestHandler
    let log: @Sendable (String) -> Void
    /// Shared by the loops: lines that can come with every request, one per kind and second.
    private let limitedLog: LogLimiter
    let listenFD: Int32
    let port: UInt16
    let tlsListener: (fd: Int32, port: UInt16)?
    let counters: ConnectionCounters
    private struct Loops {
        var loops: [EventLoop] = []
        var threads: [SystemThread] = []
        var started = false
        var stopped = false
    }

    private let state = Locked(Loops())

    init(
        configuration: HTTPServer.Configuration, handler: any RequestHandler,
        log: @escaping @Sendable (String) -> Void, listenFD: Int32, port: UInt16,
        tlsListener: (fd: Int32, port: UInt16)?
    ) {
        self.configuration = configuration
        self.handler = handler
        self.log = log
        limitedLog = LogLimiter(clock: configuration.clock, log)
        self.listenFD = listenFD
        self.port = port
        self.tlsListener = tlsListener
        counters = ConnectionCounters(maxConnections: configuration.maxConnections)
    }

    func start() {
        state.withLock { state in
            guard !state.started && !state.stopped else { return }
            state.started = true
            let count = max(1, configuration.loops)
            for index in 0..<count {
                let loop = EventLoop(
                    configuration: configuration, listenFD: listenFD, tlsListenFD: tlsListener?.fd ?? -1,
                    shareListener: count > 1,
                    handler: handler, log: log, limitedLog: limitedLog, counters: counters)
                let thread: SystemThread
                do throws(SystemError) {
                    guard loop.isUsable else { throw SystemError("epoll_create1 or eventfd", code: errno) }
                    thread = try loop.spawn()
                } catch {
                    log("HTTP server: cannot start event loop \(index): \(error.reason)")
                    loop.discard()
                    continue
                }
                state.loops.append(loop)
                state.threads.append(thread)
            }
        }
    }

    func shutdown(timeout: Double) {
        let (loops, threads, first) = state.withLock { state -> ([EventLoop], [SystemThread], Bool) in
            defer { state.stopped = true }
            return (state.loops, state.threads, !state.stopped)
        }
        guard first else { return }
        let deadline = MonotonicClock.coarseMilliseconds() + (timeout > 0 ? milliseconds(timeout) : 0)
        for loop in loops { _ = loop.post(.shutdown(deadline: deadline)) }
        // A loop thread cannot wait for itself (the last reference dropped in a handler): then
        // the threads end on their own and the listening socket stays open, lest its number be
        // reused while a loop still watches it.
        guard !EventLoop.isOnAnyLoop else {
            for thread in threads { thread.detach() }
            return
        }
        for thread in threads { thread.join() }
        counters.forgetLoops()
        Glibc.close(listenFD)
        if let tlsListener { Glibc.close(tlsListener.fd) }
    }

    func goAway() {
        for loop in state.withLock({ $0.loops }) { _ = loop.post(.goAway) }
    }

    func whenLoopsAnswer(_ answered: @escaping @Sendable () -> Void) {
        let loops = state.withLock { $0.loops }
        guard !loops.isEmpty else { return }
        let waiting = Locked(loops.count)
        let answer: @Sendable () -> Void = {
            if waiting.withLock({ count -> Bool in
                count -= 1
                return count == 0
            }) {
                answered()
            }
        }
        for loop in loops { _ = loop.post(.ping(answer)) }
    }

    var statistics: HTTPServer.Statistics {
        let loops = state.withLock { $0.loops }
        let connections = counters.snapshot
        var statistics = HTTPServer.Statistics()
        statistics.connectionsOpen = connections.open
        statistics.connectionsAccepted = connections.accepted
        statistics.connectionsRefused = connections.refused
        for loop in loops {
            let counts = loop.counts
            statistics.requests += counts.requests
            statistics.requestsRejected += counts.rejected
            statistics.tlsHandshakes += counts.handshakes
            statistics.tlsHandshakesFailed += counts.failedHandshakes
            statistics.http2Connections += counts.http2Connections
            statistics.http2Streams += counts.http2Streams
            statistics.http2GoAways.merge(counts.goAways, uniquingKeysWith: +)
        }
        return statistics
    }
}
#endif
