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
/// exclusive `flock` on `<cache-dir>/cli.lock` (``DirectoryLock``), so concurrent runs do not lose counts,
/// and the file is replaced atomically (written aside, then renamed).
struct PersistentStatistics: Codable, Sendable {
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

    /// Reads the counters of `directory`; zero when there are none yet.
    ///
    /// - Throws: ``Failure`` when the file exists but cannot be read or parsed.
    static func read(in directory: String) throws(Failure) -> PersistentStatistics {
        let path = directory + "/" + fileName
        // Never through a link: the directory was checked (DiskStore.prepareDirectory), and
        // what is in it is read as it is.
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return PersistentStatistics(since: Date().timeIntervalSince1970) }
            throw Failure(
                .failure,
                "could not read \(path): \(errnoText()); remove it (or run "
                    + "`httpcache stats --reset`) to count from zero")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            return try JSONDecoder().decode(PersistentStatistics.self, from: handle.readToEnd() ?? Data())
        } catch {
            throw Failure(
                .failure,
                "could not read \(path): \(error); remove it (or run `httpcache stats --reset`) to count from zero")
        }
    }

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

    private static func rewrite(in directory: String, _ change: (inout PersistentStatistics) -> Void) throws(Failure) {
        var totals: PersistentStatistics
        do {
            totals = try read(in: directory)
        } catch {
            // A damaged file is replaced rather than blocking every later run.
            Console.error("httpcache: \(error.message); counting from zero\n")
            totals = PersistentStatistics(since: Date().timeIntervalSince1970)
        }
        change(&totals)
        let path = directory + "/" + fileName
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(totals).write(to: URL(fileURLWithPath: path), options: .atomic)
        } catch {
            throw Failure(.failure, "could not write \(path): \(error)")
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
        let descriptor = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
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
