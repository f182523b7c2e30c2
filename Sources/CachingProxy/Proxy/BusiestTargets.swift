#if os(Linux)
import CacheSystem
import Glibc
import Synchronization

/// The request-targets asked for most of late, in bounded memory whatever the traffic:
/// the space-saving algorithm (Metwally, Agrawal, El Abbadi, 2005) over a fixed number of
/// counters, halved every minute by ``decay()`` so that the list follows what is busy now.
///
/// A target asked for more than 1/``tracked`` of the requests a shard saw is always listed;
/// its count is at most the ``Entry/error`` over what it really had. Each thread records
/// into a shard of its own (event loops do not share one), so no lock is shared by every
/// request; ``top(_:)`` adds the shards up.
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

        mutating func add(_ target: String) {
            if let known = entries[target] {
                entries[target] = (known.count + 1, known.error)
            } else if entries.count < BusiestTargets.tracked {
                entries[target] = (1, 0)
            } else if let least = entries.min(by: { $0.value.count < $1.value.count }) {
                // The least counted one makes room; the newcomer may have had up to its count.
                entries[least.key] = nil
                entries[target] = (least.value.count + 1, least.value.count)
            }
        }

        mutating func halve() {
            entries = entries.compactMapValues { value in
                value.count < 2 ? nil : (value.count / 2, value.error / 2)
            }
        }
    }

    private let shards: [Locked<SpaceSaving>]
    private let decayedMinute = Atomic<Int>(.min)

    init(shards: Int = 8) {
        self.shards = (0..<max(1, shards)).map { _ in Locked(SpaceSaving()) }
    }

    /// Counts one request for `target`.
    func record(_ target: String) {
        var target = target
        if target.utf8.count > Self.maxTargetBytes {
            target = String(decoding: target.utf8.prefix(Self.maxTargetBytes), as: UTF8.self)
        }
        shards[Self.shardOfThisThread() % shards.count].withLock { $0.add(target) }
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
