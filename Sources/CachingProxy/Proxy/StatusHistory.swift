#if os(Linux)
import CacheSystem
import Synchronization

/// The proxy's last hour, second by second, for the status page and `httpcache top`: a ring of
/// 3600 slots of fixed size (about 200 bytes each), so its memory never grows.
///
/// Counts are not made twice: once a second ``tick(second:totals:)`` takes the counters the
/// metrics keep (``Totals``) and stores what they grew by. Latencies are the one thing recorded
/// per request (``recordLatency(_:_:)``): an atomic add into the current second's histogram,
/// which the tick takes. No lock is on a request's way; the ring's lock is taken by the tick and
/// by readers.
final class StatusHistory: Sendable {
    /// Seconds kept.
    static let capacity = 3600

    /// Upper bounds of the latency buckets, in microseconds; the last bucket holds everything
    /// above 10 s.
    static let latencyBounds: [Int] = [
        50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000,
        2_500_000, 5_000_000, 10_000_000,
    ]
    static let bucketCount = latencyBounds.count + 1

    /// Which latency histogram a request goes to.
    enum Kind: Int, CaseIterable {
        /// Answered from the store: hit or stale.
        case hit
        /// Answered after asking the origin: miss, revalidated or pass.
        case miss
    }

    /// Counters that only grow (the metrics' own), sampled by each tick.
    struct Totals: Equatable, Sendable {
        var requests = 0
        var hits = 0
        var misses = 0
        var originRequests = 0
        var originErrors = 0
        var bytesFromCache = 0
        var bytesFromOrigin = 0

        /// How many counters: ``subscript(field:)`` numbers them in the order above.
        static let fieldCount = 7

        subscript(field index: Int) -> Int {
            get {
                switch index {
                case 0: requests
                case 1: hits
                case 2: misses
                case 3: originRequests
                case 4: originErrors
                case 5: bytesFromCache
                default: bytesFromOrigin
                }
            }
            set {
                switch index {
                case 0: requests = newValue
                case 1: hits = newValue
                case 2: misses = newValue
                case 3: originRequests = newValue
                case 4: originErrors = newValue
                case 5: bytesFromCache = newValue
                default: bytesFromOrigin = newValue
                }
            }
        }
    }

