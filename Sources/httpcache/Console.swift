import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard output and standard error, written with `write(2)` so text and streamed bodies
/// keep their order.
///
/// `SIGPIPE` is ignored (``ignoreBrokenPipes()``): when the reader of standard output goes away
/// (`httpcache get URL | head -1`), later output is dropped silently and the command carries
/// on, so a response is still read to its end and stored.
enum Console {
    /// Whether standard output's reader has gone away; set by the first failed write.
    nonisolated(unsafe) private static var outputClosed = false

    /// Makes a closed pipe a failed write instead of a signal that kills the process.
    static func ignoreBrokenPipes() { signal(SIGPIPE, SIG_IGN) }

    /// Writes `text` to standard output.
    static func out(_ text: String) { write(Array(text.utf8), to: 1) }

    /// Writes `bytes` to standard output.
    static func out(bytes: some Collection<UInt8>) { write(Array(bytes), to: 1) }

    /// Writes `text` to standard error.
    static func error(_ text: String) { write(Array(text.utf8), to: 2) }

    /// Whether standard error is a terminal (for the progress bar).
    static var errorIsTerminal: Bool { isatty(2) == 1 }

    /// Whether standard output is a terminal.
    static var outputIsTerminal: Bool { isatty(1) == 1 }

    private static func write(_ bytes: [UInt8], to descriptor: Int32) {
        if descriptor == 1, outputClosed { return }
        let failed = bytes.withUnsafeBytes { FileDescriptor.writeAll(descriptor, $0) }
        if failed != nil, descriptor == 1 { outputClosed = true }
    }
}
