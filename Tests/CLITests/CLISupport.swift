import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// What one run of the `httpcache` binary produced.
struct CLIRun: Sendable {
    var status: Int32
    var stdoutData: Data
    var stderr: String

    var stdout: String { String(decoding: stdoutData, as: UTF8.self) }

    /// Standard output parsed as one JSON object.
    func jsonObject(sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
        let value = try JSONSerialization.jsonObject(with: stdoutData)
        return try #require(
            value as? [String: Any], "stdout is not one JSON object: \(stdout)", sourceLocation: sourceLocation)
    }

    /// Standard output parsed as one JSON array of objects.
    func jsonArray(sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
        let value = try JSONSerialization.jsonObject(with: stdoutData)
        return try #require(
            value as? [[String: Any]], "stdout is not a JSON array: \(stdout)", sourceLocation: sourceLocation)
    }

    /// The lines of standard error.
    var stderrLines: [Substring] { stderr.split(separator: "\n") }
}

/// A loopback origin and a fresh cache directory for one test, and running the built
/// `httpcache` binary against them. The origin stops and the directory is removed when the
/// harness is released.
final class CLIHarness: @unchecked Sendable {
    let origin: LoopbackOrigin
    let directory = TemporaryDirectory("httpcache-cli-test")
    /// The cache directory (inside ``directory``, so `--cache-dir` creating it is exercised too).
    var cacheDirectory: String { directory.path + "/cache" }

    init() throws {
        origin = try LoopbackOrigin()
    }

    deinit { origin.stop() }

    /// `origin.url(path)` as a string.
    func url(_ path: String) -> String { origin.url(path).absoluteString }

    /// Routes `path` to a fixed `200` response.
    func serve(_ path: String, _ headers: [(String, String)], body: String = "body") {
        origin.route(path) { _ in LoopbackOrigin.Response(headers: headers, body: body) }
    }

    /// Routes `path` to a response with `etag` that answers a matching `If-None-Match` with `304`.
    func serveValidated(_ path: String, cacheControl: String, etag: String, body: String) {
        origin.route(path) { request in
            let headers = [("Cache-Control", cacheControl), ("ETag", etag), ("Content-Type", "text/plain")]
            if request.header("If-None-Match") == etag {
                return LoopbackOrigin.Response(status: 304, headers: headers)
            }
            return LoopbackOrigin.Response(headers: headers, body: body)
        }
    }

    /// Runs `httpcache arguments`, with `--cache-dir` added after the subcommand when
    /// `cacheDir` is set, and `HTTPCACHE_DIR` pointing at the same directory.
    func run(_ arguments: [String], cacheDir: Bool = true) async throws -> CLIRun {
        var full = arguments
        if cacheDir, !arguments.isEmpty { full.insert(contentsOf: ["--cache-dir", cacheDirectory], at: 1) }
        return try await CLIProcess.run(full, environment: ["HTTPCACHE_DIR": cacheDirectory], in: directory.path)
    }
}

/// Runs the built `httpcache` executable as a child process.
enum CLIProcess {
    /// Runs `httpcache arguments` with `environment` added (proxies removed, so nothing leaves
    /// 127.0.0.1), killing it after `timeout` seconds.
    ///
    /// - Parameter executable: Another program to run instead (`script`, to give `httpcache` a
    ///   terminal).
    static func run(
        executable: String? = nil, _ arguments: [String], environment: [String: String] = [:], in directory: String,
        timeout: Double = 30
    ) async throws -> CLIRun {
        let executable = try executable ?? BuiltExecutable.path("httpcache")
        let id = UUID().uuidString
        let outPath = directory + "/stdout-\(id)"
        let errPath = directory + "/stderr-\(id)"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        defer {
            try? FileManager.default.removeItem(atPath: outPath)
            try? FileManager.default.removeItem(atPath: errPath)
        }
        let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = loopbackEnvironment(adding: environment)
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = out
        process.standardError = err
        let status = try await process.runUntilExit(timeout: timeout)
        try out.close()
        try err.close()
        return CLIRun(
            status: status, stdoutData: FileManager.default.contents(atPath: outPath) ?? Data(),
            stderr: String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self))
    }
}

extension CLIProcess {
    /// This process's environment without proxies, so nothing leaves 127.0.0.1, with `environment` added.
    static func loopbackEnvironment(adding environment: [String: String] = [:]) -> [String: String] {
        var variables = ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().hasSuffix("_proxy") }
        variables["no_proxy"] = "127.0.0.1,localhost"
        for (name, value) in environment { variables[name] = value }
        return variables
    }
}

/// The fields of a `--json` response as name/value pairs.
func cliHeaders(_ object: [String: Any]) -> [(String, String)] {
    (object["headers"] as? [[String]] ?? []).compactMap { $0.count == 2 ? ($0[0], $0[1]) : nil }
}

/// The first value of field `name` in a `--json` response.
func cliHeader(_ object: [String: Any], _ name: String) -> String? {
    cliHeaders(object).first { $0.0.lowercased() == name.lowercased() }?.1
}

/// A running `httpcache` whose standard output is a pipe, read as it arrives (as `| jq` or
/// `$(…)` read it), with proxies removed so nothing leaves 127.0.0.1.
final class PipedRun: @unchecked Sendable {
    private let process = ChildProcess()
    private let received = Locked(Data())

    /// Starts `httpcache arguments` with `environment` added; its standard error goes to the
    /// file `standardError` (created), or nowhere.
    init(_ arguments: [String], standardError: String? = nil, environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: try BuiltExecutable.path("httpcache"))
        process.arguments = arguments
        process.environment = CLIProcess.loopbackEnvironment(adding: environment)
        let pipe = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = pipe
        if let standardError {
            _ = FileManager.default.createFile(atPath: standardError, contents: nil)
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: standardError))
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        // Read by a thread of its own until the end, not by a `readabilityHandler`: that is a
        // Dispatch read source, which the FileHandle's close (when the run is released) cancels
        // and then closes the descriptor without waiting for the cancellation, a race with
        // Dispatch's event loop (a whole-suite run crashed in `_dispatch_event_loop_drain`).
        let reader = pipe.fileHandleForReading
        do {
            try SystemThread.detached(name: "piped-run", stackSize: 256 << 10) { [received] in
                while case let data = reader.availableData, !data.isEmpty { received.withLock { $0.append(data) } }
            }
        } catch {
            process.terminate()
            throw error
        }
    }

    deinit { if process.isRunning { process.terminate() } }

    /// What standard output has delivered so far.
    var stdout: Data { received.withLock { $0 } }

    var isRunning: Bool { process.isRunning }

    /// The process's id (for /proc/PID/status).
    var processIdentifier: Int32 { process.processIdentifier }

    /// Sends signal `number` to the process.
    func signal(_ number: Int32) { process.send(signal: number) }

    /// Whether `done(stdout)` became true within `seconds`.
    func waitForOutput(seconds: Double, until done: (Data) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if done(stdout) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return done(stdout)
    }

    /// The exit status, or `nil` (and the process terminated) when it has not exited within `seconds`.
    func exitStatus(seconds: Double) async -> Int32? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while process.isRunning && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        guard !process.isRunning else {
            process.terminate()
            return nil
        }
        return process.terminationStatus
    }
}
