#if os(Linux)
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// Hostile clients against a real `httpcache serve` process: nothing they send reaches the
/// origin or stops other clients being served.
@Suite("httpcache serve: hostile clients")
struct ProxyHardeningTests {
    @Test(
        "Malformed and smuggling requests get their 4xx/5xx and a closed connection, and never reach the origin (RFC 9112 §2–§7, §11.2)"
    )
    func malformedRequests() async throws {
        try await offPool {
            let harness = try ProxyHarness(process: [])
            harness.serve("/ok", [("Cache-Control", "max-age=60")], body: "fine")
            // The HTTP/2 preface starts HTTP/2 on a reverse proxy (CLIServeHTTP2Tests); the
            // in-process server without HTTP/2 answers it 505 (HTTPServerTests).
            for request in HTTPServerTests.malformed where !request.bytes.starts(with: Array("PRI ".utf8)) {
                let client = try RawHTTPClient(port: harness.proxy.port)
                defer { client.close() }
                try client.send(request.bytes)
                let response = try client.readResponse()
                #expect(response.status == request.status, "\(request.name): \(response.bodyText)")
                #expect(response.field("Connection") == "close", "\(request.name)")
                #expect(client.waitForClose(), "\(request.name): the connection stays open")
            }
            #expect(harness.origin.requests.isEmpty, "\(harness.origin.requests.map(\.target))")
            #expect(try harness.get("/ok").text == "fine", "the proxy still serves")
        }
    }

    @Test("A request smuggled behind a rejected one is never answered (RFC 9112 §6.3, §11.2)")
    func smuggledRequest() async throws {
        try await offPool {
            let harness = try ProxyHarness(process: [])
            harness.serve("/admin", [("Cache-Control", "max-age=60")], body: "secret")
            let client = try RawHTTPClient(port: harness.proxy.port)
            defer { client.close() }
            try client.send(
                "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n"
            )
            #expect(try client.readResponse().status == 400)
            #expect(client.waitForClose())
            #expect(harness.origin.requests.isEmpty)
        }
    }

    @Test(
        "200 idle connections and a slowloris client do not stop a normal client; the slowloris is cut (RFC 9112 §9.5)")
    func idleAndSlowloris() async throws {
        try await offPool {
            let harness = try ProxyHarness(process: ["--header-timeout", "1"])
            harness.serve("/busy", [("Cache-Control", "max-age=86400")], body: "served")
            let idle = try (0..<200).map { _ in try RawHTTPClient(port: harness.proxy.port, timeout: 10) }
            defer { idle.forEach { $0.close() } }
            let slow = try RawHTTPClient(port: harness.proxy.port, timeout: 10)
            defer { slow.close() }
            try slow.send("GET /busy HTTP/1.1\r\nHost: a\r\nX-Slow: ")
            let started = Date()
            var cut = false
            var normal: Received?
            // One byte every 100 ms, for at most 10 s; the proxy must close first. Meanwhile a
            // normal client is served.
            for round in 0..<100 {
                if round == 3 { normal = try harness.get("/busy") }
                if (try? slow.send("a")) == nil || slow.waitForClose(within: 0.1) {
                    cut = true
                    break
                }
            }
            #expect(cut, "the slowloris client was never cut off")
            #expect(Date().timeIntervalSince(started) < 8)
            #expect(normal?.status == 200)
            #expect(normal?.text == "served")
            #expect(harness.origin.count("/busy") == 1, "the slowloris request never reached the origin")
            #expect(try harness.get("/busy").isHit, "served after the idle connections were cut too")
        }
    }
}
#endif
