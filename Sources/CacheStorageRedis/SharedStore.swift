import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

/// The shared tier with a local one in front: what several caches on several machines use to
/// share one Redis (or Redis Cluster).
///
/// - Reads: a primary key whose variants the local memory tier holds, all of them, and which no
///   other cache changed since, is answered locally; otherwise Redis answers and the bodies
///   read whole are kept locally. Every change any cache makes in Redis is announced on
///   pub/sub, and the other caches drop that key from their local tier when the message
///   arrives (within a millisecond or two on a LAN); a read of Redis the message overtook (or
///   this cache's own write of the key) is neither trusted nor kept. While the subscription is
///   down, the local tier is not trusted for what Redis holds; once it is back, the local tier
///   is emptied, since messages may have been missed.
/// - Writes go to Redis and the local tier.
/// - Redis away (not running, unreachable, slower than the command timeout): requests are
///   answered from the local tier, and new responses are stored there only; no request fails
///   because of Redis. One line is logged when Redis goes away and one when it is back.
/// - Misses: concurrent misses for one key on several caches make one origin request
///   (`CollapsingStore`): a lock in Redis, a lease of ``claimLease`` seconds that its holder
///   renews while it fetches; the other caches wait until it is released, at most
///   ``collapseTimeout`` seconds, and then look up again. A holder that dies stops renewing:
///   its lease lapses, and one waiting cache claims the key and fetches it for the others. A
///   lock is released only by its holder (compare-and-set in a Lua script).
public final class SharedStore: CollapsingStore {
    /// The shared tier.
    public let redis: RedisStore
    /// The local tier; `nil` when there is none (every read goes to Redis).
    public let local: MemoryStore?
    /// How long a cache waits for another one's origin request before it makes its own.
    public let collapseTimeout: Double
    /// How long a claim on a key's origin request holds without being renewed (its holder
    /// renews it three times within this while it fetches). A cache that dies mid-fetch frees
    /// the key within this time, and a claim whose `SET` timed out here but ran in Redis later
    /// holds other requests no longer than this.
    public let claimLease: Double

    struct State {
        /// Primary keys whose variants the local tier holds exactly as Redis has them: how many.
        var synced: [String: Int] = [:]
        /// Bumped, for a key (by a hash of it, in 256 buckets), whenever what Redis holds for it
        /// may have changed: an invalidation heard, a write or removal of this cache's own;
        /// ``epochOfAll`` for the whole tier. What was read from Redis before a bump may
        /// predate the change it stands for, so it neither makes the local tier trusted nor is
        /// put in it (``reconcile(_:_:_:since:)``, a body's promotion).
        var epochs = [UInt64](repeating: 0, count: 256)
        var epochOfAll: UInt64 = 0
        /// Whether invalidations are being received (the local tier may answer for Redis).
        var listening = false
        /// Bumped by every change this cache makes or hears of (``changeCount``).
        var changes: UInt64 = 0
        /// Lock tokens of the fills this cache claimed.
        var claims: [String: [UInt8]] = [:]
        /// Requests waiting for another cache's fill, by key: woken by that key's invalidation
        /// (the other cache's commit or release publishes one).
        var fillWaiters: [String: [Int: @Sendable () -> Void]] = [:]
        var nextWaiter = 0

        /// The epochs a read from Redis of `primaryKey` starts under.
        func epoch(of primaryKey: String) -> Epoch { Epoch(key: epochs[Self.bucket(primaryKey)], all: epochOfAll) }

        /// What the local tier says of `primaryKey` is no longer to be trusted.
        mutating func forget(_ primaryKey: String) {
            synced.removeValue(forKey: primaryKey)
            epochs[Self.bucket(primaryKey)] &+= 1
        }

        /// What the local tier says of every key is no longer to be trusted.
        mutating func forgetAll() {
            synced.removeAll()
            epochOfAll &+= 1
        }

        private static func bucket(_ primaryKey: String) -> Int { primaryKey.hashValue & 255 }
    }

    /// The epochs of one key when a read from Redis began (``State/epochs``).
    struct Epoch: Equatable {
        let key: UInt64
        let all: UInt64
    }

