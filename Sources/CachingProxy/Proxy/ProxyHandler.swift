#if os(Linux)
import CacheExchange
import CacheSystem
import CacheSemantics
import HTTPClient
import CacheStorage
import Foundation
import Synchronization

/// One request as the proxy handles it: what the client sent and where it goes.
struct ProxyRequest: Sendable {
    var server: ServerRequest
    var target: Target
    /// Whether a stored body found damaged as it is read sends the request through the cache
    /// again (once: not on that second pass).
    var readsAgain = true
    /// When the handler began to look it up (``MonotonicClock``): the status page's latencies
    /// run from there to the response head.
    var receivedAt: Double
    /// The `dcz` delta this request is answered with when the origin's response allows it
    /// (``DictionaryRegistry/plan(for:url:)``).
    var delta: DeltaPlan?

    var method: String { server.method }
}

/// Answers requests from the store or sends them on (RFC 9111 in shared mode).
final class ProxyHandler: RequestHandler {
    let configuration: CachingProxy.Configuration
    let store: any CacheStore
    let memory: MemoryStore?
    /// One request's way through the cache, shared with HTTPCache.
    let driver: ExchangeDriver
    let upstream: UpstreamClient
    let workers: Workers
    /// Makes the metrics and status pages, one at a time: the store's totals they read may
    /// wait for its index, which no event loop (every connection on it would wait) or origin
    /// worker (all busy while origins hang, when the figures are wanted) may do.
    private let administration = DispatchQueue(label: "httpcache.admin")
    let metrics = Metrics()
    /// The `Link` hints of stored responses, sent as `103` while their URL waits for the origin.
    let earlyHints: EarlyHints
    /// The dictionaries kept for `dcz` deltas (RFC 9842); `nil` when that is off.
    let dictionaries: DictionaryRegistry?
    /// The log, at most one line per kind and second (errors that come with every request
    /// while an origin or the store is failing).
    let limitedLog: LogLimiter
    /// Reverse mode: the origin's URL without a trailing slash, and its authority.
    private let origin: Target?
    /// The metrics path as ``Messages/lenientReading(ofPath:)`` reads it.
    private let metricsReading: String
    /// `configuration.allowedDestinations` parsed once: lower-cased hosts, with the port each
    /// allows (`nil`: every port).
    private let allowedDestinations: [(host: String, port: UInt16?)]?
    let serverStatistics = Locked<(@Sendable () -> HTTPServer.Statistics)?>(nil)
    /// `configuration.adminToken`, replaced by ``CachingProxy/replaceAdminToken(_:)``.
    let adminToken: Locked<String?>
    /// What each request-target means (``route(_:)``), in shards: the event loops look one up
    /// on every request (with one lock they waited on it on one request in a hundred and fifty
    /// on 20,000 URLs, a seventh of their futex calls).
    private let routes: ShardedLRUCache<String, Route>
    /// When the handler was made (``MonotonicClock``): the status page's uptime.
    let startedAt = MonotonicClock.seconds()
    /// How many request-targets, keys and entries the proxy remembers what it worked out
    /// for (their routes, candidates, decoded facts and served fields): enough for a working
    /// set of this many URLs to cost no re-reading or re-parsing.
    private static let rememberedKeyLimit = 65_536
    /// The bytes what the proxy remembers per URL holds at most (routes an eighth, the
    /// exchange's memos the rest, of which three quarters for the candidates of each key):
    /// half the memory tier's capacity, at least 4 MiB, so that `--memory` bounds them too, and
    /// distinct URLs cannot grow them past it. A quarter made the memos of 20,000 URLs forget
    /// entries on a uniform workload, and each such hit read SQLite again: 12–16% fewer hits a
    /// second than with half. At the default 256 MiB the keys' memo holds some 27,000 keys of
    /// nginx-like heads (`benchmarks memo` prints what a key is charged, about 3.2 KB with its
    /// head), the routes some 38,000 targets (about 440 B each).
    static func rememberedByteLimit(memoryCapacity: Int64) -> Int {
        Int(clamping: max(4 << 20, memoryCapacity / 2))
    }
    /// Whether the store looks keys up on the loops' own connections (``CacheStore/makeLookupChannel()``).
    private let looksUpOnLoops: Bool
    /// Stored bodies up to this size are read at once on the event loop; larger ones are
    /// streamed from a worker thread, unless they are in memory whole (sent from there).
    static let inlineBodyLimit: Int64 = 1 << 20

