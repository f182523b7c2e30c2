import CacheSystem
import Testing

@Suite("MonotonicClock: the one clock for deadlines and durations")
struct MonotonicClockTests {
    @Test("seconds never go back")
    func secondsNeverGoBack() {
        var last = MonotonicClock.seconds()
        for _ in 0..<10_000 {
            let now = MonotonicClock.seconds()
            #expect(now >= last)
            last = now
        }
    }

    @Test("the coarse milliseconds are the same clock, lagging by a scheduler tick at most")
    func coarseIsTheSameClock() {
        let before = MonotonicClock.seconds()
        let coarse = MonotonicClock.coarseMilliseconds()
        let after = MonotonicClock.seconds()
        // CLOCK_MONOTONIC_COARSE is the last tick of CLOCK_MONOTONIC (≤ 4 ms at HZ=250; 50 ms
        // leaves room for a busy machine's preemption between the reads).
        #expect(Double(coarse) <= after * 1000 + 1)
        #expect(Double(coarse) >= before * 1000 - 50)
    }
}
