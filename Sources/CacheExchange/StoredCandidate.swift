import CacheSemantics
import CacheStorage

/// A stored response with its facts decoded: what the engine decides over.
///
/// A candidate is copied at every step of an exchange (the lookup, the answer chosen, the
/// response served); it holds its entry and facts in one shared reference, copied on write, so
/// each copy costs one retain instead of one per string and array they hold.
public struct StoredCandidate: Sendable {
    /// Mutated only while uniquely referenced (copy on write), so never shared while it changes;
    /// hence not checked for exclusive access at run time either (`swift_beginAccess`, about 80
    /// instructions a read, several a hit).
    private final class Storage: @unchecked Sendable {
        @exclusivity(unchecked) var entry: StoredEntry
        @exclusivity(unchecked) var facts: StoredResponseFacts
        /// The fields every answer from ``entry`` starts with, made when this version was first
        /// served and kept by the reader (``CandidateReader``); `nil` before, and once the entry
        /// or facts changed.
        @exclusivity(unchecked) var base: ServedBase?

        init(entry: StoredEntry, facts: StoredResponseFacts, base: ServedBase?) {
            self.entry = entry
            self.facts = facts
            self.base = base
        }
    }

    private var storage: Storage

    /// The stored entry: its identity, head and sizes.
    public var entry: StoredEntry {
        // Read in place: a `get` would copy the entry (a retain per string and array it holds).
        _read { yield storage.entry }
        _modify {
            makeUnique()
            storage.base = nil
            yield &storage.entry
        }
    }

    /// The URL of ``entry``'s response, read without copying the entry.
    var url: String { storage.entry.head.url }

    /// The decoded `StoredResponseFacts` of ``entry``.
    public var facts: StoredResponseFacts {
        _read { yield storage.facts }
        _modify {
            makeUnique()
            storage.base = nil
            yield &storage.facts
        }
    }

    /// What every answer from this version of the entry starts with, once an answer made it.
    var base: ServedBase? { storage.base }

    /// A candidate.
    public init(entry: StoredEntry, facts: StoredResponseFacts) {
        storage = Storage(entry: entry, facts: facts, base: nil)
    }

    /// A candidate with the fields its answers start with.
    init(entry: StoredEntry, facts: StoredResponseFacts, base: ServedBase?) {
        storage = Storage(entry: entry, facts: facts, base: base)
    }

    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&storage) {
            storage = Storage(entry: storage.entry, facts: storage.facts, base: storage.base)
        }
    }
}
