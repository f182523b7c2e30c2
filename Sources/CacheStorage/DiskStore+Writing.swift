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

// Writing a disk store: committing an entry (replace, evict, one transaction), updating
// fields and facts, recording accesses in batches.
extension DiskStore {
    // MARK: - Writing

    public func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter {
        DiskWriter(store: self, head: head)
    }

    // MARK: - Batched writes

    /// Groups the commits that follow into index transactions of up to 64 entries and
    /// ``Configuration/batchLatency`` seconds each, until as many ``endBatchedWrites()`` calls: one
    /// transaction for many entries instead of one each (a page save stores hundreds). This
    /// process sees each entry at once; other processes when its batch commits. A crash loses
    /// the open batch (its body files are removed at the next open); every other write made
    /// meanwhile joins it. With ``Durability/powerLossSafe`` every commit stays durable when it
    /// returns: nothing is batched.
    public func beginBatchedWrites() {
        state.withLock { state in
            state.batching.scopes += 1
            memo.withLock { $0.batchScopes = state.batching.scopes }
            scopesOpen.store(state.batching.scopes, ordering: .relaxed)
        }
    }

    /// Ends a scope of ``beginBatchedWrites()``; the last one commits the open batch.
    /// - Throws: ``StorageError`` when that commit fails: the batch's entries are not stored.
    public func endBatchedWrites() throws(StorageError) {
        let files = try state.withLock { state throws(StorageError) -> [String] in
            state.batching.scopes = max(0, state.batching.scopes - 1)
            memo.withLock { $0.batchScopes = state.batching.scopes }
            scopesOpen.store(state.batching.scopes, ordering: .relaxed)
            return state.batching.scopes == 0 ? try commitBatch(&state) : []
        }
        unlinkBodies(files)
    }

    /// Opens a batch when a scope wants one and none is open, and schedules its commit.
    func openBatchIfWanted(_ state: inout State) throws(StorageError) {
        guard state.batching.scopes > 0 || configuration.isWrittenBehind, state.batching.open == nil,
            configuration.durability != .powerLossSafe
        else { return }
        try state.connection.beginBatch()
        openBatchRemovedRows.store(false, ordering: .sequentiallyConsistent)
        batchTransitions.bump()
        state.batching.count += 1
        let number = state.batching.count
        state.batching.open = number
        memo.withLock { $0.openBatch = number }
        commitInBackground(number, after: configuration.batchLatency)
    }

    /// Commits batch `number` on a background thread `delay` seconds from now, unless it was
    /// committed by then.
    func commitInBackground(_ number: Int, after delay: Double) {
        inBackground(after: delay) { $0.commitBatch(number: number) }
    }

    /// Commits batch `number` unless it was committed already: its queued commits' rows a few
    /// at a time, each chunk under a hold of its own, so that a read that needs the index (an
    /// event loop looking up a miss) waits for one chunk at most, not for the whole batch.
    private func commitBatch(number: Int) {
        reopenIndexIfItsFilesChanged()
        do {
            var files: [String] = []
            checksumQueuedBodies()
            while let chunk = try state.withLock({ state throws(StorageError) -> [String]? in
                guard state.batching.open == number,
                    memo.withLock({ $0.pendingCommits.count }) > Self.pendingCommitChunk
                else { return nil }
                return try writePendingCommits(&state, limit: Self.pendingCommitChunk)
            }) {
                files += chunk
                checksumQueuedBodies()
            }
            var failure: StorageError?
            files += state.withLock { state -> [String] in
                guard state.batching.open == number else { return [] }
                // Commits that come while it commits are queued for the next batch, opened in
                // this same hold: an event loop storing a miss meanwhile does not wait for it.
                var files: [String] = []
                do throws(StorageError) {
                    files = try commitBatch(&state, queueingNext: true)
                } catch {
                    failure = error
                }
                return files + openBatchForQueued(&state)
            }
            unlinkBodies(files)
            if let failure { throw failure }
        } catch {
            configuration.log(
                "\(error); the entries written in the last \(configuration.batchLatency) s are not stored")
            replaceDamagedIndexIfFound()
        }
    }

    /// Makes the block checksums of the inline bodies queued since it last ran
    /// (`HeadMemo.unsummedCommits`), holding no lock meanwhile: the writer runs it before each
    /// hold of ``state`` in which it writes queued commits, so that the index's lock is not held
    /// for them (a 16 KB body's checksums cost 15.8k instructions, eight of them a chunk). A
    /// commit written by another hold first has its checksums made there
    /// (``CommittedBody/resolved(sealed:)``).
    func checksumQueuedBodies() {
        let unsummed = memo.withLock { memo in
            defer { memo.unsummedCommits = [] }
            return memo.unsummedCommits
        }
        guard !unsummed.isEmpty else { return }
        let summed = unsummed.map { (id: $0.id, bytes: $0.bytes, checksums: BlockChecksums.of($0.bytes)) }
        memo.withLock { memo in
            for body in summed {
                // A commit written meanwhile (by another hold) is gone from the queue.
                guard let index = memo.pendingCommits.index(forKey: body.id) else { continue }
                memo.pendingCommits.values[index].body = .inline(body.bytes, checksums: body.checksums)
            }
        }
    }

