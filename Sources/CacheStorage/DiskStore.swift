internal import CSQLiteHTTPCache
import CacheLocking
import CacheSemantics
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A store on disk: a SQLite index in WAL mode and body files, safe across threads and
/// processes, crash-safe, and verified on every read.
///
/// Layout of ``Configuration/directory`` (created 0700; files 0600):
/// - `index.sqlite`: one row per variant (keys, status, fields, facts and their format
///   version, sizes, block checksums, timestamps, storage policy, `userInfo`, pinned), with
///   bodies up to ``Configuration/inlineBodyLimit`` bytes inline.
/// - `bodies/<id>`: larger bodies, named by a random ``EntryID``, never by URL. A body is
///   written to `bodies/<id>.tmp` under an exclusive `flock`, renamed, and only then does
///   the index transaction that makes it visible commit. A crash leaves at most an
///   unreferenced file, which the sweep on the next open removes (off the caller's path).
///
/// Every body is checksummed with XXH64 per 64 KiB block; a block that does not match is
/// never handed out: the read throws ``StorageError/Kind/corrupted`` and the entry is
/// removed. An index that cannot be read or has another format version is moved aside
/// (`index.sqlite.unusable-<time>`) and a new one started, with the reason logged.
public final class DiskStore: CacheStore {
    /// How much a commit waits for the disk.
    public enum Durability: Hashable, Sendable {
        /// The default. Survives the process crashing or being killed at any moment:
        /// nothing committed is lost and nothing half-written is ever read. After a power
        /// loss the most recent entries may be missing, and a body the OS had not yet
        /// written is detected by its checksum and dropped, never served.
        case processCrashSafe
        /// Also survives power loss: body files, their directory and the index are
        /// `fsync`ed before a commit returns. Slower writes.
        case powerLossSafe
    }

    /// How a disk store is set up.
    public struct Configuration: Sendable {
        /// The cache directory.
        public var directory: String
        /// The most bytes of bodies kept; least recently used unpinned entries are evicted
        /// beyond it.
        public var capacity: Int64
        /// The largest body accepted. Defaults to 1/8 of ``capacity`` (so the default
        /// 1 GiB store takes bodies up to 128 MiB); a larger body is refused with
        /// ``StorageError/Kind/tooLarge``, never dropped silently.
        public var maximumEntrySize: Int64
        /// Bodies up to this size live inside the index; larger ones in files.
        public var inlineBodyLimit: Int
        /// See ``Durability``.
        public var durability: Durability
        /// How long a write waits for another process's write to finish.
        public var busyTimeoutMilliseconds: Int32
        /// Receives what the store reports (an index moved aside, orphans swept).
        public var log: @Sendable (String) -> Void

        /// The default capacity: 1 GiB.
        public static let defaultCapacity: Int64 = 1 << 30

        /// Creates a configuration.
        public init(
            directory: String = DiskStore.defaultDirectory(), capacity: Int64 = Configuration.defaultCapacity,
            maximumEntrySize: Int64? = nil, inlineBodyLimit: Int = 32 * 1024,
            durability: Durability = .processCrashSafe, busyTimeoutMilliseconds: Int32 = 10_000,
            log: @escaping @Sendable (String) -> Void = { message in
                FileHandle.standardError.write(Data("httpcache: \(message)\n".utf8))
            }
        ) {
            self.directory = directory
            self.capacity = max(0, capacity)
            self.maximumEntrySize = maximumEntrySize ?? max(0, capacity) / 8
            self.inlineBodyLimit = inlineBodyLimit
            self.durability = durability
            self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
            self.log = log
        }
    }

    /// The index format version, kept in `PRAGMA user_version`.
    public static let formatVersion: Int32 = 1

