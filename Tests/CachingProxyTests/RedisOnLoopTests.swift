#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// Real `httpcache serve` processes with no local tier (`--local-memory 0`, one event loop) on a
/// real Redis: each lookup is sent from the loop on its own connection and the request parked
/// until the reply is in, so concurrent lookups share round trips; Redis killed or paused while
/// requests are parked, and bodies too large to be inline.
@Suite("Redis tier on the event loop: lookups pipelined, parked requests never hang", .serialized)
struct RedisOnLoopTests {
    /// A proxy with no local tier and one loop on `redis`, under `prefix`.
    static func node(_ origin: LoopbackOrigin, _ redis: RedisServer, prefix: String, timeout: Int) throws
        -> ServeProcess
    {
        try ServeProcess(
            [
                "--origin", origin.baseURL, "--redis", redis.url, "--redis-prefix", prefix, "--local-memory", "0",
                "--loops", "1", "--redis-timeout", String(timeout),
            ], memoryOnly: true)
    }

    static func metric(_ node: ServeProcess, _ name: String) throws -> Double {
        let page = try TestClient().send("GET", node.baseURL + "/_httpcache/metrics").text
        return page.split(separator: "\n").first { $0.hasPrefix(name + " ") }
            .flatMap { Double($0.split(separator: " ")[1]) } ?? 0
    }

    /// The loop lookups and the round trips `node` counted so far.
    static func loopCounters(_ node: ServeProcess) throws -> (lookups: Double, trips: Double) {
        (
            try metric(node, "httpcache_redis_loop_lookups_total"),
            try metric(node, "httpcache_redis_round_trips_total")
        )
    }

    static func body(_ path: String) -> [UInt8] { StressBodies.body(for: path, size: 16_384) }

    /// An origin that sends each path's ``body(_:)``, fresh for five minutes.
    static func origin() throws -> LoopbackOrigin {
        let origin = try LoopbackOrigin()
        origin.setDefault { request in
            .init(headers: [("Cache-Control", "max-age=300")], body: Self.body(request.path))
        }
        return origin
    }

    /// A node (command timeout `timeout` ms) on a Redis of its own that holds `paths`, then
    /// paused for 30 s (`CLIENT PAUSE`): a lookup sent now is not answered.
    static func pausedRedis(holding paths: [String], timeout: Int, _ origin: LoopbackOrigin) throws -> (
        RedisServer, ServeProcess
    ) {
        let redis = try RedisServer()
        let node = try Self.node(origin, redis, prefix: "paused:", timeout: timeout)
        #expect(Self.load(node, paths, clients: 1).wrong.isEmpty)
        try redis.cli(["CLIENT", "PAUSE", "30000", "ALL"])
        return (redis, node)
    }

    /// `clients` threads each getting every path of `paths` from `node`; what did not come back
    /// byte-exact, and how many were hits.
    static func load(_ node: ServeProcess, _ paths: [String], clients: Int, body: (String) -> [UInt8] = body)
        -> (wrong: [String], hits: Int)
    {
        let wrong = Locked<[String]>([])
        let hits = Locked(0)
        let expected = Dictionary(uniqueKeysWithValues: paths.map { ($0, body($0)) })
        let finished = DispatchGroup()
        for client in 0..<clients {
            finished.enter()
            Thread.detachNewThread {
                defer { finished.leave() }
                guard let connection = try? TestClient() else { return wrong.withLock { $0.append("no client") } }
                for index in paths.indices {
                    let path = paths[(index + client * 7) % paths.count]
                    guard let answer = try? connection.send("GET", node.baseURL + path) else {
                        wrong.withLock { $0.append("\(path): no answer") }
                        continue
                    }
                    if answer.status != 200 || answer.body != expected[path] {
                        wrong.withLock { $0.append("\(path): \(answer.status), \(answer.body.count) bytes") }
                    }
                    if answer.isHit { hits.withLock { $0 += 1 } }
                }
            }
        }
        _ = finished.wait(timeout: .now() + 120)
        return (wrong.withLock { $0 }, hits.withLock { $0 })
    }