    /// Checkpoints the WAL when it has grown past ``checkpointPages`` (``checkpointDue``), on
    /// the index's own connection between two batches (as each batch commits, before the next
    /// can open: ``commitBatch(_:queueingNext:)``), holding ``state`` so that no write begins
    /// meanwhile. SQLite starts the WAL over only at a write transaction that begins
    /// with every frame of it copied into the index; when each batch opens as the one before
    /// commits (written behind, or many writes in one ``beginBatchedWrites()`` scope, as a
    /// saved page's resources), a checkpoint made beside them never left such a moment, and the
    /// WAL grew by every byte stored until writes paused (388 MB for 20,000 misses of 16 KB
    /// through a caching proxy, twice the index's size on disk). Written behind, commits made
    /// meanwhile are queued for the next batch: an event loop storing a miss does not wait.
    func checkpointBetweenBatches(_ state: inout State) {
        guard checkpointDue.exchange(false, ordering: .relaxed) else { return }
        do {
            try state.connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
        } catch {
            configuration.log("could not checkpoint the cache index: \(error); it is tried again after more writes")
        }
    }

    /// Counts `count` writes into the open batch, if any; at ``batchLimit`` writes the batch
    /// commits: here inside ``beginBatchedWrites()`` scopes, on a background thread when written
    /// behind (``Configuration/writesBehind``), whose writers never wait for a commit. Returns
    /// the body files to unlink now.
    func countBatchedWrite(_ state: inout State, count: Int = 1) throws(StorageError) -> [String] {
        guard let open = state.batching.open, count > 0 else { return [] }
        let before = state.batching.writes
        state.batching.writes += count
        guard state.batching.writes >= Self.batchLimit else { return [] }
        if state.batching.scopes > 0 { return try commitBatch(&state) }
        // Queued once; the batch takes what comes meanwhile.
        if before < Self.batchLimit { commitInBackground(open, after: 0) }
        return []
    }

    /// Commits the open batch, if any, with the commits queued behind in it (written first),
    /// and releases its body files' locks; returns the body files it made obsolete, to unlink
    /// now. `queueingNext`: commits may be queued meanwhile, for the next batch, which the
    /// caller opens before it lets go of ``state`` (``openBatchForQueued(_:)``).
    func commitBatch(_ state: inout State, queueingNext: Bool = false) throws(StorageError) -> [String] {
        guard state.batching.open != nil else { return [] }
        let pending = writePendingCommits(&state, closingBatch: true, queueingNext: queueingNext)
        let batch = state.batching
        state.batching.open = nil
        state.batching.writes = 0
        state.batching.lockedFiles = []
        state.batching.obsoleteFiles = []
        var committed = false
        defer {
            // Committed or rolled back: what the reading connections see is what the store holds.
            batchTransitions.bump()
            for file in batch.lockedFiles { close(file) }
            // Other processes read again: what their memos hold was read before the commit.
            // This store too when it failed: what it remembers of the batch was rolled back.
            if committed { countOwnWrite() } else { countWrite() }
            // Before the next batch opens, whoever committed this one (its background writer, a
            // scope's end or limit, a flush, a removal, the release).
            checkpointBetweenBatches(&state)
        }
        do {
            try state.connection.commitBatch()
            committed = true
        } catch {
            throw StorageError(
                error.kind,
                "could not store \(batch.writes + pending.count) entries written together in the index: \(error.message)"
            )
        }
        return pending.written + batch.obsoleteFiles
    }

    /// After ``commitBatch(_:queueingNext:)`` with `queueingNext`, in the same hold of
    /// ``state``: opens the next batch for the commits queued while it committed, or leaves
    /// none open when none was. When no batch can be opened, they are written now (or dropped,
    /// and reported, when they cannot be). Returns the body files to unlink now.
    func openBatchForQueued(_ state: inout State) -> [String] {
        let queued = memo.withLock { memo -> Bool in
            if memo.pendingCommits.isEmpty { memo.openBatch = nil }
            return memo.openBatch != nil
        }
        guard queued else { return [] }
        do {
            try openBatchIfWanted(&state)
        } catch {
            configuration.log(
                "could not start writing the cache index (\(error)); the entries queued are written one by one")
        }
        guard state.batching.open == nil else { return [] }
        memo.withLock { $0.openBatch = nil }
        return writePendingCommits(&state, closingBatch: false).written
    }

    /// Unlinks the body files named `files`, entry identities read from the index. A name that
    /// is not an identity's text (a damaged row, or one written by another hand: `../../x`) is
    /// never made into a path: the index must not be able to remove a file outside `bodies/`.
    func unlinkBodies(_ files: [String]) {
        for file in files where EntryID(rawValue: file) != nil { unlink(bodiesDirectory + "/" + file) }
    }

    // MARK: - Committing

