import CacheSemantics
import CacheTestSupport
import Testing

@testable import CacheStorage

@Suite("CacheStorage: the frequency sketch (TinyLFU's filter)")
struct FrequencySketchTests {
    @Test("uses are counted per key, up to 15; a key never counted reads 0")
    func countsAndSaturates() {
        var sketch = FrequencySketch()
        for _ in 0..<5 { sketch.increment(1) }
        #expect(sketch.frequency(1) == 5)
        #expect(sketch.frequency(2) == 0)
        for _ in 0..<20 { sketch.increment(1) }
        #expect(sketch.frequency(1) == 15)
    }

    @Test("every counter is halved once ten uses a word were counted: old popularity fades")
    func ages() {
        var sketch = FrequencySketch()
        for _ in 0..<12 { sketch.increment(7) }
        #expect(sketch.frequency(7) >= 12)
        // 64 words: a halving within 640 uses. A halved counter is at most 7 (15 / 2).
        var uses = 0
        while sketch.frequency(7) > 7 && uses < 640 {
            sketch.increment(1_000 + uses)
            uses += 1
        }
        #expect(sketch.frequency(7) <= 7)
        #expect(sketch.frequency(7) >= 6)
        #expect(uses > 500)
    }

    @Test("a table grown for more keys starts empty and keeps one word a key")
    func grows() {
        var sketch = FrequencySketch()
        for _ in 0..<3 { sketch.increment(9) }
        sketch.ensureCapacity(10)
        #expect(sketch.frequency(9) == 3)
        sketch.ensureCapacity(100)
        #expect(sketch.frequency(9) == 0)
        // A thousand keys counted once each in a table of a word a key: few estimates are off.
        sketch.ensureCapacity(1_000)
        for key in 0..<1_000 { sketch.increment(key) }
        let overestimated = (0..<1_000).filter { sketch.frequency($0) != 1 }.count
        #expect(overestimated < 20)
    }
}

@Suite("CacheStorage: admission to a full memory tier")
struct AdmissionTests {
    /// A memory tier holding four 10,000-byte bodies and no fifth.
    static func fullMemory() throws -> (MemoryStore, [StoredEntry]) {
        let body = [UInt8](repeating: 1, count: 10_000)
        let sample = StoredEntry(
            id: EntryID(), head: head("https://example.com/0"), bodySize: 10_000, storedAt: 0, lastAccess: 0)
        let cost = MemoryStore.cost(of: sample, body: body)
        let memory = MemoryStore(capacity: 4 * cost + cost / 2)
        var held: [StoredEntry] = []
        for number in 0..<4 {
            let entry = StoredEntry(
                id: EntryID(), head: head("https://example.com/\(number)"), bodySize: 10_000, storedAt: 0, lastAccess: 0
            )
            memory.insert(entry, body: body)
            held.append(entry)
        }
        #expect(held.allSatisfy { memory.holds($0.id) })
        return (memory, held)
    }

    static func candidate(_ number: Int) -> StoredEntry {
        StoredEntry(
            id: EntryID(), head: head("https://example.com/candidate\(number)"), bodySize: 10_000, storedAt: 0,
            lastAccess: 0)
    }

    static let body = [UInt8](repeating: 2, count: 10_000)

    @Test("a body read from a slower tier goes in while there is room, whatever its uses")
    func roomAdmits() {
        let memory = MemoryStore(capacity: 1 << 20)
        let entry = Self.candidate(0)
        #expect(memory.promote(entry, body: Self.body))
        #expect(memory.holds(entry.id, Self.body))
    }

    @Test("a full tier refuses a body used less than the entry it would evict, and keeps what it holds")
    func lessUsedRefused() throws {
        let (memory, held) = try Self.fullMemory()
        for entry in held { memory.use(entry.id, times: 3) }
        let entry = Self.candidate(0)
        memory.use(entry.id, times: 1, at: 10)
        #expect(!memory.promote(entry, body: Self.body))
        #expect(!memory.holds(entry.id))
        #expect(held.allSatisfy { memory.holds($0.id) })
    }

    @Test("a body used more than the least recently used entry takes its place")
    func moreUsedAdmitted() throws {
        let (memory, held) = try Self.fullMemory()
        // The first entry is the least recently used; the others are read after it.
        for entry in held.dropFirst() { memory.use(entry.id, times: 1, at: 5) }
        let entry = Self.candidate(0)
        memory.use(entry.id, times: 3)
        #expect(memory.promote(entry, body: Self.body))
        #expect(memory.holds(entry.id, Self.body))
        #expect(!memory.holds(held[0].id))
        #expect(held.dropFirst().allSatisfy { memory.holds($0.id) })
    }

    @Test("a warm body that loses is still admitted now and then: a held entry made to look popular cannot keep it out")
    func warmAdmittedAtRandom() throws {
        let (memory, held) = try Self.fullMemory()
        for entry in held { memory.use(entry.id, times: 15) }
        let entry = Self.candidate(0)
        memory.use(entry.id, times: 6)
        // One in 128 a try: none in 2,000 tries would happen once in six million runs.
        var tries = 0
        while !memory.promote(entry, body: Self.body) && tries < 2_000 { tries += 1 }
        #expect(tries < 2_000)
        #expect(memory.holds(entry.id, Self.body))
        // A cold one (used once) never is.
        let cold = Self.candidate(1)
        memory.use(cold.id, times: 1, at: 20)
        #expect((0..<500).allSatisfy { _ in !memory.promote(cold, body: Self.body) })
    }

    @Test("a crawl read from disk once each does not push the popular bodies out of memory")
    func crawlKeepsPopular() throws {
        let directory = TemporaryDirectory()
        let disk = try DiskStore(DiskStore.Configuration(directory: directory.path))
        let body = [UInt8](repeating: 3, count: 10_000)
        let sample = StoredEntry(
            id: EntryID(), head: head("https://example.com/popular0"), bodySize: 10_000, storedAt: 0, lastAccess: 0)
        let cost = MemoryStore.cost(of: sample, body: body)
        let store = TieredStore(memory: MemoryStore(capacity: 8 * cost), disk: disk)
        let popular = try (0..<4).map { try put(disk, head("https://example.com/popular\($0)"), body) }
        let crawled = try (0..<40).map { try put(disk, head("https://example.com/crawled\($0)"), body) }
        // Each popular body read three times (the first from disk), as a cache's hits record it.
        for round in 0..<3 {
            for entry in popular {
                #expect(try store.openBody(for: entry).readAll() == body)
                store.recordAccess(entry.id, at: Double(round))
            }
        }
        for entry in crawled {
            #expect(try store.openBody(for: entry).readAll() == body)
            store.recordAccess(entry.id, at: 10)
        }
        #expect(popular.allSatisfy { store.memory.holds($0.id, body) })
        // The crawl still filled the room the popular ones left.
        #expect(crawled.contains { store.memory.holds($0.id) })
    }
}

extension MemoryStore {
    /// Records `times` accesses to `id`, a second apart from `time`.
    fileprivate func use(_ id: EntryID, times: Int, at time: Double = 0) {
        for second in 0..<times { recordAccess(id, at: time + Double(second)) }
    }

    /// Whether a body of `id` is held, and is `body` when one is given (said without the bytes
    /// when an expectation fails).
    fileprivate func holds(_ id: EntryID, _ body: [UInt8]? = nil) -> Bool {
        guard let held = heldBody(of: id) else { return false }
        return body.map { held == $0 } ?? true
    }
}
