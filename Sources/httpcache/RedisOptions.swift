import CacheStorage
import CacheStorageRedis

#if os(Linux)
import CachingProxy
#endif

/// The options that put the cache on a shared Redis tier, for `serve` and every command that
/// opens the cache: `--redis URL` or `--redis-cluster HOST:PORT,...`, `--redis-prefix P`,
/// `--redis-timeout MS`, `--local-memory BYTES`, `--redis-required`.
struct RedisOptions: Sendable {
    static let specs: [OptionSpec] = [
        .value("--redis"), .value("--redis-cluster"), .value("--redis-prefix"), .value("--redis-timeout"),
        .value("--local-memory"), .flag("--redis-required"),
    ]

    static let help = """
          --redis URL             share the cache through Redis:
                                  redis://[user:password@]HOST:PORT[/DB]
          --redis-cluster LIST    share it through a Redis Cluster: HOST:PORT[,HOST:PORT...]
          --redis-prefix P        put P before every Redis key (default httpcache:)
          --redis-timeout MS      a Redis command slower than this is given up (default 50)
          --local-memory BYTES    the local tier in front of Redis (0: none)
          --redis-required        exit when Redis cannot be reached at start
        """

    /// `nil` when neither `--redis` nor `--redis-cluster` was given.
    var configuration: RedisConfiguration?
    var localMemory: Int64?
    var required: Bool

    init(_ arguments: ParsedArguments) throws(Failure) {
        let command = arguments.command
        required = arguments.has("--redis-required")
        switch (arguments.value("--redis"), arguments.value("--redis-cluster")) {
        case (let url?, nil):
            do {
                configuration = try RedisConfiguration(url: url)
            } catch {
                throw .usage(command, error.description)
            }
        case (nil, let list?):
            do {
                configuration = try RedisConfiguration(clusterNodes: list)
            } catch {
                throw .usage(command, error.description)
            }
        case (_?, _?): throw .usage(command, "give either --redis URL or --redis-cluster LIST, not both")
        case (nil, nil):
            configuration = nil
            for option in ["--redis-prefix", "--redis-timeout", "--local-memory"] where arguments.value(option) != nil {
                throw .usage(command, "\(option) needs --redis URL or --redis-cluster LIST")
            }
            if required { throw .usage(command, "--redis-required needs --redis URL or --redis-cluster LIST") }
            localMemory = nil
            return
        }
        if let prefix = arguments.value("--redis-prefix") { configuration?.keyPrefix = prefix }
        if let text = arguments.value("--redis-timeout") {
            guard let milliseconds = Double(text), milliseconds > 0 else {
                throw .usage(command, "--redis-timeout needs a number of milliseconds such as 50")
            }
            configuration?.commandTimeout = milliseconds / 1000
        }
        if let text = arguments.value("--local-memory") {
            guard let value = ServeCommand.byteCount(text) else {
                throw .usage(command, "--local-memory needs a size such as 64M, or 0 for none")
            }
            localMemory = value
        }
    }

    /// The shared store, or `nil` without Redis options. When Redis does not answer now:
    /// with `--redis-required` (or when `mustReach`, for commands that only read the store) a
    /// failure; else one line on stderr, and the store goes on without Redis until it is back.
    func openStore(
        defaultLocalMemory: Int64, listens: Bool, mustReach: Bool, log: @escaping @Sendable (String) -> Void
    ) throws(Failure) -> SharedStore? {
        guard var configuration else { return nil }
        configuration.log = log
        let redis = RedisStore(configuration)
        do {
            try redis.checkConnection()
        } catch {
            if required || mustReach { throw Failure(.failure, error.message) }
            log(
                "\(error.message); going on without the shared tier until Redis answers (--redis-required: exit instead)"
            )
            // Said once, here: the store logs only Redis' return.
            redis.assumeUnreachable()
        }
        return SharedStore(redis: redis, localCapacity: localMemory ?? defaultLocalMemory, listens: listens)
    }

    #if os(Linux)
    /// The store's Redis figures for the proxy's metrics page.
    static func metrics(_ metrics: RedisMetrics) -> [CachingProxy.Metric] {
        [
            .init(
                "httpcache_redis_round_trips_total", .counter, "Pipelines sent to Redis.", Double(metrics.roundTrips)),
            .init(
                "httpcache_redis_errors_total", .counter,
                "Redis round trips that failed (no connection, an error reply).", Double(metrics.errors)),
            .init(
                "httpcache_redis_errors_by_kind_total", .counter,
                "Redis failures by kind: timeout, connection, protocol, or an error reply's first word (NOPERM, OOM, CLUSTERDOWN, ...).",
                samples: metrics.errorsByKind.sorted { $0.key < $1.key }.map {
                    .init(labels: [("kind", $0.key)], Double($0.value))
                }),
            .init(
                "httpcache_redis_timeouts_total", .counter, "Redis round trips given up after the command timeout.",
                Double(metrics.timeouts)),
            .init(
                "httpcache_redis_round_trip_seconds_mean", .gauge, "The mean time of a Redis round trip.",
                metrics.meanRoundTrip),
            .init(
                "httpcache_redis_round_trip_seconds_max", .gauge, "The slowest Redis round trip.",
                metrics.slowestRoundTrip),
            .init(
                "httpcache_redis_invalidations_received_total", .counter, "Invalidations other caches published.",
                Double(metrics.invalidationsReceived)),
            .init(
                "httpcache_redis_invalidations_sent_total", .counter, "Invalidations published to other caches.",
                Double(metrics.invalidationsSent)),
            .init(
                "httpcache_redis_collapsed_total", .counter, "Misses that waited for another cache's origin request.",
                Double(metrics.collapsedAcrossNodes)),
            .init(
                "httpcache_redis_loop_lookups_total", .counter,
                "Lookups the event loops sent on connections of their own, several to a round trip.",
                Double(metrics.lookupsOnLoops)),
        ]
    }
    #endif
}