    /// Makes a written entry visible: replaces the same primary and variant key (keeping its
    /// pin) and evicts, in one transaction (or in the open batch). The body file, if any, is
    /// already in its final place, and `lockedFile` (its descriptor, holding its lock) is the
    /// store's to close: after the transaction, or after its batch's.
    ///
    /// Written behind (``Configuration/writesBehind``, a store in the clear, no
    /// ``beginBatchedWrites()`` scope open) the commit is queued in the open batch and returns
    /// at once, taking no lock a write to the index holds (the background writer opens the next
    /// batch as it commits one, for the commits that came meanwhile; after a quiet spell, the
    /// first commit opens it, under ``state``'s lock): this store's reads find the entry
    /// from then on (`HeadMemo.pendingCommits`), and the batch's commit, within
    /// ``Configuration/batchLatency`` seconds (at once after 64 queued), writes its row first;
    /// other processes see it then, and their writes wait for the batch meanwhile. Every other
    /// write to the index by this store writes the queued commits first, so a removal made
    /// after this returns always removes the entry. A crash loses the queued commits (their
    /// body files are swept at the next open), never a body under a wrong entry.
    ///
    /// When the writer is far behind, a commit written behind may be refused rather than wait
    /// (``queueBehind(_:body:lockedFile:)``).
    func commit(
        _ head: EntryHead, id: EntryID, size: Int64, body: CommittedBody, lockedFile: Int32? = nil
    ) throws(StorageError) -> StoredEntry {
        // Not run again on a new index when it meets damage: its body file is handed over once.
        replaceDamagedIndexIfFound()
        let now = clock()
        var entry = StoredEntry(id: id, head: head, bodySize: size, storedAt: now, lastAccess: now)
        // The body file's lock, handed to a queued commit or the open batch, or closed on return.
        var handedOver = false
        defer { if !handedOver, let lockedFile { close(lockedFile) } }
        if configuration.isWrittenBehind, sealing == nil,
            try queueBehind(&entry, body: body, lockedFile: lockedFile)
        {
            handedOver = true
            return entry
        }
        // Checksummed before the index's lock is taken.
        let (checksums, inline) = body.resolved(sealed: sealing != nil)
        let obsolete = try state.withLock { state throws(StorageError) -> [String] in
            // Queued before: written first, so that this one replaces them, never the other way.
            let written = try writePendingCommits(&state)
            // Counted as this store's own write when it changed no other key than its own.
            var othersChanged = true
            defer {
                if othersChanged {
                    countWrite()
                } else {
                    countOwnWrite(primaryKey: head.primaryKey) { $0.replaceVariant(with: entry, sealing) }
                }
            }
            try openBatchIfWanted(&state)
            let obsolete = try state.connection.transaction { () throws(StorageError) -> [String] in
                let replaced = try writeRow(&entry, checksums: checksums, inline: inline, state.connection)
                let evicted = try evict(state.connection)
                othersChanged = evicted.count > 0
                return (replaced.map { [$0] } ?? []) + evicted.files
            }
            guard state.batching.open != nil else { return written + obsolete }
            state.batching.obsoleteFiles += obsolete
            if let lockedFile {
                state.batching.lockedFiles.append(lockedFile)
                handedOver = true
            }
            return try written + countBatchedWrite(&state)
        }
        unlinkBodies(obsolete)
        return entry
    }

    /// Queues `entry`'s commit to be written behind (``commit(_:id:size:body:lockedFile:)``),
    /// opening a batch when none is; `false` when it is to be written now instead (a
    /// ``beginBatchedWrites()`` scope is open). When ``Configuration/queuedCommitLimit`` commits
    /// are queued (the background writer is behind: a slow disk, a busy machine) and no other
    /// thread holds the index, this commit helps the writer first: a few queued commits written
    /// here, a bounded piece of work. When one does (the writer, in a batch's commit that may take
    /// seconds on a stalled disk), the commit is queued all the same up to four times that many,
    /// and refused past them (or when its key's variants are not remembered as current, which
    /// queuing needs) with ``StorageError/Kind/busy`` rather than waiting: storing is optional
    /// (RFC 9111 §2), and a caching proxy's event loop must not stop for the disk. Its caller
    /// removes the body file.
    private func queueBehind(
        _ entry: inout StoredEntry, body: CommittedBody, lockedFile: Int32?
    ) throws(StorageError) -> Bool {
        func enqueue(busy: Bool = false) -> Queueing {
            queue(&entry, body: body, lockedFile: lockedFile, allowance: busy ? 4 : 1)
        }
        // With the index's lock held: a batch opened when none is (the index's write lock, so that
        // another process's write waits for the batch, with what is queued in it), and the
        // commit queued in it; the key's variants read first when they are not remembered as the
        // index holds them (the entry this one replaces is then known).
        func queueHolding(_ state: inout State, busy: Bool = false) throws(StorageError) -> Bool {
            guard state.batching.scopes == 0 else { return false }
            try openBatchIfWanted(&state)
            if enqueue(busy: busy) == .queued { return true }
            _ = try readVariants(of: entry.head.primaryKey, &state)
            return enqueue(busy: busy) == .queued
        }
        switch enqueue() {
        case .queued:
            return true
        case .notQueued:
            return try state.withLock { state throws(StorageError) -> Bool in try queueHolding(&state) }
        case .full:
            var written: [String] = []
            defer { unlinkBodies(written) }
            let helped = try state.withLockIfAvailable { state throws(StorageError) -> Bool in
                written = try writePendingCommits(&state, limit: Self.pendingCommitChunk)
                return try queueHolding(&state, busy: true)
            }
            if let helped { return helped }
            guard enqueue(busy: true) == .queued else {
                throw StorageError(
                    .busy,
                    "the cache index is \(configuration.queuedCommitLimit) entries (or \(configuration.queuedBodyByteLimit >> 20) "
                        + "MiB of bodies) or more behind and busy writing them (a slow disk, or a busy machine): this one "
                        + "is not stored, rather than its request waiting; entries are stored again once the index "
                        + "catches up")
            }
            return true
        }
    }

    /// Writes `entry`'s row, its inline body, tags and access row, replacing the row of the same
    /// primary and variant key and keeping its pin (set in `entry`). Returns the replaced row's
    /// body file, if it had one, to unlink once the transaction has committed.
    func writeRow(
        _ entry: inout StoredEntry, checksums: [UInt8], inline: [UInt8]?, _ connection: SQLiteConnection
    ) throws(StorageError) -> String? {
        var obsolete: String?
        let primaryKey = Self.indexed(primaryKey: entry.head.primaryKey, sealing)
        // Known before the row is there: a lookup never takes the key for one the index lacks.
        noteWrittenKey(primaryKey)
        let existing = try connection.statement(
            """
            SELECT id, in_file, pinned FROM entries
            WHERE primary_key = :primary_key AND variant_key = :variant_key
            """)
        try existing.bind(primaryKey, to: ":primary_key")
        try existing.bind(Self.indexed(entry.head, sealing), to: ":variant_key")
        if try existing.step() {
            let oldID = existing.text(try existing.column("id"))
            if existing.bool(try existing.column("in_file")) { obsolete = oldID }
            entry.isPinned = existing.bool(try existing.column("pinned"))
            try removeRow(oldID, connection)
        }
        try Self.insertRow(
            connection, id: entry.id, head: entry.head, size: entry.bodySize, checksums: checksums, inline: inline,
            storedAt: entry.storedAt, pinned: entry.isPinned, sealing: sealing, inlineChecksums: inlineChecksums)
        let access = try connection.statement(
            "INSERT OR REPLACE INTO access (id, last_access, hits) VALUES (:id, :last_access, 0)")
        try access.bind(entry.id.rawValue, to: ":id")
        try access.bind(entry.storedAt, to: ":last_access")
        try access.run()
        return obsolete
    }

