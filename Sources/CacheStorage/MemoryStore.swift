import CacheSemantics
import CacheSystem
import Foundation

/// A store in memory: a byte-bounded least-recently-used cache. Pinned entries are never
/// evicted; an entry larger than the maximum entry size is refused with
/// ``StorageError/Kind/tooLarge``.
///
/// The capacity bounds the memory entries take, not only their bodies: each entry is charged
/// its body and its overhead (its head's keys, URL, fields and facts, its node in the
/// recency list, its places in the indexes: `MemoryCost`), so a million one-byte bodies
/// cannot hold a gigabyte of heads. ``accountedBytes`` is what is charged.
public final class MemoryStore: CacheStore {
    /// The most bytes kept: bodies and each entry's overhead (``accountedBytes``).
    public let capacity: Int64
    /// The largest body accepted.
    public let maximumEntrySize: Int64

    /// One entry in the recency list. Nodes live in an array and link by slot number, so
    /// moving an entry to the front changes a few integers in place; the variants of a key
    /// link the same way, oldest first.
    private struct Node {
        var id: EntryID
        var head: EntryHead
        var body: [UInt8]
        var storedAt: Double
        var lastAccess: Double
        var hits: Int
        /// What the entry is charged against the capacity (``cost(of:body:)``).
        var cost: Int64
        var newer: Int32 = -1
        var older: Int32 = -1
        /// The next variant of the same primary key.
        var nextVariant: Int32 = -1
        var isPinned: Bool

        init(_ entry: StoredEntry, body: [UInt8], cost: Int64) {
            id = entry.id
            head = entry.head
            self.body = body
            storedAt = entry.storedAt
            lastAccess = entry.lastAccess
            hits = entry.hits
            self.cost = cost
            isPinned = entry.isPinned
        }

        var entry: StoredEntry {
            StoredEntry(
                id: id, head: head, bodySize: Int64(body.count), storedAt: storedAt, lastAccess: lastAccess,
                hits: hits, isPinned: isPinned)
        }
    }

    private struct State {
        var nodes: [Node] = []
        var freeSlots: [Int] = []
        /// The slot of each entry, by identity.
        var slots = SlotIndex()
        /// The slot of each primary key's first variant (the others follow ``Node/nextVariant``).
        var byKey = SlotIndex()
        /// The slots of the entries carrying each tag.
        var byTag: [String: Set<Int>] = [:]
        var newest = -1
        var oldest = -1
        var totals = StoreTotals()
        /// The part of ``totals`` that is ``StoragePolicy/memoryOnly`` entries
        /// (``MemoryStore/memoryOnlyTotals``).
        var memoryOnlyTotals = StoreTotals()
        /// The entries' costs together (``cost(of:body:)``), kept within the capacity.
        var accounted: Int64 = 0
        /// Bumped by every change to what ``variants(of:)`` returns.
        var changes: UInt64 = 0
        /// Bumped by every change to a ``StoragePolicy/memoryOnly`` entry, under the lock; read
        /// without it (``MemoryStore/memoryOnlyChangeCount``).
        let memoryOnlyChanges: AtomicCount
        /// Accesses recorded and not yet applied (``MemoryStore/recordAccess(_:at:)``).
        let accesses: AccessBuffers
        /// How often each identity was used lately, entries held or not: what decides whether a
        /// body read from a slower tier may take a held entry's place (``MemoryStore/promote(_:body:)``).
        var frequencies = FrequencySketch()
        /// A xorshift generator's state, for the few warm bodies admitted at random.
        var draws = UInt64.random(in: 1...UInt64.max)

        init(memoryOnlyChanges: AtomicCount, accesses: AccessBuffers) {
            self.memoryOnlyChanges = memoryOnlyChanges
            self.accesses = accesses
        }

        /// Applies the accesses recorded so far: each entry's time and hit count, and its place
        /// in the recency list.
        mutating func applyAccesses() { apply(accesses.drain()) }

        mutating func apply(_ recorded: [AccessBuffers.Access]) {
            for access in recorded {
                let hash = access.id.hashValue
                frequencies.increment(hash)
                guard let slot = slots.slot(hash: hash, where: { nodes[$0].id == access.id }) else { continue }
                // Buffered by thread: one entry's accesses may come in another order than made.
                nodes[slot].lastAccess = max(nodes[slot].lastAccess, access.time)
                nodes[slot].hits += 1
                if newest != slot {
                    MemoryStore.detach(slot, &self)
                    MemoryStore.makeNewest(slot, &self)
                }
            }
        }

