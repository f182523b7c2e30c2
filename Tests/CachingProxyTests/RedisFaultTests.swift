#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// Real `httpcache serve` processes on a real Redis (standalone and Cluster) whose stored bodies
/// are damaged behind their backs, as Redis itself, an operator or a failover can: a chunk
/// deleted, cut short or altered, an entry's record replaced by junk or gone, an inline body's
/// field gone or altered. A body that cannot be read is a miss: the node never stops, the
/// client gets the origin's exact bytes, the bad entry is removed, and when it is found as the
/// body is opened (not already as the record is read), one log line names the URL.
@Suite("Redis faults: a stored body that cannot be read is a miss, never a dead node", .serialized)
struct RedisFaultTests {
    typealias Topology = SharedTierTests.Topology

    /// How a stored body is damaged.
    enum Fault: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case chunkDeleted, chunkTruncated, chunkAltered, recordJunk, recordDeleted
        case inlineDeleted, inlineAltered
        var testDescription: String { rawValue }

        /// Bodies of more than 256 KiB are stored in chunks of 1 MiB; smaller ones in the
        /// entry's hash (16,384 bytes: pieces of 14,330 and 2,042 bytes in fields of their own,
        /// 12 bytes after the record).
        var bodySize: Int {
            switch self {
            case .inlineDeleted, .inlineAltered: 16_384
            default: 1_500_000
            }
        }

