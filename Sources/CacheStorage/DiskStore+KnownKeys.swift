import CacheSemantics
import CacheSystem
import Dispatch

/// The primary keys the index may hold, as 64-bit hashes (`HeadMemo.knownKeys`): a lookup of a
/// key it does not hold — every miss, and the No-Vary-Search marker of the miss's path — is
/// answered from memory, neither reading the index nor waiting for ``DiskStore/state``'s lock,
/// which a batch's commit holds for milliseconds. Without it, each miss of a caching proxy read
/// the index twice on its event loop (about a tenth of the loop's time a miss) and sometimes
/// waited there for a commit.
///
/// A superset, never less: every row this store writes adds its key's hash before the row is
/// written (``DiskStore/writeRow(_:checksums:inline:_:)``); removals leave theirs (a key it no
/// longer holds is read from the index, as every key was before). It is trusted only while the
/// change count is the one it was complete at, moved on by each of this store's own writes
/// (``counted(_:)``, under the memo's lock, as every own write counts): a write by another
/// process or store moves the count past it, and lookups read the index until it is built
/// again. Built by a scan of the index's keys, a chunk per hold of ``DiskStore/state``'s lock,
/// on a background thread, once ``indexReadsBeforeBuild`` lookups had to read the index; built
/// again once it has grown by half (removed keys' hashes stay) or was left behind by another's
/// write.
///
/// A collision (two keys with one hash) only sends the lookup to the index. The seed is random
/// per store, so nobody can choose keys that collide.
struct KnownKeys {
    /// The hashes, complete at ``completeAt``.
    private var hashes: Set<UInt64> = []
    /// The change count at which ``hashes`` holds every key in the index; `nil` when they cannot
    /// be trusted (not built yet, or written by another since).
    private var completeAt: UInt64?
    /// A build in progress: the keys written since it started (its scan, outside this lock,
    /// has the others), and the count it started at, moved on by own writes (`nil` once another
    /// wrote: the build is wasted).
    private var building: (written: Set<UInt64>, from: UInt64?)?
    /// How many hashes the last build found: at half as many again, it is built anew.
    private var builtCount = 0
    /// When the last build started (``MonotonicClock``), so that a store another process keeps
    /// writing to does not scan its index over and over.
    private var lastBuild: Double?
    /// A build is queued and has not started.
    private var buildQueued = false
    /// Lookups that read the index before the first build: a short-lived process (the
    /// command-line tool) that looks up a few keys never scans them all.
    var indexReads = 0
    let seed = UInt64.random(in: .min ... .max)

    /// The seconds between two builds when the last one was left behind by another's write.
    static let rebuildInterval: Double = 5
    /// The lookups that read the index before the first build is wanted.
    static let indexReadsBeforeBuild = 32
    /// Hashes that may be added after a build before it is due again, beyond half its count.
    static let growthAllowance = 65_536

    /// The hash of `indexedKey` (what the index's `primary_key` column holds).
    func hash(_ indexedKey: String) -> UInt64 {
        ASCII.withUTF8(indexedKey) { XXH64.hash(UnsafeRawBufferPointer($0), seed: seed) }
    }

    /// Whether the index surely holds no row of the key with `hash` at change count `count`.
    func holdsNone(_ hash: UInt64, at count: UInt64) -> Bool {
        completeAt == count && !hashes.contains(hash)
    }

    /// Whether the hashes are trusted at `count`.
    func isComplete(at count: UInt64) -> Bool { completeAt == count }

    /// How many hashes are in use.
    var count: Int { hashes.count }

    /// Adds the key a row is about to be written with.
    mutating func insert(_ hash: UInt64) {
        hashes.insert(hash)
        building?.written.insert(hash)
    }

    /// This store's own write moved the count from `before` to the next: what was complete
    /// before is still (its rows' keys were added as they were written).
    mutating func counted(_ before: UInt64) {
        if completeAt == before { completeAt = before &+ 1 }
        if building?.from == before { building?.from = before &+ 1 }
    }

