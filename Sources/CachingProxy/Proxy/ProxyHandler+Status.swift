#if os(Linux)
import CacheStorage
import CacheSystem
import Foundation

/// The status page (`/_httpcache/status`) and its figures (`/_httpcache/status.json`).
extension ProxyHandler {
    static let statusPath = adminPrefix + "status"
    static let statusJSONPath = adminPrefix + "status.json"

    /// Seconds the status page's rates and latencies cover.
    static let recentSeconds = 10

    /// Once a second: the history takes the second's counts, the busiest targets halve each
    /// minute.
    func tickStatus() {
        let second = Int(configuration.clock())
        metrics.history.tick(second: second, totals: metrics.statusTotals)
        metrics.busiest.tick(second: second)
    }

    /// The figures now.
    func status() -> ProxyStatus {
        let now = configuration.clock()
        let end = Int(now) - 1
        let window = metrics.history.window(endingAt: end)
        let totals = metrics.statusTotals
        let count = window.count
        let recent = (count - Self.recentSeconds)..<count
        let recentTotals = window.totals(over: recent)
        let lastFiveMinutes = window.totals(over: (count - 300)..<count)
        let seconds = Double(Self.recentSeconds)
        let lastError = metrics.lastOriginError.withLock { $0 }
        let stored = configuration.storeTotals?() ?? store.totals()
        func ratio(_ part: Int, _ whole: Int) -> Double? { whole == 0 ? nil : Double(part) / Double(whole) }
        // Loops rather than `(0..<count).map`: a debug build maps a range in the standard
        // library's unspecialized code, with a type-metadata lookup per element, and under
        // ThreadSanitizer each is a process-wide lock: the hour's ten series (36,000 elements)
        // kept a status.json from answering within 10 s while other tests ran.
        func series(_ field: KeyPath<StatusHistory.Totals, Int>) -> [Int] {
            var values: [Int] = []
            values.reserveCapacity(count)
            for offset in 0..<count { values.append(window.totals(at: offset)[keyPath: field]) }
            return values
        }
        func percentiles(_ quantile: Double, _ kind: StatusHistory.Kind) -> [Int?] {
            var values: [Int?] = []
            values.reserveCapacity(count)
            for offset in 0..<count { values.append(window.percentile(quantile, kind, over: offset..<(offset + 1))) }
            return values
        }
        return ProxyStatus(
            version: CachingProxy.version, name: configuration.name, time: now,
            uptimeSeconds: MonotonicClock.seconds() - startedAt,
            connectionsOpen: (serverStatistics.withLock { $0 }?() ?? HTTPServer.Statistics()).connectionsOpen,
            entries: stored.entries,
            totals: ProxyStatus.Totals(
                requests: totals.requests, hits: totals.hits, misses: totals.misses,
                errors: metrics.total(.error), hitRatio: ratio(totals.hits, totals.hits + totals.misses),
                bytesFromCache: totals.bytesFromCache, bytesFromOrigin: totals.bytesFromOrigin,
                originRequests: totals.originRequests, originErrors: totals.originErrors),
            recent: ProxyStatus.Recent(
                seconds: Self.recentSeconds, requestsPerSecond: Double(recentTotals.requests) / seconds,
                hitRatio: ratio(recentTotals.hits, recentTotals.hits + recentTotals.misses),
                bytesFromCachePerSecond: Double(recentTotals.bytesFromCache) / seconds,
                bytesFromOriginPerSecond: Double(recentTotals.bytesFromOrigin) / seconds,
                originErrorsPerSecond: Double(recentTotals.originErrors) / seconds,
                hitLatency: ProxyStatus.Latency(
                    p50Microseconds: window.percentile(0.5, .hit, over: recent),
                    p99Microseconds: window.percentile(0.99, .hit, over: recent)),
                missLatency: ProxyStatus.Latency(
                    p50Microseconds: window.percentile(0.5, .miss, over: recent),
                    p99Microseconds: window.percentile(0.99, .miss, over: recent))),
            tiers: tiers(stored),
            busiest: metrics.busiest.top(10).map {
                ProxyStatus.BusyTarget(target: $0.target, count: $0.count, error: $0.error)
            },
            origin: ProxyStatus.Origin(
                errorRate: ratio(lastFiveMinutes.originErrors, lastFiveMinutes.originRequests),
                lastError: lastError?.text, lastErrorTime: lastError?.time),
            redis: redis(),
            history: ProxyStatus.History(
                end: end, seconds: count, requests: series(\.requests), hits: series(\.hits),
                misses: series(\.misses), originErrors: series(\.originErrors),
                bytesFromCache: series(\.bytesFromCache), bytesFromOrigin: series(\.bytesFromOrigin),
                hitP50: percentiles(0.5, .hit), hitP99: percentiles(0.99, .hit),
                missP50: percentiles(0.5, .miss), missP99: percentiles(0.99, .miss)))
    }

