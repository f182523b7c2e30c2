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
            .value("--origin"), .values("--origin-cacert"), .flag("--forward"), .value("--listen"),
            .value("--cache-dir"), EncryptionKeyOption.spec, .flag("--memory-only"), .value("--memory"),
            .value("--disk"), .value("--name"),
            .value("--admin-token"), .value("--loops"),
            .value("--max-connections"), .value("--header-timeout"), .value("--idle-timeout"),
            .value("--origin-timeout"), .value("--origin-connect-timeout"), .value("--max-body"),
            .value("--max-query-content"),
            .values("--allow-destination"), .value("--access-log"), .value("--access-log-format"),
            .values("--tls-cert"), .values("--tls-key"), .value("--tls-listen"), .flag("--no-http2"), .value("--user"),
            .flag("--no-early-hints"), .flag("--dictionary-compress"),
            .value("--config"), .value("--check-config"),
        ] + RedisOptions.specs
    /// The options a configuration file cannot hold.
    static let commandLineOnly: Set<String> = ["--config", "--check-config"]
    static let help = """
        Usage: httpcache serve --origin URL [options]     (reverse proxy to one origin, http or https)
               httpcache serve --forward [options]        (forward proxy; CONNECT tunnelled)
               httpcache serve --config FILE [options]    (the options from FILE, flags over them)
               httpcache serve --check-config FILE [options]   (check, print what is in effect, exit)

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
          --no-early-hints        send no 103 Early Hints of our own (by default a request
                                  that waits for the origin gets one at once, with the
                                  rel=preload and rel=preconnect links of the last response
                                  stored for its URL; an origin's 103 is merged)
          --dictionary-compress   keep responses sent with Use-As-Dictionary as dictionaries,
                                  and answer a client that offers one (Available-Dictionary,
                                  Accept-Encoding: dcz) with a dcz delta of the origin's
                                  identity or gzip response, stored as a variant of its own
                                  (RFC 9842; bodies up to 8 MiB, 64 dictionaries, 64 MiB)
          --cache-dir DIR         the store (default: the cache directory with -proxy appended,
                                  never the directory `httpcache get` uses: a private cache's
                                  responses must not be served to many users)
          --encryption-key-file FILE  encrypt the store at rest with this key (32 bytes, or
                                  64 hex digits; default $HTTPCACHE_ENCRYPTION_KEY_FILE), the
                                  disk store and what goes to Redis; read before --user drops
                                  privileges
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
          --origin-timeout SEC    an origin silent this long has failed: its response is cut
                                  or answered 504, or a stored one is served stale where
                                  stale-if-error allows (default 60)
          --origin-connect-timeout SEC
                                  time to connect to the origin (default 10)
          --max-body BYTES        largest request body (default 8M)
          --max-query-content BYTES
                                  largest QUERY content keyed and cached (default 64K);
                                  a larger QUERY goes to the origin uncached
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
          --user NAME             once listening, run as NAME (initgroups, setgid, setuid;
                                  started as root): e.g. to listen on port 80 or 443. The
                                  cache directory is created for NAME, or must be NAME's
          --config FILE           every option above from FILE, a TOML subset: one
                                  `key = value` a line, the key an option's name without --
                                  (origin = "http://127.0.0.1:8081", tls-cert = ["a.pem",
                                  "b.pem"], no-http2 = true, loops = 4), # comments; an
                                  option on the command line replaces the file's
          --check-config FILE     check FILE (and the options given) as a start would,
                                  print every option in effect and where it comes from (the
                                  file, the command line, the default), and exit: 0 when
                                  valid, 2 otherwise; nothing is bound or opened
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
        SIGHUP: read the --config file again, reload the certificates and keys (open HTTP/1.1
        connections stay, HTTP/2 ones get GOAWAY once their streams finish) and reopen the
        access log. Applied at once: tls-cert and tls-key (when started with TLS), admin-token.
        Any other option changed in the file is logged and kept as it is until a restart; a file
        that no longer parses changes nothing.
        SIGUSR1: reopen the access log.
        Under systemd (Type=notify): READY=1 once listening, RELOADING=1 and READY=1 around a
        reload, STOPPING=1, and WATCHDOG=1 while every event loop answers (WatchdogSec).
        """

    #if os(Linux)
    let configuration: CachingProxy.Configuration
    let redis: RedisOptions
    /// The command line as given: a reload puts it over the file again.
    let commandLine: ParsedArguments
    /// The options in effect: the command line over the configuration file.
    let effective: ParsedArguments
    /// Where each option in ``effective`` comes from.
    let sources: [String: OptionSource]
    /// The `--config` or `--check-config` file.
    let configPath: String?
    /// `--check-config`: print what is in effect and exit.
    let checkOnly: Bool
    let user: ServiceUser?
    /// Lines for the log: what in the configuration is unsafe.
    let warnings: [String]

    /// Reads the configuration file named on `commandLine`, puts the command line over it and
    /// checks the result as a start would (certificates loaded, names resolved to users).
    /// - Throws: a usage ``Failure``; one about a value from the file names its line.
    init(_ commandLine: ParsedArguments) throws(Failure) {
        self.commandLine = commandLine
        switch (commandLine.value("--config"), commandLine.value("--check-config")) {
        case (let path?, nil): (configPath, checkOnly) = (path, false)
        case (nil, let path?): (configPath, checkOnly) = (path, true)
        case (nil, nil): (configPath, checkOnly) = (nil, false)
        case (_?, _?):
            throw .usage(Self.name, "give --config FILE to run with it or --check-config FILE to check it, not both")
        }
        var sources: [String: OptionSource] = [:]
        for option in commandLine.values.keys { sources[option] = .flag }
        for option in commandLine.flags { sources[option] = .flag }
        var effective = commandLine
        var warnings: [String] = []
        if let configPath {
            let file = try ConfigFile.load(configPath, command: Self.name)
            (effective, sources) = commandLine.overlaying(
                try file.options(Self.specs, path: configPath, command: Self.name), path: configPath)
            if let warning = file.secretWarning(path: configPath) { warnings.append(warning) }
        }
        if effective.value("--admin-token") == nil, ProcessInfo.processInfo.environment["HTTPCACHE_ADMIN_TOKEN"] != nil
        {
            sources["--admin-token"] = .environment("HTTPCACHE_ADMIN_TOKEN")
        }
        do {
            (configuration, redis) = try Self.configuration(effective)
            user = try effective.value("--user").map { name throws(Failure) in try ServiceUser(name, command: Self.name)
            }
        } catch {
            throw Self.located(error, sources)
        }
        self.effective = effective
        self.sources = sources
        self.warnings = warnings
    }

    /// The proxy's configuration and the Redis options from `arguments`.
    private static func configuration(_ arguments: ParsedArguments) throws(Failure) -> (
        CachingProxy.Configuration, RedisOptions
    ) {
        var redis = try RedisOptions(arguments)
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
        configuration.earlyHints = !arguments.has("--no-early-hints")
        if arguments.has("--dictionary-compress") { configuration.dictionaryCompression = .init() }
        (configuration.tlsHost, configuration.tlsPort) = try Self.address(
            "--tls-listen", default: "127.0.0.1:8443", arguments)
        if arguments.value("--tls-listen") != nil && configuration.tlsIdentities.isEmpty {
            throw .usage(Self.name, "--tls-listen needs a certificate: --tls-cert FILE --tls-key FILE")
        }
        configuration.encryptionKey = try EncryptionKeyOption.key(arguments)
        redis.configuration?.encryptionKey = configuration.encryptionKey
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
        if let value = try bytes("--max-query-content") { configuration.maxQueryContentBytes = Int(value) }
        if let value = try number("--loops") { configuration.loops = Int(value) }
        if let value = try number("--max-connections") { configuration.maxConnections = Int(value) }
        if let value = try number("--header-timeout") { configuration.headerTimeout = value }
        if let value = try number("--idle-timeout") { configuration.idleTimeout = value }
        if let value = try number("--origin-timeout") { configuration.originStallTimeout = value }
        if let value = try number("--origin-connect-timeout") { configuration.originConnectTimeout = value }
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
        _ = try Self.accessLogFormat(arguments)
        configuration.adminToken =
            arguments.value("--admin-token") ?? ProcessInfo.processInfo.environment["HTTPCACHE_ADMIN_TOKEN"]
        configuration.log = { message in Console.error("httpcache serve: \(message)\n") }
        return (configuration, redis)
    }

    /// `failure` with the file and line of the option it is about, when that came from the file.
    private static func located(_ failure: Failure, _ sources: [String: OptionSource]) -> Failure {
        let prefix = "\(name): "
        guard failure.code == .usage, failure.message.hasPrefix(prefix) else { return failure }
        let message = failure.message.dropFirst(prefix.count)
        // The option named first; of two starting there (--redis, --redis-cluster), the longer.
        let named = specs.map { $0.names[0] }.compactMap { option -> (String, String.Index)? in
            guard let range = message.range(of: option) else { return nil }
            let next = message[range.upperBound...].first
            guard next.map({ !($0.isLetter || $0 == "-") }) ?? true else { return nil }
            return (option, range.lowerBound)
        }
        guard let option = named.min(by: { $0.1 < $1.1 || ($0.1 == $1.1 && $0.0.count > $1.0.count) })?.0,
            case .file(let path, let line)? = sources[option]
        else { return failure }
        return Failure(.usage, "\(prefix)\(path):\(line): \(message)")
    }

    /// Every option in effect, one `key = value` line each as a configuration file writes it,
    /// followed by where it comes from; the admin token hidden.
    var effectiveConfiguration: String {
        var rows: [(String, String)] = []
        for spec in Self.specs where !Self.commandLineOnly.contains(spec.names[0]) {
            let option = spec.names[0]
            let key = String(option.dropFirst(2))
            let value: ConfigFile.Value?
            if !spec.takesValue {
                value = .boolean(effective.has(option))
            } else if let given = effective.values[option] {
                let last = given.last ?? ""
                value = spec.repeats ? .strings(given) : ConfigFile.integer(last).map { .integer($0) } ?? .string(last)
            } else {
                value = defaultValue(option)
            }
            let shown: String
            switch (option, value) {
            case ("--admin-token", _) where configuration.adminToken != nil:
                shown = "\(key) = \"(hidden, \(configuration.adminToken?.count ?? 0) characters)\""
            case (_, let value?): shown = "\(key) = \(value.written)"
            case (_, nil): shown = "# \(key) is not set"
            }
            rows.append((shown, (sources[option] ?? .default).description))
        }
        let width = min(60, rows.map(\.0.count).max() ?? 0)
        return rows.map { row in
            row.0 + String(repeating: " ", count: max(1, width - row.0.count + 2)) + "# " + row.1
        }.joined(separator: "\n") + "\n"
    }

    /// What `option` is when nothing gives it, read from the configuration built without it;
    /// nil for an option that is then off or unset.
    private func defaultValue(_ option: String) -> ConfigFile.Value? {
        switch option {
        case "--listen": return .string("\(configuration.host):\(configuration.port)")
        case "--tls-listen": return .string("\(configuration.tlsHost):\(configuration.tlsPort)")
        case "--cache-dir": return configuration.cacheDirectory.map(ConfigFile.Value.string)
        case "--memory": return .integer(configuration.memoryCapacity)
        case "--disk": return .integer(configuration.diskCapacity)
        case "--name": return .string(configuration.name)
        case "--loops": return .integer(Int64(configuration.loops))
        case "--max-connections": return .integer(Int64(configuration.maxConnections))
        case "--header-timeout": return .integer(Int64(configuration.headerTimeout))
        case "--idle-timeout": return .integer(Int64(configuration.idleTimeout))
        case "--origin-timeout": return .integer(Int64(configuration.originStallTimeout))
        case "--origin-connect-timeout": return .integer(Int64(configuration.originConnectTimeout))
        case "--max-body": return .integer(configuration.maxRequestBodyBytes)
        case "--max-query-content": return .integer(Int64(configuration.maxQueryContentBytes))
        case "--redis-prefix": return redis.configuration.map { .string($0.keyPrefix) }
        case "--redis-timeout": return redis.configuration.map { .integer(Int64($0.commandTimeout * 1000)) }
        case "--local-memory": return redis.configuration.map { _ in .integer(configuration.memoryCapacity) }
        default: return nil
        }
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

    /// `--access-log-format`, checked: a known name, given with `--access-log`; `nil` without
    /// an access log.
    static func accessLogFormat(_ arguments: ParsedArguments) throws(Failure) -> AccessLogFormat? {
        let name = arguments.value("--access-log-format") ?? AccessLogFormat.default.rawValue
        guard let format = AccessLogFormat(rawValue: name) else {
            throw .usage(Self.name, "--access-log-format needs default, combined or json, not \"\(name)\"")
        }
        guard arguments.value("--access-log") != nil else {
            if arguments.value("--access-log-format") != nil {
                throw .usage(Self.name, "--access-log-format goes with --access-log FILE")
            }
            return nil
        }
        return format
    }

    /// `--access-log` in `--access-log-format`: each record's line appended to the file
    /// (created when missing, returned for reopening) or, for `-`, written to standard error;
    /// one `write` per line, so lines from several threads never interleave.
    static func accessLog(_ arguments: ParsedArguments) throws(Failure) -> (
        (@Sendable (AccessLogRecord) -> Void)?, AccessLogFile?
    ) {
        guard let path = arguments.value("--access-log"), let format = try accessLogFormat(arguments) else {
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
        for warning in warnings { Console.error("httpcache serve: \(warning)\n") }
        if checkOnly {
            Console.out(effectiveConfiguration)
            return
        }
        CachingProxy.boundAllocatorArenas()
        CachingProxy.returnFreedMemoryPeriodically()
        var configuration = self.configuration
        let log = configuration.log
        let accessLogFile: AccessLogFile?
        (configuration.accessLog, accessLogFile) = try Self.accessLog(effective)
        if let user {
            guard geteuid() == 0 else {
                throw Failure(
                    .failure, "--user \(user.name) needs root to change users; start as root, or leave out --user")
            }
            let directory = configuration.cacheDirectory
            configuration.afterListening = {
                if let directory { try user.prepare(cacheDirectory: directory) }
                try user.become()
            }
        }
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
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(.failure, "\(error)")
        }
        // Before the address is printed: whoever waits for it may send a signal at once.
        let terminated = Self.listenForTermination()
        Reloader(proxy: proxy, running: self, accessLogFile: accessLogFile).reloadOnHangUp()
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
        Console.error("httpcache serve: \(destination), \(store)\(user.map { ", running as \($0.name)" } ?? "")\n")
        var listening = ["http://\(configuration.host):\(proxy.port)"]
        if let tlsPort = proxy.tlsPort { listening.append("https://\(configuration.tlsHost):\(tlsPort)") }
        for address in listening { Console.out("listening on \(address)\n") }
        let status = "STATUS=\(destination), listening on \(listening.joined(separator: " and "))"
        ServiceManager.notify(["READY=1", status, "MAINPID=\(getpid())"])
        if let interval = ServiceManager.watchdogInterval { Self.keepWatchdogFed(proxy, every: interval) }
        var signals = terminated.makeAsyncIterator()
        _ = await signals.next()
        ServiceManager.notify(["STOPPING=1", "STATUS=finishing the responses in flight"])
        Console.error("httpcache serve: stopping: finishing the responses in flight\n")
        proxy.shutdown(timeout: 30)
        Console.error("httpcache serve: stopped\n")
    }

    /// Sends `WATCHDOG=1` every `interval` seconds, each time once every event loop has
    /// answered: a loop stuck in one connection's work starves the watchdog, and the service
    /// manager restarts the proxy.
    private static func keepWatchdogFed(_ proxy: CachingProxy, every interval: Double) {
        let queue = DispatchQueue(label: "httpcache.serve.watchdog")
        let timer = DispatchSource.makeTimerSource(queue: queue)
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(100))
        // The last loop to answer hands the sending back to the queue: a loop never waits on it.
        timer.setEventHandler { proxy.whenLoopsAnswer { queue.async { ServiceManager.notify(["WATCHDOG=1"]) } } }
        timer.activate()
        Signals.watchdog = timer
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
    static func reopen(_ accessLogFile: AccessLogFile?, log: (String) -> Void) {
        do {
            try accessLogFile?.reopen()
        } catch {
            log(error.description)
        }
    }

    /// SIGTERM and SIGINT from now on, each an element (kept until it is awaited).
    ///
    /// Their dispositions stay the default until Dispatch has installed its handler for the
    /// sources: a signal before that ends the process at once, as one before the proxy started
    /// does. (Ignored meanwhile, it was lost: a proxy stopped as soon as it had printed its
    /// address ran on.)
    private static func listenForTermination() -> AsyncStream<Int32> {
        let (signals, continuation) = AsyncStream<Int32>.makeStream()
        let queue = DispatchQueue(label: "httpcache.serve.signals")
        for number in [SIGTERM, SIGINT] {
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { continuation.yield(number) }
            source.resume()
            Signals.sources.append(source)
        }
        return signals
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

/// Keeps the signal sources and the watchdog's timer alive for the process's life (each set
/// before it can fire, from the serving task).
private enum Signals {
    nonisolated(unsafe) static var sources: [any DispatchSourceSignal] = []
    nonisolated(unsafe) static var watchdog: (any DispatchSourceTimer)?
}

#if os(Linux)
/// What SIGHUP does: read the configuration file again, apply what can change while serving,
/// reload the certificates and reopen the access log. Its state is touched on its signal queue
/// only.
private final class Reloader: @unchecked Sendable {
    let proxy: CachingProxy
    /// The command as started.
    let running: ServeCommand
    /// The options in use: those started with, and the changes applied since.
    var applied: ParsedArguments
    /// The `--access-log` file, reopened at each reload (for logrotate).
    let accessLogFile: AccessLogFile?

    init(proxy: CachingProxy, running: ServeCommand, accessLogFile: AccessLogFile?) {
        self.proxy = proxy
        self.running = running
        self.accessLogFile = accessLogFile
        applied = running.effective
    }

    func reloadOnHangUp() {
        signal(SIGHUP, SIG_IGN)
        let source = DispatchSource.makeSignalSource(
            signal: SIGHUP, queue: DispatchQueue(label: "httpcache.serve.reload"))
        source.setEventHandler { self.reload() }
        source.resume()
        Signals.sources.append(source)
    }

    private func log(_ message: String) { running.configuration.log(message) }

    func reload() {
        ServiceManager.notify(["RELOADING=1", ServiceManager.monotonicMicroseconds])
        defer { ServiceManager.notify(["READY=1", "STATUS=reloaded"]) }
        ServeCommand.reopen(accessLogFile, log: log)
        guard let path = running.configPath else {
            if running.configuration.tlsIdentities.isEmpty && accessLogFile == nil {
                log("SIGHUP: nothing to reload (no --config file, no --tls-cert, no --access-log file)")
            }
            proxy.reloadCertificates()
            return
        }
        let next: ServeCommand
        do {
            next = try ServeCommand(running.commandLine)
        } catch {
            // The message without the command's name and its pointer to --help, which a log needs not.
            var reason = Substring(error.message)
            if reason.hasPrefix("\(ServeCommand.name): ") { reason = reason.dropFirst(ServeCommand.name.count + 2) }
            if let help = reason.range(of: " (see `httpcache") { reason = reason[..<help.lowerBound] }
            log("\(path) not reloaded: \(reason); the configuration in use stays")
            proxy.reloadCertificates()
            return
        }
        for warning in next.warnings { log(warning) }
        var newCertificates = false
        for spec in ServeCommand.specs where !ServeCommand.commandLineOnly.contains(spec.names[0]) {
            let option = spec.names[0]
            let key = option.dropFirst(2)
            let wanted = next.effective
            guard applied.values[option] != wanted.values[option] || applied.has(option) != wanted.has(option) else {
                continue
            }
            switch option {
            case "--admin-token":
                proxy.replaceAdminToken(next.configuration.adminToken)
                applied.values[option] = wanted.values[option]
                log("admin-token changed in \(path): in use from now on")
            case "--tls-cert", "--tls-key":
                // New files for a TLS listener that stays: presented from now on. Turning TLS on
                // or off opens or closes a listener: a restart.
                if !running.configuration.tlsIdentities.isEmpty && !next.configuration.tlsIdentities.isEmpty {
                    newCertificates = true
                    continue
                }
                fallthrough
            default:
                let kept =
                    spec.takesValue
                    ? applied.values[option].map { $0.joined(separator: ", ") } ?? "the default"
                    : String(applied.has(option))
                log("\(key) changed in \(path): restart to apply it; keeping \(kept)")
            }
        }
        if newCertificates {
            if proxy.reloadCertificates(next.configuration.tlsIdentities) {
                for option in ["--tls-cert", "--tls-key"] { applied.values[option] = next.effective.values[option] }
            }
        } else {
            proxy.reloadCertificates()
        }
    }
}
#endif
