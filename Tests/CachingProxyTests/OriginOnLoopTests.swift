#if os(Linux)
import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// Requests on kept-alive origin connections are sent by the event loops themselves (no thread
/// hop per miss); these show that what clients get is the same as from an origin thread: bytes,
/// storing, timeouts, the second attempt after a kept-alive connection closed, slow clients.
@Suite("Origin requests from the event loops")
struct OriginOnLoopTests {
    /// The value of a counter in the proxy's metrics.
    private static func counter(_ name: String, _ harness: ProxyHarness) throws -> Int {
        let metrics = try harness.get("/_httpcache/metrics").text
        let line = metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? -1
    }

    /// An origin whose connections each answer `answers` requests (`body` of the path, fresh for
    /// ten minutes), then close: after reading one more request when `readingOneMore`.
    private static func closingOrigin(
        answering answers: Int, readingOneMore: Bool, body: @escaping @Sendable (String) -> String
    ) throws -> RawOrigin {
        try RawOrigin { connection in
            var answered = 0
            while let request = connection.readRequest() {
                guard answered < answers else { return }
                let text = body(request.split(separator: " ").dropFirst().first.map(String.init) ?? "?")
                connection.send(
                    "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Length: \(text.utf8.count)\r\n\r\n"
                        + text)
                answered += 1
                if answered == answers && !readingOneMore { return }
            }
        }
    }