    /// Whether a build should be queued now, at change count `count` and `time`: none is queued
    /// or running, and none ever ran and ``indexReadsBeforeBuild`` lookups read the index, or
    /// the hashes have grown by half since the last, or they are not trusted and the last build
    /// started ``rebuildInterval`` ago. Once `true`, `false` until that build starts.
    mutating func claimBuild(at count: UInt64, time: @autoclosure () -> Double) -> Bool {
        guard building == nil, !buildQueued else { return false }
        let due: Bool
        if let lastBuild {
            due =
                completeAt == count
                ? hashes.count > Self.capacity(for: builtCount)
                : time() - lastBuild >= Self.rebuildInterval
        } else {
            due = indexReads >= Self.indexReadsBeforeBuild
        }
        if due { buildQueued = true }
        return due
    }

    /// Starts a build at `count`; what is written from now on is kept for it. Returns how many
    /// keys the scan may find (for its set's capacity), `nil` when a build is running.
    mutating func startBuild(at count: UInt64, time: Double) -> Int? {
        guard building == nil else { return nil }
        building = ([], count)
        buildQueued = false
        lastBuild = time
        return max(builtCount, hashes.count)
    }

    /// Whether the build is still worth going on with: no other process wrote since it started.
    var buildGoesOn: Bool { building?.from != nil }

    /// The room a set of `count` hashes is given: half as many again before a build is due.
    static func capacity(for count: Int) -> Int { count + count / 2 + growthAllowance }

    /// Ends the build at `count` with the hashes its scan found (`scanned`, given room for
    /// ``capacity(for:)`` by the caller, outside this lock): they and the keys written meanwhile
    /// replace those in use when no other process wrote since it started, which `scanned` then
    /// holds, for the caller to free outside the lock; `false` when not.
    @discardableResult
    mutating func finishBuild(scanned: inout Set<UInt64>, at count: UInt64) -> Bool {
        guard let built = building else { return false }
        building = nil
        guard built.from == count else { return false }
        scanned.formUnion(built.written)
        builtCount = scanned.count
        swap(&hashes, &scanned)
        completeAt = count
        return true
    }

    /// Gives up a build (the index could not be read).
    mutating func abandonBuild() { building = nil }
}

extension DiskStore {
    /// How many key hashes the store holds (``KnownKeys``), and whether they are in use now
    /// (built, and no other process wrote since): what the memory benchmark waits for.
    package var knownKeys: (count: Int, inUse: Bool) {
        guard let changes else { return (0, false) }
        return memo.withLock { ($0.knownKeys.count, $0.knownKeys.isComplete(at: changes.value)) }
    }

    /// How many primary keys the index scan of a build reads per hold of ``state``'s lock.
    static let knownKeysChunk = 4_096

    /// Counts a write of this store that may have changed keys other than one it remembers
    /// (a removal, an eviction, a batch rolled back), under the memo's lock: the remembered
    /// variants are read again, the known keys stay trusted (``KnownKeys/counted(_:)``).
    func countWrite() { memo.withLock { countWrite(&$0) } }

    /// ``countWrite()`` with the memo's lock held.
    func countWrite(_ memo: inout HeadMemo) {
        guard let before = changes?.bump() else { return }
        memo.knownKeys.counted(before)
    }

    /// Adds the key of a row about to be written (`indexedKey`, as the index holds it) to the
    /// known keys; queues a build when they have grown by half since the last.
    func noteWrittenKey(_ indexedKey: String) {
        guard let changes else { return }
        let due = memo.withLock { memo -> Bool in
            memo.knownKeys.insert(memo.knownKeys.hash(indexedKey))
            return memo.knownKeys.claimBuild(at: changes.value, time: MonotonicClock.seconds())
        }
        if due { queueKnownKeysBuild() }
    }