    init(_ configuration: CachingProxy.Configuration) throws {
        self.configuration = configuration
        adminToken = Locked(configuration.adminToken)
        switch configuration.mode {
        case .reverse(let url):
            guard let target = try? Target.absolute(url) else {
                throw CachingProxy.ConfigurationError(
                    description:
                        "the origin \"\(url)\" is not an http or https URL with a host, e.g. http://127.0.0.1:8081")
            }
            origin = target
        case .forward:
            origin = nil
        }
        metricsReading = Messages.lenientReading(ofPath: Substring(configuration.metricsPath)).path
        allowedDestinations = configuration.allowedDestinations?.map { entry in
            if !entry.hasSuffix("]"), let (host, port) = OriginSocket.authority(entry) {
                return (host.lowercased(), port)
            }
            let bracketed = entry.hasPrefix("[") && entry.hasSuffix("]")
            return ((bracketed ? String(entry.dropFirst().dropLast()) : entry).lowercased(), nil)
        }
        let clock = configuration.clock
        let limitedLog = LogLimiter(clock: clock, configuration.log)
        self.limitedLog = limitedLog
        let storeLog: @Sendable (String) -> Void = { message in limitedLog(.store, message) }
        let remembered = Self.rememberedByteLimit(memoryCapacity: configuration.memoryCapacity)
        routes = ShardedLRUCache(capacity: Self.rememberedKeyLimit, byteLimit: remembered / 8, shards: 8)
        earlyHints = EarlyHints(capacity: Self.rememberedKeyLimit, byteLimit: remembered / 16)
        dictionaries = configuration.dictionaryCompression.map(DictionaryRegistry.init)
        let memory = MemoryStore(capacity: configuration.memoryCapacity, clock: clock)
        if let given = configuration.store {
            store = given
        } else if let directory = configuration.cacheDirectory {
            do {
                var diskConfiguration = DiskStore.Configuration(
                    directory: directory, capacity: configuration.diskCapacity, log: storeLog)
                // A miss's client does not wait for the index commit (the entry is this
                // process's at once; other processes see it within the batch latency).
                diskConfiguration.writesBehind = true
                // The heads of some 21,000 URLs: with fewer, a uniform walk over 20,000 URLs read
                // the index for nearly half its disk hits and evicted another key's heads for each.
                diskConfiguration.headMemoryBytes = 32 << 20
                // A connection per loop (and two for the origin threads) to read where bodies
                // are: on 20,000 URLs, more than the memory tier holds, the loops' disk hits
                // otherwise took turns on the index's one connection (three quarters of the
                // loops' futex waits).
                diskConfiguration.readingConnections = configuration.loops + 2
                diskConfiguration.encryptionKey = configuration.encryptionKey
                let disk = try DiskStore(diskConfiguration, clock: clock)
                store = TieredStore(memory: memory, disk: disk)
            } catch {
                throw CachingProxy.ConfigurationError(
                    description: error.kind == .encryption
                        ? "cannot open the cache: \(error) (a key is given with --encryption-key-file FILE)"
                        : "cannot use the cache directory \(directory): \(error); choose another with --cache-dir")
            }
        } else {
            store = memory
        }
        self.memory = configuration.store == nil ? memory : nil
        looksUpOnLoops = store.makeLookupChannel() != nil
        var exchange = ExchangeDriver.Configuration(
            engine: CacheEngine(configuration: .sharedCache(named: configuration.name)), name: configuration.name,
            clock: clock,
            log: storeLog)
        // Every answer from the store carries this proxy's Via (RFC 9110 §7.6.3), as `1.1`:
        // the store keeps no version (an entry may come from another node's tier, a pack or a
        // WARC), and what it serves is the proxy's own HTTP/1.1 message made from it. A
        // response relayed as it arrives names the version it arrived with (ProxyExchange).
        // Its value made once, not on every freshened or newly read entry.
        let via = Messages.viaValue(version: "1.1", name: configuration.name)
        exchange.storedFieldsTransform = { fields in
            var fields = fields
            fields.reserveCapacity(fields.count + 1)
            fields.append(name: .via, value: via)
            return fields
        }
        exchange.storedFieldsSerializer = { EventLoop.serializedFields($0) }
        exchange.storeObserver = { [metrics] stored in
            if stored {
                metrics.stored.add(1, ordering: .relaxed)
            } else {
                metrics.storeRefusals.add(1, ordering: .relaxed)
            }
        }
        exchange.memoCapacity = Self.rememberedKeyLimit
        exchange.memoByteLimit = remembered - remembered / 8
        driver = ExchangeDriver(store: store, configuration: exchange)
        var upstreamConfiguration = UpstreamClient.Configuration()
        upstreamConfiguration.connectTimeout = configuration.originConnectTimeout
        upstreamConfiguration.stallTimeout = configuration.originStallTimeout
        upstreamConfiguration.extraTrustRoots = configuration.originTrustRoots
        upstreamConfiguration.trustAdvice = "--origin-cacert FILE"
        do {
            upstream = try UpstreamClient(configuration: upstreamConfiguration)
        } catch {
            throw CachingProxy.ConfigurationError(description: "\(error.description) (--origin-cacert)")
        }
        workers = Workers(limit: configuration.maxOriginThreads)
        startStatusTimer()
    }

