internal import COpenSSLHTTPCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The socket a connection's BIO reads and writes, and the `errno` of its last failure (kept
/// here because OpenSSL may make other calls before the caller reads `errno`).
struct SocketState {
    var fd: Int32
    /// The `errno` of the last `recv` or `send` that failed other than for `EAGAIN`; 0 if none.
    var lastErrno: Int32 = 0
    /// Whether `recv` met the end of the stream (what `BIO_eof` reports, and OpenSSL 3 turns
    /// into `SSL_R_UNEXPECTED_EOF_WHILE_READING` when no close_notify came first).
    var sawEOF = false
    /// Whether a `recv` since the connection's last read began gave fewer bytes than asked for
    /// (or none): the socket held nothing more at that moment, so an edge-triggered reader may
    /// wait for its next readiness.
    var drained = false
}

/// OpenSSL's I/O over a socket, as its own socket BIO does it, but sending with `MSG_NOSIGNAL`:
/// a peer that went away gives `EPIPE`, never a SIGPIPE that kills the process (OpenSSL's
/// socket BIO calls `write`). On Apple systems the socket has `SO_NOSIGPIPE` instead.
///
/// The BIO never closes the socket: its owner does.
enum SocketBIO {
    #if canImport(Glibc)
    private static let sendFlags = Int32(MSG_NOSIGNAL)
    #else
    private static let sendFlags: Int32 = 0
    #endif

    private struct Method: @unchecked Sendable {  // an immutable table OpenSSL only reads
        let pointer: OpaquePointer?
    }

    private static let method = Method(pointer: makeMethod())

    /// A BIO over `state`'s socket; nil when OpenSSL could not make one. `state` must outlive it.
    static func make(_ state: UnsafeMutablePointer<SocketState>) -> OpaquePointer? {
        guard let method = method.pointer, let bio = BIO_new(method) else { return nil }
        BIO_set_data(bio, UnsafeMutableRawPointer(state))
        BIO_set_init(bio, 1)
        return bio
    }

    private static func makeMethod() -> OpaquePointer? {
        let index = BIO_get_new_index()
        guard index > 0, let method = BIO_meth_new(index | BIO_TYPE_SOURCE_SINK, "httpcache socket") else {
            return nil
        }
        BIO_meth_set_write(method) { bio, bytes, count in
            SocketBIO.transfer(bio, count: count, retry: BIO_FLAGS_WRITE) { state in
                send(state.pointee.fd, bytes, Int(count), SocketBIO.sendFlags)
            }
        }
        BIO_meth_set_read(method) { bio, bytes, count in
            SocketBIO.transfer(bio, count: count, retry: BIO_FLAGS_READ) { state in
                let received = recv(state.pointee.fd, bytes, Int(count), 0)
                if received == 0 { state.pointee.sawEOF = true }
                state.pointee.drained = received < Int(count)
                return received
            }
        }
        BIO_meth_set_ctrl(method) { bio, command, _, _ in
            switch command {
            case BIO_CTRL_FLUSH: 1  // every write goes straight to the socket
            case BIO_CTRL_EOF: bio.flatMap(SocketBIO.state).map { $0.pointee.sawEOF ? 1 : 0 } ?? 0
            default: 0  // not supported
            }
        }
        BIO_meth_set_create(method) { _ in 1 }
        BIO_meth_set_destroy(method) { _ in 1 }
        return method
    }

    /// One `send` or `recv` (`io`) for the BIO `bio`, again after `EINTR`: the count, or -1
    /// with the `retry` flag set when the socket would block, or -1 with the `errno` kept.
    private static func transfer(
        _ bio: OpaquePointer?, count: Int32, retry: Int32, _ io: (UnsafeMutablePointer<SocketState>) -> Int
    ) -> Int32 {
        guard let bio, count > 0, let state = state(bio) else { return 0 }
        BIO_clear_flags(bio, retryFlags)
        while true {
            let done = io(state)
            if done >= 0 { return Int32(done) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: BIO_set_flags(bio, retry | BIO_FLAGS_SHOULD_RETRY)
            case let code: state.pointee.lastErrno = code
            }
            return -1
        }
    }

    private static let retryFlags = BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY

    private static func state(_ bio: OpaquePointer) -> UnsafeMutablePointer<SocketState>? {
        BIO_get_data(bio)?.assumingMemoryBound(to: SocketState.self)
    }
}
