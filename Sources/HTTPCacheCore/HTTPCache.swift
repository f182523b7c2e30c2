import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

/// An HTTP cache: RFC 9111 decisions (the CacheSemantics engine) over a store (CacheStorage) in
/// front of a transport.
///
/// ```swift
/// let cache = try HTTPCache()
/// let result = try await cache.data(for: URLRequest(url: url))
/// print(result.outcome, result.cacheStatus)   // miss, then hit, revalidated, stale…
/// ```
///
/// The class and everything it does live in HTTPCacheCore, which needs Foundation only; the
/// HTTPCaching library, which re-exports it, adds the `URLRequest` / `URLSession` face
/// (FoundationNetworking on Linux). A program that uses HTTPCacheCore alone passes
/// ``FetchRequest``s and an ``OriginTransport`` of its own.
///
/// One instance is safe to share across threads and tasks. Several instances, in one
/// process or many, may share a directory.
public final class HTTPCache: Sendable {
    /// How a cache behaves.
    public struct Configuration: Sendable {
        /// A shared cache (a proxy) rather than a private one (an app's own): `s-maxage`,
        /// `proxy-revalidate`, `private` and the `Authorization` rules then apply (RFC 9111
        /// §3.5), and `CDN-Cache-Control` is obeyed (RFC 9213), after ``name``-`Cache-Control`
        /// when the response carries a valid one. Default `false`.
        public var isShared = false
        /// Bytes the memory tier keeps: bodies and each entry's overhead (its head and
        /// bookkeeping, see `MemoryStore`). Default 32 MiB.
        public var memoryCapacity: Int64 = 32 << 20
        /// Bytes of bodies the disk tier keeps. Default 1 GiB.
        public var diskCapacity: Int64 = DiskStore.Configuration.defaultCapacity
        /// The cache directory; `nil` keeps everything in memory. Default
        /// `DiskStore.defaultDirectory()` (`$HTTPCACHE_DIR`, else the user's cache directory).
        public var directory: String? = DiskStore.defaultDirectory()
        /// A store of your own instead of the one ``directory`` and the capacities describe:
        /// for example a `SharedStore` on Redis (the `CacheStorageRedis` library), so that
        /// several processes on several machines share what they cache:
        ///
        /// ```swift
        /// var configuration = HTTPCache.Configuration()
        /// let redis = RedisStore(try RedisConfiguration(url: "redis://127.0.0.1:6379"))
        /// configuration.store = SharedStore(redis: redis, localCapacity: 32 << 20)
        /// let cache = try HTTPCache(configuration: configuration)
        /// ```
        public var store: (any CacheStore)?
        /// The key the disk store in ``directory`` is encrypted with at rest (AES-256-GCM): its
        /// bodies, URLs, fields and keys. `nil` (the default) keeps it in the clear. A directory
        /// made with a key opens only with that key, one made without a key refuses one (both a
        /// `StorageError` of kind `encryption` from the initializer); `httpcache rekey` changes
        /// it. The memory tier holds plaintext: it is RAM. Ignored with ``store``: a `RedisStore`
        /// takes its own key (`RedisConfiguration.encryptionKey`).
        ///
        /// ```swift
        /// configuration.encryptionKey = try EncryptionKey(contentsOfFile: "/run/secrets/cache-key")
        /// ```
        public var encryptionKey: EncryptionKey?
        /// The largest body stored; larger responses are passed on and not stored (the
        /// response's ``CachedResponse/reasons`` say so). Default: 1/8 of the disk capacity.
        public var maximumEntrySize: Int64?
        /// The fraction of the time since `Last-Modified` used as a freshness lifetime when
        /// the origin gives none (RFC 9111 §4.2.2). Default 0.1.
        public var heuristicFraction = 0.1
        /// The current time in seconds since 1970. Tests pass a manual clock.
        public var clock: @Sendable () -> Double = { Date().timeIntervalSince1970 }
        /// The cache partition of requests that name none (``FetchRequest/partition``): a user id,
        /// a top-level site. Responses stored in one partition are never served in another, nor
        /// to a request in none; a `Clear-Site-Data` response clears its origin in its own
        /// partition only. Default `nil`: the unpartitioned cache, whose entries (those of
        /// stores made before partitions existed too) are as they always were.
        public var partition: String?
        /// The policy used for requests whose `cachePolicy` is `.useProtocolCachePolicy`.
        public var defaultPolicy: CachePolicy = .useProtocolCachePolicy
        /// Rules by URL pattern: never cache, force a lifetime, pin. A pattern that starts with
        /// `/` matches the path and query on any host, any other the whole URL
        /// (``URLPattern``).
        public var rules: [CacheRule] = []
        /// Chooses the key a request is cached under; `nil` returned means "do not cache this
        /// request". Default: the request's URL. (HTTPCaching's `cacheKey` is this hook, given a
        /// `URLRequest`.) No-Vary-Search (draft-ietf-httpbis-no-vary-search §6) applies after
        /// it: the hook maps the URL, then the query parameters a stored response's
        /// `No-Vary-Search` names are ignored in the URL the hook returned.
        public var keyForRequest: (@Sendable (FetchRequest) -> RequestKey?)?
        /// Sees every response the cache could store and decides: store as is, store with
        /// other fields, memory only, or not at all; with `userInfo` to keep. (HTTPCaching's
        /// `willStore` is this hook, given a `URLRequest` and an `HTTPURLResponse`.)
        public var willStoreResponse: (@Sendable (OfferedResponse) -> StoreChoice)?
        /// Receives one ``CacheEvent`` per request, for logging.
        public var onEvent: (@Sendable (CacheEvent) -> Void)?
        /// Adds the RFC 9211 `Cache-Status` field to every response. Default `true`.
        public var addsCacheStatusField = true
        /// The cache's name in `Cache-Status`, and in a shared cache the targeted field of its
        /// own, `NAME-Cache-Control` (RFC 9213 §2.2). Default `HTTPCache`.
        public var name = "HTTPCache"
        /// Follows redirects (each hop cached under its own URL). Default `true`, at most
        /// ``maximumRedirects``.
        public var followsRedirects = true
        /// The most redirects followed for one request: a request whose redirects go on past it
        /// (a loop, most likely) fails with `URLError(.httpTooManyRedirects)`, as URLSession's
        /// does. 0 follows none: a redirect is the answer.
        public var maximumRedirects = 10
        /// Receives what the cache reports (storage failures, entries dropped).
        public var log: @Sendable (String) -> Void = { message in
            FileHandle.standardError.write(Data("httpcache: \(message)\n".utf8))
        }
        /// The defaults: a private cache in the user's cache directory.
        public init() {}

