#if os(Linux)
// Small POSIX pieces the server is built from: the coarse monotonic clock, errno texts and the
// listening socket. Glibc only, no Foundation.
import CEpollHTTPCache
import Glibc

/// Milliseconds on CLOCK_MONOTONIC_COARSE: a vDSO read, no syscall, good to a few ms.
@inline(__always)
func monotonicMilliseconds() -> Int {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now)
    return now.tv_sec * 1000 + now.tv_nsec / 1_000_000
}

/// A configured duration in seconds as whole milliseconds (at least 1).
func milliseconds(_ seconds: Double) -> Int {
    guard seconds.isFinite, seconds > 0 else { return 1 }
    return seconds >= Double(Int.max / 2_000) ? Int.max / 2 : max(1, Int(seconds * 1000))
}

/// The system's text for an `errno` value.
func errnoText(_ code: Int32) -> String { String(cString: strerror(code)) }

@inline(__always)
func setSocketOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32 = 1) {
    var value = value
    setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
}

/// A socket address for `host` (an IPv4 or IPv6 literal, or `localhost`) and `port`.
enum ListenAddress {
    case v4(sockaddr_in)
    case v6(sockaddr_in6)

    init?(host: String, port: UInt16) {
        let literal = host == "localhost" ? "127.0.0.1" : host
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, literal, &v4.sin_addr) == 1 {
            v4.sin_family = sa_family_t(AF_INET)
            v4.sin_port = port.bigEndian
            self = .v4(v4)
            return
        }
        var v6 = sockaddr_in6()
        let bare = literal.hasPrefix("[") && literal.hasSuffix("]") ? String(literal.dropFirst().dropLast()) : literal
        if inet_pton(AF_INET6, bare, &v6.sin6_addr) == 1 {
            v6.sin6_family = sa_family_t(AF_INET6)
            v6.sin6_port = port.bigEndian
            self = .v6(v6)
            return
        }
        return nil
    }

    var family: Int32 {
        switch self {
        case .v4: AF_INET
        case .v6: AF_INET6
        }
    }

    func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        switch self {
        case .v4(var address):
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .v6(var address):
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
    }
}

/// Opens a nonblocking listening socket on `host:port`; returns it with the port it got.
func openListener(host: String, port: UInt16) throws(ServerError) -> (fd: Int32, port: UInt16) {
    func failure(_ what: String) -> ServerError {
        ServerError(description: "cannot listen on \(host):\(port): \(what); choose another --listen port")
    }
    guard let address = ListenAddress(host: host, port: port) else {
        throw ServerError(
            description: "cannot listen on \(host):\(port): \(host) is not an IPv4 or IPv6 address (or localhost)")
    }
    let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    let fd = socket(address.family, type, 0)
    guard fd >= 0 else { throw failure(errnoText(errno)) }
    // Restarting on the same port must not wait for the last run's TIME_WAIT connections.
    setSocketOption(fd, SOL_SOCKET, SO_REUSEADDR)
    let bound = address.withSockaddr { bind(fd, $0, $1) }
    guard bound == 0, listen(fd, 4096) == 0 else {
        let code = errno
        close(fd)
        throw failure(errnoText(code))
    }
    var actual = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let named = withUnsafeMutablePointer(to: &actual) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else {
        let code = errno
        close(fd)
        throw failure(errnoText(code))
    }
    let family = Int32(actual.ss_family)
    let boundPort = withUnsafePointer(to: &actual) { pointer -> UInt16 in
        if family == AF_INET6 {
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                UInt16(bigEndian: $0.pointee.sin6_port)
            }
        }
        return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
    }
    return (fd, boundPort)
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
    guard named == 0 else { return "?" }
    var text = [CChar](repeating: 0, count: 64)
    func decoded() -> String {
        String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    switch Int32(address.ss_family) {
    case AF_INET:
        var raw = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
        }
        inet_ntop(AF_INET, &raw.sin_addr, &text, socklen_t(text.count))
        return decoded() + ":\(UInt16(bigEndian: raw.sin_port))"
    case AF_INET6:
        var raw = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
        }
        inet_ntop(AF_INET6, &raw.sin6_addr, &text, socklen_t(text.count))
        return "[" + decoded() + "]:\(UInt16(bigEndian: raw.sin6_port))"
    default:
        return "?"
    }
}
#endif