    /// Queues `entry`'s commit in the open batch, to be written behind
    /// (``commit(_:id:size:body:lockedFile:)``); queuing nothing when no batch is
    /// open, a ``beginBatchedWrites()`` scope is, the key's variants are not remembered as the
    /// index holds them, or the queue is full (``Queueing/full``: `allowance` times
    /// ``Configuration/queuedCommitLimit`` commits, or as many times
    /// ``Configuration/queuedBodyByteLimit`` bytes of bodies). Counted as this store's own write
    /// of its key, which its remembered variants take in; the pin of the variant it replaces,
    /// when remembered, is given to `entry` (the writer sets it from the index). The 64th
    /// queued commit has the batch committed at once.
    private func queue(
        _ entry: inout StoredEntry, body: CommittedBody, lockedFile: Int32?, allowance: Int = 1
    ) -> Queueing {
        let (queued, full) = memo.withLock { memo -> (Queueing, Int?) in
            // Only for a key whose variants are remembered as the index holds them (an exchange
            // looked it up before storing): the entry it replaces is then known, and gone for
            // reads by identity at once, as it would be with its row deleted.
            let key = entry.head.primaryKey
            guard memo.batchScopes == 0, let batch = memo.openBatch else { return (.notQueued, nil) }
            guard memo.pendingCommits.count < configuration.queuedCommitLimit * allowance,
                memo.pendingInlineBytes < configuration.queuedBodyByteLimit * allowance
            else { return (.full, nil) }
            guard let count = changes?.value, let cached = memo.heads.value(for: key),
                Self.isCurrent(cached.changes, at: count, memo)
            else { return (.notQueued, nil) }
            let replaced = memo.overlaid(cached.entries, primaryKey: key).first {
                $0.head.variantKey == entry.head.variantKey
            }
            entry.isPinned = replaced?.isPinned ?? false
            if let replaced { memo.replacedIDs.insert(replaced.id) }
            memo.commitCount += 1
            memo.pendingCommits[entry.id] = PendingCommit(
                entry: entry, body: body, lockedFile: lockedFile, replaces: replaced?.id,
                number: memo.commitCount)
            memo.pendingKeys[key, default: []].append(entry.id)
            memo.pendingInlineBytes += body.inline?.count ?? 0
            if case .inline(let bytes, checksums: nil) = body { memo.unsummedCommits.append((entry.id, bytes)) }
            let queued = entry
            countOwnWrite(&memo, primaryKey: key) { $0.replaceVariant(with: queued, nil) }
            return (.queued, memo.pendingCommits.count == Self.batchLimit ? batch : nil)
        }
        if let full { commitInBackground(full, after: 0) }
        return queued
    }

    /// What came of ``queue(_:body:lockedFile:allowance:)``.
    private enum Queueing {
        case queued
        /// As many commits as its limit allows are queued already.
        case full
        /// Not queued for another reason: the commit takes ``state``'s lock.
        case notQueued
    }

    /// Writes the queued commits (``commit(_:id:size:body:lockedFile:)`` written
    /// behind; the first `limit` of them) into the open batch, opening one, in one transaction
    /// and in the order they were queued: each replaces the row of its key (keeping its pin), then the store evicts. Only
    /// then are they taken out of the queue, as the locks on their body files go to the batch:
    /// a read finds each entry throughout. Called under ``state``'s lock by every write to the
    /// index and every read of what only the index knows, before anything else. When the
    /// transaction fails the queued entries are dropped (reported, their body files removed),
    /// and what the index holds is read again: a miss, never a wrong body. Returns the body
    /// files to unlink now; throws only when a batch that reached ``batchLimit`` inside a
    /// ``beginBatchedWrites()`` scope fails to commit.
    func writePendingCommits(_ state: inout State, limit: Int = .max) throws(StorageError) -> [String] {
        let files = writePendingCommits(&state, closingBatch: false, limit: limit)
        return try files.written + countBatchedWrite(&state, count: files.count)
    }

    /// The most queued commits a batch's background commit writes per hold of ``state``.
    static let pendingCommitChunk = 8

