#if os(Linux)
// TLS toward clients on the loop thread: the handshake, then every read and write of the
// connection through OpenSSL, never blocking. OpenSSL's want-read / want-write become the
// connection's readiness flags; bytes OpenSSL has already decrypted are read before waiting
// for the socket (a read stops only when OpenSSL says it needs the socket).
import CEpollHTTPCache
import CacheSystem
import CacheTLS
@_spi(Wire) import HTTPWire
import Glibc

/// The certificates a TLS listener presents, replaced as a whole while the server runs
/// (`SIGHUP`): new handshakes use the new context, connections keep the one they began with.
package final class ServerCertificates: Sendable {
    private let current: Locked<TLSServerContext>

    package init(_ context: TLSServerContext) { current = Locked(context) }

    /// The context for the next handshake.
    package var context: TLSServerContext { current.withLock { $0 } }

    /// Makes `context` the one new handshakes use.
    package func replace(with context: TLSServerContext) { current.withLock { $0 = context } }
}

/// What one read of a connection gave.
enum Received {
    /// This many bytes are at the buffer's start.
    case bytes(Int)
    /// The client closed its side (EOF, or TLS `close_notify`).
    case closed
    /// Nothing now: wait for readiness (the flags say which).
    case wouldBlock
    /// Broken: close the connection.
    case failed
}