    @Test("hits from Redis are looked up from the loop: 32 clients' lookups share round trips, every body byte-exact")
    func pipelinedHits() async throws {
        try await offPool {
            let redis = try RedisServer.shared()
            let origin = try Self.origin()
            defer { origin.stop() }
            let prefix = "loop\(UInt32.random(in: 0...UInt32.max)):"
            let paths = (0..<40).map { "/hit/\($0)" }
            let writer = try Self.node(origin, redis, prefix: prefix, timeout: 5000)
            #expect(Self.load(writer, paths, clients: 1).wrong.isEmpty)
            // A node that never saw them: each of its hits is one lookup in Redis.
            let reader = try Self.node(origin, redis, prefix: prefix, timeout: 5000)
            let before = try Self.loopCounters(reader)
            let (wrong, hits) = Self.load(reader, paths, clients: 32)
            #expect(wrong.isEmpty, "\(wrong.prefix(3))")
            #expect(hits == 32 * paths.count)
            #expect(origin.count(paths[0]) == 1)
            let after = try Self.loopCounters(reader)
            let (lookups, trips) = (after.lookups - before.lookups, after.trips - before.trips)
            #expect(lookups == Double(32 * paths.count), "every hit's lookup went out from the loop")
            #expect(trips < lookups, "\(trips) round trips for \(lookups) lookups: none were pipelined")
            #expect(try Self.metric(reader, "httpcache_redis_errors_total") == 0)
        }
    }

    @Test("a hit whose body is not inline (1.5 MB, in chunks) is found from the loop and served whole")
    func chunkedBody() async throws {
        try await offPool {
            let redis = try RedisServer.shared()
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let large: @Sendable (String) -> [UInt8] = { StressBodies.body(for: $0, size: 1_500_000) }
            origin.setDefault { request in .init(headers: [("Cache-Control", "max-age=300")], body: large(request.path))
            }
            let prefix = "loop\(UInt32.random(in: 0...UInt32.max)):"
            let paths = (0..<3).map { "/large/\($0)" }
            let node = try Self.node(origin, redis, prefix: prefix, timeout: 5000)
            #expect(Self.load(node, paths, clients: 1, body: large).wrong.isEmpty)
            let (wrong, hits) = Self.load(node, paths, clients: 4, body: large)
            #expect(wrong.isEmpty, "\(wrong.prefix(3))")
            #expect(hits == 4 * paths.count)
            #expect(try Self.metric(node, "httpcache_redis_loop_lookups_total") >= Double(4 * paths.count))
        }
    }

    @Test("Redis killed while requests are parked on its replies: each is answered from the origin at once, none hangs")
    func redisKilledMidFlight() async throws {
        try await offPool {
            let origin = try Self.origin()
            defer { origin.stop() }
            let paths = (0..<8).map { "/parked/\($0)" }
            // A timeout far past the test: an answer that waited for it would come after 30 s.
            let (redis, node) = try Self.pausedRedis(holding: paths, timeout: 30_000, origin)
            let started = Date()
            let answers = Locked<[(Int, Bool, Double)]>([])
            let threads = paths.map { path in
                Thread {
                    let answer = try? TestClient().send("GET", node.baseURL + path)
                    let exact = answer?.status == 200 && answer?.body == Self.body(path)
                    answers.withLock { $0.append((answer?.status ?? 0, exact, Date().timeIntervalSince(started))) }
                }
            }
            threads.forEach { $0.start() }
            // Every request is parked on a lookup Redis does not answer.
            Thread.sleep(forTimeInterval: 1)
            #expect(answers.withLock { $0 }.isEmpty, "answered while Redis was paused: the lookups did not wait")
            redis.kill()
            let deadline = Date().addingTimeInterval(10)
            while answers.withLock({ $0.count }) < paths.count, Date() < deadline { usleep(10_000) }
            let received = answers.withLock { $0 }
            #expect(received.count == paths.count, "\(paths.count - received.count) requests hung")
            #expect(received.allSatisfy { $0.1 }, "\(received.map(\.0))")
            #expect(received.allSatisfy { $0.2 < 6 }, "\(received.map(\.2))")
            #expect(origin.count(paths[0]) == 2)
            #expect(try Self.metric(node, "httpcache_redis_errors_total") >= 1)
            #expect(node.process.isRunning)
        }
    }

    @Test(
        "a Redis slower than --redis-timeout: parked requests are answered from the origin after the timeout, counted")
    func slowRedis() async throws {
        try await offPool {
            let origin = try Self.origin()
            defer { origin.stop() }
            let paths = (0..<4).map { "/slow/\($0)" }
            let (redis, node) = try Self.pausedRedis(holding: paths, timeout: 200, origin)
            defer { redis.kill() }
            let client = try TestClient()
            for path in paths {
                let started = Date()
                let answer = try client.send("GET", node.baseURL + path)
                let elapsed = Date().timeIntervalSince(started)
                #expect(answer.status == 200 && answer.body == Self.body(path) && !answer.isHit)
                #expect(elapsed >= 0.19 && elapsed < 10, "answered after \(elapsed) s")
            }
            #expect(try Self.metric(node, "httpcache_redis_timeouts_total") >= 1)
        }
    }
}
#endif
