#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one clock of the package for deadlines and durations: monotonic, so a change of the
/// wall clock neither fires a deadline early nor holds it back.
///
/// Times are measured from an arbitrary point (the system's boot on Linux): only differences
/// and comparisons mean anything. For the time of day (`Date`, HTTP dates) use the wall clock.
///
/// ```swift
/// let deadline = MonotonicClock.seconds() + timeout
/// while MonotonicClock.seconds() < deadline { … }
/// ```
public enum MonotonicClock {
    /// Seconds on the monotonic clock, to the nanosecond the system gives.
    ///
    /// The clock ``Locked/withLock(when:deadline:_:)`` measures its deadlines on.
    @inlinable
    public static func seconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Whole milliseconds on the coarse monotonic clock: cheap enough for every turn of an event
    /// loop, good to a few milliseconds.
    ///
    /// On Linux `CLOCK_MONOTONIC_COARSE`, a read of the vDSO page with no system call, which
    /// lags ``seconds()`` by up to one scheduler tick (1–4 ms); on Apple systems
    /// `CLOCK_MONOTONIC`, itself a read of the commpage there.
    @inlinable @inline(__always)
    public static func coarseMilliseconds() -> Int {
        var now = timespec()
        #if canImport(Glibc)
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
        #else
        clock_gettime(CLOCK_MONOTONIC, &now)
        #endif
        return Int(now.tv_sec) * 1000 + Int(now.tv_nsec) / 1_000_000
    }
}
