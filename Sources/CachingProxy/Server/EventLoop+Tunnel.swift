#if os(Linux)
// CONNECT tunnels (RFC 9110 §9.3.6): after `200`, bytes are relayed both ways. An EOF on one
// side becomes a half-close (shutdown SHUT_WR) of the other once what it sent is delivered;
// both sides are closed when both are done, or at the first error.
import CEpollHTTPCache
import CacheSystem
import Glibc

extension EventLoop {
    /// How much upstream data may wait for a slow client before reading upstream pauses.
    private static var tunnelBufferLimit: Int { 256 * 1024 }
    private static var tunnelReadSize: Int { 64 * 1024 }

    func tunnel(_ target: ResponseTarget, to fd: Int32) {
        if target.stream != nil {
            // Forward mode, the only one that tunnels, speaks HTTP/1.1 alone (no extended CONNECT).
            log("HTTP server: CONNECT is not relayed over HTTP/2; resetting the stream")
            Glibc.close(fd)
            return abortHTTP2(target)
        }
        guard isCurrent(target), !target.connection.state.responseStarted else {
            Glibc.close(fd)
            return
        }
        let connection = target.connection
        guard connection.state.tls == nil else {
            // The relay reads and writes the client's socket directly: not under TLS.
            log("HTTP server: CONNECT is not relayed over a TLS connection; closing it")
            Glibc.close(fd)
            return close(connection)
        }
        let flags = fcntl(fd, F_GETFL)
        guard fd >= 0, flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            log("HTTP server: cannot relay to descriptor \(fd): \(errnoText(errno)); closing the connection")
            if fd >= 0 { Glibc.close(fd) }
            return close(connection)
        }
        guard register(fd, connection) else {
            log("HTTP server: cannot watch descriptor \(fd) for a tunnel: \(errnoText(errno)); closing the connection")
            Glibc.close(fd)
            return close(connection)
        }
        connection.state.tunnel = Tunnel(fd: fd)
        connection.state.phase = .tunnel
        connection.state.responseStarted = true
        connection.state.deadline = now + idleMilliseconds
        connection.state.output.append("HTTP/1.1 200 Connection Established\r\n\r\n" as StaticString)
        markDirty(connection)
    }

    /// Moves bytes both ways until nothing more can move without blocking.
    func driveTunnel(_ connection: Connection) {
        guard let tunnel = connection.state.tunnel else { return }
        var moved = false
        var progress = true
        while progress && !connection.state.closed {
            progress = false

            // Client → upstream, through the connection's input buffer (it starts with any
            // bytes the client sent after the CONNECT head).
            if connection.state.bufferedInput > 0 && tunnel.canWrite {
                let sent = send(
                    tunnel.fd, connection.state.input! + connection.state.inputStart, connection.state.bufferedInput,
                    Int32(MSG_NOSIGNAL))
                if sent > 0 {
                    if sent < connection.state.bufferedInput { tunnel.canWrite = false }
                    connection.state.inputStart += sent
                    progress = true
                } else if sent < 0 && errno != EINTR {
                    guard errno == EAGAIN || errno == EWOULDBLOCK else { return close(connection) }
                    tunnel.canWrite = false
                }
            }
            if connection.state.bufferedInput == 0 && connection.state.inputClosed && !tunnel.writeShut {
                tunnel.writeShut = true
                Glibc.shutdown(tunnel.fd, Int32(SHUT_WR))
            }
            if connection.state.canRead && !connection.state.inputClosed {
                let space = connection.state.prepareInput(limit: Self.tunnelReadSize)
                if space > 0 {
                    switch Self.receive(
                        connection.fd, into: connection.state.input! + connection.state.inputEnd, count: space,
                        hungUp: connection.state.hungUp, canRead: &connection.state.canRead)
                    {
                    case .bytes(let received):
                        connection.state.inputEnd += received
                        progress = true
                    case .closed:
                        connection.state.inputClosed = true
                        connection.state.canRead = false
                        progress = true
                    case .wouldBlock: break
                    case .failed: return close(connection)
                    }
                }
            }

            // Upstream → client, through the connection's output queue.
            if !connection.state.output.isEmpty && connection.state.canWrite {
                let before = connection.state.output.count
                guard flush(connection) else { return }
                if connection.state.output.count < before { progress = true }
            }
            if connection.state.output.isEmpty && tunnel.inputClosed && !connection.state.writeShut {
                connection.state.writeShut = true
                Glibc.shutdown(connection.fd, Int32(SHUT_WR))
            }
            if tunnel.canRead && !tunnel.inputClosed && connection.state.output.count < Self.tunnelBufferLimit {
                let space = Self.tunnelReadSize
                let destination = connection.state.output.reserve(space)
                switch Self.receive(
                    tunnel.fd, into: destination, count: space, hungUp: tunnel.hungUp, canRead: &tunnel.canRead)
                {
                case .bytes(let received):
                    connection.state.output.commit(received)
                    progress = true
                case .closed:
                    tunnel.inputClosed = true
                    tunnel.canRead = false
                    progress = true
                case .wouldBlock: break
                case .failed: return close(connection)
                }
            }

            if connection.state.inputClosed && tunnel.inputClosed && connection.state.bufferedInput == 0
                && connection.state.output.isEmpty
            {
                return close(connection)
            }
            moved = moved || progress
        }
        if moved { connection.state.deadline = now + idleMilliseconds }
    }
}
#endif
