internal import CSQLiteHTTPCache
import CacheSystem
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// An index found damaged by a query, not when it was opened (a page overwritten or cut away
// while the store was in use, or since it was opened, where the WAL hid it): it is moved aside
// and an empty one started, as opening does with an index it cannot use. Without this every
// lookup, store, listing and even `purge --all` failed with SQLite's "database disk image is
// malformed" until the file was removed by hand.
extension DiskStore {
    /// The identity of a file (its device and inode), to tell whether the index at the store's
    /// path is still the one a connection opened.
    struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64

        /// The identity of the file at `path` (not following a link), or `nil` when there is none.
        static func of(_ path: String) -> FileIdentity? {
            var status = stat()
            guard lstat(path, &status) == 0 else { return nil }
            return FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        }
    }

    /// Runs `operation` on the index; when a connection has found it damaged (before or during
    /// `operation`), replaces it (``replaceDamagedIndexIfFound()``) and, when `retrying`, runs
    /// `operation` once more on the new, empty index, so that a read is a miss and a removal
    /// succeeds rather than fail with the damage. An operation that is not `retrying` (a
    /// commit, whose body file its first attempt consumed) throws what it met.
    func recoveringIndex<T>(retrying: Bool = true, _ operation: () throws(StorageError) -> T) throws(StorageError)
        -> T
    {
        replaceDamagedIndexIfFound()
        do {
            return try operation()
        } catch {
            guard replaceDamagedIndexIfFound(), retrying else { throw error }
            return try operation()
        }
    }

    /// Tells the store that a connection found the index damaged (``SQLiteConnection/foundDamage``):
    /// the next operation replaces it. `what`: SQLite's words, for the log.
    func noteDamage(_ what: String) {
        damage.withLock { $0 = $0 ?? what }
        damageFound.store(true, ordering: .releasing)
    }

    /// Makes `connection` report damage to this store.
    func watchForDamage(_ connection: SQLiteConnection) {
        connection.foundDamage = { [weak self, unowned connection] in self?.noteDamage(connection.lastError) }
    }

    /// When a connection found the index damaged, moves it aside (unless another process has
    /// already replaced it), opens an empty one in its place, closes the store's other
    /// connections to the old file (they open again on next use), and has the sweep remove the
    /// body files nothing refers to now. Commits queued behind and not yet written are written
    /// into the new index; the open batch's rows were in the old one and are gone with it.
    /// Returns whether the index was replaced (by this call or by another thread's meanwhile);
    /// `false` when nothing was found or the new index could not be opened (logged; the next
    /// operation tries again).
    @discardableResult
    func replaceDamagedIndexIfFound() -> Bool {
        guard damageFound.load(ordering: .acquiring) else { return false }
        var replaced = true
        // The access writer's lock first, as a flush of access times takes it (then ``state``).
        let files = accessWriter.withLock { writer in
            state.withLock { state -> [String] in
                // Another thread replaced it while this one waited for the lock.
                guard damageFound.load(ordering: .acquiring) else { return [] }
                let reason = damage.withLock { $0 } ?? "SQLite found it damaged"
                let opened: (connection: SQLiteConnection, identity: FileIdentity?)
                do {
                    opened = try Self.openIndex(
                        configuration, replacing: state.indexFile, because: "it is damaged: \(reason)")
                } catch {
                    configuration.log("could not replace the damaged cache index: \(error)")
                    replaced = false
                    return []
                }
                damage.withLock { $0 = nil }
                damageFound.store(false, ordering: .releasing)
                writer?.close()
                writer = nil
                let readerConnections = readers.withLock { $0.closingAll() }
                for connection in readerConnections { connection.close() }
                // Closing the old connection rolls back its open batch, if any.
                _ = sqlite3_wal_hook(state.connection.handle, nil, nil)
                state.connection.close()
                state.connection = opened.connection
                state.indexFile = opened.identity
                watchForDamage(opened.connection)
                installWALHook(opened.connection)
                let batch = state.batching
                for file in batch.lockedFiles { close(file) }
                state.batching = Batching(scopes: batch.scopes, count: batch.count)
                if batch.open != nil { batchTransitions.bump() }
                // What this store remembers was read from the old index; other processes read again too.
                countWrite()
                // The commits queued behind go into a batch of the new index.
                return openBatchForQueued(&state)
            }
        }
        unlinkBodies(files)
        if replaced { inBackground { $0.sweep() } }
        return replaced
    }
}

/// The reading connections of a disk store (``DiskStore/readers``): those idle, how many are
/// open, and their generation, moved on when the index is replaced so that a connection taken
/// out before is closed when it comes back rather than kept.
struct ReaderPool {
    var idle: [SQLiteConnection] = []
    var open = 0
    var generation = 0

    /// Empties the pool for a new index: returns the idle connections, to be closed; those in
    /// use are closed as they come back.
    mutating func closingAll() -> [SQLiteConnection] {
        defer {
            idle = []
            open = 0
            generation += 1
        }
        return idle
    }
}