        /// A private cache kept in memory only.
        public static var memoryOnly: Configuration {
            var configuration = Configuration()
            configuration.directory = nil
            return configuration
        }
    }

    /// The configuration.
    public let configuration: Configuration
    /// The store responses live in.
    public let store: any CacheStore
    /// The network.
    public let transport: any OriginTransport
    /// One request's way through the cache, shared with the caching proxy.
    let driver: ExchangeDriver
    let state = Locked(State())
    /// What request URLs are sent and keyed as, by URL string (``target(of:)``): 4,096 URLs in
    /// at most 1 MiB, the least recently used going first.
    let targets = Locked(LRUCache<String, RequestTarget>(capacity: 4096, byteLimit: 1 << 20))
    /// The platform response of the last answer from each stored entry: 1,024 entries in at
    /// most 1 MiB.
    let platformResponses = PlatformResponses(capacity: 1024, byteLimit: 1 << 20)
    /// Who hears of stale-while-revalidate refreshes that land (``updates(for:)``).
    let refreshes = RefreshListeners()

    struct State {
        var statistics = CacheStatistics()
        var manifestRules: [CacheRule] = []
    }

    /// Creates a cache on the configured store: ``Configuration/store`` when set, else memory in
    /// front of a disk store in ``Configuration/directory``, or memory alone.
    ///
    /// - Parameters:
    ///   - configuration: How it behaves.
    ///   - transport: The network.
    /// - Throws: `StorageError` when the directory cannot be used.
    public convenience init(configuration: Configuration, transport: any OriginTransport) throws(StorageError) {
        self.init(configuration: configuration, store: try Self.store(configuration), transport: transport)
    }

