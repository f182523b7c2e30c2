import CacheSemantics

/// Memory in front of disk.
///
/// Heads always come from the disk index, so an entry another process removed or freshened
/// is never served from memory; bodies, which never change under an identity, are served
/// from memory when it holds them and promoted there after a disk read. A full memory tier
/// takes a body read from disk only when it was used more lately than the entry it would
/// evict (TinyLFU's admission: Einziger, Friedman and Manes, ACM TOS 13(4), 2017), so reads
/// spread over more entries than memory holds do not trade one entry for another on every
/// hit, and a crawl does not push out the popular ones. Entries with
/// ``StoragePolicy/memoryOnly`` live in memory alone and never touch the disk.
public final class TieredStore: CacheStore {
    /// The memory tier.
    public let memory: MemoryStore
    /// The disk tier.
    public let disk: DiskStore

    /// Creates a tiered store.
    public init(memory: MemoryStore, disk: DiskStore) {
        self.memory = memory
        self.disk = disk
    }

    private func memoryOnly(_ entries: [StoredEntry]) -> [StoredEntry] {
        entries.filter { $0.head.storagePolicy == .memoryOnly }
    }

    /// The disk's count plus the memory-only entries' (both only grow, so the sum changes
    /// when either does); what the memory tier caches of the disk does not count.
    public var changeCount: UInt64? { disk.changeCount.map { $0 &+ memory.memoryOnlyChangeCount } }

    /// The disk's count for the key plus the memory-only entries' count, as ``changeCount``.
    public func changeCount(of primaryKey: String) -> UInt64? {
        disk.changeCount(of: primaryKey).map { $0 &+ memory.memoryOnlyChangeCount }
    }

