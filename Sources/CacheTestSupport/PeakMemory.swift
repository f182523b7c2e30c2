import CacheSystem
import Foundation

/// A child process run to its end, with its peak resident set size: the kernel's high-water
/// mark for its own memory (`VmHWM` in `/proc/PID/status`), read every 10 ms while it runs, so
/// all but its last moments count (the kernel may run the sampling thread less often on a busy
/// machine; the high-water mark keeps what happened between samples).
///
/// Not `wait4`'s `ru_maxrss`: a child spawned from a large process (a test bundle) inherits that
/// process's peak at `exec`, and reports it as its own.
public struct MeasuredRun: Sendable {
    /// The exit status.
    public var status: Int32
    /// Peak resident set size, KiB.
    public var peakKiB: Int
    /// Wall-clock seconds.
    public var seconds: Double
    public var stdout: String
    public var stderr: String

    /// Runs `executable arguments` with proxy variables removed from the environment (nothing
    /// leaves 127.0.0.1); its output goes through files in `directory`.
    public static func run(
        _ executable: String, _ arguments: [String], outputIn directory: String
    ) async throws -> MeasuredRun {
        let outPath = directory + "/measured-stdout-\(UUID().uuidString)"
        let errPath = directory + "/measured-stderr-\(UUID().uuidString)"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().hasSuffix("_proxy") }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let started = ContinuousClock.now
        // Sampled on a thread of its own: a task's sleep on the busy cooperative pool could
        // wake only after the child is gone. The exit is awaited without holding a thread.
        let peak = Locked(0)
        let status = try await process.runUntilExit { pid in
            // Without a thread to sample on, the peak stays 0: the caller's bound check fails.
            try? SystemThread.detached {
                while let sample = peakResidentKiB(of: pid) {
                    peak.withLock { $0 = max($0, sample) }
                    usleep(10_000)
                }
            }
        }
        let elapsed = ContinuousClock.now - started
        return MeasuredRun(
            status: status, peakKiB: peak.withLock { $0 },
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }

    /// Whether this process runs under ThreadSanitizer (`scripts/tsan`), and so do the
    /// executables built with it: its shadow memory multiplies every peak RSS, so a bound on
    /// memory says nothing there (the plain test run checks them).
    public static let underThreadSanitizer: Bool = {
        #if os(Linux)
        guard let program = dlopen(nil, RTLD_NOW) else { return false }
        defer { dlclose(program) }
        return dlsym(program, "__tsan_init") != nil
        #else
        return false
        #endif
    }()

    /// The peak resident set size (VmHWM) of a running process, in KiB; nil once it has exited.
    public static func peakResidentKiB(of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        return nil
    }
}