    let state = Locked(State())
    private let subscriber: Subscriber?

    /// A shared store over `redis`, with a local memory tier of `localCapacity` bytes (0: none).
    ///
    /// - Parameters:
    ///   - redis: The shared tier.
    ///   - localCapacity: Bytes of bodies the local memory tier keeps; 0 for none.
    ///   - listens: Whether to subscribe to other caches' invalidations (a server does; a
    ///     command that runs once need not). Without it the local tier is used only while Redis
    ///     is away.
    ///   - collapseTimeout: Seconds a miss waits for another cache's origin request at most.
    ///   - claimLease: Seconds a claim on a key's origin request holds unless renewed.
    ///   - clock: Seconds since 1970, for the local tier's times.
    public init(
        redis: RedisStore, localCapacity: Int64, listens: Bool = true, collapseTimeout: Double = 10,
        claimLease: Double = 2, clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.redis = redis
        local = localCapacity > 0 ? MemoryStore(capacity: localCapacity, clock: clock) : nil
        self.collapseTimeout = collapseTimeout
        self.claimLease = claimLease
        subscriber = local != nil && listens ? Subscriber(redis: redis) : nil
        subscriber?.start(self)
    }

    deinit { subscriber?.stop() }

    /// Stops listening for invalidations (also done when the store is released).
    public func close() { subscriber?.stop() }

    /// What the Redis client counted.
    public var metrics: RedisMetrics { redis.metrics }

    /// While invalidations are received: a number bumped by every change this cache makes and
    /// every invalidation it receives, so that what an exchange derived from ``variants(of:)``
    /// is reused until then (another cache's change is seen when its message arrives, as in
    /// the local tier). Without the subscription: `nil`, nothing is reused.
    public var changeCount: UInt64? { state.withLock { $0.listening ? $0.changes : nil } }

    private func changed() { state.withLock { $0.changes &+= 1 } }

    // MARK: Invalidations

    /// Another cache changed `primaryKey` (`*`: everything).
    func invalidated(_ primaryKey: String) {
        redis.client.count { $0.invalidationsReceived += 1 }
        if let local {
            if primaryKey == "*" {
                dropLocalTier()
            } else {
                state.withLock { $0.forget(primaryKey) }
                _ = try? local.remove(primaryKey: primaryKey)
            }
        }
        // The change count moves before anyone is woken: a request that waited for this key
        // must not be answered from what was derived before the change.
        changed()
        let waiters = state.withLock { $0.fillWaiters.removeValue(forKey: primaryKey) ?? [:] }
        for waiter in waiters.values { waiter() }
    }

    fileprivate func listening(_ on: Bool) {
        defer { changed() }
        if on { dropLocalTier() }
        state.withLock { $0.listening = on }
    }

    private func dropLocalTier() {
        state.withLock { $0.forgetAll() }
        try? local?.removeAll()
    }

    // MARK: CacheStore

