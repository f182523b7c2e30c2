/// A dictionary that holds at most `capacity` values, dropping the least recently used one
/// beyond it: what the package remembers per key (the exchange's candidates, decoded facts
/// and served fields, the proxy's routes, the disk store's heads) stays bounded without ever
/// being cleared wholesale, so a working set larger than the capacity keeps its hot keys.
///
/// A value type with no lock: keep it behind the owner's lock (``Locked``). Public and
/// inlinable, like ``Locked``, so that it is specialized where it is used.
public struct LRUCache<Key: Hashable, Value> {
    @usableFromInline
    struct Node {
        @usableFromInline var key: Key
        @usableFromInline var value: Value
        @usableFromInline var newer: Int
        @usableFromInline var older: Int

        @inlinable
        init(key: Key, value: Value, newer: Int, older: Int) {
            self.key = key
            self.value = value
            self.newer = newer
            self.older = older
        }
    }

    /// The most values held.
    public let capacity: Int
    @usableFromInline var nodes: [Node] = []
    @usableFromInline var slots: [Key: Int] = [:]
    @usableFromInline var newest = -1
    @usableFromInline var oldest = -1

    /// An empty cache for at most `capacity` values (at least one).
    @inlinable
    public init(capacity: Int) {
        precondition(capacity > 0, "an LRU cache needs room for at least one value")
        self.capacity = capacity
    }

    /// How many values are held.
    @inlinable public var count: Int { slots.count }

    /// The value for `key`, which becomes the most recently used.
    @inlinable
    public mutating func value(for key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        makeNewest(slot)
        return nodes[slot].value
    }

    /// Sets the value for `key` as the most recently used, dropping the least recently used
    /// value when full.
    @inlinable
    public mutating func set(_ value: Value, for key: Key) {
        if let slot = slots[key] {
            nodes[slot].value = value
            makeNewest(slot)
            return
        }
        let slot: Int
        if nodes.count < capacity {
            slot = nodes.count
            nodes.append(Node(key: key, value: value, newer: -1, older: -1))
        } else {
            // Reuse the oldest node's slot.
            slot = oldest
            detach(slot)
            slots[nodes[slot].key] = nil
            nodes[slot] = Node(key: key, value: value, newer: -1, older: -1)
        }
        slots[key] = slot
        attachAsNewest(slot)
    }

    /// Forgets `key`.
    @inlinable
    public mutating func removeValue(for key: Key) {
        guard let slot = slots.removeValue(forKey: key) else { return }
        detach(slot)
        // Move the last node into the freed slot so the array stays dense.
        let last = nodes.count - 1
        if slot != last {
            let moved = nodes[last]
            nodes[slot] = moved
            slots[moved.key] = slot
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
