#if os(Linux)
import CacheSystem
import Glibc

/// The bytes of one connection to an origin, whatever carries them: a plain TCP socket
/// (``SocketStream``) or TLS over one. Non-blocking: every call returns at once, and says what
/// to wait for on ``fd`` before calling again; ``UpstreamConnection`` does the waiting.
///
/// Used by one thread at a time: by one connection for one exchange, or kept in the pool.
protocol UpstreamStream: AnyObject {
    /// The socket underneath, for `poll`.
    var fd: Int32 { get }
    /// Writes some of `bytes`.
    func write(_ bytes: UnsafeRawBufferPointer) -> StreamWrite
    /// Reads some bytes into `buffer`.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead
    /// Whether the connection is still idle: nothing to read, not closed, no error. An origin
    /// that sent bytes after a complete response (RFC 9112 §6.3) or closed the connection fails
    /// this, and the stream must be closed rather than used.
    func isIdle() -> Bool
    /// Closes the connection now, without waiting; later calls do nothing.
    func close()
}

/// What a ``UpstreamStream/write(_:)`` did.
enum StreamWrite: Equatable {
    /// This many bytes went out (at least one).
    case sent(Int)
    /// Nothing went out: call again once `poll` reports these events (`POLLIN`, `POLLOUT`).
    case wait(Int16)
    case failed(StreamFailure)
}

/// What a ``UpstreamStream/read(into:)`` did.
enum StreamRead: Equatable {
    /// This many bytes arrived (at least one).
    case bytes(Int)
    /// Nothing arrived yet: call again once `poll` reports these events.
    case wait(Int16)
    /// The peer closed its side.
    case closed(StreamClosure)
    case failed(StreamFailure)
}

/// How the peer closed: what decides whether a body delimited by the close is complete.
enum StreamClosure: Equatable {
    /// A TCP FIN on a plain socket; TLS's `close_notify` alert (RFC 8446 §6.1) on TLS.
    case orderly
    /// The TCP connection ended under TLS without `close_notify`: whoever cut it may have cut
    /// the data too, so a body delimited by the close is not complete (RFC 9112 §9.8).
    case withoutCloseNotify
}

/// Why a stream failed.
enum StreamFailure: Equatable, CustomStringConvertible {
    /// A socket call failed with this `errno` (`ECONNRESET`, `EPIPE`).
    case system(Int32)
    /// TLS failed after its handshake (a record that does not decrypt, an alert), in words.
    case tls(String)

    var description: String {
        switch self {
        case .system(let code): errnoText(code)
        case .tls(let reason): reason
        }
    }
}

/// A plain TCP connection: bytes as they are on the socket.
final class SocketStream: UpstreamStream {
    private(set) var fd: Int32

    /// - Parameter fd: A connected, non-blocking socket, owned from now on.
    init(fd: Int32) {
        self.fd = fd
    }

    deinit {
        close()
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> StreamWrite {
        while true {
            let sent = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if sent > 0 { return .sent(sent) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wait(Int16(POLLOUT))
            case let code: return .failed(.system(code))
            }
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        while true {
            let count = recv(fd, buffer.baseAddress, buffer.count, 0)
            if count > 0 { return .bytes(count) }
            if count == 0 { return .closed(.orderly) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wait(Int16(POLLIN))
            case let code: return .failed(.system(code))
            }
        }
    }

    func isIdle() -> Bool {
        var byte: UInt8 = 0
        let count = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }

    /// The socket, no longer owned by this stream (to run TLS over it).
    func detach() -> Int32 {
        defer { fd = -1 }
        return fd
    }
}

@available(*, unavailable)
extension SocketStream: Sendable {}
#endif
