#if os(Linux)
import CacheSemantics
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Opening TCP connections to origins: for the upstream client (``UpstreamClient``), the origin
/// side of a `CONNECT` tunnel (RFC 9110 §9.3.6), and the proxy for `purge --proxy`.
enum OriginSocket {
    /// Why no connection was made.
    struct Failure: Error, CustomStringConvertible {
        enum Kind: Equatable {
            /// The name did not resolve.
            case unresolved
            /// No address answered within the timeout.
            case timedOut
            /// Every address refused or was unreachable (the `errno` of the last).
            case failed(Int32)
        }

        var kind: Kind
        /// What happened, e.g. `Connection refused` or `the name a.test could not be resolved (…)`.
        var description: String
    }

    /// `host:port` (or `[v6]:port`) from an authority-form target (RFC 9112 §3.2.3) or an
    /// `http` URL's authority (`host[:port]`, then `defaultPort` when it has none); `nil` when it
    /// is not `host[:port]` (RFC 3986 §3.2.2–§3.2.3) or names no port.
    static func authority(_ target: String, defaultPort: UInt16? = nil) -> (host: String, port: UInt16)? {
        guard let authority = try? URIAuthority(target), let port = authority.port ?? defaultPort else { return nil }
        return (authority.lookupHost, port)
    }

    /// A connected TCP socket to `host:port`, trying each address in turn, with `TCP_NODELAY`
    /// and close-on-exec set.
    ///
    /// The connect is non-blocking, bounded by a `poll`, so `timeout` holds whatever the
    /// kernel's SYN retries would take; it bounds all addresses together.
    /// - Parameters:
    ///   - timeout: Seconds for the whole attempt; 0 or less: no bound.
    ///   - blocking: Whether the socket is returned in blocking mode (else `O_NONBLOCK` stays set).
    static func connect(host: String, port: UInt16, timeout: Double, blocking: Bool = true) -> Result<Int32, Failure> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let resolved = getaddrinfo(host, String(port), &hints, &list)
        guard resolved == 0, let first = list else {
            let reason = String(cString: gai_strerror(resolved))
            return .failure(
                Failure(kind: .unresolved, description: "the name \(host) could not be resolved (\(reason))"))
        }
        defer { freeaddrinfo(list) }
        let deadline = timeout > 0 ? monotonicSeconds() + timeout : .infinity
        var lastError: Int32 = ECONNREFUSED
        var address: UnsafeMutablePointer<addrinfo>? = first
        while let current = address {
            address = current.pointee.ai_next
            let fd = socket(current.pointee.ai_family, socketType, 0)
            guard fd >= 0 else {
                lastError = errno
                continue
            }
            #if !canImport(Glibc)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            #endif
            let flags = fcntl(fd, F_GETFL)
            _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
            switch finishConnect(fd, current.pointee, deadline: deadline) {
            case 0:
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                #if canImport(Darwin)
                // Linux sends with MSG_NOSIGNAL; Darwin needs this for a write to a closed peer to fail with EPIPE.
                setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
                #endif
                if blocking { _ = fcntl(fd, F_SETFL, flags) }
                return .success(fd)
            case ETIMEDOUT where monotonicSeconds() >= deadline:
                close(fd)
                return .failure(Failure(kind: .timedOut, description: "no answer within \(seconds(timeout))"))
            case let code:
                lastError = code
                close(fd)
            }
        }
        return .failure(Failure(kind: .failed(lastError), description: String(cString: strerror(lastError))))
    }

    #if canImport(Glibc)
    private static let socketType = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    #else
    private static let socketType = SOCK_STREAM
    #endif

    /// Connects the non-blocking `fd` to `address`, waiting until `deadline`: 0, or the `errno`.
    private static func finishConnect(_ fd: Int32, _ address: addrinfo, deadline: Double) -> Int32 {
        guard connectSocket(fd, address.ai_addr, address.ai_addrlen) != 0 else { return 0 }
        guard errno == EINPROGRESS else { return errno }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        while true {
            let left = deadline - monotonicSeconds()
            guard left > 0 else { return ETIMEDOUT }
            let ready = poll(&poller, 1, left.isFinite ? Int32(min(left * 1000, 3_600_000).rounded(.up)) : -1)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else { return errno }
            return error
        }
    }

    private static func connectSocket(
        _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>!, _ length: socklen_t
    ) -> Int32 {
        #if canImport(Glibc)
        Glibc.connect(fd, address, length)
        #else
        Darwin.connect(fd, address, length)
        #endif
    }

    /// Seconds on the monotonic clock.
    static func monotonicSeconds() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// `10 s`, `0.5 s`.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value)) s" : "\(value) s"
    }
}
#endif
