import CacheLocking

/// A dictionary that holds at most `capacity` values, dropping the least recently used one
/// beyond it: what the exchange remembers (candidates, decoded facts, served fields) stays
/// bounded without ever being cleared wholesale.
///
/// A value type with no lock: keep it behind the owner's lock (``Locked``).
struct LRUCache<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var newer: Int
        var older: Int
    }

    let capacity: Int
    private var nodes: [Node] = []
    private var slots: [Key: Int] = [:]
    private var newest = -1
    private var oldest = -1

    init(capacity: Int) {
        precondition(capacity > 0, "an LRU cache needs room for at least one value")
        self.capacity = capacity
    }

    var count: Int { slots.count }

    /// The value for `key`, which becomes the most recently used.
    mutating func value(for key: Key) -> Value? {
        guard let slot = slots[key] else { return nil }
        makeNewest(slot)
        return nodes[slot].value
    }

    /// Sets the value for `key` as the most recently used, dropping the least recently used
    /// value when full.
    mutating func set(_ value: Value, for key: Key) {
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
    mutating func removeValue(for key: Key) {
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

    private mutating func makeNewest(_ slot: Int) {
        guard slot != newest else { return }
        detach(slot)
        attachAsNewest(slot)
    }

    private mutating func detach(_ slot: Int) {
        let newer = nodes[slot].newer
        let older = nodes[slot].older
        if newer >= 0 { nodes[newer].older = older } else { newest = older }
        if older >= 0 { nodes[older].newer = newer } else { oldest = newer }
        nodes[slot].newer = -1
        nodes[slot].older = -1
    }

    private mutating func attachAsNewest(_ slot: Int) {
        nodes[slot].older = newest
        nodes[slot].newer = -1
        if newest >= 0 { nodes[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}