    /// The store ``Configuration`` describes: ``Configuration/store`` when set, else memory in
    /// front of a disk store in ``Configuration/directory``, or memory alone.
    /// - Parameter diskSweepsWhenOpened: ``DiskStore/Configuration/sweepsWhenOpened`` of the disk
    ///   store: the command-line tool, which mostly reads and exits, sweeps itself after a write.
    package static func store(
        _ configuration: Configuration, diskSweepsWhenOpened: Bool = true
    ) throws(StorageError) -> any CacheStore {
        let clock = configuration.clock
        let store: any CacheStore
        let maximum = configuration.maximumEntrySize
        if let given = configuration.store {
            store = given
        } else if let directory = configuration.directory {
            var diskConfiguration = DiskStore.Configuration(
                directory: directory, capacity: configuration.diskCapacity, maximumEntrySize: maximum,
                log: configuration.log)
            diskConfiguration.encryptionKey = configuration.encryptionKey
            diskConfiguration.sweepsWhenOpened = diskSweepsWhenOpened
            let disk = try DiskStore(diskConfiguration, clock: clock)
            let memory = MemoryStore(
                capacity: configuration.memoryCapacity,
                maximumEntrySize: min(maximum ?? configuration.memoryCapacity / 4, configuration.memoryCapacity),
                clock: clock)
            store = TieredStore(memory: memory, disk: disk)
        } else {
            store = MemoryStore(capacity: configuration.memoryCapacity, maximumEntrySize: maximum, clock: clock)
        }
        return store
    }

    /// Creates a cache on a store of your own (for example one shared by several caches).
    public init(configuration: Configuration = Configuration(), store: any CacheStore, transport: any OriginTransport) {
        self.configuration = configuration
        self.store = store
        self.transport = transport
        var engineConfiguration: CacheEngine.Configuration =
            configuration.isShared ? .sharedCache(named: configuration.name) : .privateCache
        engineConfiguration.heuristicFraction = configuration.heuristicFraction
        var exchange = ExchangeDriver.Configuration(
            engine: CacheEngine(configuration: engineConfiguration), name: configuration.name,
            clock: configuration.clock, log: configuration.log)
        exchange.addsCacheStatus = configuration.addsCacheStatusField
        driver = ExchangeDriver(store: store, configuration: exchange)
    }

    // MARK: Fetching

    /// Fetches `request` through the cache and returns the whole body.
    ///
    /// The request's `cachePolicy` (all six) and its `Cache-Control` are honoured
    /// (RFC 9111 §5.2.1). When the origin cannot be reached, a stored response is served
    /// where RFC 9111 §4.2.4 allows it (outcome `CacheOutcome.stale`), a `504` when it
    /// forbids it (`must-revalidate`), and otherwise the transport's error is thrown — always
    /// under `.reloadIgnoringLocalCacheData` and `.reloadIgnoringLocalAndRemoteCacheData`,
    /// which promise a load from the origin.
    public func data(for request: FetchRequest) async throws -> CachedResponse {
        try await data(for: request, forceStore: false)
    }

    /// ``data(for:)``, optionally storing what RFC 9111 would not (manifest pre-fetches).
    func data(for request: FetchRequest, forceStore: Bool) async throws -> CachedResponse {
        try await following(request, forceStore: forceStore) { prepared in
            var response = try await respond(to: prepared)
            var body = try await wholeBody(of: response, prepared)
            if body == nil {
                // Corrupted: the store dropped it; ask again.
                configuration.log("the stored body of \(prepared.urlString) was corrupted; fetching it again")
                response = try await respond(to: prepared)
                body = try await wholeBody(of: response, prepared)
            }
            guard let data = body else {
                throw StorageError(.readFailed, "the stored body of \(prepared.urlString) could not be read twice")
            }
            return CachedResponse(data: data, head: responseHead(response, url: prepared.url))
        } head: {
            $0.head
        }
    }

    /// What ``data(for:)`` returns, when the cache answers at once from the store (a response
    /// it may serve, or its `504` for only-if-cached) without contacting the origin or waiting
    /// for an identical request in flight, its body is at most `limit` bytes (read whole, at
    /// once) and it is not a redirect the cache would follow; `nil` otherwise, with nothing
    /// done: ask ``data(for:)``. For callers that answer synchronously when they can
    /// (`CachingURLProtocol.startLoading`).
    package func storedData(for request: FetchRequest, upTo limit: Int64) -> CachedResponse? {
        let started = eventStart
        guard let prepared = try? prepare(request) else { return nil }
        let stored = storedAnswer(prepared) { status, location, size in
            size > limit
                || (configuration.followsRedirects && configuration.maximumRedirects > 0
                    && redirected(request, status: status, location: location, follow: HTTPCache.redirectTarget) != nil)
        }
        guard let (answer, _) = stored else { return nil }
        record(answer.head, method: prepared.method, url: prepared.urlString, started: started)
        return answer
    }

