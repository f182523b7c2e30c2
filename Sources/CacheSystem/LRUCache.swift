/// A dictionary that holds at most `capacity` values and at most `byteLimit` bytes of them,
/// dropping the least recently used ones beyond either: what the package remembers per key
/// (the exchange's candidates, decoded facts and served fields, the proxy's routes, the disk
/// store's heads) stays bounded in count and in memory without ever being cleared wholesale,
/// so a working set larger than the capacity keeps its hot keys.
///
/// A value's bytes are what its owner says it costs (``set(_:for:cost:)``: the heap memory
/// its key and value hold) plus ``entryOverhead``, the cache's own per-value bookkeeping.
///
/// A value type with no lock: keep it behind the owner's lock (``Locked``). Public and
/// inlinable, like ``Locked``, so that it is specialized where it is used.
public struct LRUCache<Key: Hashable, Value> {
    @usableFromInline
    struct Node {
        @usableFromInline var key: Key
        /// The key's hash, as ``slots`` indexes it.
        @usableFromInline var hash: Int
        @usableFromInline var value: Value
        /// What the value is charged: its cost plus ``entryOverhead``.
        @usableFromInline var bytes: Int
        @usableFromInline var newer: Int
        @usableFromInline var older: Int

        @inlinable
        init(key: Key, hash: Int, value: Value, bytes: Int, newer: Int, older: Int) {
            self.key = key
            self.hash = hash
            self.value = value
            self.bytes = bytes
            self.newer = newer
            self.older = older
        }
    }

    /// The most values held.
    public let capacity: Int
    /// The most bytes the values held are charged together.
    public let byteLimit: Int
    /// The bytes the values held are charged together.
    @inlinable public var bytes: Int { chargedBytes }
    @usableFromInline var chargedBytes = 0
    @usableFromInline var nodes: [Node] = []
    /// The node of each key, by its hash (no second copy of the key).
    @usableFromInline var slots = SlotIndex()
    @usableFromInline var newest = -1
    @usableFromInline var oldest = -1

    /// An empty cache for at most `capacity` values (at least one) and `byteLimit` bytes.
    @inlinable
    public init(capacity: Int, byteLimit: Int = .max) {
        precondition(capacity > 0, "an LRU cache needs room for at least one value")
        self.capacity = capacity
        self.byteLimit = byteLimit
    }

    /// How many values are held.
    @inlinable public var count: Int { nodes.count }

    /// Every value held, in no order; none becomes more recently used.
    @inlinable public var values: [Value] { nodes.map(\.value) }

    /// The bytes each value is charged besides its cost: its node in the recency list and its
    /// bucket in the key index (both grow by doubling, so twice their size; the index up to
    /// three times, being at most three quarters full).
    public static var entryOverhead: Int { 2 * MemoryLayout<Node>.stride + 3 * MemoryLayout<UInt64>.stride }

    /// The node holding `key`, which hashes to `hash`.
    @inlinable
    func slot(of key: Key, hash: Int) -> Int? { slots.slot(hash: hash) { nodes[$0].key == key } }

    /// The value for `key`, which becomes the most recently used.
    @inlinable
    public mutating func value(for key: Key) -> Value? { value(for: key, hash: key.hashValue) }

    /// The same, for a key already hashed (`key.hashValue`).
    @inlinable
    public mutating func value(for key: Key, hash: Int) -> Value? {
        guard let slot = slot(of: key, hash: hash) else { return nil }
        makeNewest(slot)
        return nodes[slot].value
    }

    /// Sets the value for `key` as the most recently used, dropping the least recently used
    /// values while more than ``capacity`` or ``byteLimit`` would be held. A value whose cost
    /// alone is beyond the byte limit is not kept (and `key` is forgotten).
    ///
    /// - Parameter cost: The bytes of heap memory `key` and `value` hold (0 for plain values).
    @inlinable
    public mutating func set(_ value: Value, for key: Key, cost: Int = 0) {
        set(value, for: key, hash: key.hashValue, cost: cost)
    }

    /// The same, for a key already hashed (`key.hashValue`).
    @inlinable
    public mutating func set(_ value: Value, for key: Key, hash: Int, cost: Int = 0) {
        let charged = cost + Self.entryOverhead
        guard charged <= byteLimit else {
            if let slot = slot(of: key, hash: hash) { remove(slot) }
            return
        }
        if let slot = slot(of: key, hash: hash) {
            chargedBytes += charged - nodes[slot].bytes
            nodes[slot].value = value
            nodes[slot].bytes = charged
            makeNewest(slot)
        } else {
            while nodes.count >= capacity { remove(oldest) }
            let slot = nodes.count
            nodes.append(Node(key: key, hash: hash, value: value, bytes: charged, newer: -1, older: -1))
            slots.insert(slot, hash: hash)
            chargedBytes += charged
            attachAsNewest(slot)
        }
        // The value just set fits alone, so this stops before reaching it.
        while chargedBytes > byteLimit { remove(oldest) }
    }

    /// Forgets `key`.
    @inlinable
    public mutating func removeValue(for key: Key) {
        if let slot = slot(of: key, hash: key.hashValue) { remove(slot) }
    }

    /// Forgets the value in `slot`.
    @inlinable
    mutating func remove(_ slot: Int) {
        slots.remove(slot, hash: nodes[slot].hash)
        detach(slot)
        chargedBytes -= nodes[slot].bytes
        // Move the last node into the freed slot so the array stays dense.
        let last = nodes.count - 1
        if slot != last {
            let moved = nodes[last]
            nodes[slot] = moved
            slots.replace(last, with: slot, hash: moved.hash)
            if moved.newer >= 0 { nodes[moved.newer].older = slot } else { newest = slot }
            if moved.older >= 0 { nodes[moved.older].newer = slot } else { oldest = slot }
        }
        nodes.removeLast()
    }

    @inlinable
    mutating func makeNewest(_ slot: Int) {
        guard slot != newest else { return }
        detach(slot)
        attachAsNewest(slot)
    }

    @inlinable
    mutating func detach(_ slot: Int) {
        let newer = nodes[slot].newer
        let older = nodes[slot].older
        if newer >= 0 { nodes[newer].older = older } else { newest = older }
        if older >= 0 { nodes[older].newer = newer } else { oldest = newer }
        nodes[slot].newer = -1
        nodes[slot].older = -1
    }

    @inlinable
    mutating func attachAsNewest(_ slot: Int) {
        nodes[slot].older = newest
        nodes[slot].newer = -1
        if newest >= 0 { nodes[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}
