import CacheTestSupport
import Foundation
import Testing

/// ``ChildProcess``: the children of tests, the soak and the benchmarks, started with
/// `posix_spawn` instead of swift-corelibs-foundation's `Process`, which over-reads
/// `/proc/self/fd` in a process with many descriptors open (a CI run died of it) and lets
/// children inherit descriptors other threads open meanwhile.
@Suite("Test support: child processes")
struct ChildProcessTests {
    /// Runs `/bin/sh -c script` and returns its standard output and the process.
    private func shell(
        _ script: String, input: String? = nil, configure: (ChildProcess) -> Void = { _ in }
    ) throws -> (output: String, process: ChildProcess) {
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/bin/sh")
        child.arguments = ["-c", script]
        let output = Pipe()
        child.standardOutput = output
        let stdin = Pipe()
        if input != nil { child.standardInput = stdin }
        configure(child)
        try child.run()
        if let input {
            try stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8))
            try stdin.fileHandleForWriting.close()
        }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        child.waitUntilExit()
        return (text, child)
    }

    @Test("a child started while this process holds 1,600 descriptors has only its three standard streams")
    func aChildInheritsOnlyItsStandardStreams() async throws {
        try await offPool {
            // More than fill one `readdir` buffer of /proc/self/fd (about 1,360 entries): where
            // Foundation's Process read past that buffer's end. The suites running beside this
            // one hold hundreds to thousands already: only the rest is opened, and never within
            // 1,000 of the limit, so that no other test runs out.
            let alreadyOpen = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            let count = max(0, min(1_600 - alreadyOpen, Int(limit.rlim_cur) - alreadyOpen - 1_000))
            let held = (0..<count).map { _ in open("/dev/null", O_RDONLY) }
            defer { for fd in held where fd >= 0 { close(fd) } }
            #expect(held.allSatisfy { $0 >= 0 })
            // A pipe made without close-on-exec, as `Pipe()` makes it.
            let unrelated = Pipe()
            #expect(fcntl(unrelated.fileHandleForWriting.fileDescriptor, F_GETFD) & FD_CLOEXEC == 0)
            for _ in 0..<20 {
                // `ls` lists its own descriptor of the directory too: 0, 1, 2 and one more.
                let (listing, child) = try shell("ls /proc/self/fd")
                let descriptors = listing.split(separator: "\n").compactMap { Int($0) }
                #expect(descriptors.count == 4 && descriptors.prefix(3) == [0, 1, 2], "\(descriptors.prefix(10))")
                #expect(child.terminationStatus == 0 && child.terminationReason == .exit)
            }
        }
    }

    @Test("exit status, the signal that ended a child, standard input, the environment and the directory")
    func statusSignalsAndSetup() async throws {
        try await offPool {
            let exited = try shell("exit 7").process
            #expect(exited.terminationStatus == 7 && exited.terminationReason == .exit && !exited.isRunning)

            let echoed = try shell("tr a-z A-Z", input: "through the pipes").output
            #expect(echoed == "THROUGH THE PIPES")

            let directory = TemporaryDirectory()
            let setup = try shell("printf '%s %s' \"$GREETING\" \"$(pwd -P)\"") { child in
                child.environment = ["GREETING": "hello", "PATH": "/usr/bin:/bin"]
                child.currentDirectoryURL = URL(fileURLWithPath: directory.path)
            }
            let resolved = realpath(directory.path, nil).map { pointer in
                defer { free(pointer) }
                return String(cString: pointer)
            }
            #expect(setup.output == "hello \(resolved ?? directory.path)")

            // Its own process group, no signal blocked even when the launching thread blocks
            // SIGTERM (as Dispatch's worker threads do).
            var blocked = sigset_t()
            sigemptyset(&blocked)
            sigaddset(&blocked, SIGTERM)
            var saved = sigset_t()
            pthread_sigmask(SIG_BLOCK, &blocked, &saved)
            // `exec`: the shell's own mask (it blocks every signal for a moment around a fork).
            let group = try shell("cut -d' ' -f5 /proc/$$/stat; echo $$; exec grep SigBlk /proc/self/status").output
            pthread_sigmask(SIG_SETMASK, &saved, nil)
            let lines = group.split(separator: "\n")
            #expect(lines.count == 3 && lines[0] == lines[1], "\(group)")
            #expect(lines.last == "SigBlk:\t0000000000000000", "\(group)")

            let sleeper = ChildProcess()
            sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
            sleeper.arguments = ["60"]
            sleeper.standardOutput = FileHandle.nullDevice
            let handled = DispatchSemaphore(value: 0)
            sleeper.terminationHandler = { ended in
                #expect(!ended.isRunning)
                handled.signal()
            }
            try sleeper.run()
            #expect(sleeper.isRunning && sleeper.processIdentifier > 0)
            sleeper.terminate()
            sleeper.waitUntilExit()
            #expect(sleeper.terminationReason == .uncaughtSignal && sleeper.terminationStatus == SIGTERM)
            // Ended and reaped: no signal goes to its identifier any more (another process's, maybe).
            #expect(!sleeper.send(signal: SIGKILL))
            #expect(handled.wait(timeout: .now() + 30) == .success)
        }
    }

    @Test("a missing executable and a second run() throw, saying what")
    func failuresSayWhat() async throws {
        try await offPool {
            let missing = ChildProcess()
            missing.executableURL = URL(fileURLWithPath: "/nonexistent/httpcache-test")
            let error = #expect(throws: ChildProcessError.self) { try missing.run() }
            #expect(error?.description == "could not start /nonexistent/httpcache-test: No such file or directory")
            #expect(!missing.isRunning)
            missing.waitUntilExit()  // returns at once: it never started

            let twice = try shell("true").process
            let again = #expect(throws: ChildProcessError.self) { try twice.run() }
            #expect(again?.description.contains("twice") == true)
        }
    }
}