    /// ``writePendingCommits(_:limit:)``, counting nothing into the batch; `closingBatch` when the
    /// open batch is about to commit: commits come no more into it (they open the next one, or
    /// with `queueingNext` are queued for the next, which ``openBatchForQueued(_:)`` opens).
    private func writePendingCommits(
        _ state: inout State, closingBatch: Bool, queueingNext: Bool = false, limit: Int = .max
    ) -> (written: [String], count: Int) {
        let next = state.batching.count + 1
        let pending = memo.withLock { memo -> [PendingCommit] in
            // The next batch's number: the one ``openBatchIfWanted(_:)`` gives it.
            if closingBatch { memo.openBatch = queueingNext ? next : nil }
            return memo.oldestPendingCommits(limit)
        }
        guard !pending.isEmpty else { return ([], 0) }
        var written = pending.map(\.entry)
        var evicted = 0
        var obsolete: [String] = []
        do throws(StorageError) {
            try openBatchIfWanted(&state)
            try state.connection.transaction { () throws(StorageError) in
                for index in pending.indices {
                    let (checksums, inline) = pending[index].body.resolved(sealed: sealing != nil)
                    let replaced = try writeRow(&written[index], checksums: checksums, inline: inline, state.connection)
                    if let replaced { obsolete.append(replaced) }
                }
                let eviction = try evict(state.connection)
                evicted = eviction.count
                obsolete += eviction.files
            }
        } catch {
            memo.withLock { memo in
                for commit in pending { memo.dropPendingCommit(commit.entry) }
            }
            for file in pending.compactMap(\.lockedFile) { close(file) }
            unlinkBodies(pending.filter { $0.body.inline == nil }.map(\.entry.id.rawValue))
            countWrite()
            configuration.log(
                "could not write \(pending.count) cached entries to the cache index (\(error)); they are not stored")
            return ([], 0)
        }
        let lockedFiles = pending.compactMap(\.lockedFile)
        if state.batching.open != nil {
            state.batching.lockedFiles += lockedFiles
            state.batching.obsoleteFiles += obsolete
            obsolete = []
        } else {
            for file in lockedFiles { close(file) }
        }
        memo.withLock { memo in
            for entry in written {
                memo.dropPendingCommit(entry)
                // Evicting changed other keys: everything is read again (below).
                guard evicted == 0 else { continue }
                countOwnWrite(&memo, primaryKey: entry.head.primaryKey) { $0.replaceVariant(with: entry, nil) }
            }
        }
        if evicted > 0 { countWrite() }
        return (obsolete, written.count)
    }

    /// What the index's `variant_key` column holds for `head`: its variant key, or in an
    /// encrypted store a keyed hash of its primary and variant keys.
    static func indexed(_ head: EntryHead, _ sealing: StoreSealing?) -> String {
        sealing?.lookupKey("v", head.primaryKey + "\0" + head.variantKey) ?? head.variantKey
    }

    /// Inserts the row of entry `id`, its inline body and its tags. In an encrypted store
    /// (``sealing``) the row keeps keyed hashes of its keys and tags, and its head sealed in
    /// `fields`; `inline` is then already sealed. With `inlineChecksums` (``DiskStore/inlineChecksums``),
    /// the inline body's row keeps its checksums too.
    static func insertRow(
        _ connection: SQLiteConnection, id: EntryID, head: EntryHead, size: Int64, checksums: [UInt8],
        inline: [UInt8]?, storedAt: Double, pinned: Bool, sealing: StoreSealing?, inlineChecksums: Bool
    ) throws(StorageError) {
        let insert = try connection.statement(
            """
            INSERT INTO entries (id, primary_key, variant_key, url, status, fields, facts, facts_version,
                body_size, checksums, in_file, stored_at, pinned, storage_policy, user_info, complete, tags)
            VALUES (:id, :primary_key, :variant_key, :url, :status, :fields, :facts, :facts_version,
                :body_size, :checksums, :in_file, :stored_at, :pinned, :storage_policy, :user_info,
                :complete, :tags)
            """)
        try insert.bind(id.rawValue, to: ":id")
        try insert.bind(Self.indexed(primaryKey: head.primaryKey, sealing), to: ":primary_key")
        try insert.bind(Self.indexed(head, sealing), to: ":variant_key")
        try insert.bind(Int64(head.facts.first ?? 0), to: ":facts_version")
        try insert.bind(size, to: ":body_size")
        try insert.bind(checksums, to: ":checksums")
        try insert.bind(inline == nil, to: ":in_file")
        try insert.bind(storedAt, to: ":stored_at")
        try insert.bind(pinned, to: ":pinned")
        if let sealing {
            try insert.bind("", to: ":url")
            try insert.bind(Int64(0), to: ":status")
            try insert.bind(sealing.seal(head, id: id), to: ":fields")
            try insert.bind([], to: ":facts")
            try insert.bind(Int64(0), to: ":storage_policy")
            try insert.bind(nil, to: ":user_info")
            try insert.bind(true, to: ":complete")
            try insert.bind(nil, to: ":tags")
        } else {
            try insert.bind(head.url, to: ":url")
            try insert.bind(Int64(head.status), to: ":status")
            try insert.bind(head.fields.serialized(), to: ":fields")
            try insert.bind(head.facts, to: ":facts")
            try insert.bind(Int64(head.storagePolicy.rawValue), to: ":storage_policy")
            try insert.bind(head.userInfo, to: ":user_info")
            try insert.bind(head.isComplete, to: ":complete")
            try insert.bind(head.tags.isEmpty ? nil : Self.serialized(tags: head.tags), to: ":tags")
        }
        try insert.run()
        if let inline {
            let body = try connection.statement(
                inlineChecksums
                    ? "INSERT INTO inline_bodies (id, body, checksums) VALUES (:id, :body, :checksums)"
                    : "INSERT INTO inline_bodies (id, body) VALUES (:id, :body)")
            try body.bind(id.rawValue, to: ":id")
            if inlineChecksums { try body.bind(checksums, to: ":checksums") }
            try body.run(binding: inline, to: ":body")
        }
        for tag in Set(head.tags) {
            let row = try connection.statement("INSERT OR IGNORE INTO tags (tag, id) VALUES (:tag, :id)")
            try row.bind(Self.indexed(tag: tag, sealing), to: ":tag")
            try row.bind(id.rawValue, to: ":id")
            try row.run()
        }
    }

    /// What the `tags` table holds for `tag`: itself, or in an encrypted store its keyed hash.
    static func indexed(tag: String, _ sealing: StoreSealing?) -> String { sealing?.lookupKey("t", tag) ?? tag }