    deinit { stopStatusTimer() }

    func setServerStatistics(_ statistics: @escaping @Sendable () -> HTTPServer.Statistics) {
        serverStatistics.withLock { $0 = statistics }
    }

    var now: Timestamp { Timestamp(secondsSince1970: configuration.clock()) }

    var metricsText: String {
        let server = serverStatistics.withLock { $0 }?() ?? HTTPServer.Statistics()
        let tier = store === memory ? nil : memory
        return metrics.text(
            store: configuration.storeTotals?() ?? store.totals(), memory: tier?.totals(),
            promotions: tier?.promotions, server: server, more: configuration.storeMetrics?() ?? [])
    }

    // MARK: Routing

    func handle(_ request: ServerRequest, _ responder: Responder) {
        if let accessLog = configuration.accessLog { observe(request, responder, accessLog) }
        var request = request
        let target: Target
        let primaryKey: String
        switch route(request.target).meaning {
        case .admin(let path):
            return administer(request, path: path, responder)
        case _ where request.method == "CONNECT":
            return connect(request, responder)
        case .forward(let forwarded, let key):
            (target, primaryKey) = (forwarded, key)
        case .refused(let reason):
            return answer(400, "400 Bad Request: the request target \"\(request.target)\" \(reason)", responder)
        case .notHTTP where request.method == "OPTIONS" && request.target == "*":
            // asterisk-form (RFC 9112 §3.2.4): about the server, not a resource; the proxy
            // answers for itself (its targets always carry a path, so it has nothing to send on).
            return answerAsFinalRecipient(request, responder)
        case .notHTTP:
            let text =
                origin == nil
                ? "400 Bad Request: a forward proxy needs an absolute http URL as the request target (GET http://host/path HTTP/1.1); https goes through CONNECT"
                : "400 Bad Request: the request target \"\(request.target)\" is not a path (/...) or an http URL"
            return answer(400, text, responder)
        }
        if origin == nil, !destinationAllowed(target.authority) {
            return refuseDestination(target.authority, responder)
        }
        if request.method == "OPTIONS" || request.method == "TRACE",
            let maxForwards = Messages.maxForwards(request.fields)
        {
            // RFC 9110 §7.6.2: at 0 the proxy is the final recipient; else one hop fewer.
            guard maxForwards > 0 else { return answerAsFinalRecipient(request, responder) }
            request.fields[.maxForwards] = String(maxForwards - 1)
        }
        switch request.method {
        case "GET", "HEAD":
            guard request.body.isEmpty else {
                // Content in a GET or HEAD has no meaning the key could hold (RFC 9110 §9.3.1):
                // the request is sent on with it, and its response neither stored nor served
                // from the store, so no client ever gets an answer that depended on content it
                // did not send.
                return bypass(request, target: target, primaryKey: primaryKey, responder)
            }
            if request.method == "GET", let plan = dictionaries?.plan(for: request.fields, url: target.url) {
                // Answered in the dictionary's partition, where its delta variant is stored.
                return run(
                    request, target: target, primaryKey: CachePartition.key(primaryKey, in: plan.partition),
                    bypassReasons: [], delta: plan, responder)
            }
            proceed(request, target: target, primaryKey: primaryKey, responder)
        case "PURGE":
            purge(request, primaryKey: primaryKey, url: target.url, responder)
        case "QUERY":
            query(request, target: target, responder)
        default:
            // An unsafe method may change the resource (RFC 9111 §4.4): its links too.
            earlyHints.forget(url: target.url)
            guard let key = CacheKey(method: request.method, uri: target.url) else {
                return answer(400, "400 Bad Request: the URL \(target.url) cannot be parsed", responder)
            }
            run(
                request, target: target, primaryKey: key.primaryKey, bypassReasons: [],
                targetKey: request.method == "POST" ? primaryKey : nil, responder)
        }
    }

    /// Has the access log receive a record of `request` once its response ended: one closure
    /// per request, called once.
    private func observe(
        _ request: ServerRequest, _ responder: Responder, _ accessLog: @escaping @Sendable (AccessLogRecord) -> Void
    ) {
        let began = MonotonicClock.seconds()
        let clock = configuration.clock
        let request = Self.record(of: request)
        responder.observeCompletion(requestIsHead: request.method == "HEAD") { completion in
            var record = request
            record.time = clock()
            record.duration = MonotonicClock.seconds() - began
            // As nginx logs it: 499 when no response was sent (the client left first).
            record.status = completion.head?.status ?? 499
            record.bodyBytes = completion.bodyBytes
            record.completed = completion.completed
            record.cacheStatus = completion.head?.value(.cacheStatus)
            record.originTime = completion.originTime
            accessLog(record)
        }
    }

