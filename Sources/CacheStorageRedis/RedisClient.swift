import CacheStorage
import CacheSystem
import Dispatch

/// Where a Redis store connects and how it behaves towards Redis.
public struct RedisConfiguration: Sendable {
    /// One Redis server.
    public struct Node: Hashable, Sendable, CustomStringConvertible {
        public var host: String
        public var port: Int

        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }

        public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    }

    /// The server (standalone), or the servers asked for the Cluster's slot map.
    public var nodes: [Node]
    /// Whether the nodes are a Redis Cluster: keys are routed by hash slot, and `MOVED`/`ASK`
    /// redirects and failovers are followed.
    public var isCluster: Bool
    /// The ACL user (`AUTH user password`); `nil` for the default user.
    public var user: String?
    /// The password; `nil` when Redis asks for none.
    public var password: String?
    /// The logical database (standalone only).
    public var database: Int
    /// Put before every key, so several caches can share one Redis.
    public var keyPrefix: String
    /// The key entries are sealed with in Redis (AES-256-GCM): records, bodies, and keyed hashes
    /// (HMAC-SHA-256) in key and field names instead of hashes of URLs, so a `DUMP` of the keys
    /// holds neither URLs nor bodies. `nil` (the default) stores them in the clear. Every cache
    /// sharing the prefix must use the same key: to another key, entries are misses.
    public var encryptionKey: EncryptionKey?
    /// A command that takes longer is given up for that request (seconds); the cache goes on
    /// without Redis for it.
    public var commandTimeout: Double
    /// How long making a connection may take (seconds).
    public var connectTimeout: Double
    /// The largest body stored; a larger one is refused with `StorageError.tooLarge`
    /// (and the response passed on unstored). Default 64 MiB.
    public var maximumEntrySize: Int64 = 64 << 20
    /// How long an entry is kept after it can no longer be served without the origin (past its
    /// freshness, `stale-while-revalidate` and `stale-if-error`), for revalidation (seconds).
    public var keepTime: Double
    /// Receives one line per change of Redis' state (reachable, unreachable), never one per request.
    public var log: @Sendable (String) -> Void

    /// A configuration for `nodes`.
    public init(
        nodes: [Node], isCluster: Bool = false, user: String? = nil, password: String? = nil, database: Int = 0,
        keyPrefix: String = "httpcache:", commandTimeout: Double = 0.05, connectTimeout: Double = 0.1,
        keepTime: Double = 86_400, log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.nodes = nodes
        self.isCluster = isCluster
        self.user = user
        self.password = password
        self.database = database
        self.keyPrefix = keyPrefix
        self.commandTimeout = commandTimeout
        self.connectTimeout = connectTimeout
        self.keepTime = keepTime
        self.log = log
    }

    /// Why a Redis address could not be used.
    public struct InvalidAddress: Error, CustomStringConvertible {
        public var description: String
    }

    /// Reads `redis://[user:password@]host[:port][/database]` (port 6379 by default).
    public init(url: String) throws(InvalidAddress) {
        let prefix = "redis://"
        guard url.hasPrefix(prefix) else {
            throw InvalidAddress(
                description: "\(url) is not a Redis URL; write redis://[user:password@]host:port[/database]")
        }
        var rest = Substring(url.dropFirst(prefix.count))
        var user: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                user = credentials[..<colon].isEmpty ? nil : String(credentials[..<colon]).removingPercentEncoding
                password = String(credentials[credentials.index(after: colon)...]).removingPercentEncoding
            } else {
                password = String(credentials).removingPercentEncoding
            }
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let text = rest[rest.index(after: slash)...]
            guard text.isEmpty || Int(text).map({ $0 >= 0 }) == true else {
                throw InvalidAddress(description: "\(url): the database must be a number such as /0")
            }
            database = Int(text) ?? 0
            rest = rest[..<slash]
        }
        let node = try Self.node(String(rest), in: url)
        self.init(nodes: [node], user: user, password: password, database: database)
    }

    /// Reads a Cluster's seed nodes, `host:port[,host:port...]`.
    public init(clusterNodes list: String) throws(InvalidAddress) {
        var nodes: [Node] = []
        for item in list.split(separator: ",") { nodes.append(try Self.node(String(item), in: list)) }
        guard !nodes.isEmpty else {
            throw InvalidAddress(description: "no Redis Cluster node given; write HOST:PORT[,HOST:PORT...]")
        }
        self.init(nodes: nodes, isCluster: true)
    }

    private static func node(_ text: String, in whole: String) throws(InvalidAddress) -> Node {
        var host = text
        var port = 6379
        if let colon = text.lastIndex(of: ":"), !text.hasSuffix("]") || text.hasPrefix("[") {
            let portText = text[text.index(after: colon)...]
            guard let number = Int(portText), (1...65_535).contains(number) else {
                throw InvalidAddress(description: "\(whole): \(portText) is not a port number (1-65535)")
            }
            port = number
            host = String(text[..<colon])
        }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw InvalidAddress(description: "\(whole): no host name") }
        return Node(host: host, port: port)
    }
}

