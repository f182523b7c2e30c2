import CacheTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TLS client and server over the two ends of a non-blocking socket pair, driven in turn by
/// one thread through the non-blocking core: each call returns at once, so no thread waits
/// for the other and nothing depends on timing.
final class ConnectedPair {
    let client: TLSConnection
    let server: TLSConnection
    private(set) var clientSocket: Int32
    private(set) var serverSocket: Int32

    /// - Parameters:
    ///   - host: What the client asks for (SNI, the name to verify).
    ///   - port: Names the origin in errors and the session cache.
    init(
        client clientContext: TLSClientContext, server serverContext: TLSServerContext, host: String = "127.0.0.1",
        port: UInt16 = 8443
    ) throws {
        var ends: [Int32] = [-1, -1]
        // Close-on-exec from the start: a process another test spawns at this instant would otherwise
        // inherit both ends and keep them open, and closing one end would give the other no EOF.
        #if canImport(Glibc)
        let made = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends)
        #else
        let made = socketpair(AF_UNIX, SOCK_STREAM, 0, &ends)
        for fd in ends where made == 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        #endif
        guard made == 0 else { throw PairFailure(description: "socketpair: \(String(cString: strerror(errno)))") }
        for fd in ends { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        clientSocket = ends[0]
        serverSocket = ends[1]
        do {
            client = try clientContext.connection(fd: ends[0], host: host, port: port)
            server = try serverContext.connection(fd: ends[1])
        } catch {
            ends.forEach { _ = close($0) }
            throw error
        }
    }

    deinit {
        closeClientSocket()
        closeServerSocket()
    }

    struct PairFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs both handshakes until neither can go on: how each ended. With `serverHolds`, the
    /// server keeps what its last step wrote (``TLSConnection/handshake(holdingLast:)``).
    func handshake(serverHolds: Bool = false) -> (client: TLSConnection.Progress, server: TLSConnection.Progress) {
        var clientProgress = TLSConnection.Progress.wantWrite
        var serverProgress = TLSConnection.Progress.wantRead
        func waiting(_ progress: TLSConnection.Progress) -> Bool {
            progress == .wantRead || progress == .wantWrite
        }
        for _ in 0..<64 where waiting(clientProgress) || waiting(serverProgress) {
            if waiting(clientProgress) { clientProgress = client.handshake() }
            if waiting(serverProgress) { serverProgress = server.handshake(holdingLast: serverHolds) }
        }
        return (clientProgress, serverProgress)
    }

    /// Writes `text` from `sender`, record after record (a write stops after one record of at
    /// most 16 KiB): how many bytes were written in all, or the first result that was not bytes.
    func write(_ text: String, from sender: TLSConnection) -> TLSConnection.WriteResult {
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { sender.write(UnsafeRawBufferPointer(rebasing: $0[written...])) }
            guard case .wrote(let count) = result else { return result }
            written += count
        }
        return .wrote(written)
    }

    /// Reads and drops what waits on the server's socket, below TLS (a ClientHello nobody
    /// answers), so that closing it sends a FIN rather than a reset.
    func drainServerSocket() {
        var scratch = [UInt8](repeating: 0, count: 64 * 1024)
        while recv(serverSocket, &scratch, scratch.count, 0) > 0 {}
    }

    /// Reads from `receiver` with a buffer of `size` bytes until it would wait or the
    /// connection ends: the bytes, and the first result that was not bytes.
    func readAll(_ receiver: TLSConnection, bufferSize size: Int = 16 * 1024) -> (
        text: String, end: TLSConnection.ReadResult
    ) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: size)
        while true {
            let result = buffer.withUnsafeMutableBytes { receiver.read(into: $0) }
            guard case .bytes(let count) = result else {
                return (String(decoding: received, as: UTF8.self), result)
            }
            received += buffer[0..<count]
        }
    }

    /// Bytes waiting to be read on the client's socket, below TLS (`FIONREAD`).
    var bytesOnClientSocket: Int {
        var count: Int32 = 0
        return ioctl(clientSocket, UInt(FIONREAD), &count) == 0 ? Int(count) : -1
    }

    /// Closes the server's socket without `close_notify`: an EOF to the client, once no other
    /// process holds that end. A process another test spawns at this moment holds a copy of
    /// every descriptor until its `exec` drops the close-on-exec ones (one whole-suite run read
    /// no EOF here), so this waits up to 10 s for the client's socket to see the hang-up.
    func closeServerSocket() {
        guard serverSocket >= 0 else { return }
        _ = close(serverSocket)
        serverSocket = -1
        guard clientSocket >= 0 else { return }
        // A stream socket pair's end reports POLLHUP once its peer is closed everywhere.
        let hangUp = Int16(POLLHUP)
        var watched = pollfd(fd: clientSocket, events: hangUp, revents: 0)
        for _ in 0..<100 where watched.revents & hangUp == 0 { _ = poll(&watched, 1, 100) }
    }

    /// Closes the client's socket.
    func closeClientSocket() {
        if clientSocket >= 0 { _ = close(clientSocket) }
        clientSocket = -1
    }
}
