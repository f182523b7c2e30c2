import CacheSemantics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where an entry may live (the `URLCache.StoragePolicy` choices that store something).
public enum StoragePolicy: UInt8, Hashable, Sendable, CustomStringConvertible {
    /// In memory and on disk.
    case allowed = 0
    /// In memory only; a tiered store never writes it to disk.
    case memoryOnly = 1

    public var description: String { self == .allowed ? "allowed" : "memory-only" }
}

/// An entry's identity: unique, never derived from its URL, the same in every tier. Body
/// files on disk are named after it.
///
/// A new identity begins with the time it was made, in milliseconds, and ends with 80 random
/// bits (as a UUIDv7 does): identities made one after another sort together, so the index's
/// trees keyed by identity take new entries on their last pages and lose evicted ones (the
/// oldest) from their first, instead of rewriting a page anywhere in a large index for each.
public struct EntryID: Hashable, Sendable, CustomStringConvertible {
    // 128 bits, kept as numbers so that hashing and comparing an identity is cheap.
    private let high: UInt64
    private let low: UInt64

    private init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// An identifier from its text; `nil` unless it is 32 lower-case hex digits.
    public init?(rawValue: String) {
        let digits = Array(rawValue.utf8)
        guard digits.count == 32 else { return nil }
        var values: [UInt64] = [0, 0]
        for (index, digit) in digits.enumerated() {
            let nibble: UInt8
            switch digit {
            case 0x30...0x39: nibble = digit - 0x30
            case 0x61...0x66: nibble = digit - 0x61 + 10
            default: return nil
            }
            values[index / 16] = values[index / 16] << 4 | UInt64(nibble)
        }
        self.init(high: values[0], low: values[1])
    }

    /// A new identity: 48 bits of the time in milliseconds since 1970, then 80 random bits.
    public init() {
        let (first, second) = EntryIDRandomness.next()
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let milliseconds = UInt64(max(0, now.tv_sec)) &* 1000 &+ UInt64(max(0, now.tv_nsec) / 1_000_000)
        self.init(high: milliseconds << 16 | first & 0xFFFF, low: second)
    }

    /// 32 lower-case hex digits: the body file's name on disk.
    public var rawValue: String {
        // 32 lowercase hex digits, written straight into the string's storage (this is read on
        // every disk hit: String(_:radix:) and padding cost several times as much).
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 32) { buffer in
            digits.withUTF8Buffer { digits in
                for index in 0..<32 {
                    let word = index < 16 ? high : low
                    let shift = UInt64(60 - 4 * (index % 16))
                    buffer[index] = digits[Int((word >> shift) & 0xF)]
                }
            }
            return 32
        }
    }

    /// The identity's 128 bits, big-endian: what binds a block sealed at rest to its entry.
    package var bytes: [UInt8] {
        (0..<16).map { index in UInt8(truncatingIfNeeded: (index < 8 ? high : low) >> UInt64(56 - 8 * (index % 8))) }
    }

    public var description: String { rawValue }
}

/// What is stored about a response besides its body.
public struct EntryHead: Hashable, Sendable {
    /// The stored values, kept in one box shared by copies (``box``).
    struct Values: Hashable, Sendable {
        var primaryKey: String
        var variantKey: String
        var url: String
        var status: Int
        var fields: HeaderFields
        var facts: [UInt8]
        var storagePolicy: StoragePolicy
        var userInfo: [UInt8]?
        var isComplete: Bool
        var tags: [String]
    }

    /// A head is copied at every step of an exchange (with its entry: the store's read, the
    /// candidates, the memos, the answer, the update a `304` makes): one box, copied on write,
    /// makes each copy one retain and its end one release instead of one per string and array
    /// it holds (six), and a revalidation copied entries 28 times. Mutated only while uniquely
    /// referenced, so never shared while it changes, nor checked for exclusive access at run
    /// time. Written out as `StoredResponseFacts` writes its own: one generic box type for both
    /// cost a revalidation 4k instructions and 33 retains more (its accessors, nested in these,
    /// were not all inlined across modules).
    private final class Box: @unchecked Sendable {
        @exclusivity(unchecked) var values: Values
        init(_ values: Values) { self.values = values }
    }

