#if os(Linux)
import CEpollHTTPCache
import CacheExchange
import CacheSystem
import CacheSemantics
import CacheStorage
import CacheTLS
import Foundation

/// A shared HTTP cache in front of one origin (reverse proxy) or any origin (forward proxy):
/// the engine of `CacheSemantics` in shared mode (RFC 9111, RFC 5861, RFC 8246,
/// RFC 9211, RFC 9213) over a `CacheStore`, served by an HTTP/1.1 server on epoll, with
/// origins reached through its own HTTP/1.1 client. This is what `httpcache serve` runs.
///
/// ```swift
/// var configuration = CachingProxy.Configuration(mode: .reverse(origin: "http://127.0.0.1:8081"))
/// configuration.port = 8080
/// let proxy = try CachingProxy(configuration)
/// proxy.start()
/// // …
/// proxy.shutdown(timeout: 30)
/// ```
public final class CachingProxy: Sendable {
    /// Which origins the proxy sends requests to.
    public enum Mode: Sendable, Equatable {
        /// Every request goes to this origin (`http://host[:port][/base]`, or `https://…`: TLS
        /// to it, its certificate verified); clients send origin-form targets (`GET /path`).
        case reverse(origin: String)
        /// Clients name the origin in absolute-form targets (`GET http://host/path`);
        /// `CONNECT host:port` is tunnelled, not cached (RFC 9110 §9.3.6).
        case forward
    }

