import CacheSemantics
import CacheSystem
import Foundation
import HTTPCaching
import LoopbackOrigin

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The http suite (issue 4): in one run, against a real loopback origin, 1,000 sequential
// requests each of
//   1. hits through `HTTPCache.data(for:)`,
//   2. hits through a plain URLSession with `CachingURLProtocol` installed,
//   3. requests through a URLSession with Foundation's `URLCache`,
//   4. loopback round trips with no cache,
// plus data(for:) hits from the disk tier (a memory tier of 0 bytes) and, as the floor a
// URLProtocol hit sits on, a bare URLProtocol answering from a dictionary;
// each request timed on its own with the monotonic clock after a warm-up, then the ratios.
// Target: a hit at least 10x faster than a loopback round trip.
//
// Environment knobs (for profiling; the defaults are the reported configuration):
//   HTTP_BENCH_REQUESTS=1000   timed requests per case
//   HTTP_BENCH_WARMUP=100      untimed requests before each case
//   HTTP_BENCH_ONLY=hit|disk|protocol|urlcache|roundtrip   run one case (protocol: with its
//                              dictionary-protocol floor)

/// The figures of one case: per-request times in nanoseconds.
private struct RequestTimes {
    var name: String
    var samples: [Double]
    var failures: Int
    var note: String?

    var mean: Double { samples.isEmpty ? .nan : samples.reduce(0, +) / Double(samples.count) }
    var p50: Double { percentile(0.5) }
    var p99: Double { percentile(0.99) }

    private func percentile(_ fraction: Double) -> Double {
        let sorted = samples.sorted()
        return sorted.isEmpty ? .nan : sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
    }

    /// Notes what the origin saw: `expected` requests, else a failed check.
    mutating func originSaw(_ seen: Int, expected: Int, _ note: String) {
        if seen == expected {
            self.note = note
        } else {
            failures += 1
            self.note = "origin saw \(seen) requests, expected \(expected)"
        }
    }

    /// Prints the figures and the note.
    func report() {
        print(line)
        if let note { print("     \(note)") }
    }

    var line: String {
        let padded = name.padding(toLength: 44, withPad: " ", startingAt: 0)
        var text =
            "\(padded) mean \(micro(mean)) µs/request   p50 \(micro(p50)) µs/request   p99 \(micro(p99)) µs/request"
            + "   (n=\(samples.count))"
        if failures > 0 { text += "   FAILED CHECKS: \(failures)" }
        return text
    }
}

/// Nanoseconds as microseconds, right-aligned.
private func micro(_ nanoseconds: Double) -> String {
    if nanoseconds.isNaN { return "     n/a" }
    let text = String(format: nanoseconds < 100_000 ? "%.2f" : "%.1f", nanoseconds / 1000)
    return String(repeating: " ", count: max(0, 8 - text.count)) + text
}

/// The monotonic clock (CLOCK_MONOTONIC), in nanoseconds.
@inline(__always)
private func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Runs `warmup` untimed then `count` timed calls of `operation`, one after another; `check`
/// runs outside the timed region and returns whether the result was what the case expects.
private func timeRequests<R>(
    _ name: String, count: Int, warmup: Int, afterWarmup: () -> Void = {}, _ operation: () async throws -> R,
    check: (R) -> Bool
) async throws -> RequestTimes {
    for _ in 0..<warmup { blackHole(try await operation()) }
    afterWarmup()
    var samples: [Double] = []
    samples.reserveCapacity(count)
    var failures = 0
    for _ in 0..<count {
        let start = now()
        let result = try await operation()
        let end = now()
        samples.append(Double(end - start))
        if !check(result) { failures += 1 }
    }
    return RequestTimes(name: name, samples: samples, failures: failures)
}

/// Times `a` and `b` in turn, one request of each at a time, `count` of each after `warmup` of
/// each.
private func timeAlternating<R>(
    _ a: (name: String, operation: () async throws -> R), _ b: (name: String, operation: () async throws -> R),
    count: Int, warmup: Int, checkA: (R) -> Bool, checkB: (R) -> Bool
) async throws -> (RequestTimes, RequestTimes) {
    for _ in 0..<warmup {
        blackHole(try await a.operation())
        blackHole(try await b.operation())
    }
    var samples: ([Double], [Double]) = ([], [])
    var failures = (0, 0)
    for _ in 0..<count {
        var start = now()
        let first = try await a.operation()
        samples.0.append(Double(now() - start))
        if !checkA(first) { failures.0 += 1 }
        start = now()
        let second = try await b.operation()
        samples.1.append(Double(now() - start))
        if !checkB(second) { failures.1 += 1 }
    }
    return (
        RequestTimes(name: a.name, samples: samples.0, failures: failures.0),
        RequestTimes(name: b.name, samples: samples.1, failures: failures.1)
    )
}