    private var box: Box

    private var values: Values {
        _read { yield box.values }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.values) }
            yield &box.values
        }
    }

    /// The bytes of the box the values are kept in (for memory accounting).
    package static let boxBytes = 16 + MemoryLayout<Values>.stride

    /// The cache key all variants of a resource share (`CacheKey.primaryKey`).
    public var primaryKey: String {
        get { values.primaryKey }
        set { values.primaryKey = newValue }
    }
    /// Tells variants of one primary key apart (for example the normalized values of the
    /// fields `Vary` nominates); an entry replaces the stored one with the same pair.
    public var variantKey: String {
        get { values.variantKey }
        set { values.variantKey = newValue }
    }
    /// The URL, for listing and purging by prefix.
    public var url: String {
        get { values.url }
        set { values.url = newValue }
    }
    /// The response status code.
    public var status: Int {
        get { values.status }
        set { values.status = newValue }
    }
    /// The stored response fields.
    public var fields: HeaderFields {
        get { values.fields }
        _modify { yield &values.fields }
    }
    /// The serialized `StoredResponseFacts` (its first byte is the format version).
    public var facts: [UInt8] {
        get { values.facts }
        _modify { yield &values.facts }
    }
    /// Where the entry may live.
    public var storagePolicy: StoragePolicy {
        get { values.storagePolicy }
        set { values.storagePolicy = newValue }
    }
    /// Bytes the application keeps with the entry, returned on hits.
    public var userInfo: [UInt8]? {
        get { values.userInfo }
        _modify { yield &values.userInfo }
    }
    /// `false` for a response whose body was not received in full (RFC 9111 §3.3).
    public var isComplete: Bool {
        get { values.isComplete }
        set { values.isComplete = newValue }
    }
    /// Index keys the entry is found by besides its key, such as the cache groups it belongs
    /// to (RFC 9875): ``CacheStore/remove(tag:)`` removes every entry that carries one,
    /// without reading the others.
    public var tags: [String] {
        get { values.tags }
        _modify { yield &values.tags }
    }

    /// Creates a head.
    public init(
        primaryKey: String, variantKey: String = "", url: String, status: Int, fields: HeaderFields, facts: [UInt8],
        storagePolicy: StoragePolicy = .allowed, userInfo: [UInt8]? = nil, isComplete: Bool = true,
        tags: [String] = []
    ) {
        box = Box(
            Values(
                primaryKey: primaryKey, variantKey: variantKey, url: url, status: status, fields: fields,
                facts: facts, storagePolicy: storagePolicy, userInfo: userInfo, isComplete: isComplete, tags: tags))
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.box === rhs.box || lhs.values == rhs.values }

    public func hash(into hasher: inout Hasher) { values.hash(into: &hasher) }
}

extension EntryHead: CustomReflectable {
    /// The values, not the box they are kept in: what `print` and `dump` show.
    public var customMirror: Mirror {
        Mirror(self, children: Mirror(reflecting: values).children, displayStyle: .struct)
    }
}

/// A stored entry: its head and what the store knows about it.
public struct StoredEntry: Hashable, Sendable {
    /// The entry's identity.
    public var id: EntryID
    /// The response head.
    public var head: EntryHead
    /// The body's length in bytes.
    public var bodySize: Int64
    /// When it was stored, in seconds since 1970.
    public var storedAt: Double
    /// When it was last read, in seconds since 1970.
    public var lastAccess: Double
    /// How many times it was read.
    public var hits: Int
    /// Pinned entries are never evicted.
    public var isPinned: Bool

