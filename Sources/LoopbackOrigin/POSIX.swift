import CacheSystem

#if canImport(Glibc)
import CEpollHTTPCache
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The socket and thread calls the origin makes, over the floor's (CacheSystem), which holds
/// the Linux/Darwin differences.
enum POSIX {
    #if canImport(Glibc)
    private static let sendFlags = Int32(MSG_NOSIGNAL)  // a peer that went away gives EPIPE, not SIGPIPE
    #else
    private static let sendFlags: Int32 = 0  // Darwin: SO_NOSIGPIPE is set on every socket instead
    #endif

    /// 127.0.0.1, host byte order.
    static let localhost: UInt32 = 0x7F00_0001

    /// `address` (host byte order) as dotted decimal.
    static func dotted(_ address: UInt32) -> String { SocketAddress(ipv4: address, port: 0).host }

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

    /// A TCP socket bound to `address`:`port` (127.0.0.1 unless told; port 0: the kernel picks)
    /// and listening, with the port it got.
    static func listeningSocket(
        port: UInt16, address: UInt32 = localhost
    ) throws(LoopbackOrigin.SocketError) -> (fd: Int32, port: UInt16) {
        do {
            return try Socket.listening(on: SocketAddress(ipv4: address, port: port), backlog: 128)
        } catch {
            throw LoopbackOrigin.SocketError(error)
        }
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
        // Close-on-exec from the start: a process spawned by another thread at this instant must not
        // inherit the connection (it would keep it open after we close it, and the peer sees no EOF).
        #if canImport(Glibc)
        let fd = csocket_accept4(listener, Int32(SOCK_CLOEXEC.rawValue))
        guard fd >= 0 else { return fd }
        #else
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return fd }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        #endif
        #if canImport(Darwin)
        Socket.setOption(fd, SOL_SOCKET, SO_NOSIGPIPE)
        #endif
        // A response goes out in one or two writes; without this, Nagle plus delayed ACK stalls keep-alive.
        Socket.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY)
        return fd
    }

    /// A blocking TCP socket connected to 127.0.0.1:`port` (close-on-exec, no Nagle, no SIGPIPE).
    static func connectedSocket(port: UInt16) throws(LoopbackOrigin.SocketError) -> Int32 {
        switch Socket.connected(host: dotted(localhost), port: port, timeout: 0) {
        case .success(let fd):
            return fd
        case .failure(let failure):
            // Unbounded, the connect cannot time out, and a numeric address always resolves.
            let code: Int32 =
                switch failure.kind {
                case .failed(let code): code
                case .timedOut: ETIMEDOUT
                case .unresolved: EINVAL
                }
            throw LoopbackOrigin.SocketError(operation: "connect(127.0.0.1:\(port))", code: code)
        }
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

    /// Starts a detached thread with a 1 MiB stack running `body`.
    /// - Throws: ``SystemError`` from `pthread_create`; `body` then never runs.
    static func startThread(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        try SystemThread.detached(stackSize: 1 << 20, body)
    }

    /// ``startThread(_:)``: false if the system refused.
    static func spawnThread(_ body: @escaping @Sendable () -> Void) -> Bool {
        (try? startThread(body)) != nil
    }
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
