import CacheSemantics
import CacheStorage
import Foundation
import Synchronization

typealias Candidate = StoredCandidate

/// One request as the proxy handles it.
struct ProxyRequest: Sendable {
    var server: ServerRequest
    var target: Target
    /// The request as the engine sees it: the absolute URL and the client's fields.
    var head: RequestHead
    /// The key its responses are stored under.
    var primaryKey: String
    /// What the request it waited for (collapsed forwarding) was answered with.
    var collapsedWith: Collapse?
    /// Lookups made so far: a stored response chosen may be replaced, evicted or found
    /// corrupted before its body is opened, and the lookup is then made again (a few times).
    var lookups = 0

    var method: String { head.method }
}

/// What requests that waited for an identical one are told about it.
struct Collapse: Sendable {
    var reason: CacheStatus.ForwardReason
    var status: Int
}

/// Answers requests from the store or sends them on (RFC 9111 in shared mode).
final class ProxyHandler: RequestHandler {
    let configuration: CachingProxy.Configuration
    let engine = CacheEngine(configuration: .sharedCache)
    let store: any CacheStore
    private let memory: MemoryStore?
    let upstream: UpstreamClient
    let workers: Workers
    let metrics = Metrics()
    /// Reverse mode: the origin's URL without a trailing slash, and its authority.
    private let origin: Target?
    private let serverStatistics = Mutex<(@Sendable () -> HTTPServer.Statistics)?>(nil)
    /// Requests waiting for an identical one in flight, by primary key.
    private let inFlight = Mutex<[String: [@Sendable (Collapse?) -> Void]]>([:])
    /// What each request-target means (``route(_:)``).
    private let routes = Mutex<[String: Route]>([:])
    private static let rememberedKeyLimit = 16_384
    /// Stored facts already decoded, by entry, with the bytes they were decoded from (an
    /// entry's facts change in place when a `304` freshens it).
    private let decodedFacts = Mutex<[EntryID: (bytes: [UInt8], facts: StoredResponseFacts)]>([:])
    /// ``servedFields(_:)`` by entry, with the facts they were made from.
    private let servedHeads = Mutex<[EntryID: (facts: [UInt8], fields: HeaderFields, hasCacheStatus: Bool)]>([:])
    /// The disk index's change count (``DiskStore/changeCount``); `nil` without a disk tier.
    private let changeCount: @Sendable () -> UInt64?
    /// Candidates by primary key with the change count they were read at: valid while the
    /// index has not changed (the proxy stores nothing memory-only, so the disk tells all).
    private let rememberedCandidates = Mutex<[String: (changes: UInt64, candidates: [Candidate])]>([:])
    /// `Cache-Status` of a hit without the ttl, when the name is a token (it is serialized as
    /// is, RFC 9211 §2).
    private let hitStatusPrefix: String?
    /// Primary keys being revalidated in the background (RFC 5861 §3).
    private let revalidating = Mutex<Set<String>>([])
    /// Stored bodies up to this size are read at once on the event loop; larger ones are
    /// streamed from a worker thread.
    static let inlineBodyLimit: Int64 = 1 << 20

    init(_ configuration: CachingProxy.Configuration) throws {
        self.configuration = configuration
        switch configuration.mode {
        case .reverse(let url):
            guard var target = Messages.absoluteTarget(url) else {
                throw CachingProxy.ConfigurationError(
                    description: "the origin \"\(url)\" is not an http URL with a host, e.g. http://127.0.0.1:8081")
            }
            while target.url.hasSuffix("/") { target.url.removeLast() }
            origin = target
        case .forward:
            origin = nil
        }
        let clock = configuration.clock
        let memory = MemoryStore(capacity: configuration.memoryCapacity, clock: clock)
        if let directory = configuration.cacheDirectory {
            do {
                let disk = try DiskStore(
                    DiskStore.Configuration(
                        directory: directory, capacity: configuration.diskCapacity, log: configuration.log),
                    clock: clock)
                store = TieredStore(memory: memory, disk: disk)
                changeCount = { disk.changeCount }
            } catch {
                throw CachingProxy.ConfigurationError(
                    description: "cannot use the cache directory \(directory): \(error); choose another with --cache-dir")
            }
        } else {
            store = memory
            changeCount = { nil }
        }
        self.memory = memory
        hitStatusPrefix = CacheStatus(cache: configuration.name).fieldValue.hasPrefix(configuration.name + ";")
            ? configuration.name + "; hit; ttl=" : nil
        var upstreamConfiguration = UpstreamClient.Configuration()
        upstreamConfiguration.connectTimeout = configuration.originConnectTimeout
        upstreamConfiguration.stallTimeout = configuration.originStallTimeout
        upstream = UpstreamClient(configuration: upstreamConfiguration)
        workers = Workers(limit: configuration.maxOriginThreads)
    }

