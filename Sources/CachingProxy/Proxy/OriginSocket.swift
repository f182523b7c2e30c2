import Glibc

/// Opening the origin side of a `CONNECT` tunnel (RFC 9110 §9.3.6), and the proxy for `purge --proxy`.
enum OriginSocket {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// `host:port` (or `[v6]:port`) from an authority-form target (RFC 9112 §3.2.3).
    static func authority(_ target: String) -> (host: String, port: UInt16)? {
        guard let colon = target.utf8.lastIndex(of: UInt8(ascii: ":")),
            let port = UInt16(target[target.index(after: colon)...]), port > 0
        else { return nil }
        var host = String(target[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, !host.utf8.contains(where: { $0 <= 0x20 || $0 == UInt8(ascii: "/") }) else { return nil }
        return (host, port)
    }

    /// A connected TCP socket to `host:port`, trying each address in turn.
    static func connect(host: String, port: UInt16, timeout: Double) -> Result<Int32, Failure> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let first = list else {
            return .failure(Failure(description: "the name \(host) could not be resolved (\(String(cString: gai_strerror(resolved))))"))
        }
        defer { freeaddrinfo(list) }
        var lastError: Int32 = ECONNREFUSED
        var address: UnsafeMutablePointer<addrinfo>? = first
        while let current = address {
            address = current.pointee.ai_next
            let fd = socket(current.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                lastError = errno
                continue
            }
            var limit = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
            if Glibc.connect(fd, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 {
                var none = timeval()
                setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, socklen_t(MemoryLayout<timeval>.size))
                return .success(fd)
            }
            lastError = errno
            close(fd)
        }
        return .failure(Failure(description: String(cString: strerror(lastError))))
    }
}
