import Foundation

#if canImport(Darwin)
/// Apple's `Process` has neither of the faults ``ChildProcess`` avoids on Linux.
public typealias ChildProcess = Process

extension Process {
    /// Sends `number` to the process if it runs; whether it was sent (as ``ChildProcess`` on Linux).
    @discardableResult
    public func send(signal number: Int32) -> Bool { isRunning && kill(processIdentifier, number) == 0 }
}
#else
import CEpollHTTPCache
import CacheSystem
import Glibc

/// A child process started with `posix_spawn`, with the part of `Foundation.Process`'s interface
/// that the tests, the soak and the benchmarks use (set it up, ``run()``, wait, signal).
///
/// swift-corelibs-foundation's `Process` is unsafe in a process as busy as a test run:
/// - To close the child's other descriptors it lists `/proc/self/fd`, copying 256 bytes of each
///   entry's name whatever its length: past the end of `readdir`'s buffer when the listing fills
///   it (about 1,360 open descriptors), a `SIGSEGV` when that buffer ends a mapping
///   (swiftlang/swift-corelibs-foundation#5472). A CI run of the suite died so, in `memmove`
///   under `findMaximumOpenFromProcSelfFD`, with about 1,400 descriptors open.
/// - It makes the socket by which it learns of a child's exit, and `Pipe()` its pairs, without
///   close-on-exec, so a child launched meanwhile on another thread inherits them (#4795): a
///   child's exit went unseen, and a reader waited for an end of file that never came.
///
/// Here the child closes every descriptor above its three standard streams itself as it starts
/// (`posix_spawn_file_actions_addclosefrom_np`, glibc 2.34), whatever other threads open
/// meanwhile, and a thread of its own waits for its exit with `waitpid`.
public final class ChildProcess: @unchecked Sendable {
    private struct Setup {
        var executableURL: URL?
        var arguments: [String]?
        var environment: [String: String]?
        var currentDirectoryURL: URL?
        var standardInput: Any?
        var standardOutput: Any?
        var standardError: Any?
        var terminationHandler: (@Sendable (ChildProcess) -> Void)?
    }

    /// What `waitpid` said of the child, once it ended.
    private enum Life {
        case notStarted
        case running(pid_t)
        case ended(pid_t, waitStatus: Int32)
    }

    private let setup = Locked(Setup())
    private let life = Locked(Life.notStarted)
    private let ended = DispatchGroup()

    public init() {}

    /// The executable to start (its path, not looked up in `PATH`).
    public var executableURL: URL? {
        get { setup.withLock { $0.executableURL } }
        set { setup.withLock { $0.executableURL = newValue } }
    }

    /// The arguments after the executable's path.
    public var arguments: [String]? {
        get { setup.withLock { $0.arguments } }
        set { setup.withLock { $0.arguments = newValue } }
    }

    /// The child's whole environment; `nil` for this process's.
    public var environment: [String: String]? {
        get { setup.withLock { $0.environment } }
        set { setup.withLock { $0.environment = newValue } }
    }

    /// The directory the child starts in; `nil` for this process's.
    public var currentDirectoryURL: URL? {
        get { setup.withLock { $0.currentDirectoryURL } }
        set { setup.withLock { $0.currentDirectoryURL = newValue } }
    }

    /// A `Pipe` (the child reads its reading end) or a `FileHandle`; `nil` for this process's.
    public var standardInput: Any? {
        get { setup.withLock { $0.standardInput } }
        set { setup.withLock { $0.standardInput = newValue } }
    }

    /// A `Pipe` (the child writes its writing end) or a `FileHandle`; `nil` for this process's.
    public var standardOutput: Any? {
        get { setup.withLock { $0.standardOutput } }
        set { setup.withLock { $0.standardOutput = newValue } }
    }

    /// A `Pipe` (the child writes its writing end) or a `FileHandle`; `nil` for this process's.
    public var standardError: Any? {
        get { setup.withLock { $0.standardError } }
        set { setup.withLock { $0.standardError = newValue } }
    }

    /// Called once, on the thread that saw the child end, after ``waitUntilExit()`` returns.
    public var terminationHandler: (@Sendable (ChildProcess) -> Void)? {
        get { setup.withLock { $0.terminationHandler } }
        set { setup.withLock { $0.terminationHandler = newValue } }
    }

    /// The child's process identifier; 0 before ``run()``.
    public var processIdentifier: Int32 {
        life.withLock { life in
            switch life {
            case .notStarted: 0
            case .running(let pid), .ended(let pid, _): pid
            }
        }
    }

    /// Whether the child was started and has not ended.
    public var isRunning: Bool {
        life.withLock { life in
            if case .running = life { return true }
            return false
        }
    }

    /// The child's exit status, or the signal that ended it (see ``terminationReason``); -1
    /// while it runs or before it started.
    public var terminationStatus: Int32 {
        guard let status = waitStatus else { return -1 }
        return signalled(status) ? status & 0x7f : (status >> 8) & 0xff
    }

    /// Whether the child exited or a signal ended it; `.exit` while it runs.
    public var terminationReason: Process.TerminationReason {
        waitStatus.map { signalled($0) ? .uncaughtSignal : .exit } ?? .exit
    }