    /// Creates an entry record.
    public init(
        id: EntryID, head: EntryHead, bodySize: Int64, storedAt: Double, lastAccess: Double, hits: Int = 0,
        isPinned: Bool = false
    ) {
        self.id = id
        self.head = head
        self.bodySize = bodySize
        self.storedAt = storedAt
        self.lastAccess = lastAccess
        self.hits = hits
        self.isPinned = isPinned
    }
}

/// Entry counts and sizes of a store.
public struct StoreTotals: Hashable, Sendable {
    /// Number of entries.
    public var entries: Int
    /// Bytes of bodies.
    public var bodyBytes: Int64
    /// Bytes of bodies of pinned entries.
    public var pinnedBytes: Int64

    /// Creates totals.
    public init(entries: Int = 0, bodyBytes: Int64 = 0, pinnedBytes: Int64 = 0) {
        self.entries = entries
        self.bodyBytes = bodyBytes
        self.pinnedBytes = pinnedBytes
    }

    /// Counts `entry` in.
    package mutating func add(_ entry: StoredEntry) {
        entries += 1
        bodyBytes += entry.bodySize
        if entry.isPinned { pinnedBytes += entry.bodySize }
    }

    /// Counts `entry` out.
    package mutating func subtract(_ entry: StoredEntry) {
        entries -= 1
        bodyBytes -= entry.bodySize
        if entry.isPinned { pinnedBytes -= entry.bodySize }
    }
}

/// Why a store operation failed. New cases may be added: match with `default`.
public struct StorageError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public enum Kind: Hashable, Sendable {
        /// A body's bytes do not match their checksum; the entry was removed.
        case corrupted
        /// No entry with that identity (it was removed or evicted meanwhile).
        case notFound
        /// The entry is larger than the store's maximum entry size.
        case tooLarge
        /// The store cannot write: a read-only directory, a full disk, a file size limit.
        case writeFailed
        /// The store cannot read: a missing or unreadable file, or an I/O error.
        case readFailed
        /// The index could not be opened or used.
        case index
        /// Another process held the index locked for longer than the busy timeout; or, with
        /// commits written behind, the store's writer was so far behind, and busy, that the
        /// commit was refused rather than have its caller wait (`DiskStore.Configuration.writesBehind`).
        case busy
        /// The writer was already committed or aborted.
        case writerClosed
        /// The cache directory, a directory it lies in or a file in it could be changed by
        /// another user (its owner or mode, or a symbolic link in place of a file); the message
        /// says which and how to fix it (``DiskStore/prepareDirectory(_:)``).
        case unsafeDirectory
        /// The store is encrypted and no key or another key was given, a key was given for a
        /// store made without one, or a key file cannot be used; the message says which and
        /// what to do (``EncryptionKey``).
        case encryption
    }

    /// The kind of failure.
    public var kind: Kind
    /// What happened and what to do, for logs.
    public var message: String

    /// Creates an error.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// Writes one entry whose body arrives in chunks. ``commit()`` makes it visible atomically;
/// ``abort()`` (or dropping the writer) leaves nothing behind.
public protocol EntryWriter: AnyObject {
    /// Appends bytes to the body.
    func append(_ chunk: [UInt8]) throws(StorageError)
    /// Stores the entry, replacing one with the same primary and variant key. The new entry
    /// is pinned when the one it replaces was: a pin belongs to the response a URL (and
    /// variant) has, whichever version that is, so a new `200` does not undo it.
    @discardableResult
    func commit() throws(StorageError) -> StoredEntry
    /// Stores what was written so far as an incomplete response (RFC 9111 §3.3): the head's
    /// `isComplete` becomes `false` and its facts `facts` (which should say so too).
    @discardableResult
    func commitIncomplete(facts: [UInt8]) throws(StorageError) -> StoredEntry
    /// Discards everything written.
    func abort()
    /// Whether ``commit()`` may still be refused once the body is whole, for reasons the writer
    /// cannot know when it opens: a store on a server (Redis) takes or refuses the entry only
    /// at the commit. A cache that sends a response's head before its body is committed says
    /// it was stored (RFC 9211 §2.5, `Cache-Status: stored`) only when this is `false`, and says
    /// nothing either way otherwise.
    var commitMayBeRefused: Bool { get }
}

