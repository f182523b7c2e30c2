#if os(Linux)
import CacheTLS
import Glibc

/// TLS to an origin over a socket this stream owns (RFC 9110 §4.2.2): the bytes of an
/// `https` connection, its TLS state kept while it waits in the pool.
final class TLSStream: UpstreamStream {
    private let connection: TLSConnection
    private(set) var fd: Int32

    /// - Parameters:
    ///   - connection: TLS over `fd`, its handshake done.
    ///   - fd: The connected, non-blocking socket, owned from now on.
    init(_ connection: TLSConnection, fd: Int32) {
        self.connection = connection
        self.fd = fd
    }

    deinit {
        close()
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> StreamWrite {
        switch connection.write(bytes) {
        case .wrote(let count): .sent(count)
        case .wantRead: .wait(Int16(POLLIN))
        case .wantWrite: .wait(Int16(POLLOUT))
        case .failed(let error): .failed(.tls(error.description))
        }
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        switch connection.read(into: buffer) {
        case .bytes(let count): .bytes(count)
        case .closed: .closed(.orderly)
        case .closedWithoutNotify: .closed(.withoutCloseNotify)
        case .wantRead: .wait(Int16(POLLIN))
        case .wantWrite: .wait(Int16(POLLOUT))
        case .failed(let error): .failed(.tls(error.description))
        }
    }

    /// Nothing decrypted or received waits (a session ticket is taken in), and the origin
    /// neither closed nor failed the connection.
    func isIdle() -> Bool {
        fd >= 0 && connection.isIdle
    }

    /// Sends `close_notify` if the socket takes it at once (RFC 8446 §6.1), then closes it.
    func close() {
        guard fd >= 0 else { return }
        _ = connection.shutdown()
        _ = Glibc.close(fd)
        fd = -1
    }
}

@available(*, unavailable)
extension TLSStream: Sendable {}
#endif
