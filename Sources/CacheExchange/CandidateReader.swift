import CacheSemantics
import CacheStorage
import CacheSystem
import Synchronization

/// Reads the stored responses of a key with their facts decoded and remembers them, with the
/// fields their answers start with (``ServedBase``) once the first answer has made them, while
/// the store's change count stands still (``CacheStore/changeCount``) or the key's own does
/// (``CacheStore/changeCount(of:)``): a hit then costs one lookup, neither a store read nor
/// decoding nor building fields, though misses and revalidations of other keys write meanwhile.
///
/// Two memos, bounded in count and in bytes (least recently used go first):
/// - by primary key, the candidates read at a change count: what a hit looks up;
/// - by entry, the decoded facts and served base of one version of a stored head (its
///   serialized facts): what a key read again after a change count moved, or from a store
///   that counts no changes, reuses instead of decoding and serializing again.
///
/// A version read is remembered without a base: its first answer makes one, which
/// ``keep(_:for:primaryKey:)`` adds to both memos, so a stale response read only to be
/// revalidated (whose `304` makes a new version) never has one made. A version freshened by a
/// `304` is remembered with its base (``remembered(_:)``): the answer to that request is made
/// of it.
///
/// Each is charged the heap memory its values hold (`MemoryCost`), shared with the store or
/// not, since it is all that is left of an entry the store evicted; what the two memos share
/// with each other (the facts and base of an entry both hold) is charged to each once; a base
/// not yet made is charged as much as the stored fields it will be made of.
/// ``bytesPerKey`` says what a key costs in the first.
final class CandidateReader: Sendable {
    private let store: any CacheStore
    private let log: @Sendable (String) -> Void
    /// Makes the fields every answer from an entry starts with (``ServedResponseBuilder``): for a
    /// version a `304` freshened, whose first answer is being made.
    private let makeBase: @Sendable (StoredEntry) -> ServedBase

    /// The candidates of one key as read at one change count. A class: a hit takes it from the
    /// memo with one retain.
    private final class KeyMemo: Sendable {
        /// The store's change count at which the candidates are known to be current: where they
        /// were read, or a later count at which a lookup found the key's own count unchanged
        /// (moved forward in place: any count so checked is one they are current at).
        let changes: Atomic<UInt64>
        /// The key's own change count (``CacheStore/changeCount(of:)``) when they were read;
        /// `nil` when other keys were read for them (No-Vary-Search's marker and simplified key).
        let keyChanges: UInt64?
        let candidates: [StoredCandidate]
        let facts: [StoredResponseFacts]

        init(changes: UInt64, keyChanges: UInt64?, candidates: [StoredCandidate], facts: [StoredResponseFacts]) {
            self.changes = Atomic(changes)
            self.keyChanges = keyChanges
            self.candidates = candidates
            self.facts = facts
        }
    }

    /// What was decoded and made of one version of an entry's head (its serialized facts and fields).
    private final class EntryMemo: Sendable {
        let bytes: [UInt8]
        /// The stored fields the base is made of (shared with the head: no copy).
        let fields: HeaderFields
        let facts: StoredResponseFacts
        /// `nil` until an answer from this version made it.
        let base: ServedBase?

        init(bytes: [UInt8], fields: HeaderFields, facts: StoredResponseFacts, base: ServedBase?) {
            self.bytes = bytes
            self.fields = fields
            self.facts = facts
            self.base = base
        }
    }

    /// Keys' candidates (what a hit reads) and entries' decoded facts and served bases, each
    /// in shards when the memo is large (``shardedCapacity``). Small memos have one shard, so
    /// that their bounds hold exactly.
    private let keys: ShardedLRUCache<String, KeyMemo>
    private let entries: ShardedLRUCache<EntryID, EntryMemo>
    /// Memos of at least this many keys are cut into ``shardCount`` shards.
    static let shardedCapacity = 4_096
    static let shardCount = 8

    /// A reader remembering at most `capacity` keys and entries, in at most `byteLimit` bytes
    /// in all: three quarters for the keys (what a hit reads), a quarter for the entries.
    init(
        store: any CacheStore, capacity: Int, byteLimit: Int, log: @escaping @Sendable (String) -> Void,
        makeBase: @escaping @Sendable (StoredEntry) -> ServedBase
    ) {
        self.store = store
        self.log = log
        self.makeBase = makeBase
        let shards = capacity >= Self.shardedCapacity ? Self.shardCount : 1
        let forEntries = byteLimit / 4
        keys = ShardedLRUCache(capacity: capacity, byteLimit: byteLimit - forEntries, shards: shards)
        entries = ShardedLRUCache(capacity: capacity, byteLimit: forEntries, shards: shards)
    }

