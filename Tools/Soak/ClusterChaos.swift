#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import Glibc

/// Chaos on the soak's Redis Cluster while the proxies use it, on two threads:
/// - every `killEvery` seconds a master is SIGKILLed; once its replica has taken over, it is
///   started again (`restartDelay` seconds later) and rejoins as a replica; the next kill waits
///   until every server says `cluster_state:ok` again;
/// - every second `deletionsPerSecond` random body chunks (`P{T}c:ID:N`) are deleted from the
///   masters, and every 5 s one entry's record (the field of its hash `P{T}e:H` named by the
///   variant key, empty here) is replaced by junk: the store reads a record it cannot parse.
final class ClusterChaos: Sendable {
    /// What the chaos did.
    struct Counters: Sendable {
        var kills = 0
        /// Kills after which a replica of the killed master said `role:master`.
        var failovers = 0
        var restarts = 0
        /// Restarted servers that came back as a replica, with the cluster whole again.
        var rejoined = 0
        /// The longest time from a kill to the cluster whole again, in seconds.
        var longestRecovery = 0.0
        var chunksDeleted = 0
        var recordsJunked = 0
        /// Chaos that could not be done as asked (the cluster did not recover in time).
        var problems: [String] = []
    }

    /// One line of `CLUSTER NODES`.
    private struct Node {
        var id: String
        var server: RedisServer
        var isMaster: Bool
        var failed: Bool
        /// The master's id for a replica.
        var masterID: String?
        var hasSlots: Bool
    }

    let cluster: RedisCluster
    /// The proxies' `--redis-prefix`.
    let prefix: String
    let killEvery: Double
    let restartDelay = 3.0
    let deletionsPerSecond: Double
    private let counters = Locked(Counters())
    private let running = Locked(true)
    private let threads = Locked(0)

    init(cluster: RedisCluster, prefix: String, killEvery: Double, deletionsPerSecond: Double) {
        self.cluster = cluster
        self.prefix = prefix
        self.killEvery = killEvery
        self.deletionsPerSecond = deletionsPerSecond
    }

    var counted: Counters { counters.withLock { $0 } }

    /// Starts both threads; no kill begins in the last 45 s before `deadline`, so that every
    /// kill's recovery is seen.
    func start(deadline: Double) {
        if killEvery > 0 { spawn { self.killLoop(deadline: deadline) } }
        if deletionsPerSecond > 0 { spawn { self.deleteLoop() } }
    }

    /// Stops the chaos and waits for its threads (a kill under way stops waiting for the
    /// cluster, and the killed server is not started again).
    func stop() {
        running.withLock { $0 = false }
        _ = threads.withLock(when: { $0 == 0 }) { _ in true }
    }

    private var isRunning: Bool { running.withLock { $0 } }

    private func spawn(_ body: @escaping @Sendable () -> Void) {
        threads.withLock { $0 += 1 }
        Thread.detachNewThread {
            body()
            self.threads.withLock { $0 -= 1 }
            self.threads.wakeWaiters()
        }
    }

    private func problem(_ text: String) {
        counters.withLock { $0.problems.append(text) }
    }

    // MARK: Kills

    private func killLoop(deadline: Double) {
        var next = MonotonicClock.seconds() + killEvery
        while isRunning {
            let now = MonotonicClock.seconds()
            guard now >= next else {
                usleep(200_000)
                continue
            }
            guard deadline - now > 45 else { return }
            killOne()
            next = max(next + killEvery, MonotonicClock.seconds())
        }
    }

