import CacheTestSupport
import Foundation

/// A fresh directory for one WARC test's files, removed when released.
final class WARCTestDirectory {
    let path: String

    init() {
        path = NSTemporaryDirectory() + "/warc-test-\(UInt64.random(in: 0...UInt64.max))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// The path of `name` in the directory.
    func file(_ name: String) -> String { path + "/" + name }
}

/// The independent checkers `scripts/setup --tests` installs: a Python virtual environment with
/// PyPI's warcio, in `.build/checkers` at the repository root (found from this file's path:
/// Tests/OfflinePagesTests/ is two levels below it). `HTTPCACHE_CHECKERS` names another such
/// environment, for running these tests from a copy of the package elsewhere.
enum WARCCheckers {
    /// The checkers' directory (`.build/checkers`).
    static var directory: String {
        if let override = ProcessInfo.processInfo.environment["HTTPCACHE_CHECKERS"], !override.isEmpty {
            return override
        }
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // OfflinePagesTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // the repository
        return root.appendingPathComponent(".build/checkers").path
    }

    /// The path of the checker executable `name` (`warcio`, `python`), or an error saying how to
    /// install it.
    static func executable(_ name: String) throws -> String {
        let path = directory + "/bin/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else { throw Missing(path: path) }
        return path
    }

    struct Missing: Error, CustomStringConvertible {
        var path: String
        var description: String {
            "\(path) is missing: run `scripts/setup --tests` at the repository root to install the test checkers"
                + " (PyPI's warcio in .build/checkers)"
        }
    }
}

/// What a finished process printed and how it exited.
struct WARCProcessResult {
    var status: Int32
    var output: String
    var errorOutput: String
}

/// Runs `executable` with `arguments` to completion (its output goes through files, so no pipe
/// can fill up), waiting for its exit without holding a thread of the cooperative pool.
func runWARCProcess(_ executable: String, _ arguments: [String]) async throws -> WARCProcessResult {
    let directory = WARCTestDirectory()
    let outPath = directory.file("stdout")
    let errPath = directory.file("stderr")
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = out
    process.standardError = err
    let status = try await process.runUntilExit()
    try out.close()
    try err.close()
    return WARCProcessResult(
        status: status,
        output: String(decoding: try Data(contentsOf: URL(fileURLWithPath: outPath)), as: UTF8.self),
        errorOutput: String(decoding: try Data(contentsOf: URL(fileURLWithPath: errPath)), as: UTF8.self))
}

/// The bytes of the file at `path`.
func warcFileBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Writes `bytes` to `path`.
func writeWARCFile(_ path: String, _ bytes: some Sequence<UInt8>) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}