    /// How many keys are remembered, and the bytes they are charged together (with the memo's
    /// own bookkeeping).
    var rememberedKeys: (count: Int, bytes: Int) { keys.totals }

    /// Every stored variant of `primaryKey` whose facts can be read; one whose facts cannot
    /// be read is removed (and logged), so it is fetched again.
    func candidates(_ primaryKey: String) -> [StoredCandidate] { candidatesWithFacts(primaryKey).candidates }

    /// The same, with the facts of each candidate in order (what the engine's lookup takes),
    /// remembered with them.
    ///
    /// Remembered candidates are current while the store's change count stands still, or,
    /// once it moved, while the key's own count does (``CacheStore/changeCount(of:)``): a
    /// hit is not read again because other keys were stored or freshened meanwhile.
    func candidatesWithFacts(_ primaryKey: String) -> (candidates: [StoredCandidate], facts: [StoredResponseFacts]) {
        // Read before the store: a write landing meanwhile moves the count past this.
        guard let changes = store.changeCount else {
            let candidates = read(primaryKey).candidates
            return (candidates, candidates.map(\.facts))
        }
        let known = keys.value(for: primaryKey)
        if let known, known.changes.load(ordering: .relaxed) == changes { return (known.candidates, known.facts) }
        let keyChanges = store.changeCount(of: primaryKey)
        if let known, let keyChanges, known.keyChanges == keyChanges {
            // Current still: known so at the store's count, so that the next hit compares one
            // number. Set in place: a new memo put in the cache cost each hit after any write
            // some 3,600 instructions and an allocation.
            known.changes.store(changes, ordering: .relaxed)
            return (known.candidates, known.facts)
        }
        let (candidates, ownKeyOnly) = read(primaryKey)
        let facts = candidates.map(\.facts)
        let memo = KeyMemo(
            changes: changes, keyChanges: ownKeyOnly ? keyChanges : nil, candidates: candidates, facts: facts)
        remember(memo, for: primaryKey)
        return (candidates, facts)
    }

    /// Remembers `known` as the candidates of `primaryKey`, charged what it holds.
    private func remember(_ known: KeyMemo, for primaryKey: String) {
        let cost =
            MemoryCost.allocation(16 + 8 + 16 + 2 * 8) + MemoryCost.string(primaryKey)
            + MemoryCost.array(count: known.candidates.count, stride: MemoryLayout<StoredCandidate>.stride)
            + MemoryCost.array(count: known.facts.count, stride: MemoryLayout<StoredResponseFacts>.stride)
            + known.candidates.reduce(0) { $0 + $1.memoryCost }
        keys.set(known, for: primaryKey, cost: cost)
    }

    /// The candidates of `primaryKey`; when none is stored under it, those stored under the
    /// key its path's No-Vary-Search simplifies it to, that answer it (``SearchVariance``).
    /// `ownKeyOnly`: no other key was read (none is stored under it, or the key is a marker's).
    private func read(_ primaryKey: String) -> (candidates: [StoredCandidate], ownKeyOnly: Bool) {
        let own = readKey(primaryKey)
        guard own.isEmpty else { return (own, true) }
        // The path's marker is seldom stored: a store that surely holds none is not read for it,
        // and nothing is remembered of it.
        let marker = { [store] (key: String) in store.holdsNone(key) ? [] : self.candidates(key) }
        guard let simplified = SearchVariance.simplifiedKey(primaryKey, read: marker) else {
            return (own, SearchVariance.isMarker(primaryKey))
        }
        return (SearchVariance.equivalent(readKey(simplified.key), to: simplified.uri), false)
    }