    /// The access log's record of a request the server refused itself (as nginx logs them):
    /// one line per refused request, as for any other, so a client cannot make the log grow
    /// faster than its requests arrive.
    func rejected(_ request: ServerRequest, status: Int, bodyBytes: Int) {
        guard let accessLog = configuration.accessLog else { return }
        var record = Self.record(of: request)
        record.time = configuration.clock()
        record.status = status
        record.bodyBytes = Int64(bodyBytes)
        accessLog(record)
    }

    /// What the access log records of `request` before its response: who sent what.
    private static func record(of request: ServerRequest) -> AccessLogRecord {
        AccessLogRecord(
            time: 0, client: request.peerAddress?.host ?? "-", clientIsLoopback: request.peerIsLoopback,
            method: request.method, target: request.target, version: request.version, isTLS: request.isTLS,
            userAgent: request.fields[.userAgent], referer: request.fields[.referer])
    }

    /// Answers from the store or sends on, as the exchange decides (RFC 9111 in shared mode).
    private func proceed(_ request: ServerRequest, target: Target, primaryKey: String, _ responder: Responder) {
        run(request, target: target, primaryKey: primaryKey, bypassReasons: [], responder)
    }

    /// Sends a request on as it is, neither answered from the store nor stored.
    private func bypass(_ request: ServerRequest, target: Target, primaryKey: String, _ responder: Responder) {
        run(
            request, target: target, primaryKey: nil,
            bypassReasons: [.configured("a GET or HEAD with content is sent on and never stored (RFC 9110 §9.3.1)")],
            responder)
    }

    /// Answers a `QUERY` as a `GET` is answered, under a key that holds its content (RFC 10008
    /// §2.7); content larger than `maxQueryContentBytes` is sent on uncached.
    private func query(
        _ request: ServerRequest, target: Target, readsAgain: Bool = true, _ responder: Responder
    ) {
        guard let key = CacheKey(method: "QUERY", uri: target.url) else {
            return answer(400, "400 Bad Request: the URL \(target.url) cannot be parsed", responder)
        }
        let limit = configuration.maxQueryContentBytes
        guard request.body.count <= limit else {
            return run(
                request, target: target, primaryKey: nil,
                bypassReasons: [
                    .configured(
                        "a QUERY with \(request.body.count) bytes of content is sent on uncached: the proxy keys at most \(limit) (maxQueryContentBytes, RFC 10008 §2.7)"
                    )
                ], bypassDetail: "query-content-too-large", readsAgain: readsAgain, responder)
        }
        let contentKey = QueryContentKey(content: request.body, fields: request.fields)
        run(
            request, target: target, primaryKey: contentKey.primaryKey(for: key), bypassReasons: [],
            readsAgain: readsAgain, responder)
    }

    /// `targetKey`: for a `POST`, the key its response may be stored under (RFC 9110 §9.3.3).
    private func run(
        _ request: ServerRequest, target: Target, primaryKey: String?, bypassReasons: [Reason],
        bypassDetail: String? = nil, targetKey: String? = nil, readsAgain: Bool = true, delta: DeltaPlan? = nil,
        _ responder: Responder
    ) {
        let receivedAt = MonotonicClock.seconds()
        if readsAgain { metrics.busiest.record(request.target) }
        var exchange = ExchangeRequest(
            head: RequestHead(method: request.method, uri: target.url, fields: request.fields), primaryKey: primaryKey,
            bypassReasons: bypassReasons)
        exchange.bypassDetail = bypassDetail
        exchange.targetKey = targetKey
        exchange.partition = delta?.partition
        exchange.partitionHoldsVariants = delta != nil
        let machine = driver.exchange(for: exchange)
        let proxyRequest = ProxyRequest(
            server: request, target: target, readsAgain: readsAgain, receivedAt: receivedAt, delta: delta)
        // A lookup that would wait for the store's server (the Redis tier) or for the disk
        // index's lock (a key beyond its head memo while the writer holds it) is made off the
        // loop, and the request parked until its answer is in: the loop goes on meanwhile.
        if looksUpOnLoops, request.method == "GET" || request.method == "HEAD", let primaryKey,
            let loop = EventLoop.current,
            // `machine` captured, as a copy of its own, only when the lookup may be queued: the
            // copy and its closure cost a hit some 2,000 instructions. The call below then takes
            // it without one.
            loop.lookUp(primaryKey, in: store, { { [self, machine] in start(machine, proxyRequest, responder) } })
        {
            return
        }
        start(consume machine, proxyRequest, responder)
    }

