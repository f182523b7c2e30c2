#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 socket address: what a listener binds and a peer is.
public enum SocketAddress: CustomStringConvertible, Sendable {
    case v4(sockaddr_in)
    case v6(sockaddr_in6)

    /// The address of `host` (an IPv4 or IPv6 literal, bracketed or not, or `localhost` for
    /// 127.0.0.1) and `port`; `nil` for anything else (names are not resolved here).
    public init?(host: String, port: UInt16) {
        let literal = host == "localhost" ? "127.0.0.1" : host
        var v4 = sockaddr_in()
        if inet_pton(AF_INET, literal, &v4.sin_addr) == 1 {
            self.init(v4, port: port)
            return
        }
        var v6 = sockaddr_in6()
        let bare = literal.hasPrefix("[") && literal.hasSuffix("]") ? String(literal.dropFirst().dropLast()) : literal
        guard inet_pton(AF_INET6, bare, &v6.sin6_addr) == 1 else { return nil }
        #if canImport(Darwin)
        v6.sin6_len = UInt8(MemoryLayout<sockaddr_in6>.size)
        #endif
        v6.sin6_family = sa_family_t(AF_INET6)
        v6.sin6_port = port.bigEndian
        self = .v6(v6)
    }

    /// The IPv4 address `address` (host byte order, e.g. `0x7F00_0001` for 127.0.0.1) and `port`.
    public init(ipv4 address: UInt32, port: UInt16) {
        var v4 = sockaddr_in()
        v4.sin_addr = in_addr(s_addr: address.bigEndian)
        self.init(v4, port: port)
    }

    private init(_ address: sockaddr_in, port: UInt16) {
        var v4 = address
        #if canImport(Darwin)
        v4.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        v4.sin_family = sa_family_t(AF_INET)
        v4.sin_port = port.bigEndian
        self = .v4(v4)
    }

    /// The address in `storage` (as `accept`, `getsockname` and `getpeername` fill it); `nil`
    /// when it is neither IPv4 nor IPv6.
    public init?(_ storage: sockaddr_storage) {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            self = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { .v4($0.pointee) }
            }
        case AF_INET6:
            self = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { .v6($0.pointee) }
            }
        default:
            return nil
        }
    }

    /// `AF_INET` or `AF_INET6`.
    public var family: Int32 {
        switch self {
        case .v4: AF_INET
        case .v6: AF_INET6
        }
    }

    /// The port, host byte order.
    public var port: UInt16 {
        switch self {
        case .v4(let address): UInt16(bigEndian: address.sin_port)
        case .v6(let address): UInt16(bigEndian: address.sin6_port)
        }
    }

    /// The address alone: `127.0.0.1`, `::1`.
    public var host: String {
        var text = [CChar](repeating: 0, count: 64)
        switch self {
        case .v4(var address): inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(text.count))
        case .v6(var address): inet_ntop(AF_INET6, &address.sin6_addr, &text, socklen_t(text.count))
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `127.0.0.1:8080`, `[::1]:8080`.
    public var description: String {
        switch self {
        case .v4: "\(host):\(port)"
        case .v6: "[\(host)]:\(port)"
        }
    }

    /// Calls `body` with the address as a `sockaddr` and its length (for `bind`, `connect`).
    public func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
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

/// Why ``Socket/connected(host:port:timeout:blocking:)`` made no connection.
public struct ConnectFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Equatable {
        /// The name did not resolve (`getaddrinfo` failed).
        case unresolved
        /// No address answered within the timeout.
        case timedOut
        /// Every address refused or was unreachable: the `errno` of the last.
        case failed(Int32)
    }

    /// What went wrong.
    public var kind: Kind
    /// The system's words for it: `gai_strerror`'s text for ``Kind/unresolved``, `strerror`'s
    /// for ``Kind/failed(_:)``; callers put it in a sentence of their own.
    public var reason: String

    public var description: String { reason }
}