    /// An `Atomic<Int>` of its own, so that a fixed array of them can be shared.
    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }

    /// The current second's latency histograms, by ``Kind``.
    private let current: [[Counter]] = Kind.allCases.map { _ in (0..<bucketCount).map { _ in Counter() } }

    private struct Ring {
        /// The second since 1970 each slot holds; a slot whose second is not the one asked for
        /// reads as zero.
        var seconds = [Int](repeating: .min, count: capacity)
        /// ``Totals/fieldCount`` counters per slot.
        var counts = [Int](repeating: 0, count: capacity * Totals.fieldCount)
        /// The two histograms (``Kind``) per slot.
        var latency = [UInt32](repeating: 0, count: capacity * latencyWidth)
        /// The totals at the last tick.
        var sampled = Totals()
    }

    private static let latencyWidth = Kind.allCases.count * bucketCount
    private let ring = Locked(Ring())

    /// Counts a request's latency into the current second: from the request reaching the
    /// handler to its response head.
    func recordLatency(_ seconds: Double, _ kind: Kind) {
        current[kind.rawValue][Self.bucket(microseconds: Int(seconds * 1e6))].value.add(1, ordering: .relaxed)
    }

    /// The bucket `microseconds` falls in.
    static func bucket(microseconds: Int) -> Int {
        latencyBounds.firstIndex { microseconds <= $0 } ?? latencyBounds.count
    }

    /// Closes `second` (seconds since 1970): what `totals` grew by since the last tick, and the
    /// latencies recorded meanwhile, go to its slot. Called about once a second; two ticks in
    /// one second add up, a second without a tick reads as zero.
    func tick(second: Int, totals: Totals) {
        var latencies = [UInt32](repeating: 0, count: Self.latencyWidth)
        for kind in Kind.allCases {
            for bucket in 0..<Self.bucketCount {
                let taken = current[kind.rawValue][bucket].value.exchange(0, ordering: .relaxed)
                latencies[kind.rawValue * Self.bucketCount + bucket] = UInt32(clamping: taken)
            }
        }
        let slot = Self.slot(of: second)
        ring.withLock { ring in
            if ring.seconds[slot] != second {
                ring.seconds[slot] = second
                for index in 0..<Totals.fieldCount { ring.counts[slot * Totals.fieldCount + index] = 0 }
                for index in 0..<Self.latencyWidth { ring.latency[slot * Self.latencyWidth + index] = 0 }
            }
            for field in 0..<Totals.fieldCount {
                ring.counts[slot * Totals.fieldCount + field] += max(
                    0, totals[field: field] - ring.sampled[field: field])
            }
            for index in 0..<Self.latencyWidth {
                let position = slot * Self.latencyWidth + index
                ring.latency[position] = ring.latency[position].addingReportingOverflow(latencies[index]).partialValue
            }
            ring.sampled = totals
        }
    }

    private static func slot(of second: Int) -> Int { ((second % capacity) + capacity) % capacity }

    /// The `count` seconds up to and including `end`, oldest first.
    func window(endingAt end: Int, count: Int = capacity) -> Window {
        let count = min(max(count, 1), Self.capacity)
        return ring.withLock { ring in
            var window = Window(
                end: end, counts: [Int](repeating: 0, count: count * Totals.fieldCount),
                latency: [UInt32](repeating: 0, count: count * Self.latencyWidth))
            for offset in 0..<count {
                let second = end - count + 1 + offset
                let slot = Self.slot(of: second)
                guard ring.seconds[slot] == second else { continue }
                for index in 0..<Totals.fieldCount {
                    window.counts[offset * Totals.fieldCount + index] = ring.counts[slot * Totals.fieldCount + index]
                }
                for index in 0..<Self.latencyWidth {
                    window.latency[offset * Self.latencyWidth + index] = ring.latency[slot * Self.latencyWidth + index]
                }
            }
            return window
        }
    }

    /// Consecutive seconds of the ring, copied out.
    struct Window: Sendable {
        /// The last second (since 1970).
        let end: Int
        fileprivate var counts: [Int]
        fileprivate var latency: [UInt32]

        /// How many seconds.
        var count: Int { counts.count / Totals.fieldCount }

        /// What the counters grew by in the second at `offset` (0: the oldest).
        func totals(at offset: Int) -> Totals {
            var totals = Totals()
            for field in 0..<Totals.fieldCount { totals[field: field] = counts[offset * Totals.fieldCount + field] }
            return totals
        }

        /// What the counters grew by over the seconds at `offsets`.
        func totals(over offsets: Range<Int>) -> Totals {
            var sum = Totals()
            for offset in offsets {
                let totals = totals(at: offset)
                for field in 0..<Totals.fieldCount { sum[field: field] += totals[field: field] }
            }
            return sum
        }

        /// The `quantile` (0.5 for p50) of the `kind` latencies over `offsets`, in microseconds:
        /// the upper bound of the bucket where the cumulative count first reaches `quantile` of
        /// the whole (the last bound for the bucket above it); `nil` without any. Nothing is
        /// allocated and no closure called: the page asks it of every second of the hour (a
        /// `reduce` for each bucket made a debug build's status take half a second).
        func percentile(_ quantile: Double, _ kind: Kind, over offsets: Range<Int>) -> Int? {
            // Clamped by hand: `Range.clamped(to:)` in a debug build is unspecialized code that
            // looks up `Range`'s type metadata (a process-wide lock under ThreadSanitizer), and
            // the status page calls this for every second of the hour.
            let lower = min(max(offsets.lowerBound, 0), count)
            let offsets = lower..<max(lower, min(offsets.upperBound, count))
            return latency.withUnsafeBufferPointer { latency -> Int? in
                let column = kind.rawValue * StatusHistory.bucketCount
                let width = StatusHistory.latencyWidth
                var total = 0
                var offset = offsets.lowerBound
                while offset < offsets.upperBound {
                    var bucket = 0
                    while bucket < StatusHistory.bucketCount {
                        total += Int(latency[offset * width + column + bucket])
                        bucket += 1
                    }
                    offset += 1
                }
                guard total > 0 else { return nil }
                let rank = max(1, Int((quantile * Double(total)).rounded(.up)))
                var cumulative = 0
                var bucket = 0
                while bucket < StatusHistory.bucketCount {
                    offset = offsets.lowerBound
                    while offset < offsets.upperBound {
                        cumulative += Int(latency[offset * width + column + bucket])
                        offset += 1
                    }
                    if cumulative >= rank { return latencyBounds[min(bucket, latencyBounds.count - 1)] }
                    bucket += 1
                }
                return latencyBounds[latencyBounds.count - 1]
            }
        }
    }
}
#endif