extension EntryWriter {
    /// `false`: a writer of a local store, once open, stores what is committed unless the
    /// memory or the disk fails.
    public var commitMayBeRefused: Bool { false }
}

/// A place where cached responses live. Safe to use from many threads.
///
/// Stores know nothing about HTTP rules: they keep heads, facts and bodies, evict by
/// recency and size, and report every failure as a ``StorageError``.
public protocol CacheStore: AnyObject, Sendable {
    /// A number that changes after every change to what ``variants(of:)`` returns, for any
    /// key and by any process sharing the store (a new, replaced, updated or removed entry; not
    /// a recorded access); `nil` when the store cannot tell. While it stays the same, what was
    /// derived from ``variants(of:)`` is still valid.
    var changeCount: UInt64? { get }
    /// A number that changes after every change to what ``variants(of:)`` returns for
    /// `primaryKey`, and never goes back to a value it had. While it stays the same, what was
    /// derived from that key's variants is still valid, though the store's ``changeCount``
    /// moved for other keys. `nil` (the default) when the store cannot tell keys apart: only
    /// ``changeCount`` then says what is still valid.
    func changeCount(of primaryKey: String) -> UInt64?
    /// Every stored variant of `primaryKey`.
    func variants(of primaryKey: String) throws(StorageError) -> [StoredEntry]
    /// Whether the store surely holds no variant of `primaryKey`, known without reading it or
    /// remembering the answer (an index's set of known keys): a probe for a key that is seldom
    /// stored. `false` (the default) when it may hold one or cannot tell cheaply; then
    /// ``variants(of:)`` says.
    func holdsNone(_ primaryKey: String) -> Bool
    /// Opens the body of `id` for reading. What is read from it is this version of the body
    /// even when the entry is replaced or removed meanwhile, so a response being served is
    /// served whole. Throws ``StorageError/Kind/notFound`` when the entry is gone already.
    func openBody(of id: EntryID) throws(StorageError) -> any StoredBody
    /// Opens the body of `entry`, a variant just read, like ``openBody(of:)``; a store may use
    /// what the entry says instead of reading it again (a tiered store promotes a disk body
    /// to memory with it).
    func openBody(for entry: StoredEntry) throws(StorageError) -> any StoredBody
    /// Starts writing an entry.
    func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter
    /// Replaces an entry's fields and facts without rewriting its body (a 304 freshening).
    func update(_ id: EntryID, fields: HeaderFields, facts: [UInt8]) throws(StorageError)
    /// Records a read: the entry becomes most recently used.
    func recordAccess(_ id: EntryID, at time: Double)
    /// Removes one entry.
    func remove(_ id: EntryID) throws(StorageError)
    /// Removes every variant of `primaryKey`; returns how many.
    @discardableResult
    func remove(primaryKey: String) throws(StorageError) -> Int
    /// Removes every entry whose URL starts with `prefix`; returns how many.
    @discardableResult
    func remove(urlPrefix prefix: String) throws(StorageError) -> Int
    /// Removes every entry whose head carries `tag` (``EntryHead/tags``); returns how many.
    @discardableResult
    func remove(tag: String) throws(StorageError) -> Int
    /// Removes every entry whose primary key starts with `prefix` (every response of an origin,
    /// or of a cache partition, whose keys share a prefix); returns how many.
    @discardableResult
    func remove(primaryKeyPrefix prefix: String) throws(StorageError) -> Int
    /// Removes every entry.
    func removeAll() throws(StorageError)
    /// Every entry, most recently used first.
    func entries() throws(StorageError) -> [StoredEntry]
    /// Counts and sizes.
    func totals() -> StoreTotals
    /// Pins or unpins every variant of `primaryKey`; returns how many entries changed. An
    /// entry that later replaces a pinned variant is pinned too (``EntryWriter/commit()``).
    @discardableResult
    func setPinned(_ pinned: Bool, primaryKey: String) throws(StorageError) -> Int
    /// Groups the writes that follow into fewer, larger transactions until as many
    /// ``endBatchedWrites()`` calls (``DiskStore/beginBatchedWrites()``), for a caller about to
    /// store many entries (a page save). Stores that gain nothing from it ignore it.
    func beginBatchedWrites()
    /// Ends a scope of ``beginBatchedWrites()``; the last one makes the writes durable.
    /// - Throws: ``StorageError`` when they cannot be: they are not stored.
    func endBatchedWrites() throws(StorageError)
    /// A channel on which one event loop asks for lookups without waiting for them
    /// (``LookupChannel``); `nil` (the default) when ``variants(of:)`` never waits for a
    /// server, or the store has no such channel: lookups are then made where they are needed.
    func makeLookupChannel() -> (any LookupChannel)?
}

