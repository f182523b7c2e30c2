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

    /// The content of `body`, a `dcz` body (RFC 9842 §5) for `dictionary`, as PyPI's
    /// zstandard decodes it, after python's `hashlib` checked its header names the dictionary's
    /// SHA-256. Run by the checkers' Python (`scripts/setup --tests` makes it).
    public static func zstandardDecoded(_ body: [UInt8], dictionary: [UInt8]) async throws -> [UInt8] {
        try await withDictionary(dictionary) { path in
            let script = """
                import sys, hashlib, zstandard
                dictionary = open(sys.argv[1], "rb").read()
                data = sys.stdin.buffer.read()
                if data[:8] != bytes([0x5e, 0x2a, 0x4d, 0x18, 0x20, 0, 0, 0]): sys.exit("no dcz magic")
                if data[8:40] != hashlib.sha256(dictionary).digest(): sys.exit("the header names another dictionary")
                raw = zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
                sys.stdout.buffer.write(zstandard.ZstdDecompressor(dict_data=raw).decompressobj().decompress(data[40:]))
                """
            return try await run(checkersPython, ["-c", script, path], input: body)
        }
    }

    /// `content` as a `dcz` body for `dictionary` (RFC 9842 §5), made by PyPI's zstandard.
    public static func zstandardCompressed(_ content: [UInt8], dictionary: [UInt8]) async throws -> [UInt8] {
        try await withDictionary(dictionary) { path in
            let script = """
                import sys, hashlib, zstandard
                dictionary = open(sys.argv[1], "rb").read()
                raw = zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT)
                frame = zstandard.ZstdCompressor(level=19, dict_data=raw).compress(sys.stdin.buffer.read())
                header = bytes([0x5e, 0x2a, 0x4d, 0x18, 0x20, 0, 0, 0]) + hashlib.sha256(dictionary).digest()
                sys.stdout.buffer.write(header + frame)
                """
            return try await run(checkersPython, ["-c", script, path], input: content)
        }
    }

    /// The Python of the checkers' environment that `scripts/setup --tests` makes:
    /// `HTTPCACHE_CHECKERS`, or `.build/checkers`.
    public static var checkersPython: String {
        var checkers = ProcessInfo.processInfo.environment["HTTPCACHE_CHECKERS"] ?? ""
        if checkers.isEmpty {
            // Sources/CacheTestSupport/ is two levels below the repository.
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            checkers = root.appendingPathComponent(".build/checkers").path
        }
        return checkers + "/bin/python"
    }

    /// Runs `body` with the path of a file that holds `dictionary`.
    private static func withDictionary(
        _ dictionary: [UInt8], _ body: (String) async throws -> [UInt8]
    ) async throws -> [UInt8] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("dictionary-\(UUID().uuidString)").path
        try Data(dictionary).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        return try await body(path)
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
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = try FileHandle(forReadingFrom: inputURL)
        process.standardOutput = try FileHandle(forWritingTo: outputURL)
        process.standardError = try FileHandle(forWritingTo: errorURL)
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let errors = (try? String(contentsOf: errorURL, encoding: .utf8)) ?? ""
            throw Failure(description: "\(executable) failed (\(process.terminationStatus)): \(errors)")
        }
        return [UInt8](try Data(contentsOf: outputURL))
    }
}
