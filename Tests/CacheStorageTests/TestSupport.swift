import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation

@testable import CacheStorage

/// Helpers shared by the store tests.
enum StoreTestSupport {
    /// A new empty directory under the system temporary directory, 0700 (a cache directory
    /// must not be writable by others, whatever the umask).
    static func makeDirectory(_ name: String) -> String {
        let path = NSTemporaryDirectory() + "/cachestorage-\(name)-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(
            atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return path
    }

    static func removeDirectory(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// The `StorageStress` executable built next to the test bundle.
    static func stressExecutable() throws -> String { try BuiltExecutable.path("StorageStress") }

    /// A disk store on `directory` whose batches stay open for `latency` seconds, written
    /// behind (``DiskStore/Configuration/writesBehind``) or not.
    static func openStore(_ directory: String, latency: Double = 600, writesBehind: Bool = false) throws
        -> DiskStore
    {
        var configuration = DiskStore.Configuration(directory: directory, log: { _ in })
        configuration.batchLatency = latency
        configuration.writesBehind = writesBehind
        return try DiskStore(configuration)
    }

    /// The size of the file at `path` in bytes; 0 when there is none.
    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    /// Writes `count` stress entries of 16 KB (inline bodies: some five WAL frames each, 100 MB
    /// of frames for 5,000) one after the other, without a pause; returns the largest the WAL
    /// of `directory`'s index was, looked at every 100 writes and once flushed, and the last entry.
    static func largestWAL(writing count: Int, into store: DiskStore, directory: String) throws -> (
        bytes: Int, last: StoredEntry
    ) {
        let wal = directory + "/index.sqlite-wal"
        var largest = 0
        var last = try write(store, key: 1, generation: 0, size: 16_000)
        for key in 2...count {
            last = try write(store, key: key, generation: 0, size: 16_000)
            if key % 100 == 0 { largest = max(largest, fileSize(wal)) }
        }
        try store.flush()
        return (max(largest, fileSize(wal)), last)
    }

    /// A stress entry's head: its body is derived from its URL.
    static func head(key: Int, generation: Int, size: Int) -> EntryHead {
        StressBodies.head(key: key, generation: generation, size: size)
    }

    /// Writes a stress entry in 7,000-byte chunks.
    @discardableResult
    static func write(_ store: some CacheStore, key: Int, generation: Int, size: Int) throws(StorageError)
        -> StoredEntry
    {
        try StressBodies.write(into: store, key: key, generation: generation, size: size)
    }

    /// The body an entry must have.
    static func expectedBody(_ entry: StoredEntry) -> [UInt8]? { StressBodies.expectedBody(entry) }

    /// Polls `condition` every 10 ms for up to `seconds`: whether it held by then.
    static func eventually(within seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = MonotonicClock.seconds() + seconds
        while MonotonicClock.seconds() < deadline {
            if try condition() { return true }
            usleep(10_000)
        }
        return try condition()
    }

    /// Collects log messages.
    final class Log: Sendable {
        private let messages = Locked<[String]>([])
        /// A copy with storage of its own, as `LoopbackOrigin.requests` hands out (it says why).
        var all: [String] { messages.withLock { $0.map { $0 } } }
        var sink: @Sendable (String) -> Void { { message in self.messages.withLock { $0.append(message) } } }
    }

    /// Runs a child process to its end; returns its termination status, reason, stdout and stderr.
    static func run(_ path: String, _ arguments: [String]) throws -> ChildResult {
        let child = try start(path, arguments)
        return child.wait()
    }

    static func start(_ path: String, _ arguments: [String]) throws -> RunningChild {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        return RunningChild(process: process, output: output, errors: errors)
    }

    struct ChildResult {
        var status: Int32
        var exited: Bool
        var output: String
        var errors: String
    }

    struct RunningChild {
        let process: ChildProcess
        let output: Pipe
        let errors: Pipe

        /// Drains both pipes (so the child never blocks on a full pipe) and waits.
        func wait() -> ChildResult {
            let collected = Locked<(Data, Data)>((Data(), Data()))
            let group = DispatchGroup()
            let outputHandle = output.fileHandleForReading
            let errorHandle = errors.fileHandleForReading
            DispatchQueue.global().async(group: group) {
                let data = outputHandle.readDataToEndOfFile()
                collected.withLock { $0.0 = data }
            }
            DispatchQueue.global().async(group: group) {
                let data = errorHandle.readDataToEndOfFile()
                collected.withLock { $0.1 = data }
            }
            process.waitUntilExit()
            group.wait()
            let (out, err) = collected.withLock { $0 }
            return ChildResult(
                status: process.terminationStatus, exited: process.terminationReason == .exit,
                output: String(decoding: out, as: UTF8.self), errors: String(decoding: err, as: UTF8.self))
        }
    }
}
