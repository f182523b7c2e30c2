import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Thin, error-reporting wrappers over the POSIX calls the disk store needs.
enum FileIO {
    /// Sets the mode of the file or directory `path` when it is not a link (never a link's
    /// target; a link is left as it is).
    ///
    /// By path, never through a descriptor opened and closed here: closing any descriptor of a
    /// file drops every POSIX lock this process holds on it, and SQLite keeps such locks on the
    /// index and its `-shm` file for as long as a connection is open. Dropping them lets
    /// another process take the index for unused and truncate the shared memory this process
    /// has mapped (a bus error at its next write). glibc implements `AT_SYMLINK_NOFOLLOW` with
    /// an `O_PATH` descriptor, whose closing leaves locks alone.
    static func restrictMode(_ path: String, _ mode: mode_t) {
        _ = fchmodat(AT_FDCWD, path, mode, AT_SYMLINK_NOFOLLOW)
    }

    /// Opens the regular file `path` for reading, never through a link and never blocking on a
    /// FIFO, with its size from the `fstat` that checked it; `nil` with `errno` set (`ELOOP`: a
    /// link; `EINVAL`: not a regular file).
    static func openRegular(_ path: String) -> (descriptor: Int32, size: Int64)? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            errno = EINVAL
            return nil
        }
        return (fd, Int64(status.st_size))
    }

    /// Opens a new file for writing, 0600, failing if it exists.
    static func createExclusive(_ path: String) throws(StorageError) -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw StorageError(
                .writeFailed, "cannot create \(path): \(errnoText()); check that the cache directory is writable")
        }
        return fd
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws(StorageError) {
        guard let code = bytes.withUnsafeBytes({ FileDescriptor.writeAll(fd, $0) }) else { return }
        let reason =
            code == ENOSPC ? "the disk is full" : code == EFBIG ? "the file size limit was reached" : errnoText(code)
        throw StorageError(.writeFailed, "cannot write \(path): \(reason); the entry was not stored")
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
                throw StorageError(.readFailed, "cannot read \(path): \(errnoText())")
            }
            if got == 0 { throw StorageError(.corrupted, "\(path) is shorter than the index says") }
            done += got
        }
        return bytes
    }

    /// `fsync` of a directory, so a rename in it is durable.
    static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    /// Removes the regular file `name` of `directory` (a descriptor) if no live process holds a
    /// lock on it and `shouldRemove` agrees, deciding and unlinking while holding the lock, so a
    /// writer that locks the file just after sees it unlinked (see ``createLocked(_:)``). A
    /// link, a directory or anything else is left alone. Returns whether it was removed.
    /// `shouldRemove` is given the file's status (its times, its size).
    static func removeIfUnlocked(_ name: String, in directory: Int32, _ shouldRemove: (stat) -> Bool) -> Bool {
        let fd = openat(directory, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var status = stat()
        guard fstat(fd, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return false }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, shouldRemove(status) else { return false }
        return unlinkat(directory, name, 0) == 0
    }

    /// The names in `directory` (a descriptor, left open), without `.` and `..`.
    static func names(in directory: Int32) -> [String] {
        let copy = dup(directory)
        guard copy >= 0 else { return [] }
        guard let stream = fdopendir(copy) else {
            close(copy)
            return []
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// Creates `path` (0600, failing if it exists) and takes an exclusive lock on it. `nil`
    /// when a sweep removed the file between the two steps; the caller tries another name.
    static func createLocked(_ path: String) throws(StorageError) -> Int32? {
        let fd = try createExclusive(path)
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else {
                let reason = errnoText()
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
