import CacheSemantics
import CacheSystem
import Foundation
import HTTPCacheCore
import LoopbackOrigin

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `httpcache demo`: the cache's four outcomes against a local origin, offline and in a
/// temporary directory, checked as they happen.
struct DemoCommand {
    static let name = "demo"
    static let summary = "MISS → HIT → REVALIDATED → STALE against a local origin (offline)"
    static let specs: [OptionSpec] = []
    static let help = """
        Usage: httpcache demo

        Starts an origin on a free port of 127.0.0.1 (nothing leaves this machine) serving
        /greeting with Cache-Control: max-age=1 and ETag "v1", answering If-None-Match with
        304, and a disk cache in a temporary directory (removed at the end). Then:

          1. MISS         the first request goes to the origin and is stored
          2. HIT          the second is served from the cache; the origin sees nothing
          3. REVALIDATED  once stale (after about a second) it is revalidated: 304, stored body
          4. STALE        with the origin stopped, the stale response is still served

        Each step prints its Cache-Status, the origin's request count and its time. The demo
        takes about 2 seconds and exits 0 only when every step behaved as expected (else it
        says what differed and exits 1). It does not use --cache-dir or HTTPCACHE_DIR.
        """

    init(_ arguments: ParsedArguments) throws(Failure) {
        _ = try arguments.positionals("nothing", minimum: 0, maximum: 0)
    }

    /// One step's expectation and what happened.
    struct Step {
        var title: String
        var expected: CacheOutcome
        var expectedOriginRequests: Int
        /// What the step shows.
        var note: String
    }