    /// How the proxy runs.
    public struct Configuration: Sendable {
        public var mode: Mode
        /// The address to listen on; loopback by default.
        public var host = "127.0.0.1"
        /// The port; `0` picks a free one (see ``CachingProxy/port``).
        public var port: UInt16 = 8080
        /// The store's directory; `nil` keeps responses in memory only.
        public var cacheDirectory: String?
        /// A store of your own instead of the memory and disk tiers configured here: for
        /// example a `SharedStore` on Redis (the `CacheStorageRedis` library), which several
        /// proxies share.
        public var store: (any CacheStore)?
        /// More metrics for the metrics page: what ``store`` counts (Redis round trips,
        /// errors, invalidations).
        public var storeMetrics: (@Sendable () -> [Metric])?
        /// The entry counts and sizes the metrics page shows; by default the store's
        /// `totals()`. A store shared in Redis counts its entries by scanning Redis, far too
        /// slow for every scrape: `httpcache serve --redis` shows its local tier's instead.
        public var storeTotals: (@Sendable () -> StoreTotals)?
        /// Bytes kept in memory: bodies and each entry's overhead (its head and bookkeeping);
        /// what the proxy remembers per URL takes at most a quarter more (at least 4 MiB).
        public var memoryCapacity: Int64 = 256 << 20
        /// Bytes of bodies kept on disk.
        public var diskCapacity: Int64 = 1 << 30
        /// The key the store in ``cacheDirectory`` is encrypted with at rest (see
        /// `DiskStore.Configuration.encryptionKey`); `nil` keeps it in the clear.
        public var encryptionKey: EncryptionKey?
        /// The name in `Cache-Status` (RFC 9211 §2) and `Via` (RFC 9110 §7.6.3).
        public var name = "httpcache"
        /// Clients not on loopback may `PURGE` and read metrics when they send
        /// `Authorization: Bearer <token>`; loopback clients always may.
        public var adminToken: String?
        /// Forward mode: the only destinations requests may go to, each `host` (any port) or
        /// `host:port` (IPv6 in brackets); others get `403` before any name lookup or
        /// connection, also for `CONNECT`. `nil` (the default): any destination. What Squid's
        /// `dst` ACLs give an operator; tests put browsers behind the proxy with only `127.0.0.1`.
        public var allowedDestinations: [String]?
        /// The path of the Prometheus metrics (`GET`).
        public var metricsPath = "/_httpcache/metrics"
        /// Event-loop threads.
        public var loops = 1
        /// Open client connections beyond which new ones are refused.
        public var maxConnections = 4096
        /// Seconds a client has to send a complete request head (slowloris).
        public var headerTimeout = 10.0
        /// Seconds an idle keep-alive connection stays open.
        public var idleTimeout = 60.0
        /// The largest request body accepted (`413` beyond).
        public var maxRequestBodyBytes: Int64 = 8 << 20
        /// The largest `QUERY` content keyed and cached (RFC 10008 §2.7): a larger `QUERY` is sent
        /// to the origin uncached, with `detail=query-content-too-large` in its `Cache-Status`.
        public var maxQueryContentBytes = 64 << 10
        /// Threads that may wait for origins at once.
        public var maxOriginThreads = 256
        /// Seconds to connect to an origin.
        public var originConnectTimeout = 10.0
        /// Seconds without a byte from an origin before its response counts as failed.
        public var originStallTimeout = 60.0
        /// Seconds, in all, a miss's origin transfer may wait for its own client (one that reads
        /// slower than the origin sends, or not at all) while identical requests wait for it
        /// (collapsed forwarding); past them those requests go on by themselves, to the origin
        /// when nothing stored answers them. One client that stops reading must not hold every
        /// request for a URL until it is cut. (nginx's `proxy_cache_lock_timeout`, 5 s, lets
        /// waiters go whatever holds the leader; this waits for an origin as long as it takes.)
        public var collapsedClientWait = 1.0
        /// PEM files of certificate authorities trusted for `https` origins besides the
        /// system's trust store (`httpcache serve --origin-cacert FILE`): for an origin whose
        /// certificate comes from a private CA. A file that cannot be read is an error when the
        /// proxy is made.
        public var originTrustRoots: [String] = []
        /// Seconds since 1970, now.
        public var clock: @Sendable () -> Double = { Date().timeIntervalSince1970 }
        /// Receives a record of each request once its response ended (completed or cut off),
        /// for an access log: ``AccessLogRecord/formatted(_:)`` makes its line in one of the
        /// ``AccessLogFormat``s, and ``AccessLogFile`` appends lines to a file that can be
        /// reopened for logrotate. A complete response is reported before the client can have
        /// its last byte. Called on the thread that ended the response: keep it short.
        /// `nil` (the default): no access log, and nothing is measured for one.
        public var accessLog: (@Sendable (AccessLogRecord) -> Void)?
        /// HTTPS toward clients: certificates and keys (PEM files) presented on a second
        /// listener (``tlsHost``:``tlsPort``), which speaks HTTP/2 or HTTP/1.1 over TLS 1.2 or 1.3. A
        /// client's certificate is chosen by the name it asks for with SNI (RFC 6066 §3) among
        /// those the certificates cover, the first one otherwise. Empty (the default): no TLS
        /// listener. Reverse mode only: a forward proxy's `CONNECT` relay is plain.
        public var tlsIdentities: [TLSServerContext.Identity] = []
        /// HTTP/2 toward clients ([RFC 9113](https://www.rfc-editor.org/rfc/rfc9113)): offered
        /// with ALPN `h2` on the TLS listener (§3.2), and spoken in cleartext to a client that
        /// opens with the connection preface on the plain one (prior knowledge, §3.3). Each
        /// stream is one exchange, cached like an HTTP/1.1 request. Reverse mode only: a forward
        /// proxy speaks HTTP/1.1 (and relays `CONNECT`). On by default.
        public var http2 = true
        /// Whether a request that must wait for the origin (a miss, a revalidation, `no-cache`)
        /// is answered `103 Early Hints` ([RFC 8297](https://www.rfc-editor.org/rfc/rfc8297)) at
        /// once, with the `Link` members (`rel=preload`, `rel=preconnect`) of the last response
        /// stored for its URL; a `103` from the origin is merged, not repeated. Never to HTTP/1.0
        /// clients (RFC 9110 §15.2). On by default.
        public var earlyHints = true
        /// Compression Dictionary Transport (RFC 9842): dictionaries kept from responses with
        /// `Use-As-Dictionary`, and `dcz` deltas made for clients that offer one (see
        /// ``DictionaryCompression``). `nil` (the default): off; the fields pass through, and a
        /// response that varies on them is stored by its `Vary` as any other.
        public var dictionaryCompression: DictionaryCompression?
        /// The TLS listener's address.
        public var tlsHost = "127.0.0.1"
        /// The TLS listener's port; `0` picks a free one (see ``CachingProxy/tlsPort``).
        public var tlsPort: UInt16 = 8443
        /// Called once the listeners are bound, before the store is opened: `httpcache serve
        /// --user` gives up root there, so that the store's files belong to the user it runs as.
        /// An error it throws is the proxy's (the listeners are closed).
        public var afterListening: (@Sendable () throws -> Void)?
        /// Receives what the proxy reports (rejected requests, origin failures, storage errors).
        public var log: @Sendable (String) -> Void = { message in
            FileHandle.standardError.write(Data("httpcache serve: \(message)\n".utf8))
        }