        /// Whether the store sees it when it reads the record (a plain miss, nothing logged)
        /// rather than when it opens the body.
        var isSeenWithTheRecord: Bool { [.recordJunk, .recordDeleted, .inlineDeleted].contains(self) }
    }

    /// The Redis server holding `key` (its slot's master in a Cluster).
    static func server(for key: String, _ topology: Topology) throws -> RedisServer {
        switch topology {
        case .standalone: try RedisServer.shared()
        case .cluster: try RedisCluster.shared().master(of: key)
        }
    }

    /// The keys under `prefix` on every server of `topology`.
    static func keys(_ prefix: String, _ topology: Topology) throws -> [String] {
        let servers = topology == .standalone ? [try RedisServer.shared()] : try RedisCluster.shared().servers
        var keys: Set<String> = []
        for server in servers {
            let output = (try? server.cli(["--scan", "--pattern", prefix + "*"])) ?? ""
            keys.formUnion(output.split(separator: "\n").map(String.init).filter { $0.hasPrefix(prefix) })
        }
        return keys.sorted()
    }

    /// Damages the one stored body under `prefix` as `fault` says.
    static func damage(_ fault: Fault, prefix: String, _ topology: Topology) throws {
        // The proxy commits the entry once the body is sent: the client can have it first.
        var keys = try keys(prefix, topology)
        let deadline = Date().addingTimeInterval(10)
        while !keys.contains(where: { $0.contains("}e:") }), Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
            keys = try Self.keys(prefix, topology)
        }
        let hash = try #require(keys.first { $0.contains("}e:") }, "no entry in Redis: \(keys)")
        let server = try server(for: hash, topology)
        // The record is the field named by the variant key, which is empty here.
        let record = [Array("HGET".utf8), Array(hash.utf8), []]
        let chunk = keys.first { $0.contains("}c:") && $0.hasSuffix(":1") }
        switch fault {
        case .chunkDeleted:
            #expect(try server.command("DEL", try #require(chunk)) == ":1")
        case .chunkTruncated:
            #expect(try server.command("SET", try #require(chunk), "short") == "+OK")
        case .chunkAltered:
            #expect(
                try server.command("SETRANGE", try #require(chunk), "1000", "altered") == ":\(1_500_000 - 1_048_576)")
        case .recordJunk:
            #expect(try server.command([Array("HSET".utf8), Array(hash.utf8), [], Array("junk".utf8)]) == ":0")
        case .recordDeleted:
            #expect(try server.command([Array("HDEL".utf8), Array(hash.utf8), []]) == ":1")
        case .inlineDeleted, .inlineAltered:
            // The body's first piece is the field named by a NUL, the entry's identity (which
            // the record holds) and ":0".
            let text = try server.command(record)
            let id = try #require(text.firstMatch(of: /[0-9a-f]{32}/).map { String($0.output) }, "\(text.prefix(80))")
            let field = [UInt8(0)] + Array("\(id):0".utf8)
            if fault == .inlineDeleted {
                #expect(try server.command([Array("HDEL".utf8), Array(hash.utf8), field]) == ":1")
            } else {
                var altered = Array(StressBodies.body(for: "/damaged", size: fault.bodySize).prefix(14_330))
                altered[100] ^= 0xFF
                #expect(try server.command([Array("HSET".utf8), Array(hash.utf8), field, altered]) == ":0")
            }
        }
    }

    /// An origin for `/damaged` with an `ETag`, answering a matching `If-None-Match` with 304.
    static func origin(bodySize: Int) throws -> LoopbackOrigin {
        let origin = try LoopbackOrigin()
        let body = StressBodies.body(for: "/damaged", size: bodySize)
        origin.route("/damaged") { request in
            let headers = [("Cache-Control", "max-age=300"), ("ETag", "\"v1\"")]
            if request.header("If-None-Match") == "\"v1\"" { return .init(status: 304, headers: headers, body: "") }
            return .init(headers: headers, body: body)
        }
        return origin
    }

    @Test(
        "a damaged stored body is a miss: the node answers with the origin's exact bytes, logs the URL, stays up, and the entry is replaced",
        arguments: Topology.allCases, Fault.allCases)
    func damagedBodyIsAMiss(topology: Topology, fault: Fault) async throws {
        try await offPool {
            let origin = try Self.origin(bodySize: fault.bodySize)
            defer { origin.stop() }
            let body = StressBodies.body(for: "/damaged", size: fault.bodySize)
            let prefix = "f\(UInt32.random(in: 0...UInt32.max)):"
            // No local tier: every read goes to Redis.
            let nodes = try SharedTierTests.nodes(
                2, origin: origin, redis: try topology.options(), extra: ["--local-memory", "0"],
                prefix: prefix)
            let client = try TestClient()
            #expect(try client.send("GET", nodes[0].baseURL + "/damaged").body == body)
            // Damaged before the other node ever read it (a node keeps the last inline bodies it
            // read, verified, in memory: those are still right).
            try Self.damage(fault, prefix: prefix, topology)
            for _ in 0..<2 {
                let answer = try client.send("GET", nodes[1].baseURL + "/damaged")
                #expect(answer.status == 200 && answer.body == body, "\(answer.status), \(answer.body.count) bytes")
            }
            #expect(nodes.allSatisfy { $0.process.isRunning })
            #expect(origin.count("/damaged") == 2, "the damaged entry was not replaced")
            if !fault.isSeenWithTheRecord {
                #expect(
                    nodes[1].standardError.contains("the stored body of \(origin.baseURL)/damaged could not be read"))
            }
            // The replacement is a hit on the other node too.
            let again = try client.send("GET", nodes[0].baseURL + "/damaged")
            #expect(again.isHit && again.body == body)
        }
    }

    @Test(
        "Redis commands given up after 1 ms under load on two nodes: every answer byte-exact, no node stops",
        arguments: Topology.allCases)
    func oneMillisecondTimeouts(topology: Topology) async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let size: @Sendable (Int) -> Int = { index in 1_000 + (index * 263_167) % 700_000 }
            origin.setDefault { request in
                let index = Int(request.path.split(separator: "/").last ?? "0") ?? 0
                return .init(
                    headers: [("Cache-Control", "max-age=300")],
                    body: StressBodies.body(for: request.path, size: size(index)))
            }
            let nodes = try SharedTierTests.nodes(
                2, origin: origin, redis: try topology.options(),
                extra: ["--redis-timeout", "1", "--local-memory", "0"])
            let wrong = Locked<[String]>([])
            let threads = (0..<4).map { worker in
                Thread {
                    for round in 0..<15 {
                        let index = (round * 7 + worker * 3) % 30
                        let path = "/t/\(index)"
                        do {
                            let answer = try TestClient().send("GET", nodes[(round + worker) % 2].baseURL + path)
                            if answer.status != 200 || answer.body != StressBodies.body(for: path, size: size(index)) {
                                wrong.withLock { $0.append("\(path): \(answer.status), \(answer.body.count) bytes") }
                            }
                        } catch {
                            wrong.withLock { $0.append("\(path): \(error)") }
                        }
                    }
                }
            }
            threads.forEach { $0.start() }
            let deadline = Date().addingTimeInterval(120)
            while threads.contains(where: { !$0.isFinished }), Date() < deadline { usleep(50_000) }
            #expect(wrong.withLock { $0 }.isEmpty, "\(wrong.withLock { $0.prefix(5) })")
            #expect(nodes.allSatisfy { $0.process.isRunning })
        }
    }

    @Test(
        "a conditional request whose stored answer lost a chunk goes to the origin; its 304 reaches the client (RFC 9111 §4.3.2)",
        arguments: Topology.allCases)
    func conditionalRequestForEvictedChunk(topology: Topology) async throws {
        try await offPool {
            let origin = try Self.origin(bodySize: Fault.chunkDeleted.bodySize)
            defer { origin.stop() }
            let prefix = "f\(UInt32.random(in: 0...UInt32.max)):"
            let nodes = try SharedTierTests.nodes(
                1, origin: origin, redis: try topology.options(), extra: ["--local-memory", "0"],
                prefix: prefix)
            let client = try TestClient()
            _ = try client.send("GET", nodes[0].baseURL + "/damaged")
            try Self.damage(.chunkDeleted, prefix: prefix, topology)
            let answer = try client.send("GET", nodes[0].baseURL + "/damaged", [("If-None-Match", "\"v1\"")])
            #expect(answer.status == 304)
            #expect(origin.requests(to: "/damaged").last?.header("If-None-Match") == "\"v1\"")
            #expect(nodes[0].process.isRunning)
        }
    }
}
#endif

