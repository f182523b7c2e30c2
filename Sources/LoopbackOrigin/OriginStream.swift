import CacheSystem
import CacheTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The bytes of one accepted connection of an origin: the socket itself, or TLS over it (an
/// origin serving HTTPS). Every call blocks, as the origin's connection threads do; a socket
/// shut down by the origin's `stop()` wakes any of them.
final class OriginStream {
    let fd: Int32
    /// nil for plain HTTP.
    private let tls: TLSConnection?

    /// A plain stream over the blocking socket `fd`.
    init(fd: Int32) {
        self.fd = fd
        tls = nil
    }

    /// TLS over `fd` with `context`, once the handshake is done: `fd` becomes non-blocking (the
    /// TLS layer waits with `poll`).
    /// - Throws: Why the handshake failed (the client refused the certificate, or went away).
    init(fd: Int32, tls context: TLSServerContext) throws(TLSError) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        let connection = try context.connection(fd: fd)
        try connection.handshake(timeout: 0)
        self.fd = fd
        tls = connection
    }

    /// The name the client asked for with SNI (RFC 6066 §3); nil over plain HTTP or without SNI.
    var serverName: String? { tls?.serverName }
    /// Whether the TLS handshake resumed an earlier session (RFC 8446 §2.2).
    var isResumed: Bool { tls?.isResumed ?? false }

    /// Reads what is available into `buffer`, waiting until something is: the count, 0 at the
    /// end of the stream (a close, with or without `close_notify`, or a shutdown), -1 on error.
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let tls else { return POSIX.receive(fd, into: buffer) }
        switch tls.receive(into: buffer, stallTimeout: 0) {
        case .bytes(let count): return count
        case .closed, .closedWithoutNotify: return 0
        case .failed, .stalled: return -1
        }
    }

    /// Sends all of `bytes`; false when the peer is gone or the socket was shut down.
    func sendAll(_ bytes: [UInt8]) -> Bool {
        guard let tls else { return POSIX.sendAll(fd, bytes) }
        return bytes.withUnsafeBytes { tls.send($0, stallTimeout: 0) == nil }
    }

    /// Whether bytes (or the end of the stream) can be read within `milliseconds`.
    func waitReadable(milliseconds: Int32) -> Bool {
        if let tls, tls.hasBufferedBytes { return true }
        return POSIX.waitReadable(fd, milliseconds: milliseconds)
    }

    /// Sends `close_notify` (RFC 8446 §6.1) over TLS; nothing over plain HTTP.
    func closeNotify() {
        tls?.shutdown(stallTimeout: 1)
    }

    /// Ends our side after the last response: `close_notify` over TLS, then as
    /// ``POSIX/finishSending(_:)`` (the client's remaining input is read and dropped).
    func finishSending() {
        closeNotify()
        POSIX.finishSending(fd)
    }

    /// Drops the connection at once (both directions), without `close_notify` over TLS: a cut
    /// that a client must not take for the end of a message (RFC 9112 §9.8).
    func cut() {
        POSIX.shutdownBoth(fd)
    }
}
