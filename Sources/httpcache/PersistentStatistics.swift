import CacheSystem
import Foundation
import HTTPCacheCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Outcome counters kept across runs of the tool in `<cache-dir>/cli-stats.json`.
///
/// Each run is a new process whose ``HTTPCache/statistics`` start at zero, so `get` and
/// `explain` add theirs to this file when they finish. The read-modify-write happens under an
/// exclusive `flock` on `<cache-dir>/cli.lock` (``DirectoryLock``), so concurrent runs do not
/// lose counts, and readers take it too, so they see the old counts or the new. It is not
/// flushed to disk: the counts are worth less than the milliseconds an `fsync` costs every
/// `get` on a busy disk, and a file lost in a power cut counts from zero.
///
/// The file is a JSON object of numbers, read and written here rather than with `JSONDecoder`
/// and `JSONEncoder`, whose generic code alone added 1.1 MiB to the resident memory of every
/// `get` (measured with `/usr/bin/time`, release build).
struct PersistentStatistics: Sendable {
    /// The file's name in the cache directory.
    static let fileName = "cli-stats.json"

    /// The layout version of the file.
    var version = 1
    /// When counting started, in seconds since 1970.
    var since: Double
    /// The summed counters.
    var statistics = CacheStatistics()
    /// Body bytes received from origins (miss and bypass responses).
    var bytesFromOrigin: Int64 = 0

    init(since: Double) { self.since = since }

    /// Reads the counters of `directory`, under the directory's lock; zero when there are none
    /// yet.
    ///
    /// - Throws: ``Failure`` when the file exists but cannot be read or parsed.
    static func read(in directory: String) throws(Failure) -> PersistentStatistics {
        let path = directory + "/" + fileName
        // No file, no lock to take (nor to create, in a directory that may be read-only).
        var status = stat()
        if lstat(path, &status) != 0 && errno == ENOENT {
            return PersistentStatistics(since: Date().timeIntervalSince1970)
        }
        return try DirectoryLock.withExclusiveLock(in: directory) { () throws(Failure) in
            // Never through a link: the directory was checked (DiskStore.prepareDirectory), and
            // what is in it is read as it is.
            let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
            guard descriptor >= 0 else {
                if errno == ENOENT { return PersistentStatistics(since: Date().timeIntervalSince1970) }
                throw unreadable(path, errnoText())
            }
            defer { close(descriptor) }
            return try parse(try text(of: descriptor, path: path), path: path)
        }
    }

