internal import CSQLiteHTTPCache
import CacheSemantics
import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Removing from a disk store: by identity, key, URL prefix or all, and the sweep of files a
// crash left behind.
extension DiskStore {
    // MARK: - Removing

    /// Deletes the rows `whereClause` selects (binding `argument` to `:argument`) and, when
    /// `matching` is given, whose entry it accepts; unlinks their files after the commit.
    /// Returns how many rows.
    func delete(
        where whereClause: String, _ argument: String?, matching: ((StoredEntry) -> Bool)? = nil
    ) throws(StorageError) -> Int {
        try recoveringIndex { () throws(StorageError) in
            try deleteRows(where: whereClause, argument, matching: matching)
        }
    }

    private func deleteRows(
        where whereClause: String, _ argument: String?, matching: ((StoredEntry) -> Bool)?
    ) throws(StorageError) -> Int {
        try flushAccess()
        var files: [String] = []
        let rows = try state.withLock { state throws(StorageError) -> [(id: String, inFile: Bool)] in
            // Commits queued behind go into the index first, in a batch committed now: the
            // removal then always takes what was committed before it, and stays.
            files = try commitBatch(&state)
            defer { countWrite() }
            return try state.connection.transaction { () throws(StorageError) -> [(id: String, inFile: Bool)] in
                // Whole entries only for `matching`: otherwise their identities and where their bodies are.
                let select = try state.connection.statement(
                    matching == nil
                        ? "SELECT entries.id AS id, in_file FROM entries \(whereClause)"
                        : "SELECT \(Self.entryColumns), in_file FROM \(Self.entrySource) \(whereClause)")
                if let argument { try select.bind(argument, to: ":argument") }
                let columns = matching == nil ? nil : try select.columns(EntryColumns.self)
                let (id, inFile) = (try select.column("id"), try select.column("in_file"))
                var rows: [(id: String, inFile: Bool)] = []
                while try select.step() {
                    if let matching, let columns, !(entry(from: select, columns).map(matching) ?? false) { continue }
                    rows.append((select.text(id), select.bool(inFile)))
                }
                for row in rows { try removeRow(row.id, state.connection) }
                return rows
            }
        }
        unlinkBodies(files + rows.filter(\.inFile).map(\.id))
        return rows.count
    }

    public func remove(_ id: EntryID) throws(StorageError) {
        _ = try delete(where: "WHERE entries.id = :argument", id.rawValue)
    }

    public func remove(primaryKey: String) throws(StorageError) -> Int {
        try delete(where: "WHERE primary_key = :argument", Self.indexed(primaryKey: primaryKey, sealing))
    }

    /// In an encrypted store the index holds no URL to compare: every head is opened and its
    /// URL compared, a scan of the whole index.
    public func remove(urlPrefix prefix: String) throws(StorageError) -> Int {
        guard sealing != nil else {
            return try delete(where: "WHERE substr(url, 1, length(:argument)) = :argument", prefix)
        }
        return try delete(where: "", nil) { $0.head.url.utf8.starts(with: prefix.utf8) }
    }

    /// The keys that start with `prefix` sort from it up to `prefix` with its last character's
    /// successor: a range of the index on `primary_key`, so the other rows are not read. In an
    /// encrypted store that column holds keyed hashes: every head is opened and compared.
    public func remove(primaryKeyPrefix prefix: String) throws(StorageError) -> Int {
        guard sealing == nil else {
            return try delete(where: "", nil) { $0.head.primaryKey.utf8.starts(with: prefix.utf8) }
        }
        let matches = "substr(primary_key, 1, length(:argument)) = :argument"
        guard let last = prefix.unicodeScalars.last, last.value < 0xD7FF else {
            return try delete(where: "WHERE " + matches, prefix)
        }
        let successor = "substr(:argument, 1, length(:argument) - 1) || char(unicode(substr(:argument, -1)) + 1)"
        return try delete(
            where: "WHERE primary_key >= :argument AND primary_key < \(successor) AND \(matches)", prefix)
    }

    public func remove(tag: String) throws(StorageError) -> Int {
        try delete(
            where: "WHERE entries.id IN (SELECT id FROM tags WHERE tag = :argument)", Self.indexed(tag: tag, sealing))
    }

    public func removeAll() throws(StorageError) {
        _ = try delete(where: "", nil)
    }

    public func entries() throws(StorageError) -> [StoredEntry] {
        try recoveringIndex { () throws(StorageError) in
            try writeHeadUpdates()
            try flushAccess()
            return try state.withLock { state throws(StorageError) in
                let query = try state.connection.statement(
                    "SELECT \(Self.entryColumns) FROM \(Self.entrySource) ORDER BY last_access DESC")
                return try entries(from: query)
            }
        }
    }

    /// The entry with identity `id`, if stored.
    public func entry(_ id: EntryID) throws(StorageError) -> StoredEntry? {
        try recoveringIndex { () throws(StorageError) in try indexedEntry(id) }
    }

