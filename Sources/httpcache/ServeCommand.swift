import CacheStorage
import CacheStorageRedis
import CacheSystem
import Foundation

#if os(Linux)
import CacheTLS
import CachingProxy
import HTTPClient
#endif

/// `httpcache serve`: the caching proxy.
struct ServeCommand {
    static let name = "serve"
    static let summary = "run a shared caching proxy (reverse, or forward with --forward)"
    static let specs: [OptionSpec] =
        [
            .value("--origin"), .value("--origin-cacert"), .flag("--forward"), .value("--listen"),
            .value("--cache-dir"), .flag("--memory-only"), .value("--memory"), .value("--disk"), .value("--name"),
            .value("--admin-token"), .value("--loops"),
            .value("--max-connections"), .value("--header-timeout"), .value("--idle-timeout"), .value("--max-body"),
            .value("--allow-destination"), .value("--access-log"), .value("--access-log-format"), .value("--tls-cert"),
            .value("--tls-key"),
            .value("--tls-listen"), .flag("--no-http2"),
        ] + RedisOptions.specs
    static let help = """
        Usage: httpcache serve --origin URL [options]     (reverse proxy to one origin, http or https)
               httpcache serve --forward [options]        (forward proxy; CONNECT tunnelled)

        A shared HTTP cache (RFC 9111 shared-cache rules: s-maxage, private never stored,
        Authorization, CDN-Cache-Control) in front of an origin. Adds Age, Via and
        Cache-Status; collapses concurrent misses; serves stale responses when the origin
        fails and the response allows it.

        Options:
          --origin URL            the origin: http://HOST[:PORT][/BASE], or https://… to reach
                                  it over TLS: its certificate chain verified against the
                                  system's trust store and any --origin-cacert, the certificate
                                  checked to cover the URL's host, TLS 1.2 or later, the host
                                  sent in SNI (not an IP address), sessions resumed and
                                  connections kept for reuse. When its TLS fails, clients get
                                  502 (Cache-Status detail=origin-tls-failed) or a stored
                                  response that allows stale-if-error
          --origin-cacert FILE    also trust the certificate authorities in FILE (PEM) for an
                                  https origin, e.g. one with a private CA (repeat for more)
          --listen HOST:PORT      where to listen for plain HTTP (default 127.0.0.1:8080; port 0
                                  picks one, printed on standard output); a reverse proxy
                                  also speaks cleartext HTTP/2 there to clients that open
                                  with its preface (prior knowledge, e.g. curl
                                  --http2-prior-knowledge)
          --tls-cert FILE --tls-key FILE
                                  also serve https: the certificate (PEM, its intermediates
                                  after it) and its private key; repeat the pair for more
                                  names: a client gets the certificate covering the name it
                                  asks for (SNI), else the first. TLS 1.2 and 1.3; HTTP/2
                                  (ALPN h2) or HTTP/1.1. SIGHUP reads the files again (a
                                  failed reload keeps the certificates in use; HTTP/2
                                  clients get GOAWAY and reconnect); a key others can read
                                  is warned about
          --tls-listen HOST:PORT  where to listen for https (default 127.0.0.1:8443; port 0
                                  picks one, printed on standard output)
          --no-http2              speak HTTP/1.1 only (HTTP/2 is on for a reverse proxy: at
                                  most 100 streams per connection, header lists up to 16 KiB,
                                  GOAWAY ENHANCE_YOUR_CALM to floods of resets, SETTINGS,
                                  PING or CONTINUATION frames)
          --cache-dir DIR         the store (default: the cache directory with -proxy appended,
                                  never the directory `httpcache get` uses: a private cache's
                                  responses must not be served to many users)
          --memory-only           keep nothing on disk
          --memory BYTES          memory tier size, each entry's head counted too
                                  (default 256M; K, M and G suffixes)
          --disk BYTES            disk size (default 1G)
          --name NAME             the name in Via and Cache-Status (default httpcache);
                                  NAME-Cache-Control, when valid, overrides
                                  CDN-Cache-Control and Cache-Control (RFC 9213)
          --admin-token TOKEN     clients not on loopback may PURGE and read metrics with
                                  Authorization: Bearer TOKEN (also $HTTPCACHE_ADMIN_TOKEN)
          --loops N               event-loop threads (default: one per core)
          --max-connections N     client connections beyond which new ones are refused (4096)
          --header-timeout SEC    time to send a request head (default 10)
          --idle-timeout SEC      keep-alive idle time (default 60)
          --max-body BYTES        largest request body (default 8M)
          --allow-destination HOST[:PORT]
                                  forward proxy: the only destinations to reach (repeat
                                  for more; a HOST alone allows every port; IPv6 in
                                  brackets); others get 403 before any lookup or connection
          --access-log FILE       one line per request, written when its response ended,
                                  appended to FILE (- for standard error); SIGUSR1 or SIGHUP
                                  reopens FILE (for logrotate: rename it, then signal)
          --access-log-format default|combined|json
                                  default: TIME CLIENT METHOD TARGET PROTOCOL STATUS
                                  "CACHE-STATUS" (CLIENT loopback or remote; PROTOCOL HTTP/1.1,
                                  HTTP/2, with +TLS over https). combined: NCSA combined, as
                                  Apache and nginx write it, with "CACHE-STATUS" appended in
                                  quotes (as nginx users append variables). json: one object
                                  per line: time, client, method, target, protocol, status,
                                  bytes, duration, completed, cache_status, origin_time,
                                  user_agent, referer (duration, origin_time in seconds)
        \(RedisOptions.help)

        With --redis or --redis-cluster, several proxies share one store: what one stores is a
        hit on the others, a PURGE or an invalidation on one reaches every other's local tier,
        and concurrent misses on several proxies make one origin request. The local tier
        (--local-memory, default the --memory size) answers hot keys without Redis; no disk
        store is used. When Redis is away, requests are answered from the local tier and the
        origin, and the shared tier is used again once Redis answers.

        Admin: `PURGE URL` removes a URL's stored responses (or `httpcache purge --proxy
        http://HOST:PORT URL`); GET /_httpcache/metrics gives Prometheus metrics. Both are
        allowed from loopback, or with the admin token.
        SIGTERM or SIGINT: stop accepting, finish responses in flight (30 s at most), exit 0.
        SIGHUP: reopen the access log; with --tls-cert, reload the certificates and keys too
        (open HTTP/1.1 connections stay, HTTP/2 ones get GOAWAY once their streams finish).
        SIGUSR1: reopen the access log.
        """

