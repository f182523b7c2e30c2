#if os(Linux)
// Small POSIX pieces the server is built from, over the floor's (CacheSystem) listener: durations
// in milliseconds, peer addresses. Glibc only, no Foundation.
import CEpollHTTPCache  // sockaddr_storage: the proxy's module owns <sys/socket.h>
import CacheSystem
import Glibc

/// A configured duration in seconds as whole milliseconds (at least 1).
func milliseconds(_ seconds: Double) -> Int {
    guard seconds.isFinite, seconds > 0 else { return 1 }
    return seconds >= Double(Int.max / 2_000) ? Int.max / 2 : max(1, Int(seconds * 1000))
}

/// Opens a nonblocking listening socket on `host:port`; returns it with the port it got.
/// `option` names the flag to change in the error.
func openListener(host: String, port: UInt16, option: String = "--listen") throws(ServerError) -> (
    fd: Int32, port: UInt16
) {
    guard let address = SocketAddress(host: host, port: port) else {
        throw ServerError(
            description: "cannot listen on \(host):\(port): \(host) is not an IPv4 or IPv6 address (or localhost)")
    }
    do {
        return try Socket.listening(on: address, backlog: 4096, nonblocking: true)
    } catch {
        throw ServerError(
            description: "cannot listen on \(host):\(port): \(error.reason); choose another \(option) port")
    }
}

/// Whether an accepted peer address is 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104.
func isLoopback(_ address: UnsafePointer<sockaddr_storage>) -> Bool {
    switch Int32(address.pointee.ss_family) {
    case AF_INET:
        return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
            UInt32(bigEndian: $0.pointee.sin_addr.s_addr) >> 24 == 127
        }
    case AF_INET6:
        return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
            withUnsafeBytes(of: pointer.pointee.sin6_addr) { bytes in
                let zeroPrefix = bytes[0..<10].allSatisfy { $0 == 0 }
                if zeroPrefix && bytes[10] == 0 && bytes[11] == 0 {
                    return bytes[12..<15].allSatisfy { $0 == 0 } && bytes[15] == 1  // ::1
                }
                return zeroPrefix && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127  // v4-mapped
            }
        }
    default:
        return false
    }
}

/// The peer of `fd` as `address:port`, for log lines; `?` when unknown.
func peerDescription(_ fd: Int32) -> String {
    var address = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
    }
    guard named == 0, let peer = SocketAddress(address) else { return "?" }
    return peer.description
}
#endif