        mutating func changed(_ head: EntryHead) {
            changes &+= 1
            if head.storagePolicy == .memoryOnly { memoryOnlyChanges.bump() }
        }

        func slot(of id: EntryID) -> Int? {
            slots.slot(hash: id.hashValue) { nodes[$0].id == id }
        }

        /// The slot of the oldest variant of `primaryKey` (the others follow ``Node/nextVariant``).
        func firstVariant(of primaryKey: String) -> Int? {
            byKey.slot(hash: primaryKey.hashValue) { nodes[$0].head.primaryKey == primaryKey }
        }

        /// The slots of the variants of `primaryKey`, oldest first.
        func variants(of primaryKey: String) -> [Int] {
            var result: [Int] = []
            var cursor = firstVariant(of: primaryKey) ?? -1
            while cursor >= 0 {
                result.append(cursor)
                cursor = Int(nodes[cursor].nextVariant)
            }
            return result
        }
    }

    private let state: Locked<State>
    /// ``State/memoryOnlyChanges``, read without the lock.
    private let memoryOnlyChanges = AtomicCount()
    /// ``State/accesses``, added to without the lock.
    private let accesses = AccessBuffers()
    /// Bodies ``promote(_:body:)`` took in, and those it refused.
    private let admitted = AtomicCount(), refused = AtomicCount()
    private let clock: @Sendable () -> Double

    /// Creates a store holding at most `capacity` bytes of entries: their bodies and overhead.
    ///
    /// - Parameters:
    ///   - capacity: The byte limit; least recently used entries are evicted beyond it.
    ///   - maximumEntrySize: The largest body accepted; by default a quarter of `capacity`.
    ///   - clock: Seconds since 1970, for `storedAt` and `lastAccess`.
    public init(
        capacity: Int64, maximumEntrySize: Int64? = nil,
        clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.capacity = max(0, capacity)
        self.maximumEntrySize = maximumEntrySize ?? max(0, capacity) / 4
        self.clock = clock
        state = Locked(State(memoryOnlyChanges: memoryOnlyChanges, accesses: accesses))
    }

    public var changeCount: UInt64? { state.withLock { $0.changes } }

    /// The bytes charged against ``capacity``: every entry's body and overhead. At most the
    /// capacity, unless pinned entries alone take more.
    public var accountedBytes: Int64 { state.withLock { $0.accounted } }

    /// What each entry costs besides its head's and body's heap memory: its node (the array
    /// of nodes grows by doubling, so twice its size), its buckets in the identity and key
    /// indexes (``SlotIndex``: at most three quarters full, growing by doubling, so three
    /// times a bucket each), its word in the frequency sketch (``FrequencySketch``: a power of
    /// two, so two) and, once removed, its slot in the free list.
    static let entryOverhead =
        2 * MemoryLayout<Node>.stride + 2 * 3 * MemoryLayout<UInt64>.stride + 2 * MemoryLayout<UInt64>.stride
        + MemoryLayout<Int>.stride
    /// What each of an entry's tags costs in the tag index: its member in the tag's set and a
    /// share of the set and its entry in the index.
    static let tagOverhead = 3 * MemoryLayout<Int>.stride + MemoryCost.allocation(32 + 8)

    /// What an entry is charged against the capacity: its body's allocation, its head's heap
    /// memory and ``entryOverhead``.
    static func cost(of entry: StoredEntry, body: [UInt8]) -> Int64 {
        Int64(
            MemoryCost.bytes(body) + MemoryCost.head(entry.head) + entryOverhead
                + entry.head.tags.count * tagOverhead)
    }

    /// Like ``changeCount`` but counting only changes to memory-only entries: a tiered store's
    /// variants change with those and the disk's, not with what the memory tier caches of the disk.
    /// Read without the store's lock: a tiered store's every hit reads it (``TieredStore/changeCount``),
    /// and the event loops of a caching proxy took turns on the lock for it.
    var memoryOnlyChangeCount: UInt64 { memoryOnlyChanges.value }

