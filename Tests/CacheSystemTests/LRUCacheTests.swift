import CacheSystem
import Testing

@Suite("LRUCache: what the exchange, the proxy and the disk store remember, bounded")
struct LRUCacheTests {
    @Test("beyond its capacity the least recently used value goes, and reading a value keeps it")
    func dropsTheLeastRecentlyUsed() {
        var cache = LRUCache<String, Int>(capacity: 3)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.set(3, for: "c")
        #expect(cache.value(for: "a") == 1)  // a is now the most recently used
        cache.set(4, for: "d")  // b goes
        #expect(cache.count == 3)
        #expect(cache.value(for: "b") == nil)
        #expect(cache.value(for: "a") == 1)
        #expect(cache.value(for: "c") == 3)
        #expect(cache.value(for: "d") == 4)
    }

    @Test("setting a key again replaces its value and makes it the most recently used")
    func setReplaces() {
        var cache = LRUCache<String, Int>(capacity: 2)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.set(10, for: "a")
        cache.set(3, for: "c")  // b goes, not a
        #expect(cache.value(for: "a") == 10)
        #expect(cache.value(for: "b") == nil)
        #expect(cache.count == 2)
    }

    @Test("removed keys are forgotten and the order of the rest is kept")
    func removeKeepsOrder() {
        var cache = LRUCache<Int, Int>(capacity: 4)
        for key in 0..<4 { cache.set(key * 10, for: key) }
        cache.removeValue(for: 1)
        cache.removeValue(for: 7)  // absent: nothing happens
        #expect(cache.count == 3)
        cache.set(40, for: 4)
        cache.set(50, for: 5)  // full again: 0, the oldest left, goes
        #expect(cache.value(for: 0) == nil)
        #expect(cache.value(for: 1) == nil)
        #expect([2, 3, 4, 5].map { cache.value(for: $0) } == [20, 30, 40, 50])
    }

    @Test("a working set twice the capacity, read in turn, never grows it")
    func staysBounded() {
        var cache = LRUCache<Int, [UInt8]>(capacity: 100)
        for round in 0..<3 {
            for key in 0..<200 {
                if cache.value(for: key) == nil { cache.set([UInt8(truncatingIfNeeded: key + round)], for: key) }
                #expect(cache.count <= 100)
            }
        }
        #expect(cache.count == 100)
        #expect(cache.value(for: 199) != nil)
        #expect(cache.value(for: 0) == nil)
    }

    /// A key whose hashes collide in threes: the index finds a key by its hash and then by
    /// comparing keys, and moves the last node into a freed slot on every removal.
    struct CollidingKey: Hashable {
        let number: Int
        func hash(into hasher: inout Hasher) { hasher.combine(number % 3) }
    }

    @Test("keys whose hashes collide are set, read, replaced, removed and evicted as a plain list says")
    func agreesWithAListWhenHashesCollide() {
        var cache = LRUCache<CollidingKey, Int>(capacity: 40)
        // Most recently used last.
        var model: [(key: Int, value: Int)] = []
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for step in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let key = Int(state >> 33) % 90
            let place = model.firstIndex { $0.key == key }
            switch step % 5 {
            case 0, 1:
                cache.set(step, for: CollidingKey(number: key))
                if let place { model.remove(at: place) }
                if model.count == 40 { model.removeFirst() }
                model.append((key, step))
            case 2:
                cache.removeValue(for: CollidingKey(number: key))
                if let place { model.remove(at: place) }
            default:
                #expect(cache.value(for: CollidingKey(number: key)) == place.map { model[$0].value })
                if let place { model.append(model.remove(at: place)) }
            }
            #expect(cache.count == model.count)
        }
        // Every key held is found (read oldest first: the order stays), and they go in the
        // model's order once the cache is full.
        for (key, value) in model { #expect(cache.value(for: CollidingKey(number: key)) == value) }
        for filler in model.count..<40 { cache.set(0, for: CollidingKey(number: 2_000 + filler)) }
        for (key, _) in model {
            cache.set(-1, for: CollidingKey(number: 1_000 + key))
            #expect(cache.value(for: CollidingKey(number: key)) == nil)
        }
    }
}

@Suite("LRUCache: bounded in bytes as well as in count")
struct LRUCacheByteLimitTests {
    @Test("beyond its byte limit the least recently used values go, each charged its cost and the cache's overhead")
    func dropsTheLeastRecentlyUsedBeyondTheByteLimit() {
        let overhead = LRUCache<Int, Int>.entryOverhead
        var cache = LRUCache<Int, Int>(capacity: 100, byteLimit: 3 * (1_000 + overhead))
        for key in 0..<3 { cache.set(key, for: key, cost: 1_000) }
        #expect(cache.count == 3)
        #expect(cache.value(for: 0) == 0)  // 0 is now the most recently used
        cache.set(3, for: 3, cost: 1_000)  // 1 goes
        #expect(cache.count == 3)
        #expect(cache.value(for: 1) == nil)
        cache.set(4, for: 4, cost: 2_000)  // 2 and 0 go
        #expect(cache.value(for: 2) == nil)
        #expect(cache.value(for: 0) == nil)
        #expect([3, 4].map { cache.value(for: $0) } == [3, 4])
        #expect(cache.bytes == 3_000 + 2 * overhead)
        cache.set(4, for: 4, cost: 10)  // a smaller value for the same key is charged less
        #expect(cache.bytes == 1_010 + 2 * overhead)
        cache.removeValue(for: 3)
        #expect(cache.bytes == 10 + overhead)
    }

    @Test("a value costing more than the whole limit is not kept, and its key is forgotten")
    func aValueLargerThanTheLimitIsNotKept() {
        var cache = LRUCache<String, Int>(capacity: 10, byteLimit: 4_096)
        cache.set(1, for: "a")
        cache.set(2, for: "b")
        cache.set(3, for: "a", cost: 10_000)
        #expect(cache.value(for: "a") == nil)
        #expect(cache.value(for: "b") == 2)
        #expect(cache.count == 1)
    }
}

@Suite("ShardedLRUCache: the same bounds, a lock per shard")
struct ShardedLRUCacheTests {
    @Test("one shard keeps LRUCache's exact bounds; several keep a part each and hold every key once")
    func boundsPerShard() {
        let single = ShardedLRUCache<String, Int>(capacity: 3, shards: 1)
        for (value, key) in ["a", "b", "c"].enumerated() { single.set(value, for: key) }
        #expect(single.value(for: "a") == 0)  // a is now the most recently used
        single.set(3, for: "d")  // b goes
        #expect(single.value(for: "b") == nil && single.value(for: "a") == 0 && single.totals.count == 3)

        let sharded = ShardedLRUCache<Int, Int>(capacity: 800, byteLimit: 8 << 20, shards: 8)
        for key in 0..<10_000 { sharded.set(key, for: key, cost: 100) }
        let (count, bytes) = sharded.totals
        #expect(count <= 800 && count >= 700, "\(count) values held")
        #expect(bytes == count * (100 + LRUCache<Int, Int>.entryOverhead))
        #expect(sharded.value(for: 9_999) == 9_999, "the last key set is held")
        sharded.set(-1, for: 9_999)
        #expect(sharded.value(for: 9_999) == -1 && sharded.totals.count == count, "a key is held once")
    }
}
