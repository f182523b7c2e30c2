import CacheSemantics
import CacheSystem
import Foundation
import HTTPCaching
import LoopbackOrigin

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The transport suite: HTTPCache.data(for:) misses and hits through each transport, in one run
// against one loopback origin, 1 KiB bodies. A miss (`no-store`, so every request reaches the
// origin) costs the transport's round trip; a hit never touches the transport, so its figure
// shows what the transport costs a process that merely holds it. The cases alternate in three
// rounds and the median of the round medians is reported.
//   TRANSPORT_BENCH_REQUESTS=500   timed requests per case and round

/// Runs the suite and prints its lines.
func runTransportBenchmarks() async throws {
    let count = ProcessInfo.processInfo.environment["TRANSPORT_BENCH_REQUESTS"].flatMap(Int.init) ?? 500
    let origin = try LoopbackOrigin()
    defer { origin.stop() }
    let body = [UInt8](repeating: 120, count: 1024)
    origin.route("/miss") { _ in LoopbackOrigin.Response(headers: [("Cache-Control", "no-store")], body: body) }
    origin.route("/hit") { _ in LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=3600")], body: body) }
    print("   \(count) sequential requests per case and round, 3 rounds, 1 KiB body, origin \(origin.baseURL)")
    print("   load average: \(loadAverage())")

    var transports: [(String, any OriginTransport)] = [
        ("URLSessionTransport", URLRequestTransport(URLSessionTransport()))
    ]
    #if os(Linux)
    transports.insert(("HTTPClientTransport", HTTPClientTransport()), at: 0)
    #endif
    var medians: [String: [Double]] = [:]
    for _ in 0..<3 {
        for (name, transport) in transports {
            var configuration = HTTPCache.Configuration.memoryOnly
            configuration.log = { _ in }
            let cache = try HTTPCache(configuration: configuration, transport: transport)
            for path in ["/miss", "/hit"] {
                let request = URLRequest(url: origin.url(path))
                for _ in 0..<50 { blackHole(try await cache.data(for: request)) }
                var samples: [Double] = []
                samples.reserveCapacity(count)
                for _ in 0..<count {
                    let start = MonotonicClock.seconds()
                    let response = try await cache.data(for: request)
                    samples.append(MonotonicClock.seconds() - start)
                    guard response.data.count == body.count, response.outcome == (path == "/hit" ? .hit : .miss)
                    else { throw TransportBenchmarkFailure(description: "\(name) \(path): \(response.outcome)") }
                }
                samples.sort()
                medians["\(name) \(path)", default: []].append(samples[samples.count / 2])
            }
        }
    }
    for (name, _) in transports {
        for path in ["/miss", "/hit"] {
            let rounds = (medians["\(name) \(path)"] ?? []).sorted()
            let label = "data(for:) \(path == "/miss" ? "miss" : "hit "), \(name)".padding(
                toLength: 44, withPad: " ", startingAt: 0)
            let figures = rounds.map { String(format: "%.1f", $0 * 1e6) }.joined(separator: ", ")
            print(
                "\(label) median \(String(format: "%7.1f", rounds[rounds.count / 2] * 1e6)) µs   (rounds: \(figures))")
        }
    }
}

private struct TransportBenchmarkFailure: Error, CustomStringConvertible {
    var description: String
}