    /// `$HTTPCACHE_DIR`, else the XDG cache directory (`$XDG_CACHE_HOME` or `~/.cache`) on
    /// Linux, the Caches directory on Apple platforms; with `httpcache` appended.
    public static func defaultDirectory() -> String {
        let environment = ProcessInfo.processInfo.environment
        if let explicit = environment["HTTPCACHE_DIR"], !explicit.isEmpty { return explicit }
        #if canImport(Darwin)
        let caches =
            FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first?.path
            ?? NSTemporaryDirectory()
        return caches + "/httpcache"
        #else
        if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/httpcache" }
        return NSHomeDirectory() + "/.cache/httpcache"
        #endif
    }

    /// The configuration.
    public let configuration: Configuration
    let bodiesDirectory: String
    private let clock: @Sendable () -> Double

    private struct State {
        var connection: SQLiteConnection
        var pendingAccess: [EntryID: (time: Double, hits: Int)] = [:]
        var lastAccessFlush: Double = 0
        /// Variants read from the index, with the change count they were read at.
        var heads: [String: (changes: UInt64, entries: [StoredEntry])] = [:]
    }

    private let state: Locked<State>
    /// Counts index writes by every process; `nil` when it cannot be mapped (heads are then
    /// always read from the index).
    private let changes: ChangeCounter?
    /// The most primary keys whose variants are kept in memory.
    private static let headCacheLimit = 4096

    /// Opens (creating) the store. An unusable index is moved aside and replaced, so this
    /// throws only when the directory itself cannot be used.
    public init(
        _ configuration: Configuration = Configuration(),
        clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) throws(StorageError) {
        self.configuration = configuration
        self.clock = clock
        bodiesDirectory = configuration.directory + "/bodies"
        try FileIO.makeDirectory(configuration.directory)
        try FileIO.makeDirectory(bodiesDirectory)
        let connection = try Self.openIndex(configuration)
        state = Locked(State(connection: connection, lastAccessFlush: clock()))
        changes = ChangeCounter(path: configuration.directory + "/index.changes", log: configuration.log)
        changes?.bump()
        let store = self
        DispatchQueue.global(qos: .utility).async { store.sweep() }
    }

    deinit {
        state.withLock { state in
            try? flushAccess(&state)
            state.connection.close()
        }
    }

    // MARK: - Opening

    private static let schema = """
        CREATE TABLE IF NOT EXISTS entries (
            id TEXT PRIMARY KEY NOT NULL,
            primary_key TEXT NOT NULL,
            variant_key TEXT NOT NULL,
            url TEXT NOT NULL,
            status INTEGER NOT NULL,
            fields BLOB NOT NULL,
            facts BLOB NOT NULL,
            facts_version INTEGER NOT NULL,
            body_size INTEGER NOT NULL,
            in_file INTEGER NOT NULL,
            stored_at REAL NOT NULL,
            last_access REAL NOT NULL,
            hits INTEGER NOT NULL DEFAULT 0,
            pinned INTEGER NOT NULL DEFAULT 0,
            storage_policy INTEGER NOT NULL,
            user_info BLOB,
            complete INTEGER NOT NULL,
            -- Large values last: reading a row's head never walks a body's overflow pages.
            checksums BLOB NOT NULL,
            body BLOB,
            UNIQUE (primary_key, variant_key)
        );
        CREATE INDEX IF NOT EXISTS entries_by_recency ON entries (pinned, last_access);
        CREATE TABLE IF NOT EXISTS totals (
            id INTEGER PRIMARY KEY CHECK (id = 0),
            entries INTEGER NOT NULL,
            body_bytes INTEGER NOT NULL,
            pinned_bytes INTEGER NOT NULL
        );
        INSERT OR IGNORE INTO totals VALUES (0, 0, 0, 0);
        CREATE TRIGGER IF NOT EXISTS entries_added AFTER INSERT ON entries BEGIN
            UPDATE totals SET entries = entries + 1, body_bytes = body_bytes + NEW.body_size,
                pinned_bytes = pinned_bytes + NEW.pinned * NEW.body_size WHERE id = 0;
        END;
        CREATE TRIGGER IF NOT EXISTS entries_removed AFTER DELETE ON entries BEGIN
            UPDATE totals SET entries = entries - 1, body_bytes = body_bytes - OLD.body_size,
                pinned_bytes = pinned_bytes - OLD.pinned * OLD.body_size WHERE id = 0;
        END;
        CREATE TRIGGER IF NOT EXISTS entries_pinned AFTER UPDATE OF pinned ON entries BEGIN
            UPDATE totals SET pinned_bytes = pinned_bytes + (NEW.pinned - OLD.pinned) * NEW.body_size WHERE id = 0;
        END;
        """

