#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// State behind a `pthread_mutex_t`, with a condition to wait on: the one lock of the package
/// (the stores, the exchange, the proxy's server and workers, the loopback origin).
///
/// A plain POSIX mutex rather than `Synchronization.Mutex` or `NSLock`/`NSCondition`:
/// - ThreadSanitizer sees its lock and unlock. A TSan run of the store's concurrency tests
///   with `Mutex`, whose futex calls TSan cannot see on Linux, reported accesses made under the
///   lock as races; with this lock it reports real races only.
/// - It works on Apple systems older than macOS 15 / iOS 18, which `Mutex` needs, and needs no
///   Foundation (the proxy's event loop has none).
/// - It waits on a condition with a deadline on the monotonic clock (``withLock(when:deadline:_:)``),
///   which the server's back-pressure and the proxy's workers need.
///
/// Public rather than `package` so that ``withLock(_:)`` is inlined and specialized in the
/// targets that use it: this toolchain (Swift 6.3) does not inline an `@inlinable package`
/// function across modules. `CacheSystem` is no product, so no other package sees it.
///
/// Keep critical sections short: nothing that can block is done inside one, except waiting
/// for the state to change.
///
/// A lock that guards no state still holds a value (`Locked(0)`), never `Locked(())`:
/// ThreadSanitizer reports the accesses to a zero-sized state made under the lock as a Swift
/// access race (it did for `DiskStore`'s sweep lock, and for a lock the tests once held around process launches).
///
/// ```swift
/// let queue = Locked<[Job]>([])
/// queue.withLock { $0.append(job) }
/// queue.wakeWaiters()
/// let next = queue.withLock(when: { !$0.isEmpty }) { $0.removeFirst() }
/// ```
public final class Locked<State>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    /// Not checked for exclusive access at run time, as a class's stored property otherwise is
    /// (`swift_beginAccess` and `swift_endAccess`, about 120 instructions a hold): the mutex
    /// already makes access exclusive.
    @exclusivity(unchecked) @usableFromInline var state: State

    public init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        #if canImport(Glibc)
        // Deadlines are on the monotonic clock, which a change of the wall clock does not move.
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
        #else
        pthread_cond_init(condition, nil)
        #endif
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the state.
    @inlinable
    public func withLock<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result) throws(Failure)
        -> Result
    {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Runs `body` with exclusive access to the state if no other thread holds the lock now;
    /// `nil`, running nothing, if one does: for a thread that must not wait (an event loop).
    @inlinable
    public func withLockIfAvailable<Result, Failure: Error>(
        _ body: (inout State) throws(Failure) -> Result
    ) throws(Failure) -> Result? {
        guard pthread_mutex_trylock(mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Waits until `ready(state)` holds, with the lock released while waiting, then runs `body`
    /// with exclusive access; `nil` when `deadline` (``MonotonicClock/seconds()``) passed
    /// first. Whoever changes what `ready` reads calls ``wakeWaiters()`` afterwards.
    public func withLock<Result>(
        when ready: (State) -> Bool, deadline: Double? = nil, _ body: (inout State) -> Result
    ) -> Result? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !ready(state) {
            guard let deadline else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            if Self.wait(condition, mutex, until: deadline) == ETIMEDOUT, !ready(state) { return nil }
        }
        return body(&state)
    }

    /// Wakes every thread waiting in ``withLock(when:deadline:_:)``, to look at the state again.
    public func wakeWaiters() {
        pthread_cond_broadcast(condition)
    }

    /// Wakes one thread waiting in ``withLock(when:deadline:_:)`` (at least one, when any
    /// waits). Only right when every waiter waits for the same thing, and any one of them can
    /// take what changed: otherwise the one woken may not be one that can use it.
    public func wakeOne() {
        pthread_cond_signal(condition)
    }

    /// Waits on `condition` until `deadline` on ``MonotonicClock/seconds()``: 0, or `ETIMEDOUT`.
    private static func wait(
        _ condition: UnsafeMutablePointer<pthread_cond_t>, _ mutex: UnsafeMutablePointer<pthread_mutex_t>,
        until deadline: Double
    ) -> Int32 {
        let deadline = min(deadline, 1e15)  // far enough to be never, near enough for a timespec
        #if canImport(Glibc)
        // The condition measures on CLOCK_MONOTONIC (see init): the deadline as it is.
        let whole = deadline.rounded(.down)
        var until = timespec(tv_sec: Int(whole), tv_nsec: Int((deadline - whole) * 1e9))
        return pthread_cond_timedwait(condition, mutex, &until)
        #else
        // Darwin's conditions measure absolute times on the wall clock: wait for what is left.
        let left = max(0, deadline - MonotonicClock.seconds())
        let whole = left.rounded(.down)
        var interval = timespec(tv_sec: Int(whole), tv_nsec: Int((left - whole) * 1e9))
        return pthread_cond_timedwait_relative_np(condition, mutex, &interval)
        #endif
    }
}