    private var waitStatus: Int32? {
        life.withLock { life in
            if case .ended(_, let status) = life { return status }
            return nil
        }
    }

    private func signalled(_ status: Int32) -> Bool { (status & 0x7f) != 0 && (status & 0x7f) != 0x7f }

    /// Starts the child.
    /// - Throws: ``ChildProcessError`` when it cannot start (no executable set, `posix_spawn`
    ///   failed, e.g. `ENOENT`), or when no thread can be made to wait for it (it is then killed).
    public func run() throws {
        let setup = setup.withLock { $0 }
        guard case .notStarted = life.withLock({ $0 }) else {
            throw ChildProcessError("run() was called twice on one ChildProcess")
        }
        guard let executable = setup.executableURL?.path else {
            throw ChildProcessError("run() was called with no executableURL set")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts with no signal blocked and every signal's default action, whatever
        // the launching thread blocks (Dispatch's worker threads block SIGTERM, SIGHUP, …).
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigdefault(&attributes, &all)
        // A process group of its own, as Foundation's children have: killing the group
        // (`kill(-pid, …)`) ends the child's own children too, and never this process.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        var childEnds: [FileHandle] = []
        for (stream, target) in [(setup.standardInput, 0), (setup.standardOutput, 1), (setup.standardError, 2)] {
            switch stream {
            case nil:
                continue
            case let pipe as Pipe:
                let end = target == 0 ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                posix_spawn_file_actions_adddup2(&actions, end.fileDescriptor, Int32(target))
                if !childEnds.contains(where: { $0 === end }) { childEnds.append(end) }
            case let handle as FileHandle where handle.fileDescriptor < 0:
                // `FileHandle.nullDevice` has no descriptor of its own.
                posix_spawn_file_actions_addopen(&actions, Int32(target), "/dev/null", O_RDWR, 0)
            case let handle as FileHandle:
                posix_spawn_file_actions_adddup2(&actions, handle.fileDescriptor, Int32(target))
            default:
                throw ChildProcessError("a standard stream of \(executable) is neither a Pipe nor a FileHandle")
            }
        }
        if let directory = setup.currentDirectoryURL {
            posix_spawn_file_actions_addchdir_np(&actions, directory.path)
        }
        posix_spawn_file_actions_addclosefrom_np(&actions, 3)

        let argv = [executable] + (setup.arguments ?? [])
        let environment = (setup.environment ?? ProcessInfo.processInfo.environment).map { "\($0)=\($1)" }
        var spawnedPID = pid_t()
        let spawned = withCStrings(argv) { argv in
            withCStrings(environment) { environment in
                posix_spawn(&spawnedPID, executable, &actions, &attributes, argv, environment)
            }
        }
        let pid = spawnedPID
        guard spawned == 0 else {
            throw ChildProcessError("could not start \(executable): \(String(cString: strerror(spawned)))")
        }
        // The child has its copies; the parent's would keep a reader from ever seeing the end.
        for end in childEnds { try? end.close() }
        ended.enter()
        life.withLock { $0 = .running(pid) }
        do {
            try SystemThread.detached(name: "child-wait", stackSize: 256 << 10) { [self] in waitForEnd(of: pid) }
        } catch {
            kill(pid, SIGKILL)
            waitForEnd(of: pid)
            throw ChildProcessError("started \(executable) but could not wait for it (\(error)); killed it")
        }
    }

    private func waitForEnd(of pid: pid_t) {
        // Waits without reaping, then reaps under the lock ``send(signal:)`` takes: a signal never
        // reaches a process that was handed the identifier after this child's.
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        life.withLock { life in
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, 0) } while result == -1 && errno == EINTR
            // waitpid fails only if something else reaped the child; its status is then unknown.
            life = .ended(pid, waitStatus: result == pid ? status : 0x7f00)
        }
        let handler = setup.withLock { setup in
            defer { setup.terminationHandler = nil }
            return setup.terminationHandler
        }
        ended.leave()
        handler?(self)
    }

    /// Blocks until the child ended; returns at once if it never started.
    public func waitUntilExit() {
        guard case .notStarted = life.withLock({ $0 }) else {
            ended.wait()
            return
        }
    }

    /// Sends SIGTERM to the child if it runs.
    public func terminate() { send(signal: SIGTERM) }

    /// Sends SIGINT to the child if it runs.
    public func interrupt() { send(signal: SIGINT) }

    /// Sends `number` to the child if it runs; whether it was sent.
    ///
    /// Never `kill(processIdentifier, …)` instead: once the child ended and was reaped, its
    /// identifier may already be another process's (Linux reuses them, 32,768 by default, and
    /// every thread of a busy test run takes one too).
    @discardableResult
    public func send(signal number: Int32) -> Bool {
        life.withLock { life in
            guard case .running(let pid) = life else { return false }
            return kill(pid, number) == 0
        }
    }
}

/// Why a ``ChildProcess`` did not start.
public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) { self.description = description }
}

/// Calls `body` with a `NULL`-terminated array of C strings copied from `strings`.
private func withCStrings<Result>(
    _ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Result
) -> Result {
    let copies = strings.map { strdup($0) } + [nil]
    defer { for copy in copies { free(copy) } }
    return copies.withUnsafeBufferPointer { body($0.baseAddress!) }
}
#endif
