#if os(Linux)
import Foundation
import CacheSemantics

/// What `GET /_httpcache/status.json` answers: the figures of the status page, for scripts and
/// `httpcache top`. Counts are since the proxy started unless a field says otherwise; times
/// are seconds since 1970; latencies are microseconds.
///
/// Requests are the client requests the cache answered: hits, misses and the proxy's own
/// errors (not the proxy's own paths, not `PURGE`). Hits are `hit` and `stale`; misses are
/// `miss`, `revalidated` and `pass` (the outcomes of `httpcache_requests_total`).
public struct ProxyStatus: Codable, Sendable, Equatable {
    /// The proxy's version (``CachingProxy/version``).
    public var version: String
    /// The name in its `Cache-Status` and `Via` fields.
    public var name: String
    /// When the figures were taken.
    public var time: Double
    /// Seconds since the proxy started.
    public var uptimeSeconds: Double
    /// Client connections open now.
    public var connectionsOpen: Int
    /// Stored responses now (every tier).
    public var entries: Int
    /// Counts since the proxy started.
    public var totals: Totals
    /// Rates and latencies over the last ``Recent/seconds`` complete seconds.
    public var recent: Recent
    /// What the store holds, by tier.
    public var tiers: [Tier]
    /// The busiest request-targets of the last minutes, busiest first (at most 10).
    public var busiest: [BusyTarget]
    /// The origin's health.
    public var origin: Origin
    /// The shared Redis tier's figures; `nil` without one.
    public var redis: Redis?
    /// The last hour, second by second.
    public var history: History

    /// Counts since the proxy started.
    public struct Totals: Codable, Sendable, Equatable {
        public var requests: Int
        public var hits: Int
        public var misses: Int
        /// Requests the proxy answered with an error of its own (`4xx`/`5xx` it made).
        public var errors: Int
        /// hits / (hits + misses); `nil` before either.
        public var hitRatio: Double?
        /// Body bytes sent to clients from the store.
        public var bytesFromCache: Int
        /// Body bytes sent to clients as they came from the origin.
        public var bytesFromOrigin: Int
        public var originRequests: Int
        /// Origin requests that got no complete response.
        public var originErrors: Int
    }

    /// Rates and latencies over a short recent window.
    public struct Recent: Codable, Sendable, Equatable {
        /// The window's length (the seconds before the current one).
        public var seconds: Int
        public var requestsPerSecond: Double
        /// hits / (hits + misses) in the window; `nil` without either.
        public var hitRatio: Double?
        public var bytesFromCachePerSecond: Double
        public var bytesFromOriginPerSecond: Double
        public var originErrorsPerSecond: Double
        /// Hits: p50 and p99 from the request reaching the proxy's handler to its response head.
        public var hitLatency: Latency
        /// Misses, the same way (the origin's time included).
        public var missLatency: Latency
    }

    /// Two percentiles, each the upper bound of the histogram bucket that holds it (buckets
    /// of 50 µs … 10 s in steps of 1, 2.5, 5); `nil` without requests.
    public struct Latency: Codable, Sendable, Equatable {
        public var p50Microseconds: Int?
        public var p99Microseconds: Int?
    }

    /// One tier of the store.
    public struct Tier: Codable, Sendable, Equatable {
        /// `memory`, `disk` (what the disk holds plus entries kept in memory only), or
        /// `redis-local` (the local tier in front of Redis).
        public var name: String
        public var entries: Int
        public var bodyBytes: Int64
        /// The tier's capacity (`--memory`, `--disk`); `nil` when not known here.
        public var capacityBytes: Int64?
    }

    /// A request-target and about how often it was asked for lately (counts halve every
    /// minute; a count may exceed the true one by up to `error`).
    public struct BusyTarget: Codable, Sendable, Equatable {
        public var target: String
        public var count: Int
        public var error: Int
    }

    /// How the origin answers.
    public struct Origin: Codable, Sendable, Equatable {
        /// Origin errors / origin requests over the last 5 minutes; `nil` without requests.
        public var errorRate: Double?
        /// The last origin error, as logged; `nil` when there was none.
        public var lastError: String?
        /// When it happened.
        public var lastErrorTime: Double?
    }

