import CacheLocking
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Thin, error-reporting wrappers over the POSIX calls the disk store needs.
enum FileIO {
    static func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

    /// Creates `path` (and parents) with mode 0700 if missing, and tightens it to 0700.
    static func makeDirectory(_ path: String) throws(StorageError) {
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw StorageError(.writeFailed, "cannot create the cache directory \(path): \(error.localizedDescription)")
        }
        _ = chmod(path, 0o700)
    }

    /// Opens a new file for writing, 0600, failing if it exists.
    static func createExclusive(_ path: String) throws(StorageError) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StorageError(
                .writeFailed, "cannot create \(path): \(errorText()); check that the cache directory is writable")
        }
        return fd
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(StorageError) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                write(fd, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                let reason =
                    errno == ENOSPC
                    ? "the disk is full" : errno == EFBIG ? "the file size limit was reached" : errorText()
                throw StorageError(.writeFailed, "cannot write \(path): \(reason); the entry was not stored")
            }
            offset += written
        }
    }

    /// Reads exactly `count` bytes at `offset`.
    static func read(_ fd: Int32, count: Int, at offset: Int64, path: String) throws(StorageError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes { buffer in
                pread(fd, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
            }
            if got < 0 {
                if errno == EINTR { continue }
                throw StorageError(.readFailed, "cannot read \(path): \(errorText())")
            }
            if got == 0 { throw StorageError(.corrupted, "\(path) is shorter than the index says") }
            done += got
        }
        return bytes
    }

    /// `fsync` of a directory, so a rename in it is durable.
    static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    /// Removes `path` if no live process holds a lock on it and `shouldRemove` agrees,
    /// deciding and unlinking while holding the lock, so a writer that locks the file just
    /// after sees it unlinked (see ``createLocked(_:)``). Returns whether it was removed.
    static func removeIfUnlocked(_ path: String, _ shouldRemove: () -> Bool) -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, shouldRemove() else { return false }
        return unlink(path) == 0
    }

    /// Creates `path` (0600, failing if it exists) and takes an exclusive lock on it. `nil`
    /// when a sweep removed the file between the two steps; the caller tries another name.
    static func createLocked(_ path: String) throws(StorageError) -> Int32? {
        let fd = try createExclusive(path)
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                let reason = errorText()
                close(fd)
                unlink(path)
                throw StorageError(.writeFailed, "cannot lock \(path): \(reason)")
            }
        }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_nlink > 0 else {
            close(fd)
            return nil
        }
        return fd
    }
}
