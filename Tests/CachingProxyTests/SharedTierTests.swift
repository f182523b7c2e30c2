#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// Several real `httpcache serve` processes sharing one real Redis (standalone, or a Cluster
/// of three masters with a replica each), in front of one loopback origin that counts requests.
@Suite("Shared tier: several proxies on one Redis or Redis Cluster", .serialized)
struct SharedTierTests {
    enum Topology: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case standalone, cluster
        var testDescription: String { rawValue }

        /// `--redis URL` or `--redis-cluster LIST` for the shared servers of this test process.
        func options() throws -> [String] {
            switch self {
            case .standalone: return ["--redis", try RedisServer.shared().url]
            case .cluster: return ["--redis-cluster", try RedisCluster.shared().seeds]
            }
        }
    }

    /// `count` proxies on `redis` (options) in front of `origin`, with a key prefix of their own
    /// (`prefix`, or a random one).
    /// Unless the options say otherwise, a Redis command may take five seconds: the suite runs
    /// beside others on two cores, where the 50 ms default is sometimes passed (and, with the
    /// load at 12, once a whole second), and these tests are about sharing, not about a slow
    /// Redis (`slowRedis` is).
    static func nodes(
        _ count: Int, origin: LoopbackOrigin, redis: [String], extra: [String] = [], prefix: String? = nil
    ) throws -> ServeNodes {
        let prefix = prefix ?? "t\(UInt32.random(in: 0...UInt32.max)):"
        let timeout = (redis + extra).contains("--redis-timeout") ? [] : ["--redis-timeout", "5000"]
        return ServeNodes(
            try (0..<count).map { _ in
                try ServeProcess(
                    ["--origin", origin.baseURL, "--redis-prefix", prefix, "--loops", "1"] + redis + timeout + extra,
                    memoryOnly: true)
            })
    }

    /// The body the origin sends for `path` (its size chosen from the path).
    static func body(_ path: String, size: Int) -> [UInt8] { StressBodies.body(for: path, size: size) }

    @Test(
        "a response stored through one proxy is a hit on the others; a PURGE on one reaches every other's local tier",
        arguments: Topology.allCases)
    func storedOnceHitEverywhere(topology: Topology) async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let storable = Locked(true)
            origin.route("/shared") { _ in
                let header = storable.withLock { $0 } ? "max-age=300" : "no-store"
                return .init(headers: [("Cache-Control", header)], body: "the shared body")
            }
            let nodes = try Self.nodes(3, origin: origin, redis: try topology.options())
            let client = try TestClient()
            let first = try client.send("GET", nodes[0].baseURL + "/shared")
            #expect(first.status == 200 && !first.isHit)
            for node in nodes.dropFirst() {
                let answer = try client.send("GET", node.baseURL + "/shared")
                #expect(answer.isHit, "\(answer.cacheStatus ?? "no Cache-Status")")
                #expect(answer.text == "the shared body")
            }
            // Each node's local tier holds it now: hits again without the origin.
            for node in nodes { #expect(try client.send("GET", node.baseURL + "/shared").isHit) }
            #expect(origin.count("/shared") == 1)

            func metric(_ node: ServeProcess, _ name: String) throws -> Double? {
                let page = try client.send("GET", node.baseURL + "/_httpcache/metrics").text
                return page.split(separator: "\n").first { $0.hasPrefix(name + " ") }
                    .flatMap { Double($0.split(separator: " ")[1]) }
            }

            // PURGE on the third; what the origin sends from now on is not stored, so a node that
            // still held the purged response anywhere would answer from it.
            storable.withLock { $0 = false }
            let received = "httpcache_redis_invalidations_received_total"
            let before = try nodes.prefix(2).map { try metric($0, received) ?? 0 }
            #expect(try client.send("PURGE", nodes[2].baseURL + "/shared").status == 200)
            // The invalidation reaches the others through Redis' pub/sub: wait until they have it.
            for (node, count) in zip(nodes.prefix(2), before) {
                let deadline = Date().addingTimeInterval(10)
                while try metric(node, received) ?? 0 <= count, Date() < deadline {
                    Thread.sleep(forTimeInterval: 0.02)
                }
            }
            for node in nodes.prefix(2) {
                let answer = try client.send("GET", node.baseURL + "/shared")
                #expect(!answer.isHit, "\(answer.cacheStatus ?? "no Cache-Status")")
            }
            #expect(origin.count("/shared") == 3)

            // The metrics page counts Redis' work and the invalidations the PURGE sent and caused.
            #expect(try metric(nodes[0], "httpcache_redis_invalidations_received_total") ?? 0 >= 1)
            #expect(try metric(nodes[2], "httpcache_redis_invalidations_sent_total") ?? 0 >= 1)
            #expect(try metric(nodes[0], "httpcache_redis_round_trips_total") ?? 0 > 0)
            #expect(try metric(nodes[0], "httpcache_redis_errors_total") == 0)
        }
    }

    @Test(
        "60 concurrent requests for one uncached URL over three proxies make one origin request; all get its body",
        arguments: Topology.allCases)
    func collapsedAcrossProxies(topology: Topology) async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let body = Self.body("/collapsed", size: 50_000)
            origin.route("/collapsed") { _ in .init(headers: [("Cache-Control", "max-age=300")], body: body, delay: 0.5)
            }
            let nodes = try Self.nodes(3, origin: origin, redis: try topology.options())
            let results = Locked<[Received?]>([])
            let threads = (0..<60).map { index in
                Thread {
                    let answer = try? TestClient().send("GET", nodes[index % 3].baseURL + "/collapsed")
                    results.withLock { $0.append(answer) }
                }
            }
            threads.forEach { $0.start() }
            let deadline = Date().addingTimeInterval(60)
            while results.withLock({ $0.count }) < 60, Date() < deadline { usleep(10_000) }
            let answers = results.withLock { $0 }
            #expect(answers.count == 60)
            #expect(answers.allSatisfy { $0?.status == 200 && $0?.body == body })
            let origins = origin.count("/collapsed")
            guard origins != 1 else { return }
            // One origin request while Redis answers in time. A command that times out ends a
            // wait (no request fails because of Redis): then each proxy may fetch once, and the
            // metrics must show it (once in a full suite on a busy machine, cluster topology).
            let missed = try nodes.reduce(0.0) { total, node in
                total + (try RedisOnLoopTests.metric(node, "httpcache_redis_timeouts_total"))
                    + (try RedisOnLoopTests.metric(node, "httpcache_redis_errors_total"))
            }
            #expect(missed > 0 && origins <= 3, "\(origins) origin requests, \(missed) Redis timeouts and errors")
        }
    }

    @Test(
        "Redis killed (SIGKILL) under 20 s of load on two proxies: no client error, no wrong body; Redis back: shared hits again"
    )
    func redisKilledUnderLoad() async throws {
        try await offPool {
            let redis = try RedisServer()
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.setDefault { request in
                let size = 1_000 + (Int(request.path.split(separator: "/").last ?? "0") ?? 0) * 3_000
                return .init(headers: [("Cache-Control", "max-age=2")], body: Self.body(request.path, size: size))
            }
            let nodes = try Self.nodes(2, origin: origin, redis: ["--redis", redis.url])
            let errors = Locked<[String]>([])
            let served = Locked(0)
            let stop = Locked(false)
            let workers = (0..<4).map { worker in
                Thread {
                    var index = worker
                    while !stop.withLock({ $0 }) {
                        index += 7
                        let path = "/load/\(index % 60)"
                        let size = 1_000 + (index % 60) * 3_000
                        do {
                            let answer = try TestClient().send("GET", nodes[index % 2].baseURL + path)
                            if answer.status != 200 || answer.body != Self.body(path, size: size) {
                                errors.withLock {
                                    $0.append("\(path): status \(answer.status), \(answer.body.count) bytes")
                                }
                            }
                            served.withLock { $0 += 1 }
                        } catch {
                            errors.withLock { $0.append("\(path): \(error)") }
                        }
                    }
                }
            }
            workers.forEach { $0.start() }
            Thread.sleep(forTimeInterval: 5)
            redis.kill()
            Thread.sleep(forTimeInterval: 8)
            try redis.start()
            Thread.sleep(forTimeInterval: 7)
            stop.withLock { $0 = true }
            Thread.sleep(forTimeInterval: 1)
            #expect(errors.withLock { $0 }.isEmpty, "\(errors.withLock { $0.prefix(5) })")
            #expect(served.withLock { $0 } > 200)
            #expect(nodes[0].standardError.contains("requests are answered from the local tier"))

            // Shared hits again, without restarting the proxies.
            let client = try TestClient()
            origin.route("/after") { _ in .init(headers: [("Cache-Control", "max-age=300")], body: "after") }
            var sharedHit = false
            for attempt in 0..<50 where !sharedHit {
                let path = "/after?\(attempt)"
                _ = try client.send("GET", nodes[0].baseURL + path)
                sharedHit = try client.send("GET", nodes[1].baseURL + path).isHit
                if !sharedHit { Thread.sleep(forTimeInterval: 0.1) }
            }
            #expect(sharedHit)
        }
    }

    @Test("Cluster: a master killed and its replica promoted; requests keep being answered, shared hits resume")
    func clusterFailover() async throws {
        try await offPool {
            let cluster = try RedisCluster()
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.setDefault { request in
                .init(headers: [("Cache-Control", "max-age=300")], body: Self.body(request.path, size: 5_000))
            }
            let nodes = try Self.nodes(3, origin: origin, redis: ["--redis-cluster", cluster.seeds])
            let client = try TestClient()
            // Keys on every master: some of them live on the one that is killed.
            for index in 0..<30 { _ = try client.send("GET", nodes[0].baseURL + "/before/\(index)") }
            let hitsBefore = try (0..<30).filter { try client.send("GET", nodes[1].baseURL + "/before/\($0)").isHit }
                .count
            #expect(hitsBefore == 30)

            let master = try cluster.master(of: "x")
            master.kill()
            var failures: [String] = []
            let start = Date()
            var index = 0
            while Date().timeIntervalSince(start) < 4 {
                index += 1
                let path = "/during/\(index % 40)"
                let answer = try client.send("GET", nodes[index % 3].baseURL + path)
                if answer.status != 200 || answer.body != Self.body(path, size: 5_000) { failures.append(path) }
            }
            #expect(failures.isEmpty)
            try cluster.waitUntilHealthy()
            var resumed = 0
            for attempt in 0..<30 {
                let path = "/after/\(attempt)"
                _ = try client.send("GET", nodes[0].baseURL + path)
                if try client.send("GET", nodes[2].baseURL + path).isHit { resumed += 1 }
            }
            #expect(resumed >= 25, "shared hits after the failover: \(resumed) of 30")
        }
    }

    @Test("Redis with maxmemory and allkeys-lru under a larger load: every body served is byte-exact")
    func evictionUnderLoad() async throws {
        try await offPool {
            let redis = try RedisServer(arguments: ["--maxmemory", "6mb", "--maxmemory-policy", "allkeys-lru"])
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let size: @Sendable (Int) -> Int = { index in 20_000 + (index * 611_953) % 2_600_000 }
            origin.setDefault { request in
                let index = Int(request.path.split(separator: "/").last ?? "0") ?? 0
                return .init(
                    headers: [("Cache-Control", "max-age=300")], body: Self.body(request.path, size: size(index)))
            }
            // No local tier: every hit is read from Redis, where chunks are evicted one by one.
            let nodes = try Self.nodes(2, origin: origin, redis: ["--redis", redis.url, "--local-memory", "0"])
            let wrong = Locked<[String]>([])
            let done = Locked(0)
            let threads = (0..<4).map { worker in
                Thread {
                    defer { done.withLock { $0 += 1 } }
                    for round in 0..<30 {
                        let index = (round * 13 + worker * 5) % 40
                        let path = "/evict/\(index)"
                        guard let answer = try? TestClient().send("GET", nodes[(round + worker) % 2].baseURL + path)
                        else {
                            wrong.withLock { $0.append("\(path): no answer") }
                            continue
                        }
                        if answer.status != 200 || answer.body != Self.body(path, size: size(index)) {
                            wrong.withLock { $0.append("\(path): \(answer.status), \(answer.body.count) bytes") }
                        }
                    }
                }
            }
            threads.forEach { $0.start() }
            // Every request is made and checked: a deadline that passed first would leave the rest unchecked.
            let deadline = Date().addingTimeInterval(300)
            while done.withLock({ $0 }) < threads.count, Date() < deadline { usleep(50_000) }
            #expect(done.withLock { $0 } == threads.count, "the workers did not finish their 120 requests in 300 s")
            #expect(wrong.withLock { $0 }.isEmpty, "\(wrong.withLock { $0.prefix(5) })")
            let evicted = try redis.cli(["INFO", "stats"]).split(separator: "\r\n").first {
                $0.hasPrefix("evicted_keys:")
            }
            #expect(
                (evicted.flatMap { Int($0.split(separator: ":")[1]) } ?? 0) > 0,
                "Redis evicted nothing: the test proves nothing")
        }
    }

    @Test("Redis unreachable at start: serve says so in one line and answers from the origin; --redis-required exits")
    func unreachableAtStart() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/a") { _ in .init(headers: [("Cache-Control", "max-age=300")], body: "a") }
            let node = try ServeProcess(
                ["--origin", origin.baseURL, "--redis", "redis://127.0.0.1:1"], memoryOnly: true)
            let client = try TestClient()
            #expect(try client.send("GET", node.baseURL + "/a").text == "a")
            // Stored in the local tier meanwhile.
            #expect(try client.send("GET", node.baseURL + "/a").isHit)
            let lines = node.standardError.split(separator: "\n").filter { $0.lowercased().contains("cannot connect") }
            #expect(lines.count == 1, "\(lines)")
            #expect(lines.first?.contains("cannot connect to Redis at 127.0.0.1:1") == true)
            #expect(lines.first?.contains("--redis-required") == true)

            let required = ChildProcess()
            required.executableURL = URL(fileURLWithPath: try BuiltExecutable.path("httpcache"))
            required.arguments = [
                "serve", "--origin", origin.baseURL, "--listen", "127.0.0.1:0", "--memory-only", "--redis",
                "redis://127.0.0.1:1", "--redis-required",
            ]
            let errors = Pipe()
            required.standardError = errors
            required.standardOutput = FileHandle.nullDevice
            try required.run()
            let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            required.waitUntilExit()
            #expect(required.terminationStatus != 0)
            #expect(message.contains("cannot connect to Redis at 127.0.0.1:1") && message.contains("start Redis"))
        }
    }

    @Test("a Redis that answers slowly (CLIENT PAUSE) is bypassed: requests are answered from the origin in time")
    func slowRedis() async throws {
        try await offPool {
            let redis = try RedisServer()
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.setDefault { request in
                .init(headers: [("Cache-Control", "max-age=300")], body: "slow \(request.path)")
            }
            let nodes = try Self.nodes(1, origin: origin, redis: ["--redis", redis.url, "--redis-timeout", "50"])
            let client = try TestClient()
            #expect(try client.send("GET", nodes[0].baseURL + "/warm").status == 200)
            // Paused far longer than any answer may take, even on a loaded machine: an answer that
            // waited for Redis would come after 30 s.
            try redis.cli(["CLIENT", "PAUSE", "30000", "ALL"])
            for index in 0..<5 {
                let started = Date()
                let answer = try client.send("GET", nodes[0].baseURL + "/paused/\(index)")
                let elapsed = Date().timeIntervalSince(started)
                #expect(answer.status == 200 && answer.text == "slow /paused/\(index)")
                #expect(elapsed < 10, "answered after \(elapsed) s while Redis was paused")
            }
            #expect(try client.send("GET", nodes[0].baseURL + "/warm").text == "slow /warm")
        }
    }
}
#endif