extension CacheStore {
    public func changeCount(of primaryKey: String) -> UInt64? { nil }

    /// Cannot tell without reading.
    public func holdsNone(_ primaryKey: String) -> Bool { false }

    public func openBody(for entry: StoredEntry) throws(StorageError) -> any StoredBody {
        try openBody(of: entry.id)
    }

    /// Nothing to group: each write is durable as it is made.
    public func beginBatchedWrites() {}
    /// Nothing to group: each write is durable as it is made.
    public func endBatchedWrites() throws(StorageError) {}

    /// No channel: ``variants(of:)`` answers where it is called.
    public func makeLookupChannel() -> (any LookupChannel)? { nil }

    /// Reads every entry and removes those tagged `tag`: for stores without an index of
    /// tags. The stores of this package index them.
    @discardableResult
    public func remove(tag: String) throws(StorageError) -> Int {
        var removed = 0
        for entry in try entries() where entry.head.tags.contains(tag) {
            try remove(entry.id)
            removed += 1
        }
        return removed
    }

    /// Reads every entry and removes those whose primary key starts with `prefix`: for stores
    /// without an ordered index of keys.
    @discardableResult
    public func remove(primaryKeyPrefix prefix: String) throws(StorageError) -> Int {
        var removed = 0
        for entry in try entries() where entry.head.primaryKey.hasPrefix(prefix) {
            try remove(entry.id)
            removed += 1
        }
        return removed
    }

    /// The whole body, verified against its checksums.
    public func body(of id: EntryID) throws(StorageError) -> [UInt8] {
        try openBody(of: id).readAll()
    }

    /// Bytes `range` of the body (offsets inclusive, clamped to the body), verified.
    public func body(of id: EntryID, range: ClosedRange<Int64>) throws(StorageError) -> [UInt8] {
        try openBody(of: id).read(range)
    }

    /// The body in chunks of up to 1 MiB, each verified before it is handed out, all of the
    /// version opened first; `chunk` returns `false` to stop early.
    public func streamBody(of id: EntryID, _ chunk: ([UInt8]) throws -> Bool) throws {
        try openBody(of: id).stream(chunk)
    }
}

/// The size of the chunks ``StoredBody/stream(_:)`` hands out: 16 checksum blocks.
let streamChunkSize = 16 * checksumBlockSize