#if os(Linux)
/// Collapsed forwarding across nodes when the node that fetches dies, and Redis refusing a
/// user its keys.
@Suite("Redis: a dead leader's fetch taken over; refusals logged and counted", .serialized)
struct RedisCollapseFaultTests {
    @Test(
        "the node fetching a URL for 20 waiting requests on two other nodes is killed: one waiting node fetches it instead, well before the 10 s collapse limit"
    )
    func deadLeaderIsTakenOver() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let body = StressBodies.body(for: "/slow", size: 30_000)
            origin.route("/slow") { _ in .init(headers: [("Cache-Control", "max-age=300")], body: body, delay: 1.5) }
            let nodes = try SharedTierTests.nodes(3, origin: origin, redis: ["--redis", try RedisServer.shared().url])
            // The leader: its request reaches the origin, then it dies.
            Thread.detachNewThread { _ = try? TestClient().send("GET", nodes[0].baseURL + "/slow") }
            let deadline = Date().addingTimeInterval(10)
            while origin.count("/slow") == 0, Date() < deadline { usleep(5_000) }
            try #require(origin.count("/slow") == 1, "the leader's request never reached the origin")
            let answers = Locked<[(status: Int, exact: Bool, seconds: Double)]>([])
            let started = Date()
            let threads = (0..<20).map { index in
                Thread {
                    let answer = try? TestClient().send("GET", nodes[1 + index % 2].baseURL + "/slow")
                    answers.withLock {
                        $0.append((answer?.status ?? 0, answer?.body == body, Date().timeIntervalSince(started)))
                    }
                }
            }
            threads.forEach { $0.start() }
            usleep(200_000)
            nodes[0].process.send(signal: SIGKILL)
            while answers.withLock({ $0.count }) < 20, Date().timeIntervalSince(started) < 30 { usleep(20_000) }
            let got = answers.withLock { $0 }
            #expect(got.count == 20 && got.allSatisfy { $0.status == 200 && $0.exact })
            // The dead leader's request and the one that took over; before, every waiting request
            // went to the origin by itself once the 10 s lock expired.
            #expect(origin.count("/slow") == 2, "origin requests: \(origin.count("/slow"))")
            let slowest = got.map(\.seconds).max() ?? 0
            #expect(slowest < 8, "the waiting requests were answered after \(slowest) s")
        }
    }

    @Test(
        "a Redis user denied the key prefix (NOPERM): requests answered from the origin, one log line saying what to fix, errors counted by kind"
    )
    func deniedKeysAreLoggedAndCounted() async throws {
        try await offPool {
            let redis = try RedisServer()
            try redis.cli(["ACL", "SETUSER", "limited", "on", ">pw", "~other:*", "&*", "+@all"])
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/a") { _ in .init(headers: [("Cache-Control", "max-age=300")], body: "from the origin") }
            let node = try ServeProcess(
                [
                    "--origin", origin.baseURL, "--redis", "redis://limited:pw@\(redis.address)", "--redis-prefix",
                    "denied:",
                    "--redis-timeout", "1000",
                ], memoryOnly: true)
            let client = try TestClient()
            for _ in 0..<3 { #expect(try client.send("GET", node.baseURL + "/a").text == "from the origin") }
            let lines = node.standardError.split(separator: "\n").filter { $0.contains("NOPERM") }
            #expect(lines.count == 1, "\(node.standardError)")
            #expect(lines.first?.contains("~denied:*") == true)
            let metrics = try client.send("GET", node.baseURL + "/_httpcache/metrics").text
            let value = metrics.split(separator: "\n").first {
                $0.hasPrefix("httpcache_redis_errors_by_kind_total{kind=\"NOPERM\"} ")
            }
            #expect((value?.split(separator: " ").last.flatMap { Int($0) } ?? 0) > 0, "\(metrics)")
            let errors = metrics.split(separator: "\n").first { $0.hasPrefix("httpcache_redis_errors_total ") }
            #expect((errors?.split(separator: " ").last.flatMap { Int($0) } ?? 0) > 0)
        }
    }
}
#endif