extension String {
    /// `%XX` escapes decoded (credentials in a URL); `nil` for a broken escape.
    fileprivate var removingPercentEncoding: String? {
        var result: [UInt8] = []
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                result.append(byte)
                continue
            }
            guard let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            else { return nil }
            result.append(value)
        }
        return String(decoding: result, as: UTF8.self)
    }
}

/// What the store's Redis client counted since it started.
public struct RedisMetrics: Hashable, Sendable {
    /// Round trips made (a pipeline is one).
    public var roundTrips: Int = 0
    /// Round trips that failed: no connection, a broken one, or an error reply.
    public var errors: Int = 0
    /// Round trips given up after the command timeout.
    public var timeouts: Int = 0
    /// Total seconds spent in round trips that succeeded.
    public var roundTripSeconds: Double = 0
    /// The slowest round trip that succeeded (seconds).
    public var slowestRoundTrip: Double = 0
    /// Invalidations received from other caches over pub/sub.
    public var invalidationsReceived: Int = 0
    /// Invalidations sent to other caches.
    public var invalidationsSent: Int = 0
    /// Misses that waited for another cache's origin request instead of making their own.
    public var collapsedAcrossNodes: Int = 0
    /// Lookups the event loops sent on connections of their own, several to a round trip
    /// (``roundTrips`` counts each of their writes once).
    public var lookupsOnLoops: Int = 0
    /// Failures by kind: `timeout`, `connection`, `protocol`, and each error reply by its first
    /// word (`NOPERM`, `OOM`, `CLUSTERDOWN`, `READONLY`, …; at most 32 kinds, then `other`).
    public var errorsByKind: [String: Int] = [:]

    /// Counts one failure of `kind`.
    mutating func countError(_ kind: String) {
        let known = errorsByKind[kind] != nil || errorsByKind.count < 32
        errorsByKind[known ? kind : "other", default: 0] += 1
    }

    /// The mean round trip (seconds), 0 before the first.
    public var meanRoundTrip: Double {
        let good = roundTrips - errors - timeouts
        return good > 0 ? roundTripSeconds / Double(good) : 0
    }
}

/// Talks to a standalone Redis or a Redis Cluster: a pool of connections per server,
/// pipelines routed by hash slot, redirects followed, and servers that fail skipped for a
/// backoff time so that requests do not wait for a Redis that is away.
final class RedisClient: Sendable {
    let configuration: RedisConfiguration

    private struct NodeState {
        var idle: [RedisConnection] = []
        var reachable = true
        var failures = 0
        var retryAt = 0.0
    }