/// A store several caches share (on several machines) that lets concurrent misses for one
/// key on all of them make a single origin request (collapsed forwarding across caches).
///
/// A cache whose request for a key leads the requests of its own process asks
/// ``claimFill(_:)``: `true`, it goes to the origin and calls ``endFill(_:)`` once the response
/// is stored (or is not going to be); `false`, another cache is fetching it, and
/// ``awaitFill(_:_:)`` calls back when that is over or a time limit passed, whereupon the
/// waiting requests look up again (and go to the origin themselves if nothing was stored) — or
/// when that cache vanished without ending its fill (it crashed, or lost the store): then this
/// cache has claimed the key in its place, and one of its waiting requests leads.
public protocol CollapsingStore: CacheStore {
    /// Claims the origin request for `primaryKey` among the caches sharing the store; `true`
    /// also when the store cannot tell (the cache then goes on by itself).
    func claimFill(_ primaryKey: String) -> Bool
    /// The claimed origin request for `primaryKey` is over.
    func endFill(_ primaryKey: String)
    /// Calls `done` (on another thread) once the cache that claimed `primaryKey` ended, or
    /// after the store's time limit (``FillWait/ended``); or once that cache's claim lapsed
    /// without an end and this cache claimed the key instead (``FillWait/claimed``: it calls
    /// ``endFill(_:)`` as after ``claimFill(_:)``).
    func awaitFill(_ primaryKey: String, _ done: @escaping @Sendable (FillWait) -> Void)
}

/// How a wait for another cache's fill ended (``CollapsingStore/awaitFill(_:_:)``).
public enum FillWait: Sendable {
    /// The fill is over (or the wait timed out): look up again.
    case ended
    /// The other cache vanished without ending its fill; this cache claimed the key and leads.
    case claimed
}

/// One event loop's non-blocking way to a store's server (``CacheStore/makeLookupChannel()``):
/// lookups queued in one pass of the loop go out in one write and are answered in order, and
/// the loop never waits for them.
///
/// The loop watches ``descriptor`` for reading, and for writing while ``wantsToWrite``; calls
/// ``descriptorReady()`` when it is ready and ``expire()`` once ``deadline`` passed. Each
/// lookup's `done` is called on the loop's thread, from one of those calls, once the store's
/// ``CacheStore/variants(of:)`` (and ``CacheStore/openBody(for:)`` of an entry it returned) for
/// that key answers on this thread without a round trip: with what the server sent, or by
/// throwing what went wrong (a timeout, a broken connection, a reply that does not parse), which
/// a cache answers as a miss. Not `Sendable`: one loop's own.
public protocol LookupChannel: AnyObject {
    /// The connection's socket; -1 while there is none.
    var descriptor: Int32 { get }
    /// Whether lookups are queued that are not written yet.
    var wantsToWrite: Bool { get }
    /// When the oldest lookup in flight times out (`MonotonicClock` seconds); `nil` when none is.
    var deadline: Double? { get }
    /// Called with the socket just before the channel closes it (a failure, ``close()``): the
    /// loop stops watching it while the number is still this socket's.
    var willClose: ((Int32) -> Void)? { get set }
    /// Queues a lookup of `primaryKey`, connecting first when needed; `false` when it is not
    /// queued (the store answers it without a round trip, or the server cannot be reached now):
    /// the caller then goes on at once and `done` is never called.
    func lookUp(_ primaryKey: String, _ done: @escaping () -> Void) -> Bool
    /// Whether ``lookUp(_:_:)`` may queue a lookup of `primaryKey` now; `false` when it surely
    /// would not (the store answers without waiting), so that a caller makes the lookup's `done`,
    /// and copies what it keeps, only when it may be called. A `true` may still meet a
    /// ``lookUp(_:_:)`` that does not queue. By default `true`.
    func mayQueue(_ primaryKey: String) -> Bool
    /// Writes what is queued and reads what arrived, calling `done` of each lookup answered.
    func descriptorReady()
    /// Gives up the lookups past their time: each is answered as failed.
    func expire()
    /// Closes the connection; the lookups in flight are answered as failed.
    func close()
}

extension LookupChannel {
    /// Any lookup may be queued.
    public func mayQueue(_ primaryKey: String) -> Bool { true }
}