    /// The store's tiers, from the totals the metrics export (`all`: the store's, or with a
    /// shared store its local tier's).
    private func tiers(_ all: StoreTotals) -> [ProxyStatus.Tier] {
        if configuration.storeTotals != nil {
            return [
                ProxyStatus.Tier(
                    name: "redis-local", entries: all.entries, bodyBytes: all.bodyBytes, capacityBytes: nil)
            ]
        }
        guard let memory else {
            return [ProxyStatus.Tier(name: "store", entries: all.entries, bodyBytes: all.bodyBytes, capacityBytes: nil)]
        }
        let memoryTier = store === memory ? all : memory.totals()
        var tiers = [
            ProxyStatus.Tier(
                name: "memory", entries: memoryTier.entries, bodyBytes: memoryTier.bodyBytes,
                capacityBytes: configuration.memoryCapacity)
        ]
        if store !== memory {
            tiers.append(
                ProxyStatus.Tier(
                    name: "disk", entries: all.entries, bodyBytes: all.bodyBytes,
                    capacityBytes: configuration.diskCapacity))
        }
        return tiers
    }

    /// The Redis figures of the store's metrics; `nil` without them.
    private func redis() -> ProxyStatus.Redis? {
        guard let more = configuration.storeMetrics?() else { return nil }
        func value(_ name: String) -> Double? { more.first { $0.name == name }?.samples.first?.value }
        guard let roundTrips = value("httpcache_redis_round_trips_total") else { return nil }
        return ProxyStatus.Redis(
            roundTrips: Int(roundTrips), errors: Int(value("httpcache_redis_errors_total") ?? 0),
            timeouts: Int(value("httpcache_redis_timeouts_total") ?? 0),
            meanRoundTripSeconds: value("httpcache_redis_round_trip_seconds_mean") ?? 0,
            slowestRoundTripSeconds: value("httpcache_redis_round_trip_seconds_max") ?? 0)
    }

    /// The body and `Content-Type` of a status path.
    func statusDocument(_ path: String) -> (contentType: String, body: [UInt8]) {
        let status = status()
        if path == Self.statusJSONPath { return ("application/json", status.jsonText()) }
        return ("text/html; charset=utf-8", Array(StatusPage.html(status, jsonPath: Self.statusJSONPath).utf8))
    }

    /// Starts the once-a-second tick of the status history; it stops with
    /// ``stopStatusTimer()`` or when the handler is released.
    func startStatusTimer() { StatusTicker.add(self) }

    func stopStatusTimer() { StatusTicker.remove(self) }
}

/// The once-a-second tick of every proxy's status history in the process: one timer for all
/// of them, made with the first proxy and never cancelled, rather than a dispatch timer made
/// and cancelled for each proxy (a program, or a test run, may make and drop hundreds).
private enum StatusTicker {
    private final class Entry: Sendable {
        weak let handler: ProxyHandler?
        init(_ handler: ProxyHandler) { self.handler = handler }
    }

    private static let handlers = Locked<[ObjectIdentifier: Entry]>([:])
    private static let timer = Locked<(any DispatchSourceTimer)?>(nil)

    static func add(_ handler: ProxyHandler) {
        handlers.withLock { $0[ObjectIdentifier(handler)] = Entry(handler) }
        timer.withLock { timer in
            guard timer == nil else { return }
            let made = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "httpcache.status.tick"))
            made.schedule(deadline: .now() + 1, repeating: 1, leeway: .milliseconds(50))
            made.setEventHandler { tick() }
            made.activate()
            timer = made
        }
    }

    static func remove(_ handler: ProxyHandler) {
        _ = handlers.withLock { $0.removeValue(forKey: ObjectIdentifier(handler)) }
    }

    private static func tick() {
        let live = handlers.withLock { $0.values.compactMap(\.handler) }
        for handler in live { handler.tickStatus() }
    }
}
#endif