    /// The Redis figures `httpcache_redis_*` exports.
    public struct Redis: Codable, Sendable, Equatable {
        public var roundTrips: Int
        public var errors: Int
        public var timeouts: Int
        public var meanRoundTripSeconds: Double
        public var slowestRoundTripSeconds: Double
    }

    /// Per-second series, oldest first, each ``History/seconds`` long; the last is the second
    /// ending at ``History/end``. Latencies are `null` in seconds without such requests.
    public struct History: Codable, Sendable, Equatable {
        /// The last second (since 1970).
        public var end: Int
        public var seconds: Int
        public var requests: [Int]
        public var hits: [Int]
        public var misses: [Int]
        public var originErrors: [Int]
        public var bytesFromCache: [Int]
        public var bytesFromOrigin: [Int]
        public var hitP50: [Int?]
        public var hitP99: [Int?]
        public var missP50: [Int?]
        public var missP99: [Int?]
    }
}

extension ProxyStatus {
    /// The text of `status.json`: `JSONEncoder`'s (keys sorted) for all but the history, whose
    /// series, 36,000 numbers for the hour, are written here. `JSONEncoder` took ~50 ms of a
    /// release build's CPU for them (half a second in a debug build): nearly all of a status
    /// poll's cost, paid every interval of `httpcache top` and every 2 s of an open status page.
    func jsonText() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoded with no seconds, the history is one known text, replaced by the whole one. The
        // text cannot occur inside a string value, where every quote is escaped.
        var shell = self
        shell.history = History(
            end: history.end, seconds: 0, requests: [], hits: [], misses: [], originErrors: [], bytesFromCache: [],
            bytesFromOrigin: [], hitP50: [], hitP99: [], missP50: [], missP99: [])
        let name = Array("\"history\":".utf8)
        guard var json = (try? encoder.encode(shell)).map(Array.init), let empty = try? encoder.encode(shell.history),
            let range = json.firstRange(of: name + Array(empty))
        else { return Array("{}".utf8) }
        json.replaceSubrange(range, with: name + history.jsonText())
        return json
    }
}

extension ProxyStatus.History {
    /// This history as a JSON object (keys sorted, as `JSONEncoder` writes them).
    fileprivate func jsonText() -> [UInt8] {
        var text: [UInt8] = []
        text.reserveCapacity(64 + 10 * seconds * 4)
        func name(_ name: String) {
            text.append(text.isEmpty ? UInt8(ascii: "{") : UInt8(ascii: ","))
            text += Array("\"\(name)\":".utf8)
        }
        // By index, each number written digit by digit: in a debug build `enumerated()` makes a
        // tuple's type metadata for every element and `String(value).utf8` is appended through
        // unspecialized code, and under ThreadSanitizer each metadata lookup takes a
        // process-wide lock: the hour's 36,000 values kept a status.json from answering within
        // 10 s while other tests ran.
        let null = Array("null".utf8)
        func decimal(_ value: Int) {
            text += [UInt8](unsafeUninitializedCapacity: 20) { buffer, count in
                var writer = TextWriter(buffer)
                writer.append(value)
                count = writer.count
            }
        }
        func series(_ key: String, _ values: [Int?]) {
            name(key)
            text.append(UInt8(ascii: "["))
            for index in values.indices {
                if index > 0 { text.append(UInt8(ascii: ",")) }
                if let value = values[index] { decimal(value) } else { text += null }
            }
            text.append(UInt8(ascii: "]"))
        }
        series("bytesFromCache", bytesFromCache)
        series("bytesFromOrigin", bytesFromOrigin)
        name("end")
        text += String(end).utf8
        series("hitP50", hitP50)
        series("hitP99", hitP99)
        series("hits", hits)
        series("missP50", missP50)
        series("missP99", missP99)
        series("misses", misses)
        series("originErrors", originErrors)
        series("requests", requests)
        name("seconds")
        text += String(seconds).utf8
        text.append(UInt8(ascii: "}"))
        return text
    }
}
#endif