    private struct State {
        var nodes: [RedisConfiguration.Node: NodeState] = [:]
        /// The Cluster's slot map: the master serving each of the 16,384 slots.
        var slots: [RedisConfiguration.Node?] = []
        var lastSlotRefresh = -1e9
        /// A slot map read runs on a thread of its own (``refreshSlotsInBackground()``).
        var refreshingInBackground = false
        var metrics = RedisMetrics()
        /// Whether the last round trip anywhere succeeded (for the one log line per change).
        var reachable = true
        /// `false` while a caller checks the connection and reports the outcome itself.
        var logs = true
        /// Per error reply kind: when it was last logged, and how many came since.
        var errorLog: [String: (loggedAt: Double, since: Int)] = [:]
    }

    private let state: Locked<State>

    init(configuration: RedisConfiguration) {
        self.configuration = configuration
        var initial = State()
        if configuration.isCluster { initial.slots = Array(repeating: nil, count: 16_384) }
        state = Locked(initial)
    }

    var metrics: RedisMetrics { state.withLock { $0.metrics } }

    func count(_ update: (inout RedisMetrics) -> Void) { state.withLock { update(&$0.metrics) } }

    /// Whether Redis answered the last command sent.
    var isReachable: Bool { state.withLock { $0.reachable } }

    /// Redis did not answer before this client was used (its owner said so already): the next
    /// failure is not logged again, the first answer is.
    func assumeUnreachable() { state.withLock { $0.reachable = false } }

    /// Runs `body` without logging changes of Redis' state (its caller reports the outcome).
    func quietly<Result>(_ body: () throws(RedisFailure) -> Result) throws(RedisFailure) -> Result {
        state.withLock { $0.logs = false }
        defer { state.withLock { $0.logs = true } }
        return try body()
    }

    /// Runs `commands` in one pipeline on the server holding `slotKey` (a key of them all; any
    /// server when `nil`); follows `MOVED` and `ASK`. Error replies are returned, except
    /// redirects.
    func execute(_ commands: [[[UInt8]]], slotKey: [UInt8]?) throws(RedisFailure) -> [RESPValue] {
        var node = try route(slotKey)
        var asking = false
        for _ in 0..<4 {
            let sent = asking ? commands.flatMap { [[bytes("ASKING")], $0] } : commands
            var replies: [RESPValue]
            do {
                replies = try execute(sent, on: node)
            } catch {
                // Which of `commands` a reply too large to read answered (each after its `ASKING`).
                var error = error
                if asking { error.oversized?.reply /= 2 }
                throw error
            }
            if asking { replies = stride(from: 1, to: replies.count, by: 2).map { replies[$0] } }
            guard configuration.isCluster,
                let message = replies.lazy.compactMap(\.errorMessage).first(where: Redirect.isRedirect)
            else { return replies }
            guard let redirect = Redirect(message) else {
                throw RedisFailure(.reply, "Redis sent a redirect that could not be read: \(message)")
            }
            asking = redirect.asking
            if !asking {
                setMaster(redirect.node, ofSlot: redirect.slot)
                refreshSlots(force: false)
            }
            node = redirect.node
        }
        throw RedisFailure(.reply, "Redis Cluster kept redirecting; its slots are being moved")
    }

    /// A Cluster's `MOVED slot host:port` or `ASK slot host:port` error reply.
    struct Redirect: Sendable {
        /// `ASK`: this one command goes to ``node`` (after `ASKING`); `MOVED`: the slot is there now.
        var asking: Bool
        var slot: Int
        var node: RedisConfiguration.Node

        /// The redirect `message` says; `nil` when it is none, or cannot be read.
        init?(_ message: String) {
            let parts = message.split(separator: " ")
            guard parts.count == 3, parts[0] == "MOVED" || parts[0] == "ASK", let slot = Int(parts[1]),
                (0..<16_384).contains(slot),
                let node = try? RedisConfiguration(clusterNodes: String(parts[2])).nodes.first
            else { return nil }
            asking = parts[0] == "ASK"
            self.slot = slot
            self.node = node
        }

        static func isRedirect(_ message: String) -> Bool {
            message.hasPrefix("MOVED ") || message.hasPrefix("ASK ")
        }
    }