    #if os(Linux)
    let configuration: CachingProxy.Configuration
    let redis: RedisOptions
    /// The `--access-log` file (not standard error), reopened on SIGUSR1 and SIGHUP.
    let accessLogFile: AccessLogFile?

    init(_ arguments: ParsedArguments) throws(Failure) {
        redis = try RedisOptions(arguments)
        _ = try arguments.positionals("", minimum: 0, maximum: 0)
        let mode: CachingProxy.Mode
        switch (arguments.value("--origin"), arguments.has("--forward")) {
        case (let origin?, false):
            let scheme = origin.lowercased().prefix { $0 != ":" }
            guard scheme == "http" || scheme == "https", origin.dropFirst(scheme.count).hasPrefix("://") else {
                throw .usage(
                    Self.name,
                    "--origin needs an http or https URL such as http://127.0.0.1:8081 or https://origin.example, not \"\(origin)\""
                )
            }
            mode = .reverse(origin: origin)
        case (nil, true): mode = .forward
        case (nil, false): throw .usage(Self.name, "say where requests go: --origin URL, or --forward")
        case (_?, true): throw .usage(Self.name, "give either --origin URL or --forward, not both")
        }
        var configuration = CachingProxy.Configuration(mode: mode)
        configuration.originTrustRoots = try Self.originTrustRoots(arguments, mode: mode)
        // One event loop per core, all accepting from one listening socket.
        configuration.loops = ProcessInfo.processInfo.activeProcessorCount
        (configuration.host, configuration.port) = try Self.address("--listen", default: "127.0.0.1:8080", arguments)
        configuration.tlsIdentities = try Self.tlsIdentities(arguments, mode: mode)
        configuration.http2 = !arguments.has("--no-http2")
        (configuration.tlsHost, configuration.tlsPort) = try Self.address(
            "--tls-listen", default: "127.0.0.1:8443", arguments)
        if arguments.value("--tls-listen") != nil && configuration.tlsIdentities.isEmpty {
            throw .usage(Self.name, "--tls-listen needs a certificate: --tls-cert FILE --tls-key FILE")
        }
        if !arguments.has("--memory-only") {
            configuration.cacheDirectory = arguments.value("--cache-dir") ?? DiskStore.defaultDirectory() + "-proxy"
        }
        func bytes(_ option: String) throws(Failure) -> Int64? {
            guard let text = arguments.value(option) else { return nil }
            guard let value = Self.byteCount(text) else {
                throw .usage(Self.name, "\(option) needs a size such as 512M or 2G")
            }
            return value
        }
        func number(_ option: String) throws(Failure) -> Double? {
            guard let text = arguments.value(option) else { return nil }
            guard let value = Double(text), value > 0 else {
                throw .usage(Self.name, "\(option) needs a positive number")
            }
            return value
        }
        if let value = try bytes("--memory") { configuration.memoryCapacity = value }
        if let value = try bytes("--disk") { configuration.diskCapacity = value }
        if let value = try bytes("--max-body") { configuration.maxRequestBodyBytes = value }
        if let value = try number("--loops") { configuration.loops = Int(value) }
        if let value = try number("--max-connections") { configuration.maxConnections = Int(value) }
        if let value = try number("--header-timeout") { configuration.headerTimeout = value }
        if let value = try number("--idle-timeout") { configuration.idleTimeout = value }
        if let name = arguments.value("--name") {
            guard !name.isEmpty, !name.contains(where: { $0 == " " || $0 == "," || $0 == ";" }) else {
                throw .usage(Self.name, "--name needs a single token such as edge-1")
            }
            configuration.name = name
        }
        let destinations = arguments.all("--allow-destination")
        if !destinations.isEmpty {
            guard case .forward = mode else {
                throw .usage(Self.name, "--allow-destination goes with --forward (a reverse proxy has one origin)")
            }
            for destination in destinations where !Self.isDestination(destination) {
                throw .usage(
                    Self.name,
                    "--allow-destination needs HOST or HOST:PORT, such as 127.0.0.1 or example.com:8080 ([::1]:8080 for IPv6), not \"\(destination)\""
                )
            }
            configuration.allowedDestinations = destinations
        }
        (configuration.accessLog, accessLogFile) = try Self.accessLog(arguments)
        configuration.adminToken =
            arguments.value("--admin-token") ?? ProcessInfo.processInfo.environment["HTTPCACHE_ADMIN_TOKEN"]
        configuration.log = { message in Console.error("httpcache serve: \(message)\n") }
        self.configuration = configuration
    }

