#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// Real `httpcache serve` processes with no local tier and one event loop on a real Redis
/// Cluster (three masters, a replica each): each lookup is sent from the loop on its
/// connection to its key's master; a master killed (its replica promoted) and a slot migrated
/// (`ASK`, then `MOVED`) while requests run. Every body byte-exact throughout.
@Suite("Redis Cluster lookups on the event loop: routed by slot, redirects and failovers followed", .serialized)
struct RedisClusterOnLoopTests {
    /// A proxy with no local tier and one loop on `cluster`, under `prefix`.
    static func node(_ origin: LoopbackOrigin, _ cluster: RedisCluster, prefix: String) throws -> ServeProcess {
        try ServeProcess(
            [
                "--origin", origin.baseURL, "--redis-cluster", cluster.seeds, "--redis-prefix", prefix,
                "--local-memory", "0", "--loops", "1", "--redis-timeout", "2000",
            ], memoryOnly: true)
    }

    static func metric(_ node: ServeProcess, _ name: String) throws -> Double {
        try RedisOnLoopTests.metric(node, name)
    }

    /// The samples of `httpcache_redis_errors_by_kind_total`, by kind.
    static func errorsByKind(_ node: ServeProcess) throws -> [String: Double] {
        let page = try TestClient().send("GET", node.baseURL + "/_httpcache/metrics").text
        var kinds: [String: Double] = [:]
        for line in page.split(separator: "\n") where line.hasPrefix("httpcache_redis_errors_by_kind_total{") {
            guard let open = line.firstIndex(of: "\""),
                let close = line[line.index(after: open)...].firstIndex(of: "\""),
                let value = line.split(separator: " ").last.flatMap({ Double($0) })
            else { continue }
            kinds[String(line[line.index(after: open)..<close])] = value
        }
        return kinds
    }

    /// Requests from `clients` threads, each going round `paths` from its own place, until
    /// `stop` is set (at most `seconds`): what was not byte-exact, how many were answered and
    /// how many of those were hits.
    private static func run(
        _ node: ServeProcess, _ paths: [String], clients: Int, seconds: Double, stop: Locked<Bool>
    ) -> (wrong: [String], answered: Int, hits: Int) {
        let wrong = Locked<[String]>([])
        let counts = Locked((answered: 0, hits: 0))
        let finished = DispatchGroup()
        let deadline = Date().addingTimeInterval(seconds)
        for client in 0..<clients {
            finished.enter()
            Thread.detachNewThread {
                defer { finished.leave() }
                guard let connection = try? TestClient() else { return wrong.withLock { $0.append("no client") } }
                var index = client * 7
                while !stop.withLock({ $0 }) && Date() < deadline {
                    let path = paths[index % paths.count]
                    index += 1
                    guard let answer = try? connection.send("GET", node.baseURL + path) else {
                        wrong.withLock { $0.append("\(path): no answer") }
                        continue
                    }
                    if answer.status != 200 || answer.body != RedisOnLoopTests.body(path) {
                        wrong.withLock { $0.append("\(path): \(answer.status), \(answer.body.count) bytes") }
                    }
                    counts.withLock {
                        $0.answered += 1
                        if answer.isHit { $0.hits += 1 }
                    }
                }
            }
        }
        _ = finished.wait(timeout: .now() + seconds + 60)
        let (answered, hits) = counts.withLock { $0 }
        return (wrong.withLock { $0 }, answered, hits)
    }

