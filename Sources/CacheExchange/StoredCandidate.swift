import CacheSemantics
import CacheStorage

/// A stored response with its facts decoded: what the engine decides over.
///
/// A candidate is copied at every step of an exchange (the lookup, the answer chosen, the
/// response served); it holds its entry and facts in one shared reference, copied on write, so
/// each copy costs one retain instead of one per string and array they hold.
public struct StoredCandidate: Sendable {
    /// Mutated only while uniquely referenced (copy on write), so never shared while it changes.
    private final class Storage: @unchecked Sendable {
        var entry: StoredEntry
        var facts: StoredResponseFacts

        init(entry: StoredEntry, facts: StoredResponseFacts) {
            self.entry = entry
            self.facts = facts
        }
    }

    private var storage: Storage

    /// The stored entry: its identity, head and sizes.
    public var entry: StoredEntry {
        get { storage.entry }
        _modify {
            makeUnique()
            yield &storage.entry
        }
    }

    /// The URL of ``entry``'s response, read without copying the entry.
    var url: String { storage.entry.head.url }

    /// The decoded `StoredResponseFacts` of ``entry``.
    public var facts: StoredResponseFacts {
        get { storage.facts }
        _modify {
            makeUnique()
            yield &storage.facts
        }
    }

    /// A candidate.
    public init(entry: StoredEntry, facts: StoredResponseFacts) {
        storage = Storage(entry: entry, facts: facts)
    }

    private mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&storage) { storage = Storage(entry: storage.entry, facts: storage.facts) }
    }
}
