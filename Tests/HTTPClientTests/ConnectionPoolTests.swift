#if os(Linux)
import CacheSemantics
import CacheTestSupport
import Testing

@testable import HTTPClient

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The upstream client's pool of idle connections, on socketpairs: which one is taken, which
/// ones are closed.
@Suite("ConnectionPool")
struct ConnectionPoolTests {
    /// A connected pair: the end the pool keeps, and the origin's end.
    struct Pair {
        var pooled: Int32
        var origin: Int32

        init() {
            var ends: [Int32] = [0, 0]
            // Close-on-exec: a child another test spawns meanwhile must not hold the pooled end open.
            _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends)
            pooled = ends[0]
            origin = ends[1]
        }

        /// Whether the pool's end is closed now: the origin's end reads EOF, or a reset when the
        /// pooled end had unread bytes.
        var closedByPool: Bool {
            var byte: UInt8 = 0
            let count = recv(origin, &byte, 1, Int32(MSG_DONTWAIT))
            return count == 0 || (count < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        }

        /// Whether the pool's end is closed within 2 s. A process another test spawns at that
        /// moment holds a copy of every descriptor until it execs (close-on-exec), so the
        /// origin's end may see the close a little after the pool made it.
        var closedByPoolSoon: Bool {
            var ready = pollfd(fd: origin, events: Int16(POLLIN), revents: 0)
            _ = poll(&ready, 1, 2_000)
            return closedByPool
        }

        /// What the two descriptors are now, for a failure message.
        var state: String {
            var byte: UInt8 = 0
            let count = recv(origin, &byte, 1, Int32(MSG_DONTWAIT))
            let code = errno
            return "recv(origin) = \(count) errno \(code); pooled F_GETFD = \(fcntl(pooled, F_GETFD))"
        }
    }

    @Test("Taking gives the connection to that origin idle for the shortest time (LIFO)")
    func lastInFirstOut() async {
        await offPool {
            let pool = ConnectionPool(capacity: 8, lifetime: 60)
            let (a1, b, a2) = (Pair(), Pair(), Pair())
            defer { [a1, b, a2].forEach { close($0.origin) } }
            pool.put(SocketStream(fd: a1.pooled), key: "http://a:80")
            pool.put(SocketStream(fd: b.pooled), key: "http://b:80")
            pool.put(SocketStream(fd: a2.pooled), key: "http://a:80")
            let first = pool.take("http://a:80")
            let second = pool.take("http://a:80")
            #expect(first?.fd == a2.pooled)
            #expect(second?.fd == a1.pooled)
            #expect(pool.take("http://a:80") == nil)
            #expect(pool.count == 1)
            [first, second].forEach { $0?.close() }
        }
    }

    @Test("An https connection is never taken for http to the same host and port, nor one through a proxy")
    func keysKeepSchemesAndProxiesApart() async {
        await offPool {
            let pool = ConnectionPool(capacity: 8, lifetime: 60)
            let (plain, secure, tunnelled) = (Pair(), Pair(), Pair())
            defer { [plain, secure, tunnelled].forEach { close($0.origin) } }
            let keys = [
                UpstreamRequest(method: "GET", url: "http://a.test:8443/", fields: [:]),
                UpstreamRequest(method: "GET", url: "https://a.test:8443/", fields: [:]),
                UpstreamRequest(method: "GET", url: "https://A.test:8443/", fields: [:], proxy: "http://p.test:3128"),
            ].compactMap { try? $0.wire().poolKey }
            #expect(
                keys == ["http://a.test:8443", "https://a.test:8443", "https://a.test:8443 via http://p.test:3128"])
            for (pair, key) in zip([plain, secure, tunnelled], keys) {
                pool.put(SocketStream(fd: pair.pooled), key: key)
            }
            let taken = keys.map { pool.take($0) }
            #expect(taken.map { $0?.fd } == [plain.pooled, secure.pooled, tunnelled.pooled])
            #expect(pool.count == 0)
            taken.forEach { $0?.close() }
        }
    }

    @Test("Beyond its capacity the pool closes the connection idle for the longest time")
    func capacity() async {
        await offPool {
            let pool = ConnectionPool(capacity: 2, lifetime: 60)
            let pairs = [Pair(), Pair(), Pair()]
            defer { pairs.forEach { close($0.origin) } }
            for pair in pairs { pool.put(SocketStream(fd: pair.pooled), key: "http://a:80") }
            #expect(pool.count == 2)
            #expect(pairs[0].closedByPoolSoon)
            #expect(!pairs[1].closedByPool && !pairs[2].closedByPool)
        }
    }

    @Test("A connection idle for longer than the lifetime is closed, not reused")
    func lifetime() async {
        await offPool {
            let pool = ConnectionPool(capacity: 8, lifetime: 0.05)
            let pair = Pair()
            defer { close(pair.origin) }
            pool.put(SocketStream(fd: pair.pooled), key: "http://a:80")
            usleep(100_000)
            #expect(pool.take("http://a:80") == nil)
            #expect(pair.closedByPoolSoon, "\(pair.state)")
        }
    }

    @Test(
        "A connection with bytes or EOF waiting is closed when taken, and the next one tried (RFC 9112 §6.3, §9.3)",
        arguments: ["bytes", "EOF"])
    func notIdle(what: String) async {
        await offPool {
            let pool = ConnectionPool(capacity: 8, lifetime: 60)
            let (older, newer) = (Pair(), Pair())
            defer { [older, newer].forEach { close($0.origin) } }
            pool.put(SocketStream(fd: older.pooled), key: "http://a:80")
            pool.put(SocketStream(fd: newer.pooled), key: "http://a:80")
            if what == "EOF" {
                shutdown(newer.origin, Int32(SHUT_WR))
            } else {
                _ = send(newer.origin, "HTTP/1.1 200 OK\r\n\r\n", 19, 0)
            }
            let taken = pool.take("http://a:80")
            #expect(taken?.fd == older.pooled)
            #expect(newer.closedByPoolSoon)
            taken?.close()
        }
    }
}
#endif