    /// Like ``totals()`` but counting only memory-only entries: what a tiered store adds to the
    /// disk's totals, kept as entries come and go (the status page and the metrics ask for
    /// totals at every poll, on an event loop, whatever the number of entries).
    var memoryOnlyTotals: StoreTotals { state.withLock { $0.memoryOnlyTotals } }

    public func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        state.withLock { state in state.variants(of: primaryKey).map { state.nodes[$0].entry } }
    }

    /// No entry of `primaryKey` is held: one lookup, nothing copied.
    public func holdsNone(_ primaryKey: String) -> Bool {
        state.withLock { $0.firstVariant(of: primaryKey) == nil }
    }

    public func openBody(of id: EntryID) throws(StorageError) -> any StoredBody {
        guard let body = heldBody(of: id) else { throw Self.notFound(id) }
        return BytesBody(body)
    }

    /// The body of `id`, or `nil` when it is not held: a tiered store asks this on every hit,
    /// and a miss there is no error (nothing to describe).
    func heldBody(of id: EntryID) -> [UInt8]? {
        state.withLock { state in state.slot(of: id).map { state.nodes[$0].body } }
    }

    public func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter {
        MemoryWriter(store: self, head: head)
    }

    /// Inserts a finished entry, replacing the same primary and variant key (and pinned when
    /// it was), then evicts.
    func insert(head: EntryHead, body: [UInt8]) throws(StorageError) -> StoredEntry {
        guard Int64(body.count) <= maximumEntrySize, Int64(body.count) <= capacity else {
            throw StorageError(
                .tooLarge,
                "not stored in memory: the body has \(body.count) bytes, more than the maximum entry size "
                    + "\(min(maximumEntrySize, capacity)); raise the memory capacity or maximum entry size")
        }
        let now = clock()
        let entry = StoredEntry(id: EntryID(), head: head, bodySize: Int64(body.count), storedAt: now, lastAccess: now)
        let body = Self.compacted(body)
        let cost = Self.cost(of: entry, body: body)
        guard cost <= capacity else {
            throw StorageError(
                .tooLarge,
                "not stored in memory: with its head and bookkeeping the entry takes \(cost) bytes, more than the "
                    + "memory capacity \(capacity); raise the memory capacity")
        }
        return state.withLock { state in
            state.frequencies.increment(entry.id.hashValue)
            return Self.add(entry, body: body, cost: cost, to: &state, capacity: capacity, keepingPin: true)
        }
    }

    /// Adds `chunk` to `body`, the copy of a body being written elsewhere that is kept for this
    /// store, while the whole still fits its maximum entry size; beyond that `body` becomes
    /// `nil` (and stays so).
    package func collect(_ chunk: [UInt8], into body: inout GatheredBytes?) {
        guard var collected = body else { return }
        body = nil  // `collected` is then its storage's only reference: added to in place
        collected.append(chunk)
        body = Int64(collected.count) <= maximumEntrySize ? collected : nil
    }

    /// Inserts an entry that already has an identity and its own pin: one just stored in a
    /// slower tier, kept here too.
    package func insert(_ entry: StoredEntry, body: [UInt8]) {
        guard let (body, cost) = fitting(entry, body) else { return }
        state.withLock { state in
            state.frequencies.increment(entry.id.hashValue)
            _ = Self.add(entry, body: body, cost: cost, to: &state, capacity: capacity, keepingPin: false)
        }
    }

    /// Puts an entry whose body was read from a slower tier in memory, as ``insert(_:body:)``
    /// does, when there is room for it or it was used more lately than the entry it would
    /// evict first (TinyLFU's admission, ``FrequencySketch``). A full memory tier then keeps
    /// what is used most instead of trading one entry for another on every read from the
    /// slower tier (with uses spread evenly, every such read would evict an entry as likely to
    /// be asked for next), and one pass over many entries (a crawl) does not push out the
    /// popular ones. A warm body (used more than five times) that loses is still admitted
    /// once in 128 tries, so that no one can keep a body out by making a held one look popular.
    /// Returns whether it was admitted.
    @discardableResult
    package func promote(_ entry: StoredEntry, body: [UInt8]) -> Bool {
        guard let (body, cost) = fitting(entry, body) else { return false }
        let taken = state.withLock { state in
            guard Self.admits(entry.id, cost: cost, &state, capacity: capacity) else { return false }
            _ = Self.add(entry, body: body, cost: cost, to: &state, capacity: capacity, keepingPin: false)
            return true
        }
        (taken ? admitted : refused).bump()
        return taken
    }

    /// `body` compacted and what `entry` with it is charged, when the store takes it at all:
    /// within the maximum entry size and the capacity.
    private func fitting(_ entry: StoredEntry, _ body: [UInt8]) -> (body: [UInt8], cost: Int64)? {
        guard Int64(body.count) <= maximumEntrySize else { return nil }
        let body = Self.compacted(body)
        let cost = Self.cost(of: entry, body: body)
        return cost <= capacity ? (body, cost) : nil
    }

    /// How many bodies read from a slower tier ``promote(_:body:)`` took in, and how many it
    /// refused as used less than the entry they would have evicted.
    package var promotions: (admitted: UInt64, refused: UInt64) { (admitted.value, refused.value) }

    /// Whether `id`, charged `cost`, may come in: room without evicting, or more uses counted
    /// than the first entry eviction would take (every recorded access counted first).
    private static func admits(_ id: EntryID, cost: Int64, _ state: inout State, capacity: Int64) -> Bool {
        guard state.accounted + cost > capacity else { return true }
        state.applyAccesses()
        var victim = state.oldest
        while victim >= 0 && state.nodes[victim].isPinned { victim = Int(state.nodes[victim].newer) }
        guard victim >= 0 else { return true }
        let candidate = state.frequencies.frequency(id.hashValue)
        if candidate > state.frequencies.frequency(state.nodes[victim].id.hashValue) { return true }
        guard candidate > 5 else { return false }
        state.draws ^= state.draws << 13
        state.draws ^= state.draws >> 7
        state.draws ^= state.draws << 17
        return state.draws & 127 == 0
    }

    /// Adds `entry` (charged `cost`) in place of the same primary and variant key; with
    /// `keepingPin`, it is pinned when the entry it replaces was. Returns the entry as added.
    private static func add(
        _ entry: StoredEntry, body: [UInt8], cost: Int64, to state: inout State, capacity: Int64, keepingPin: Bool
    ) -> StoredEntry {
        var entry = entry
        if let existing = state.slot(of: entry.id) { unlink(existing, &state) }
        if let sameVariant = state.variants(of: entry.head.primaryKey).first(where: {
            state.nodes[$0].head.variantKey == entry.head.variantKey
        }) {
            if keepingPin && state.nodes[sameVariant].isPinned { entry.isPinned = true }
            unlink(sameVariant, &state)
        }
        let node = Node(entry, body: body, cost: cost)
        let slot: Int
        if let free = state.freeSlots.popLast() {
            slot = free
            state.nodes[slot] = node
        } else {
            slot = state.nodes.count
            state.nodes.append(node)
        }
        state.slots.insert(slot, hash: entry.id.hashValue)
        state.frequencies.ensureCapacity(state.slots.count)
        // The last of its key's variants (found by walking the links: no array made).
        if var last = state.firstVariant(of: entry.head.primaryKey) {
            while state.nodes[last].nextVariant >= 0 { last = Int(state.nodes[last].nextVariant) }
            state.nodes[last].nextVariant = Int32(slot)
        } else {
            state.byKey.insert(slot, hash: entry.head.primaryKey.hashValue)
        }
        for tag in entry.head.tags { state.byTag[tag, default: []].insert(slot) }
        state.changed(entry.head)
        makeNewest(slot, &state)
        state.totals.add(entry)
        if entry.head.storagePolicy == .memoryOnly { state.memoryOnlyTotals.add(entry) }
        state.accounted += cost
        evict(&state, capacity: capacity)
        return entry
    }

    public func update(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) throws(StorageError) {
        if updateHeld(id, fields: fields, facts: facts) == nil { throw Self.notFound(id) }
    }

    /// Updates `id` as ``update(_:fields:facts:)`` does when it is held: its storage policy,
    /// or `nil` when it is not held.
    func updateHeld(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) -> StoragePolicy? {
        state.withLock { state -> StoragePolicy? in
            guard let slot = state.slot(of: id) else { return nil }
            state.nodes[slot].head.fields = fields
            state.nodes[slot].head.facts = facts
            state.changed(state.nodes[slot].head)
            let cost = Self.cost(of: state.nodes[slot].entry, body: state.nodes[slot].body)
            state.accounted += cost - state.nodes[slot].cost
            state.nodes[slot].cost = cost
            let policy = state.nodes[slot].head.storagePolicy
            Self.evict(&state, capacity: capacity)
            return policy
        }
    }

    /// Records a hit. It goes into a buffer of the calling thread's own, not under the store's
    /// lock, which every hit already takes once for the body (a caching proxy's event loops
    /// took turns on it twice a hit); a buffer is applied when it holds 64 accesses, and all
    /// of them before an eviction (which goes by recency) and a listing (``entries()``). Until
    /// then ``variants(of:)`` may give an entry's `lastAccess` and `hits` a few accesses behind.
    public func recordAccess(_ id: EntryID, at time: Double) {
        guard let full = accesses.add(AccessBuffers.Access(id: id, time: time)) else { return }
        state.withLock { $0.apply(full) }
    }

    public func remove(_ id: EntryID) throws(StorageError) {
        state.withLock { state in
            if let slot = state.slot(of: id) { Self.unlink(slot, &state) }
        }
    }

    public func remove(primaryKey: String) throws(StorageError) -> Int {
        state.withLock { state in
            let slots = state.variants(of: primaryKey)
            for slot in slots { Self.unlink(slot, &state) }
            return slots.count
        }
    }

    public func remove(urlPrefix prefix: String) throws(StorageError) -> Int {
        remove { $0.url.hasPrefix(prefix) }
    }

    /// Reads every entry's key (in memory, under one lock).
    public func remove(primaryKeyPrefix prefix: String) throws(StorageError) -> Int {
        remove { $0.primaryKey.hasPrefix(prefix) }
    }

    /// Removes the entries whose heads `matches`; returns how many.
    private func remove(where matches: (EntryHead) -> Bool) -> Int {
        state.withLock { state in
            var slots: [Int] = []
            var cursor = state.newest
            while cursor >= 0 {
                if matches(state.nodes[cursor].head) { slots.append(cursor) }
                cursor = Int(state.nodes[cursor].older)
            }
            for slot in slots { Self.unlink(slot, &state) }
            return slots.count
        }
    }

    /// The entries carrying `tag`.
    package func entries(taggedWith tag: String) -> [StoredEntry] {
        state.withLock { state in
            state.applyAccesses()
            return (state.byTag[tag] ?? []).map { state.nodes[$0].entry }
        }
    }

    public func remove(tag: String) throws(StorageError) -> Int {
        state.withLock { state in
            let slots = state.byTag[tag] ?? []
            for slot in slots { Self.unlink(slot, &state) }
            return slots.count
        }
    }

    public func removeAll() throws(StorageError) {
        state.withLock { state in
            let changes = state.changes &+ 1
            state = State(memoryOnlyChanges: memoryOnlyChanges, accesses: accesses)
            state.changes = changes
            memoryOnlyChanges.bump()
        }
    }

    public func entries() throws(StorageError) -> [StoredEntry] {
        state.withLock { state in
            state.applyAccesses()
            var result: [StoredEntry] = []
            var cursor = state.newest
            while cursor >= 0 {
                result.append(state.nodes[cursor].entry)
                cursor = Int(state.nodes[cursor].older)
            }
            return result
        }
    }

    public func totals() -> StoreTotals { state.withLock { $0.totals } }

    public func setPinned(_ pinned: Bool, primaryKey: String) throws(StorageError) -> Int {
        state.withLock { state in
            var changed = 0
            for slot in state.variants(of: primaryKey) where state.nodes[slot].isPinned != pinned {
                state.nodes[slot].isPinned = pinned
                state.changed(state.nodes[slot].head)
                let size = Int64(state.nodes[slot].body.count)
                state.totals.pinnedBytes += pinned ? size : -size
                if state.nodes[slot].head.storagePolicy == .memoryOnly {
                    state.memoryOnlyTotals.pinnedBytes += pinned ? size : -size
                }
                changed += 1
            }
            if !pinned { Self.evict(&state, capacity: capacity) }
            return changed
        }
    }

    // MARK: - Recency list

    private static func evict(_ state: inout State, capacity: Int64) {
        guard state.accounted > capacity else { return }
        // Recency decides: every access recorded so far counts.
        state.applyAccesses()
        var cursor = state.oldest
        while state.accounted > capacity, cursor >= 0 {
            let slot = cursor
            cursor = Int(state.nodes[slot].newer)
            if !state.nodes[slot].isPinned { unlink(slot, &state) }
        }
    }

    /// `body` in an allocation of its own size: a body collected by appending may hold twice
    /// its size, which would be charged.
    private static func compacted(_ body: [UInt8]) -> [UInt8] {
        guard body.capacity > body.count + body.count / 8 + 64 else { return body }
        return [UInt8](copying: body, capacity: body.count)
    }

    private static func makeNewest(_ slot: Int, _ state: inout State) {
        state.nodes[slot].older = Int32(state.newest)
        state.nodes[slot].newer = -1
        if state.newest >= 0 { state.nodes[state.newest].newer = Int32(slot) }
        state.newest = slot
        if state.oldest < 0 { state.oldest = slot }
    }

    private static func detach(_ slot: Int, _ state: inout State) {
        let newer = Int(state.nodes[slot].newer)
        let older = Int(state.nodes[slot].older)
        if newer >= 0 { state.nodes[newer].older = Int32(older) } else { state.newest = older }
        if older >= 0 { state.nodes[older].newer = Int32(newer) } else { state.oldest = newer }
    }

    private static func unlink(_ slot: Int, _ state: inout State) {
        detach(slot, &state)
        let entry = state.nodes[slot].entry
        state.changed(entry.head)
        state.slots.remove(slot, hash: entry.id.hashValue)
        // Out of its key's variants: the first is indexed, the others linked from the one before.
        let variants = state.variants(of: entry.head.primaryKey)
        let next = state.nodes[slot].nextVariant
        if variants.first == slot {
            let keyHash = entry.head.primaryKey.hashValue
            if next >= 0 {
                state.byKey.replace(slot, with: Int(next), hash: keyHash)
            } else {
                state.byKey.remove(slot, hash: keyHash)
            }
        } else if let index = variants.firstIndex(of: slot) {
            state.nodes[variants[index - 1]].nextVariant = next
        }
        // A free slot holds nothing of the entry (its cost is no longer charged).
        state.nodes[slot].body = []
        state.nodes[slot].head = vacantHead
        state.nodes[slot].nextVariant = -1
        state.accounted -= state.nodes[slot].cost
        state.nodes[slot].cost = 0
        state.freeSlots.append(slot)
        for tag in entry.head.tags {
            state.byTag[tag]?.remove(slot)
            if state.byTag[tag]?.isEmpty == true { state.byTag[tag] = nil }
        }
        state.totals.subtract(entry)
        if entry.head.storagePolicy == .memoryOnly { state.memoryOnlyTotals.subtract(entry) }
    }

    private static let vacantHead = EntryHead(primaryKey: "", url: "", status: 0, fields: [:], facts: [])

    static func notFound(_ id: EntryID) -> StorageError {
        StorageError(.notFound, "entry \(id) is no longer stored (removed or evicted); treat it as a miss")
    }
}

/// Collects a body in memory until commit.
final class MemoryWriter: EntryWriter {
    private let store: MemoryStore
    private var head: EntryHead
    private var body: [UInt8] = []
    private var closed = false

    init(store: MemoryStore, head: EntryHead) {
        self.store = store
        self.head = head
    }

    func append(_ chunk: [UInt8]) throws(StorageError) {
        guard !closed else { throw StorageError(.writerClosed, "append after commit or abort") }
        body += chunk
        if Int64(body.count) > store.maximumEntrySize {
            closed = true
            body = []
            throw StorageError(
                .tooLarge,
                "not stored in memory: the body exceeds the maximum entry size \(store.maximumEntrySize) bytes")
        }
    }

    func commit() throws(StorageError) -> StoredEntry {
        guard !closed else { throw StorageError(.writerClosed, "commit after commit or abort") }
        closed = true
        return try store.insert(head: head, body: body)
    }

    func commitIncomplete(facts: [UInt8]) throws(StorageError) -> StoredEntry {
        head.isComplete = false
        head.facts = facts
        return try commit()
    }

    func abort() {
        closed = true
        body = []
    }
}