    /// Deletes least recently used unpinned entries while the bodies exceed the capacity.
    /// Returns the body files to unlink once the transaction has committed, and how many
    /// entries went.
    func evict(_ connection: SQLiteConnection) throws(StorageError) -> (files: [String], count: Int) {
        var files: [String] = []
        var count = 0
        while try Self.bodyBytes(connection) > configuration.capacity {
            let oldest = try connection.statement(
                """
                SELECT entries.id AS id, in_file FROM access JOIN entries ON entries.id = access.id
                WHERE pinned = 0 ORDER BY last_access LIMIT 32
                """)
            let (id, inFile) = (try oldest.column("id"), try oldest.column("in_file"))
            var victims: [(id: String, inFile: Bool)] = []
            while try oldest.step() { victims.append((oldest.text(id), oldest.bool(inFile))) }
            if victims.isEmpty { break }  // only pinned entries are left
            for victim in victims {
                try removeRow(victim.id, connection)
                count += 1
                if victim.inFile { files.append(victim.id) }
                if try Self.bodyBytes(connection) <= configuration.capacity { break }
            }
        }
        return (files, count)
    }

    /// The bytes of all bodies, from the totals row the triggers maintain.
    static func bodyBytes(_ connection: SQLiteConnection) throws(StorageError) -> Int64 {
        let totals = try connection.statement("SELECT body_bytes FROM totals WHERE id = 0")
        let bodyBytes = try totals.column("body_bytes")
        defer { totals.reset() }
        return try totals.step() ? totals.int(bodyBytes) : 0
    }

    /// Deletes one row of this store's index through `connection` (the writing connection),
    /// marking an open batch as one the reading connections cannot answer for
    /// (``openBatchRemovedRows``). Its body file, if any, is the caller's to unlink after the
    /// commit.
    func removeRow(_ id: String, _ connection: SQLiteConnection) throws(StorageError) {
        openBatchRemovedRows.store(true, ordering: .sequentiallyConsistent)
        try Self.deleteRow(id, connection)
    }

    /// Deletes one row (its body file, if any, is the caller's to unlink after the commit).
    /// Through a connection of this store's own, ``removeRow(_:_:)``.
    static func deleteRow(_ id: String, _ connection: SQLiteConnection) throws(StorageError) {
        for sql in ["DELETE FROM entries WHERE id = :id", "DELETE FROM tags WHERE id = :id"] {
            let delete = try connection.statement(sql)
            try delete.bind(id, to: ":id")
            try delete.run()
        }
    }

    /// Tags as one column value: each followed by a NUL.
    static func serialized(tags: [String]) -> [UInt8] {
        tags.flatMap { Array($0.utf8) + [0] }
    }