    /// Opens the index, creating it when new. Opening is serialized across processes (and
    /// store instances) by an exclusive `flock` on `index.lock`, so two first opens never
    /// both create the schema or switch it to WAL at once, and one never sees the other's
    /// half-made index as unusable.
    private static func openIndex(_ configuration: Configuration) throws(StorageError) -> SQLiteConnection {
        let path = configuration.directory + "/index.sqlite"
        let lockPath = configuration.directory + "/index.lock"
        // In a read-only directory nobody can create the index, so opening unlocked is safe.
        var lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if lock < 0 { lock = open(lockPath, O_RDONLY | O_CLOEXEC) }
        defer { if lock >= 0 { close(lock) } }
        while lock >= 0 && flock(lock, LOCK_EX) != 0 && errno == EINTR {}
        do {
            return try prepare(path, configuration)
        } catch {
            // A read-only directory, a full disk or a lock held too long says nothing about
            // the index: keep it.
            if error.kind == .writeFailed || error.kind == .busy { throw error }
            let aside = path + ".unusable-\(Int(Date().timeIntervalSince1970))"
            configuration.log(
                "the cache index \(path) cannot be used (\(error.message)); moved it to \(aside) and started an "
                    + "empty cache")
            for suffix in ["", "-wal", "-shm"] {
                if rename(path + suffix, aside + suffix) != 0 && errno != ENOENT {
                    unlink(path + suffix)
                }
            }
            return try prepare(path, configuration)
        }
    }

    private static func prepare(_ path: String, _ configuration: Configuration) throws(StorageError)
        -> SQLiteConnection
    {
        let connection = try SQLiteConnection(path: path)
        _ = chmod(path, 0o600)
        sqlite3_busy_timeout(connection.handle, configuration.busyTimeoutMilliseconds)
        try connection.execute("PRAGMA journal_mode = WAL")
        let synchronous = configuration.durability == .powerLossSafe ? "FULL" : "NORMAL"
        try connection.execute("PRAGMA synchronous = \(synchronous)")
        // Reads through memory-mapped pages and a larger page cache: a hit is then a few
        // memory copies, not several pread calls.
        try connection.execute("PRAGMA mmap_size = 268435456")
        try connection.execute("PRAGMA cache_size = -16384")
        let versionQuery = try connection.statement("PRAGMA user_version")
        guard try versionQuery.step() else { throw StorageError(.index, "no user_version") }
        let version = Int32(versionQuery.int(0))
        let tables = try connection.statement("SELECT count(*) FROM sqlite_master")
        guard try tables.step() else { throw StorageError(.index, "no schema") }
        if version == 0 && tables.int(0) == 0 {
            try connection.transaction { () throws(StorageError) in
                try connection.execute(schema)
                try connection.execute("PRAGMA user_version = \(formatVersion)")
            }
        } else if version != formatVersion {
            throw StorageError(.index, "index format version \(version), this build reads \(formatVersion)")
        }
        // Reading the totals row proves the schema is usable.
        let totals = try connection.statement("SELECT entries FROM totals WHERE id = 0")
        guard try totals.step() else { throw StorageError(.index, "the totals row is missing") }
        for file in ["-wal", "-shm"] { _ = chmod(path + file, 0o600) }
        return connection
    }

    // MARK: - Reading