    public func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        try disk.variants(of: primaryKey) + memoryOnly(try memory.variants(of: primaryKey))
    }

    /// Neither tier holds a variant of `primaryKey`: the disk's known keys say so, and memory
    /// has none (not even a copy of a disk entry).
    public func holdsNone(_ primaryKey: String) -> Bool {
        disk.holdsNone(primaryKey) && memory.holdsNone(primaryKey)
    }

    /// Opens the body from memory when it is there, from disk otherwise; a disk body read
    /// whole is then offered to memory, with its entry, for the next hit. A body the index holds
    /// inline is read whole as it is opened: it goes to memory at once, and is handed out as
    /// memory's bodies are (`bytesInMemory`), the bytes read being the bytes kept.
    public func openBody(of id: EntryID) throws(StorageError) -> any StoredBody {
        try open(id) { [disk] in try? disk.entry(id) }
    }

    /// As ``openBody(of:)``, promoting a disk body with `entry` (no second index read).
    public func openBody(for entry: StoredEntry) throws(StorageError) -> any StoredBody {
        try open(entry.id) { entry }
    }

    /// The body of `id` from memory, else from disk, offered to memory as `entry` once it has
    /// been read whole.
    private func open(
        _ id: EntryID, promotedAs entry: @escaping @Sendable () -> StoredEntry?
    ) throws(StorageError) -> any StoredBody {
        if let bytes = memory.heldBody(of: id) { return BytesBody(bytes) }
        let body = try disk.openBody(of: id)
        guard body.size <= memory.maximumEntrySize else { return body }
        if let bytes = body.bytesInMemory {
            if let entry = entry() { memory.promote(entry, body: bytes) }
            return body
        }
        return PromotingBody(body) { [memory] bytes in
            if let entry = entry() { memory.promote(entry, body: bytes) }
        }
    }

    public func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter {
        if head.storagePolicy == .memoryOnly { return try memory.makeWriter(for: head) }
        return TieredWriter(store: self, disk: try disk.makeWriter(for: head))
    }

    /// Updates the entry in both tiers. A memory-only entry is memory's alone; memory's copy of
    /// a disk entry is updated with it, and whether the entry is stored is the disk's to say: one
    /// the disk no longer holds (replaced or removed, maybe by another process) is not found,
    /// whatever memory still holds of it.
    public func update(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) throws(StorageError) {
        if memory.updateHeld(id, fields: fields, facts: facts) == .memoryOnly { return }
        try disk.update(id, fields: fields, facts: facts)
    }

    public func recordAccess(_ id: EntryID, at time: Double) {
        memory.recordAccess(id, at: time)
        disk.recordAccess(id, at: time)
    }

    public func remove(_ id: EntryID) throws(StorageError) {
        try memory.remove(id)
        try disk.remove(id)
    }

    public func remove(primaryKey: String) throws(StorageError) -> Int {
        let memoryOnlyCount = memoryOnly(try memory.variants(of: primaryKey)).count
        _ = try memory.remove(primaryKey: primaryKey)
        return try disk.remove(primaryKey: primaryKey) + memoryOnlyCount
    }

    public func remove(urlPrefix prefix: String) throws(StorageError) -> Int {
        let memoryOnlyCount = memoryOnly(try memory.entries()).filter { $0.head.url.hasPrefix(prefix) }.count
        _ = try memory.remove(urlPrefix: prefix)
        return try disk.remove(urlPrefix: prefix) + memoryOnlyCount
    }

    public func remove(primaryKeyPrefix prefix: String) throws(StorageError) -> Int {
        let memoryOnlyCount = memoryOnly(try memory.entries()).filter { $0.head.primaryKey.hasPrefix(prefix) }.count
        _ = try memory.remove(primaryKeyPrefix: prefix)
        return try disk.remove(primaryKeyPrefix: prefix) + memoryOnlyCount
    }

    public func remove(tag: String) throws(StorageError) -> Int {
        let memoryOnlyCount = memoryOnly(memory.entries(taggedWith: tag)).count
        _ = try memory.remove(tag: tag)
        return try disk.remove(tag: tag) + memoryOnlyCount
    }

    public func removeAll() throws(StorageError) {
        try memory.removeAll()
        try disk.removeAll()
    }

    public func entries() throws(StorageError) -> [StoredEntry] {
        (try disk.entries() + memoryOnly(try memory.entries())).sorted { $0.lastAccess > $1.lastAccess }
    }

    /// The disk's totals plus the memory-only entries' (which the memory tier keeps counted).
    public func totals() -> StoreTotals {
        var totals = disk.totals()
        let memoryOnly = memory.memoryOnlyTotals
        totals.entries += memoryOnly.entries
        totals.bodyBytes += memoryOnly.bodyBytes
        totals.pinnedBytes += memoryOnly.pinnedBytes
        return totals
    }

    /// The disk's batches (``DiskStore/beginBatchedWrites()``); memory has none.
    public func beginBatchedWrites() { disk.beginBatchedWrites() }

    public func endBatchedWrites() throws(StorageError) { try disk.endBatchedWrites() }

    public func setPinned(_ pinned: Bool, primaryKey: String) throws(StorageError) -> Int {
        let memoryOnlyChanged = memoryOnly(try memory.variants(of: primaryKey)).filter { $0.isPinned != pinned }.count
        _ = try memory.setPinned(pinned, primaryKey: primaryKey)
        return try disk.setPinned(pinned, primaryKey: primaryKey) + memoryOnlyChanged
    }
}

/// Writes to disk and, once committed, puts the body in memory too.
final class TieredWriter: EntryWriter {
    private let store: TieredStore
    private let disk: any EntryWriter
    private var body: GatheredBytes? = GatheredBytes()

    init(store: TieredStore, disk: any EntryWriter) {
        self.store = store
        self.disk = disk
    }

    func append(_ chunk: [UInt8]) throws(StorageError) {
        try disk.append(chunk)
        store.memory.collect(chunk, into: &body)
    }

    func commit() throws(StorageError) -> StoredEntry {
        let entry = try disk.commit()
        if let body { store.memory.insert(entry, body: body.bytes) }
        return entry
    }

    func commitIncomplete(facts: [UInt8]) throws(StorageError) -> StoredEntry {
        // Incomplete bodies stay on disk: they are read only to be resumed.
        body = nil
        return try disk.commitIncomplete(facts: facts)
    }

    func abort() {
        body = nil
        disk.abort()
    }
}

/// A body from a slower tier that puts itself in a faster one when it is read whole (a disk
/// body into memory; a Redis body into the local tier).
package final class PromotingBody: StoredBody {
    private let disk: any StoredBody
    private let promote: @Sendable ([UInt8]) -> Void

    package init(_ disk: any StoredBody, promote: @escaping @Sendable ([UInt8]) -> Void) {
        self.disk = disk
        self.promote = promote
    }

    package var size: Int64 { disk.size }

    package func read(_ range: ClosedRange<Int64>) throws(StorageError) -> [UInt8] {
        let bytes = try disk.read(range)
        if Int64(bytes.count) == size { promote(bytes) }
        return bytes
    }
}