    /// The change count at which the index surely holds no row of `primaryKey`, by the known
    /// keys; `nil` when they cannot say. Called with the memo's lock held: no write of this
    /// store moves the count meanwhile.
    func countHoldingNone(_ primaryKey: String, _ memo: HeadMemo) -> UInt64? {
        guard let count = changes?.value else { return nil }
        let hash = memo.knownKeys.hash(Self.indexed(primaryKey: primaryKey, sealing))
        return memo.knownKeys.holdsNone(hash, at: count) ? count : nil
    }

    /// Queues a build of the known keys if one is wanted (``KnownKeys/claimBuild(at:time:)``):
    /// called after a lookup had to read the index.
    func buildKnownKeysIfWanted() {
        guard let changes else { return }
        let due = memo.withLock { memo -> Bool in
            memo.knownKeys.indexReads += 1
            return memo.knownKeys.claimBuild(at: changes.value, time: MonotonicClock.seconds())
        }
        if due { queueKnownKeysBuild() }
    }

    /// Builds the known keys on a background thread, not keeping the store for it: one released
    /// meanwhile ends the build.
    private func queueKnownKeysBuild() {
        let store: @Sendable () -> DiskStore? = { [weak self] in self }
        DispatchQueue.global(qos: .utility).async { Self.buildKnownKeys(store) }
    }

    /// Builds the known keys of the store `store` gives (while it gives one): starts the build
    /// under ``state``'s lock, so that no row is half written (each written from then on is added
    /// to it), then scans the index's keys `chunk` at a time, each under the lock, calling
    /// `afterChunk` after each; the build is used when no other process wrote meanwhile. `false`
    /// when it is not (or another build was running).
    @discardableResult
    static func buildKnownKeys(
        _ store: () -> DiskStore?, chunk: Int = DiskStore.knownKeysChunk, afterChunk: () -> Void = {}
    ) -> Bool {
        guard let first = store(), let changes = first.changes,
            let expected = first.state.withLock({ _ in
                first.memo.withLock { $0.knownKeys.startBuild(at: changes.value, time: MonotonicClock.seconds()) }
            })
        else { return false }
        // Filled outside the memo's lock: a hit never waits for a set of a million to grow.
        var scanned = Set<UInt64>(minimumCapacity: expected)
        var after: String?
        while let current = store() {
            let read: (hashes: [UInt64], last: String?)
            do {
                read = try current.scanKeys(after: after, chunk: chunk)
            } catch {
                current.memo.withLock { $0.knownKeys.abandonBuild() }
                current.configuration.log(
                    "could not read the keys the cache index holds (\(error)); lookups of keys it does not hold read it meanwhile"
                )
                return false
            }
            scanned.formUnion(read.hashes)
            let goesOn = current.memo.withLock { $0.knownKeys.buildGoesOn }
            if let last = read.last, goesOn {
                after = last
                afterChunk()
                continue
            }
            if goesOn { scanned.reserveCapacity(KnownKeys.capacity(for: scanned.count)) }
            return current.memo.withLock { $0.knownKeys.finishBuild(scanned: &scanned, at: changes.value) }
        }
        return false
    }

    /// The hashes of up to `chunk` primary keys of the index after `after` (from the first when
    /// `nil`), in order, and the last key when there may be more.
    private func scanKeys(after: String?, chunk: Int) throws(StorageError) -> (hashes: [UInt64], last: String?) {
        let seed = memo.withLock { $0.knownKeys.seed }
        return try state.withLock { state throws(StorageError) in
            // From the first key on (`>= ''`: every string), then after the last one read.
            let query = try state.connection.statement(
                """
                SELECT DISTINCT primary_key FROM entries WHERE primary_key \(after == nil ? ">=" : ">") :after
                ORDER BY primary_key LIMIT :limit
                """)
            defer { query.reset() }
            try query.bind(after ?? "", to: ":after")
            try query.bind(Int64(chunk), to: ":limit")
            let key = try query.column("primary_key")
            var hashes: [UInt64] = []
            var last: String?
            while try query.step() {
                hashes.append(query.withText(key) { XXH64.hash($0, seed: seed) })
                if hashes.count == chunk { last = query.text(key) }
            }
            return (hashes, last)
        }
    }
}
