import CacheSystem
import Testing

@Suite("Locked: the one lock, and waiting on it with a deadline on the monotonic clock")
struct LockedTests {
    @Test("a waiter returns as soon as another thread makes the state ready and wakes it")
    func waiterSeesTheChange() throws {
        let ready = Locked(0)
        try SystemThread.detached {
            ready.withLock { $0 = 42 }
            ready.wakeWaiters()
        }
        let seen = ready.withLock(when: { $0 != 0 }, deadline: MonotonicClock.seconds() + 30) { $0 }
        #expect(seen == 42)
    }

    @Test("a deadline that passed gives nil without waiting, and the body does not run")
    func passedDeadline() {
        let state = Locked(false)
        var ran = false
        let result = state.withLock(when: { $0 }, deadline: MonotonicClock.seconds() - 1) { _ in
            ran = true
            return true
        }
        #expect(result == nil)
        #expect(!ran)
    }

    @Test("a deadline is measured on MonotonicClock: nil no sooner than it")
    func deadlineOnTheMonotonicClock() {
        let state = Locked(false)
        let started = MonotonicClock.seconds()
        let result = state.withLock(when: { $0 }, deadline: started + 0.2) { _ in true }
        #expect(result == nil)
        #expect(MonotonicClock.seconds() - started >= 0.19)
    }

    @Test("a state already ready runs the body at once, whatever the deadline")
    func readyAtOnce() {
        let state = Locked(7)
        #expect(state.withLock(when: { $0 == 7 }, deadline: MonotonicClock.seconds() - 1) { $0 + 1 } == 8)
        #expect(state.withLock(when: { $0 == 7 }) { $0 } == 7)
    }
}