    /// `option`'s HOST:PORT, or `fallback`'s.
    static func address(_ option: String, default fallback: String, _ arguments: ParsedArguments) throws(Failure) -> (
        String, UInt16
    ) {
        let text = arguments.value(option) ?? fallback
        guard let colon = text.lastIndex(of: ":"), let port = Self.port(text[text.index(after: colon)...]) else {
            throw .usage(
                Self.name, "\(option) needs HOST:PORT with PORT from 0 (any free port) to 65535, e.g. \(fallback)")
        }
        return (String(text[..<colon]), port)
    }

    /// The `--tls-cert` / `--tls-key` pairs, in order, each loaded once to check it: an unusable
    /// file is a usage error naming it and the cause.
    static func tlsIdentities(_ arguments: ParsedArguments, mode: CachingProxy.Mode) throws(Failure)
        -> [TLSServerContext.Identity]
    {
        let certificates = arguments.all("--tls-cert")
        let keys = arguments.all("--tls-key")
        guard !certificates.isEmpty || !keys.isEmpty else { return [] }
        guard certificates.count == keys.count else {
            throw .usage(
                Self.name,
                "give --tls-cert FILE and --tls-key FILE in pairs (\(certificates.count) certificates, \(keys.count) keys)"
            )
        }
        guard case .reverse = mode else {
            throw .usage(
                Self.name,
                "--tls-cert goes with --origin: a forward proxy listens in plain HTTP (its CONNECT relay is not under TLS)"
            )
        }
        let identities = zip(certificates, keys).map { TLSServerContext.Identity(certificateFile: $0, keyFile: $1) }
        for identity in identities {
            do {
                _ = try TLSServerContext(default: identity)
            } catch {
                throw .usage(Self.name, "--tls-cert/--tls-key: \(error.description)")
            }
        }
        return identities
    }