    /// The master of `key`'s slot in the slot map as it stands, without a round trip; `nil`
    /// when the map names none (not read yet, or the slot is not served: a failover).
    func knownMaster(of key: [UInt8]) -> RedisConfiguration.Node? {
        let slot = Int(HashSlot.slot(of: key))
        return state.withLock { $0.slots.isEmpty ? nil : $0.slots[slot] }
    }

    /// Notes a `MOVED` reply an event loop received: the slot's master is the one it names
    /// from now on, and the whole map is read again off the loop (a slot seldom moves alone).
    func moved(_ redirect: Redirect) {
        setMaster(redirect.node, ofSlot: redirect.slot)
        refreshSlotsInBackground()
    }

    /// Puts `node` in the slot map as the master of `slot`, until the map is read again.
    func setMaster(_ node: RedisConfiguration.Node, ofSlot slot: Int) {
        state.withLock { $0.slots[slot] = node }
    }

    /// Reads the slot map again on a thread of its own (``refreshSlots(force:)``, at most every
    /// 100 ms; one such read at a time): for an event loop, which never waits for a round trip.
    func refreshSlotsInBackground() {
        guard configuration.isCluster else { return }
        let start = state.withLock { state -> Bool in
            guard !state.refreshingInBackground else { return false }
            state.refreshingInBackground = true
            return true
        }
        guard start else { return }
        DispatchQueue.global().async { [self] in
            refreshSlots(force: false)
            state.withLock { $0.refreshingInBackground = false }
        }
    }

    /// The server for `slotKey`.
    private func route(_ slotKey: [UInt8]?) throws(RedisFailure) -> RedisConfiguration.Node {
        guard configuration.isCluster else { return configuration.nodes[0] }
        let slot = slotKey.map { Int(HashSlot.slot(of: $0)) }
        // The slot's master, else any known node (its MOVED reply then says where to go).
        let known = { [state] in
            state.withLock { state in slot.flatMap { state.slots[$0] } ?? state.slots.lazy.compactMap { $0 }.first }
        }
        if let node = known() { return node }
        refreshSlots(force: true)
        if let node = known() { return node }
        throw RedisFailure(.connection, "no Redis Cluster node answered with its slot map")
    }

    /// Every master of the Cluster (the one server when standalone).
    func masters() throws(RedisFailure) -> [RedisConfiguration.Node] {
        guard configuration.isCluster else { return configuration.nodes }
        refreshSlots(force: true)
        let nodes = state.withLock { Set($0.slots.compactMap { $0 }) }
        guard !nodes.isEmpty else {
            throw RedisFailure(.connection, "no Redis Cluster node answered with its slot map")
        }
        return Array(nodes)
    }

    /// Asks a server for the Cluster's slot map (`CLUSTER SLOTS`); at most every 100 ms unless forced.
    func refreshSlots(force: Bool) {
        guard configuration.isCluster else { return }
        let (known, due) = state.withLock { state -> ([RedisConfiguration.Node], Bool) in
            let now = MonotonicClock.seconds()
            guard force || now - state.lastSlotRefresh > 0.1 else { return ([], false) }
            state.lastSlotRefresh = now
            var known = Array(Set(state.slots.compactMap { $0 }))
            for seed in configuration.nodes where !known.contains(seed) { known.append(seed) }
            return (known, true)
        }
        guard due else { return }
        for node in known {
            guard let reply = try? execute([[bytes("CLUSTER"), bytes("SLOTS")]], on: node).first,
                let ranges = reply.array
            else { continue }
            var slots = [RedisConfiguration.Node?](repeating: nil, count: 16_384)
            for range in ranges {
                guard let fields = range.array, fields.count >= 3, let low = fields[0].integer,
                    let high = fields[1].integer, let master = fields[2].array, master.count >= 2,
                    let hostBytes = master[0].bytes, let port = master[1].integer, low >= 0, high < 16_384, low <= high
                else { continue }
                var host = String(decoding: hostBytes, as: UTF8.self)
                if host.isEmpty { host = node.host }
                let target = RedisConfiguration.Node(host: host, port: Int(port))
                for slot in Int(low)...Int(high) { slots[slot] = target }
            }
            guard slots.contains(where: { $0 != nil }) else { continue }
            state.withLock { $0.slots = slots }
            return
        }
    }

