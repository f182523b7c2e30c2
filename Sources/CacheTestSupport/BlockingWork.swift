import CacheSystem
import Foundation

/// Runs tests' blocking work (sockets, child processes, sleeps, thread joins) on threads of its
/// own, never on the cooperative pool.
///
/// Swift Testing runs every test, synchronous ones included, on the cooperative thread pool,
/// which has one thread per core: two on a 2-core machine. A test that blocks holds one of
/// them, and two such tests starve every async test of the run (timeouts, clocks that move
/// on). ``offPool(_:)`` runs a test's body on this executor instead. It is the same task, so
/// task-locals (the test being run, which `#expect` records issues against) stay in place.
///
/// Its threads are reused: a job goes to an idle thread, or to a new one when none is idle, so
/// a job that blocks never keeps another from running.
public final class BlockingWorkExecutor: TaskExecutor, Sendable {
    /// The executor tests share.
    public static let shared = BlockingWorkExecutor()

    private struct Queue {
        var jobs: [UnownedJob] = []
        /// Threads waiting for a job and not yet promised one.
        var idle = 0
    }

    private let queue = Locked(Queue())

    /// Marks its threads in their `threadDictionary` (a thread's name is no mark: corelibs
    /// reports the name the thread inherited from the one that made it).
    private static let threadMark = "BlockingWorkExecutor"

    /// Whether the caller runs in a task on another thread than this executor's: on the
    /// cooperative pool, where blocking stalls every other task (see ``requireOffPool(_:)``).
    public static var callerIsOnCooperativePool: Bool {
        withUnsafeCurrentTask { $0 != nil } && Thread.current.threadDictionary[threadMark] == nil
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let needsThread = queue.withLock { queue -> Bool in
            queue.jobs.append(job)
            guard queue.idle > 0 else { return true }
            queue.idle -= 1
            return false
        }
        if needsThread {
            // Without a thread to spare the job waits for the next thread this executor starts.
            try? SystemThread.detached(stackSize: 4 << 20) { [self] in work() }
        } else {
            queue.wakeWaiters()
        }
    }

    private func work() {
        Thread.current.threadDictionary[Self.threadMark] = true
        let executor = asUnownedTaskExecutor()
        while true {
            let job = queue.withLock(when: { !$0.jobs.isEmpty }) { $0.jobs.removeFirst() }
            job?.runSynchronously(on: executor)
            queue.withLock { $0.idle += 1 }
        }
    }
}

/// Runs `body`, which may block, off the cooperative pool (see ``BlockingWorkExecutor``).
///
/// ```swift
/// @Test func proxyAnswers() async throws {
///     try await offPool {
///         let client = try RawHTTPClient(port: port)   // blocking sockets are fine here
///         #expect(try client.readResponse().status == 200)
///     }
/// }
/// ```
public func offPool<Result>(_ body: () async throws -> Result) async rethrows -> Result {
    try await withTaskExecutorPreference(BlockingWorkExecutor.shared) { try await body() }
}

/// Runs synchronous `body`, which may block (`Thread.sleep` and all), off the cooperative pool.
public func offPool<Result>(_ body: () throws -> Result) async rethrows -> Result {
    try await withTaskExecutorPreference(BlockingWorkExecutor.shared) { try body() }
}

/// Throws unless the caller may block: it runs on ``BlockingWorkExecutor`` (inside
/// ``offPool(_:)``) or on a thread of its own, not in a task on the cooperative pool.
///
/// Test helpers that block for long (starting servers and processes, network round trips)
/// call it first, so a test that would stall the whole run fails at once, saying where.
public func requireOffPool(_ operation: String) throws(BlockingCallOnPool) {
    if BlockingWorkExecutor.callerIsOnCooperativePool { throw BlockingCallOnPool(operation: operation) }
}

/// A helper that blocks was called from a task on the cooperative pool.
public struct BlockingCallOnPool: Error, CustomStringConvertible {
    /// What was called, e.g. `RedisServer.start()`.
    public var operation: String

    public var description: String {
        "\(operation) blocks its thread and was called from a task on the cooperative pool, whose threads "
            + "(one per core) every async test of the run shares: wrap the call, or the test's body, in "
            + "`try await offPool { ... }`"
    }
}

extension ChildProcess {
    /// Starts the process and waits for its exit without holding a thread (its termination
    /// handler resumes the caller), unlike `waitUntilExit()`, which blocks one.
    /// - Parameters:
    ///   - timeout: Seconds after which the process, if still running, is sent SIGTERM.
    ///   - started: Called with its process identifier once it runs (to watch it meanwhile).
    /// - Returns: Its termination status.
    public func runUntilExit(timeout: Double? = nil, started: (Int32) -> Void = { _ in }) async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            terminationHandler = { finished in continuation.resume(returning: finished.terminationStatus) }
            do {
                try run()
            } catch {
                terminationHandler = nil
                continuation.resume(throwing: error)
                return
            }
            started(processIdentifier)
            if let timeout {
                DispatchQueue.global().asyncAfter(deadline: .now() + timeout) { [self] in
                    if isRunning { terminate() }
                }
            }
        }
    }
}