    public func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        guard let local else { return try redis.variants(of: primaryKey) }
        let (trusted, epoch) = state.withLock { ($0.listening ? $0.synced[primaryKey] : nil, $0.epoch(of: primaryKey)) }
        if let trusted {
            let held = try local.variants(of: primaryKey)
            if held.count == trusted { return held }
        }
        let remote: [StoredEntry]
        do {
            remote = try redis.variants(of: primaryKey)
        } catch {
            return try local.variants(of: primaryKey)
        }
        reconcile(primaryKey, remote, local, since: epoch)
        return remote
    }

    /// A channel for one event loop's lookups in Redis; the keys the local tier answers for
    /// (``variants(of:)``) are not looked up there.
    public func makeLookupChannel() -> (any LookupChannel)? {
        redis.lookupChannel { [weak self] primaryKey in
            guard let self, local != nil else { return false }
            return state.withLock { $0.listening && $0.synced[primaryKey] != nil }
        }
    }

    /// Makes the local tier agree with `remote`, what Redis held for `primaryKey` when read
    /// under `epoch`, and notes when it holds all of it. A read that a change overtook (the
    /// epoch moved: an invalidation arrived, or this cache wrote, meanwhile) changes nothing
    /// and leaves the key untrusted: applied, it could put back an older head or make the local
    /// tier trusted for what Redis no longer holds, with no message left to correct it. Under
    /// the state's lock throughout, so that two reads of one key cannot interleave their
    /// changes.
    func reconcile(_ primaryKey: String, _ remote: [StoredEntry], _ local: MemoryStore, since epoch: Epoch) {
        let localChanged = state.withLock { state -> Bool in
            guard state.epoch(of: primaryKey) == epoch else {
                state.synced.removeValue(forKey: primaryKey)
                return false
            }
            var localChanged = false
            let held = (try? local.variants(of: primaryKey)) ?? []
            var holdsAll = !remote.isEmpty
            for entry in held {
                guard let current = remote.first(where: { $0.id == entry.id }) else {
                    try? local.remove(entry.id)
                    localChanged = true
                    continue
                }
                if current.head != entry.head {
                    try? local.update(entry.id, fields: current.head.fields, facts: current.head.facts)
                    localChanged = true
                }
            }
            for entry in remote where !held.contains(where: { $0.id == entry.id }) { holdsAll = false }
            if holdsAll {
                state.synced[primaryKey] = remote.count
            } else {
                state.synced.removeValue(forKey: primaryKey)
            }
            return localChanged
        }
        if localChanged { changed() }
    }

    /// Puts a body read whole from Redis in the local tier with `entry`, unless what Redis holds
    /// for its key may have changed since `entry` was read (``State/epochs``).
    func promote(_ entry: StoredEntry, body: [UInt8], since epoch: Epoch, into local: MemoryStore) {
        state.withLock { state in
            guard state.epoch(of: entry.head.primaryKey) == epoch else { return }
            local.promote(entry, body: body)
        }
    }

    public func openBody(of id: EntryID) throws(StorageError) -> any StoredBody {
        if let body = try? local?.openBody(of: id) { return body }
        return try redis.openBody(of: id)
    }

    public func openBody(for entry: StoredEntry) throws(StorageError) -> any StoredBody {
        if let body = try? local?.openBody(of: entry.id) { return body }
        let epoch = state.withLock { $0.epoch(of: entry.head.primaryKey) }
        let body = try redis.openBody(of: entry.id)
        guard let local, body.size <= local.maximumEntrySize else { return body }
        return PromotingBody(body) { [weak self] bytes in self?.promote(entry, body: bytes, since: epoch, into: local) }
    }

    public func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter {
        if head.storagePolicy == .memoryOnly, let local { return try local.makeWriter(for: head) }
        return SharedWriter(store: self, head: head, remote: try redis.makeWriter(for: head))
    }

    /// A write Redis took: kept locally too.
    fileprivate func committed(_ entry: StoredEntry, body: [UInt8]?) {
        defer { changed() }
        state.withLock { $0.forget(entry.head.primaryKey) }
        if let body { local?.insert(entry, body: body) }
    }

    /// A write Redis did not take: stored locally only, so this cache goes on caching.
    fileprivate func committedLocally(_ head: EntryHead, body: [UInt8]?, error: StorageError) throws(StorageError)
        -> StoredEntry
    {
        defer { changed() }
        guard let local, let body else { throw error }
        let writer = try local.makeWriter(for: head)
        try writer.append(body)
        return try writer.commit()
    }

    public func update(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) throws(StorageError) {
        defer { changed() }
        let inLocal = (try? local?.update(id, fields: fields, facts: facts)) != nil
        do {
            try redis.update(id, fields: fields, facts: facts)
        } catch  where inLocal {
            // Redis is away or never had it: the local tier's copy is freshened.
        }
    }

    public func recordAccess(_ id: EntryID, at time: Double) { local?.recordAccess(id, at: time) }

    public func remove(_ id: EntryID) throws(StorageError) {
        defer { changed() }
        // Its key is not known here: no key's earlier read may put the entry back (rare: a
        // proxy's removals go by key).
        defer { state.withLock { $0.forgetAll() } }
        try local?.remove(id)
        try redis.remove(id)
    }

    public func remove(primaryKey: String) throws(StorageError) -> Int {
        try removeFromBoth(forgetting: { $0.forget(primaryKey) }) { store throws(StorageError) in
            try store.remove(primaryKey: primaryKey)
        }
    }

    public func remove(urlPrefix prefix: String) throws(StorageError) -> Int {
        try removeFromBoth(forgetting: { $0.forgetAll() }) { store throws(StorageError) in
            try store.remove(urlPrefix: prefix)
        }
    }

    public func remove(primaryKeyPrefix prefix: String) throws(StorageError) -> Int {
        try removeFromBoth(forgetting: { $0.forgetAll() }) { store throws(StorageError) in
            try store.remove(primaryKeyPrefix: prefix)
        }
    }

    public func remove(tag: String) throws(StorageError) -> Int {
        try removeFromBoth(forgetting: { $0.forgetAll() }) { store throws(StorageError) in try store.remove(tag: tag) }
    }

    /// Removes with `removal` from the local tier, then from Redis; Redis' count, or the local
    /// one when Redis could not be reached and the local tier removed something. What the local
    /// tier says of the keys is forgotten (`forget`) before, and again once Redis has removed
    /// them: a read of Redis between the two still finds them, and must not be trusted or put
    /// back in the local tier.
    private func removeFromBoth(
        forgetting forget: (inout State) -> Void, _ removal: (any CacheStore) throws(StorageError) -> Int
    ) throws(StorageError) -> Int {
        defer { changed() }
        state.withLock(forget)
        defer { state.withLock(forget) }
        let localCount = try local.map { store throws(StorageError) in try removal(store) } ?? 0
        do {
            return try removal(redis)
        } catch  where localCount > 0 {
            return localCount
        }
    }

    public func removeAll() throws(StorageError) {
        defer { changed() }
        dropLocalTier()
        try redis.removeAll()
    }

    public func entries() throws(StorageError) -> [StoredEntry] {
        do {
            return try redis.entries()
        } catch {
            guard let local else { throw error }
            return try local.entries()
        }
    }

    public func totals() -> StoreTotals {
        redis.isReachable || local == nil ? redis.totals() : local!.totals()
    }

    public func setPinned(_ pinned: Bool, primaryKey: String) throws(StorageError) -> Int {
        defer { changed() }
        _ = try? local?.setPinned(pinned, primaryKey: primaryKey)
        return try redis.setPinned(pinned, primaryKey: primaryKey)
    }

    // MARK: CollapsingStore

    public func claimFill(_ primaryKey: String) -> Bool {
        switch claim(primaryKey) {
        case .taken:
            redis.client.count { $0.collapsedAcrossNodes += 1 }
            return false
        case .claimed, .unknown:
            return true
        }
    }

    private enum Claim { case claimed, taken, unknown }

    /// What a released lock holds for a lease, so that a waiting cache tells a fill that ended
    /// from one whose holder vanished (its lock lapsed: gone).
    private static let released = bytes("released")

    /// Sets the lock to a new token for a lease unless another cache holds it (a released
    /// lock is free). A reply lost to a timeout may still have been run: the token is kept as
    /// if claimed, so ``endFill(_:)`` releases what Redis may hold, and the lease bounds it
    /// otherwise. A lock with no expiry, or one longer than twice a lease, is none a cache set
    /// (each sets and renews a lease): it is taken over, or it would hold every miss on the key
    /// for the collapse timeout, forever.
    private func claim(_ primaryKey: String) -> Claim {
        let token = Array(EntryID().rawValue.utf8)
        let key = redis.lockKey(primaryKey)
        let script = """
            local held = redis.call('GET', KEYS[1])
            local ttl = redis.call('PTTL', KEYS[1])
            if held and held ~= ARGV[3] and ttl >= 0 and ttl <= 2 * tonumber(ARGV[2]) then return 0 end
            redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
            return 1
            """
        let reply = try? redis.run(
            [
                [
                    bytes("EVAL"), bytes(script), bytes("1"), key, token, bytes(String(Int(claimLease * 1000))),
                    Self.released,
                ]
            ],
            slotKey: key, failing: .writeFailed
        ).first
        if reply?.integer == 0 { return .taken }
        state.withLock { $0.claims[primaryKey] = token }
        renew(primaryKey, token)
        return reply?.integer == 1 ? .claimed : .unknown
    }

    /// Renews the lease of the claim `token` on `primaryKey` while it is held.
    private func renew(_ primaryKey: String, _ token: [UInt8]) {
        let interval = claimLease / 3
        DispatchQueue.global().asyncAfter(deadline: .now() + interval) { [self] in
            guard state.withLock({ $0.claims[primaryKey] == token }) else { return }
            let key = redis.lockKey(primaryKey)
            let script =
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0"
            _ = try? redis.run(
                [[bytes("EVAL"), bytes(script), bytes("1"), key, token, bytes(String(Int(claimLease * 1000)))]],
                slotKey: key, failing: .writeFailed)
            renew(primaryKey, token)
        }
    }

    /// Releases the lock (if it is still this cache's: compare-and-set in a Lua script, since
    /// Redis 7 has no `DELIFEQ`) and publishes the key, which wakes the caches waiting for it.
    public func endFill(_ primaryKey: String) {
        guard let token = state.withLock({ $0.claims.removeValue(forKey: primaryKey) }) else { return }
        let key = redis.lockKey(primaryKey)
        let script = """
            if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
            redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
            return 1
            """
        _ = try? redis.run(
            [
                [
                    bytes("EVAL"), bytes(script), bytes("1"), key, token, Self.released,
                    bytes(String(Int(claimLease * 1000))),
                ],
                redis.publishCommand(primaryKey),
            ], slotKey: key, failing: .writeFailed)
    }

    /// Woken by the key's invalidation (the filling cache's commit or release) while
    /// invalidations are received; the lock is also polled (every 50 ms then, every 5 ms
    /// without the subscription), in case a message is missed or the other cache died: a lock
    /// released ends the wait; a lock gone (its lease lapsed: its holder vanished) is claimed by
    /// this cache, which then leads (or, when another waiting cache claimed it first, waits for
    /// that one).
    public func awaitFill(_ primaryKey: String, _ done: @escaping @Sendable (FillWait) -> Void) {
        let key = redis.lockKey(primaryKey)
        let deadline = MonotonicClock.seconds() + collapseTimeout
        let finished = Locked(false)
        // Calls `done` the first time only, whichever way the end is seen.
        let fire: @Sendable (FillWait) -> Void = { wait in
            if finished.withLock({ finished in
                defer { finished = true }; return !finished
            }) {
                done(wait)
            }
        }
        let (id, interval) = state.withLock { state -> (Int, Int) in
            state.nextWaiter &+= 1
            guard state.listening else { return (state.nextWaiter, 5) }
            state.fillWaiters[primaryKey, default: [:]][state.nextWaiter] = { fire(.ended) }
            return (state.nextWaiter, 50)
        }
        @Sendable func finish(_ wait: FillWait) {
            state.withLock { state in
                state.fillWaiters[primaryKey]?.removeValue(forKey: id)
                if state.fillWaiters[primaryKey]?.isEmpty == true { state.fillWaiters.removeValue(forKey: primaryKey) }
            }
            // The other cache's commit message may not have been handled yet: what was derived
            // before must not answer the waiting requests.
            changed()
            fire(wait)
        }
        @Sendable func poll() {
            guard !finished.withLock({ $0 }) else { return }
            let reply = try? redis.run([[bytes("GET"), key]], slotKey: key, failing: .readFailed).first
            if reply == nil || reply?.errorMessage != nil || reply?.bytes == Self.released
                || MonotonicClock.seconds() >= deadline
            {
                finish(.ended)
            } else if reply == .null {
                // Lapsed: claimed here unless another waiting cache was first.
                switch claim(primaryKey) {
                case .claimed: finish(.claimed)
                case .unknown:
                    endFill(primaryKey)
                    finish(.ended)
                case .taken:
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(interval), execute: poll)
                }
            } else {
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(interval), execute: poll)
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(2), execute: poll)
    }
}

