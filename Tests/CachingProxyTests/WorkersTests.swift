#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import CachingProxy

/// The pool wakes one idle thread per job (a burst can leave hundreds idle); these show that
/// no job is left waiting however many threads idle, and that waiting for idle still ends.
@Suite("Proxy workers: one thread woken per job, none forgotten")
struct WorkersTests {
    @Test("after a burst grew the pool to 64 threads, each of 2,000 jobs submitted one by one runs")
    func jobsRunAfterABurst() async {
        await offPool {
            let workers = Workers(limit: 64)
            defer { workers.stop() }
            let release = Locked(false)
            for _ in 0..<64 {
                workers.submit {
                    _ = release.withLock(when: { $0 }, deadline: MonotonicClock.seconds() + 10) { _ in }
                }
            }
            release.withLock { $0 = true }
            release.wakeWaiters()
            #expect(workers.waitUntilIdle(timeout: 10))
            let ran = Locked(0)
            for _ in 0..<2_000 {
                workers.submit {
                    ran.withLock { $0 += 1 }
                    ran.wakeWaiters()
                }
            }
            let all = ran.withLock(when: { $0 == 2_000 }, deadline: MonotonicClock.seconds() + 10) { $0 }
            #expect(all == 2_000)
            #expect(workers.waitUntilIdle(timeout: 10))
        }
    }

    @Test("a job submitted while another thread waits for the pool to go idle is still run")
    func submitWhileWaitingForIdle() async {
        await offPool {
            let workers = Workers(limit: 4)
            defer { workers.stop() }
            let gate = Locked(false)
            workers.submit { _ = gate.withLock(when: { $0 }, deadline: MonotonicClock.seconds() + 10) { _ in } }
            let waited = Locked<Bool?>(nil)
            let waiter = Thread {
                let idle = workers.waitUntilIdle(timeout: 10)
                waited.withLock { $0 = idle }
                waited.wakeWaiters()
            }
            waiter.start()
            usleep(50_000)  // the waiter is waiting now (or about to)
            let ran = Locked(false)
            workers.submit {
                ran.withLock { $0 = true }
                ran.wakeWaiters()
            }
            #expect(ran.withLock(when: { $0 }, deadline: MonotonicClock.seconds() + 10) { _ in true } == true)
            gate.withLock { $0 = true }
            gate.wakeWaiters()
            #expect(
                waited.withLock(when: { $0 != nil }, deadline: MonotonicClock.seconds() + 10) { $0 } == true)
        }
    }
}
#endif
