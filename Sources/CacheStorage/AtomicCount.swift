internal import CSQLiteHTTPCache

/// A counter in memory of its own, loaded and bumped atomically (the C11 builtins
/// ``ChangeCounter`` uses), so that a count read on every hit needs no lock.
final class AtomicCount: @unchecked Sendable {
    private let counter: UnsafeMutablePointer<UInt64>

    init() {
        counter = .allocate(capacity: 1)
        counter.initialize(to: 0)
    }

    deinit { counter.deallocate() }

    /// The current count.
    var value: UInt64 { csqlite_counter_load(counter) }

    /// Counts one; returns the count before it.
    @discardableResult
    func bump() -> UInt64 { csqlite_counter_bump(counter) }
}