    private static let entryColumns = """
        id, primary_key, variant_key, url, status, fields, facts, body_size, stored_at, last_access, hits, pinned,
        storage_policy, user_info, complete
        """

    private func entry(from row: Statement) -> StoredEntry? {
        guard let id = EntryID(rawValue: row.text(0)),
            let fields = row.blob(5).flatMap({ HeaderFields(serialized: $0) }),
            let policy = StoragePolicy(rawValue: UInt8(clamping: row.int(12)))
        else { return nil }
        let head = EntryHead(
            primaryKey: row.text(1), variantKey: row.text(2), url: row.text(3), status: Int(row.int(4)),
            fields: fields, facts: row.blob(6) ?? [], storagePolicy: policy, userInfo: row.blob(13),
            isComplete: row.int(14) != 0)
        return StoredEntry(
            id: id, head: head, bodySize: row.int(7), storedAt: row.double(8), lastAccess: row.double(9),
            hits: Int(row.int(10)), isPinned: row.int(11) != 0)
    }

    /// A number that changes after every write to the index by any process (not after access
    /// times are recorded); `nil` when the shared counter cannot be mapped. Something derived
    /// from ``variants(of:)`` stays valid while this stays the same.
    public var changeCount: UInt64? { changes?.value }

    /// The variants of `primaryKey`. They are kept in memory and read again from the index
    /// only after a write to it by any process (a shared change counter says when): a hit
    /// then costs no SQLite read. Their `lastAccess` and `hits` may lag until that write;
    /// ``entries()`` always reads the index.
    public func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        try state.withLock { state throws(StorageError) in
            // Read before the query: a write that lands during it bumps the count past this.
            let count = changes?.value
            if let count, let cached = state.heads[primaryKey], cached.changes == count { return cached.entries }
            let query = try state.connection.statement(
                "SELECT \(Self.entryColumns) FROM entries WHERE primary_key = ?")
            query.bind(1, primaryKey)
            var result: [StoredEntry] = []
            while try query.step() {
                if let entry = entry(from: query) { result.append(entry) }
            }
            if let count {
                if state.heads.count >= Self.headCacheLimit { state.heads.removeAll(keepingCapacity: true) }
                state.heads[primaryKey] = (count, result)
            }
            return result
        }
    }

    /// Where an entry's body is.
    private struct BodyLocation {
        var size: Int64
        var checksums: [UInt8]
        var inline: [UInt8]?
    }

    private func location(of id: EntryID) throws(StorageError) -> BodyLocation {
        let found = try state.withLock { state throws(StorageError) -> BodyLocation? in
            let query = try state.connection.statement(
                "SELECT body_size, checksums, body, in_file FROM entries WHERE id = ?")
            query.bind(1, id.rawValue)
            defer { query.reset() }
            guard try query.step() else { return nil }
            return BodyLocation(
                size: query.int(0), checksums: query.blob(1) ?? [],
                inline: query.int(3) != 0 ? nil : query.blob(2) ?? [])
        }
        guard let found else { throw MemoryStore.notFound(id) }
        return found
    }

    /// Opens the body of `id`: read later, it is still this version even when the entry is
    /// replaced or removed meanwhile (the file stays open; an inline body is read now).
    public func openBody(of id: EntryID) throws(StorageError) -> any StoredBody {
        let location = try location(of: id)
        let corrupted: @Sendable (String) -> StorageError = { [weak self] detail in
            self?.corrupted(id, detail) ?? StorageError(.corrupted, "entry \(id) was corrupted on disk (\(detail))")
        }
        if let inline = location.inline {
            guard Int64(inline.count) == location.size else { throw corrupted("inline body has the wrong length") }
            try BlockChecksums.verify(
                inline, blocks: 0...(blockCount(location.size) - 1), against: location.checksums, corrupted)
            return BytesBody(inline)
        }
        let path = bodiesDirectory + "/" + id.rawValue
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            // Removed or replaced (here or by another process) since its row was read.
            if code == ENOENT && !isIndexed(id) { throw MemoryStore.notFound(id) }
            if code == ENOENT { throw corrupted("its body file is missing") }
            throw StorageError(.readFailed, "cannot open \(path): \(FileIO.errorText(code))")
        }
        return FileBody(
            descriptor: descriptor, path: path, size: location.size, checksums: location.checksums,
            corrupted: corrupted)
    }

    private func blockCount(_ size: Int64) -> Int {
        max(1, Int((size + Int64(checksumBlockSize) - 1) / Int64(checksumBlockSize)))
    }

    /// Whether the index still has a row for `id` (`true` when that cannot be told).
    private func isIndexed(_ id: EntryID) -> Bool {
        (try? state.withLock { state throws(StorageError) -> Bool in
            let query = try state.connection.statement("SELECT 1 FROM entries WHERE id = ?")
            query.bind(1, id.rawValue)
            defer { query.reset() }
            return try query.step()
        }) ?? true
    }

    /// Removes a corrupted entry and describes it.
    private func corrupted(_ id: EntryID, _ detail: String) -> StorageError {
        try? remove(id)
        return StorageError(
            .corrupted, "entry \(id) was corrupted on disk (\(detail)); it was removed and will be fetched again")
    }

    // MARK: - Writing

    public func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter {
        DiskWriter(store: self, head: head)
    }

    /// Makes a written entry visible: replaces the same primary and variant key (keeping its
    /// pin) and evicts, in one transaction. The body file, if any, is already in its final
    /// place.
    func commit(
        _ head: EntryHead, id: EntryID, size: Int64, checksums: [UInt8], inline: [UInt8]?
    ) throws(StorageError) -> StoredEntry {
        let now = clock()
        var entry = StoredEntry(id: id, head: head, bodySize: size, storedAt: now, lastAccess: now)
        let obsolete = try state.withLock { state throws(StorageError) -> [String] in
            defer { changes?.bump() }
            return try state.connection.transaction { () throws(StorageError) -> [String] in
                var obsolete: [String] = []
                let existing = try state.connection.statement(
                    "SELECT id, in_file, pinned FROM entries WHERE primary_key = ? AND variant_key = ?")
                existing.bind(1, head.primaryKey)
                existing.bind(2, head.variantKey)
                if try existing.step() {
                    let oldID = existing.text(0)
                    if existing.int(1) != 0 { obsolete.append(oldID) }
                    entry.isPinned = existing.int(2) != 0
                    try Self.deleteRow(oldID, state.connection)
                }
                let insert = try state.connection.statement(
                    """
                    INSERT INTO entries (id, primary_key, variant_key, url, status, fields, facts, facts_version,
                        body_size, checksums, body, in_file, stored_at, last_access, hits, pinned, storage_policy,
                        user_info, complete)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)
                    """)
                insert.bind(1, id.rawValue)
                insert.bind(2, head.primaryKey)
                insert.bind(3, head.variantKey)
                insert.bind(4, head.url)
                insert.bind(5, Int64(head.status))
                insert.bind(6, head.fields.serialized())
                insert.bind(7, head.facts)
                insert.bind(8, Int64(head.facts.first ?? 0))
                insert.bind(9, size)
                insert.bind(10, checksums)
                insert.bind(11, inline)
                insert.bind(12, Int64(inline == nil ? 1 : 0))
                insert.bind(13, now)
                insert.bind(14, now)
                insert.bind(15, Int64(entry.isPinned ? 1 : 0))
                insert.bind(16, Int64(head.storagePolicy.rawValue))
                insert.bind(17, head.userInfo)
                insert.bind(18, Int64(head.isComplete ? 1 : 0))
                try insert.run()
                obsolete += try evict(state.connection)
                return obsolete
            }
        }
        for file in obsolete { unlink(bodiesDirectory + "/" + file) }
        return entry
    }

    /// Deletes least recently used unpinned entries while the bodies exceed the capacity.
    /// Returns the body files to unlink once the transaction has committed.
    private func evict(_ connection: SQLiteConnection) throws(StorageError) -> [String] {
        var files: [String] = []
        while try Self.bodyBytes(connection) > configuration.capacity {
            let oldest = try connection.statement(
                "SELECT id, in_file FROM entries WHERE pinned = 0 ORDER BY last_access LIMIT 32")
            var victims: [(id: String, inFile: Bool)] = []
            while try oldest.step() { victims.append((oldest.text(0), oldest.int(1) != 0)) }
            if victims.isEmpty { break }  // only pinned entries are left
            for victim in victims {
                try Self.deleteRow(victim.id, connection)
                if victim.inFile { files.append(victim.id) }
                if try Self.bodyBytes(connection) <= configuration.capacity { break }
            }
        }
        return files
    }

    /// The bytes of all bodies, from the totals row the triggers maintain.
    private static func bodyBytes(_ connection: SQLiteConnection) throws(StorageError) -> Int64 {
        let totals = try connection.statement("SELECT body_bytes FROM totals WHERE id = 0")
        defer { totals.reset() }
        return try totals.step() ? totals.int(0) : 0
    }

    /// Deletes one row (its body file, if any, is the caller's to unlink after the commit).
    private static func deleteRow(_ id: String, _ connection: SQLiteConnection) throws(StorageError) {
        let delete = try connection.statement("DELETE FROM entries WHERE id = ?")
        delete.bind(1, id)
        try delete.run()
    }

    public func update(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) throws(StorageError) {
        let changed = try state.withLock { state throws(StorageError) -> Int in
            defer { changes?.bump() }
            let update = try state.connection.statement(
                "UPDATE entries SET fields = ?, facts = ?, facts_version = ? WHERE id = ?")
            update.bind(1, fields.serialized())
            update.bind(2, facts)
            update.bind(3, Int64(facts.first ?? 0))
            update.bind(4, id.rawValue)
            try update.run()
            return state.connection.changes
        }
        if changed == 0 { throw MemoryStore.notFound(id) }
    }

    public func recordAccess(_ id: EntryID, at time: Double) {
        state.withLock { state in
            let previous = state.pendingAccess[id]?.hits ?? 0
            state.pendingAccess[id] = (time, previous + 1)
            if state.pendingAccess.count >= 256 || time - state.lastAccessFlush >= 1 {
                try? flushAccess(&state)
            }
        }
    }

    /// Writes buffered access times and hit counts in one transaction.
    private func flushAccess(_ state: inout State) throws(StorageError) {
        state.lastAccessFlush = clock()
        guard !state.pendingAccess.isEmpty else { return }
        let pending = state.pendingAccess
        state.pendingAccess = [:]
        let connection = state.connection
        // Not counted as a change: remembered variants keep their access time and hit count
        // until the next real write (they decide nothing).
        try connection.transaction { () throws(StorageError) in
            for (id, access) in pending {
                let statement = try connection.statement(
                    "UPDATE entries SET last_access = max(last_access, ?), hits = hits + ? WHERE id = ?")
                statement.bind(1, access.time)
                statement.bind(2, Int64(access.hits))
                statement.bind(3, id.rawValue)
                try statement.run()
            }
        }
    }

    // MARK: - Removing

    /// Deletes the rows `whereClause` selects (binding `argument`) and unlinks their files
    /// after the commit. Returns how many rows.
    private func delete(where whereClause: String, _ argument: String?) throws(StorageError) -> Int {
        let rows = try state.withLock { state throws(StorageError) -> [(id: String, inFile: Bool)] in
            try flushAccess(&state)
            defer { changes?.bump() }
            return try state.connection.transaction { () throws(StorageError) -> [(id: String, inFile: Bool)] in
                let select = try state.connection.statement("SELECT id, in_file FROM entries \(whereClause)")
                if let argument { select.bind(1, argument) }
                var rows: [(id: String, inFile: Bool)] = []
                while try select.step() { rows.append((select.text(0), select.int(1) != 0)) }
                for row in rows { try Self.deleteRow(row.id, state.connection) }
                return rows
            }
        }
        for row in rows where row.inFile { unlink(bodiesDirectory + "/" + row.id) }
        return rows.count
    }

    public func remove(_ id: EntryID) throws(StorageError) {
        _ = try delete(where: "WHERE id = ?", id.rawValue)
    }

    public func remove(primaryKey: String) throws(StorageError) -> Int {
        try delete(where: "WHERE primary_key = ?", primaryKey)
    }

    public func remove(urlPrefix prefix: String) throws(StorageError) -> Int {
        try delete(where: "WHERE substr(url, 1, length(?1)) = ?1", prefix)
    }

    public func removeAll() throws(StorageError) {
        _ = try delete(where: "", nil)
    }

    public func entries() throws(StorageError) -> [StoredEntry] {
        try state.withLock { state throws(StorageError) in
            try flushAccess(&state)
            let query = try state.connection.statement(
                "SELECT \(Self.entryColumns) FROM entries ORDER BY last_access DESC")
            var result: [StoredEntry] = []
            while try query.step() {
                if let entry = entry(from: query) { result.append(entry) }
            }
            return result
        }
    }

    /// The entry with identity `id`, if stored.
    public func entry(_ id: EntryID) throws(StorageError) -> StoredEntry? {
        try state.withLock { state throws(StorageError) in
            let query = try state.connection.statement("SELECT \(Self.entryColumns) FROM entries WHERE id = ?")
            query.bind(1, id.rawValue)
            defer { query.reset() }
            return try query.step() ? entry(from: query) : nil
        }
    }

    public func totals() -> StoreTotals {
        (try? state.withLock { state throws(StorageError) -> StoreTotals in
            let query = try state.connection.statement(
                "SELECT entries, body_bytes, pinned_bytes FROM totals WHERE id = 0")
            defer { query.reset() }
            guard try query.step() else { return StoreTotals() }
            return StoreTotals(entries: Int(query.int(0)), bodyBytes: query.int(1), pinnedBytes: query.int(2))
        }) ?? StoreTotals()
    }

    public func setPinned(_ pinned: Bool, primaryKey: String) throws(StorageError) -> Int {
        let (changed, files) = try state.withLock { state throws(StorageError) -> (Int, [String]) in
            defer { changes?.bump() }
            return try state.connection.transaction { () throws(StorageError) -> (Int, [String]) in
                let update = try state.connection.statement(
                    "UPDATE entries SET pinned = ? WHERE primary_key = ? AND pinned != ?")
                update.bind(1, Int64(pinned ? 1 : 0))
                update.bind(2, primaryKey)
                update.bind(3, Int64(pinned ? 1 : 0))
                try update.run()
                let changed = state.connection.changes
                return (changed, pinned ? [] : try evict(state.connection))
            }
        }
        for file in files { unlink(bodiesDirectory + "/" + file) }
        return changed
    }

    /// Flushes buffered access times now (they are otherwise written every second or 256
    /// accesses, and when the store is released).
    public func flush() throws(StorageError) {
        try state.withLock { state throws(StorageError) in try flushAccess(&state) }
    }

    // MARK: - Sweeping

    /// Removes body files the index does not reference and temporary files no live writer
    /// holds (left by a crash). Runs in the background after opening.
    @discardableResult
    public func sweep() -> Int {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: bodiesDirectory) else { return 0 }
        var removed = 0
        for name in names {
            let path = bodiesDirectory + "/" + name
            let isTemporary = name.hasSuffix(".tmp")
            let idText = isTemporary ? String(name.dropLast(4)) : name
            guard let id = EntryID(rawValue: idText) else { continue }  // not ours: leave it
            // A live writer holds an exclusive lock on its file until its commit is done.
            let orphaned = FileIO.removeIfUnlocked(path) {
                isTemporary || !isIndexed(id)
            }
            if orphaned { removed += 1 }
        }
        if removed > 0 { configuration.log("removed \(removed) orphaned body file(s) left by an interrupted write") }
        return removed
    }
}