    func setServerStatistics(_ statistics: @escaping @Sendable () -> HTTPServer.Statistics) {
        serverStatistics.withLock { $0 = statistics }
    }

    var now: Timestamp { Timestamp(secondsSince1970: configuration.clock()) }

    var metricsText: String {
        let server = serverStatistics.withLock { $0 }?() ?? HTTPServer.Statistics()
        let memoryTotals = store === memory ? nil : memory?.totals()
        return metrics.text(store: store.totals(), memory: memoryTotals, server: server)
    }

    // MARK: Routing

    func handle(_ request: ServerRequest, _ responder: Responder) {
        let route = route(request.target)
        if let path = route.adminPath {
            return administer(request, path: path, responder)
        }
        if request.method == "CONNECT" {
            return connect(request, responder)
        }
        guard let target = route.target, let primaryKey = route.primaryKey else {
            let text =
                origin == nil
                ? "400 Bad Request: a forward proxy needs an absolute http URL as the request target (GET http://host/path HTTP/1.1); https goes through CONNECT"
                : "400 Bad Request: the request target \"\(request.target)\" is not a path (/...) or an http URL"
            return answer(400, text, responder)
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
            proceed(request, target: target, primaryKey: primaryKey, responder)
        case "PURGE":
            purge(request, primaryKey: primaryKey, url: target.url, responder)
        default:
            guard let key = CacheKey(method: request.method, uri: target.url) else {
                return answer(400, "400 Bad Request: the URL \(target.url) cannot be parsed", responder)
            }
            proceed(request, target: target, primaryKey: key.primaryKey, responder)
        }
    }

    private func proceed(_ request: ServerRequest, target: Target, primaryKey: String, _ responder: Responder) {
        let prepared = ProxyRequest(
            server: request, target: target,
            head: RequestHead(method: request.method, uri: target.url, fields: request.fields), primaryKey: primaryKey)
        proceed(prepared, responder)
    }

    /// Sends a request on as it is, neither answered from the store nor stored.
    private func bypass(_ request: ServerRequest, target: Target, primaryKey: String, _ responder: Responder) {
        let prepared = ProxyRequest(
            server: request, target: target,
            head: RequestHead(method: request.method, uri: target.url, fields: request.fields), primaryKey: primaryKey)
        let forwarding = Forwarding(
            reason: .bypass, candidate: nil, validated: [], fields: [:],
            reasons: [.configured("a GET or HEAD with content is sent on and never stored (RFC 9110 §9.3.1)")])
        workers.submit { [self] in
            OriginExchange(self, prepared, forwarding, [], responder: responder).run()
        }
    }

    /// What a request-target means here: worked out once per distinct target (normalizing a
    /// URL is the largest part of a hit otherwise).
    struct Route: Sendable {
        /// Where the request goes, normalized; `nil` when the target names no http URL.
        var target: Target?
        /// The `GET` key of ``target``.
        var primaryKey: String?
        /// The normalized path when the target is one of the proxy's own admin paths.
        var adminPath: String?
    }

    /// The proxy's own paths: the metrics, and everything under this prefix. They are
    /// recognised in every request-target form and never forwarded.
    static let adminPrefix = "/_httpcache/"

    private func route(_ requestTarget: String) -> Route {
        if let known = routes.withLock({ $0[requestTarget] }) { return known }
        let route = makeRoute(requestTarget)
        routes.withLock { routes in
            if routes.count >= Self.rememberedKeyLimit { routes.removeAll(keepingCapacity: true) }
            routes[requestTarget] = route
        }
        return route
    }