    /// The key prefix and a reader that finds `paths` in `cluster` (found there `warm` times
    /// each: 0 leaves it cold), stored by a writer (gone now); both with no local tier and one loop.
    static func proxies(_ cluster: RedisCluster, _ origin: LoopbackOrigin, _ paths: [String], warm: Int) throws -> (
        prefix: String, reader: ServeProcess
    ) {
        let prefix = "cloop\(UInt32.random(in: 0...UInt32.max)):"
        let writer = try Self.node(origin, cluster, prefix: prefix)
        #expect(RedisOnLoopTests.load(writer, paths, clients: 1).wrong.isEmpty)
        let reader = try Self.node(origin, cluster, prefix: prefix)
        if warm > 0 { #expect(RedisOnLoopTests.load(reader, paths, clients: warm).hits == warm * paths.count) }
        return (prefix, reader)
    }

    /// Requests to `node` from four threads, each going round `paths` from its own place, from
    /// half a second before `change` until a second after it: what was not byte-exact, how many
    /// were answered and how many of those were hits.
    static func whileRunning(_ node: ServeProcess, _ paths: [String], _ change: () throws -> Void) throws -> (
        wrong: [String], answered: Int, hits: Int
    ) {
        let stop = Locked(false)
        let during = Locked<(wrong: [String], answered: Int, hits: Int)?>(nil)
        let load = Thread { during.withLock { $0 = Self.run(node, paths, clients: 4, seconds: 60, stop: stop) } }
        load.start()
        Thread.sleep(forTimeInterval: 0.5)
        let finish = {
            stop.withLock { $0 = true }
            let deadline = Date().addingTimeInterval(90)
            while during.withLock({ $0 == nil }) && Date() < deadline { usleep(20_000) }
            return during.withLock { $0 }
        }
        do { try change() } catch {
            _ = finish()
            throw error
        }
        Thread.sleep(forTimeInterval: 1)
        let result = try #require(finish())
        #expect(result.wrong.isEmpty, "\(result.wrong.prefix(3))")
        #expect(result.answered > 0)
        return result
    }

    @Test("two proxies on one Cluster: hits looked up from the loop on each master's connection, byte-exact, pipelined")
    func hitsThroughTwoProxies() async throws {
        try await offPool {
            let cluster = try RedisCluster.shared()
            let origin = try RedisOnLoopTests.origin()
            defer { origin.stop() }
            let paths = (0..<60).map { "/cluster-hit/\($0)" }
            // A reader that never saw them: each of its hits is a lookup in the Cluster.
            let (prefix, reader) = try Self.proxies(cluster, origin, paths, warm: 0)
            let before = try RedisOnLoopTests.loopCounters(reader)
            let (wrong, hits) = RedisOnLoopTests.load(reader, paths, clients: 24)
            #expect(wrong.isEmpty, "\(wrong.prefix(3))")
            #expect(hits == 24 * paths.count)
            #expect(paths.allSatisfy { origin.count($0) == 1 })
            let after = try RedisOnLoopTests.loopCounters(reader)
            let (lookups, trips) = (after.lookups - before.lookups, after.trips - before.trips)
            // At most a few made over the pool while the proxy had not read the slot map yet.
            #expect(lookups >= Double(24 * paths.count - 5), "\(lookups) of \(24 * paths.count) went out from the loop")
            #expect(trips < lookups, "\(trips) round trips for \(lookups) lookups: none were pipelined")
            #expect(try Self.metric(reader, "httpcache_redis_errors_total") == 0)
            // The keys are on every master: the reader's loop had a connection to each.
            let masters = try cluster.servers.filter { try $0.cli(["ROLE"]).hasPrefix("master") }
            #expect(masters.count == 3)
            for master in masters {
                let held = try master.cli(["--scan", "--pattern", "\(prefix)*"])
                #expect(!held.isEmpty, "no key of the test on \(master.address)")
            }
        }
    }

    @Test("a master killed while requests run: no wrong body, misses while its slots are down, loop hits again after")
    func masterKilled() async throws {
        try await offPool {
            let cluster = try RedisCluster()
            let origin = try RedisOnLoopTests.origin()
            defer { origin.stop() }
            let paths = (0..<40).map { "/failover/\($0)" }
            let (_, reader) = try Self.proxies(cluster, origin, paths, warm: 4)
            _ = try Self.whileRunning(reader, paths) {
                try cluster.master(of: "x").kill()
                try cluster.waitUntilHealthy()
            }

            // Once the replica is master: the reader's loop finds every path again (those whose
            // write the replica did not get are stored again on their first request).
            let lookupsBefore = try Self.metric(reader, "httpcache_redis_loop_lookups_total")
            var hits = 0
            for _ in 0..<20 {
                hits = RedisOnLoopTests.load(reader, paths, clients: 2).hits
                if hits == 2 * paths.count { break }
                Thread.sleep(forTimeInterval: 0.5)
            }
            #expect(hits == 2 * paths.count, "hits after the failover: \(hits) of \(2 * paths.count)")
            #expect(try Self.metric(reader, "httpcache_redis_loop_lookups_total") > lookupsBefore)
            let kinds = try Self.errorsByKind(reader)
            #expect(
                kinds["connection", default: 0] + kinds["CLUSTERDOWN", default: 0] + kinds["timeout", default: 0] >= 1,
                "the failover was not counted: \(kinds)")
            #expect(reader.process.isRunning)
        }
    }