    /// What the exchange answers `prepared` with at once from the store, body read whole, and the
    /// entry it came from (`nil` for the cache's own `504`); `nil` when it would send or wait,
    /// when `declines` the stored response (``respondFromStore(to:declining:)``), or when its
    /// body is corrupted (left to ``data(for:)``, which says so).
    func storedAnswer(
        _ prepared: PreparedRequest, declining declines: (_ status: Int, _ location: String?, _ size: Int64) -> Bool
    ) -> (CachedResponse, entry: EntryID?)? {
        guard let response = respondFromStore(to: prepared, declining: declines) else { return nil }
        let data: Data
        switch response.body {
        case .stored(let body, let range):
            guard let bytes = Self.storedBytes(body, range, prepared) else { return nil }
            data = bytes
        case .source(let source):
            guard let whole = source as? DataSource else { return nil }
            data = whole.remaining
        }
        return (CachedResponse(data: data, head: responseHead(response, url: prepared.url)), response.entry)
    }

    /// The body of `response`; `nil` when its stored body cannot be read (the store has
    /// dropped a corrupted entry).
    private func wholeBody(of response: PendingResponse, _ prepared: PreparedRequest) async throws -> Data? {
        switch response.body {
        case .stored(let body, let range): return Self.storedBytes(body, range, prepared)
        case .source(let source): return try await ResponseBody(source: source).collect()
        }
    }

    /// Bytes `range` of a stored body (none for `HEAD`); `nil` when it cannot be read, which
    /// only a corrupted body does (the store has removed it).
    private static func storedBytes(_ body: any StoredBody, _ range: Range<Int64>, _ prepared: PreparedRequest)
        -> Data?
    {
        if prepared.method == "HEAD" || range.isEmpty { return Data() }
        return (try? body.read(range.lowerBound...(range.upperBound - 1))).map { Data($0) }
    }

    /// Fetches `request` through the cache and returns as soon as the response head is
    /// known; the body streams (from the store, or from the origin while it is stored).
    public func bytes(for request: FetchRequest) async throws -> (CachedResponseHead, ResponseBody) {
        try await bytes(for: request, forceStore: false) { _ in }
    }

    /// ``bytes(for:)``, optionally storing what RFC 9111 would not (pages saved for offline
    /// reading), and handing `redirected` the head of each redirect followed.
    ///
    /// `follow` decides where a redirect leads before anything is sent there: given the URL
    /// redirected from and the `Location`, the URL to request, or `nil` to stop and return the
    /// redirect itself (its body unread: it is not stored).
    package func bytes(
        for request: FetchRequest, forceStore: Bool,
        follow: (_ from: URL, _ location: String) -> URL? = HTTPCache.redirectTarget,
        redirected: (CachedResponseHead) -> Void
    ) async throws -> (CachedResponseHead, ResponseBody) {
        try await following(request, forceStore: forceStore, follow: follow) { prepared in
            var response = try await respond(to: prepared)
            var source = bodySource(of: response, prepared)
            if source == nil {
                // Corrupted: the store dropped it; ask again.
                configuration.log("the stored body of \(prepared.urlString) was corrupted; fetching it again")
                response = try await respond(to: prepared)
                source = bodySource(of: response, prepared)
            }
            guard let source else {
                throw StorageError(.readFailed, "the stored body of \(prepared.urlString) could not be read twice")
            }
            return (responseHead(response, url: prepared.url), ResponseBody(source: source))
        } head: {
            $0.0
        } leaving: { hop in
            // A redirect's body is read to its end, so the hop is stored as through data(for:).
            for try await _ in hop.1 {}
            redirected(hop.0)
        }
    }

    /// Where `response`'s body comes from. A stored body's first block is read now, so that
    /// a corrupted one is noticed while the request can still be answered another way (`nil`;
    /// the store has dropped it).
    private func bodySource(of response: PendingResponse, _ prepared: PreparedRequest) -> (any BodySource)? {
        switch response.body {
        case .stored(let body, let range):
            let source = StoredSource(body, range: prepared.method == "HEAD" ? 0..<0 : range)
            // Only a corrupted body fails to read (the store has removed it).
            guard (try? source.readAhead()) != nil else { return nil }
            return source
        case .source(let body):
            return body
        }
    }

    /// Waits until background work (stale-while-revalidate revalidations) has finished.
    public func waitForBackgroundWork() async {
        await withCheckedContinuation { continuation in
            driver.whenBackgroundIdle { continuation.resume() }
        }
    }

    /// The counters since this instance was created.
    public var statistics: CacheStatistics { state.withLock { $0.statistics } }

    /// The rules in force: ``Configuration/rules`` followed by those a manifest added.
    public var rules: [CacheRule] { configuration.rules + state.withLock { $0.manifestRules } }