    /// One pipeline on one server, over a pooled connection.
    func execute(_ commands: [[[UInt8]]], on node: RedisConfiguration.Node) throws(RedisFailure) -> [RESPValue] {
        let start = MonotonicClock.seconds()
        let connection = try checkOut(node)
        do {
            let replies = try connection.execute(commands, timeout: configuration.commandTimeout)
            answered(
                node, startedAt: start, elapsed: MonotonicClock.seconds() - start,
                refusals: Self.errorReplies(replies), returning: connection)
            return replies
        } catch {
            failed(node, error)
            throw error
        }
    }

    /// Counts a round trip to `node` that was answered (`refusals`: its error replies) and puts
    /// `connection` back in the pool; logs when Redis answers again, and the refusals.
    func answered(
        _ node: RedisConfiguration.Node, startedAt start: Double, elapsed: Double, refusals: [String],
        returning connection: RedisConnection? = nil
    ) {
        let (changed, toLog) = state.withLock { state -> (Bool, [String]) in
            if let connection { state.nodes[node, default: NodeState()].idle.append(connection) }
            state.nodes[node, default: NodeState()].failures = 0
            state.nodes[node]!.reachable = true
            state.metrics.roundTrips += 1
            var toLog: [String] = []
            if refusals.isEmpty {
                state.metrics.roundTripSeconds += elapsed
                state.metrics.slowestRoundTrip = max(state.metrics.slowestRoundTrip, elapsed)
            } else {
                state.metrics.errors += 1
                toLog = refusals.compactMap { counted(&state, refusal: $0, now: start) }
            }
            defer { state.reachable = true }
            return (!state.reachable && state.logs, toLog)
        }
        if changed { configuration.log("redis: \(node) answers again; the shared tier is back in use") }
        for line in toLog { configuration.log("redis: \(node) \(line)") }
    }

    /// An idle connection to `node` from the pool, or a new one (``newConnection(to:)``).
    private func checkOut(_ node: RedisConfiguration.Node) throws(RedisFailure) -> RedisConnection {
        // In place: the pool's array is not copied.
        if let pooled = state.withLock({ $0.nodes[node]?.idle.popLast() }) { return pooled }
        return try newConnection(to: node)
    }

    /// A new connection to `node`, authenticated and on the configured database; a failure is
    /// counted, and a server that failed a moment ago is not tried before its backoff passed.
    /// `onLoop`: the caller is an event loop, which the slot map read a failure asks for does
    /// not hold (it is made off the loop).
    func newConnection(to node: RedisConfiguration.Node, onLoop: Bool = false) throws(RedisFailure)
        -> RedisConnection
    {
        let now = MonotonicClock.seconds()
        let mayConnect = state.withLock { state in
            state.nodes[node].map { $0.reachable || now >= $0.retryAt } ?? true
        }
        guard mayConnect else { throw RedisFailure(.unavailable, "Redis at \(node) is unreachable; retrying later") }
        do {
            return try RedisConnection(
                host: node.host, port: node.port, user: configuration.user, password: configuration.password,
                database: configuration.isCluster ? 0 : configuration.database, timeout: configuration.connectTimeout)
        } catch {
            failed(node, error, onLoop: onLoop)
            throw error
        }
    }

