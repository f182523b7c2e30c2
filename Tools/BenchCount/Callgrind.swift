import CCallgrindHTTPCache
import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Callgrind's client requests; each does nothing when not under valgrind.
enum Callgrind {
    /// Whether this process runs under valgrind.
    static var isRunning: Bool { httpcache_running_on_valgrind() != 0 }

    /// Instruments code from here on (scripts/bench-check starts callgrind with
    /// `--instr-atstart=no`, so setup and warm-up run at full speed and uninstrumented).
    static func startInstrumentation() {
        if Callgrind.isRunning && httpcache_callgrind_headers() == 0 {
            FileHandle.standardError.write(
                Data("bench-count: built without valgrind/callgrind.h: nothing can be counted\n".utf8))
            exit(1)
        }
        httpcache_callgrind_start_instrumentation()
    }

    static func stopInstrumentation() { httpcache_callgrind_stop_instrumentation() }
}

/// The measured region: `operation(0)` … `operation(iterations - 1)`, with callgrind collecting
/// on this thread only (it starts with `--collect-atstart=no`; collection is per thread, so the
/// store's background threads are not counted).
@inline(never)
func countedRegion(iterations: Int, _ operation: (Int) -> Void) {
    httpcache_callgrind_toggle_collect()
    for index in 0..<iterations { operation(index) }
    httpcache_callgrind_toggle_collect()
}

/// ``countedRegion(iterations:_:)`` for an async operation. Collection is per thread, so the
/// operation must not suspend (a hit does not): this fails if the loop ended on another thread.
@inline(never)
func countedAsyncRegion(iterations: Int, _ operation: (Int) async throws -> Void) async throws {
    let thread = pthread_self()
    httpcache_callgrind_toggle_collect()
    for index in 0..<iterations { try await operation(index) }
    httpcache_callgrind_toggle_collect()
    guard pthread_equal(thread, pthread_self()) != 0 else {
        throw BenchFailure("the operation suspended and resumed on another thread: the count is not its own")
    }
}

/// Runs `body` in a detached task and waits for it on this thread (the main thread must not
/// run an async main under valgrind: see main.swift).
func runBlocking(_ body: @escaping @Sendable () async throws -> Void) throws {
    let outcome = Locked<Result<Void, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do {
            try await body()
            outcome.withLock { $0 = .success(()) }
        } catch {
            outcome.withLock { $0 = .failure(error) }
        }
        done.signal()
    }
    done.wait()
    try outcome.withLock { $0 }?.get()
}

/// Keeps a value alive so the optimizer cannot drop the work that produced it.
@inline(never)
func blackHole<T>(_ value: T) {
    withExtendedLifetime(value) {}
}

/// Why an operation could not be counted.
struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A fixed "now" for every clock the operations use: time-dependent branches (freshness, the
/// `Age` field, time-based flushes) take the same path in every run.
let fixedNow = Date().timeIntervalSince1970.rounded()

/// Runs `body` with a fresh directory whose name has the same length in every run (paths of
/// one length), and removes the directory afterwards.
func withScratchDirectory<Result>(_ label: String, _ body: (String) throws -> Result) throws -> Result {
    var template = Array((NSTemporaryDirectory() + "/bench-count-\(label)-XXXXXX").utf8CString)
    guard let created = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw BenchFailure("cannot create a directory under \(NSTemporaryDirectory())")
    }
    let path = String(cString: created)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}