    /// The URL a request is for (RFC 9112 §3.2), normalized (RFC 3986 §6.2.2, RFC 9110
    /// §4.2.3): in reverse mode the origin's URL plus the target's path, in forward mode the
    /// absolute-form target. The normalized URL is both what is forwarded and what the key
    /// says, so the origin is asked for exactly what a stored response will answer.
    private func makeRoute(_ requestTarget: String) -> Route {
        // The path and query as the client named them, in either form.
        let pathAndQuery: String
        var forwardTo: Target?
        if requestTarget.hasPrefix("/") {
            pathAndQuery = requestTarget
        } else if let absolute = Messages.absoluteTarget(requestTarget) {
            pathAndQuery = String(absolute.url.dropFirst("http://".count + absolute.authority.count))
            forwardTo = Messages.normalized(absolute)
        } else {
            return Route()
        }
        // Normalized as a path of its own first, so dot segments cannot climb above it into
        // the origin's base path.
        guard let normalized = Messages.normalizedPathAndQuery(pathAndQuery) else { return Route() }
        let path = String(normalized.prefix { $0 != "?" })
        if path == configuration.metricsPath || path.hasPrefix(Self.adminPrefix) {
            return Route(adminPath: path)
        }
        if let origin {
            forwardTo = Target(url: origin.url + normalized, authority: origin.authority)
        }
        guard let target = forwardTo, let key = CacheKey(method: "GET", uri: target.url) else { return Route() }
        return Route(target: target, primaryKey: key.primaryKey)
    }

    /// The proxy's own paths: metrics for `GET` and `HEAD`, from loopback or with the admin
    /// token; `404` for any other path under ``adminPrefix``.
    private func administer(_ request: ServerRequest, path: String, _ responder: Responder) {
        guard mayAdminister(request) else { return forbidden("use \(path)", responder) }
        guard path == configuration.metricsPath else {
            return answer(404, "404 Not Found: \(path) is not one of the proxy's paths (metrics: \(configuration.metricsPath))", responder)
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            var (fields, body) = Messages.plainText("405 Method Not Allowed: the metrics are read with GET")
            fields["Allow"] = "GET, HEAD"
            metrics.count(.error)
            return responder.respond(ServerResponseHead(status: 405, fields: fields), body: body)
        }
        metrics.count(.admin)
        let body = Array(metricsText.utf8)
        let fields: HeaderFields = ["Content-Type": "text/plain; version=0.0.4; charset=utf-8", "Cache-Control": "no-store"]
        responder.respond(
            ServerResponseHead(status: 200, fields: fields), body: request.method == "HEAD" ? [] : body,
            framing: request.method == "HEAD" ? BodyFraming.none : nil)
    }

    private func mayAdminister(_ request: ServerRequest) -> Bool {
        if request.peerIsLoopback { return true }
        guard let token = configuration.adminToken, !token.isEmpty else { return false }
        return request.fields.values(named: "Authorization").contains("Bearer \(token)")
    }

    // MARK: Answering