/// TCP sockets, written once for Linux and Apple systems: a listener, a connect bounded by a
/// deadline, and socket options. Every socket made here is close-on-exec, and on Apple
/// systems raises no SIGPIPE (`SO_NOSIGPIPE`; on Linux send with `MSG_NOSIGNAL`).
public enum Socket {
    /// Sets the integer socket option `name` at `level` (e.g. `IPPROTO_TCP`, `TCP_NODELAY`) to
    /// `value`, ignoring failure (the options set here only tune a working socket).
    @inlinable @inline(__always)
    public static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32 = 1) {
        var value = value
        _ = setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// A TCP socket bound to `address` and listening, with the port it got (the kernel picks
    /// one for port 0).
    ///
    /// `SO_REUSEADDR` is set: a listener restarted on its port need not wait for the last
    /// run's connections in `TIME_WAIT`.
    /// - Parameters:
    ///   - backlog: The length of the queue of connections not yet accepted.
    ///   - nonblocking: Whether `accept` on it returns at once when nothing waits (for an
    ///     event loop) rather than blocking.
    /// - Throws: ``SystemError`` naming the call that failed: `socket(…)`, `bind(address)`
    ///   (`EADDRINUSE` when the port is taken), `listen(address)` or `getsockname`.
    public static func listening(
        on address: SocketAddress, backlog: Int32, nonblocking: Bool = false
    ) throws(SystemError) -> (fd: Int32, port: UInt16) {
        let fd = try stream(family: address.family)
        if nonblocking { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        setOption(fd, SOL_SOCKET, SO_REUSEADDR)
        func failure(_ operation: String) -> SystemError {
            let error = SystemError(operation, code: errno)
            close(fd)
            return error
        }
        guard address.withSockaddr({ bind(fd, $0, $1) }) == 0 else { throw failure("bind(\(address))") }
        guard listen(fd, backlog) == 0 else { throw failure("listen(\(address))") }
        var actual = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw failure("getsockname") }
        return (fd, SocketAddress(actual)?.port ?? address.port)
    }

    /// A TCP socket connected to `host:port`, trying each address the name resolves to in
    /// turn, with `TCP_NODELAY` set (a request goes out in one or two writes; Nagle plus
    /// delayed ACK would stall it).
    ///
    /// The connect is non-blocking and waited for with `poll`, so `timeout` holds whatever
    /// the kernel's SYN retries would take; it bounds all addresses together. A signal
    /// (`EINTR`) does not end the wait early: it goes on for the time that is left.
    /// - Parameters:
    ///   - host: A name or an IPv4 or IPv6 literal.
    ///   - timeout: Seconds for the whole attempt; 0 or less: no bound.
    ///   - blocking: Whether the socket is returned in blocking mode (else `O_NONBLOCK` stays set).
    /// - Returns: The socket, or why there is none.
    public static func connected(
        host: String, port: UInt16, timeout: Double, blocking: Bool = true
    ) -> Result<Int32, ConnectFailure> {
        var hints = addrinfo()
        hints.ai_socktype = streamType
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let first = list else {
            return .failure(ConnectFailure(kind: .unresolved, reason: String(cString: gai_strerror(resolved))))
        }
        defer { freeaddrinfo(list) }
        let deadline = timeout > 0 ? MonotonicClock.seconds() + timeout : .infinity
        var lastError: Int32 = ECONNREFUSED
        var address: UnsafeMutablePointer<addrinfo>? = first
        while let current = address {
            address = current.pointee.ai_next
            let fd: Int32
            do throws(SystemError) {
                fd = try stream(family: current.pointee.ai_family)
            } catch {
                lastError = error.code
                continue
            }
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            switch finishConnect(fd, current.pointee, deadline: deadline) {
            case 0:
                setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY)
                if blocking { _ = fcntl(fd, F_SETFL, flags) }
                return .success(fd)
            case ETIMEDOUT where MonotonicClock.seconds() >= deadline:
                close(fd)
                return .failure(ConnectFailure(kind: .timedOut, reason: errnoText(ETIMEDOUT)))
            case let code:
                lastError = code
                close(fd)
            }
        }
        return .failure(ConnectFailure(kind: .failed(lastError), reason: errnoText(lastError)))
    }

    #if canImport(Glibc)
    private static let streamType = Int32(SOCK_STREAM.rawValue)
    #else
    private static let streamType = SOCK_STREAM
    #endif

    /// A new TCP socket of `family`, close-on-exec (and, on Apple systems, raising no SIGPIPE).
    private static func stream(family: Int32) throws(SystemError) -> Int32 {
        #if canImport(Glibc)
        let fd = socket(family, streamType | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(family, streamType, 0)
        #endif
        guard fd >= 0 else {
            throw SystemError("socket(\(family == AF_INET6 ? "AF_INET6" : "AF_INET"), SOCK_STREAM)", code: errno)
        }
        #if canImport(Darwin)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        setOption(fd, SOL_SOCKET, SO_NOSIGPIPE)
        #endif
        return fd
    }

    /// Connects the non-blocking `fd` to `address`, waiting until `deadline`: 0, or the `errno`.
    private static func finishConnect(_ fd: Int32, _ address: addrinfo, deadline: Double) -> Int32 {
        guard connect(fd, address.ai_addr, address.ai_addrlen) != 0 else { return 0 }
        // Interrupted, a non-blocking connect goes on in the background like one in progress.
        guard errno == EINPROGRESS || errno == EINTR else { return errno }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        while true {
            let left = deadline - MonotonicClock.seconds()
            guard left > 0 else { return ETIMEDOUT }
            let ready = poll(&poller, 1, left.isFinite ? Int32(min(left * 1000, 3_600_000).rounded(.up)) : -1)
            if ready < 0 && errno != EINTR { return errno }
            guard ready > 0 else { continue }  // a signal, or the time ran out: look at the clock again
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return errno }
            return error
        }
    }
}
