import CacheLocking
import Foundation

/// A child process run to its end, with its peak resident set size: the kernel's high-water
/// mark for its own memory (`VmHWM` in `/proc/PID/status`), read every 10 ms while it runs, so
/// all but its last moments count.
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().hasSuffix("_proxy") }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        // Its exit is awaited without holding a thread (no `waitUntilExit()`).
        let exited = Locked<Int32?>(nil)
        process.terminationHandler = { finished in exited.withLock { $0 = finished.terminationStatus } }
        let started = ContinuousClock.now
        try process.run()
        var peak = 0
        var status: Int32?
        while status == nil {
            if let sample = peakResidentKiB(of: process.processIdentifier) { peak = max(peak, sample) }
            status = exited.withLock { $0 }
            if status == nil { try await Task.sleep(for: .milliseconds(10)) }
        }
        let elapsed = ContinuousClock.now - started
        return MeasuredRun(
            status: status ?? -1, peakKiB: peak,
            seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
            stdout: (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
    }

    /// The peak resident set size (VmHWM) of a running process, in KiB; nil once it has exited.
    public static func peakResidentKiB(of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
            return Int(line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        return nil
    }
}
