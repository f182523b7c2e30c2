import Foundation

/// Threads that may block (origin requests, large stored bodies, tunnels' connects): a pool
/// that grows up to `limit` threads and keeps idle ones for the next job.
final class Workers: @unchecked Sendable {
    /// Guards every property below.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var head = 0
    private var threads = 0
    private var idle = 0
    private var busy = 0
    private var stopping = false
    private let limit: Int

    init(limit: Int) { self.limit = max(1, limit) }

    /// Runs `job` on a worker thread (queued when `limit` threads are busy).
    func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        let spawn = jobs.count - head > idle && threads < limit
        if spawn { threads += 1 }
        condition.broadcast()
        condition.unlock()
        if spawn {
            let thread = Thread { [self] in run() }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Waits until no job is queued or running, for at most `timeout` seconds; `true` when idle.
    @discardableResult
    func waitUntilIdle(timeout: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while busy > 0 || head < jobs.count {
            if !condition.wait(until: deadline) { return false }
        }
        return true
    }

    /// Lets idle threads end; jobs still queued run first.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        condition.lock()
        while true {
            if head < jobs.count {
                let job = jobs[head]
                head += 1
                if head == jobs.count {
                    jobs.removeAll(keepingCapacity: true)
                    head = 0
                }
                busy += 1
                condition.unlock()
                job()
                condition.lock()
                busy -= 1
                condition.broadcast()
                continue
            }
            if stopping { break }
            idle += 1
            condition.wait()
            idle -= 1
        }
        threads -= 1
        condition.unlock()
    }
}