    /// Starts the exchange of `request`: a hit is answered at once, anything else goes on as
    /// the exchange says.
    ///
    /// `machine` is consumed: a copy here (its candidates' entries and facts) cost about 470
    /// instructions a hit.
    private func start(_ machine: consuming ExchangeStateMachine, _ proxyRequest: ProxyRequest, _ responder: Responder)
    {
        switch driver.start(&machine) {
        case .serve(let served, let revalidation):
            // A hit is answered here, on the loop: it needs no exchange object.
            if let revalidation { revalidateInBackground(revalidation, proxyRequest) }
            serve(served, proxyRequest, responder)
        case let first:
            ProxyExchange(self, proxyRequest, machine, responder: responder).perform(first)
        }
    }

    /// What a request-target means here: worked out once per distinct target. A class: taking
    /// it from the memo is one retain.
    final class Route: Sendable {
        enum Meaning {
            /// Sent to `target` and stored under `primaryKey`, its `GET` key.
            case forward(Target, primaryKey: String)
            /// One of the proxy's own paths, as ``Messages/lenientReading(ofPath:)`` reads it.
            case admin(String)
            /// Answered `400`; the reason completes "the request target … ".
            case refused(String)
            /// Names no http URL (authority-form, asterisk-form, another scheme).
            case notHTTP
        }

        let meaning: Meaning

        init(_ meaning: Meaning) { self.meaning = meaning }

        /// The heap memory the route holds (for the memo's byte bound).
        var memoryCost: Int {
            let strings: [String]
            switch meaning {
            case .forward(let target, let primaryKey): strings = [target.url, target.authority, primaryKey]
            case .admin(let path): strings = [path]
            case .refused(let reason): strings = [reason]
            case .notHTTP: strings = []
            }
            return MemoryCost.allocation(16 + 5 * MemoryLayout<String?>.stride)
                + strings.reduce(0) { $0 + MemoryCost.string($1) }
        }
    }

    /// The proxy's own paths: the metrics, and everything under this prefix. They are
    /// recognised in every request-target form and never forwarded.
    static let adminPrefix = "/_httpcache/"

    private func route(_ requestTarget: String) -> Route {
        if let known = routes.value(for: requestTarget) { return known }
        let route = Route(meaning(of: requestTarget))
        routes.set(route, for: requestTarget, cost: MemoryCost.string(requestTarget) + route.memoryCost)
        return route
    }

    /// The URL a request is for (RFC 9112 §3.2): in reverse mode the origin's URL plus the
    /// target's path and query, in forward mode the absolute-form target. The path and query
    /// are forwarded exactly as received (RFC 9110 §7.7: no dot segments removed, no escape
    /// decoded or re-cased) and keyed exactly as forwarded; only the authority is normalized
    /// (RFC 9110 §4.2.3), so `http://H:80/x` and `http://h/x` share an entry and `/a/%61` and
    /// `/a/a` never do.
    ///
    /// A path that any origin might read as one of the proxy's own (``adminPrefix``, the metrics
    /// path: `/x/../_httpcache/metrics`, `//_httpcache/%6Detrics`) is the proxy's own path,
    /// answered here and never forwarded. With a base path in the origin's URL, a path whose
    /// `..` would climb above it (`/../secret`, `/%2e%2e/secret`) is refused: the origin could
    /// read it as a path outside the base, and rewriting it is not the proxy's to do.
    private func meaning(of requestTarget: String) -> Route.Meaning {
        if ASCII.firstIndex(of: UInt8(ascii: "#"), in: requestTarget) != nil {
            return .refused(
                "has a fragment ('#…'), which a request-target never carries (RFC 9112 §3.2); leave it out, or send '#' as %23"
            )
        }
        let absolute: Target?
        if requestTarget.utf8.first == UInt8(ascii: "/") {
            absolute = nil
        } else {
            do {
                // A forward proxy reaches https origins only through CONNECT tunnels: it never
                // holds what the client meant to keep between itself and the origin.
                guard let parsed = try Target.absolute(requestTarget), origin != nil || parsed.scheme == .http else {
                    return .notHTTP
                }
                absolute = parsed
            } catch {
                return .refused("has an authority that is not host[:port]: \(error)")
            }
        }
        // origin-form is the path and query already (RFC 9112 §3.2.1).
        let pathAndQuery = absolute?.pathAndQuery ?? Substring(requestTarget)
        let path = pathAndQuery[..<(ASCII.firstIndex(of: UInt8(ascii: "?"), in: pathAndQuery) ?? pathAndQuery.endIndex)]
        let reading = Messages.lenientReading(ofPath: path)
        if reading.path == metricsReading || reading.path.hasPrefix(Self.adminPrefix) {
            return .admin(reading.path)
        }
        let target: Target
        if let origin {
            if reading.climbsAboveRoot && !origin.basePath.isEmpty {
                return .refused(
                    "climbs above the root with '..' (also %2e%2e, or after %2f): the origin could read it as a path outside \(origin.basePath), and the proxy forwards paths unchanged (RFC 9110 §7.7)"
                )
            }
            target = origin.forwarding(pathAndQuery)
        } else if let absolute {
            target = absolute
        } else {
            return .notHTTP
        }
        guard let key = CacheKey(method: "GET", uri: target.url) else { return .notHTTP }
        return .forward(target, primaryKey: key.primaryKey)
    }