/// Writes to Redis, keeping the body for the local tier (or for storing it locally when
/// Redis does not take it).
final class SharedWriter: EntryWriter {
    private let store: SharedStore
    private let head: EntryHead
    private let remote: any EntryWriter
    private var body: GatheredBytes? = GatheredBytes()
    private var remoteFailure: StorageError?

    init(store: SharedStore, head: EntryHead, remote: any EntryWriter) {
        self.store = store
        self.head = head
        self.remote = remote
    }

    func append(_ chunk: [UInt8]) throws(StorageError) {
        if remoteFailure == nil {
            do {
                try remote.append(chunk)
            } catch {
                remoteFailure = error
            }
        }
        if let local = store.local { local.collect(chunk, into: &body) } else { body = nil }
        if remoteFailure != nil && body == nil { throw remoteFailure! }
    }

    func commit() throws(StorageError) -> StoredEntry {
        do throws(StorageError) {
            if let remoteFailure { throw remoteFailure }
            let entry = try remote.commit()
            store.committed(entry, body: body?.bytes)
            return entry
        } catch {
            return try store.committedLocally(head, body: body?.bytes, error: error)
        }
    }

    func commitIncomplete(facts: [UInt8]) throws(StorageError) -> StoredEntry {
        body = nil
        return try remote.commitIncomplete(facts: facts)
    }

