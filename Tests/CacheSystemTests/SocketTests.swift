import CacheSystem
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("Socket: one listener, one connect with a deadline, on 127.0.0.1 only")
struct SocketTests {
    @Test(
        "SocketAddress reads IPv4 and IPv6 literals and localhost, and nothing else",
        arguments: [
            ("127.0.0.1", "127.0.0.1:80"), ("localhost", "127.0.0.1:80"), ("::1", "[::1]:80"),
            ("[::1]", "[::1]:80"), ("example.test", nil), ("127.0.0.256", nil), ("", nil),
        ] as [(String, String?)])
    func addresses(host: String, expected: String?) {
        #expect(SocketAddress(host: host, port: 80)?.description == expected)
    }

    @Test("an IPv4 address in host byte order, and its parts")
    func ipv4() {
        let address = SocketAddress(ipv4: 0x7F00_0002, port: 8080)
        #expect(address.host == "127.0.0.2")
        #expect(address.port == 8080)
        #expect(address.family == AF_INET)
        #expect(address.description == "127.0.0.2:8080")
    }

    @Test("a listener on port 0 gets a port; a client connects to it, with TCP_NODELAY and close-on-exec")
    func listenAndConnect() throws {
        let listener = try Socket.listening(on: SocketAddress(ipv4: 0x7F00_0001, port: 0), backlog: 8)
        defer { close(listener.fd) }
        #expect(listener.port != 0)
        #expect(fcntl(listener.fd, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(listener.fd, F_GETFL) & O_NONBLOCK == 0)
        let client = try Socket.connected(host: "127.0.0.1", port: listener.port, timeout: 10).get()
        defer { close(client) }
        #expect(fcntl(client, F_GETFD) & FD_CLOEXEC != 0)
        #expect(fcntl(client, F_GETFL) & O_NONBLOCK == 0)
        var noDelay: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, &length)
        #expect(noDelay != 0)
        let accepted = accept(listener.fd, nil, nil)
        #expect(accepted >= 0)
        close(accepted)
    }

    @Test("nonblocking asks are kept: a nonblocking listener, a client left nonblocking")
    func nonblocking() throws {
        let listener = try Socket.listening(
            on: SocketAddress(ipv4: 0x7F00_0001, port: 0), backlog: 8, nonblocking: true)
        defer { close(listener.fd) }
        #expect(fcntl(listener.fd, F_GETFL) & O_NONBLOCK != 0)
        #expect(accept(listener.fd, nil, nil) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK))
        let client = try Socket.connected(host: "127.0.0.1", port: listener.port, timeout: 10, blocking: false).get()
        defer { close(client) }
        #expect(fcntl(client, F_GETFL) & O_NONBLOCK != 0)
    }

    @Test("a taken port is a SystemError naming bind and the address, with EADDRINUSE")
    func portTaken() throws {
        let first = try Socket.listening(on: SocketAddress(ipv4: 0x7F00_0001, port: 0), backlog: 8)
        defer { close(first.fd) }
        let error = #expect(throws: SystemError.self) {
            _ = try Socket.listening(on: SocketAddress(ipv4: 0x7F00_0001, port: first.port), backlog: 8)
        }
        #expect(error == SystemError("bind(127.0.0.1:\(first.port))", code: EADDRINUSE))
    }

    @Test("a port nothing listens on is refused: .failed(ECONNREFUSED) with the system's words")
    func refused() throws {
        let closed = try Socket.listening(on: SocketAddress(ipv4: 0x7F00_0001, port: 0), backlog: 8)
        close(closed.fd)
        let result = Socket.connected(host: "127.0.0.1", port: closed.port, timeout: 10)
        guard case .failure(let failure) = result else { Issue.record("connected to a closed port"); return }
        #expect(failure.kind == .failed(ECONNREFUSED))
        #expect(failure.reason == "Connection refused")
    }

    #if os(Linux)
    @Test("an address that never answers is .timedOut once the timeout has passed, not sooner")
    func timesOut() throws {
        // A listener with a backlog of 0 and its queue full, never accepting: Linux drops
        // further SYNs, so a connect to it hangs.
        let full = try Socket.listening(on: SocketAddress(ipv4: 0x7F00_0001, port: 0), backlog: 0)
        defer { close(full.fd) }
        var queued: [Int32] = []
        defer { queued.forEach { _ = close($0) } }
        for _ in 0..<2 {
            if case .success(let fd) = Socket.connected(host: "127.0.0.1", port: full.port, timeout: 0.2) {
                queued.append(fd)
            }
        }
        let started = MonotonicClock.seconds()
        let result = Socket.connected(host: "127.0.0.1", port: full.port, timeout: 0.3)
        guard case .failure(let failure) = result else { Issue.record("connected to a full listener"); return }
        #expect(failure.kind == .timedOut)
        #expect(MonotonicClock.seconds() - started >= 0.29)
    }
    #endif
}
