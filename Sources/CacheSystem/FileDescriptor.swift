#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole writes to a file descriptor, and the process's environment: the two calls every
/// writer of files, logs and traces needs, written once.
public enum FileDescriptor {
    /// Writes all of `bytes` to `descriptor`, as many `write(2)` calls as it takes (one, for
    /// fewer bytes than a pipe's buffer, so lines from other threads do not interleave), going
    /// on after `EINTR`.
    ///
    /// - Returns: `nil` when everything was written, else the `errno` of the write that failed
    ///   (`EPIPE` when the reader went away, `ENOSPC` when the disk is full, …), for the caller
    ///   to put in words of its own.
    public static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        guard var next = bytes.baseAddress else { return nil }
        var left = bytes.count
        while left > 0 {
            let written = write(descriptor, next, left)
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            next += written
            left -= written
        }
        return nil
    }

    /// Writes `text` to standard error whole; a failure is ignored (nowhere is left to say it).
    public static func writeToStandardError(_ text: String) {
        var text = text
        _ = text.withUTF8 { writeAll(2, UnsafeRawBufferPointer($0)) }
    }

    /// The value of the environment variable `name`, or `nil` when it is not set.
    public static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
