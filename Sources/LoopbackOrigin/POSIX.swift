import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The socket and thread calls the origin makes, with the Linux/Darwin differences in one place.
enum POSIX {
    /// The system's text for an `errno` value.
    static func errorText(_ code: Int32) -> String { String(cString: strerror(code)) }

    #if canImport(Glibc)
    private static let sendFlags = Int32(MSG_NOSIGNAL)  // a peer that went away gives EPIPE, not SIGPIPE
    #else
    private static let sendFlags: Int32 = 0  // Darwin: SO_NOSIGPIPE is set on every socket instead
    #endif

    /// 127.0.0.1, host byte order.
    static let localhost: UInt32 = 0x7F00_0001

    /// `address` (host byte order) as dotted decimal.
    static func dotted(_ address: UInt32) -> String {
        [24, 16, 8, 0].map { String((address >> UInt32($0)) & 0xFF) }.joined(separator: ".")
    }

    /// Calls `body` with the address `address`:`port` (127.0.0.1 unless told) and its length
    /// (for bind and connect).
    static func withLoopbackAddress<Result>(
        port: UInt16, address: UInt32 = localhost, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Result
    ) -> Result {
        var socketAddress = sockaddr_in()
        #if canImport(Darwin)
        socketAddress.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        #endif
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = port.bigEndian
        socketAddress.sin_addr = in_addr(s_addr: address.bigEndian)
        return withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// A TCP socket listening on `address` (127.0.0.1 unless told), with its port: `port`, or
    /// for 0 a free one that ``OriginPorts`` chooses.
    static func listeningSocket(
        choosing port: UInt16, address: UInt32 = localhost
    ) throws(LoopbackOrigin.SocketError) -> (fd: Int32, port: UInt16) {
        guard port == 0 else { return try listeningSocket(port: port, address: address) }
        var lastError = LoopbackOrigin.SocketError(operation: "bind(\(dotted(address)))", code: EADDRINUSE)
        for _ in 0..<64 {
            let candidate = OriginPorts.candidate()
            do {
                return try listeningSocket(port: candidate, address: address)
            } catch  where error.code == EADDRINUSE {
                OriginPorts.release(candidate)
                lastError = error
            }
        }
        throw lastError
    }

    /// A new TCP socket, close-on-exec (and, on Apple platforms, raising no SIGPIPE).
    private static func streamSocket() throws(LoopbackOrigin.SocketError) -> Int32 {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw LoopbackOrigin.SocketError(operation: "socket(AF_INET, SOCK_STREAM)", code: errno) }
        #if canImport(Darwin)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        setOption(fd, SOL_SOCKET, SO_NOSIGPIPE)
        #endif
        return fd
    }

