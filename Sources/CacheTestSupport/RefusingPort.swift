import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A port on 127.0.0.1 where every connection is refused, for as long as this value lives.
///
/// A socket is bound to the port and never listens: a connect to it is answered with a reset
/// (`ECONNREFUSED`), and while the socket is held no other listener, in this process or another,
/// can take the port, nor can an outgoing connection be given it as its own port (which would
/// connect to itself). A port that was listened on and then closed has neither guarantee: on a
/// busy machine another test's server may have it by the time the test connects.
public final class RefusingPort: Sendable {
    /// The port.
    public let port: UInt16
    private let fd: Int32

    /// Binds a socket to a free port on 127.0.0.1 (the kernel chooses it).
    public init() throws {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw SystemError("socket(AF_INET, SOCK_STREAM)", code: errno) }
        let address = SocketAddress(ipv4: 0x7F00_0001, port: 0)
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) { storage in
            storage.withMemoryRebound(to: sockaddr.self, capacity: 1) { name in
                address.withSockaddr { bind(fd, $0, $1) } == 0 && getsockname(fd, name, &length) == 0
            }
        }
        guard named, let port = SocketAddress(storage)?.port else {
            let error = SystemError("bind(\(address))", code: errno)
            close(fd)
            throw error
        }
        self.fd = fd
        self.port = port
    }

    deinit { close(fd) }
}