    @Test("a slot migrated while requests run (ASK, then MOVED): every lookup of its key still a hit, from the loop")
    func slotMigrated() async throws {
        try await offPool {
            let cluster = try RedisCluster()
            let origin = try RedisOnLoopTests.origin()
            defer { origin.stop() }
            let paths = (0..<40).map { "/migrate/\($0)" }
            let (prefix, reader) = try Self.proxies(cluster, origin, paths, warm: 2)

            // One of the test's entry hashes, its slot and master, and another master to move it to.
            let masters = try cluster.servers.filter { try $0.cli(["ROLE"]).hasPrefix("master") }
            let (source, key) = try #require(
                try masters.lazy.compactMap { master in
                    try master.cli(["--scan", "--pattern", "\(prefix)*}e:*"]).split(separator: "\n").first.map {
                        (master, String($0))
                    }
                }.first)
            let target = try #require(masters.first { $0 !== source })
            let slot = try source.cli(["CLUSTER", "KEYSLOT", key]).trimmingCharacters(in: .whitespacesAndNewlines)
            let id = { (server: RedisServer) in
                try server.cli(["CLUSTER", "MYID"]).trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let (sourceID, targetID) = (try id(source), try id(target))

            let lookupsBefore = try Self.metric(reader, "httpcache_redis_loop_lookups_total")
            let result = try Self.whileRunning(reader, paths) {
                #expect(try target.cli(["CLUSTER", "SETSLOT", slot, "IMPORTING", sourceID]).contains("OK"))
                #expect(try source.cli(["CLUSTER", "SETSLOT", slot, "MIGRATING", targetID]).contains("OK"))
                Thread.sleep(forTimeInterval: 0.5)
                // The slot's keys moved, the slot not yet: the source answers ASK for them.
                let keys = try source.cli(["CLUSTER", "GETKEYSINSLOT", slot, "100"]).split(separator: "\n").map(
                    String.init)
                #expect(keys.contains(key))
                let host = target.address.split(separator: ":")
                let migrated = try source.cli(
                    ["MIGRATE", String(host[0]), String(host[1]), "", "0", "5000", "KEYS"] + keys)
                #expect(migrated.contains("OK"), "\(migrated)")
                Thread.sleep(forTimeInterval: 1)
                // Then the slot: every master says where it is, the source answers MOVED.
                for master in [target, source] + masters.filter({ $0 !== source && $0 !== target }) {
                    _ = try master.cli(["CLUSTER", "SETSLOT", slot, "NODE", targetID])
                }
            }
            // Every lookup found its entry, in the slot's old master or its new one: none was
            // answered as a miss and fetched again.
            #expect(result.hits == result.answered, "\(result.answered - result.hits) misses")
            #expect(paths.allSatisfy { origin.count($0) == 1 })
            let lookups = try Self.metric(reader, "httpcache_redis_loop_lookups_total") - lookupsBefore
            #expect(lookups >= Double(result.answered), "\(lookups) loop lookups for \(result.answered) requests")
            let kinds = try Self.errorsByKind(reader)
            #expect(kinds["MOVED"] == nil && kinds["ASK"] == nil, "redirects not followed: \(kinds)")
            #expect(try target.cli(["EXISTS", key]).contains("1"))
        }
    }
}
#endif