    func run() async throws(Failure) {
        let temporary =
            NSTemporaryDirectory().hasSuffix("/") ? String(NSTemporaryDirectory().dropLast()) : NSTemporaryDirectory()
        let directory = temporary + "/httpcache-demo-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        DemoCleanup.remove(onInterrupt: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The loopback origin must be reached directly, whatever proxy the environment names.
        setenv("no_proxy", "127.0.0.1,localhost", 1)
        setenv("NO_PROXY", "127.0.0.1,localhost", 1)

        let origin: LoopbackOrigin
        do {
            origin = try LoopbackOrigin(port: 0)
        } catch {
            throw Failure(.failure, "demo: could not start the local origin: \(error)")
        }
        defer { origin.stop() }
        let body = "Hello from the origin on 127.0.0.1:\(origin.port)\n"
        // The cache and the origin share a clock the demo moves on between steps, instead of
        // sleeping for the response to become stale: the steps then behave the same however
        // busy the machine is.
        let time = DemoClock()
        origin.route("/greeting") { request in
            let headers = [
                ("Cache-Control", "max-age=1"), ("ETag", "\"v1\""), ("Content-Type", "text/plain; charset=utf-8"),
                ("Date", HTTPDate.format(Timestamp(secondsSince1970: time.now))),
            ]
            if request.header("If-None-Match") == "\"v1\"" {
                return LoopbackOrigin.Response(status: 304, headers: headers)
            }
            return LoopbackOrigin.Response(headers: headers, body: body)
        }

        var configuration = HTTPCache.Configuration()
        configuration.directory = directory
        configuration.clock = { time.now }
        configuration.log = { message in Console.error("httpcache: demo: \(message)\n") }
        let cache: HTTPCache
        do {
            cache = try HTTPCache(
                configuration: configuration, transport: Network.transport(trusting: [], command: "demo"))
        } catch {
            throw Failure(.failure, "demo: could not open a cache in \(directory): \(error)")
        }
        let url = origin.url("/greeting")
        Console.out(
            """
            httpcache demo: an origin on \(origin.baseURL) (Cache-Control: max-age=1, ETag "v1",
            304 for If-None-Match) and a disk cache in \(directory)

            """)

        let clock = ContinuousClock()
        let started = clock.now
        var problems: [String] = []
        func fetch(_ step: Step, number: Int) async -> CachedResponse? {
            let begun = clock.now
            let result: CachedResponse
            do {
                result = try await cache.data(for: FetchRequest(url: url))
            } catch {
                problems.append("step \(number) (\(step.title)): the request failed: \(error)")
                Console.out("\(number). \(step.title): failed: \(error)\n")
                return nil
            }
            let elapsed = clock.now - begun
            let count = origin.count("/greeting")
            let label = result.outcome.rawValue.uppercased()
            Console.out(
                "\(number). "
                    + Format.table([
                        [
                            label.padding(toLength: 11, withPad: " ", startingAt: 0), String(result.statusCode),
                            "origin requests: \(count)", Format.elapsed(elapsed).leftPadded(to: 8),
                            "Cache-Status: \(result.cacheStatus.fieldValue)",
                        ]
                    ])
                    + "   \(step.note)\n")
            if result.outcome != step.expected || count != step.expectedOriginRequests {
                problems.append(
                    "step \(number) expected \(step.title) with \(step.expectedOriginRequests) origin requests, "
                        + "got \(label) with \(count)")
            }
            if String(decoding: result.data, as: UTF8.self) != body {
                problems.append("step \(number) (\(step.title)) served a different body")
            }
            return result
        }

        _ = await fetch(
            Step(
                title: "MISS", expected: .miss, expectedOriginRequests: 1,
                note: "nothing stored: fetched from the origin and stored"), number: 1)
        _ = await fetch(
            Step(
                title: "HIT", expected: .hit, expectedOriginRequests: 1,
                note: "fresh: served from the cache; the origin saw nothing"), number: 2)

        time.advance(2)
        Console.out("   … 2 s later on the demo's clock: the response is stale (max-age=1)\n")
        _ = await fetch(
            Step(
                title: "REVALIDATED", expected: .revalidated, expectedOriginRequests: 2,
                note: "stale: asked the origin with If-None-Match: \"v1\"; it said 304, the stored body was served"),
            number: 3)
        if let last = origin.requests(to: "/greeting").last, last.header("If-None-Match") != "\"v1\"" {
            problems.append("step 3 (REVALIDATED): the origin did not receive If-None-Match: \"v1\"")
        }

        time.advance(2)
        origin.stop()
        Console.out("   … 2 s later it is stale again, and the origin is stopped\n")
        if let result = await fetch(
            Step(
                title: "STALE", expected: .stale, expectedOriginRequests: 2,
                note: "stale and the origin is down: served anyway (RFC 9111 §4.2.4)"), number: 4),
            result.cacheStatus.detail != "disconnected"
        {
            problems.append("step 4 (STALE): Cache-Status detail is not 'disconnected'")
        }

        let total = Format.elapsed(clock.now - started)
        if problems.isEmpty {
            Console.out("\nAll four steps behaved as expected in \(total). The temporary cache is removed.\n")
        } else {
            Console.out("\nThe demo did not behave as expected (\(total)):\n")
            for problem in problems { Console.out("  - \(problem)\n") }
            throw Failure(
                .failure, "demo: \(Format.count(problems.count, "step")) did not behave as expected (listed above)")
        }
    }
}

/// The time the demo's cache and origin go by: the real time when the demo starts (whole
/// seconds, as `Date` has them), then moved on only by the demo.
final class DemoClock: Sendable {
    private let time = Locked(Date().timeIntervalSince1970.rounded(.down))
    var now: Double { time.withLock { $0 } }
    func advance(_ seconds: Double) { time.withLock { $0 += seconds } }
}

/// Removes the demo's temporary directory when the demo is interrupted (Ctrl-C).
enum DemoCleanup {
    nonisolated(unsafe) private static var source: (any DispatchSourceSignal)?

    static func remove(onInterrupt directory: String) {
        signal(SIGINT, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler {
            try? FileManager.default.removeItem(atPath: directory)
            Console.error("\nhttpcache: demo interrupted; its temporary cache was removed\n")
            exit(130)
        }
        source.resume()
        Self.source = source
    }
}

extension String {
    /// The string with spaces in front up to `width` characters.
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