    /// Looks the request up and serves it from the store or sends it on.
    func proceed(_ request: ProxyRequest, _ responder: Responder) {
        var request = request
        request.lookups += 1
        let candidates = candidates(request.primaryKey)
        let now = self.now
        switch engine.lookup(CacheRequest(request.head), candidates: candidates.map(\.facts), now: now) {
        case .serve(let use):
            var status: CacheStatus
            if let collapse = request.collapsedWith {
                status = CacheStatus(
                    cache: configuration.name, forward: collapse.reason, forwardStatus: collapse.status, stored: true)
                status.collapsed = true
                metrics.collapsed.add(1, ordering: .relaxed)
            } else {
                status = CacheStatus(cache: configuration.name, hit: true, ttl: Int(use.timeToLive.rounded(.down)))
            }
            serveStored(
                candidates[use.candidate], use, request, status: status, outcome: use.isStale ? .stale : .hit, at: now,
                responder)
        case .serveStaleWhileRevalidate(let use, let revalidation):
            revalidateInBackground(request, revalidation, candidates)
            var status = CacheStatus(cache: configuration.name, hit: true, ttl: Int(use.timeToLive.rounded(.down)))
            status.detail = "stale-while-revalidate"
            serveStored(candidates[use.candidate], use, request, status: status, outcome: .stale, at: now, responder)
        case .gatewayTimeout(let reasons):
            var status = CacheStatus(cache: configuration.name, hit: false, detail: "only-if-cached")
            status.forward = .request
            let text = "504 Gateway Timeout: nothing stored may answer this request: "
                + reasons.map(\.description).joined(separator: "; ")
            var (fields, body) = Messages.plainText(text)
            fields["Cache-Status"] = status.fieldValue
            metrics.count(.error)
            responder.respond(ServerResponseHead(status: 504, fields: fields), body: body)
        case .forward(let forwarding):
            forward(request, forwarding, candidates, responder)
        }
    }

    /// Every stored variant of `primaryKey` with readable facts.
    func candidates(_ primaryKey: String) -> [Candidate] {
        // Read before the store: a write landing meanwhile moves the count past this.
        guard let changes = changeCount() else { return readCandidates(primaryKey) }
        if let known = rememberedCandidates.withLock({ $0[primaryKey] }), known.changes == changes {
            return known.candidates
        }
        let candidates = readCandidates(primaryKey)
        rememberedCandidates.withLock { known in
            if known.count >= Self.rememberedKeyLimit { known.removeAll(keepingCapacity: true) }
            known[primaryKey] = (changes, candidates)
        }
        return candidates
    }

    private func readCandidates(_ primaryKey: String) -> [Candidate] {
        let entries: [StoredEntry]
        do {
            entries = try store.variants(of: primaryKey)
        } catch {
            configuration.log("could not read the stored responses for \(primaryKey): \(error); answered as a miss")
            return []
        }
        return entries.compactMap { entry in
            if let known = decodedFacts.withLock({ $0[entry.id] }), known.bytes == entry.head.facts {
                return Candidate(entry: entry, facts: known.facts)
            }
            guard entry.head.isComplete, let facts = StoredResponseFacts(serialized: entry.head.facts) else {
                if entry.head.isComplete {
                    configuration.log("dropped the stored response for \(entry.head.url): its facts cannot be read")
                    try? store.remove(entry.id)
                }
                return nil
            }
            decodedFacts.withLock { known in
                if known.count >= Self.rememberedKeyLimit { known.removeAll(keepingCapacity: true) }
                known[entry.id] = (entry.head.facts, facts)
            }
            return Candidate(entry: entry, facts: facts)
        }
    }

    /// Sends a request on: collapsed with an identical one in flight when it is a plain miss
    /// or a stale `GET`, on its own otherwise.
    private func forward(
        _ request: ProxyRequest, _ forwarding: Forwarding, _ candidates: [Candidate], _ responder: Responder
    ) {
        let collapsible: Set<CacheStatus.ForwardReason> = [.uriMiss, .varyMiss, .miss, .stale]
        guard request.method == "GET", request.collapsedWith == nil, collapsible.contains(forwarding.reason),
            !request.head.fields.contains("Range")
        else {
            workers.submit { [self] in
                OriginExchange(self, request, forwarding, candidates, responder: responder).run()
            }
            return
        }
        let key = request.primaryKey
        let leads = inFlight.withLock { waiting -> Bool in
            if waiting[key] != nil {
                waiting[key]!.append { [self] collapse in
                    guard let collapse else {
                        // Not stored: each waiting request goes on by itself.
                        return workers.submit { [self] in
                            OriginExchange(self, request, forwarding, self.candidates(key), responder: responder).run()
                        }
                    }
                    var follower = request
                    follower.collapsedWith = collapse
                    proceed(follower, responder)
                }
                return false
            }
            waiting[key] = []
            return true
        }
        guard leads else { return }
        workers.submit { [self] in
            OriginExchange(self, request, forwarding, candidates, responder: responder) { [self] collapse in
                let waiting = inFlight.withLock { $0.removeValue(forKey: key) ?? [] }
                for follower in waiting { follower(collapse) }
            }.run()
        }
    }

