/// A point in time, in seconds since 1970-01-01T00:00:00Z.
///
/// `CacheSemantics` has no clock: callers pass `now`, the request time and the response
/// time as timestamps (RFC 9111 §4.2.3 names them `now`, `request_time` and `response_time`).
/// Sub-second precision is kept; HTTP dates have one-second resolution.
public struct Timestamp: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Seconds since the Unix epoch (negative before 1970).
    public var secondsSince1970: Double

    /// Creates a timestamp `secondsSince1970` seconds after the Unix epoch.
    public init(secondsSince1970: Double) {
        self.secondsSince1970 = secondsSince1970
    }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.secondsSince1970 < rhs.secondsSince1970
    }

    /// The timestamp `seconds` later.
    public static func + (lhs: Timestamp, seconds: Double) -> Timestamp {
        Timestamp(secondsSince1970: lhs.secondsSince1970 + seconds)
    }

    /// The timestamp `seconds` earlier.
    public static func - (lhs: Timestamp, seconds: Double) -> Timestamp {
        Timestamp(secondsSince1970: lhs.secondsSince1970 - seconds)
    }

    /// The seconds from `rhs` to `lhs` (negative when `lhs` is earlier).
    public static func - (lhs: Timestamp, rhs: Timestamp) -> Double {
        lhs.secondsSince1970 - rhs.secondsSince1970
    }

    /// The IMF-fixdate form (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    public var description: String { HTTPDate.format(self) }
}