        /// A configuration for `mode`, everything else default.
        public init(mode: Mode) { self.mode = mode }
    }

    /// One unlabelled sample for the metrics page (Prometheus text format).
    public struct Metric: Sendable {
        /// `counter` or `gauge`.
        public enum Kind: String, Sendable { case counter, gauge }

        /// One value of the metric, with its labels (`kind="NOPERM"`); none for a plain value.
        public struct Sample: Sendable {
            public var labels: [(name: String, value: String)]
            public var value: Double

            public init(labels: [(name: String, value: String)] = [], _ value: Double) {
                self.labels = labels
                self.value = value
            }
        }

        public var name: String
        public var kind: Kind
        /// The `# HELP` text.
        public var help: String
        public var samples: [Sample]

        /// A metric with one value.
        public init(_ name: String, _ kind: Kind, _ help: String, _ value: Double) {
            self.init(name, kind, help, samples: [Sample(value)])
        }

        /// A metric with several values, told apart by their labels.
        public init(_ name: String, _ kind: Kind, _ help: String, samples: [Sample]) {
            self.name = name
            self.kind = kind
            self.help = help
            self.samples = samples
        }
    }

    /// A configuration the proxy cannot run with, or a port it cannot listen on.
    public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    private let handler: ProxyHandler
    private let server: HTTPServer
    private let certificates: ServerCertificates?
    /// The certificate and key files presented, replaced by a reload that names others.
    private let tlsIdentities: Locked<[TLSServerContext.Identity]>
    private let http2: Bool
    private let log: @Sendable (String) -> Void

    /// Listens, calls ``Configuration/afterListening``, then opens the store; call ``start()``
    /// to serve.
    /// - Throws: ``ConfigurationError`` when a port cannot be listened on, a certificate or key
    ///   cannot be used (naming the file and why), or TLS is asked of a forward proxy.
    public init(_ configuration: Configuration) throws {
        let tlsIdentities = configuration.tlsIdentities
        self.tlsIdentities = Locked(tlsIdentities)
        log = configuration.log
        if case .reverse = configuration.mode { http2 = configuration.http2 } else { http2 = false }
        if let first = tlsIdentities.first {
            guard case .reverse = configuration.mode else {
                throw ConfigurationError(
                    description:
                        "TLS toward clients goes with a reverse proxy (--origin); a forward proxy listens in plain HTTP"
                )
            }
            do {
                certificates = ServerCertificates(try Self.serverContext(first, tlsIdentities, http2: http2))
            } catch {
                throw ConfigurationError(description: error.description)
            }
            Self.keyFileWarnings(tlsIdentities).forEach(configuration.log)
        } else {
            certificates = nil
        }
        var settings = HTTPServer.Configuration()
        settings.host = configuration.host
        settings.port = configuration.port
        settings.loops = max(1, configuration.loops)
        settings.maxConnections = configuration.maxConnections
        settings.headerTimeout = configuration.headerTimeout
        settings.idleTimeout = configuration.idleTimeout
        settings.maxBodyBytes = configuration.maxRequestBodyBytes
        settings.http2 = http2
        settings.proxyName = configuration.name
        settings.clock = configuration.clock
        if let certificates {
            settings.tls = .init(host: configuration.tlsHost, port: configuration.tlsPort, certificates: certificates)
        }
        let listeners: HTTPServer.Listeners
        do {
            listeners = try HTTPServer.listen(settings)
        } catch {
            throw ConfigurationError(description: error.description)
        }
        do {
            try configuration.afterListening?()
            handler = try ProxyHandler(configuration)
        } catch {
            listeners.close()
            throw error
        }
        server = HTTPServer(configuration: settings, listeners: listeners, handler: handler, log: configuration.log)
        handler.setServerStatistics { [weak server] in server?.statistics ?? HTTPServer.Statistics() }
    }