/// A response body and head from a URLSession.
private struct Fetched: @unchecked Sendable {
    var data: Data
    var response: HTTPURLResponse?
}

/// One request through `session`, the async way swift-corelibs-foundation offers.
private func fetch(_ session: URLSession, _ request: URLRequest) async throws -> Fetched {
    let (data, response) = try await session.data(for: request)
    return Fetched(data: data, response: response as? HTTPURLResponse)
}

private func temporaryDirectory(_ label: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory
        .appendingPathComponent("httpcache-bench-\(label)-\(ProcessInfo.processInfo.processIdentifier)-\(UUID())")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

private func ratio(_ numerator: RequestTimes?, _ denominator: RequestTimes?) -> String {
    guard let numerator, let denominator, !numerator.samples.isEmpty, !denominator.samples.isEmpty else {
        return "n/a"
    }
    return String(
        format: "%.1fx (mean)  %.1fx (p50)", numerator.mean / denominator.mean, numerator.p50 / denominator.p50)
}

/// Runs the suite and prints its lines. Returns whether the target was met.
@discardableResult
func runHTTPBenchmarks() async throws -> Bool {
    let environment = ProcessInfo.processInfo.environment
    let count = environment["HTTP_BENCH_REQUESTS"].flatMap(Int.init) ?? 1_000
    let warmup = environment["HTTP_BENCH_WARMUP"].flatMap(Int.init) ?? 100
    let only = environment["HTTP_BENCH_ONLY"]
    func runs(_ part: String) -> Bool { only == nil || only == part }

    let origin = try LoopbackOrigin()
    defer { origin.stop() }
    let body = [UInt8](repeating: 120, count: 1024)
    let cacheable = LoopbackOrigin.Response(
        status: 200, headers: [("Cache-Control", "max-age=3600"), ("ETag", "\"v1\"")], body: body)
    // One path per case, so the origin's count per path is the count of that case.
    for path in ["/hit", "/disk", "/protocol", "/urlcache", "/roundtrip"] { origin.route(path) { _ in cacheable } }

    var directories: [URL] = []
    defer { for directory in directories { try? FileManager.default.removeItem(at: directory) } }
    let cacheDirectory = try temporaryDirectory("httpcache")
    directories.append(cacheDirectory)
    var configuration = HTTPCache.Configuration()
    configuration.directory = cacheDirectory.path
    configuration.log = { _ in }
    let cache = try HTTPCache(configuration: configuration)

    print(
        "   \(count) sequential requests per case after \(warmup) warm-up requests, 1 KiB body, origin \(origin.baseURL)"
    )
    print("   load average: \(loadAverage())")

    // 1. Hits through data(for:).
    var hit: RequestTimes?
    if runs("hit") {
        let request = URLRequest(url: origin.url("/hit"))
        let primed = try await cache.data(for: request)
        guard primed.outcome == .miss, primed.data.count == body.count else {
            throw BenchmarkFailure("priming /hit gave \(primed.outcome) with \(primed.data.count) bytes")
        }
        var times = try await timeRequests("HTTPCache.data(for:) hit", count: count, warmup: warmup) {
            try await cache.data(for: request)
        } check: { result in
            result.outcome == .hit && result.data.count == body.count
        }
        times.originSaw(
            origin.count("/hit"), expected: 1,
            "origin saw 1 request (the priming one); every timed request was outcome .hit")
        let sample = try await cache.data(for: request)
        let names = sample.response.allHeaderFields.keys.compactMap { $0 as? String }.sorted()
        times.note! +=
            "\n     a hit's HTTPURLResponse has \(names.count) header fields (\(names.joined(separator: ", "))); "
            + "Cache-Status: \(sample.response.value(forHTTPHeaderField: "Cache-Status") ?? "none")"
        hit = times
        times.report()
    }

    // 1b. Hits through data(for:) from the disk tier: a cache whose memory tier holds nothing.
    var diskHit: RequestTimes?
    if runs("disk") {
        let directory = try temporaryDirectory("disk")
        directories.append(directory)
        var diskConfiguration = configuration
        diskConfiguration.directory = directory.path
        diskConfiguration.memoryCapacity = 0
        let diskCache = try HTTPCache(configuration: diskConfiguration)
        let request = URLRequest(url: origin.url("/disk"))
        _ = try await diskCache.data(for: request)
        var times = try await timeRequests("HTTPCache.data(for:) disk-tier hit", count: count, warmup: warmup) {
            try await diskCache.data(for: request)
        } check: { result in
            result.outcome == .hit && result.data.count == body.count
        }
        times.originSaw(
            origin.count("/disk"), expected: 1, "a memory tier of 0 bytes: every hit's body comes from the disk store")
        diskHit = times
        times.report()
    }

    // 2. Hits through a plain URLSession with CachingURLProtocol installed, against the floor
    // URLSession sets: a bare URLProtocol answering from a dictionary. Their requests alternate,
    // one of each in turn, so that the machine's ups and downs fall on both alike.
    var floorHit: RequestTimes?
    var protocolHit: RequestTimes?
    if runs("protocol") {
        let floorURL = origin.url("/floor")
        let response = HTTPURLResponse(
            url: floorURL, statusCode: 200, httpVersion: "HTTP/1.1",
            headerFields: ["Content-Length": String(body.count), "Cache-Control": "max-age=3600"])!
        DictionaryProtocol.answers.withLock { $0[floorURL] = (response, Data(body)) }
        let floorConfiguration = URLSessionConfiguration.ephemeral
        floorConfiguration.protocolClasses = [DictionaryProtocol.self]
        floorConfiguration.urlCache = nil
        let floorSession = URLSession(configuration: floorConfiguration)
        defer { floorSession.finishTasksAndInvalidate() }
        let floorRequest = URLRequest(url: floorURL)

        let cachingConfiguration = URLSessionConfiguration.ephemeral
        cachingConfiguration.useHTTPCache(cache)
        let cachingSession = URLSession(configuration: cachingConfiguration)
        defer { cachingSession.finishTasksAndInvalidate() }
        let cachingRequest = URLRequest(url: origin.url("/protocol"))
        _ = try await fetch(cachingSession, cachingRequest)

        var (floor, ours) = try await timeAlternating(
            ("URLSession + URLProtocol from a dictionary", { try await fetch(floorSession, floorRequest) }),
            ("URLSession + CachingURLProtocol hit", { try await fetch(cachingSession, cachingRequest) }),
            count: count, warmup: warmup
        ) { result in
            result.response?.statusCode == 200 && result.data.count == body.count
        } checkB: { result in
            let status = result.response?.value(forHTTPHeaderField: "Cache-Status") ?? ""
            return result.response?.statusCode == 200 && status.contains("hit") && result.data.count == body.count
        }
        floor.note = "no cache: the least a URLProtocol answer costs through URLSession"
        ours.originSaw(
            origin.count("/protocol"), expected: 1,
            "origin saw 1 request (the priming one); every timed response had Cache-Status ...hit")
        floorHit = floor
        protocolHit = ours
        floor.report()
        ours.report()
    }

    // 3. URLSession with Foundation's URLCache.
    var urlCache: RequestTimes?
    if runs("urlcache") {
        let directory = try temporaryDirectory("urlcache")
        directories.append(directory)
        let foundationCache = URLCache(memoryCapacity: 64 << 20, diskCapacity: 256 << 20, diskPath: directory.path)
        let sessionConfiguration = URLSessionConfiguration.default
        sessionConfiguration.urlCache = foundationCache
        sessionConfiguration.requestCachePolicy = .useProtocolCachePolicy
        let session = URLSession(configuration: sessionConfiguration)
        defer { session.finishTasksAndInvalidate() }
        let request = URLRequest(url: origin.url("/urlcache"))
        _ = try await fetch(session, request)
        var before = 0
        var times = try await timeRequests(
            "URLSession + URLCache", count: count, warmup: warmup, afterWarmup: { before = origin.count("/urlcache") }
        ) {
            try await fetch(session, request)
        } check: { result in
            result.response?.statusCode == 200 && result.data.count == body.count
        }
        let timedAtOrigin = origin.count("/urlcache") - before
        let stored = foundationCache.cachedResponse(for: request) != nil
        times.note =
            "URLCache: \(timedAtOrigin) of \(count) timed requests went to the origin "
            + "(\(origin.count("/urlcache")) in all incl. priming and warm-up); cachedResponse(for:) "
            + (stored ? "has" : "has no") + " entry, currentDiskUsage \(foundationCache.currentDiskUsage) B"
        if timedAtOrigin > count / 2 {
            times.note! +=
                "\n     -> swift-corelibs-foundation's URLSession never stores into URLCache (its HTTP protocol "
                + "reports every response with cacheStoragePolicy .notAllowed): these are round trips plus the "
                + "URLCache lookup, not hits"
        }
        urlCache = times
        times.report()
    }

    // 4. Loopback round trips, no cache.
    var roundTrip: RequestTimes?
    if runs("roundtrip") {
        let sessionConfiguration = URLSessionConfiguration.ephemeral
        sessionConfiguration.urlCache = nil
        sessionConfiguration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let session = URLSession(configuration: sessionConfiguration)
        defer { session.finishTasksAndInvalidate() }
        var request = URLRequest(url: origin.url("/roundtrip"))
        request.cachePolicy = .reloadIgnoringLocalCacheData
        var before = 0
        var times = try await timeRequests(
            "loopback round trip, no cache", count: count, warmup: warmup,
            afterWarmup: { before = origin.count("/roundtrip") }
        ) {
            try await fetch(session, request)
        } check: { result in
            result.response?.statusCode == 200 && result.data.count == body.count
        }
        times.originSaw(origin.count("/roundtrip") - before, expected: count, "origin saw all \(count) timed requests")
        roundTrip = times
        times.report()
    }

    print("   ratios (how many times longer):")
    print("     round trip / data(for:) hit              \(ratio(roundTrip, hit))")
    print("     round trip / URLSession+protocol hit     \(ratio(roundTrip, protocolHit))")
    print("     URLCache / data(for:) hit                \(ratio(urlCache, hit))")
    print("     URLSession+protocol hit / data(for:) hit \(ratio(protocolHit, hit))")
    print("     URLSession+protocol hit / dictionary     \(ratio(protocolHit, floorHit))")
    print("   aims, met or not (same run):")
    func aim(_ name: String, _ times: RequestTimes?, p50 limit50: Double, p99 limit99: Double) {
        guard let times else { return print("     \(name): not measured (HTTP_BENCH_ONLY)") }
        let met = times.failures == 0 && times.p50 <= limit50 * 1000 && times.p99 <= limit99 * 1000
        let beside = roundTrip.map { String(format: "; loopback round trip p50 %.1f µs", $0.p50 / 1000) } ?? ""
        print(
            "     \(name): p50 \(micro(times.p50)) µs (aim ≤ \(Int(limit50))), p99 \(micro(times.p99)) µs "
                + "(aim ≤ \(Int(limit99)))\(beside): \(met ? "met" : "NOT met")")
    }
    aim("data(for:) memory hit", hit, p50: 5, p99: 10)
    aim("data(for:) disk hit  ", diskHit, p50: 30, p99: 60)
    if let protocolHit, let floorHit {
        // By mean, as the two took turns request by request; the p50 ratio beside it.
        let times = protocolHit.mean / floorHit.mean
        let met = protocolHit.failures == 0 && times <= 1.2
        print(
            String(
                format: "     CachingURLProtocol hit: mean %.1f µs, dictionary URLProtocol %.1f µs: "
                    + "%.2fx by mean (aim ≤ 1.20x; p50 %.2fx): ",
                protocolHit.mean / 1000, floorHit.mean / 1000, times, protocolHit.p50 / floorHit.p50)
                + (met ? "met" : "NOT met"))
    } else {
        print("     CachingURLProtocol hit: not measured (HTTP_BENCH_ONLY)")
    }
    print("   target: a hit at least 10x faster than a loopback round trip")
    guard let hit, let roundTrip else {
        print("     data(for:) hit: not measured (HTTP_BENCH_ONLY)")
        return false
    }
    let passed = hit.failures == 0 && roundTrip.mean >= 10 * hit.mean
    print(
        "     data(for:) hit: \(passed ? "PASS" : "FAIL") "
            + String(
                format: "(round trip mean %.1f µs / hit mean %.2f µs = %.1fx; by p50 %.1fx)",
                roundTrip.mean / 1000, hit.mean / 1000, roundTrip.mean / hit.mean, roundTrip.p50 / hit.p50))
    if let protocolHit {
        let protocolPassed = protocolHit.failures == 0 && roundTrip.mean >= 10 * protocolHit.mean
        print(
            "     URLSession+protocol hit (for information): \(protocolPassed ? "would pass" : "would fail") "
                + String(format: "(%.1fx by mean)", roundTrip.mean / protocolHit.mean))
    }
    return passed
}

/// The 1, 5 and 15 minute load averages, as /proc/loadavg gives them.
func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "unknown" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

/// Answers every request for a URL it holds, at once, from memory: the floor a URLProtocol's
/// hit cannot go below through URLSession.
private final class DictionaryProtocol: URLProtocol {
    static let answers = Locked<[URL: (HTTPURLResponse, Data)]>([:])

    override class func canInit(with request: URLRequest) -> Bool {
        request.url.map { url in answers.withLock { $0[url] != nil } } ?? false
    }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        guard let url = request.url, let (response, data) = Self.answers.withLock({ $0[url] }) else {
            client?.urlProtocol(self, didFailWithError: URLError(.fileDoesNotExist))
            return
        }
        client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
        client?.urlProtocol(self, didLoad: data)
        client?.urlProtocolDidFinishLoading(self)
    }

    override func stopLoading() {}
}

private struct BenchmarkFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
