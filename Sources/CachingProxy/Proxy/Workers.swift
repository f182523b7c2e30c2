#if os(Linux)
import CacheSystem

/// Threads that may block (origin requests, large stored bodies, tunnels' connects): a pool
/// that grows up to `limit` threads and keeps idle ones for the next job. A job wakes one idle
/// thread, not all of them: after a burst that grew the pool to hundreds of threads, waking
/// every one for each job made a miss four times slower.
final class Workers: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var threads = 0
        var busy = 0
        var stopping = false
        /// Threads in ``waitUntilIdle(timeout:)``, which wait for something else than a job.
        var idleWaiters = 0

        var queued: Int { jobs.count - head }
    }

    private let state = Locked(State())
    private let limit: Int

    init(limit: Int) { self.limit = max(1, limit) }

    /// Runs `job` on a worker thread (queued when `limit` threads are busy).
    func submit(_ job: @escaping @Sendable () -> Void) {
        let (spawn, someoneWaitsForIdle) = state.withLock { state -> (Bool, Bool) in
            state.jobs.append(job)
            // Threads not running a job are waiting for one (or about to take one).
            let spawn = state.queued > state.threads - state.busy && state.threads < limit
            if spawn { state.threads += 1 }
            return (spawn, state.idleWaiters > 0)
        }
        // Every waiter but those in waitUntilIdle waits for a job, and any of them can run it.
        if someoneWaitsForIdle { state.wakeWaiters() } else { state.wakeOne() }
        if spawn {
            do {
                try SystemThread.detached(stackSize: 1 << 20) { [self] in run() }
            } catch {
                // No thread to spare: the job waits for one that runs; the next job tries again.
                state.withLock { $0.threads -= 1 }
            }
        }
    }

    /// Waits until no job is queued or running, for at most `timeout` seconds; `true` when idle.
    @discardableResult
    func waitUntilIdle(timeout: Double) -> Bool {
        let deadline = MonotonicClock.seconds() + timeout
        state.withLock { $0.idleWaiters += 1 }
        defer { state.withLock { $0.idleWaiters -= 1 } }
        return state.withLock(when: { $0.busy == 0 && $0.queued == 0 }, deadline: deadline) { _ in true } ?? false
    }

    /// Lets idle threads end; jobs still queued run first.
    func stop() {
        state.withLock { $0.stopping = true }
        state.wakeWaiters()
    }

    private func run() {
        while true {
            // The next job, or nil when stopping with nothing queued.
            let job = state.withLock(when: { $0.queued > 0 || $0.stopping }) { state -> (@Sendable () -> Void)? in
                guard state.queued > 0 else {
                    state.threads -= 1
                    return nil
                }
                let job = state.jobs[state.head]
                state.head += 1
                if state.head == state.jobs.count {
                    state.jobs.removeAll(keepingCapacity: true)
                    state.head = 0
                }
                state.busy += 1
                return job
            }
            guard let job = job ?? nil else { return }
            job()
            // Only waitUntilIdle waits for a job to end: wake it when the pool went idle.
            let idle = state.withLock { state in
                state.busy -= 1
                return state.busy == 0 && state.queued == 0 && state.idleWaiters > 0
            }
            if idle { state.wakeWaiters() }
        }
    }
}
#endif
