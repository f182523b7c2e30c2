import CacheSystem

/// Runs one command's task on the main thread, the thread that calls ``run(_:)``: its jobs,
/// and those of the default actors and child tasks it reaches, which inherit the task's executor
/// preference (SE-0417).
///
/// A short command (a hit, `ls`, `show`, `stats`) is a few milliseconds of work in a row. Run
/// on the global concurrent pool, it made libdispatch start two worker threads and a manager
/// thread, and the main thread wait for the task on a semaphore: a thread handed the work and
/// another woke to take it back, at the start and at the end, each hand-over a wait for a core
/// when the machine is busy. Here the main thread runs the jobs itself and sleeps only while
/// the task waits for something outside it (the origin, a thread of the store).
///
/// A job that blocks blocks the whole command: ``Commands/runsOnMainThread(_:)`` keeps the
/// commands that run servers or several transfers at once (`serve`, `demo`, `top`, `save`,
/// `packs`, `import`) on the pool.
final class MainThreadExecutor: TaskExecutor, Sendable {
    private struct Queue {
        var jobs: [UnownedJob] = []
        var finished = false
    }

    private let queue = Locked(Queue())

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.withLock { $0.jobs.append(job) }
        // Only ever one thread waits: the one in run(_:).
        queue.wakeOne()
    }

    /// Runs `operation` in a task whose jobs run on the calling thread, and returns its result
    /// once it has finished.
    static func run<Result: Sendable>(_ operation: @escaping @Sendable () async -> Result) -> Result {
        let executor = MainThreadExecutor()
        let result = Locked<Result?>(nil)
        Task(executorPreference: executor) {
            let value = await operation()
            result.withLock { $0 = value }
            executor.queue.withLock { $0.finished = true }
        }
        let unowned = executor.asUnownedTaskExecutor()
        while true {
            let next = executor.queue.withLock(when: { $0.finished || !$0.jobs.isEmpty }) { queue in
                queue.finished ? nil : queue.jobs.removeFirst()
            }
            guard let job = next ?? nil else { break }
            job.runSynchronously(on: unowned)
        }
        // Set before `finished`, in the same task.
        return result.withLock { $0! }
    }
}
