import CacheSemantics
import CacheStorage

/// A stored response with its facts decoded: what the engine decides over.
public struct StoredCandidate: Sendable {
    /// The stored entry: its identity, head and sizes.
    public var entry: StoredEntry
    /// The decoded `StoredResponseFacts` of ``entry``.
    public var facts: StoredResponseFacts

    /// A candidate.
    public init(entry: StoredEntry, facts: StoredResponseFacts) {
        self.entry = entry
        self.facts = facts
    }
}