    /// A TCP socket bound to `address`:`port` (127.0.0.1 unless told; port 0: the kernel picks)
    /// and listening, with the port it got.
    static func listeningSocket(
        port: UInt16, address: UInt32 = localhost
    ) throws(LoopbackOrigin.SocketError) -> (fd: Int32, port: UInt16) {
        let fd = try streamSocket()
        // Lets `restart()` bind the same port while connections of the last run sit in TIME_WAIT.
        setOption(fd, SOL_SOCKET, SO_REUSEADDR)

        let bound = withLoopbackAddress(port: port, address: address) { bind(fd, $0, $1) }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw LoopbackOrigin.SocketError(operation: "bind(\(dotted(address)):\(port))", code: code)
        }
        guard listen(fd, 128) == 0 else {
            let code = errno
            close(fd)
            throw LoopbackOrigin.SocketError(operation: "listen(\(dotted(address)):\(port))", code: code)
        }

        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            let code = errno
            close(fd)
            throw LoopbackOrigin.SocketError(operation: "getsockname", code: code)
        }
        return (fd, UInt16(bigEndian: actual.sin_port))
    }

    /// A pipe whose write end wakes the accept loop's `poll`.
    static func wakePipe() throws(LoopbackOrigin.SocketError) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw LoopbackOrigin.SocketError(operation: "pipe", code: errno) }
        _ = fcntl(ends[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(ends[1], F_SETFD, FD_CLOEXEC)
        return (ends[0], ends[1])
    }

    /// Accepts one connection and configures it (close-on-exec, no Nagle, no SIGPIPE); -1 and `errno` on failure.
    static func acceptConnection(_ listener: Int32) -> Int32 {
        // accept4(SOCK_CLOEXEC) is not in Swift's Glibc module; the window before fcntl only matters to
        // a process that forks and execs at that instant.
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return fd }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        #if canImport(Darwin)
        setOption(fd, SOL_SOCKET, SO_NOSIGPIPE)
        #endif
        // A response goes out in one or two writes; without this, Nagle plus delayed ACK stalls keep-alive.
        setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY)
        return fd
    }

    /// A blocking TCP socket connected to 127.0.0.1:`port` (close-on-exec, no Nagle, no SIGPIPE).
    static func connectedSocket(port: UInt16) throws(LoopbackOrigin.SocketError) -> Int32 {
        let fd = try streamSocket()
        setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY)
        guard withLoopbackAddress(port: port, { connect(fd, $0, $1) }) == 0 else {
            let code = errno
            close(fd)
            throw LoopbackOrigin.SocketError(operation: "connect(127.0.0.1:\(port))", code: code)
        }
        return fd
    }

    private static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32) {
        var one: Int32 = 1
        _ = setsockopt(fd, level, name, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Blocks until `fd` or `wake` is readable; returns which, or nil when `poll` failed (EINTR included).
    static func waitForEither(_ fd: Int32, orWake wake: Int32) -> (fd: Bool, wake: Bool)? {
        var fds = [
            pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: wake, events: Int16(POLLIN), revents: 0),
        ]
        guard poll(&fds, nfds_t(fds.count), -1) >= 0 else { return nil }
        return (fds[0].revents != 0, fds[1].revents != 0)
    }

    /// Whether `fd` becomes readable (data, end of stream or error) within `milliseconds`.
    static func waitReadable(_ fd: Int32, milliseconds: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, milliseconds) > 0
    }

    /// Writes one byte to `fd`, ignoring failure (used to wake a `poll`).
    static func poke(_ fd: Int32) {
        var byte: UInt8 = 1
        _ = write(fd, &byte, 1)
    }

    /// Sends all of `bytes`; false when the peer is gone or the socket was shut down.
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return true }
            var offset = 0
            while offset < buffer.count {
                let sent = send(fd, base + offset, buffer.count - offset, sendFlags)
                if sent > 0 {
                    offset += sent
                } else if sent < 0 && errno == EINTR {
                    continue
                } else {
                    return false
                }
            }
            return true
        }
    }

    /// Reads what is available into `buffer` (blocking until something is); 0 at end of stream, -1 on error.
    static func receive(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            let received = recv(fd, buffer.baseAddress, buffer.count, 0)
            if received < 0 && errno == EINTR { continue }
            return received
        }
    }

    /// Shuts down both directions, waking any thread blocked in `recv` or `send` on `fd`.
    static func shutdownBoth(_ fd: Int32) {
        #if canImport(Glibc)
        _ = shutdown(fd, Int32(SHUT_RDWR))
        #else
        _ = shutdown(fd, SHUT_RDWR)
        #endif
    }

    /// Ends our side after an error reply, then reads (and drops) what the client is still sending for a
    /// short while, so closing with unread input does not reset the connection before the reply arrives.
    static func finishSending(_ fd: Int32) {
        #if canImport(Glibc)
        _ = shutdown(fd, Int32(SHUT_WR))
        #else
        _ = shutdown(fd, SHUT_WR)
        #endif
        var scratch = [UInt8](repeating: 0, count: 16 * 1024)
        var drained = 0
        var rounds = 0
        while drained < 1 << 20, rounds < 20, waitReadable(fd, milliseconds: 50) {
            let received = scratch.withUnsafeMutableBytes { receive(fd, into: $0) }
            if received <= 0 { return }
            drained += received
            rounds += 1
        }
    }

    /// Closes `fd`, ignoring failure.
    static func closeDescriptor(_ fd: Int32) {
        _ = close(fd)
    }

    /// Starts a detached thread with a 1 MiB stack running `body`; false if the system refused.
    static func spawnThread(_ body: @escaping @Sendable () -> Void) -> Bool {
        // Raw memory that pthread_attr_init fills (the zero initializer of the imported type is not
        // visible here without importing Dispatch's C module on Linux).
        let attributes = UnsafeMutablePointer<pthread_attr_t>.allocate(capacity: 1)
        defer { attributes.deallocate() }
        guard pthread_attr_init(attributes) == 0 else { return false }
        defer { pthread_attr_destroy(attributes) }
        _ = pthread_attr_setdetachstate(attributes, Int32(PTHREAD_CREATE_DETACHED))
        _ = pthread_attr_setstacksize(attributes, 1 << 20)
        let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        #if canImport(Darwin)
        var thread: pthread_t?
        let created = pthread_create(
            &thread, attributes,
            { raw in
                Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            }, context)
        #else
        var thread: pthread_t = 0
        let created = pthread_create(
            &thread, attributes,
            { raw in
                guard let raw else { return nil }
                Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().run()
                return nil
            }, context)
        #endif
        if created != 0 {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            return false
        }
        return true
    }
}

/// The closure a new thread runs, boxed to pass through `pthread_create`'s context pointer.
private final class ThreadBody {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// The ports origins of this process listen on, chosen below the kernel's range of ephemeral
/// ports (32768–60999 on Linux, 49152–65535 on Apple systems) and kept while their origin
/// lives: a port an origin gave up with ``LoopbackOrigin/stop()`` is still its own for
/// ``LoopbackOrigin/restart()``, since neither a socket bound to port 0 (a proxy's listener, a
/// client's local port) nor another origin can take it meanwhile.
enum OriginPorts {
    private static let reserved = Locked<Set<UInt16>>([])

    /// A port from 10000–32767 no live origin holds, reserved for the caller.
    static func candidate() -> UInt16 {
        reserved.withLock { reserved in
            while true {
                let port = UInt16.random(in: 10_000..<32_768)
                if reserved.insert(port).inserted { return port }
            }
        }
    }

    /// Marks `port` as held (a port an origin was asked to use).
    static func hold(_ port: UInt16) {
        _ = reserved.withLock { $0.insert(port) }
    }

    /// Gives `port` back.
    static func release(_ port: UInt16) {
        _ = reserved.withLock { $0.remove(port) }
    }
}