    private func readKey(_ primaryKey: String) -> [StoredCandidate] {
        let variants: [StoredEntry]
        do {
            variants = try store.variants(of: primaryKey)
        } catch {
            log(
                "could not read the stored responses for \(SearchVariance.describe(primaryKey)): \(error); answered as a miss"
            )
            return []
        }
        return variants.compactMap { entry in
            // The same version: the same facts and fields (a head updated in place keeps its id).
            if let known = entries.value(for: entry.id), Self.isVersion(known, of: entry) {
                return StoredCandidate(entry: entry, facts: known.facts, base: known.base)
            }
            guard let facts = StoredResponseFacts(serialized: entry.head.facts) else {
                log("dropped the stored response for \(entry.head.url): its facts cannot be read")
                try? store.remove(entry.id)
                return nil
            }
            return remember(entry, facts: facts, base: nil)
        }
    }

    /// `candidate`, freshened by a `304` or a `HEAD` response and stored as it is now, with the
    /// fields its answers start with made and remembered by entry: the answer to the request
    /// that freshened it and the next read of its key share them, instead of each making them.
    /// `facts` are remembered as the store will give them back (decoded from the head's bytes),
    /// and the candidate is returned unchanged when those do not decode.
    func remembered(_ candidate: StoredCandidate) -> StoredCandidate {
        guard candidate.base == nil, let facts = StoredResponseFacts(serialized: candidate.entry.head.facts) else {
            return candidate
        }
        return remember(candidate.entry, facts: facts, base: makeBase(candidate.entry))
    }

    /// A candidate of `entry` with `base` (or none yet), remembered by entry.
    @discardableResult
    private func remember(_ entry: StoredEntry, facts: StoredResponseFacts, base: ServedBase?) -> StoredCandidate {
        let known = EntryMemo(bytes: entry.head.facts, fields: entry.head.fields, facts: facts, base: base)
        let cost =
            MemoryCost.allocation(16 + 8 + 8 + MemoryLayout<StoredResponseFacts>.stride + 8)
            + MemoryCost.bytes(entry.head.facts) + MemoryCost.facts(facts) + Self.cost(of: base, for: entry)
        entries.set(known, for: entry.id, cost: cost)
        return StoredCandidate(entry: entry, facts: facts, base: base)
    }

    /// Keeps `base`, made for the first answer from `candidate` (read under `primaryKey` without
    /// one), with its version in both memos: later reads and hits of the key share it. A memo
    /// that holds another version by now, or a key read again meanwhile, is left as it is.
    func keep(_ base: ServedBase, for candidate: StoredCandidate, primaryKey: String) {
        let entry = candidate.entry
        if let known = entries.value(for: entry.id), known.base == nil, Self.isVersion(known, of: entry) {
            remember(entry, facts: known.facts, base: base)
        }
        guard let known = keys.value(for: primaryKey),
            let index = known.candidates.firstIndex(where: {
                $0.base == nil && $0.entry.id == entry.id
                    && Self.isVersion(facts: $0.entry.head.facts, fields: $0.entry.head.fields, of: entry)
            })
        else { return }
        var candidates = known.candidates
        candidates[index] = StoredCandidate(entry: entry, facts: candidates[index].facts, base: base)
        let memo = KeyMemo(
            changes: known.changes.load(ordering: .relaxed), keyChanges: known.keyChanges, candidates: candidates,
            facts: known.facts)
        remember(memo, for: primaryKey)
    }

    /// Whether `known` was made of `entry`'s head as it is (the same facts and fields).
    private static func isVersion(_ known: EntryMemo, of entry: StoredEntry) -> Bool {
        isVersion(facts: known.bytes, fields: known.fields, of: entry)
    }

    /// Whether a head of these serialized facts and fields is `entry`'s as it is.
    private static func isVersion(facts: [UInt8], fields: HeaderFields, of entry: StoredEntry) -> Bool {
        facts == entry.head.facts && fields == entry.head.fields
    }

    /// What a served base costs in a memo: its own cost once made; before, as much as the
    /// stored fields it will be made of (its fields' array and, for a host that serializes them,
    /// their bytes).
    static func cost(of base: ServedBase?, for entry: StoredEntry) -> Int {
        base?.memoryCost ?? MemoryCost.allocation(96) + MemoryCost.fields(entry.head.fields)
    }
}

extension StoredCandidate {
    /// The heap memory the candidate holds: its shared storage, its entry's head, its facts and
    /// the served base made of them.
    var memoryCost: Int {
        MemoryCost.allocation(16 + MemoryLayout<StoredEntry>.stride + MemoryLayout<StoredResponseFacts>.stride + 8)
            + MemoryCost.head(entry.head) + MemoryCost.facts(facts) + CandidateReader.cost(of: base, for: entry)
    }
}