    /// A context presenting `identities` (`first` among them) by SNI, the first by default,
    /// with the ALPN protocols the server speaks: at start and at each reload. Every context
    /// encrypts session tickets with the process's keys, rotated hourly in memory, so a client
    /// resumes across a reload rather than doing a full handshake.
    private static func serverContext(
        _ first: TLSServerContext.Identity, _ identities: [TLSServerContext.Identity], http2: Bool
    ) throws(TLSError) -> TLSServerContext {
        try TLSServerContext(
            default: first, others: Array(identities.dropFirst()),
            applicationProtocols: HTTPServer.applicationProtocols(http2: http2), ticketKeys: .shared)
    }

    /// The port the proxy listens on.
    public var port: UInt16 { server.port }

    /// The port of the TLS listener; nil without ``Configuration/tlsIdentities``.
    public var tlsPort: UInt16? { server.tlsPort }

    /// Reads the certificates and keys again (after they were renewed; `httpcache serve` on
    /// `SIGHUP`): new handshakes present them, open connections keep going on the ones they
    /// began with. When one cannot be used, the ones in use stay and one line saying why goes
    /// to the log. A key file readable by group or others is warned about, as at start.
    /// - Parameter identities: other files to present from now on (at least one pair); `nil`
    ///   reads the same files again.
    /// - Returns: whether the new certificates are in use; false too without TLS (a proxy
    ///   started without certificates has no TLS listener to present them on).
    @discardableResult
    public func reloadCertificates(_ identities: [TLSServerContext.Identity]? = nil) -> Bool {
        let identities = identities ?? tlsIdentities.withLock { $0 }
        guard let certificates, let first = identities.first else { return false }
        do {
            certificates.replace(with: try Self.serverContext(first, identities, http2: http2))
        } catch {
            log("certificates not reloaded, the ones loaded before stay in use: \(error.description)")
            return false
        }
        tlsIdentities.withLock { $0 = identities }
        Self.keyFileWarnings(identities).forEach(log)
        // HTTP/2 clients keep a connection for long: GOAWAY sends them to a new one, which
        // presents the new certificates, once their streams have finished.
        server.goAwayHTTP2()
        log(
            "certificates reloaded: new TLS handshakes present \(identities.map(\.certificateFile).joined(separator: ", "))"
        )
        return true
    }

    /// Replaces ``Configuration/adminToken`` for the requests that come next (`nil`: loopback
    /// clients only).
    public func replaceAdminToken(_ token: String?) { handler.adminToken.withLock { $0 = token } }

    /// Calls `answered` (on an event-loop thread) once every event loop has taken a turn after
    /// this call; never when one is stuck or has stopped. `httpcache serve` sends systemd's
    /// watchdog keep-alive only then.
    public func whenLoopsAnswer(_ answered: @escaping @Sendable () -> Void) { server.whenLoopsAnswer(answered) }

