#if os(Linux)
import CacheSystem
import CacheStorage
import Synchronization

/// What the proxy counts, for ``CachingProxy/metricsText``.
final class Metrics: Sendable {
    /// How a request was answered.
    enum Outcome: Int, CaseIterable {
        case hit, stale, revalidated, miss, pass, error, purge, admin
        var label: String { String(describing: self) }
    }

    /// Upper bounds of the origin latency buckets, in seconds.
    static let latencyBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private let hits = Atomic<Int>(0)
    private let staleHits = Atomic<Int>(0)
    private let revalidated = Atomic<Int>(0)
    private let misses = Atomic<Int>(0)
    private let passes = Atomic<Int>(0)
    private let errors = Atomic<Int>(0)
    private let purges = Atomic<Int>(0)
    private let adminRequests = Atomic<Int>(0)
    let bytesFromCache = Atomic<Int>(0)
    let bytesFromOrigin = Atomic<Int>(0)
    let originRequests = Atomic<Int>(0)
    /// Origin requests an event loop sent itself, on a kept-alive connection.
    let originRequestsOnLoop = Atomic<Int>(0)
    let originErrors = Atomic<Int>(0)
    let collapsed = Atomic<Int>(0)
    let stored = Atomic<Int>(0)
    let storeRefusals = Atomic<Int>(0)
    /// The last hour per second (the status page), fed from ``statusTotals`` each second.
    let history = StatusHistory()
    /// The busiest request-targets of late (the status page).
    let busiest = BusiestTargets()
    /// The last origin error and when it happened (seconds since 1970).
    let lastOriginError = Locked<(text: String, time: Double)?>(nil)
    /// Per bucket (the last one above every bound), and the sum in seconds.
    private let latency = Locked((counts: [Int](repeating: 0, count: Metrics.latencyBounds.count + 1), sum: 0.0))

    func count(_ outcome: Outcome) {
        switch outcome {
        case .hit: hits.add(1, ordering: .relaxed)
        case .stale: staleHits.add(1, ordering: .relaxed)
        case .revalidated: revalidated.add(1, ordering: .relaxed)
        case .miss: misses.add(1, ordering: .relaxed)
        case .pass: passes.add(1, ordering: .relaxed)
        case .error: errors.add(1, ordering: .relaxed)
        case .purge: purges.add(1, ordering: .relaxed)
        case .admin: adminRequests.add(1, ordering: .relaxed)
        }
    }

    /// How many requests had `outcome`.
    func total(_ outcome: Outcome) -> Int {
        switch outcome {
        case .hit: hits.load(ordering: .relaxed)
        case .stale: staleHits.load(ordering: .relaxed)
        case .revalidated: revalidated.load(ordering: .relaxed)
        case .miss: misses.load(ordering: .relaxed)
        case .pass: passes.load(ordering: .relaxed)
        case .error: errors.load(ordering: .relaxed)
        case .purge: purges.load(ordering: .relaxed)
        case .admin: adminRequests.load(ordering: .relaxed)
        }
    }

    /// Counts an origin request that got no complete response, and why.
    func originFailed(_ description: String, at time: Double) {
        originErrors.add(1, ordering: .relaxed)
        lastOriginError.withLock { $0 = (description, time) }
    }

    /// The counts the status history samples: requests are hits, misses and the proxy's own
    /// errors; hits are `hit` and `stale`; misses `miss`, `revalidated` and `pass`.
    var statusTotals: StatusHistory.Totals {
        let hits = total(.hit) + total(.stale)
        let misses = total(.miss) + total(.revalidated) + total(.pass)
        return StatusHistory.Totals(
            requests: hits + misses + total(.error), hits: hits, misses: misses,
            originRequests: originRequests.load(ordering: .relaxed),
            originErrors: originErrors.load(ordering: .relaxed),
            bytesFromCache: bytesFromCache.load(ordering: .relaxed),
            bytesFromOrigin: bytesFromOrigin.load(ordering: .relaxed))
    }

    /// Records the time an origin took to answer with its head.
    func recordOriginLatency(_ seconds: Double) {
        let bucket = Self.latencyBounds.firstIndex { seconds <= $0 } ?? Self.latencyBounds.count
        latency.withLock { latency in
            latency.counts[bucket] += 1
            latency.sum += seconds
        }
    }

