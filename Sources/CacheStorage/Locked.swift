#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// State behind a `pthread_mutex_t`, for the stores and the cache built on them.
///
/// A plain POSIX mutex rather than `Synchronization.Mutex`: it works on Apple systems older
/// than macOS 15 / iOS 18, and ThreadSanitizer sees its lock and unlock, so a TSan run of the
/// concurrency tests reports real races only (with `Mutex`, whose futex calls TSan cannot see
/// on Linux, it reported accesses made under the lock as races).
package final class Locked<State>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var state: State

    package init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the state.
    package func withLock<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }
}
