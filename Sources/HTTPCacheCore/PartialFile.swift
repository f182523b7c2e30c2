import CacheExchange
import CacheSemantics
import CacheStorage
import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The partial file, opened for appending and locked (`flock`) against other downloads.
final class PartialFile {
    let path: String
    fileprivate let fd: Int32

    init(path: String) throws(DownloadError) {
        self.path = path
        fd = try Self.openLocked(path)
    }

    deinit { closeDescriptor(fd) }

    /// Opens (creating) `path` for appending and takes an exclusive lock on it.
    private static func openLocked(_ path: String) throws(DownloadError) -> Int32 {
        let fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw DownloadError(
                .file, "cannot create \(path): \(reason()); check that the directory exists and is writable")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let busy = errno == EWOULDBLOCK
            let reason = reason()
            closeDescriptor(fd)
            if busy {
                throw DownloadError(
                    .busy, "another download is writing \(path); wait for it to finish, or download to another file")
            }
            throw DownloadError(.file, "cannot lock \(path): \(reason)")
        }
        return fd
    }

    static func reason() -> String { errnoText() }

    func size() throws(DownloadError) -> Int64 {
        var status = stat()
        guard fstat(fd, &status) == 0 else {
            throw DownloadError(.file, "cannot read the size of \(path): \(Self.reason())")
        }
        return Int64(status.st_size)
    }

    /// Empties the file.
    func truncate() throws(DownloadError) {
        guard ftruncate(fd, 0) == 0 else { throw DownloadError(.file, "cannot empty \(path): \(Self.reason())") }
    }

    func append(_ data: Data) throws(DownloadError) {
        let failed: Int32? = data.withUnsafeBytes { buffer -> Int32? in
            guard let base = buffer.baseAddress else { return nil }
            var offset = 0
            while offset < buffer.count {
                let written = write(fd, base + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += written
            }
            return nil
        }
        if let failed {
            throw DownloadError(
                .file, "cannot write \(path): \(errnoText(failed)); free some space and download again")
        }
    }

    /// Flushes the file to disk, on a thread of its own: `fsync` of a large file can take
    /// seconds while the disk is busy, and a task blocked in it would hold one of the
    /// cooperative pool's threads (one per core), which every task of the app shares.
    func sync() async throws(DownloadError) {
        // A duplicate shares the open file (and its flock), and closing it releases neither.
        let copy = dup(fd)
        guard copy >= 0 else { throw DownloadError(.file, "cannot flush \(path) to disk: \(Self.reason())") }
        let failure = await onThreadOfItsOwn { () -> String? in
            defer { closeDescriptor(copy) }
            return fsync(copy) == 0 ? nil : Self.reason()
        }
        if let failure { throw DownloadError(.file, "cannot flush \(path) to disk: \(failure)") }
    }
}

extension PartialFile {
    /// Checks the whole file against `digests` (the representation's `Repr-Digest`, RFC 9530
    /// §3), reading it from the start on a thread of its own: the first digest that does not
    /// match, or `nil`.
    func mismatch(_ digests: IntegrityDigests, url: String) async throws(DownloadError) -> DigestMismatch? {
        let copy = dup(fd)
        guard copy >= 0 else { throw DownloadError(.file, "cannot read \(path): \(Self.reason())") }
        let path = path
        let outcome = await onThreadOfItsOwn { () -> Result<DigestMismatch?, DownloadError> in
            defer { closeDescriptor(copy) }
            guard let check = IntegrityCheck(digests, url: url, checksRepresentation: true) else {
                return .success(nil)
            }
            var buffer = [UInt8](repeating: 0, count: 256 * 1024)
            var offset: off_t = 0
            while true {
                let count = buffer.withUnsafeMutableBytes { pread(copy, $0.baseAddress, $0.count, offset) }
                if count < 0 {
                    if errno == EINTR { continue }
                    return .failure(DownloadError(.file, "cannot read \(path): \(Self.reason())"))
                }
                if count == 0 { return .success(check.verify()) }
                buffer.withUnsafeBytes { check.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
                offset += off_t(count)
            }
        }
        return try outcome.get()
    }
}

/// Runs `work`, which blocks (on the disk), on a new thread, and waits for it without holding
/// a thread of the cooperative pool.
func onThreadOfItsOwn<Result: Sendable>(_ work: @escaping @Sendable () -> Result) async -> Result {
    await withCheckedContinuation { continuation in
        do {
            try SystemThread.detached { continuation.resume(returning: work()) }
        } catch {
            // No thread to spare: the work blocks this thread of the pool rather than fail.
            continuation.resume(returning: work())
        }
    }
}

/// `close(2)`, ignoring failure.
func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}