    private func indexedEntry(_ id: EntryID) throws(StorageError) -> StoredEntry? {
        let queued = memo.withLock { memo -> (entry: StoredEntry?, replaced: Bool) in
            switch memo.queued(id) {
            case .pending(let pending): (memo.overlaid([pending.entry]).first, false)
            case .replaced: (nil, true)
            case .none: (nil, false)
            }
        }
        if let entry = queued.entry { return entry }
        // Replaced by a queued commit: gone, though its row is in the index until that is written.
        if queued.replaced { return nil }
        return try state.withLock { state throws(StorageError) in
            let query = try state.connection.statement(
                "SELECT \(Self.entryColumns) FROM \(Self.entrySource) WHERE entries.id = :id")
            let columns = try query.columns(EntryColumns.self)
            try query.bind(id.rawValue, to: ":id")
            defer { query.reset() }
            guard try query.step(), let entry = entry(from: query, columns) else { return nil }
            return memo.withLock { $0.overlaid([entry]) }.first
        }
    }

    public func totals() -> StoreTotals {
        (try? recoveringIndex { () throws(StorageError) in try indexTotals() }) ?? StoreTotals()
    }

    private func indexTotals() throws(StorageError) -> StoreTotals {
        var files: [String] = []
        defer { unlinkBodies(files) }
        return try state.withLock { state throws(StorageError) -> StoreTotals in
            files = try writePendingCommits(&state)
            let query = try state.connection.statement(
                "SELECT entries, body_bytes, pinned_bytes FROM totals WHERE id = 0")
            let (entries, bodyBytes, pinnedBytes) = (
                try query.column("entries"), try query.column("body_bytes"), try query.column("pinned_bytes")
            )
            defer { query.reset() }
            guard try query.step() else { return StoreTotals() }
            return StoreTotals(
                entries: Int(query.int(entries)), bodyBytes: query.int(bodyBytes),
                pinnedBytes: query.int(pinnedBytes))
        }
    }

    public func setPinned(_ pinned: Bool, primaryKey: String) throws(StorageError) -> Int {
        try recoveringIndex { () throws(StorageError) in try pin(pinned, primaryKey: primaryKey) }
    }

    private func pin(_ pinned: Bool, primaryKey: String) throws(StorageError) -> Int {
        let (changed, files) = try state.withLock { state throws(StorageError) -> (Int, [String]) in
            let written = try writePendingCommits(&state)
            defer { countWrite() }
            // A page save pins each resource it stores: in the batch its entry is in.
            if pinned { try openBatchIfWanted(&state) }
            let (changed, evicted) = try state.connection.transaction { () throws(StorageError) -> (Int, [String]) in
                let update = try state.connection.statement(
                    "UPDATE entries SET pinned = :pinned WHERE primary_key = :primary_key AND pinned != :pinned")
                try update.bind(pinned, to: ":pinned")
                try update.bind(Self.indexed(primaryKey: primaryKey, sealing), to: ":primary_key")
                try update.run()
                let changed = state.connection.changes
                return (changed, pinned ? [] : try evict(state.connection).files)
            }
            // Evicted inside an open batch: the committed index names them until it commits.
            guard state.batching.open != nil else { return (changed, written + evicted) }
            state.batching.obsoleteFiles += evicted
            return (changed, written)
        }
        unlinkBodies(files)
        return changed
    }

    /// Writes the head updates written behind, commits the open batch
    /// (``Configuration/writesBehind``, ``beginBatchedWrites()``) and writes buffered access
    /// times now (they are otherwise written in the background every 30 s, and when the store
    /// is released).
    public func flush() throws(StorageError) {
        try recoveringIndex { () throws(StorageError) in
            try writeHeadUpdates()
            try flushAccess()
        }
    }

    // MARK: - Sweeping

    /// Removes body files the index does not reference and temporary files no live writer
    /// holds (left by a crash). Runs in the background after opening; sweeps of one store run
    /// one at a time, so when this returns the directory has been swept (a file that another
    /// sweep held locked is gone too).
    @discardableResult
    public func sweep() -> Int {
        sweeping.withLock { _ in sweepOnce() }
    }

    private func sweepOnce() -> Int {
        // Opened once, never through a link: nothing outside the store is listed or removed.
        let directory = open(bodiesDirectory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard directory >= 0 else {
            if errno == ELOOP || errno == ENOTDIR {
                configuration.log("\(bodiesDirectory) is not a directory; no orphaned body files were removed")
            }
            return 0
        }
        defer { close(directory) }
        var started = timespec()
        clock_gettime(CLOCK_REALTIME, &started)
        var removed = 0
        for name in FileIO.names(in: directory) {
            let isTemporary = name.hasSuffix(".tmp")
            let idText = isTemporary ? String(name.dropLast(4)) : name
            guard let id = EntryID(rawValue: idText) else { continue }  // not ours: leave it
            // A live writer holds an exclusive lock on its file until its commit is done. A
            // temporary file written since this sweep began is a live writer's, taken between its
            // creation and its lock: the writer starts again under another name (see
            // DiskWriter.createTemporaryFile), and nothing was left by an interrupted write.
            var leftBehind = false
            let taken = FileIO.removeIfUnlocked(name, in: directory) { status in
                guard isTemporary || !isIndexed(id, countingPendingRemovals: true) else { return false }
                #if canImport(Darwin)
                let written = status.st_mtimespec
                #else
                let written = status.st_mtim
                #endif
                leftBehind =
                    !isTemporary || written.tv_sec < started.tv_sec
                    || (written.tv_sec == started.tv_sec && written.tv_nsec < started.tv_nsec)
                return true
            }
            if taken && leftBehind { removed += 1 }
        }
        if removed > 0 { configuration.log("removed \(removed) orphaned body file(s) left by an interrupted write") }
        return removed
    }
}
