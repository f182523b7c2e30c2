import CacheSystem
import Foundation

/// A clock that moves only when a test moves it, from the real time it was made at: a cache
/// sees the ages a test sets up however long the machine takes between steps, and an origin
/// that stamps its own (real) `Date` is at most the test's run time ahead of it, which the
/// cache reads as an apparent age of 0 (RFC 9111 §4.2.3).
public final class ManualClock: Sendable {
    private let time = Locked(Date().timeIntervalSince1970.rounded(.down))

    /// A clock at the real time, rounded down to the second.
    public init() {}

    /// Seconds since 1970, as the cache sees them.
    public func now() -> Double { time.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by seconds: Double) { time.withLock { $0 += seconds } }

    /// The clock as the closure caches and stores take.
    public var function: @Sendable () -> Double { { [self] in now() } }
}
