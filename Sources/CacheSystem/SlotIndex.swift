/// A hash index from keys to the slots of an array that keeps the keys itself (the memory
/// store's nodes, ``LRUCache``'s): each indexed slot takes one 8-byte bucket, the slot and 32
/// bits of its key's hash, where a `Dictionary` from the key to the slot would keep a second
/// copy of the key beside a whole `Int`, and would hash the key again where its caller had
/// already hashed it (``ShardedLRUCache`` picks a shard by the same hash).
///
/// Open addressing with linear probing, at most three quarters full; a removal shifts the
/// buckets after it back instead of leaving a tombstone, so lookups do not slow down as
/// entries come and go. The caller hashes keys and says which slot holds a key.
///
/// Public and inlinable, like ``LRUCache``, so that the comparison a lookup is given is
/// inlined where it is used.
public struct SlotIndex {
    /// 0 for an empty bucket; else the key's hash in the high 32 bits and the slot plus one in
    /// the low 32 bits.
    @usableFromInline var buckets: [UInt64] = []
    /// How many slots are indexed.
    @inlinable public var count: Int { indexed }
    @usableFromInline var indexed = 0

    /// An empty index.
    @inlinable public init() {}

    @inlinable var mask: Int { buckets.count - 1 }

    @inlinable static func bucket(_ slot: Int, hash: Int) -> UInt64 {
        UInt64(UInt32(truncatingIfNeeded: hash)) << 32 | UInt64(slot + 1)
    }

    /// Where the search for a bucket starts: its hash's place in the table.
    @inlinable func home(_ bucket: UInt64) -> Int { Int(truncatingIfNeeded: bucket >> 32) & mask }

    /// The slot of a key that hashes to `hash` and for which `matches` (given a slot) is true.
    @inlinable public func slot(hash: Int, where matches: (Int) -> Bool) -> Int? {
        guard !buckets.isEmpty else { return nil }
        let wanted = Self.bucket(0, hash: hash) & ~0xFFFF_FFFF
        var index = home(wanted)
        while buckets[index] != 0 {
            let bucket = buckets[index]
            if bucket & ~0xFFFF_FFFF == wanted, matches(Int(bucket & 0xFFFF_FFFF) - 1) {
                return Int(bucket & 0xFFFF_FFFF) - 1
            }
            index = (index + 1) & mask
        }
        return nil
    }

    /// Indexes `slot`, whose key hashes to `hash`.
    @inlinable public mutating func insert(_ slot: Int, hash: Int) {
        if (indexed + 1) * 4 > buckets.count * 3 {
            let old = buckets
            buckets = [UInt64](repeating: 0, count: max(16, old.count * 2))
            for bucket in old where bucket != 0 { place(bucket) }
        }
        place(Self.bucket(slot, hash: hash))
        indexed += 1
    }

    @inlinable mutating func place(_ bucket: UInt64) {
        var index = home(bucket)
        while buckets[index] != 0 { index = (index + 1) & mask }
        buckets[index] = bucket
    }

    /// The index of the bucket of `slot`, whose key hashes to `hash`.
    @inlinable func index(of slot: Int, hash: Int) -> Int? {
        guard !buckets.isEmpty else { return nil }
        let wanted = Self.bucket(slot, hash: hash)
        var index = home(wanted)
        while buckets[index] != wanted {
            if buckets[index] == 0 { return nil }
            index = (index + 1) & mask
        }
        return index
    }

    /// Indexes `new` in the place of `old`, whose keys both hash to `hash`.
    @inlinable public mutating func replace(_ old: Int, with new: Int, hash: Int) {
        guard let index = index(of: old, hash: hash) else { return }
        buckets[index] = Self.bucket(new, hash: hash)
    }

    /// Stops indexing `slot`, whose key hashes to `hash`.
    @inlinable public mutating func remove(_ slot: Int, hash: Int) {
        guard var hole = index(of: slot, hash: hash) else { return }
        // Each bucket after the hole, up to the next empty one, moves into it unless its home
        // lies after the hole (it would then be found no more).
        var next = (hole + 1) & mask
        while buckets[next] != 0 {
            if (next - home(buckets[next])) & mask >= (next - hole) & mask {
                buckets[hole] = buckets[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        buckets[hole] = 0
        indexed -= 1
    }
}