    /// Validates a response served stale-while-revalidate, once per key at a time (RFC 5861 §3).
    private func revalidateInBackground(
        _ request: ProxyRequest, _ revalidation: Forwarding, _ candidates: [Candidate]
    ) {
        guard revalidating.withLock({ $0.insert(request.primaryKey).inserted }) else { return }
        workers.submit { [self] in
            OriginExchange(self, request, revalidation, candidates, responder: nil).run()
            _ = revalidating.withLock { $0.remove(request.primaryKey) }
        }
    }

    /// Serves a stored response: whole, as a `304` when the client's validators match
    /// (RFC 9111 §4.3.2), or the part a `Range` asks for (RFC 9110 §14.2).
    func serveStored(
        _ candidate: Candidate, _ use: CachedUse, _ request: ProxyRequest, status: CacheStatus,
        outcome: Metrics.Outcome, at now: Timestamp? = nil, _ responder: Responder
    ) {
        let entry = candidate.entry
        let base = servedFields(entry)
        var fields = base.fields
        fields.append(name: "Age", value: use.ageFieldValue)
        if let prefix = hitStatusPrefix, status.hit, status.detail == nil, let ttl = status.ttl, !base.hasCacheStatus {
            fields.append(name: "Cache-Status", value: prefix + String(ttl))
        } else {
            fields["Cache-Status"] = status.appended(to: fields["Cache-Status"])
        }
        store.recordAccess(entry.id, at: (now ?? self.now).secondsSince1970)
        metrics.count(outcome)
        let size = entry.bodySize
        if use.notModified {
            fields.removeAll(named: "Content-Length")
            return responder.respond(ServerResponseHead(status: 304, fields: fields), body: [], framing: BodyFraming.none)
        }
        var range: ClosedRange<Int64>?
        var statusCode = entry.head.status
        switch engine.rangeAnswer(method: request.method, request: request.head.fields, stored: candidate.facts, length: size) {
        case .partial(let ranges) where ranges.count == 1:
            range = ranges[0]
            statusCode = 206
            fields["Content-Range"] = ContentRange(range: ranges[0], completeLength: size).fieldValue
        case .unsatisfiable(let length):
            fields["Content-Range"] = ContentRange(range: nil, completeLength: length).fieldValue
            return responder.respond(ServerResponseHead(status: 416, fields: fields), body: [])
        case .whole, .partial:
            // Several ranges are answered with the whole representation (RFC 9110 §14.2 allows it).
            break
        }
        let head = ServerResponseHead(status: statusCode, fields: fields)
        if request.method == "HEAD" {
            var fields = head.fields
            fields["Content-Length"] = String(range.map { Int64($0.count) } ?? size)
            return responder.respond(
                ServerResponseHead(status: statusCode, fields: fields), body: [], framing: BodyFraming.none)
        }
        let length = range.map { Int64($0.count) } ?? size
        if length <= Self.inlineBodyLimit {
            do {
                let body = try store.openBody(of: entry.id)
                let bytes = try range.map { try body.read($0) } ?? body.readAll()
                metrics.bytesFromCache.add(bytes.count, ordering: .relaxed)
                responder.respond(head, body: bytes)
            } catch {
                lookAgain(entry, error, request, responder)
            }
            return
        }
        workers.submit { [self, range] in
            // The body is opened before the head goes out: it is then this version to the end,
            // even when a newer response replaces the entry meanwhile.
            let body: any StoredBody
            do {
                body = try store.openBody(of: entry.id)
            } catch {
                return lookAgain(entry, error, request, responder)
            }
            let range = range ?? 0...(size - 1)
            responder.start(head, framing: .length(length))
            var offset = range.lowerBound
            do {
                while offset <= range.upperBound {
                    let upper = min(range.upperBound, offset + (256 << 10) - 1)
                    let chunk = try body.read(offset...upper)
                    guard !chunk.isEmpty, responder.write(chunk) else { break }
                    metrics.bytesFromCache.add(chunk.count, ordering: .relaxed)
                    offset += Int64(chunk.count)
                }
            } catch {
                configuration.log("the stored body of \(entry.head.url) could not be read: \(error)")
            }
            if offset > range.upperBound { responder.finish() } else { responder.abort() }
        }
    }

