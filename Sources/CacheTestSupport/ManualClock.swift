import CacheLocking
import CacheStorage
import Foundation

/// Real time plus an offset tests move forward, so a cache can be made to see a response as
/// stale without waiting while a real origin still stamps real `Date`s.
public final class ManualClock: Sendable {
    private let offset = Locked(0.0)

    /// A clock at the real time.
    public init() {}

    /// Seconds since 1970, as the cache sees them.
    public func now() -> Double { Date().timeIntervalSince1970 + offset.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by seconds: Double) { offset.withLock { $0 += seconds } }

    /// The clock as the closure caches and stores take.
    public var function: @Sendable () -> Double { { [self] in now() } }
}
