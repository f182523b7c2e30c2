/// An ``LRUCache`` cut into shards, each under a ``Locked`` of its own with an equal part of the
/// capacity and the byte limit, a key in the shard its hash picks: threads that look up
/// different keys at once (a caching proxy's event loops, each on its own core) seldom take
/// the same lock. With one lock the proxy's two loops waited on the per-URL memos on one hit
/// in twenty on 20,000 URLs. With one shard the bounds hold exactly; with several, each
/// shard's bounds do.
///
/// Inlinable, like ``LRUCache`` and ``Locked``, so that it is specialized where it is used (an
/// unspecialized lookup cost a proxy hit half as much again).
public final class ShardedLRUCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    @usableFromInline let shards: [Locked<LRUCache<Key, Value>>]

    /// A cache of at most `capacity` values and `byteLimit` bytes in `shards` shards (at least one).
    @inlinable public init(capacity: Int, byteLimit: Int = .max, shards count: Int) {
        let count = max(1, count)
        shards = (0..<count).map { _ in
            Locked(LRUCache(capacity: capacity / count, byteLimit: byteLimit / count))
        }
    }

    /// The shard of a key that hashes to `hash`: picked by the hash's top bits, since the shard's
    /// index places keys by its low ones (``SlotIndex``), and keys sharing a shard by the low
    /// bits would crowd a few of its buckets.
    @inlinable
    func shard(_ hash: Int) -> Locked<LRUCache<Key, Value>> {
        shards.count == 1 ? shards[0] : shards[Int((UInt(bitPattern: hash) >> 40) % UInt(shards.count))]
    }

    /// The value for `key`, made the most recently used; `nil` when none is held. The key is
    /// hashed once, for its shard and its place in it.
    @inlinable public func value(for key: Key) -> Value? {
        let hash = key.hashValue
        return shard(hash).withLock { $0.value(for: key, hash: hash) }
    }

    /// Holds `value` for `key` at `cost` bytes (``LRUCache/set(_:for:cost:)``).
    @inlinable public func set(_ value: Value, for key: Key, cost: Int = 0) {
        let hash = key.hashValue
        shard(hash).withLock { $0.set(value, for: key, hash: hash, cost: cost) }
    }

    /// The values held and the bytes they are charged, over every shard.
    @inlinable public var totals: (count: Int, bytes: Int) {
        shards.reduce((0, 0)) { sum, shard in
            let (count, bytes) = shard.withLock { ($0.count, $0.bytes) }
            return (sum.0 + count, sum.1 + bytes)
        }
    }
}