/// Writes one entry: small bodies in memory, larger ones to a locked temporary file.
final class DiskWriter: EntryWriter {
    private let store: DiskStore
    private var head: EntryHead
    private var id = EntryID.random()
    private var buffer: [UInt8] = []
    private var checksums = BlockChecksums()
    private var fd: Int32 = -1
    private var closed = false

    init(store: DiskStore, head: EntryHead) {
        self.store = store
        self.head = head
    }

    deinit { if !closed { abort() } }

    private var temporaryPath: String { store.bodiesDirectory + "/" + id.rawValue + ".tmp" }
    private var finalPath: String { store.bodiesDirectory + "/" + id.rawValue }

    func append(_ chunk: [UInt8]) throws(StorageError) {
        guard !closed else { throw StorageError(.writerClosed, "append after commit or abort") }
        guard checksums.totalBytes + Int64(chunk.count) <= store.configuration.maximumEntrySize else {
            abort()
            throw StorageError(
                .tooLarge,
                "not stored: the body exceeds the maximum entry size of \(store.configuration.maximumEntrySize) "
                    + "bytes; raise the disk capacity or maximumEntrySize")
        }
        checksums.add(chunk)
        do {
            if fd < 0 {
                buffer += chunk
                if buffer.count > store.configuration.inlineBodyLimit {
                    fd = try createTemporaryFile()
                    try FileIO.writeAll(fd, buffer, path: temporaryPath)
                    buffer = []
                }
            } else {
                try FileIO.writeAll(fd, chunk, path: temporaryPath)
            }
        } catch {
            abort()
            throw error
        }
    }

