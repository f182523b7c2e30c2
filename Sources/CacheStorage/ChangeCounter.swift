internal import CSQLiteHTTPCache
import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A 64-bit counter in a memory-mapped file that every process using a cache directory
/// bumps after each write to the index, so a process can keep what it read from the index in
/// memory and know, with one atomic load, when it must read again.
final class ChangeCounter: @unchecked Sendable {
    // The mapping lives as long as the counter; loads and bumps are atomic (C11 builtins).
    private let counter: UnsafeMutablePointer<UInt64>

    /// Maps `path` (creating it; never through a link, never anything but a regular file);
    /// `nil`, after logging why, when that fails.
    init?(path: String, log: (String) -> Void) {
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            log("cannot open \(path) (\(errnoText())); every lookup will read the index")
            return nil
        }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            log("\(path) is not a regular file; every lookup will read the index")
            return nil
        }
        guard status.st_size >= 8 || ftruncate(fd, 8) == 0 else {
            log("cannot size \(path) (\(errnoText())); every lookup will read the index")
            return nil
        }
        let mapped = mmap(nil, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        guard let mapped, mapped != MAP_FAILED else {
            log("cannot map \(path) (\(errnoText())); every lookup will read the index")
            return nil
        }
        counter = mapped.bindMemory(to: UInt64.self, capacity: 1)
    }

    deinit { munmap(counter, 8) }

    /// The current count.
    var value: UInt64 { csqlite_counter_load(counter) }

    /// Counts a write; returns the count before it.
    @discardableResult
    func bump() -> UInt64 { csqlite_counter_bump(counter) }
}
