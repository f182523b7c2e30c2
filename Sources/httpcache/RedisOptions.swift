import CacheStorage
import CacheStorageRedis

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

    /// The store's Redis figures in the Prometheus text format.
    static func metricsText(_ metrics: RedisMetrics) -> String {
        """
        # HELP httpcache_redis_round_trips_total Pipelines sent to Redis.
        # TYPE httpcache_redis_round_trips_total counter
        httpcache_redis_round_trips_total \(metrics.roundTrips)
        # HELP httpcache_redis_errors_total Redis round trips that failed (no connection, an error reply).
        # TYPE httpcache_redis_errors_total counter
        httpcache_redis_errors_total \(metrics.errors)
        # HELP httpcache_redis_timeouts_total Redis round trips given up after the command timeout.
        # TYPE httpcache_redis_timeouts_total counter
        httpcache_redis_timeouts_total \(metrics.timeouts)
        # HELP httpcache_redis_round_trip_seconds_mean The mean time of a Redis round trip.
        # TYPE httpcache_redis_round_trip_seconds_mean gauge
        httpcache_redis_round_trip_seconds_mean \(metrics.meanRoundTrip)
        # HELP httpcache_redis_round_trip_seconds_max The slowest Redis round trip.
        # TYPE httpcache_redis_round_trip_seconds_max gauge
        httpcache_redis_round_trip_seconds_max \(metrics.slowestRoundTrip)
        # HELP httpcache_redis_invalidations_received_total Invalidations other caches published.
        # TYPE httpcache_redis_invalidations_received_total counter
        httpcache_redis_invalidations_received_total \(metrics.invalidationsReceived)
        # HELP httpcache_redis_invalidations_sent_total Invalidations published to other caches.
        # TYPE httpcache_redis_invalidations_sent_total counter
        httpcache_redis_invalidations_sent_total \(metrics.invalidationsSent)
        # HELP httpcache_redis_collapsed_total Misses that waited for another cache's origin request.
        # TYPE httpcache_redis_collapsed_total counter
        httpcache_redis_collapsed_total \(metrics.collapsedAcrossNodes)

        """
    }
}
