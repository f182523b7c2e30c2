#if os(Linux)
import CacheSystem
import Glibc
import Synchronization

/// The request-targets asked for most of late, in bounded memory whatever the traffic:
/// the space-saving algorithm (Metwally, Agrawal, El Abbadi, 2005) over a fixed number of
/// counters, halved every minute by ``decay()`` so that the list follows what is busy now.
///
/// A shard's first ``exactRequests`` requests are each counted; after them, one in
/// ``sampling``, as that many: the busiest targets stand out all the same, and a hit pays for
/// the count an eighth of the time (counting every one was an eighth of a hot hit's
/// instructions). A target asked for more than 1/``tracked`` of what a shard counted is always
/// listed; its count is an estimate, at most the ``Entry/error`` over what was counted. Each thread records into a shard of its own (event loops do not share one),
/// so no lock is shared by every request; ``top(_:)`` adds the shards up.
final class BusiestTargets: Sendable {
    /// Counters per shard.
    static let tracked = 32
    /// Longer targets are kept as their first this many bytes.
    static let maxTargetBytes = 256

    /// One listed target.
    struct Entry: Equatable, Sendable {
        var target: String
        var count: Int
        /// How much `count` may exceed the target's true count.
        var error: Int
    }

    private struct SpaceSaving {
        var entries: [String: (count: Int, error: Int)] = [:]

        mutating func add(_ target: String, weight: Int) {
            if let known = entries[target] {
                entries[target] = (known.count + weight, known.error)
            } else if entries.count < BusiestTargets.tracked {
                entries[target] = (weight, 0)
            } else if let least = entries.min(by: { $0.value.count < $1.value.count }) {
                // The least counted one makes room; the newcomer may have had up to its count.
                entries[least.key] = nil
                entries[target] = (least.value.count + weight, least.value.count)
            }
        }

        mutating func halve() {
            entries = entries.compactMapValues { value in
                value.count < 2 ? nil : (value.count / 2, value.error / 2)
            }
        }
    }

    /// Requests seen by a shard, for ``sampling``.
    private final class Seen: Sendable {
        let count = Atomic<Int>(0)
    }

    /// Past ``exactRequests``, one request in this many is counted.
    let sampling: Int
    /// The requests of a shard each counted before sampling begins (small traffic is exact).
    static let exactRequests = 256
    private let shards: [Locked<SpaceSaving>]
    private let seen: [Seen]
    private let decayedMinute = Atomic<Int>(.min)

    init(shards: Int = 8, sampling: Int = 8) {
        self.sampling = max(1, sampling)
        self.shards = (0..<max(1, shards)).map { _ in Locked(SpaceSaving()) }
        seen = (0..<max(1, shards)).map { _ in Seen() }
    }

    /// Counts one request for `target` (past ``exactRequests``, one in ``sampling`` as that many).
    func record(_ target: String) {
        let shard = Self.shardOfThisThread() % shards.count
        let seen = self.seen[shard].count.add(1, ordering: .relaxed).oldValue
        let weight = seen < Self.exactRequests ? 1 : sampling
        guard weight == 1 || seen % sampling == 0 else { return }
        var target = target
        if target.utf8.count > Self.maxTargetBytes {
            target = String(decoding: target.utf8.prefix(Self.maxTargetBytes), as: UTF8.self)
        }
        shards[shard].withLock { $0.add(target, weight: weight) }
    }

    /// Called each second (since 1970): the first call in a new minute halves every count
    /// (dropping those that reach zero), so a minute ago weighs half as much.
    func tick(second: Int) {
        let minute = second / 60
        let previous = decayedMinute.exchange(minute, ordering: .relaxed)
        guard previous != minute, previous != .min else { return }
        for shard in shards { shard.withLock { $0.halve() } }
    }

    /// The `count` busiest targets, busiest first (ties by target).
    func top(_ count: Int) -> [Entry] {
        var merged: [String: Entry] = [:]
        for shard in shards {
            for (target, value) in shard.withLock({ $0.entries }) {
                merged[target, default: Entry(target: target, count: 0, error: 0)].count += value.count
                merged[target]?.error += value.error
            }
        }
        return merged.values.sorted { ($0.count, $1.target) > ($1.count, $0.target) }.prefix(count).map { $0 }
    }

    private static func shardOfThisThread() -> Int {
        if let value = pthread_getspecific(shardKey) { return Int(bitPattern: value) - 1 }
        let shard = nextShard.add(1, ordering: .relaxed).oldValue
        pthread_setspecific(shardKey, UnsafeRawPointer(bitPattern: shard + 1))
        return shard
    }
}

/// Each thread's shard of ``BusiestTargets`` (plus one), handed out in turn.
private let shardKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
}()
private let nextShard = Atomic<Int>(0)
#endif