    /// All the text of the file open at `descriptor`.
    private static func text(of descriptor: Int32, path: String) throws(Failure) -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes {
                pread(descriptor, $0.baseAddress, $0.count, off_t(bytes.count))
            }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw unreadable(path, errnoText()) }
            if count == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes += buffer[..<count]
        }
    }

    /// The counts `text` (of the file at `path`) holds; zero for an empty file.
    private static func parse(_ text: String, path: String) throws(Failure) -> PersistentStatistics {
        if text.isEmpty { return PersistentStatistics(since: Date().timeIntervalSince1970) }
        guard let counts = PersistentStatistics(parsing: text) else {
            throw unreadable(path, "it is not a counts file of this version")
        }
        return counts
    }

    private static func unreadable(_ path: String, _ reason: String) -> Failure {
        Failure(
            .failure,
            "could not read \(path): \(reason); remove it (or run `httpcache stats --reset`) to count from zero")
    }

    /// The file's text: one JSON object, the counters under `statistics`.
    var json: JSONValue {
        .object([
            ("version", .int(version)), ("since", .number(since)),
            (
                "statistics",
                .object([
                    ("hits", .int(statistics.hits)), ("misses", .int(statistics.misses)),
                    ("revalidated", .int(statistics.revalidated)), ("stale", .int(statistics.stale)),
                    ("bypassed", .int(statistics.bypassed)), ("errors", .int(statistics.errors)),
                    ("collapsed", .int(statistics.collapsed)),
                    ("bytesServedFromCache", .int(statistics.bytesServedFromCache)),
                    ("bytesSavedByRevalidation", .int(statistics.bytesSavedByRevalidation)),
                ])
            ),
            ("bytesFromOrigin", .int(bytesFromOrigin)),
        ])
    }

    /// The counts `text` (``json``, or what JSONEncoder wrote before) holds; `nil` when a
    /// number is missing or the version is not 1.
    init?(parsing text: String) {
        // Every name is unique in the file, nested or not: a flat look-up by name suffices. A
        // list of a dozen names, not a dictionary: one keyed by Substring made the parse cost a
        // `get` 0.57M instructions rather than 0.23M (callgrind), most of it the Swift
        // runtime's first look-up of Substring's Hashable conformance. Read as bytes, not
        // Characters: the Character-wise parse was those 0.23M, the grapheme breaking of some 220
        // bytes of ASCII; this one is a few thousand.
        let bytes = Array(text.utf8)
        var numbers: [(name: ArraySlice<UInt8>, number: ArraySlice<UInt8>)] = []
        func skippingSpace(from start: Int) -> Int {
            var index = start
            while index < bytes.count, Self.spaceBytes.contains(bytes[index]) { index += 1 }
            return index
        }
        var next = 0
        while let quote = bytes[next...].firstIndex(of: UInt8(ascii: "\"")) {
            let nameEnd = bytes[(quote + 1)...].firstIndex(of: UInt8(ascii: "\"")) ?? bytes.count
            let name = bytes[(quote + 1)..<nameEnd]
            next = skippingSpace(from: min(nameEnd + 1, bytes.count))
            guard next < bytes.count, bytes[next] == UInt8(ascii: ":") else { continue }
            let start = skippingSpace(from: next + 1)
            next = start
            while next < bytes.count, Self.numberBytes.contains(bytes[next]) { next += 1 }
            if next > start { numbers.append((name, bytes[start..<next])) }
        }
        func field(_ name: String) -> String? {
            numbers.last { $0.name.elementsEqual(name.utf8) }.map { String(decoding: $0.number, as: UTF8.self) }
        }
        func integer(_ name: String) -> Int? { field(name).flatMap { Int($0) } }
        guard integer("version") == 1, let since = field("since").flatMap({ Double($0) }),
            let hits = integer("hits"), let misses = integer("misses"), let revalidated = integer("revalidated"),
            let stale = integer("stale"), let bypassed = integer("bypassed"), let errors = integer("errors"),
            let collapsed = integer("collapsed"), let served = integer("bytesServedFromCache"),
            let saved = integer("bytesSavedByRevalidation"), let fromOrigin = integer("bytesFromOrigin")
        else { return nil }
        self.init(since: since)
        statistics.hits = hits
        statistics.misses = misses
        statistics.revalidated = revalidated
        statistics.stale = stale
        statistics.bypassed = bypassed
        statistics.errors = errors
        statistics.collapsed = collapsed
        statistics.bytesServedFromCache = Int64(served)
        statistics.bytesSavedByRevalidation = Int64(saved)
        bytesFromOrigin = Int64(fromOrigin)
    }

    /// The bytes a number in the file is made of: digits, signs, the point and exponents.
    private static let numberBytes = Array("0123456789+-.eE".utf8)
    /// JSON's white space (RFC 8259 §2).
    private static let spaceBytes = Array(" \n\t\r".utf8)

    /// Adds `run` (one process's counters) and `bytesFromOrigin` to the file in `directory`.
    ///
    /// Failures are reported on standard error and otherwise ignored: counting is secondary to
    /// the response the user asked for.
    static func add(_ run: CacheStatistics, bytesFromOrigin: Int64, in directory: String) {
        do {
            try update(in: directory) { totals in
                totals.statistics.hits += run.hits
                totals.statistics.misses += run.misses
                totals.statistics.revalidated += run.revalidated
                totals.statistics.stale += run.stale
                totals.statistics.bypassed += run.bypassed
                totals.statistics.errors += run.errors
                totals.statistics.collapsed += run.collapsed
                totals.statistics.bytesServedFromCache += run.bytesServedFromCache
                totals.statistics.bytesSavedByRevalidation += run.bytesSavedByRevalidation
                totals.bytesFromOrigin += bytesFromOrigin
            }
        } catch {
            Console.error("httpcache: \(error.message) (the response itself was not affected)\n")
        }
    }

    /// Runs `change` on the counters of `directory` under the lock and writes the result.
    static func update(in directory: String, _ change: (inout PersistentStatistics) -> Void) throws(Failure) {
        try DirectoryLock.withExclusiveLock(in: directory) { () throws(Failure) in try rewrite(in: directory, change) }
    }

    /// Rewrites the file in place: renaming a new file over it made ext4 write the new file
    /// out at once (its guard for files replaced by rename), 0.4 ms of every run. The lock
    /// keeps readers from seeing a half-written file; the new text is never shorter than the
    /// old (spaces, JSON's whitespace, make up the difference), so no old count is left after
    /// it and the file is never truncated.
    private static func rewrite(in directory: String, _ change: (inout PersistentStatistics) -> Void) throws(Failure) {
        let path = directory + "/" + fileName
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        var status = stat()
        guard descriptor >= 0, fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            let reason = descriptor >= 0 ? "it is not a regular file" : errnoText()
            if descriptor >= 0 { close(descriptor) }
            throw Failure(.failure, "could not write \(path): \(reason); check the cache directory")
        }
        defer { close(descriptor) }
        var totals: PersistentStatistics
        do {
            totals = try parse(try text(of: descriptor, path: path), path: path)
        } catch {
            // A damaged file is replaced rather than blocking every later run.
            Console.error("httpcache: \(error.message); counting from zero\n")
            totals = PersistentStatistics(since: Date().timeIntervalSince1970)
        }
        change(&totals)
        let text = totals.json.text
        let padding = max(0, Int(status.st_size) - text.utf8.count - 1)
        let bytes = Array((text + String(repeating: " ", count: padding) + "\n").utf8)
        // At offset 0: reading used pread, which leaves the offset where it was.
        if let failed = bytes.withUnsafeBytes({ FileDescriptor.writeAll(descriptor, $0) }) {
            throw Failure(.failure, "could not write \(path): \(errnoText(failed)); check the cache directory")
        }
    }
}

/// An exclusive `flock` on `<cache-dir>/cli.lock` that runs of the tool take around the
/// statistics' read-modify-write, so concurrent runs lose no counts.
enum DirectoryLock {
    /// The lock file's name in the cache directory.
    static let fileName = "cli.lock"

    /// Runs `body` while holding the lock of `directory` (which must exist).
    static func withExclusiveLock<Result>(in directory: String, _ body: () throws(Failure) -> Result) throws(Failure)
        -> Result
    {
        let path = directory + "/" + fileName
        var descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        // A read-only directory: an existing lock file still locks (readers take it too).
        if descriptor < 0 { descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        guard descriptor >= 0 else {
            throw Failure(
                .failure, "could not open \(path): \(errnoText()); check the cache directory")
        }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw Failure(.failure, "could not lock \(path): \(errnoText())")
            }
        }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }
}
