import CacheSemantics
import CacheStorage

/// A store that passes every call to `base`, for a test that changes one behaviour of a real
/// store (writers that fail as on a full disk, reads that are counted): a subclass overrides
/// that call.
open class ForwardingStore: CacheStore, @unchecked Sendable {
    /// The store every call goes to.
    public let base: any CacheStore

    public init(_ base: any CacheStore) { self.base = base }

    open var changeCount: UInt64? { base.changeCount }
    open func changeCount(of primaryKey: String) -> UInt64? { base.changeCount(of: primaryKey) }
    open func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        try base.variants(of: primaryKey)
    }
    open func holdsNone(_ primaryKey: String) -> Bool { base.holdsNone(primaryKey) }
    open func openBody(of id: EntryID) throws(StorageError) -> any StoredBody { try base.openBody(of: id) }
    open func openBody(for entry: StoredEntry) throws(StorageError) -> any StoredBody {
        try base.openBody(for: entry)
    }
    open func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter {
        try base.makeWriter(for: head)
    }
    open func update(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) throws(StorageError) {
        try base.update(id, fields: fields, facts: facts)
    }
    open func recordAccess(_ id: EntryID, at time: Double) { base.recordAccess(id, at: time) }
    open func remove(_ id: EntryID) throws(StorageError) { try base.remove(id) }
    open func remove(primaryKey: String) throws(StorageError) -> Int { try base.remove(primaryKey: primaryKey) }
    open func remove(urlPrefix prefix: String) throws(StorageError) -> Int { try base.remove(urlPrefix: prefix) }
    open func remove(tag: String) throws(StorageError) -> Int { try base.remove(tag: tag) }
    open func removeAll() throws(StorageError) { try base.removeAll() }
    open func entries() throws(StorageError) -> [StoredEntry] { try base.entries() }
    open func totals() -> StoreTotals { base.totals() }
    open func setPinned(_ pinned: Bool, primaryKey: String) throws(StorageError) -> Int {
        try base.setPinned(pinned, primaryKey: primaryKey)
    }
}