    /// Creates and locks `bodies/<id>.tmp`. A sweep (of this or another process) may remove
    /// the file between its creation and the lock; then another identity is tried.
    private func createTemporaryFile() throws(StorageError) -> Int32 {
        for _ in 0..<8 {
            if let locked = try FileIO.createLocked(temporaryPath) { return locked }
            id = EntryID.random()
        }
        throw StorageError(
            .writeFailed,
            "cannot keep a temporary body file in \(store.bodiesDirectory): something keeps removing it")
    }

    func commit() throws(StorageError) -> StoredEntry {
        guard !closed else { throw StorageError(.writerClosed, "commit after commit or abort") }
        closed = true
        let sums = checksums.finished()
        guard fd >= 0 else {
            return try store.commit(head, id: id, size: checksums.totalBytes, checksums: sums, inline: buffer)
        }
        // The lock is held until the index commit is done, so a sweep never takes the file.
        defer {
            close(fd)
            fd = -1
        }
        if store.configuration.durability == .powerLossSafe { fsync(fd) }
        guard rename(temporaryPath, finalPath) == 0 else {
            let reason = FileIO.errorText()
            unlink(temporaryPath)
            throw StorageError(.writeFailed, "cannot rename \(temporaryPath): \(reason)")
        }
        if store.configuration.durability == .powerLossSafe { FileIO.syncDirectory(store.bodiesDirectory) }
        do {
            return try store.commit(head, id: id, size: checksums.totalBytes, checksums: sums, inline: nil)
        } catch {
            unlink(finalPath)
            throw error
        }
    }

    func commitIncomplete(facts: [UInt8]) throws(StorageError) -> StoredEntry {
        head.isComplete = false
        head.facts = facts
        return try commit()
    }

    func abort() {
        closed = true
        buffer = []
        if fd >= 0 {
            unlink(temporaryPath)
            close(fd)
            fd = -1
        }
    }
}
