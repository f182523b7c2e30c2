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

/// A store on disk: a SQLite index in WAL mode and body files, safe across threads and
/// processes, crash-safe, and verified on every read.
///
/// Layout of ``Configuration/directory`` (created 0700; files 0600):
/// - `index.sqlite`: one row per variant (keys, status, fields, facts and their format
///   version, sizes, block checksums, the time stored, storage policy, `userInfo`, pinned),
///   and in tables of their own: bodies up to ``Configuration/inlineBodyLimit`` bytes (inline
///   bodies), so that freshening a head (a `304`) reads and rewrites a few small pages, never
///   a body's; and each variant's last access and hit count, so that recording accesses
///   rewrites a few small pages, never the rows that hold heads and bodies.
/// - `index.sqlite-wal`, `index.sqlite-shm`: SQLite's WAL and its index, left in place when
///   the store closes, so that a short-lived process neither checkpoints nor creates them
///   again; releasing a store empties a WAL of more than 100 pages.
/// - `bodies/<id>`: larger bodies, named by their ``EntryID``, never by URL. A body is
///   written to `bodies/<id>.tmp` under an exclusive `flock`, renamed, and only then does
///   the index transaction that makes it visible commit. A crash leaves at most an
///   unreferenced file, which the sweep on the next open removes (off the caller's path).
///
/// Before anything in it is opened, the directory is checked as OpenSSH's `StrictModes` checks
/// `~/.ssh` (``prepareDirectory(_:)``): one another user could change, or whose files are
/// links, is refused with ``StorageError/Kind/unsafeDirectory``. Every file is then opened
/// without following links, and the sweep removes only regular files of `bodies/`.
///
/// Every body is checksummed with XXH64 per 64 KiB block; a block that does not match is
/// never handed out: the read throws ``StorageError/Kind/corrupted`` and the entry is
/// removed. An index that cannot be read or has another format version is moved aside
/// (`index.sqlite.unusable-<time>`) and a new one started, with the reason logged; so is one
/// a query finds damaged later, by the next operation, which then runs on the new index. An
/// index file deleted or replaced by another hand while the store runs (its `-wal` removed) is
/// noticed as the store writes and opened again.
///
/// ## Encryption at rest
///
/// With ``Configuration/encryptionKey`` every body is sealed in AES-256-GCM blocks of 64 KiB
/// (`BodySealing`: a random nonce and a tag per block, each block bound to its entry, its
/// index and whether it is the last), inline bodies too; a block that does not authenticate is
/// a miss and the entry is removed, as a checksum mismatch is. Each row keeps its head (keys,
/// URL, status, fields, facts, `userInfo`, tags) sealed, and HMAC-SHA-256 of its primary key,
/// variant key and tags as the columns lookups go by; a purge by URL prefix then opens every
/// head (a scan). The index's `meta` table keeps a check value of the key (an HMAC of a fixed
/// label), so another key, no key, or a key for a store made without one is refused with
/// ``StorageError/Kind/encryption``; ``rekey(_:to:)`` changes it. Not hidden: the number of
/// entries, body sizes, file names, access times and the index's page layout.
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
        /// The cache directory. In an open store's ``DiskStore/configuration``, the directory it
        /// resolved to when it was opened (``DiskStore/prepareDirectory(_:)``).
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
        /// Seconds a batch of writes (``DiskStore/beginBatchedWrites()``) stays open at most: a
        /// crash loses no more than that of its writes, and other processes wait no longer to
        /// write or to see them. 0.05 s by default.
        public var batchLatency = 0.05
        /// Whether every commit joins a batch (as inside ``DiskStore/beginBatchedWrites()``
        /// scopes), so that no writer waits for the index's commit: it is written behind, at
        /// most ``batchLatency`` seconds or 64 entries later. This process sees each entry at
        /// once, and a removal made meanwhile, in the same transaction, can never be undone by
        /// the commit; other processes see both when the batch commits, and their writes wait
        /// for it. A crash loses the open batch's entries (never a body under a wrong entry).
        /// In a store in the clear a commit does not even write its row: it is queued in the
        /// open batch (opening one when none is) and written when the batch commits, or before
        /// any other write to the index, so a removal made after the commit returned always
        /// removes it. A caching proxy's misses then do not wait for the disk, nor spend their
        /// event loop's time in SQLite. Off by default; ignored with ``Durability/powerLossSafe``.
        public var writesBehind = false
        /// How many commits may be queued behind, so that a background writer that falls behind
        /// holds no more (their heads, and their bodies up to ``inlineBodyLimit``): the commit
        /// that finds this many queued, or ``queuedBodyByteLimit`` bytes of bodies, writes a few
        /// of them before it is queued when no other thread holds the index; when one does, it
        /// is queued all the same up to four times these, and refused past them
        /// (``StorageError/Kind/busy``: not stored) rather than wait. 1,024: a caching proxy's
        /// 20,000 misses of 16 KB from 8 clients at once (some 4,500 a second on two cores)
        /// outran a background writer bounded at 256, and 4,000 to 5,200 of them were not
        /// stored (each a miss again later); at 1,024 none to 108, for at most 64 MiB of queued
        /// bodies (``queuedBodyByteLimit``) and their heads.
        var queuedCommitLimit = 1024
        /// The most bytes of bodies kept in the index (``inlineBodyLimit``) that commits queued
        /// behind may hold before the queue counts as full (``queuedCommitLimit``): 16 MiB, four
        /// times that when the index is busy.
        var queuedBodyByteLimit = 16 << 20
        /// Whether commits are written behind: ``writesBehind``, unless ``durability`` is
        /// ``Durability/powerLossSafe``, which ignores it.
        var isWrittenBehind: Bool { writesBehind && durability != .powerLossSafe }
        /// The most bytes of stored heads (variants read from the index) the store keeps in
        /// memory, for at most one key per KiB of it: a hit whose key is held reads no index.
        /// 16 MiB by default (some 10,000 keys of typical heads); a long-lived process serving
        /// more URLs than that from disk, such as a caching proxy, wants more.
        public var headMemoryBytes = 16 << 20
        /// The most connections of its own the store opens, on first need, to read where
        /// bodies are (``DiskStore/openBody(of:)``) without taking the lock that writes and the
        /// other reads share: threads that open bodies at once (a caching proxy's event loops
        /// on hits beyond its memory tier) then do not wait for each other. They see only what
        /// is committed: while a batch is open (``beginBatchedWrites()``, ``writesBehind``),
        /// bodies are found through the writing connection, which sees it. 0 by default: every
        /// read goes through the one connection, and a process that reads once opens no second
        /// one.
        public var readingConnections = 0
        /// Receives what the store reports (an index moved aside, orphans swept).
        public var log: @Sendable (String) -> Void
        /// The key bodies and the index are encrypted with, or `nil` for a store in the clear.
        /// A store keeps what it was made with: opening it with another key, without its key,
        /// or with a key when it was made without one throws ``StorageError/Kind/encryption``.
        /// See "Encryption at rest" in ``DiskStore``.
        public var encryptionKey: EncryptionKey?
        /// Whether opening the store sweeps its directory on a background thread (``sweep()``:
        /// body files an interrupted write left). On by default. A short-lived process that
        /// mostly reads, such as the command-line tool on a hit, turns it off and sweeps itself
        /// when it has written: the thread cost it more than its whole answer.
        public var sweepsWhenOpened = true

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

    /// The index format version, kept in `PRAGMA user_version`. Versions 1 (access times in
    /// the entries' rows), 2 (no tags), 3 (variant keys cut off at an absent field) and 4
    /// (inline bodies in the entries' rows) are migrated when opened.
    public static let formatVersion: Int32 = 5

    /// `$HTTPCACHE_DIR`, else the XDG cache directory (`$XDG_CACHE_HOME` or `~/.cache`) on
    /// Linux, the Caches directory on Apple platforms; with `httpcache` appended.
    public static func defaultDirectory() -> String {
        // Variable by variable: ProcessInfo's dictionary of the whole environment cost the
        // command-line tool 0.3 ms on every run.
        if let explicit = FileDescriptor.environment("HTTPCACHE_DIR"), !explicit.isEmpty { return explicit }
        #if canImport(Darwin)
        let caches =
            FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first?.path
            ?? NSTemporaryDirectory()
        return caches + "/httpcache"
        #else
        if let xdg = FileDescriptor.environment("XDG_CACHE_HOME"), xdg.hasPrefix("/") { return xdg + "/httpcache" }
        return NSHomeDirectory() + "/.cache/httpcache"
        #endif
    }

    /// The configuration.
    public let configuration: Configuration
    let bodiesDirectory: String
    /// The keys derived from ``Configuration/encryptionKey``, when the store is encrypted.
    let sealing: StoreSealing?
    /// Whether `inline_bodies` has its `checksums` column (``addInlineChecksums(_:)``).
    let inlineChecksums: Bool
    let clock: @Sendable () -> Double

    struct State {
        var connection: SQLiteConnection
        /// Entries committed in one transaction while ``beginBatchedWrites()`` scopes are open.
        var batching = Batching()
    }

    /// What the store remembers of the index, under a lock of its own (``memo``), so that a
    /// read of remembered variants and a head update written behind never wait for ``state``,
    /// which a batch's commit holds while SQLite writes the WAL (tens of milliseconds on a busy
    /// disk). Taken inside ``state``'s lock when both are needed, never the other way round.
    struct HeadMemo {
        /// Variants read from the index, with the change count they were read at.
        var heads: LRUCache<String, (changes: UInt64, entries: [StoredEntry])>
        /// Change counts this store's own writes moved the counter through, one after another,
        /// each applied to ``heads`` as it was made (``countOwnWrite(primaryKey:_:)``) or held
        /// in ``pendingUpdates``: variants read at any of them, with the pending updates laid
        /// over them, are what the index holds (or is about to) while the count is the last.
        var ownCounts: ClosedRange<UInt64>?
        /// Heads freshened by a `304` and not yet written to the index (``update(_:fields:facts:)``
        /// written behind), by entry: every read of this store lays them over what it read
        /// (``overlaid(_:)``) until ``writeHeadUpdates()`` has written them.
        var pendingUpdates: [EntryID: PendingUpdate] = [:]
        /// Updates queued so far: each pending update's number, so that the writer removes only
        /// the one it wrote, never a newer one for the same entry queued meanwhile.
        var updateCount = 0
        /// A background write of ``pendingUpdates`` is queued.
        var updatesQueued = false
        /// Entries committed and not yet written to the index (``DiskStore/commit(_:id:size:body:lockedFile:)``
        /// written behind), by identity: every read of this store finds them (``overlaid(_:primaryKey:)``,
        /// ``DiskStore/entry(_:)``, ``DiskStore/openBody(of:)``) until ``DiskStore/writePendingCommits(_:limit:)``
        /// has written them into the open batch. Kept apart from ``heads``, whose LRU may drop a key.
        var pendingCommits: [EntryID: PendingCommit] = [:]
        /// The identities in ``pendingCommits`` of each primary key, in the order they were queued.
        var pendingKeys: [String: [EntryID]] = [:]
        /// The bytes of bodies kept in the index that ``pendingCommits`` hold
        /// (``Configuration/queuedBodyByteLimit``).
        var pendingInlineBytes = 0
        /// The commits in ``pendingCommits`` queued with inline bytes and no checksums since the
        /// writer last made them (``DiskStore/checksumQueuedBodies()``), with those bytes: taken
        /// whole, without a lookup each under this lock, which every hit takes.
        var unsummedCommits: [(id: EntryID, bytes: [UInt8])] = []
        /// Entries a pending commit replaces (`PendingCommit/replaces`): gone for every read by
        /// identity (``DiskStore/entry(_:)``, ``DiskStore/openBody(of:)``) though their rows are
        /// in the index until the commit is written, as they are gone from ``overlaid(_:primaryKey:)``.
        var replacedIDs: Set<EntryID> = []
        /// Commits queued so far: each pending commit's number, the order they are written in.
        var commitCount = 0
        /// The open batch's number (``Batching/open``) while commits may be queued in it: from
        /// its opening until its commit takes the queue.
        var openBatch: Int?
        /// ``Batching/scopes``, read here by a commit that decides whether it may be written
        /// behind without taking ``state``'s lock.
        var batchScopes = 0
        /// The keys the index may hold: a lookup of one it does not is answered from here.
        var knownKeys = KnownKeys()

        /// `entries`, the variants of `primaryKey` the index holds, with the pending commits of
        /// that key laid over them (each replacing the variant of its key) and the pending
        /// updates of their identities applied.
        func overlaid(_ entries: [StoredEntry], primaryKey: String) -> [StoredEntry] {
            guard !pendingKeys.isEmpty, let queued = pendingKeys[primaryKey] else { return overlaid(entries) }
            var entries = entries
            for id in queued {
                guard let pending = pendingCommits[id] else { continue }
                entries.removeAll { $0.head.variantKey == pending.entry.head.variantKey }
                entries.append(pending.entry)
            }
            return overlaid(entries.sortedAsIndexed())
        }

        /// What the queue says of the entry `id`, for a read by identity: its commit is queued
        /// (which wins: its row is not written yet), a queued commit replaced it (gone, though its
        /// row is in the index until that commit is written), or nothing (the index says).
        func queued(_ id: EntryID) -> Queued {
            guard !pendingCommits.isEmpty else { return .none }
            if let commit = pendingCommits[id] { return .pending(commit) }
            return replacedIDs.contains(id) ? .replaced : .none
        }

        /// The first `limit` commits of ``pendingCommits`` in the order they were queued. Under
        /// a limit (a chunk of a few), the oldest are picked in one pass, not by sorting a queue
        /// of hundreds for each chunk.
        func oldestPendingCommits(_ limit: Int) -> [PendingCommit] {
            guard limit > 0 else { return [] }
            guard limit < pendingCommits.count else { return pendingCommits.values.sorted { $0.number < $1.number } }
            var oldest: [(number: Int, id: EntryID)] = []
            oldest.reserveCapacity(limit + 1)
            for (id, commit) in pendingCommits where oldest.count < limit || commit.number < oldest[limit - 1].number {
                let place = oldest.firstIndex { $0.number > commit.number } ?? oldest.count
                oldest.insert((commit.number, id), at: place)
                if oldest.count > limit { oldest.removeLast() }
            }
            return oldest.compactMap { pendingCommits[$0.id] }
        }

        /// Takes `entry`'s commit out of ``pendingCommits`` (written, or dropped).
        mutating func dropPendingCommit(_ entry: StoredEntry) {
            guard let dropped = pendingCommits.removeValue(forKey: entry.id) else { return }
            pendingInlineBytes -= dropped.body.inline?.count ?? 0
            if let replaced = dropped.replaces { replacedIDs.remove(replaced) }
            // One lookup of the key, not one for each step.
            guard let index = pendingKeys.index(forKey: entry.head.primaryKey) else { return }
            pendingKeys.values[index].removeAll { $0 == entry.id }
            if pendingKeys.values[index].isEmpty { pendingKeys.remove(at: index) }
        }

        /// `entries` with the pending updates of their identities applied.
        func overlaid(_ entries: [StoredEntry]) -> [StoredEntry] {
            guard !pendingUpdates.isEmpty else { return entries }
            var entries = entries
            for index in entries.indices {
                if let update = pendingUpdates[entries[index].id] {
                    entries[index].head.fields = update.fields
                    entries[index].head.facts = update.facts
                }
            }
            return entries
        }
    }

    /// A head update written behind (`HeadMemo.pendingUpdates`).
    struct PendingUpdate {
        var fields: HeaderFields
        var facts: [UInt8]
        /// Its place in the order updates were queued (`HeadMemo.updateCount`).
        var number: Int
        /// The change count it moved the counter to: its entry's key changed then
        /// (``DiskStore/changeCount(of:)``).
        var counted: UInt64
    }

    /// A committed body as its commit carries it to the index: in its file (`bodies/<id>`), with
    /// the block checksums made as it was written; or its bytes, to be kept in the index
    /// (``Configuration/inlineBodyLimit``), checksummed when its row is about to be written
    /// (``resolved(sealed:)``; not at all in an encrypted store, whose seal authenticates them).
    /// A commit written behind so checksums its body on the writer's thread, not on the thread
    /// that stored the response (a caching proxy's event loop, which a 16 KB body's checksum
    /// cost 15.8k instructions a miss), and before the writer takes the index's lock
    /// (``DiskStore/checksumQueuedBodies()``).
    enum CommittedBody {
        case file(checksums: [UInt8])
        /// Bytes kept in the index, with their checksums once made (`nil` until then).
        case inline([UInt8], checksums: [UInt8]?)

        /// The bytes kept in the index, if any.
        var inline: [UInt8]? {
            if case .inline(let bytes, _) = self { return bytes }
            return nil
        }

        /// What its row is written with: the body's checksums (made now for bytes kept in the
        /// index that have none yet, unless `sealed`) and the bytes kept in the index, if any.
        func resolved(sealed: Bool) -> (checksums: [UInt8], inline: [UInt8]?) {
            switch self {
            case .file(let checksums): (checksums, nil)
            case .inline(let bytes, let checksums): (sealed ? [] : checksums ?? BlockChecksums.of(bytes), bytes)
            }
        }
    }

    /// An entry committed and written behind (`HeadMemo.pendingCommits`): what its commit
    /// writes into the index, and the descriptor that holds its body file's lock until then.
    struct PendingCommit {
        var entry: StoredEntry
        var body: CommittedBody
        var lockedFile: Int32?
        /// The entry of the same primary and variant key it replaces, if any (`HeadMemo.replacedIDs`).
        var replaces: EntryID?
        /// Its place in the order commits were queued (`HeadMemo.commitCount`).
        var number: Int
    }

    /// What the write-behind queue says of one entry (`HeadMemo.queued(_:)`).
    enum Queued {
        case pending(PendingCommit)
        case replaced
        case none
    }

    /// Commits grouped into one index transaction (``beginBatchedWrites()``).
    struct Batching {
        /// Scopes open; commits are batched while there is one.
        var scopes = 0
        /// The open batch's number (each batch gets the next), or nil when none is open.
        var open: Int?
        /// Batches opened so far (the last one's number).
        var count = 0
        /// Entries written in the open batch.
        var writes = 0
        /// Locks on the body files of the batch's entries, held until it commits so that no
        /// sweep (of another process, which does not see the batch) takes them.
        var lockedFiles: [Int32] = []
        /// Body files of entries the batch replaced, unlinked once it has committed.
        var obsoleteFiles: [String] = []
    }

    /// The most entries in one batch.
    static let batchLimit = 64

    let state: Locked<State>
    let memo: Locked<HeadMemo>

    /// Access times and hit counts not yet in the index, by entry, gathered from ``accesses``;
    /// they are written in the background (``recordAccess(_:at:)``).
    struct AccessLog {
        var pending: [EntryID: (time: Double, hits: Int)] = [:]
        /// A background flush is queued and has not taken ``pending`` yet.
        var flushQueued = false

        /// Counts each of `recorded` to its entry: one more hit, the latest time.
        mutating func add(_ recorded: [AccessBuffers.Access]) {
            for access in recorded { count(access.id, time: access.time, hits: 1) }
        }

        /// Adds `hits` to `id`'s count and keeps the later of its time and `time`.
        mutating func count(_ id: EntryID, time: Double, hits: Int) {
            // One lookup for an entry already counted (the subscript with a default boxed its
            // closure: two allocations an access).
            if let index = pending.index(forKey: id) {
                pending.values[index].time = max(pending.values[index].time, time)
                pending.values[index].hits += hits
            } else {
                pending[id] = (time, hits)
            }
        }
    }

    /// Hits as recorded, in buffers of the recording threads' own: a full one is added to
    /// ``accessLog`` under its lock, so the event loops of a caching proxy do not take a lock
    /// they share on every hit.
    let accesses = AccessBuffers()
    let accessLog: Locked<AccessLog>
    /// When buffered accesses were last taken for a flush or one was queued (seconds since
    /// 1970, a `Double`'s bits): every hit reads it, without a lock, to tell whether one is due.
    let lastAccessFlush: Atomic<UInt64>
    /// The reading connections (``Configuration/readingConnections``): those idle, and how
    /// many are open. A reader takes one out for one query, so this lock is held for a pop or
    /// a push only, never while SQLite reads.
    let readers = Locked(ReaderPool())
    /// Bumped when a batch opens and again once it has committed (or rolled back): odd while one
    /// is open. The reading connections do not see an open batch, which may have replaced or
    /// removed the very entry asked for: while it is odd and the batch has removed a row
    /// (``openBatchRemovedRows``), bodies are found through the writing connection
    /// (``location(of:)``).
    let batchTransitions = AtomicCount()
    /// Whether the open batch has deleted a row (``removeRow(_:_:)``); cleared as a batch opens.
    /// A batch that has only added rows, freshened heads or written access times (an access
    /// flush opens one every 30 s) leaves each body the committed index names where it was, so
    /// the reading connections go on answering for the rows they find, and a hit's body read
    /// does not wait for the writing connection's lock behind the batch's writes.
    let openBatchRemovedRows = Atomic<Bool>(false)
    /// The connection that writes access times, opened on first use: its own, so that a flush
    /// never holds the lock the index's readers take. Its lock also makes flushes one at a time.
    let accessWriter = Locked<SQLiteConnection?>(nil)
    /// How many entries' accesses are gathered in ``accessLog`` before a flush is queued early.
    static let accessBatchLimit = 65_536
    /// Seconds between background flushes of access times. Every commit of another connection
    /// (this writer's included) makes the reading connection, at its next read, drop its page
    /// cache and unmap its whole mapping of the index (SQLite checks the WAL's header at the
    /// start of each read transaction), and each page a hit then touches faults in again. At one
    /// flush a second, a caching proxy serving 20,000 URLs of 16 KB spent 14% of its CPU on the
    /// flushes and the checkpoints they caused, and 4% more unmapping and faulting pages back in.
    /// Eviction goes by the index's access times, so a hot entry's may lag this much there.
    static let accessFlushInterval: Double = 30
    /// A checkpoint (copying the WAL into the index, with an `fdatasync`) is queued in the
    /// background once the WAL holds this many pages, SQLite's own threshold (written behind or
    /// inside scopes, it is made as a batch commits: ``checkpointBetweenBatches(_:)``).
    /// SQLite would otherwise run it inside the commit that crosses it, so one miss in a
    /// thousand would wait for it.
    static let checkpointPages: Int32 = 1000
    /// The WAL a store that writes behind (``Configuration/writesBehind``) keeps when a commit
    /// starts it over: cutting it back to nothing after every checkpoint freed megabytes of page
    /// cache inside that commit (17 ms for 1.6 MB measured on the 2-core machine), holding the
    /// index meanwhile, so a caching proxy's event loop waited for it; rewriting the file in
    /// place costs nothing of the kind. Releasing the store still empties it.
    static let writtenBehindWALBytes = 64 << 20
    /// Where the background checkpoint stands (``queueCheckpoint()``).
    let checkpoint = Locked(BackgroundCheckpoint.idle)

    /// A background checkpoint of the WAL (``queueCheckpoint()``).
    enum BackgroundCheckpoint {
        case idle
        /// Queued or running.
        case running
        /// Running, and the WAL passed ``checkpointPages`` again meanwhile: the commits made since
        /// it began may be beyond what it copies (a passive checkpoint copies the WAL as it was
        /// when it started), so it runs once more when done.
        case runAgain
    }
    /// The WAL has grown past ``checkpointPages`` while batches follow one another (written
    /// behind, or inside ``beginBatchedWrites()`` scopes): the writer checkpoints before it
    /// opens the next batch (``checkpointBetweenBatches(_:)``).
    let checkpointDue = Atomic<Bool>(false)
    /// ``beginBatchedWrites()`` scopes open (``State/batching``'s count), for the WAL hook, which
    /// runs inside a commit and so cannot take ``state``.
    let scopesOpen = Atomic<Int>(0)
    /// Releasing the store checkpoints a WAL longer than this and empties it. Closing a
    /// connection never does (``SQLiteConnection/leavesWriteAheadLogOnClose()``), but the first
    /// connection of a process reads the whole WAL to rebuild SQLite's index of it (`-shm`),
    /// forgetting what earlier checkpoints copied, so the WAL would only grow across short-lived
    /// processes such as the CLI, each paying for every page left there. Kept this short, that
    /// costs about a tenth of a millisecond, and the checkpoint's `fdatasync`s come once in some
    /// fifty runs of the CLI that record a hit (two pages each).
    static let releaseCheckpointPages = 100
    /// How long releasing the store waits for other processes' readers and writers before it
    /// leaves the WAL to the next release.
    static let releaseCheckpointWaitMilliseconds: Int32 = 200
    /// Counts index writes by every process; `nil` when it cannot be mapped (heads are then
    /// always read from the index).
    let changes: ChangeCounter?
    /// Held while the directory is swept (``sweep()``).
    let sweeping = Locked(0)
    /// Set when a connection found the index damaged (``noteDamage(_:)``): the next operation
    /// replaces it (``replaceDamagedIndexIfFound()``). One atomic load an operation.
    let damageFound = Atomic<Bool>(false)
    /// What SQLite said of the damage first found, for the log.
    let damage = Locked<String?>(nil)
    /// When the index may be opened again after an attempt failed (``MonotonicClock`` seconds,
    /// a `Double`'s bits; ``reopenRetryInterval``).
    let reopenRetryAfter = Atomic<UInt64>(0)
    /// The index's files as the index's connection opened them, to tell whether they were
    /// deleted or replaced since (``reopenIndexIfItsFilesChanged()``, ``replaceDamagedIndexIfFound()``):
    /// changed only under ``state``'s lock, read without it.
    let openedFiles: Locked<IndexFiles>
    /// Opens (creating) the store. An unusable index is moved aside and replaced, so this
    /// throws only when the directory itself cannot be used: it cannot be created or written,
    /// or another user could change it (``StorageError/Kind/unsafeDirectory``, see
    /// ``prepareDirectory(_:)``). Every file of the store is opened without following links.
    public init(
        _ configuration: Configuration = Configuration(),
        clock: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }
    ) throws(StorageError) {
        // From here on the directory as resolved and checked: a link the user named is not
        // followed again.
        var configuration = configuration
        configuration.directory = try Self.prepareDirectory(configuration.directory)
        try Self.prepareContents(of: configuration.directory)
        self.configuration = configuration
        self.clock = clock
        bodiesDirectory = configuration.directory + "/bodies"
        sealing = configuration.encryptionKey.map(StoreSealing.init)
        let (connection, openedFiles) = try Self.openIndex(configuration)
        inlineChecksums = Self.addInlineChecksums(connection)
        // A key's variants cost about 1.5 KB with typical heads: a key per KiB bounds the count
        // of small ones.
        let headBytes = max(1 << 20, configuration.headMemoryBytes)
        state = Locked(State(connection: connection))
        self.openedFiles = Locked(openedFiles)
        memo = Locked(HeadMemo(heads: LRUCache(capacity: headBytes >> 10, byteLimit: headBytes)))
        accessLog = Locked(AccessLog())
        lastAccessFlush = Atomic(clock().bitPattern)
        changes = ChangeCounter(path: configuration.directory + "/index.changes", log: configuration.log)
        changes?.bump()
        watchForDamage(connection)
        installWALHook(connection)
        // Weakly: a store released before its sweep starts is not kept for it (the next open sweeps).
        if configuration.sweepsWhenOpened {
            inBackground { $0.sweep() }
        }
    }

    /// Replaces SQLite's automatic checkpoint (itself a WAL hook) for the index's `connection`
    /// with this store's (``checkpointPages``).
    func installWALHook(_ connection: SQLiteConnection) {
        sqlite3_wal_hook(
            connection.handle,
            { context, _, _, pages in
                if let context, pages >= DiskStore.checkpointPages {
                    let store = Unmanaged<DiskStore>.fromOpaque(context).takeUnretainedValue()
                    if store.configuration.isWrittenBehind || store.scopesOpen.load(ordering: .relaxed) > 0 {
                        store.checkpointDue.store(true, ordering: .relaxed)
                    } else {
                        store.queueCheckpoint()
                    }
                }
                return SQLITE_OK
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Checkpoints the WAL on a background thread, through the access writer's connection (a
    /// passive checkpoint: readers and writers go on meanwhile).
    ///
    /// A commit that crosses the threshold while one runs has it run again when done: without
    /// that, the commits made during a checkpoint stayed in the WAL until later writes crossed
    /// the threshold once more (half of 6 MB of bodies, on a busy machine).
    func queueCheckpoint() {
        let starts = checkpoint.withLock { checkpoint -> Bool in
            guard case .idle = checkpoint else {
                checkpoint = .runAgain
                return false
            }
            checkpoint = .running
            return true
        }
        guard starts else { return }
        inBackground { store in
            repeat {
                do {
                    try store.withAccessWriter { connection throws(StorageError) in
                        try connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
                    }
                } catch {
                    store.configuration.log(
                        "could not checkpoint the cache index: \(error); it is tried again after more writes")
                }
            } while store.checkpoint.withLock { checkpoint -> Bool in
                guard case .runAgain = checkpoint else {
                    checkpoint = .idle
                    return false
                }
                checkpoint = .running
                return true
            }
        }
    }

    /// Runs `work` with this store on a background thread (utility QoS) `delay` seconds from
    /// now, unless the store is gone by then: the index written behind, checkpoints, access
    /// flushes, the sweep after open.
    func inBackground(after delay: Double = 0, _ work: @escaping @Sendable (DiskStore) -> Void) {
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + delay) { [weak self] in
            guard let self else { return }
            work(self)
        }
    }

    deinit {
        try? writeHeadUpdates()
        if let files = try? state.withLock({ state throws(StorageError) in try commitBatch(&state) }) {
            unlinkBodies(files)
        }
        // The hook refers to this store, which is going away.
        state.withLock { _ = sqlite3_wal_hook($0.connection.handle, nil, nil) }
        try? flushAccess()
        accessWriter.withLock { $0?.close() }
        readers.withLock { readers in
            for connection in readers.idle { connection.close() }
            readers.idle = []
        }
        state.withLock { state in
            if walPages(state.connection) > Self.releaseCheckpointPages {
                // Copies every frame, then cuts the WAL file to nothing: the next process has
                // nothing to read back. Busy (another process reading an older snapshot, or
                // writing), it gives up and the WAL stays as it is.
                sqlite3_busy_timeout(state.connection.handle, Self.releaseCheckpointWaitMilliseconds)
                do {
                    try state.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                } catch {
                    configuration.log("could not checkpoint the cache index: \(error); the next release tries again")
                }
            }
            state.connection.close()
        }
    }

    /// The pages the WAL file holds: its size less its 32-byte header, in frames of a page and a
    /// 24-byte header (SQLite's file format, §4.1). With `journal_size_limit` 0, the first commit
    /// after a checkpoint starts the file over, so its size follows what it holds (written
    /// behind, it may count pages already copied: the release then checkpoints for nothing).
    func walPages(_ connection: SQLiteConnection) -> Int {
        var status = stat()
        guard lstat(configuration.directory + "/index.sqlite-wal", &status) == 0,
            let pageSize = try? connection.statement("PRAGMA page_size"),
            let column = try? pageSize.column("page_size"), (try? pageSize.step()) == true
        else { return 0 }
        defer { pageSize.reset() }
        return max(0, Int(status.st_size) - 32) / (Int(pageSize.int(column)) + 24)
    }

    // MARK: - Opening

    static let schema = """
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
            pinned INTEGER NOT NULL DEFAULT 0,
            storage_policy INTEGER NOT NULL,
            user_info BLOB,
            complete INTEGER NOT NULL,
            tags BLOB,
            -- Large values last: reading a row's head never walks a body's overflow pages.
            checksums BLOB NOT NULL,
            UNIQUE (primary_key, variant_key)
        );
        \(inlineBodiesSchema)
        \(accessSchema)
        \(tagsSchema)
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
        \(removalTrigger)
        CREATE TRIGGER IF NOT EXISTS entries_pinned AFTER UPDATE OF pinned ON entries BEGIN
            UPDATE totals SET pinned_bytes = pinned_bytes + (NEW.pinned - OLD.pinned) * NEW.body_size WHERE id = 0;
        END;
        """

    /// The bodies kept in the index (``Configuration/inlineBodyLimit``), apart from the rows
    /// that hold heads: SQLite reads and writes a whole row to change one column, so a `304`
    /// that freshens a head would otherwise read the body's overflow pages and, when the head
    /// changes size, write them again. Rows go with their entry (``removalTrigger``). Each
    /// keeps its body's checksums too (a copy of the entry's), so that a hit reads the body in
    /// one lookup, not this table's and the entry's (``location(of:_:inlineFirst:)``); rows
    /// written before the column was added (``addInlineChecksums(_:)``) have none.
    static let inlineBodiesSchema = """
        CREATE TABLE IF NOT EXISTS inline_bodies (
            id TEXT PRIMARY KEY NOT NULL,
            body BLOB NOT NULL,
            checksums BLOB
        );
        """

    /// Adds `inline_bodies.checksums` to an index made before it (the same format version:
    /// an index with the column is read and written as before by a build without it, whose
    /// rows then have none). Whether the table has it (`false` when it could not be added: a
    /// read-only directory, or another process holding the index).
    static func addInlineChecksums(_ connection: SQLiteConnection) -> Bool {
        if (try? hasColumn("checksums", in: "inline_bodies", connection)) == true { return true }
        try? connection.execute("ALTER TABLE inline_bodies ADD COLUMN checksums BLOB")
        return (try? hasColumn("checksums", in: "inline_bodies", connection)) == true
    }

    /// Whether `table` has a column named `column`.
    static func hasColumn(_ column: String, in table: String, _ connection: SQLiteConnection) throws(StorageError)
        -> Bool
    {
        let columns = try connection.statement(
            "SELECT count(*) AS found FROM pragma_table_info('\(table)') WHERE name = '\(column)'")
        let found = try columns.column("found")
        defer { columns.reset() }
        return try columns.step() && columns.int(found) > 0
    }

    /// Each entry's last access and hit count: rows of a few dozen bytes, written in batches
    /// (``recordAccess(_:at:)``), in recency order for eviction.
    static let accessSchema = """
        CREATE TABLE IF NOT EXISTS access (
            id TEXT PRIMARY KEY NOT NULL,
            last_access REAL NOT NULL,
            hits INTEGER NOT NULL DEFAULT 0
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS access_by_recency ON access (last_access);
        """

    /// The entries carrying each tag (``EntryHead/tags``), so that removing a tag reads only
    /// its entries. Rows go with their entry (``deleteRow(_:_:)``).
    static let tagsSchema = """
        CREATE TABLE IF NOT EXISTS tags (
            tag TEXT NOT NULL,
            id TEXT NOT NULL,
            PRIMARY KEY (tag, id)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS tags_by_entry ON tags (id);
        """

    /// Version 2 had no tags: a column for an entry's own and the index table.
    static let migrationFromVersion2 = """
        ALTER TABLE entries ADD COLUMN tags BLOB;
        \(tagsSchema)
        PRAGMA user_version = 3;
        """

    static let removalTrigger = """
        CREATE TRIGGER IF NOT EXISTS entries_removed AFTER DELETE ON entries BEGIN
            UPDATE totals SET entries = entries - 1, body_bytes = body_bytes - OLD.body_size,
                pinned_bytes = pinned_bytes - OLD.pinned * OLD.body_size WHERE id = 0;
            DELETE FROM access WHERE id = OLD.id;
            DELETE FROM inline_bodies WHERE id = OLD.id;
        END;
        """

    /// Version 1 kept `last_access` and `hits` in `entries`: every recorded access rewrote a
    /// row holding a head and often a body. Moves them to `access`, in one transaction.
    static let migrationFromVersion1 = """
        \(accessSchema)
        INSERT OR IGNORE INTO access (id, last_access, hits) SELECT id, last_access, hits FROM entries;
        DROP INDEX IF EXISTS entries_by_recency;
        ALTER TABLE entries DROP COLUMN last_access;
        ALTER TABLE entries DROP COLUMN hits;
        DROP TRIGGER IF EXISTS entries_removed;
        \(removalTrigger)
        PRAGMA user_version = 2;
        """

    /// Version 3 wrote each variant key (``EntryHead/variantKey``) with U+0000 for an absent
    /// nominated field, where SQLite's text ended: an absent field and an empty one (and any
    /// values after an absent field) shared one key, so each variant replaced the other. Gives
    /// every row of a response with `Vary` its key again from its facts, keeping a part's
    /// offset suffix; a part whose suffix the cut key lost is dropped (its body file goes in
    /// the sweep after opening), and a row whose facts this build cannot read keeps its key.
    static func migrateFromVersion3(_ connection: SQLiteConnection) throws(StorageError) {
        let rows = try connection.statement("SELECT id, variant_key, facts, complete FROM entries")
        let (idColumn, variantKey) = (try rows.column("id"), try rows.column("variant_key"))
        let (factsColumn, complete) = (try rows.column("facts"), try rows.column("complete"))
        var keys: [(id: String, key: String)] = []
        var dropped: [String] = []
        while try rows.step() {
            guard let facts = rows.blob(factsColumn).flatMap({ StoredResponseFacts(serialized: $0) }),
                !facts.vary.fieldNames.isEmpty
            else { continue }
            let id = rows.text(idColumn)
            let old = rows.text(variantKey)
            if rows.bool(complete) {
                keys.append((id, facts.variantKey))
            } else if facts.varyValues.contains(nil) {
                dropped.append(id)
            } else {
                keys.append((id, facts.variantKey + (old.firstIndex(of: "\u{2}").map { old[$0...] } ?? "")))
            }
        }
        rows.reset()
        for id in dropped { try deleteRow(id, connection) }
        // Through keys of their own first, so no row's new key meets another's old one.
        for rekeyed in [keys.map { (id: $0.id, key: "\u{3}" + $0.id) }, keys] {
            for (id, key) in rekeyed {
                let update = try connection.statement("UPDATE entries SET variant_key = :variant_key WHERE id = :id")
                try update.bind(key, to: ":variant_key")
                try update.bind(id, to: ":id")
                try update.run()
            }
        }
        try connection.execute("PRAGMA user_version = 4")
    }

    /// Version 4 kept inline bodies in the entries' rows: moves them to `inline_bodies` and
    /// gives the removal trigger its new statement. An `entries` table without the column
    /// (nothing to move) is left as it is.
    static func migrateFromVersion4(_ connection: SQLiteConnection) throws(StorageError) {
        try connection.execute(inlineBodiesSchema)
        if try hasColumn("body", in: "entries", connection) {
            try connection.execute(
                """
                INSERT INTO inline_bodies (id, body) SELECT id, body FROM entries WHERE in_file = 0 AND body IS NOT NULL;
                ALTER TABLE entries DROP COLUMN body;
                """)
        }
        try connection.execute("DROP TRIGGER IF EXISTS entries_removed")
        try connection.execute(removalTrigger)
        try connection.execute("PRAGMA user_version = 5")
    }

    /// Opens the index, creating it when new, and says which file it opened. Opening is
    /// serialized across processes (and store instances) by an exclusive `flock` on
    /// `index.lock`, so two first opens never both create the schema or switch it to WAL at
    /// once, and one never sees the other's half-made index as unusable.
    ///
    /// `replacing`: the index file a connection found damaged, moved aside first ``because``
    /// (unless it is no longer at the store's path: another process has replaced it already,
    /// and the index found there is opened).
    static func openIndex(
        _ configuration: Configuration, replacing damaged: FileIdentity? = nil, because reason: String = ""
    ) throws(StorageError) -> (connection: SQLiteConnection, files: IndexFiles) {
        let path = configuration.directory + "/index.sqlite"
        let lockPath = configuration.directory + "/index.lock"
        // In a read-only directory nobody can create the index, so opening unlocked is safe.
        var lock = open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if lock < 0 { lock = open(lockPath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        defer { if lock >= 0 { close(lock) } }
        while lock >= 0 && flock(lock, LOCK_EX) != 0 && errno == EINTR {}
        if let damaged {
            if FileIdentity.of(path) == damaged {
                moveAside(path, reason, configuration)
            } else {
                configuration.log(
                    "the cache index \(path) was found damaged (\(reason)), and another process has replaced it "
                        + "already; reading the new one")
            }
        }
        do {
            let connection = try prepare(path, configuration)
            return (connection, IndexFiles.at(configuration.directory))
        } catch {
            // A read-only directory, a full disk or a lock held too long says nothing about
            // the index: keep it.
            // Nor does a key that does not fit it.
            if [.writeFailed, .busy, .encryption].contains(error.kind) { throw error }
            moveAside(path, error.message, configuration)
            let connection = try prepare(path, configuration)
            return (connection, IndexFiles.at(configuration.directory))
        }
    }

    /// Moves the index at `path` and its WAL aside (`index.sqlite.unusable-<time>`), saying why:
    /// the next open starts an empty one.
    private static func moveAside(_ path: String, _ reason: String, _ configuration: Configuration) {
        let aside = path + ".unusable-\(Int(Date().timeIntervalSince1970))"
        configuration.log(
            "the cache index \(path) cannot be used (\(reason)); moved it to \(aside) and started an empty cache")
        for suffix in ["", "-wal", "-shm"] {
            if rename(path + suffix, aside + suffix) != 0 && errno != ENOENT {
                unlink(path + suffix)
            }
        }
    }

    static func prepare(_ path: String, _ configuration: Configuration) throws(StorageError)
        -> SQLiteConnection
    {
        try checkIndexFile(path)
        let connection = try SQLiteConnection(path: path, creating: true)
        FileIO.restrictMode(path, 0o600)
        try applyConnectionSettings(connection, configuration)
        try connection.execute("PRAGMA journal_mode = WAL")
        // Reads through memory-mapped pages and a larger page cache: a hit is then a few
        // memory copies, not several pread calls.
        try connection.execute("PRAGMA mmap_size = 268435456")
        try connection.execute("PRAGMA cache_size = -16384")
        // The journal of each commit's savepoint in an open batch, in memory: past 64 KiB SQLite
        // spilled it to a temporary file, nine pwrite calls a miss on the proxy's event loop.
        try connection.execute("PRAGMA temp_store = MEMORY")
        let versionQuery = try connection.statement("PRAGMA user_version")
        let userVersion = try versionQuery.column("user_version")
        guard try versionQuery.step() else { throw StorageError(.index, "no user_version") }
        let version = Int32(versionQuery.int(userVersion))
        let tables = try connection.statement("SELECT count(*) AS tables FROM sqlite_master")
        let tableCount = try tables.column("tables")
        guard try tables.step() else { throw StorageError(.index, "no schema") }
        let isNew = version == 0 && tables.int(tableCount) == 0
        tables.reset()
        if isNew {
            try connection.transaction { () throws(StorageError) in
                try connection.execute(schema)
                try connection.execute("PRAGMA user_version = \(formatVersion)")
                if let key = configuration.encryptionKey { try setMeta("key_check", key.checkValue, connection) }
            }
        } else if (1...4).contains(version) {
            try connection.transaction { () throws(StorageError) in
                if version == 1 { try connection.execute(migrationFromVersion1) }
                if version <= 2 { try connection.execute(migrationFromVersion2) }
                if version <= 3 { try migrateFromVersion3(connection) }
                try migrateFromVersion4(connection)
            }
        } else if version != formatVersion {
            throw StorageError(.index, "index format version \(version), this build reads \(formatVersion)")
        }
        // Reading the totals row proves the schema is usable.
        let totals = try connection.statement("SELECT entries FROM totals WHERE id = 0")
        guard try totals.step() else { throw StorageError(.index, "the totals row is missing") }
        totals.reset()
        try checkKey(configuration, connection)
        for file in ["-wal", "-shm"] { FileIO.restrictMode(path + file, 0o600) }
        return connection
    }

    /// Checks what SQLite may not read when it opens the index: the index file's own header
    /// and size. The WAL outlives every process (``SQLiteConnection/leavesWriteAheadLogOnClose()``)
    /// and usually holds the latest copy of the header page, so an index file overwritten or
    /// cut short would otherwise open and fail only later, query by query. A missing or empty
    /// file is a new index; one that cannot be opened is left to SQLite to report.
    static func checkIndexFile(_ path: String) throws(StorageError) {
        guard let (fd, size) = FileIO.openRegular(path) else { return }
        defer { close(fd) }
        guard size > 0 else { return }
        let header = size >= 100 ? try FileIO.read(fd, count: 100, at: 0, path: path) : []
        guard header.starts(with: Array("SQLite format 3\0".utf8)) else {
            throw StorageError(.index, "it is not a SQLite database (its header is not SQLite's)")
        }
        // The page size, big-endian at offset 16; 1 stands for 65,536 (SQLite's file format, §1.3.2).
        let field = Int(header[16]) << 8 | Int(header[17])
        let pageSize = field == 1 ? 65_536 : field
        guard pageSize >= 512, Int(size) % pageSize == 0 else {
            throw StorageError(
                .index, "its \(size) bytes are not a whole number of its \(pageSize)-byte pages")
        }
    }

    /// A connection to the index ``openIndex(_:replacing:because:)`` prepared that only reads
    /// (``Configuration/readingConnections``), with a page cache of its own of 4 MiB and no
    /// memory map: each mapping counts the index pages it touches in the process's resident
    /// size again (four readers mapping 1 GiB took a proxy's peak RSS on 20,000 URLs from 383 to
    /// 1,054 MiB, for no CPU a request that could be told from the noise).
    static func openReader(_ configuration: Configuration) throws(StorageError) -> SQLiteConnection {
        let connection = try openConnection(configuration)
        try connection.execute("PRAGMA query_only = 1")
        try connection.execute("PRAGMA mmap_size = 0")
        try connection.execute("PRAGMA cache_size = -4096")
        return connection
    }

    /// Another connection to the index ``openIndex(_:replacing:because:)`` prepared, with every connection's
    /// settings: the access-time writer's, the readers' (``openReader(_:)``), a re-key's.
    static func openConnection(_ configuration: Configuration) throws(StorageError) -> SQLiteConnection {
        let connection = try SQLiteConnection(path: configuration.directory + "/index.sqlite", creating: false)
        try applyConnectionSettings(connection, configuration)
        return connection
    }

    /// What every connection to the index sets for itself: how long it waits for another
    /// writer, whether a commit waits for the disk (``Configuration/durability``), that
    /// closing it leaves the WAL in place, and that the WAL file is cut back to what the first
    /// commit after a checkpoint writes; written behind, only to ``writtenBehindWALBytes``.
    private static func applyConnectionSettings(
        _ connection: SQLiteConnection, _ configuration: Configuration
    ) throws(StorageError) {
        sqlite3_busy_timeout(connection.handle, configuration.busyTimeoutMilliseconds)
        try connection.leavesWriteAheadLogOnClose()
        try connection.execute(
            "PRAGMA journal_size_limit = \(configuration.isWrittenBehind ? writtenBehindWALBytes : 0)")
        try connection.execute("PRAGMA synchronous = \(configuration.durability == .powerLossSafe ? "FULL" : "NORMAL")")
    }
}