    /// A label value as the text format writes it: backslash, double quote and line feed escaped.
    static func escaped(_ value: String) -> String {
        var escaped = ""
        for character in value {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    /// The Prometheus text exposition format (version 0.0.4).
    func text(
        store: StoreTotals, memory: StoreTotals?, promotions: (admitted: UInt64, refused: UInt64)? = nil,
        server: HTTPServer.Statistics, more: [CachingProxy.Metric] = []
    ) -> String {
        var lines: [String] = []
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(String, String)]) {
            lines.append("# HELP \(name) \(help)")
            lines.append("# TYPE \(name) \(type)")
            for (labels, value) in samples { lines.append("\(name)\(labels) \(value)") }
        }
        metric(
            "httpcache_requests_total", "counter", "Requests answered, by how the cache answered them.",
            Outcome.allCases.map { ("{outcome=\"\($0.label)\"}", String(total($0))) })
        metric(
            "httpcache_response_body_bytes_total", "counter", "Body bytes sent to clients, by where they came from.",
            [
                ("{source=\"cache\"}", String(bytesFromCache.load(ordering: .relaxed))),
                ("{source=\"origin\"}", String(bytesFromOrigin.load(ordering: .relaxed))),
            ])
        metric(
            "httpcache_origin_requests_total", "counter", "Requests sent to the origin.",
            [("", String(originRequests.load(ordering: .relaxed)))])
        metric(
            "httpcache_origin_requests_on_loop_total", "counter",
            "Requests sent to the origin by an event loop itself, on a kept-alive connection; the others went "
                + "through an origin thread (a new connection, a slow client).",
            [("", String(originRequestsOnLoop.load(ordering: .relaxed)))])
        metric(
            "httpcache_origin_errors_total", "counter", "Origin requests that got no complete response.",
            [("", String(originErrors.load(ordering: .relaxed)))])
        metric(
            "httpcache_collapsed_total", "counter",
            "Requests that waited for an identical one and were answered from what it stored.",
            [("", String(collapsed.load(ordering: .relaxed)))])
        metric(
            "httpcache_stored_total", "counter", "Responses from the origin stored whole.",
            [("", String(stored.load(ordering: .relaxed)))])
        metric(
            "httpcache_store_refusals_total", "counter",
            "Responses meant to be stored that the store refused: its write failed (see the log), or its index "
                + "was too far behind a slow disk to take them without the request waiting.",
            [("", String(storeRefusals.load(ordering: .relaxed)))])
        let (counts, sum) = latency.withLock { ($0.counts, $0.sum) }
        var cumulative = 0
        var buckets: [(String, String)] = []
        for (index, bound) in Self.latencyBounds.enumerated() {
            cumulative += counts[index]
            buckets.append(("_bucket{le=\"\(bound)\"}", String(cumulative)))
        }
        cumulative += counts[Self.latencyBounds.count]
        buckets.append(("_bucket{le=\"+Inf\"}", String(cumulative)))
        buckets.append(("_sum", String(sum)))
        buckets.append(("_count", String(cumulative)))
        metric(
            "httpcache_origin_latency_seconds", "histogram",
            "Time from sending a request to the origin to its response head.",
            buckets)
        var entries = [("{tier=\"all\"}", String(store.entries))]
        var bytes = [("{tier=\"all\"}", String(store.bodyBytes))]
        if let memory {
            entries.append(("{tier=\"memory\"}", String(memory.entries)))
            bytes.append(("{tier=\"memory\"}", String(memory.bodyBytes)))
        }
        metric("httpcache_store_entries", "gauge", "Stored responses.", entries)
        metric("httpcache_store_body_bytes", "gauge", "Bytes of stored bodies.", bytes)
        if let promotions {
            metric(
                "httpcache_memory_promotions_total", "counter",
                "Bodies read from the disk or Redis tier and offered to the memory tier: admitted, or refused as used "
                    + "less lately than the entry they would have evicted (TinyLFU).",
                [
                    ("{result=\"admitted\"}", String(promotions.admitted)),
                    ("{result=\"refused\"}", String(promotions.refused)),
                ])
        }
        metric(
            "httpcache_connections_open", "gauge", "Client connections open.", [("", String(server.connectionsOpen))])
        metric(
            "httpcache_connections_total", "counter", "Client connections, by what became of them.",
            [
                ("{state=\"accepted\"}", String(server.connectionsAccepted)),
                ("{state=\"refused\"}", String(server.connectionsRefused)),
            ])
        metric(
            "httpcache_requests_rejected_total", "counter",
            "Requests refused as malformed or over a limit (4xx/5xx before the cache saw them).",
            [("", String(server.requestsRejected))])
        metric(
            "httpcache_tls_handshakes_total", "counter",
            "TLS handshakes with clients: completed, or failed (refused, garbage, or not done within the header timeout).",
            [
                ("{result=\"completed\"}", String(server.tlsHandshakes)),
                ("{result=\"failed\"}", String(server.tlsHandshakesFailed)),
            ])
        metric(
            "httpcache_http2_connections_total", "counter", "Client connections that spoke HTTP/2.",
            [("", String(server.http2Connections))])
        metric(
            "httpcache_http2_streams_total", "counter",
            "HTTP/2 streams handed to the cache (each also counted in httpcache_requests_total).",
            [("", String(server.http2Streams))])
        metric(
            "httpcache_http2_goaways_sent_total", "counter",
            "GOAWAY frames sent to HTTP/2 clients, by error code (RFC 9113 §7: NO_ERROR on shutdown, reload and idle; ENHANCE_YOUR_CALM to floods).",
            Self.goAwayCodes.map { code, name in
                ("{code=\"\(name)\"}", String(server.http2GoAways[code, default: 0]))
            })
        for extra in more {
            metric(
                extra.name, extra.kind.rawValue, extra.help,
                extra.samples.map { sample in
                    let pairs = sample.labels.map { "\($0.name)=\"\(Self.escaped($0.value))\"" }
                    let labels = pairs.isEmpty ? "" : "{" + pairs.joined(separator: ",") + "}"
                    let value =
                        sample.value.rounded() == sample.value && abs(sample.value) < 1e15
                        ? String(Int64(sample.value)) : String(sample.value)
                    return (labels, value)
                })
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The HTTP/2 error codes (RFC 9113 §7) the server's GOAWAY frames carry, by name.
    private static let goAwayCodes: [(UInt32, String)] = [
        (0x0, "NO_ERROR"), (0x1, "PROTOCOL_ERROR"), (0x2, "INTERNAL_ERROR"), (0x3, "FLOW_CONTROL_ERROR"),
        (0x6, "FRAME_SIZE_ERROR"), (0x9, "COMPRESSION_ERROR"), (0xB, "ENHANCE_YOUR_CALM"),
    ]
}
#endif
