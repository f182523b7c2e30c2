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
// malformed" until the file was removed by hand. And index files deleted or replaced by another
// hand while the store runs (a `-wal` removed): the index is opened again.
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
    /// `operation`), replaces it (``replaceDamagedIndexIfFound()``) and runs `operation` once
    /// more on the new, empty index, so that a read is a miss and a removal succeeds rather
    /// than fail with the damage. (A commit, whose body file its first attempt hands over, only
    /// replaces a damaged index before it starts.)
    func recoveringIndex<T>(_ operation: () throws(StorageError) -> T) throws(StorageError) -> T {
        replaceDamagedIndexIfFound()
        do {
            return try operation()
        } catch {
            guard replaceDamagedIndexIfFound() else { throw error }
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
    /// already replaced it) and opens an empty one in its place (``reopenIndex(_:)``).
    /// Returns whether the index was replaced (by this call or by another thread's meanwhile);
    /// `false` when nothing was found or the new index could not be opened (logged; the next
    /// operation tries again).
    @discardableResult
    func replaceDamagedIndexIfFound() -> Bool {
        guard damageFound.load(ordering: .acquiring) else { return false }
        return reopenIndex {
            // Another thread replaced it while this one waited for the lock.
            guard damageFound.load(ordering: .acquiring) else { return nil }
            return .movingAside(because: "it is damaged: \(damage.withLock { $0 } ?? "SQLite found it damaged")")
        }
    }

    /// Reopens the index when one of its files (`index.sqlite`, `-wal`, `-shm`) is no longer
    /// the one this store opened: deleted or replaced by another hand, or a damaged index moved
    /// aside by another process. Its connections would otherwise go on with the old files:
    /// writing into a WAL no other process reads (lost at exit, and each process's
    /// checkpoints copying pages into the index the other does not know of), while another
    /// process, seeing no row of what this one stored, sweeps its body files. An index file
    /// gone altogether (the cache directory removed) is not made again: the store goes on as
    /// it is. Checked as the writer commits a batch and as access times are flushed: three
    /// `lstat`s, and ``state``'s lock only when a file changed.
    func reopenIndexIfItsFilesChanged() {
        func changes() -> (found: IndexFiles, opened: IndexFiles)? {
            let found = IndexFiles.at(configuration.directory)
            let opened = openedFiles.withLock { $0 }
            return found.index != nil && found != opened ? (found, opened) : nil
        }
        guard changes() != nil else { return }
        reopenIndex {
            // Looked at again under the lock: another thread may have reopened it meanwhile.
            guard let (found, opened) = changes() else { return nil }
            let names = ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"]
            let changed = zip(names, found.differences(from: opened)).filter(\.1).map(\.0)
            configuration.log(
                "\(changed.joined(separator: ", ")) in \(configuration.directory) \(changed.count == 1 ? "was" : "were") "
                    + "deleted or replaced while this process used it; reopened the cache index: what this process "
                    + "stored since its last checkpoint is lost, and is fetched again when asked for")
            return .reopening
        }
    }

    /// Seconds between two attempts to open the index again after one failed.
    static let reopenRetryInterval: Double = 5

    /// How ``reopenIndex(_:)`` opens the index again.
    enum Reopening {
        /// The index is damaged: moved aside (`because`, logged), and an empty one started.
        case movingAside(because: String)
        /// The index at the store's path is opened as it is.
        case reopening
    }

    /// Opens the index again as `decide` says (asked holding the store's locks), unless it says
    /// `nil` (nothing to do); the store's other connections to the old files are closed (they open
    /// again on next use), and the sweep removes the body files nothing refers to now. Commits
    /// queued behind and not yet written are written into the index opened; the open batch's
    /// rows were in the old one and are gone with it. Returns `false` when the index could not
    /// be opened (logged): the store then fails its reads and writes (misses, not stored) on an
    /// empty stand-in until the next attempt (the next operation, batch or flush, at most every
    /// ``reopenRetryInterval`` seconds: a full disk does not have every request try and log).
    @discardableResult
    private func reopenIndex(_ decide: () -> Reopening?) -> Bool {
        guard MonotonicClock.seconds() >= Double(bitPattern: reopenRetryAfter.load(ordering: .relaxed)) else {
            return false
        }
        var reopened = false
        var failed = false
        // The access writer's lock first, as a flush of access times takes it (then ``state``).
        let files = accessWriter.withLock { writer in
            state.withLock { state -> [String] in
                guard let reopening = decide() else { return [] }
                guard let standIn = try? SQLiteConnection(path: ":memory:", creating: true) else {
                    failed = true
                    return []
                }
                // Every connection to the old files is closed before the index is opened again:
                // SQLite shares one mapping of `-shm` among a process's connections to one index
                // file, and a connection opened beside them would take theirs, of a deleted file.
                writer?.close()
                writer = nil
                let readerConnections = readers.withLock { $0.closingAll() }
                for connection in readerConnections { connection.close() }
                // Closing the old connection rolls back its open batch, if any.
                _ = sqlite3_wal_hook(state.connection.handle, nil, nil)
                state.connection.close()
                state.connection = standIn
                let batch = state.batching
                for file in batch.lockedFiles { close(file) }
                state.batching = Batching(scopes: batch.scopes, count: batch.count)
                if batch.open != nil { batchTransitions.bump() }
                // What this store remembers was read from the old index; other processes read again too.
                countWrite()
                let opened: (connection: SQLiteConnection, files: IndexFiles)
                do {
                    switch reopening {
                    case .movingAside(let reason):
                        opened = try Self.openIndex(
                            configuration, replacing: openedFiles.withLock { $0 }.index, because: reason)
                    case .reopening:
                        opened = try Self.openIndex(configuration)
                    }
                } catch {
                    configuration.log(
                        "could not open the cache index again: \(error); reads miss and writes are not stored until "
                            + "it can be (tried again in \(Int(Self.reopenRetryInterval)) s)")
                    reopenRetryAfter.store(
                        (MonotonicClock.seconds() + Self.reopenRetryInterval).bitPattern, ordering: .relaxed)
                    // No file is open now: whatever is found at the next check is opened, even
                    // the very files that were there before.
                    openedFiles.withLock { $0 = IndexFiles() }
                    failed = true
                    return []
                }
                standIn.close()
                damage.withLock { $0 = nil }
                damageFound.store(false, ordering: .releasing)
                state.connection = opened.connection
                openedFiles.withLock { $0 = opened.files }
                watchForDamage(opened.connection)
                installWALHook(opened.connection)
                reopened = true
                // The commits queued behind go into a batch of the new index.
                return openBatchForQueued(&state)
            }
        }
        unlinkBodies(files)
        if reopened { inBackground { $0.sweep() } }
        return !failed
    }
}

/// The identities of an index's files as a store opened them (`DiskStore.openedFiles`):
/// `nil` for one that was not there.
struct IndexFiles: Equatable {
    var index: DiskStore.FileIdentity? = nil
    var wal: DiskStore.FileIdentity? = nil
    var sharedMemory: DiskStore.FileIdentity? = nil

    /// The files of the index in `directory` now.
    static func at(_ directory: String) -> IndexFiles {
        let path = directory + "/index.sqlite"
        return IndexFiles(
            index: .of(path), wal: .of(path + "-wal"), sharedMemory: .of(path + "-shm"))
    }

    /// Whether each file (the index, its WAL, its shared memory) differs from `other`'s.
    func differences(from other: IndexFiles) -> [Bool] {
        [index != other.index, wal != other.wal, sharedMemory != other.sharedMemory]
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
