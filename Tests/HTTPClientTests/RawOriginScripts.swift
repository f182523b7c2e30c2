#if os(Linux)
import Foundation
import Glibc
import LoopbackOrigin

/// Scripts and sockets the upstream client's tests use with ``RawOrigin``.
extension RawOrigin {
    /// An origin whose every connection answers each request with a short 200, keeping the
    /// connection open.
    static func answeringEach() throws -> RawOrigin {
        try RawOrigin(answer: { _ in [.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")] })
    }

    /// The first connection answers its first request, then reads the second and closes without
    /// answering (as an origin does when its idle timeout strikes just as the request arrives);
    /// later connections answer everything.
    static let answerOnceThenDropTheNext: @Sendable (RawConnection) -> Void = { connection in
        var count = 0
        while connection.readRequest() != nil {
            count += 1
            if connection.index == 0 && count == 2 { return }
            connection.send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        }
    }

    /// A bound, listening 127.0.0.1 socket on a port the kernel chose.
    static func listen(backlog: Int32) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && Glibc.listen(fd, backlog) == 0
                    && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            Glibc.close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    /// A listener with a backlog of 0 and one connection waiting, never accepted: Linux then
    /// drops further SYNs, so a connect to it hangs.
    final class FullListener {
        let port: UInt16
        private let fd: Int32
        private var clients: [Int32] = []

        init() throws {
            (fd, port) = try RawOrigin.listen(backlog: 0)
            for _ in 0..<2 {
                let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                address.sin_port = port.bigEndian
                _ = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
                clients.append(client)
            }
            usleep(50_000)  // let the handshakes settle into the queue
        }

        func close() {
            (clients + [fd]).forEach { _ = Glibc.close($0) }
        }
    }
}
#endif