    @Test("sequential misses after the first go out from the loop on the kept-alive connection, byte-exact and stored")
    func missesRideTheKeptAliveConnection() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            for index in 0..<30 {
                harness.serve(
                    "/r\(index)", [("Cache-Control", "max-age=600")], body: String(repeating: "\(index),", count: 500))
            }
            for index in 0..<30 {
                let response = try harness.get("/r\(index)")
                #expect(response.status == 200)
                #expect(response.text == String(repeating: "\(index),", count: 500))
                #expect(!response.isHit)
            }
            // The first miss connects from an origin thread; later ones find its connection idle (unless
            // the client asked again before that thread put it back, as a busy machine can make it).
            #expect(try Self.counter("httpcache_origin_requests_on_loop_total", harness) >= 25)
            #expect(try Self.counter("httpcache_origin_requests_total", harness) == 30)
            for index in 0..<30 {
                let again = try harness.get("/r\(index)")
                #expect(again.isHit)
                #expect(again.text == String(repeating: "\(index),", count: 500))
            }
            #expect(harness.origin.requests.count == 30)
        }
    }

    @Test(
        "RFC 9209 §2.3.10: a kept-alive origin connection that goes quiet times out on the loop: 504 connection_read_timeout"
    )
    func stallOnTheLoopTimesOut() async throws {
        try await offPool {
            let harness = try ProxyHarness { $0.originStallTimeout = 0.3 }
            harness.serve("/warm", [("Cache-Control", "max-age=600")], body: "warm")
            harness.origin.route("/quiet") { _ in
                LoopbackOrigin.Response(
                    status: 200, headers: [("Cache-Control", "max-age=600")], body: "late", delay: 5)
            }
            _ = try harness.get("/warm")
            let started = MonotonicClock.seconds()
            let response = try harness.get("/quiet")
            #expect(response.status == 504)
            #expect(response["Proxy-Status"]?.contains("error=connection_read_timeout") == true)
            #expect(MonotonicClock.seconds() - started < 4)
            #expect(try Self.counter("httpcache_origin_requests_on_loop_total", harness) >= 1)
        }
    }

    @Test(
        "serve --origin-timeout 1: a hung origin's stale-if-error response is served stale after a second, not the default 60 (RFC 5861 §4)"
    )
    func originTimeoutOption() async throws {
        try await offPool {
            let harness = try ProxyHarness(process: ["--origin-timeout", "1"])
            let served = Locked(0)
            harness.origin.route("/s") { _ in
                // The first answer at once; then the origin hangs (longer than the client waits).
                let first = served.withLock { count in
                    count += 1
                    return count == 1
                }
                return LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=0, stale-if-error=600")], body: "kept", delay: first ? 0 : 20)
            }
            #expect(try harness.get("/s").text == "kept")
            let started = MonotonicClock.seconds()
            let stale = try harness.get("/s")
            #expect(stale.status == 200)
            #expect(stale.text == "kept")
            #expect(MonotonicClock.seconds() - started < 8, "served after \(MonotonicClock.seconds() - started) s")
            harness.origin.stop()
        }
    }

    @Test(
        "RFC 9110 §9.2.2: a kept-alive connection the origin closes after reading the request: the GET is sent again on a new connection"
    )
    func closedUnansweredIsSentAgain() async throws {
        try await offPool {
            // The second request on every connection is read, then the connection closed.
            let origin = try Self.closingOrigin(answering: 1, readingOneMore: true) { _ in "first" }
            defer { origin.stop() }
            let proxy = try InProcessProxy(origin: origin.url(""))
            let client = try TestClient()
            #expect(try client.send("GET", proxy.baseURL + "/a").text == "first")
            let second = try client.send("GET", proxy.baseURL + "/b")
            #expect(second.status == 200)
            #expect(second.text == "first")
            #expect(origin.connections == 2)
        }
    }

    @Test(
        "origin connections that close while pooled and are replaced (their descriptor numbers reused) still carry misses from the loop, byte-exact"
    )
    func replacedConnectionsAreWatchedAgain() async throws {
        try await offPool {
            // Each connection answers two requests, then closes: the proxy finds it closed when
            // it takes it from the pool, connects anew (from an origin thread; the kernel gives
            // the new socket the closed one's number) and sends the next miss on that one from
            // the loop, whose one-shot watch of the old number went with the old connection.
            let origin = try Self.closingOrigin(answering: 2, readingOneMore: false) {
                String(repeating: $0, count: 300)
            }
            defer { origin.stop() }
            let proxy = try InProcessProxy(origin: origin.url(""))
            let client = try TestClient()
            for index in 0..<12 {
                let response = try client.send("GET", proxy.baseURL + "/m\(index)")
                #expect(response.status == 200)
                #expect(response.text == String(repeating: "/m\(index)", count: 300))
                // Time for the origin's close to reach the pooled connection.
                usleep(50_000)
            }
            #expect(origin.connections >= 6)
            let metrics = try client.send("GET", proxy.baseURL + "/_httpcache/metrics").text
            let onLoop = metrics.split(separator: "\n").first {
                $0.hasPrefix("httpcache_origin_requests_on_loop_total ")
            }
            // The second miss on each connection (six of them) goes out from the loop, unless the
            // client asked before the origin thread put the connection back.
            #expect((onLoop.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0) >= 3)
            for index in 0..<12 {
                let again = try client.send("GET", proxy.baseURL + "/m\(index)")
                #expect(again.text == String(repeating: "/m\(index)", count: 300))
            }
            #expect(origin.connections <= 7)
        }
    }

    @Test("a 4 MB miss to a client that reads slowly arrives whole and is stored (the rest handed to an origin thread)")
    func largeBodyToASlowClient() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let body = Fixtures.bytes(count: 4 << 20) { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 12) }
            harness.origin.setDefault { _ in
                LoopbackOrigin.Response(status: 200, headers: [("Cache-Control", "max-age=600")], body: body)
            }
            _ = try harness.get("/warm")
            // A client can send its next request before the origin thread that read the last
            // response has put its connection back: then the miss goes to a thread. Until one
            // went out from the loop, try again on a new URL.
            var fromTheLoop = false
            for attempt in 0..<5 where !fromTheLoop {
                let before = try Self.counter("httpcache_origin_requests_on_loop_total", harness)
                let slow = try RawHTTPClient(port: harness.proxy.port, timeout: 20, receiveBuffer: 8 * 1024)
                defer { slow.close() }
                try slow.send("GET /big\(attempt) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                var head = try slow.readHead()
                usleep(300_000)  // the proxy's output for this client backs up meanwhile
                try slow.readBody(into: &head)
                #expect(head.status == 200)
                #expect(head.body == body)
                fromTheLoop = try Self.counter("httpcache_origin_requests_on_loop_total", harness) > before
                let again = try harness.get("/big\(attempt)")
                #expect(again.isHit)
                #expect(again.body == body)
            }
            #expect(fromTheLoop)
        }
    }
}
#endif