    /// The proxy's own paths: metrics, the status page and its JSON for `GET` and `HEAD`, from
    /// loopback or with the admin token; `404` for any other path under ``adminPrefix``.
    private func administer(_ request: ServerRequest, path: String, _ responder: Responder) {
        guard mayAdminister(request) else { return forbidden("use \(path)", responder) }
        guard path == metricsReading || path == Self.statusPath || path == Self.statusJSONPath else {
            return answer(
                404,
                "404 Not Found: \(path) is not one of the proxy's paths (metrics: \(configuration.metricsPath), status: \(Self.statusPath))",
                responder)
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            var (fields, body) = Messages.plainText("405 Method Not Allowed: \(path) is read with GET")
            fields[.allow] = "GET, HEAD"
            metrics.count(.error)
            return responder.respond(ServerResponseHead(status: 405, fields: fields), body: body)
        }
        metrics.count(.admin)
        let send = { @Sendable [self] in
            let (contentType, body) =
                path == metricsReading
                ? ("text/plain; version=0.0.4; charset=utf-8", Array(metricsText.utf8)) : statusDocument(path)
            let fields: HeaderFields = ["Content-Type": contentType, "Cache-Control": "no-store"]
            responder.respond(
                ServerResponseHead(status: 200, fields: fields), body: request.method == "HEAD" ? [] : body,
                framing: request.method == "HEAD" ? BodyFraming.none : nil)
        }
        administration.async(execute: send)
    }

    /// Whether `request` may PURGE and read the metrics: from loopback, or with the admin token.
    func mayAdminister(_ request: ServerRequest) -> Bool {
        if request.peerIsLoopback { return true }
        guard let token = adminToken.withLock({ $0 }), !token.isEmpty else { return false }
        return request.fields.values(named: .authorization).contains("Bearer \(token)")
    }

    // MARK: Answering

    /// Sends a stored response: at once when its body is small, else streamed from a worker.
    /// A small body found damaged as it is read (the store removes it) is a miss: the request
    /// is handled again, once (``ProxyRequest/readsAgain``).
    func serve(_ served: ServedResponse, _ request: ProxyRequest, _ responder: Responder) {
        if served.cacheStatus.collapsed == true {
            metrics.collapsed.add(1, ordering: .relaxed)
            metrics.count(.hit)
        } else {
            metrics.count(served.outcome == .stale ? .stale : served.outcome == .revalidated ? .revalidated : .hit)
        }
        var written: ServerResponseHead
        if request.delta != nil, served.fields[.contentEncoding] == "dcz" {
            var fields = served.fields
            DeltaCoding.namingDelta(&fields, ours: served.cacheStatus)
            written = ServerResponseHead(status: served.status, fields: fields)
        } else {
            // The stored fields as the cache remembers them, then the few this answer adds.
            written = ServerResponseHead(status: served.status, fields: served.addedFields)
            written.leadingFields = served.storedFields
            written.serializedFields = served.serializedFields.map { ($0.bytes, $0.count) }
        }
        let head = written
        switch served.body {
        case .none:
            recordLatency(request, served)
            responder.respond(head, body: [], framing: BodyFraming.none)
        case .bytes(let bytes):
            metrics.bytesFromCache.add(bytes.count, ordering: .relaxed)
            recordLatency(request, served)
            responder.respond(head, body: bytes)
        case .stored(let body, let range) where Int64(range.count) <= Self.inlineBodyLimit:
            do {
                let bytes = range.isEmpty ? [] : try body.read(range.lowerBound...(range.upperBound - 1))
                metrics.bytesFromCache.add(bytes.count, ordering: .relaxed)
                recordLatency(request, served)
                responder.respond(head, body: bytes)
            } catch {
                // Damaged (the store dropped it) before the head went out: handled again, now
                // without it.
                limitedLog(
                    .store,
                    "the stored body of \(request.target.url) could not be read (\(error)); the request is handled "
                        + "again without it")
                guard request.readsAgain, case .forward(_, let primaryKey) = route(request.server.target).meaning else {
                    return answer(
                        502, "502 Bad Gateway: the stored response for \(request.target.url) is damaged: \(error)",
                        responder)
                }
                if request.server.method == "QUERY" {
                    return query(request.server, target: request.target, readsAgain: false, responder)
                }
                run(
                    request.server, target: request.target, primaryKey: primaryKey, bypassReasons: [],
                    readsAgain: false, responder)
            }
        case .stored(let body, let range):
            if range.lowerBound == 0, range.upperBound == body.size, let bytes = body.bytesInMemory {
                // Whole and in memory, however large: the connection sends the stored array
                // itself, at the client's pace, with no copy and no worker.
                metrics.bytesFromCache.add(bytes.count, ordering: .relaxed)
                recordLatency(request, served)
                return responder.respond(head, body: bytes)
            }
            workers.submit { [self] in
                recordLatency(request, served)
                responder.start(head, framing: .length(Int64(range.count)))
                var offset = range.lowerBound
                do {
                    while offset < range.upperBound {
                        let upper = min(range.upperBound, offset + (256 << 10)) - 1
                        let chunk = try body.read(offset...upper)
                        guard !chunk.isEmpty, responder.write(chunk) else { break }
                        metrics.bytesFromCache.add(chunk.count, ordering: .relaxed)
                        offset += Int64(chunk.count)
                    }
                } catch {
                    limitedLog(
                        .store,
                        "the stored body of \(request.target.url) could not be read (\(error)); its response was cut off"
                    )
                }
                if offset == range.upperBound { responder.finish() } else { responder.abort() }
            }
        }
    }

