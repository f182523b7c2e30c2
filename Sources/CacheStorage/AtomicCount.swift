import Synchronization

/// A count loaded and bumped atomically, so that one read on every hit needs no lock. (The
/// index's change counter, ``ChangeCounter``, is shared between processes through a mapped
/// file; this one lives in this process only.)
final class AtomicCount: Sendable {
    private let count = Atomic<UInt64>(0)

    /// The current count.
    var value: UInt64 { count.load(ordering: .acquiring) }

    /// Counts one; returns the count before it.
    @discardableResult
    func bump() -> UInt64 { count.wrappingAdd(1, ordering: .acquiringAndReleasing).oldValue }
}