    /// Whether Redis may refuse the commit with no local tier to keep the entry instead: when
    /// there is none, or the body is announced larger than the local tier takes.
    var commitMayBeRefused: Bool {
        guard let local = store.local else { return remote.commitMayBeRefused }
        let length = head.fields[.contentLength].flatMap { Int64($0) }
        return remote.commitMayBeRefused && length.map { $0 > local.maximumEntrySize } == true
    }

    func abort() {
        body = nil
        remote.abort()
    }
}

/// Listens on the invalidation channel on a thread of its own, reconnecting with backoff.
final class Subscriber: Sendable {
    private let redis: RedisStore
    private let stopped = Locked(false)

    init(redis: RedisStore) { self.redis = redis }

    func start(_ store: SharedStore) {
        // Without a thread to spare the store never listens: it keeps checking Redis on every
        // lookup, as while the channel is down.
        try? SystemThread.detached(name: "redis-invalidations") { [weak store, self] in
            var backoff = 0.05
            while !stopped.withLock({ $0 }) {
                guard store != nil else { return }
                do {
                    try listen { store }
                    backoff = 0.05
                } catch {
                    store?.listening(false)
                    Thread.sleep(forTimeInterval: backoff)
                    backoff = min(2, backoff * 2)
                }
            }
        }
    }

