import Foundation

/// Coded bodies made by programs other than ours, so the decoder is checked against the
/// formats and not against itself: python3's `zlib` and `gzip` modules, and Debian's `brotli`
/// command (the reference encoder; `scripts/setup --tests` installs it). Each runs a child
/// process, waited for off the cooperative pool (``offPool(_:)``).
public enum CodedBodies {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// `body` compressed by python3 with `expression`, in which `data` is the body (e.g.
    /// `gzip.compress(data)`, `zlib.compress(data)`).
    public static func python(_ expression: String, _ body: [UInt8]) async throws -> [UInt8] {
        let script =
            "import sys, gzip, zlib, hashlib, base64\ndata = sys.stdin.buffer.read()\nsys.stdout.buffer.write(\(expression))"
        return try await run("/usr/bin/python3", ["-c", script], input: body)
    }

    /// A `Content-Digest` / `Repr-Digest` member (RFC 9530 §2, §3) for `body`, `sha-256=:…:` or
    /// `sha-512=:…:`, hashed by python3's `hashlib`, so the check is against another
    /// implementation than ours.
    public static func digestMember(_ algorithm: String, _ body: [UInt8]) async throws -> String {
        let function = algorithm.replacingOccurrences(of: "-", with: "")
        let digest = try await python("base64.b64encode(hashlib.\(function)(data).digest())", body)
        return "\(algorithm)=:\(String(decoding: digest, as: UTF8.self)):"
    }

    /// `count` zero bytes compressed by python3, streamed (never held whole) through
    /// `compressor` (a `zlib.compressobj(...)` expression).
    public static func pythonZeros(_ count: Int, compressor: String) async throws -> [UInt8] {
        let script = """
            import sys, zlib
            c = \(compressor)
            block = bytes(1 << 20)
            for _ in range(\(count >> 20)):
                sys.stdout.buffer.write(c.compress(block))
            sys.stdout.buffer.write(c.flush())
            """
        return try await run("/usr/bin/python3", ["-c", script], input: [])
    }

    /// `body` compressed by Debian's `brotli` command.
    public static func brotli(_ body: [UInt8]) async throws -> [UInt8] {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/brotli") else {
            throw Failure(description: "/usr/bin/brotli is missing: run `scripts/setup --tests` (Debian's brotli)")
        }
        return try await run("/usr/bin/brotli", ["-c", "-"], input: body)
    }

    /// Text that compresses as real pages do: words repeated with variation.
    public static func text(_ count: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 64)
        var line = 0
        while bytes.count < count {
            bytes += Array("line \(line): the quick brown fox \(line * 7919 % 1000) jumps over the lazy dog\n".utf8)
            line += 1
        }
        return Array(bytes.prefix(count))
    }

    private static func run(_ executable: String, _ arguments: [String], input: [UInt8]) async throws -> [UInt8] {
        try await offPool { try runBlocking(executable, arguments, input: input) }
    }

    private static func runBlocking(_ executable: String, _ arguments: [String], input: [UInt8]) throws -> [UInt8] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("coded-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let inputURL = directory.appendingPathComponent("in")
        let outputURL = directory.appendingPathComponent("out")
        let errorURL = directory.appendingPathComponent("err")
        try Data(input).write(to: inputURL)
        _ = FileManager.default.createFile(atPath: outputURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errorURL.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = try FileHandle(forReadingFrom: inputURL)
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        try process.runSerialized()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let errors = (try? String(contentsOf: errorURL, encoding: .utf8)) ?? ""
            throw Failure(description: "\(executable) failed (\(process.terminationStatus)): \(errors)")
        }
        return [UInt8](try Data(contentsOf: outputURL))
    }
}