    /// The `--origin-cacert` files, each checked to hold a PEM certificate; they go with an
    /// `https` origin only.
    static func originTrustRoots(_ arguments: ParsedArguments, mode: CachingProxy.Mode) throws(Failure) -> [String] {
        let files = arguments.all("--origin-cacert")
        guard !files.isEmpty else { return [] }
        guard case .reverse(let origin) = mode, origin.lowercased().hasPrefix("https://") else {
            throw .usage(
                Self.name,
                "--origin-cacert goes with an https --origin (the proxy reaches http origins without TLS, and a forward proxy tunnels https)"
            )
        }
        var configuration = UpstreamClient.Configuration()
        configuration.extraTrustRoots = files
        do {
            _ = try UpstreamClient(configuration: configuration)
        } catch {
            throw .usage(Self.name, "--origin-cacert: \(error.description)")
        }
        return files
    }

    /// `--access-log` in `--access-log-format`: each record's line appended to the file
    /// (created when missing, returned for reopening) or, for `-`, written to standard error;
    /// one `write` per line, so lines from several threads never interleave.
    static func accessLog(_ arguments: ParsedArguments) throws(Failure) -> (
        (@Sendable (AccessLogRecord) -> Void)?, AccessLogFile?
    ) {
        let name = arguments.value("--access-log-format") ?? AccessLogFormat.default.rawValue
        guard let format = AccessLogFormat(rawValue: name) else {
            throw .usage(Self.name, "--access-log-format needs default, combined or json, not \"\(name)\"")
        }
        guard let path = arguments.value("--access-log") else {
            if arguments.value("--access-log-format") != nil {
                throw .usage(Self.name, "--access-log-format goes with --access-log FILE")
            }
            return (nil, nil)
        }
        if path == "-" { return ({ record in Console.error(record.formatted(format) + "\n") }, nil) }
        let file: AccessLogFile
        do {
            file = try AccessLogFile(path: path)
        } catch {
            throw Failure(.failure, error.description)
        }
        return ({ record in file.write(record.formatted(format)) }, file)
    }