    /// Counts the latency of a stored response as its head goes out (a `304`-freshened one
    /// with the misses: the origin was asked).
    private func recordLatency(_ request: ProxyRequest, _ served: ServedResponse) {
        metrics.history.recordLatency(
            MonotonicClock.seconds() - request.receivedAt, served.outcome == .revalidated ? .miss : .hit)
    }

    /// Validates a response served stale-while-revalidate, on a worker (RFC 5861 §3).
    func revalidateInBackground(_ revalidation: ExchangeDriver.BackgroundRevalidation, _ request: ProxyRequest) {
        workers.submit { [self] in
            ProxyExchange(self, request, revalidating: revalidation).start()
        }
    }

    /// Answers with a short plain-text explanation (the proxy's own errors) and this proxy's
    /// `Proxy-Status` member (RFC 9209 §2): `error`, by default `http_request_error` with the
    /// status for a 4xx (§2.3.16), `proxy_internal_error` for a 5xx (§2.3.30).
    func answer(_ status: Int, _ text: String, _ responder: Responder, error: ProxyStatusMember.ErrorType? = nil) {
        metrics.count(.error)
        var (fields, body) = Messages.plainText(text)
        let error = error ?? (status < 500 ? .httpRequestError : .proxyInternalError)
        fields[.proxyStatus] =
            ProxyStatusMember(
                proxy: configuration.name, error: error, statusCode: error == .httpRequestError ? status : nil
            ).fieldValue
        responder.respond(ServerResponseHead(status: status, fields: fields), body: body)
    }

    /// Answers an `OPTIONS` or `TRACE` the proxy is the final recipient of (`Max-Forwards: 0`,
    /// [RFC 9110 §7.6.2](https://www.rfc-editor.org/rfc/rfc9110#section-7.6.2), or
    /// `OPTIONS *`): `OPTIONS` with `200` and the methods it handles in `Allow`
    /// ([RFC 9110 §9.3.7](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.7)), `TRACE`
    /// (which it otherwise sends on) with `200` and the request reflected as `message/http`,
    /// its credentials left out ([RFC 9110 §9.3.8](https://www.rfc-editor.org/rfc/rfc9110#section-9.3.8)).
    /// Neither is stored.
    private func answerAsFinalRecipient(_ request: ServerRequest, _ responder: Responder) {
        metrics.count(.admin)
        var fields: HeaderFields = ["Cache-Control": "no-store"]
        let body: [UInt8]
        if request.method == "TRACE" {
            fields[.contentType] = "message/http"
            body = Messages.traceReflection(request)
        } else {
            fields[.allow] = Messages.allowedMethods(forward: origin == nil)
            body = []
        }
        responder.respond(ServerResponseHead(status: 200, fields: fields), body: body)
    }

    /// Access control refused the request: RFC 9209 §2.3.17.
    private func forbidden(_ action: String, _ responder: Responder) {
        answer(
            403,
            "403 Forbidden: only clients on loopback, or with Authorization: Bearer <token> when the proxy has an admin token, may \(action)",
            responder, error: .httpRequestDenied)
    }

