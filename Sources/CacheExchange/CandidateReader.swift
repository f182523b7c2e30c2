import CacheSemantics
import CacheStorage
import CacheSystem

/// Reads the stored responses of a key with their facts decoded, and remembers them while the
/// store's change count stands still (``CacheStore/changeCount``): a hit then costs neither a
/// store read nor decoding. What it remembers is bounded in count and in bytes (least recently
/// used keys go first): each entry is charged the heap memory it holds (`MemoryCost`),
/// shared with the store or not, since it is all that is left of an entry the store evicted.
final class CandidateReader: Sendable {
    private let store: any CacheStore
    private let log: @Sendable (String) -> Void

    private struct Memo {
        /// Candidates and their facts by primary key, with the change count they were read at.
        var candidates: LRUCache<String, (changes: UInt64, candidates: [StoredCandidate], facts: [StoredResponseFacts])>
        /// Decoded facts by entry, with the bytes they were decoded from (a `304` changes an
        /// entry's facts in place).
        var facts: LRUCache<EntryID, (bytes: [UInt8], facts: StoredResponseFacts)>
    }

    private let memo: Locked<Memo>

    /// A reader remembering at most `capacity` keys and entries, in at most `byteLimit` bytes
    /// for each of the two.
    init(store: any CacheStore, capacity: Int, byteLimit: Int, log: @escaping @Sendable (String) -> Void) {
        self.store = store
        self.log = log
        memo = Locked(
            Memo(
                candidates: LRUCache(capacity: capacity, byteLimit: byteLimit),
                facts: LRUCache(capacity: capacity, byteLimit: byteLimit)))
    }

    /// Every stored variant of `primaryKey` whose facts can be read; one whose facts cannot
    /// be read is removed (and logged), so it is fetched again.
    func candidates(_ primaryKey: String) -> [StoredCandidate] { candidatesWithFacts(primaryKey).candidates }

    /// The same, with the facts of each candidate in order (what the engine's lookup takes),
    /// remembered with them.
    func candidatesWithFacts(_ primaryKey: String) -> (candidates: [StoredCandidate], facts: [StoredResponseFacts]) {
        // Read before the store: a write landing meanwhile moves the count past this.
        guard let changes = store.changeCount else {
            let candidates = read(primaryKey)
            return (candidates, candidates.map(\.facts))
        }
        if let known = memo.withLock({ $0.candidates.value(for: primaryKey) }), known.changes == changes {
            return (known.candidates, known.facts)
        }
        let candidates = read(primaryKey)
        let facts = candidates.map(\.facts)
        let cost =
            MemoryCost.string(primaryKey)
            + MemoryCost.array(count: candidates.count, stride: MemoryLayout<StoredCandidate>.stride)
            + MemoryCost.array(count: facts.count, stride: MemoryLayout<StoredResponseFacts>.stride)
            + candidates.reduce(0) { $0 + $1.memoryCost + MemoryCost.facts($1.facts) }
        memo.withLock { $0.candidates.set((changes, candidates, facts), for: primaryKey, cost: cost) }
        return (candidates, facts)
    }

    /// The candidates of `primaryKey`; when none is stored under it, those stored under the
    /// key its path's No-Vary-Search simplifies it to, that answer it (``SearchVariance``).
    private func read(_ primaryKey: String) -> [StoredCandidate] {
        let own = readKey(primaryKey)
        guard own.isEmpty, let simplified = SearchVariance.simplifiedKey(primaryKey, read: candidates) else {
            return own
        }
        return SearchVariance.equivalent(readKey(simplified.key), to: simplified.uri)
    }

    private func readKey(_ primaryKey: String) -> [StoredCandidate] {
        let entries: [StoredEntry]
        do {
            entries = try store.variants(of: primaryKey)
        } catch {
            log("could not read the stored responses for \(primaryKey): \(error); answered as a miss")
            return []
        }
        return entries.compactMap { entry in
            if let known = memo.withLock({ $0.facts.value(for: entry.id) }), known.bytes == entry.head.facts {
                return StoredCandidate(entry: entry, facts: known.facts)
            }
            guard let facts = StoredResponseFacts(serialized: entry.head.facts) else {
                log("dropped the stored response for \(entry.head.url): its facts cannot be read")
                try? store.remove(entry.id)
                return nil
            }
            let cost = MemoryCost.bytes(entry.head.facts) + MemoryCost.facts(facts)
            memo.withLock { $0.facts.set((entry.head.facts, facts), for: entry.id, cost: cost) }
            return StoredCandidate(entry: entry, facts: facts)
        }
    }
}

extension StoredCandidate {
    /// The heap memory the candidate holds: its shared storage, its entry's head and its facts.
    var memoryCost: Int {
        MemoryCost.allocation(16 + MemoryLayout<StoredEntry>.stride + MemoryLayout<StoredResponseFacts>.stride)
            + MemoryCost.head(entry.head) + MemoryCost.facts(facts)
    }
}