    /// `host`, `host:port`, `[v6]` or `[v6]:port`: no scheme, path or white space, an unbracketed
    /// host without `:`, a port from 1 to 65535.
    static func isDestination(_ text: String) -> Bool {
        guard !text.isEmpty, !text.contains(where: { $0 == "/" || $0 == "@" || $0.isWhitespace }) else { return false }
        var host = Substring(text)
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]"), close > host.index(after: host.startIndex) else { return false }
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && port(rest.dropFirst()).map { $0 > 0 } == true) else {
                return false
            }
            return true
        }
        if let colon = host.firstIndex(of: ":") {
            guard port(host[host.index(after: colon)...]).map({ $0 > 0 }) == true else { return false }
            host = host[..<colon]
        }
        return !host.isEmpty
    }

    /// A port as RFC 3986 §3.2.3 writes it (`*DIGIT`: no sign, no space), up to 65535.
    static func port(_ text: Substring) -> UInt16? {
        guard !text.isEmpty, text.utf8.count <= 5, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            return nil
        }
        return UInt16(text)
    }

    /// `512`, `64K`, `256M`, `2G` (powers of 1024).
    static func byteCount(_ text: String) -> Int64? {
        let multipliers: [Character: Int64] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
        var digits = text.uppercased()
        var multiplier: Int64 = 1
        if let last = digits.last, let factor = multipliers[last] {
            multiplier = factor
            digits.removeLast()
        }
        guard let value = Int64(digits), value >= 0 else { return nil }
        return value.multipliedReportingOverflow(by: multiplier).overflow ? nil : value * multiplier
    }

    func run() async throws(Failure) {
        CachingProxy.boundAllocatorArenas()
        CachingProxy.returnFreedMemoryPeriodically()
        var configuration = self.configuration
        let log = configuration.log
        if let shared = try redis.openStore(
            defaultLocalMemory: configuration.memoryCapacity, listens: true, mustReach: false,
            log: { message in log(message) })
        {
            configuration.store = shared
            configuration.storeMetrics = { RedisOptions.metrics(shared.metrics) }
            configuration.storeTotals = { shared.local?.totals() ?? StoreTotals() }
        }
        let proxy: CachingProxy
        do {
            proxy = try CachingProxy(configuration)
        } catch {
            throw Failure(.failure, "\(error)")
        }
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        // Before the address is printed: whoever waits for it may send SIGHUP or SIGUSR1 at once.
        Self.reloadOnHangUp(proxy, accessLogFile, log: log)
        Self.reopenOnUser1(accessLogFile, log: log)
        proxy.start()
        let destination: String
        switch configuration.mode {
        case .reverse(let origin): destination = "reverse proxy to \(origin)"
        case .forward: destination = "forward proxy"
        }
        let store =
            if let shared = configuration.store as? SharedStore {
                "shared store in Redis (\(shared.redis.configuration.nodes.map(\.description).joined(separator: ",")), "
                    + "prefix \(shared.redis.configuration.keyPrefix)), local tier \(shared.local?.capacity ?? 0) bytes"
            } else {
                configuration.cacheDirectory.map { "store in \($0)" } ?? "memory only"
            }
        Console.error("httpcache serve: \(destination), \(store)\n")
        Console.out("listening on http://\(configuration.host):\(proxy.port)\n")
        if let tlsPort = proxy.tlsPort {
            Console.out("listening on https://\(configuration.tlsHost):\(tlsPort)\n")
        }
        await Self.waitForTermination()
        Console.error("httpcache serve: stopping: finishing the responses in flight\n")
        proxy.shutdown(timeout: 30)
        Console.error("httpcache serve: stopped\n")
    }

    /// Reloads the proxy's certificates and reopens the access log on each SIGHUP.
    private static func reloadOnHangUp(
        _ proxy: CachingProxy, _ accessLogFile: AccessLogFile?, log: @escaping @Sendable (String) -> Void
    ) {
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(
            signal: SIGHUP, queue: DispatchQueue(label: "httpcache.serve.reload"))
        source.setEventHandler {
            proxy.reloadCertificates()
            reopen(accessLogFile, log: log)
        }
        source.resume()
        Signals.sources.append(source)
    }

    /// Reopens the access log on each SIGUSR1 (logrotate's `postrotate`).
    private static func reopenOnUser1(_ accessLogFile: AccessLogFile?, log: @escaping @Sendable (String) -> Void) {
        signal(SIGUSR1, SIG_IGN)
        let source = DispatchSource.makeSignalSource(
            signal: SIGUSR1, queue: DispatchQueue(label: "httpcache.serve.reopen"))
        source.setEventHandler { reopen(accessLogFile, log: log) }
        source.resume()
        Signals.sources.append(source)
    }

    /// Reopens the access log file, if there is one; a failure is one line in the log.
    private static func reopen(_ accessLogFile: AccessLogFile?, log: @Sendable (String) -> Void) {
        do {
            try accessLogFile?.reopen()
        } catch {
            log(error.description)
        }
    }

    /// Returns on SIGTERM or SIGINT.
    private static func waitForTermination() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let queue = DispatchQueue(label: "httpcache.serve.signals")
            let once = SingleResumption(continuation)
            for number in [SIGTERM, SIGINT] {
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { once.resume() }
                source.resume()
                Signals.sources.append(source)
            }
        }
    }
    #else
    init(_ arguments: ParsedArguments) throws(Failure) {
        throw Failure(
            .failure,
            "httpcache serve needs Linux: its HTTP server is built on epoll; run the proxy on a Linux host")
    }

    func run() async throws(Failure) {}
    #endif
}

/// Keeps the signal sources alive for the process's life (touched on one queue only).
private enum Signals {
    nonisolated(unsafe) static var sources: [any DispatchSourceSignal] = []
}

/// Resumes a continuation the first time it is asked to.
private final class SingleResumption: @unchecked Sendable {
    private var continuation: CheckedContinuation<Void, Never>?
    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }
    /// Called on one serial queue only.
    func resume() {
        continuation?.resume()
        continuation = nil
    }
}