    func stop() { stopped.withLock { $0 = true } }

    /// Subscribes and handles messages until the connection fails or the store is stopped.
    private func listen(_ store: () -> SharedStore?) throws(RedisFailure) {
        let configuration = redis.client.configuration
        let node =
            configuration.isCluster
            ? (try redis.client.masters().first ?? configuration.nodes[0]) : configuration.nodes[0]
        let connection = try RedisConnection(
            host: node.host, port: node.port, user: configuration.user, password: configuration.password,
            database: 0, timeout: configuration.connectTimeout)
        try connection.sendCommand([bytes("SUBSCRIBE"), redis.channel], timeout: configuration.connectTimeout)
        let confirmation = try connection.read(deadline: MonotonicClock.seconds() + configuration.connectTimeout)
        guard confirmation.array?.first?.bytes == bytes("subscribe") else {
            throw RedisFailure(.reply, "Redis did not confirm the subscription: \(confirmation)")
        }
        store()?.listening(true)
        let ownPrefix = redis.senderID + " "
        while !stopped.withLock({ $0 }) {
            let message: RESPValue
            do {
                message = try connection.read(deadline: MonotonicClock.seconds() + 1)
            } catch  where error.kind == .timeout {
                continue  // nothing published for a second: look at `stopped` again
            }
            guard let parts = message.array, parts.count == 3, parts[0].bytes == bytes("message"),
                let payload = parts[2].bytes
            else { continue }
            let text = String(decoding: payload, as: UTF8.self)
            guard !text.hasPrefix(ownPrefix), let space = text.firstIndex(of: " ") else { continue }
            guard let store = store() else { return }
            guard let primaryKey = redis.primaryKey(inInvalidation: text[text.index(after: space)...]) else { continue }
            store.invalidated(primaryKey)
        }
    }
}