    /// Counts an error reply; the lines to log about it: the first of its kind, then one a
    /// minute with how many came since.
    private func counted(_ state: inout State, refusal message: String, now: Double) -> String? {
        let kind = String(message.prefix { $0 != " " }.prefix(32))
        state.metrics.countError(kind)
        var entry = state.errorLog[kind] ?? (loggedAt: -1e9, since: 0)
        entry.since += 1
        defer { state.errorLog[kind] = entry }
        guard now - entry.loggedAt >= 60 else { return nil }
        let count = entry.since > 1 ? " (\(entry.since) times since the last line)" : ""
        entry = (now, 0)
        return "answered \(message)\(count); \(Self.advice(kind, prefix: configuration.keyPrefix))"
    }

    /// Counts a failure; a broken or refused connection marks the server unreachable for a
    /// backoff time (0.1 s doubling to 5 s), and a Cluster's slot map is read again (off the
    /// caller's thread when `onLoop`). Logs only when Redis' state changes.
    func failed(_ node: RedisConfiguration.Node, _ error: RedisFailure, onLoop: Bool = false) {
        guard error.kind != .unavailable else { return }
        let changed = state.withLock { state -> Bool in
            state.metrics.roundTrips += 1
            if error.kind == .timeout { state.metrics.timeouts += 1 } else { state.metrics.errors += 1 }
            let kind =
                switch error.kind {
                case .timeout: "timeout"
                case .connection, .unavailable: "connection"
                case .reply: "protocol"
                }
            state.metrics.countError(kind)
            guard error.kind == .connection else { return false }
            var entry = state.nodes[node, default: NodeState()]
            entry.idle.removeAll()
            entry.failures += 1
            entry.reachable = false
            entry.retryAt = MonotonicClock.seconds() + min(5, 0.1 * Double(1 << min(entry.failures - 1, 6)))
            state.nodes[node] = entry
            defer { state.reachable = false }
            return state.reachable && state.logs
        }
        if changed {
            configuration.log(
                "redis: \(error); requests are answered from the local tier and the origin until it is back")
        }
        if configuration.isCluster && error.kind == .connection {
            if onLoop { refreshSlotsInBackground() } else { refreshSlots(force: false) }
        }
    }
}

extension RedisClient {
    /// The error replies among `replies` and the replies inside them (a transaction's), but
    /// redirects, which the client follows.
    static func errorReplies(_ replies: [RESPValue]) -> [String] {
        var messages: [String] = []
        for reply in replies {
            if let message = reply.errorMessage {
                if !Redirect.isRedirect(message) { messages.append(message) }
            } else if let inner = reply.array {
                messages += inner.compactMap(\.errorMessage)
            }
        }
        return messages
    }

    /// What an operator does about an error reply of `kind`.
    static func advice(_ kind: String, prefix: String) -> String {
        switch kind {
        case "NOPERM", "NOAUTH", "WRONGPASS":
            "check the Redis user (--redis URL) and its ACL: the store needs keys ~\(prefix)*, the channel "
                + "&\(prefix)invalidate and the commands +@read +@write +@scripting +@pubsub +@keyspace"
        case "OOM":
            "Redis is full and evicts nothing: set maxmemory-policy allkeys-lru (or volatile-lru), or raise maxmemory"
        case "WRONGTYPE":
            "a key under the prefix \(prefix) holds another type than this cache keeps there; the cache removes "
                + "it and stores again: keep other writers out of the prefix (a --redis-prefix of each cache's own)"
        case "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "LOADING", "READONLY":
            "the Redis Cluster is failing over or loading; requests go to the origin meanwhile"
        default:
            "see the Redis server's log"
        }
    }
}

/// Redis Cluster's key → slot function: CRC16 (XMODEM) of the key, or of its hash tag (the
/// part between the first `{` and the next `}` when not empty), modulo 16,384.
enum HashSlot {
    static func slot(of key: [UInt8]) -> UInt16 {
        var hashed = key[...]
        if let open = key.firstIndex(of: UInt8(ascii: "{")),
            let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1
        {
            hashed = key[(open + 1)..<close]
        }
        return crc16(hashed) & 0x3FFF
    }

    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        }
        return crc
    }
}
