internal import CSQLiteHTTPCache
import CacheSemantics
import CacheSystem
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Reading a disk store: variants from the index (remembered while the change counter stands
// still), bodies opened by identity and verified block by block.
extension DiskStore {
    // MARK: - Reading

    /// The columns ``entry(from:)`` reads (``EntryColumns``), from ``entrySource``.
    static let entryColumns = """
        entries.id AS id, primary_key, variant_key, url, status, fields, facts, body_size, stored_at,
        coalesce(last_access, stored_at) AS last_access, coalesce(hits, 0) AS hits, pinned, storage_policy,
        user_info, complete, tags
        """
    /// Entries with their access times.
    static let entrySource = "entries LEFT JOIN access ON access.id = entries.id"

    /// The columns of ``entryColumns``, by name.
    struct EntryColumns: ResultColumns {
        let id, primaryKey, variantKey, url, status, fields, facts, bodySize, storedAt: Column
        let lastAccess, hits, pinned, storagePolicy, userInfo, complete, tags: Column

        init(_ statement: Statement) throws(StorageError) {
            id = try statement.column("id")
            primaryKey = try statement.column("primary_key")
            variantKey = try statement.column("variant_key")
            url = try statement.column("url")
            status = try statement.column("status")
            fields = try statement.column("fields")
            facts = try statement.column("facts")
            bodySize = try statement.column("body_size")
            storedAt = try statement.column("stored_at")
            lastAccess = try statement.column("last_access")
            hits = try statement.column("hits")
            pinned = try statement.column("pinned")
            storagePolicy = try statement.column("storage_policy")
            userInfo = try statement.column("user_info")
            complete = try statement.column("complete")
            tags = try statement.column("tags")
        }
    }

    /// The entries the rows of `query` (a select of ``entryColumns``) describe; rows that do not
    /// decode are skipped.
    func entries(from query: Statement) throws(StorageError) -> [StoredEntry] {
        let columns = try query.columns(EntryColumns.self)
        var result: [StoredEntry] = []
        while try query.step() {
            if let entry = entry(from: query, columns) { result.append(entry) }
        }
        return result
    }

    func entry(from row: Statement, _ column: EntryColumns) -> StoredEntry? {
        guard let id = EntryID(rawValue: row.text(column.id)) else { return nil }
        let head: EntryHead
        if let sealing {
            // A row that does not open (altered, or sealed for another entry) is skipped: a miss.
            guard let sealed = row.blob(column.fields), let opened = sealing.openHead(sealed, id: id) else {
                return nil
            }
            head = opened
        } else {
            guard let fields = row.blob(column.fields).flatMap({ HeaderFields(serialized: $0) }),
                let policy = StoragePolicy(rawValue: UInt8(clamping: row.int(column.storagePolicy)))
            else { return nil }
            head = EntryHead(
                primaryKey: row.text(column.primaryKey), variantKey: row.text(column.variantKey),
                url: row.text(column.url), status: Int(row.int(column.status)), fields: fields,
                facts: row.blob(column.facts) ?? [], storagePolicy: policy, userInfo: row.blob(column.userInfo),
                isComplete: row.bool(column.complete), tags: Self.tags(serialized: row.blob(column.tags)))
        }
        return StoredEntry(
            id: id, head: head, bodySize: row.int(column.bodySize), storedAt: row.double(column.storedAt),
            lastAccess: row.double(column.lastAccess), hits: Int(row.int(column.hits)),
            isPinned: row.bool(column.pinned))
    }

    /// What the index's `primary_key` column holds for `primaryKey`: itself, or in an encrypted
    /// store its keyed hash.
    static func indexed(primaryKey: String, _ sealing: StoreSealing?) -> String {
        sealing?.lookupKey("p", primaryKey) ?? primaryKey
    }

    /// A number that changes after every write to the index by any process (not after access
    /// times are recorded); `nil` when the shared counter cannot be mapped. Something derived
    /// from ``variants(of:)`` stays valid while this stays the same.
    public var changeCount: UInt64? { changes?.value }

    /// The change count `primaryKey`'s variants were last read or changed at, while only this
    /// store's own writes moved the count since (each applied to the variants it remembers of
    /// its key), or the later count of an update to one of them still pending; the store's
    /// ``changeCount`` otherwise: another process wrote, the key is not remembered, or a commit
    /// of it is queued (a read that began before the commit may have remembered the key as the
    /// index held it, at an earlier count). So a hit on one key is not read again because
    /// another key was stored or freshened.
    public func changeCount(of primaryKey: String) -> UInt64? {
        guard let changes else { return nil }
        return memo.withLock { memo in
            let count = changes.value
            guard memo.pendingKeys[primaryKey] == nil, let cached = memo.heads.value(for: primaryKey),
                Self.isCurrent(cached.changes, at: count, memo)
            else { return count }
            var last = cached.changes
            if !memo.pendingUpdates.isEmpty {
                for entry in cached.entries {
                    if let update = memo.pendingUpdates[entry.id] { last = max(last, update.counted) }
                }
            }
            return last
        }
    }

    /// The variants of `primaryKey`. They are kept in memory and read again from the index
    /// only after a write to it by any process (a shared change counter says when): a hit
    /// then costs no SQLite read, nor does a key the index does not hold once the hashes of
    /// the keys it does are known (`KnownKeys`): a miss. Their `lastAccess` and `hits` may lag
    /// until that write; ``entries()`` always reads the index.
    public func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        try variants(of: primaryKey, rememberingBeside: false)
    }

    /// ``variants(of:)``; `rememberingBeside`: what a reading connection reads is remembered
    /// too (``readVariantsBeside(_:remembering:)``).
    private func variants(of primaryKey: String, rememberingBeside: Bool) throws(StorageError) -> [StoredEntry] {
        try recoveringIndex { () throws(StorageError) in
            if let variants = try variantsWithoutWaiting(of: primaryKey, rememberingBeside: rememberingBeside) {
                return variants
            }
            // (Counted as an index read by the attempt above: ``buildKnownKeysIfWanted()``.)
            return try state.withLock { state throws(StorageError) in try readVariants(of: primaryKey, &state) }
        }
    }

    /// ``variants(of:rememberingBeside:)`` when it can answer without waiting for the index's
    /// lock: from the memo, the index when it is free, or a reading connection; `nil` when only
    /// a wait could.
    private func variantsWithoutWaiting(of primaryKey: String, rememberingBeside: Bool) throws(StorageError)
        -> [StoredEntry]?
    {
        if let remembered = rememberedVariants(of: primaryKey) { return remembered }
        defer { buildKnownKeysIfWanted() }
        let read = { (state: inout State) throws(StorageError) in try self.readVariants(of: primaryKey, &state) }
        if let variants = try state.withLockIfAvailable(read) { return variants }
        // Another thread holds the index: the background writer between two batches (the WAL's
        // checkpoint and its `fdatasync`), which may take long behind a busy disk (an event
        // loop waited up to 1.8 s here). A reading connection answers instead when it can.
        return readVariantsBeside(primaryKey, remembering: rememberingBeside)
    }

    /// The variants of `primaryKey` when they are remembered and current, or when the index
    /// surely holds none (``KnownKeys``): read under the memo's lock alone, never waiting for a
    /// commit; `nil` when only the index can say.
    func rememberedVariants(of primaryKey: String) -> [StoredEntry]? {
        guard let count = changes?.value else { return nil }
        return memo.withLock { memo -> [StoredEntry]? in
            switch memoAnswer(for: primaryKey, at: count, &memo) {
            case .remembered(let entries): return memo.overlaid(entries, primaryKey: primaryKey)
            case .holdsNone(let none):
                // Remembered as read, so that the commit of its miss is queued without a read.
                memo.heads.set((none, []), for: primaryKey, cost: Self.cost(primaryKey, []))
                return memo.overlaid([], primaryKey: primaryKey)
            case nil: return nil
            }
        }
    }

    /// What the memo knows of a key's variants without reading the index.
    enum MemoAnswer {
        /// Its variants as read (or written) at a count still current.
        case remembered([StoredEntry])
        /// The index holds none of them, as its known keys said at this count.
        case holdsNone(at: UInt64)
    }

    /// What `memo` knows of `primaryKey` at change count `count`; `nil` when only the index can say.
    func memoAnswer(for primaryKey: String, at count: UInt64, _ memo: inout HeadMemo) -> MemoAnswer? {
        if let cached = memo.heads.value(for: primaryKey), Self.isCurrent(cached.changes, at: count, memo) {
            return .remembered(cached.entries)
        }
        return countHoldingNone(primaryKey, memo).map { .holdsNone(at: $0) }
    }

    /// Whether ``variants(of:)`` of `primaryKey` would read the index now: it is not
    /// remembered as current, and the index may hold it. Under the memo's lock alone.
    public func readsIndex(for primaryKey: String) -> Bool {
        guard let count = changes?.value else { return true }
        return memo.withLock { memoAnswer(for: primaryKey, at: count, &$0) == nil }
    }

    /// ``variants(of:)`` for a thread that may wait (that of a loop's lookup channel,
    /// ``makeLookupChannel()``), remembering what it reads: under the index's lock, waiting
    /// for the writer if it holds it with a batch open, or on a reading connection while it
    /// holds it between batches, when nothing was written meanwhile. The lookup the loop makes
    /// next then answers from memory while the index stays as read.
    public func rememberVariants(of primaryKey: String) throws(StorageError) -> [StoredEntry] {
        try variants(of: primaryKey, rememberingBeside: true)
    }

    /// Reads `primaryKey`'s variants into the memo unless that means waiting for the index's
    /// lock: `false` when it does (the background writer holds it with a batch open, or no
    /// reading connection is free), so that a caller that must not wait (an event loop) has
    /// them read where it may (``rememberVariants(of:)``); `true` when they are remembered now,
    /// or the read failed (``variants(of:)`` then meets the failure as before).
    public func rememberVariantsWithoutWaiting(of primaryKey: String) -> Bool {
        do {
            _ = try variantsWithoutWaiting(of: primaryKey, rememberingBeside: true)
        } catch {
            return true
        }
        return !readsIndex(for: primaryKey)
    }

    /// ``variants(of:)`` read on a reading connection (``Configuration/readingConnections``)
    /// while ``state`` is held elsewhere, with the queued commits and updates laid over them,
    /// and not remembered unless `remembering`; `nil` when a reading connection cannot answer
    /// for what the store holds. It sees only what is committed, so it answers only while no
    /// batch is open from before the read to after it: then the committed rows and the queue
    /// are all there is (a write committing meanwhile is one made at the same time as this
    /// read, which may or may not see it). A batch's rows, added, freshened or removed, are seen
    /// only by the writing connection; nor does it answer for an encrypted store.
    ///
    /// `remembering`: what was read is also remembered when the change count did not move from
    /// before the read to now, as ``readVariants(of:_:)`` remembers (the memo's lock taken
    /// before a write of this store counts itself: one counted after that applies its change
    /// to what is remembered, one counted before moved the count and nothing is remembered).
    func readVariantsBeside(_ primaryKey: String, remembering: Bool = false) -> [StoredEntry]? {
        let transitions = batchTransitions.value
        let count = changes?.value
        guard sealing == nil, transitions & 1 == 0,
            let read = withReader({ try? rows(of: primaryKey, on: $0) }) ?? nil
        else { return nil }
        return memo.withLock { memo in
            guard batchTransitions.value == transitions else { return nil }
            if remembering, let count, changes?.value == count {
                memo.heads.set((count, read), for: primaryKey, cost: Self.cost(primaryKey, read))
            }
            return memo.overlaid(read, primaryKey: primaryKey)
        }
    }

    /// The index surely holds no row of `primaryKey` (by the hashes of the keys it holds, kept
    /// once a lookup had to read it) and no commit of it is queued; `false` when those cannot
    /// say (not built yet, or another process wrote since), though it may hold none. Under the
    /// memo's lock alone, remembering nothing.
    public func holdsNone(_ primaryKey: String) -> Bool {
        memo.withLock { memo in
            (memo.pendingKeys.isEmpty || memo.pendingKeys[primaryKey] == nil)
                && countHoldingNone(primaryKey, memo) != nil
        }
    }

    /// ``variants(of:)`` read from the index, under ``state``'s lock, and remembered.
    func readVariants(of primaryKey: String, _ state: inout State) throws(StorageError) -> [StoredEntry] {
        // Read before the query: a write that lands during it bumps the count past this.
        // (This store's own writes wait for ``state``; an update or a commit written behind
        // changes only the memo, which the result is laid under below.)
        let count = changes?.value
        let result = try rows(of: primaryKey, on: state.connection)
        return memo.withLock { memo in
            if let count { memo.heads.set((count, result), for: primaryKey, cost: Self.cost(primaryKey, result)) }
            return memo.overlaid(result, primaryKey: primaryKey)
        }
    }

    /// The rows of `primaryKey` as `connection` sees them.
    func rows(of primaryKey: String, on connection: SQLiteConnection) throws(StorageError) -> [StoredEntry] {
        let query = try connection.statement(
            "SELECT \(Self.entryColumns) FROM \(Self.entrySource) WHERE primary_key = :primary_key")
        defer { query.reset() }
        try query.bind(Self.indexed(primaryKey: primaryKey, sealing), to: ":primary_key")
        var result = try entries(from: query)
        // A sealed head says which key it was stored under: a lookup column moved to another
        // row finds nothing.
        if sealing != nil { result.removeAll { $0.head.primaryKey != primaryKey } }
        return result
    }

    /// The memory the variants of `primaryKey` take in ``State/heads``.
    static func cost(_ primaryKey: String, _ entries: [StoredEntry]) -> Int {
        MemoryCost.string(primaryKey) + MemoryCost.array(count: entries.count, stride: MemoryLayout<StoredEntry>.stride)
            + entries.reduce(0) { $0 + MemoryCost.head($1.head) }
    }

    /// Whether variants read at change count `read` are what the index holds at `count`: the
    /// same count, or only this store's own writes since (``State/ownCounts``).
    static func isCurrent(_ read: UInt64, at count: UInt64, _ memo: HeadMemo) -> Bool {
        read == count || memo.ownCounts.map { $0.contains(read) && count == $0.upperBound } == true
    }

    /// Counts one of this store's own writes, made under ``state``'s lock, and applies it with
    /// `change` to the variants remembered for `primaryKey`, if current, or forgets them: other
    /// remembered keys stay current (a proxy's revalidations and misses then read the index
    /// only for the key they change). A count another store or process moved meanwhile starts
    /// the run of own counts over.
    func countOwnWrite(primaryKey: String? = nil, _ change: (inout [StoredEntry]) -> Void = { _ in }) {
        memo.withLock { memo in countOwnWrite(&memo, primaryKey: primaryKey, change) }
    }

    /// ``countOwnWrite(primaryKey:_:)`` with the memo's lock held.
    func countOwnWrite(
        _ memo: inout HeadMemo, primaryKey: String? = nil, _ change: (inout [StoredEntry]) -> Void = { _ in }
    ) {
        guard let changes else { return }
        let before = changes.bump()
        memo.knownKeys.counted(before)
        if let primaryKey {
            if var cached = memo.heads.value(for: primaryKey), Self.isCurrent(cached.changes, at: before, memo) {
                change(&cached.entries)
                memo.heads.set(
                    (before &+ 1, cached.entries), for: primaryKey, cost: Self.cost(primaryKey, cached.entries))
            } else {
                memo.heads.removeValue(for: primaryKey)
            }
        }
        let start = memo.ownCounts?.upperBound == before ? memo.ownCounts?.lowerBound ?? before : before
        memo.ownCounts = start...(before &+ 1)
    }

    /// Where an entry's body is.
    struct BodyLocation {
        var size: Int64
        var content: Content

        enum Content {
            /// In `bodies/<id>`, with its block checksums (none when sealed).
            case file(checksums: [UInt8])
            /// Read from the index, with the checksums its row keeps (none when sealed).
            case inline([UInt8], checksums: [UInt8])
            /// A queued commit's bytes (``CommittedBody/inline(_:checksums:)``), in memory since they were
            /// stored: nothing was read that could be damaged, and no checksum is made yet.
            case queued([UInt8])
        }

        /// The body's bytes when they are not in a file.
        var inline: [UInt8]? {
            switch content {
            case .file: nil
            case .inline(let bytes, _), .queued(let bytes): bytes
            }
        }

        /// The columns a body's location is read from, by name.
        struct Columns: ResultColumns {
            let bodySize, checksums, body, inFile: Column

            init(_ statement: Statement) throws(StorageError) {
                bodySize = try statement.column("body_size")
                checksums = try statement.column("checksums")
                body = try statement.column("body")
                inFile = try statement.column("in_file")
            }
        }
    }

    func location(of id: EntryID) throws(StorageError) -> BodyLocation {
        // An entry committed behind is in no index yet: its queued commit says (its body file
        // is in place, locked). Taken out of the queue only once it is in the open batch.
        // One a queued commit replaces is gone already.
        switch memo.withLock({ $0.queued(id) }) {
        case .pending(let pending):
            switch pending.body {
            case .file(let checksums):
                return BodyLocation(size: pending.entry.bodySize, content: .file(checksums: checksums))
            case .inline(let bytes, _): return BodyLocation(size: pending.entry.bodySize, content: .queued(bytes))
            }
        case .replaced: throw MemoryStore.notFound(id)
        case .none: break
        }
        // A body never changes under its identity: what the committed index holds for it is its
        // body, unless an open batch has removed rows (it may have replaced or removed the
        // entry). Then, or when not found there (a batch may have written it), the writing
        // connection, which sees the batch, says. A removal after this check overlaps the read:
        // it may find the body it removes, as a read made just before it would have.
        if batchTransitions.value & 1 == 0 || !openBatchRemovedRows.load(ordering: .sequentiallyConsistent),
            let found = withReader({ connection in try? Self.location(of: id, connection, inlineFirst: inlineFirst) })
                ?? nil
        {
            return found
        }
        let found = try state.withLock { state throws(StorageError) in
            try Self.location(of: id, state.connection, inlineFirst: inlineFirst)
        }
        guard let found else { throw MemoryStore.notFound(id) }
        return found
    }

    /// `body` with a reading connection of the store's own (``Configuration/readingConnections``),
    /// taken from the idle ones or opened; `nil` when none is configured, all are in use, or
    /// one cannot be opened.
    func withReader<T>(_ body: (SQLiteConnection) -> T) -> T? {
        let limit = configuration.readingConnections
        guard limit > 0 else { return nil }
        let taken = readers.withLock { readers -> (connection: SQLiteConnection?, opens: Bool, generation: Int) in
            if let idle = readers.idle.popLast() { return (idle, false, readers.generation) }
            guard readers.open < limit else { return (nil, false, readers.generation) }
            readers.open += 1
            return (nil, true, readers.generation)
        }
        var connection = taken.connection
        // One that cannot be opened still counts: after `limit` failures none is tried again.
        if taken.opens {
            connection = try? Self.openReader(configuration)
            if let connection { watchForDamage(connection) }
        }
        guard let connection else { return nil }
        let result = body(connection)
        // Kept unless the index was replaced meanwhile (``ReaderPool/closingAll()``).
        let kept = readers.withLock { readers in
            guard readers.generation == taken.generation else { return false }
            readers.idle.append(connection)
            return true
        }
        if !kept { connection.close() }
        return result
    }

    /// Whether a body's location may be read from `inline_bodies` alone: its rows keep their
    /// checksums, and the body's size is its length (a sealed body's is not).
    var inlineFirst: Bool { inlineChecksums && sealing == nil }

    /// Where the body of `id` is, as `connection` sees it; `nil` when it has no row. With
    /// `inlineFirst`, an inline body whose row keeps its checksums is read in one lookup
    /// (`inline_bodies`' key, then its row), not two (the entry's row, then the body's).
    static func location(of id: EntryID, _ connection: SQLiteConnection, inlineFirst: Bool = false)
        throws(StorageError) -> BodyLocation?
    {
        if inlineFirst {
            let inline = try connection.statement("SELECT body, checksums FROM inline_bodies WHERE id = :id")
            let body = try inline.column("body")
            let checksums = try inline.column("checksums")
            try inline.bind(id.rawValue, to: ":id")
            defer { inline.reset() }
            if try inline.step(), let sums = inline.blob(checksums) {
                let bytes = inline.blob(body) ?? []
                return BodyLocation(size: Int64(bytes.count), content: .inline(bytes, checksums: sums))
            }
        }
        let query = try connection.statement(
            """
            SELECT body_size, entries.checksums AS checksums, inline_bodies.body AS body, in_file
            FROM entries LEFT JOIN inline_bodies ON inline_bodies.id = entries.id WHERE entries.id = :id
            """)
        let column = try query.columns(BodyLocation.Columns.self)
        try query.bind(id.rawValue, to: ":id")
        defer { query.reset() }
        guard try query.step() else { return nil }
        let checksums = query.blob(column.checksums) ?? []
        return BodyLocation(
            size: query.int(column.bodySize),
            content: query.bool(column.inFile)
                ? .file(checksums: checksums) : .inline(query.blob(column.body) ?? [], checksums: checksums))
    }

    /// Opens the body of `id`: read later, it is still this version even when the entry is
    /// replaced or removed meanwhile (the file stays open; an inline body is read now).
    public func openBody(of id: EntryID) throws(StorageError) -> any StoredBody {
        try recoveringIndex { () throws(StorageError) in try openBody(id) }
    }

    private func openBody(_ id: EntryID) throws(StorageError) -> any StoredBody {
        let location = try location(of: id)
        let corrupted: @Sendable (String) -> StorageError = { [weak self] detail in
            self?.corrupted(id, detail) ?? StorageError(.corrupted, "entry \(id) was corrupted on disk (\(detail))")
        }
        do {
            return try body(of: id, at: location, corrupted: corrupted)
        } catch  where error.kind == .notFound {
            // Removed or replaced (here or by another process) since its row was read.
            if !isIndexed(id) { throw error }
            throw corrupted("its body file is missing")
        }
    }

    /// The body of `id` at `location`, its blocks checked (or opened, in an encrypted store) as
    /// they are read; a body that fails throws what `corrupted` makes of it. A missing body
    /// file throws ``StorageError/Kind/notFound``.
    func body(
        of id: EntryID, at location: BodyLocation, corrupted: @escaping @Sendable (String) -> StorageError
    ) throws(StorageError) -> any StoredBody {
        let inline: [UInt8]
        let checksums: [UInt8]?
        switch location.content {
        case .file(let sums): return try fileBody(of: id, size: location.size, checksums: sums, corrupted: corrupted)
        case .inline(let bytes, let sums): (inline, checksums) = (bytes, sums)
        case .queued(let bytes): (inline, checksums) = (bytes, nil)
        }
        if let sealing {
            guard let body = sealing.body.openAll(inline, size: location.size, owner: id.bytes)
            else {
                throw corrupted("its inline body does not authenticate")
            }
            return BytesBody(body)
        }
        guard Int64(inline.count) == location.size else { throw corrupted("inline body has the wrong length") }
        if let checksums {
            try BlockChecksums.verify(
                inline, blocks: 0...(blockCount(location.size) - 1), against: checksums, corrupted)
        }
        return BytesBody(inline)
    }

    /// The body of `id` in its file (``body(of:at:corrupted:)``).
    private func fileBody(
        of id: EntryID, size: Int64, checksums: [UInt8], corrupted: @escaping @Sendable (String) -> StorageError
    ) throws(StorageError) -> any StoredBody {
        let path = bodiesDirectory + "/" + id.rawValue
        guard let (descriptor, fileSize) = FileIO.openRegular(path) else {
            let code = errno
            if code == ENOENT { throw MemoryStore.notFound(id) }
            if code == ELOOP || code == EINVAL { throw corrupted("its body file is not a regular file") }
            throw StorageError(.readFailed, "cannot open \(path): \(errnoText(code))")
        }
        // A file cut short or grown is found as it is opened, before a byte of it is served: a
        // hit would otherwise send its head and the first blocks, then stop where they end.
        let expected = sealing == nil ? size : BodySealing.sealedSize(size)
        guard fileSize == expected else {
            close(descriptor)
            throw corrupted("its body file has \(fileSize) bytes where \(expected) were written")
        }
        return FileBody(
            descriptor: descriptor, path: path, size: size,
            blocks: sealing.map { .sealed($0.body, owner: id.bytes) } ?? .checksummed(checksums),
            corrupted: corrupted)
    }

    func blockCount(_ size: Int64) -> Int {
        max(1, Int((size + Int64(checksumBlockSize) - 1) / Int64(checksumBlockSize)))
    }

    /// Whether the index still has a row for `id` (`true` when that cannot be told). With
    /// `countingPendingRemovals`, also when an entry of the open batch replaced or evicted it:
    /// the committed index, which other processes read and a crash returns to, names it until
    /// the batch commits (a sweep must keep its file).
    func isIndexed(_ id: EntryID, countingPendingRemovals: Bool = false) -> Bool {
        (try? state.withLock { state throws(StorageError) -> Bool in
            // Queued behind: in the index once its batch is written (and its file locked till then).
            // Replaced by one: not stored, though the committed index names it until the batch
            // commits (the sweep, counting pending removals, keeps its file).
            switch memo.withLock({ $0.queued(id) }) {
            case .pending: return true
            case .replaced: return countingPendingRemovals
            case .none: break
            }
            if countingPendingRemovals, state.batching.obsoleteFiles.contains(id.rawValue) { return true }
            let query = try state.connection.statement("SELECT 1 FROM entries WHERE id = :id")
            try query.bind(id.rawValue, to: ":id")
            defer { query.reset() }
            return try query.step()
        }) ?? true
    }

    /// Removes a corrupted entry and describes it.
    func corrupted(_ id: EntryID, _ detail: String) -> StorageError {
        try? remove(id)
        return StorageError(
            .corrupted, "entry \(id) was corrupted on disk (\(detail)); it was removed and will be fetched again")
    }
}