    /// The tags of a column value ``serialized(tags:)`` wrote.
    static func tags(serialized bytes: [UInt8]?) -> [String] {
        guard let bytes, !bytes.isEmpty else { return [] }
        return bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Replaces a stored head's fields and facts (a `304` freshened them, RFC 9111 §4.3.4).
    ///
    /// With ``Configuration/writesBehind`` (a store in the clear) the update is written behind:
    /// it is queued and this store's reads see it at once (`HeadMemo.pendingUpdates`), and a
    /// background writer puts it in the index's open batch within ``Configuration/batchLatency``
    /// seconds (or at once after 64 updates), where other processes see it when the batch
    /// commits. The caller waits for no lock a commit holds. It never stores anything but
    /// `fields` and `facts` in a row that still exists when it is written: an entry removed or
    /// replaced meanwhile (a `PURGE`, a newer response) stays removed, and the update is
    /// dropped; so an identity that is not stored throws nothing here. A crash loses a queued
    /// update, as it loses the open batch. Otherwise (or inside ``beginBatchedWrites()``) it
    /// joins the open batch, if any, at once, and throws ``StorageError/Kind/notFound`` for an
    /// identity that is not stored.
    public func update(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) throws(StorageError) {
        guard configuration.isWrittenBehind, sealing == nil else {
            return try recoveringIndex { () throws(StorageError) in try updateNow(id, fields: fields, facts: facts) }
        }
        let due = memo.withLock { memo -> Double? in
            memo.updateCount += 1
            // Counted as an own write: the remembered variants stay current, the update laid over
            // them; a reader that keys what it derives on ``changeCount`` reads again, and one
            // that keys it on ``changeCount(of:)`` does for this entry's key (the update's count).
            countOwnWrite(&memo)
            memo.pendingUpdates[id] = PendingUpdate(
                fields: fields, facts: facts, number: memo.updateCount, counted: changes?.value ?? 0)
            if memo.pendingUpdates.count >= Self.batchLimit {
                guard !memo.updatesQueued || memo.pendingUpdates.count == Self.batchLimit else { return nil }
                memo.updatesQueued = true
                return 0
            }
            guard !memo.updatesQueued else { return nil }
            memo.updatesQueued = true
            return configuration.batchLatency
        }
        guard let due else { return }
        inBackground(after: due) { store in
            do {
                try store.writeHeadUpdates()
            } catch {
                store.configuration.log("could not write freshened heads to the cache index: \(error)")
            }
        }
    }

    /// Writes the queued head updates (``update(_:fields:facts:)`` written behind) into the
    /// open batch, in one transaction on the index's connection, and only then takes them out
    /// of the queue, as their rows' remembered variants take them in: a read sees each update
    /// throughout. An update whose entry is gone by now changes no row and is dropped. When the
    /// transaction fails they are dropped too (and reported): what the index holds is read again.
    func writeHeadUpdates() throws(StorageError) {
        unlinkBodies(try state.withLock { state throws(StorageError) in try writeHeadUpdates(&state) })
    }

    /// ``writeHeadUpdates()`` under ``state``'s lock; the queued commits are written first (an
    /// update of a queued entry needs its row). Returns the body files to unlink now.
    func writeHeadUpdates(_ state: inout State) throws(StorageError) -> [String] {
        let files = try writePendingCommits(&state)
        let pending = memo.withLock { memo in
            memo.updatesQueued = false
            return memo.pendingUpdates
        }
        guard !pending.isEmpty else { return files }
        var written: [(id: EntryID, primaryKey: String?, update: PendingUpdate)] = []
        do throws(StorageError) {
            try openBatchIfWanted(&state)
            try state.connection.transaction { () throws(StorageError) in
                for (id, update) in pending {
                    let primaryKey = try Self.updateRow(
                        id, fields: update.fields.serialized(), facts: update.facts, state.connection)
                    written.append((id, primaryKey, update))
                }
            }
        } catch {
            memo.withLock { memo in
                for (id, update) in pending where memo.pendingUpdates[id]?.number == update.number {
                    memo.pendingUpdates[id] = nil
                }
                // Under the lock: no read of a key's count sees the update gone and the count
                // where it was before it (``changeCount(of:)`` never goes back).
                countWrite(&memo)
            }
            throw error
        }
        memo.withLock { memo in
            for (id, primaryKey, update) in written {
                if memo.pendingUpdates[id]?.number == update.number { memo.pendingUpdates[id] = nil }
                guard let primaryKey else { continue }
                countOwnWrite(&memo, primaryKey: primaryKey) {
                    $0.freshen(id, fields: update.fields, facts: update.facts)
                }
            }
        }
        return try files + countBatchedWrite(&state, count: written.count)
    }

    /// Sets the fields and facts of row `id` (in the clear); returns its primary key, or `nil`
    /// when there is no such row.
    static func updateRow(
        _ id: EntryID, fields: [UInt8], facts: [UInt8], _ connection: SQLiteConnection
    ) throws(StorageError) -> String? {
        // The key is read first rather than by `RETURNING`: SQLite gathers what `RETURNING`
        // returns in a temporary table it opens and closes for each statement, which cost a
        // row's update more than the update did (45,000 instructions a row against 29,000 for
        // the `SELECT` and the `UPDATE`: callgrind, 2026-12-06).
        let find = try connection.statement("SELECT primary_key FROM entries WHERE id = :id")
        try find.bind(id.rawValue, to: ":id")
        defer { find.reset() }
        guard try find.step() else { return nil }
        let primaryKey = find.text(try find.column("primary_key"))
        let update = try connection.statement(
            "UPDATE entries SET fields = :fields, facts = :facts, facts_version = :facts_version WHERE id = :id")
        try update.bind(fields, to: ":fields")
        try update.bind(facts, to: ":facts")
        try update.bind(Int64(facts.first ?? 0), to: ":facts_version")
        try update.bind(id.rawValue, to: ":id")
        try update.run()
        return primaryKey
    }

    /// ``update(_:fields:facts:)`` in the index now (in the open batch, if any).
    private func updateNow(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) throws(StorageError) {
        let files = try state.withLock { state throws(StorageError) -> [String] in
            let written = try writePendingCommits(&state)
            // The key whose variants the update changed, once known: counted as an own write.
            var primaryKey: String?
            defer {
                if let primaryKey {
                    countOwnWrite(primaryKey: primaryKey) { $0.freshen(id, fields: fields, facts: facts) }
                } else {
                    countWrite()
                }
            }
            try openBatchIfWanted(&state)
            if let sealing {
                // The head is sealed whole: opened, changed and sealed again.
                let query = try state.connection.statement(
                    "SELECT \(Self.entryColumns) FROM \(Self.entrySource) WHERE entries.id = :id")
                let columns = try query.columns(EntryColumns.self)
                try query.bind(id.rawValue, to: ":id")
                defer { query.reset() }
                guard try query.step(), var head = entry(from: query, columns)?.head else {
                    throw MemoryStore.notFound(id)
                }
                head.fields = fields
                head.facts = facts
                let update = try state.connection.statement(
                    "UPDATE entries SET fields = :fields, facts_version = :facts_version WHERE id = :id")
                try update.bind(sealing.seal(head, id: id), to: ":fields")
                try update.bind(Int64(facts.first ?? 0), to: ":facts_version")
                try update.bind(id.rawValue, to: ":id")
                try update.run()
                guard state.connection.changes > 0 else { throw MemoryStore.notFound(id) }
                primaryKey = head.primaryKey
            } else {
                guard let key = try Self.updateRow(id, fields: fields.serialized(), facts: facts, state.connection)
                else { throw MemoryStore.notFound(id) }
                primaryKey = key
            }
            return try written + countBatchedWrite(&state)
        }
        unlinkBodies(files)
    }

    /// Buffers the access; the index gets it from a background flush, queued every 30 s or
    /// once 65,536 entries' accesses are gathered, so no hit waits for SQLite. ``entries()``,
    /// removals, ``flush()`` and releasing the store write what is buffered first.
    ///
    /// The access goes into a buffer of the calling thread's own (one of eight); the
    /// shared log's lock is taken once the buffer is full (64 accesses) or a flush is due.
    public func recordAccess(_ id: EntryID, at time: Double) {
        let full = accesses.add(AccessBuffers.Access(id: id, time: time))
        let lastFlush = Double(bitPattern: lastAccessFlush.load(ordering: .relaxed))
        let late = time - lastFlush >= Self.accessFlushInterval
        guard full != nil || late else { return }
        let due = accessLog.withLock { log -> Bool in
            if let full { log.add(full) }
            guard !log.flushQueued, late || log.pending.count >= Self.accessBatchLimit else { return false }
            log.flushQueued = true
            // The next hits need not take the lock to find the flush due: it is queued.
            lastAccessFlush.store(time.bitPattern, ordering: .relaxed)
            return true
        }
        guard due else { return }
        inBackground { store in
            store.reopenIndexIfItsFilesChanged()
            do {
                try store.flushAccess()
            } catch {
                store.configuration.log(
                    "could not record access times in the index: \(error); they are kept for the next try")
            }
        }
    }

    /// Writes buffered access times and hit counts in one transaction on the access writer's
    /// connection; when that fails they stay buffered for the next flush. Written behind
    /// (``Configuration/writesBehind``), they join the open batch instead, on the index's own
    /// connection, ``accessChunkRows`` at a time: the other connection would hold SQLite's write
    /// lock for the whole flush, and a write meanwhile (a proxy's event loop storing a response
    /// or freshening a head) would sleep in SQLite's busy handler until it ended, tens of
    /// milliseconds for a second of hits; a chunk keeps ``state`` for well under one. Never
    /// called inside a write transaction of ``state``'s connection (it would wait for itself).
    func flushAccess() throws(StorageError) {
        if configuration.isWrittenBehind {
            // Under the access writer's lock all the same: flushes one at a time, so that one
            // returns only once what an earlier one took is written too.
            try accessWriter.withLock { _ throws(StorageError) in
                // An entry still queued has no access row yet for its hits to go to.
                unlinkBodies(try state.withLock { state throws(StorageError) in try writePendingCommits(&state) })
                var rest = takePendingAccess()[...]
                while !rest.isEmpty {
                    let chunk = rest.prefix(Self.accessChunkRows)
                    try keepingPending(rest) { () throws(StorageError) in
                        try state.withLock { state throws(StorageError) in
                            try openBatchIfWanted(&state)
                            try state.connection.transaction { () throws(StorageError) in
                                try Self.writeAccess(chunk, state.connection)
                            }
                        }
                    }
                    rest = rest.dropFirst(chunk.count)
                }
                unlinkBodies(try state.withLock { state throws(StorageError) in try commitBatch(&state) })
            }
            return
        }
        // The open batch holds the index's write lock, which this connection waits for.
        unlinkBodies(try state.withLock { state throws(StorageError) in try commitBatch(&state) })
        try withAccessWriter { connection throws(StorageError) in
            let pending = takePendingAccess()
            guard !pending.isEmpty else { return }
            try keepingPending(pending[...]) { () throws(StorageError) in
                try connection.transaction { () throws(StorageError) in try Self.writeAccess(pending, connection) }
            }
        }
    }

    /// The buffered accesses, the threads' buffers' too, taken for a flush.
    private func takePendingAccess() -> [EntryID: (time: Double, hits: Int)] {
        let buffered = accesses.drain()
        return accessLog.withLock { log in
            lastAccessFlush.store(clock().bitPattern, ordering: .relaxed)
            log.flushQueued = false
            log.add(buffered)
            defer { log.pending = [:] }
            return log.pending
        }
    }

    /// Access rows a written-behind flush writes per hold of ``state``.
    static let accessChunkRows = 256

    /// Runs `write`; when it fails, `pending` is buffered again for the next flush.
    private func keepingPending(
        _ pending: Dictionary<EntryID, (time: Double, hits: Int)>.SubSequence,
        _ write: () throws(StorageError) -> Void
    ) throws(StorageError) {
        do {
            try write()
        } catch {
            accessLog.withLock { log in
                for (id, access) in pending { log.count(id, time: access.time, hits: access.hits) }
            }
            throw error
        }
    }

    /// Adds access times and hit counts to their rows. Not counted as a change: remembered
    /// variants keep their access time and hit count until the next real write (they decide
    /// nothing).
    static func writeAccess(
        _ pending: some Sequence<(key: EntryID, value: (time: Double, hits: Int))>, _ connection: SQLiteConnection
    ) throws(StorageError) {
        for (id, access) in pending {
            let statement = try connection.statement(
                """
                UPDATE access SET last_access = max(last_access, :last_access), hits = hits + :hits
                WHERE id = :id
                """)
            try statement.bind(access.time, to: ":last_access")
            try statement.bind(Int64(access.hits), to: ":hits")
            try statement.bind(id.rawValue, to: ":id")
            try statement.run()
        }
    }

    /// Runs `body` on the second connection (opened on first use), one caller at a time.
    func withAccessWriter(_ body: (SQLiteConnection) throws(StorageError) -> Void) throws(StorageError) {
        try accessWriter.withLock { writer throws(StorageError) in
            if writer == nil {
                let opened = try Self.openConnection(configuration)
                watchForDamage(opened)
                writer = opened
            }
            guard let connection = writer else { return }
            try body(connection)
        }
    }
}

extension [StoredEntry] {
    /// These variants of one key, with `entry` in place of the one of its variant key, in the
    /// index's order (``sortedAsIndexed(_:)``).
    mutating func replaceVariant(with entry: StoredEntry, _ sealing: StoreSealing?) {
        removeAll { $0.head.variantKey == entry.head.variantKey }
        append(entry)
        self = sortedAsIndexed(sealing)
    }

    /// These variants of one key in the order the index gives them: by the bytes of their
    /// `variant_key` column (``DiskStore/indexed(_:_:)``).
    func sortedAsIndexed(_ sealing: StoreSealing? = nil) -> [StoredEntry] {
        sorted {
            DiskStore.indexed($0.head, sealing).utf8.lexicographicallyPrecedes(DiskStore.indexed($1.head, sealing).utf8)
        }
    }

    /// Gives the entry `id`, if it is here, the fields and facts a `304` freshened
    /// (``DiskStore/update(_:fields:facts:)``).
    mutating func freshen(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) {
        for index in indices where self[index].id == id {
            self[index].head.fields = fields
            self[index].head.facts = facts
        }
    }
}