    // MARK: Purge and CONNECT

    /// `PURGE url`: removes every stored variant of the URL. With a `Cache-Group-Invalidation`
    /// field (a List of Strings, as in a response, RFC 9875 §3), removes instead every stored
    /// response of the URL's origin in those groups.
    private func purge(_ request: ServerRequest, primaryKey: String, url: String, _ responder: Responder) {
        guard mayAdminister(request) else { return forbidden("purge", responder) }
        metrics.count(.purge)
        if request.fields.contains(.cacheGroupInvalidation) {
            return purgeGroups(request, url: url, responder)
        }
        earlyHints.forget(url: url)
        do {
            let removed = try driver.removeStored(primaryKey: primaryKey)
            let (fields, body) = Messages.plainText(
                removed == 0
                    ? "nothing stored for \(url)"
                    : "purged \(removed) stored response\(removed == 1 ? "" : "s") for \(url)")
            responder.respond(ServerResponseHead(status: removed == 0 ? 404 : 200, fields: fields), body: body)
        } catch {
            answer(500, "500 Internal Server Error: could not purge \(url): \(error)", responder)
        }
    }

    private func purgeGroups(_ request: ServerRequest, url: String, _ responder: Responder) {
        let groups = CacheGroups.groups(request.fields, name: .cacheGroupInvalidation)
        guard !groups.isEmpty, let origin = CacheGroups.origin(of: url) else {
            return answer(
                400,
                "400 Bad Request: Cache-Group-Invalidation needs a list of strings such as \"scripts\", \"images\" (RFC 9875 §3)",
                responder)
        }
        do {
            var removed = 0
            for group in groups { removed += try store.remove(tag: CacheGroups.tag(group, origin: origin)) }
            let names = CacheGroups.fieldValue(groups)
            let (fields, body) = Messages.plainText(
                removed == 0
                    ? "nothing stored in cache group \(names) of \(origin)"
                    : "purged \(removed) stored response\(removed == 1 ? "" : "s") in cache group \(names) of \(origin)"
            )
            responder.respond(ServerResponseHead(status: removed == 0 ? 404 : 200, fields: fields), body: body)
        } catch {
            answer(500, "500 Internal Server Error: could not purge cache groups of \(origin): \(error)", responder)
        }
    }

    // MARK: Destinations (forward mode)

    /// Whether `authority` (`host[:port]`, port 80 when absent) is on the allow-list; `true`
    /// without one. Decided on the text of the request alone: nothing is looked up.
    private func destinationAllowed(_ authority: String) -> Bool {
        guard let allowedDestinations else { return true }
        guard let (host, port) = OriginSocket.authority(authority, defaultPort: 80) else { return false }
        let name = host.lowercased()
        return allowedDestinations.contains { $0.host == name && ($0.port == nil || $0.port == port) }
    }

    private func refuseDestination(_ authority: String, _ responder: Responder) {
        metrics.count(.error)
        limitedLog(
            .refusedDestination,
            "refused a request for \(authority): not an allowed destination; add it with --allow-destination if it should be"
        )
        // Refused by the allow-list, on the request's text before any lookup: access control
        // (RFC 9209 §2.3.17), not an address found prohibited (§2.3.5, which needs the IP).
        answer(
            403, "403 Forbidden: \(authority) is not a destination this proxy may reach (--allow-destination)",
            responder, error: .httpRequestDenied)
    }

    /// `CONNECT host:port` (forward mode): a tunnel, never cached (RFC 9110 §9.3.6).
    private func connect(_ request: ServerRequest, _ responder: Responder) {
        guard origin == nil else {
            return answer(405, "405 Method Not Allowed: CONNECT is only served in forward mode (--forward)", responder)
        }
        guard let (host, port) = OriginSocket.authority(request.target) else {
            return answer(400, "400 Bad Request: CONNECT needs host:port as its target (RFC 9110 §9.3.6)", responder)
        }
        guard destinationAllowed(request.target) else { return refuseDestination(request.target, responder) }
        metrics.count(.pass)
        workers.submit { [self] in
            switch OriginSocket.connect(host: host, port: port, timeout: configuration.originConnectTimeout) {
            case .success(let fd): responder.tunnel(to: fd)
            case .failure(let error):
                let proxyError = Messages.proxyError(connecting: error.kind)
                limitedLog(
                    .origin(proxyError),
                    "answered CONNECT \(host):\(port) with 502 (Proxy-Status error=\(proxyError.rawValue)): "
                        + "could not connect: \(error.description)")
                answer(
                    502, "502 Bad Gateway: could not connect to \(host):\(port): \(error.description)", responder,
                    error: proxyError)
            }
        }
    }
}
#endif