    /// A stored response's fields as every answer from it starts: without `Age`, with this
    /// proxy's `Via` (RFC 9110 §7.6.3). Remembered per entry and facts (a `304` changes both).
    private func servedFields(_ entry: StoredEntry) -> (fields: HeaderFields, hasCacheStatus: Bool) {
        if let known = servedHeads.withLock({ $0[entry.id] }), known.facts == entry.head.facts {
            return (known.fields, known.hasCacheStatus)
        }
        var fields = entry.head.fields
        fields.removeAll(named: "Age")
        Messages.addingVia(&fields, minorVersion: 1, name: configuration.name)
        let hasCacheStatus = fields.contains("Cache-Status")
        servedHeads.withLock { known in
            if known.count >= Self.rememberedKeyLimit { known.removeAll(keepingCapacity: true) }
            known[entry.id] = (entry.head.facts, fields, hasCacheStatus)
        }
        return (fields, hasCacheStatus)
    }

    /// The stored response chosen could not be opened: replaced or evicted since the lookup
    /// (another request stored a newer one), or corrupted (the store dropped it). The request
    /// is looked up again on what is stored now.
    private func lookAgain(_ entry: StoredEntry, _ error: any Error, _ request: ProxyRequest, _ responder: Responder) {
        if (error as? StorageError)?.kind != .notFound {
            configuration.log("the stored body of \(entry.head.url) could not be read: \(error)")
        }
        guard request.lookups < 3 else {
            return answer(
                502, "502 Bad Gateway: the stored response for \(entry.head.url) kept changing while it was read; try again",
                responder)
        }
        proceed(request, responder)
    }

    /// Answers with a short plain-text explanation (the proxy's own errors).
    func answer(_ status: Int, _ text: String, _ responder: Responder) {
        metrics.count(.error)
        let (fields, body) = Messages.plainText(text)
        responder.respond(ServerResponseHead(status: status, fields: fields), body: body)
    }

    private func forbidden(_ action: String, _ responder: Responder) {
        answer(
            403,
            "403 Forbidden: only clients on loopback, or with Authorization: Bearer <token> when the proxy has an admin token, may \(action)",
            responder)
    }

    // MARK: Purge and CONNECT

    /// `PURGE url`: removes every stored variant of the URL.
    private func purge(_ request: ServerRequest, primaryKey: String, url: String, _ responder: Responder) {
        guard mayAdminister(request) else { return forbidden("purge", responder) }
        metrics.count(.purge)
        do {
            let removed = try store.remove(primaryKey: primaryKey)
            let (fields, body) = Messages.plainText(
                removed == 0 ? "nothing stored for \(url)" : "purged \(removed) stored response\(removed == 1 ? "" : "s") for \(url)")
            responder.respond(ServerResponseHead(status: removed == 0 ? 404 : 200, fields: fields), body: body)
        } catch {
            answer(500, "500 Internal Server Error: could not purge \(url): \(error)", responder)
        }
    }

    /// `CONNECT host:port` (forward mode): a tunnel, never cached (RFC 9110 §9.3.6).
    private func connect(_ request: ServerRequest, _ responder: Responder) {
        guard origin == nil else {
            return answer(405, "405 Method Not Allowed: CONNECT is only served in forward mode (--forward)", responder)
        }
        guard let (host, port) = OriginSocket.authority(request.target) else {
            return answer(400, "400 Bad Request: CONNECT needs host:port as its target (RFC 9110 §9.3.6)", responder)
        }
        metrics.count(.pass)
        workers.submit { [self] in
            switch OriginSocket.connect(host: host, port: port, timeout: configuration.originConnectTimeout) {
            case .success(let fd): responder.tunnel(to: fd)
            case .failure(let error): answer(502, "502 Bad Gateway: could not connect to \(host):\(port): \(error.description)", responder)
            }
        }
    }
}