    /// One line for each key file that group or others may read.
    static func keyFileWarnings(_ identities: [TLSServerContext.Identity]) -> [String] {
        identities.compactMap { identity in
            var status = stat()
            guard stat(identity.keyFile, &status) == 0, status.st_mode & 0o077 != 0 else { return nil }
            let mode = String(status.st_mode & 0o777, radix: 8)
            return "warning: the private key \(identity.keyFile) can be read by group or others (mode \(mode)); "
                + "run chmod 600 \(identity.keyFile)"
        }
    }

    /// Starts serving.
    public func start() { server.start() }

    /// Bounds glibc's malloc arenas for this process at one per core, unless the operator set
    /// `MALLOC_ARENA_MAX`: no more threads than cores allocate at the same moment. By default
    /// glibc opens up to eight arenas per core for threads that allocate at once, and the
    /// proxy's origin threads (up to ``Configuration/maxOriginThreads``) spread freed memory
    /// over all of them, where little of it is returned to the system. `httpcache serve` calls
    /// this before the proxy starts (its README gives the `scripts/soak` figures); a program
    /// that embeds the proxy decides for itself.
    public static func boundAllocatorArenas() {
        guard getenv("MALLOC_ARENA_MAX") == nil else { return }
        mallopt(M_ARENA_MAX, Int32(clamping: max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
    }

    /// Gives memory glibc's malloc holds free back to the system every `interval` seconds
    /// (`malloc_trim`), for as long as the process runs. Bodies the memory tier evicts were
    /// often allocated by another thread (an origin thread stored them, an event loop promoted
    /// their replacements) and are freed into that thread's arena, where glibc keeps them:
    /// measured on 20,000 URLs through a 256 MiB memory tier, 214 MiB of RSS was such free
    /// memory. A trim takes 2–3 ms, up to 55 ms when it gives back much, during which threads
    /// allocating in the arena it trims wait.
    /// `httpcache serve` calls this; a program that embeds the proxy decides for itself.
    public static func returnFreedMemoryPeriodically(every interval: Double = 10) {
        let timer = DispatchSource.makeTimerSource(queue: .global(qos: .utility))
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .seconds(1))
        timer.setEventHandler { _ = malloc_trim(0) }
        timer.activate()
        trimTimer.withLock { $0 = timer }
    }

    private static let trimTimer = Locked<(any DispatchSourceTimer)?>(nil)

    /// Stops accepting connections, lets responses in flight finish (at most `timeout`
    /// seconds), waits for background revalidations and commits the index writes still
    /// queued. Entries being written when the time runs out are discarded, never left
    /// half-written.
    public func shutdown(timeout: Double = 30) {
        let deadline = Date().addingTimeInterval(timeout)
        server.shutdown(timeout: timeout)
        handler.stopStatusTimer()
        handler.workers.waitUntilIdle(timeout: max(0.1, deadline.timeIntervalSinceNow))
        handler.workers.stop()
        // The index commits written behind, and access times, before the process goes.
        if let disk = (handler.store as? TieredStore)?.disk {
            do {
                try disk.flush()
            } catch {
                handler.configuration.log(
                    "could not commit the last stored entries at shutdown: \(error); "
                        + "those entries are not kept and will be fetched from the origin again")
            }
        }
    }

    /// Waits until no stale-while-revalidate revalidation runs in the background (RFC 5861 §3),
    /// for at most `timeout` seconds; `true` when none does.
    package func waitForBackgroundWork(timeout: Double) -> Bool {
        let done = Locked(false)
        handler.driver.whenBackgroundIdle {
            done.withLock { $0 = true }
            done.wakeWaiters()
        }
        return done.withLock(when: { $0 }, deadline: MonotonicClock.seconds() + timeout) { _ in true } ?? false
    }

    /// The proxy's counters in the Prometheus text format, as served on
    /// ``Configuration/metricsPath``.
    public var metricsText: String { handler.metricsText }

    /// The figures of the status page (`/_httpcache/status.json`).
    public var status: ProxyStatus { handler.status() }

    /// The version the status page and `httpcache top` show.
    public static let version = "0.1.0-dev"
}
#endif