    /// Runs one request (and its redirects, when followed), counting outcomes and reporting
    /// an event for each. `leaving` is given each response left for the next hop; a response
    /// from the origin is stored only once its body has been read to the end.
    private func following<Result>(
        _ request: FetchRequest, forceStore: Bool, follow: (URL, String) -> URL? = HTTPCache.redirectTarget,
        _ body: (PreparedRequest) async throws -> Result,
        head: (Result) -> CachedResponseHead,
        leaving: (Result) async throws -> Void = { _ in }
    ) async throws -> Result {
        var current = request
        var redirects = 0
        while true {
            let started = eventStart
            let prepared: PreparedRequest
            let result: Result
            do {
                var ready = try prepare(current)
                ready.forceStore = forceStore
                prepared = ready
                result = try await body(prepared)
            } catch {
                state.withLock { $0.statistics.errors += 1 }
                configuration.onEvent?(
                    CacheEvent(
                        method: current.method, url: current.url.absoluteString, status: nil,
                        outcome: nil, cacheStatus: nil, error: String(describing: error),
                        duration: configuration.clock() - started, reasons: []))
                throw error
            }
            let answer = head(result)
            record(answer, method: prepared.method, url: prepared.urlString, started: started)
            if configuration.followsRedirects, configuration.maximumRedirects > 0,
                let next = redirected(
                    current, status: answer.statusCode, location: answer.fields[.location], follow: follow)
            {
                try await leaving(result)
                guard redirects < configuration.maximumRedirects else {
                    // As URLSession fails a redirect loop: the last redirect is no answer.
                    throw Self.tooManyRedirects(
                        request.url, limit: configuration.maximumRedirects, status: answer.statusCode,
                        from: current.url, to: next.url)
                }
                redirects += 1
                current = next
                continue
            }
            return result
        }
    }

    /// The error a request for `url` fails with when the redirect after the `limit`th (a
    /// `status` from `from`, leading to `to`) would be followed: a loop, most likely.
    /// `URLError.httpTooManyRedirects`, as URLSession's.
    static func tooManyRedirects(_ url: URL, limit: Int, status: Int, from: URL, to: URL) -> URLError {
        URLError(
            .httpTooManyRedirects,
            userInfo: [
                NSLocalizedDescriptionKey:
                    "more than \(limit) redirects; the last, \(status) from \(from.absoluteString), leads to "
                    + "\(to.absoluteString): the server's redirects may loop",
                NSURLErrorFailingURLErrorKey: url,
            ])
    }

    /// When a request began, for its event's duration: the clock is read only when
    /// ``Configuration/onEvent`` is set (a hit reads it once less).
    private var eventStart: Double { configuration.onEvent == nil ? 0 : configuration.clock() }

    /// Counts `answer` in the statistics and tells ``Configuration/onEvent`` about it.
    private func record(_ answer: CachedResponseHead, method: String, url: String, started: Double) {
        state.withLock { $0.statistics.count(answer.outcome) }
        configuration.onEvent?(
            CacheEvent(
                method: method, url: url, status: answer.statusCode, outcome: answer.outcome,
                cacheStatus: answer.cacheStatus.fieldValue, error: nil, duration: configuration.clock() - started,
                reasons: answer.reasons))
    }

    /// Where a redirect from `base` with `location` leads: an `http` or `https` URL, or `nil`.
    package static func redirectTarget(_ base: URL, _ location: String) -> URL? {
        guard let target = URL(string: location, relativeTo: base)?.absoluteURL,
            ["http", "https"].contains(target.scheme?.lowercased() ?? "")
        else { return nil }
        return target
    }

    /// The request a redirect leads to (RFC 9110 §15.4), or `nil` when `response` is not
    /// one to follow (or `follow` does not lead anywhere).
    private func redirected(
        _ request: FetchRequest, status: Int, location: String?, follow: (URL, String) -> URL?
    ) -> FetchRequest? {
        let base = request.url
        guard [301, 302, 303, 307, 308].contains(status), let location, let target = follow(base, location) else {
            return nil
        }
        var next = request
        next.url = target
        let method = request.method.uppercased()
        if (status == 303 && method != "HEAD") || ([301, 302].contains(status) && method == "POST") {
            next.method = "GET"
            next.body = nil
            next.hasBodyStream = false
            next.fields.removeAll(namedAnyOf: [.contentType, .contentLength, .contentEncoding])
        }
        if target.host != base.host || target.scheme != base.scheme || target.port != base.port {
            next.fields.removeAll(namedAnyOf: [.authorization, .cookie])
        }
        return next
    }
}