    /// Kills a random master that has a replica, waits for the replica to take over, starts the
    /// killed server again and waits until it is a replica and the cluster is whole.
    private func killOne() {
        let nodes = topology()
        let candidates = nodes.filter { master in
            master.isMaster && !master.failed && master.hasSlots
                && nodes.contains { $0.masterID == master.id && !$0.failed }
        }
        guard let victim = candidates.randomElement() else {
            problem("no master with a live replica to kill (\(nodes.count) servers answered CLUSTER NODES)")
            return
        }
        let replicas = nodes.filter { $0.masterID == victim.id }.map(\.server)
        victim.server.kill()
        let killedAt = MonotonicClock.seconds()
        counters.withLock { $0.kills += 1 }
        if waitFor(seconds: 30, { replicas.contains { Self.replication($0).contains("role:master") } }) {
            counters.withLock { $0.failovers += 1 }
        } else if isRunning {
            problem("no replica of the master on port \(victim.server.port) took over within 30 s of its kill")
        }
        _ = waitFor(seconds: restartDelay) { false }
        guard isRunning else { return }
        do {
            try victim.server.start()
            counters.withLock { $0.restarts += 1 }
        } catch {
            problem("the killed master on port \(victim.server.port) could not be started again: \(error)")
            return
        }
        // Two minutes: a full sync of 256 MB on a busy machine has taken close to one.
        let rejoined = waitFor(seconds: 120) {
            let info = Self.replication(victim.server)
            return info.contains("role:slave") && info.contains("master_link_status:up") && self.isHealthy()
        }
        if rejoined {
            let recovery = MonotonicClock.seconds() - killedAt
            counters.withLock {
                $0.rejoined += 1
                $0.longestRecovery = max($0.longestRecovery, recovery)
            }
        } else if isRunning {
            let replication = Self.replication(victim.server).split(whereSeparator: \.isNewline).filter {
                $0.hasPrefix("role:") || $0.hasPrefix("master_link_status:") || $0.hasPrefix("master_sync_in_progress:")
                    || $0.hasPrefix("master_port:")
            }
            let states = cluster.servers.map { server in
                let info = (try? server.cli(["CLUSTER", "INFO"])) ?? ""
                let state = info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("cluster_state:") }
                return "\(server.port) \(state.map { String($0.dropFirst("cluster_state:".count)) } ?? "down")"
            }
            let log = (try? String(contentsOfFile: victim.server.directory.path + "/redis.log", encoding: .utf8)) ?? ""
            problem(
                "the server on port \(victim.server.port) did not rejoin as a replica with the cluster whole "
                    + "(cluster_state:ok) within 120 s of its restart: \(replication.joined(separator: ", ")); "
                    + states.joined(separator: ", ") + "; the end of its log:\n      "
                    + log.split(whereSeparator: \.isNewline).suffix(12).joined(separator: "\n      "))
        }
    }

    /// Whether `condition` held within `seconds` (looked at every 0.2 s); false at once when the
    /// chaos is stopped.
    private func waitFor(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = MonotonicClock.seconds() + seconds
        while isRunning {
            if condition() { return true }
            guard MonotonicClock.seconds() < deadline else { return false }
            usleep(200_000)
        }
        return false
    }

    /// Whether every server that answers says `cluster_state:ok`.
    private func isHealthy() -> Bool {
        cluster.servers.allSatisfy { server in
            let info = (try? server.cli(["CLUSTER", "INFO"])) ?? ""
            return !info.contains("cluster_state:") || info.contains("cluster_state:ok")
        }
    }

    private static func replication(_ server: RedisServer) -> String {
        (try? server.cli(["INFO", "replication"])) ?? ""
    }

    /// The cluster as the first server that answers sees it.
    private func topology() -> [Node] {
        for server in cluster.servers {
            guard let text = try? server.cli(["CLUSTER", "NODES"]), text.contains("myself") else { continue }
            return text.split(separator: "\n").compactMap { line in
                let fields = line.split(separator: " ").map(String.init)
                guard fields.count >= 8,
                    let port = fields[1].split(separator: "@").first?.split(separator: ":").last.flatMap({ Int($0) }),
                    let member = cluster.servers.first(where: { $0.port == port })
                else { return nil }
                let flags = fields[2].split(separator: ",")
                return Node(
                    id: fields[0], server: member, isMaster: flags.contains("master"),
                    failed: flags.contains("fail") || flags.contains("fail?"),
                    masterID: fields[3] == "-" ? nil : fields[3], hasSlots: fields.count > 8)
            }
        }
        return []
    }

    // MARK: Deletions

    private func deleteLoop() {
        var credit = 0.0
        var second = 0
        while isRunning {
            let started = MonotonicClock.seconds()
            second += 1
            credit += deletionsPerSecond
            let deletions = Int(credit)
            credit -= Double(deletions)
            let junk = second % 5 == 0
            let masters = topology().filter { $0.isMaster && !$0.failed }.map(\.server)
            if deletions > 0 {
                var chunks = masters.flatMap { master in scan(master, "*}c:*").map { (master, $0) } }
                chunks.shuffle()
                for (master, key) in chunks.prefix(deletions) where (try? master.command("DEL", key)) == ":1" {
                    counters.withLock { $0.chunksDeleted += 1 }
                }
            }
            if junk {
                let entries = masters.flatMap { master in scan(master, "*}e:*").map { (master, $0) } }
                // Only a record that is still there (HSET answers 0 when it replaces a field).
                if let (master, key) = entries.randomElement(),
                    (try? master.command([Array("HSET".utf8), Array(key.utf8), [], Array("junk".utf8)])) == ":0"
                {
                    counters.withLock { $0.recordsJunked += 1 }
                }
            }
            let rest = started + 1 - MonotonicClock.seconds()
            if rest > 0 { usleep(UInt32(rest * 1_000_000)) }
        }
    }

    /// The keys under the prefix that match `pattern` on `server` (SCAN, never KEYS).
    private func scan(_ server: RedisServer, _ pattern: String) -> [String] {
        let output = (try? server.cli(["--scan", "--pattern", prefix + pattern])) ?? ""
        return output.split(separator: "\n").map(String.init).filter { $0.hasPrefix(prefix) }
    }
}
#endif