extension EventLoop {
    /// Advances a TLS connection's handshake; `true` once it is done and requests may be read.
    /// A client whose first byte is an upper-case letter speaks plain HTTP to the TLS port: it
    /// gets a plain `400` saying so (as nginx does) and the connection is closed.
    func advanceHandshake(_ connection: Connection) -> Bool {
        guard let tls = connection.state.tls else {
            connection.state.phase = .head
            return true
        }
        if !connection.state.firstByteChecked {
            guard connection.state.canRead else { return false }
            var first: UInt8 = 0
            let peeked = recv(connection.fd, &first, 1, Int32(MSG_PEEK))
            if peeked < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    connection.state.canRead = false
                } else if errno != EINTR {
                    close(connection)
                }
                return false
            }
            if peeked == 0 {
                close(connection)
                return false
            }
            connection.state.firstByteChecked = true
            if (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(first) {
                connection.state.tls = nil
                reject(
                    connection,
                    Rejection(status: 400, reason: "plain HTTP was sent to the TLS port; use https:// for this port"))
                return true
            }
        }
        // TLS 1.3's session tickets, written as the handshake completes, are held when the
        // first request came with the client's Finished: they leave with its response, in one
        // send. Otherwise they go now: they also acknowledge the Finished, which a client with
        // Nagle's algorithm on waits for before it sends its request (a delayed ACK, 40 ms).
        switch tls.handshake(holdingLast: true) {
        case .done:
            // A handshake step reads the socket whatever woke it. One woken for writing, or by
            // an edge whose bytes an earlier step took, may have read the client's Finished and
            // the request sent with it: they wait inside OpenSSL, the socket is drained, and no
            // edge will come for them. The request is read now; a read that finds nothing
            // clears this again.
            connection.state.canRead = true
            if tls.unsentCount > 0 && !tls.hasBufferedBytes {
                switch tls.uncork() {
                case .done: break
                case .wantWrite, .wantRead:
                    // Sent once the socket is writable, before anything else.
                    connection.state.output.setSealed(tls.unsentCount)
                    connection.state.canWrite = false
                case .failed:
                    countHandshake(failed: true)
                    close(connection)
                    return false
                }
            }
            countHandshake(failed: false)
            // RFC 9113 §3.2: a client that chose h2 with ALPN speaks HTTP/2 from its first byte.
            if http2 && tls.applicationProtocol == "h2" { return startHTTP2(connection) }
            connection.state.phase = .head
            // The request head has its own header timeout from now on.
            connection.state.deadline = now + headerMilliseconds
            return true
        case .wantRead:
            connection.state.canRead = false
        case .wantWrite:
            connection.state.canWrite = false
        case .failed:
            // A scanner, an old client (TLS 1.0) or garbage: counted, not logged line by line.
            countHandshake(failed: true)
            close(connection)
        }
        return false
    }

    /// Reads into `buffer` (`count` bytes of room) through TLS or from the socket, setting the
    /// readiness flags.
    func receive(_ connection: Connection, into buffer: UnsafeMutablePointer<UInt8>, count: Int) -> Received {
        guard let tls = connection.state.tls else {
            return Self.receive(
                connection.fd, into: buffer, count: count, hungUp: connection.state.hungUp,
                canRead: &connection.state.canRead)
        }
        // A short TLS read says nothing about the socket (one record at a time, others may
        // wait decrypted inside OpenSSL): reading stops at want-read, or when OpenSSL's own
        // read of the socket came up short and nothing waits inside it (the end read on
        // regardless, as above).
        switch tls.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: count)) {
        case .bytes(let read):
            if tls.hasDrainedSocket && !connection.state.hungUp { connection.state.canRead = false }
            return .bytes(read)
        case .closed, .closedWithoutNotify:
            return .closed
        case .wantRead:
            connection.state.canRead = false
            return .wouldBlock
        case .wantWrite:
            connection.state.canRead = false
            connection.state.canWrite = false
            connection.state.readWaitsForWrite = true
            return .wouldBlock
        case .failed:
            return .failed
        }
    }

    /// One read of the plain socket `fd` (a client's, or a tunnel's upstream) into `buffer`
    /// (`count` bytes of room), again after `EINTR`; clears `canRead` when the socket is empty
    /// now. A short read empties it, but after EPOLLRDHUP (`hungUp`) the end follows the bytes
    /// with no edge of its own, and only the next read reports it.
    static func receive(
        _ fd: Int32, into buffer: UnsafeMutablePointer<UInt8>, count: Int, hungUp: Bool, canRead: inout Bool
    ) -> Received {
        while true {
            let received = recv(fd, buffer, count, 0)
            if received > 0 {
                if received < count && !hungUp { canRead = false }
                return .bytes(received)
            }
            if received == 0 { return .closed }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK:
                canRead = false
                return .wouldBlock
            default: return .failed
            }
        }
    }

    /// Sends queued output through TLS, one piece per `SSL_write`. When more than one record's
    /// worth waits, the records are gathered and leave in one `send` (at most 64 KiB at a
    /// time); records the socket could not take yet stay in the TLS connection, counted in the
    /// queue (``OutputQueue/sealed``) until they are sent.
    func flushTLS(_ connection: Connection, _ tls: TLSConnection, accountedSent: inout Int) -> OutputQueue.FlushResult {
        var waitsForRead = false
        // The connection closes after this output: its close_notify (RFC 8446 §6.1) is gathered
        // behind the last records, so the client gets both in one send and one wake-up.
        let closesAfter = connection.state.phase == .closing && !connection.state.writeShut
        let gathers =
            closesAfter || connection.state.output.count - connection.state.output.sealed > Self.tlsRecordSize
            || tls.unsentCount > 0
        if gathers { tls.cork() }
        var result = connection.state.output.flush(accountedSent: &accountedSent) { piece in
            switch tls.write(piece) {
            case .wrote(let count): return .wrote(count)
            case .wantWrite: return .blocked
            case .wantRead:
                waitsForRead = true
                return .blocked
            case .failed: return .failed(EPIPE)
            }
        }
        if closesAfter, case .done = result, connection.state.output.isEmpty, !waitsForRead {
            // Sent with what is gathered; `sendCloseNotify` then finds it sent and sends no other.
            _ = tls.shutdown()
        }
        if gathers || tls.unsentCount > 0 {
            switch tls.uncork() {
            case .done: break
            case .wantWrite, .wantRead:
                if case .done = result { result = .blocked }
            case .failed:
                result = .failed(EPIPE)
            }
        }
        connection.state.output.setSealed(tls.unsentCount)
        if waitsForRead {
            connection.state.writeWaitsForRead = true
        }
        return result
    }

    /// The most plaintext one TLS record carries (RFC 8446 §5.1).
    static let tlsRecordSize = 16 * 1024

    /// Sends TLS `close_notify` (RFC 8446 §6.1) before the connection's write side is shut;
    /// `false` while the socket cannot take it yet (EPOLLOUT brings the connection back).
    func sendCloseNotify(_ connection: Connection) -> Bool {
        guard let tls = connection.state.tls else { return true }
        switch tls.shutdown() {
        case .wantWrite:
            connection.state.canWrite = false
            return false
        case .done, .wantRead, .failed:
            return true
        }
    }
}
#endif
