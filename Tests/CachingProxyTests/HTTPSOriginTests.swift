#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// The proxy in front of an `https` origin: the same caching over TLS (stores, hits, 304s,
/// stale-if-error), one pooled TLS connection for many requests, the origin's certificate
/// verified (a refusal is a 502 that says so and one log line), and a body cut without
/// `close_notify` never stored as complete.
@Suite("httpcache serve: in front of an https origin", .timeLimit(.minutes(5)))
struct HTTPSOriginTests {
    /// A proxy in this process in front of `origin`, trusting the tests' CA unless `trusting`
    /// says otherwise, on `clock`; what it logs goes to `log`.
    static func proxy(
        _ origin: String, trusting roots: [String]? = nil, clock: ManualClock = ManualClock(),
        log: Locked<[String]> = Locked([])
    ) throws -> InProcessProxy {
        let roots = try roots ?? [TestCertificates.shared().caFile]
        return try InProcessProxy(origin: origin, clock: clock) { configuration in
            configuration.originTrustRoots = roots
            configuration.log = { line in log.withLock { $0.append(line) } }
        }
    }

    /// An https loopback origin presenting `leaf`.
    static func origin(_ leaf: KeyPath<TestCertificates, TestCertificates.Leaf> = \.localhost) throws -> LoopbackOrigin
    {
        let certificates = try TestCertificates.shared()
        return try LoopbackOrigin(tls: certificates.serverContext(certificates[keyPath: leaf]))
    }

    @Test("A miss over TLS is stored, then served as a hit (RFC 9111 §3, §4)")
    func missThenHit() async throws {
        try await offPool {
            let origin = try Self.origin()
            defer { origin.stop() }
            origin.route("/a") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "over tls") }
            let proxy = try Self.proxy(origin.baseURL)
            let client = try TestClient()
            let miss = try client.send("GET", proxy.baseURL + "/a")
            #expect(miss.status == 200)
            #expect(miss.text == "over tls")
            #expect(miss.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            let hit = try client.send("GET", proxy.baseURL + "/a")
            #expect(hit.text == "over tls")
            #expect(hit.isHit, "\(hit.fields)")
            #expect(origin.count("/a") == 1)
        }
    }

    @Test("A stale entry is revalidated over TLS with If-None-Match; the 304 freshens it (RFC 9111 §4.3.1, §4.3.4)")
    func revalidatedOverTLS() async throws {
        try await offPool {
            let origin = try Self.origin()
            defer { origin.stop() }
            origin.route("/v") { request in
                let headers = [("Cache-Control", "max-age=10"), ("ETag", "\"v1\"")]
                var response: LoopbackOrigin.Response =
                    request.header("If-None-Match") == "\"v1\""
                    ? .init(status: 304, headers: headers) : .init(headers: headers, body: "versioned")
                // No Date: the age is the proxy's (manual) clock's alone (RFC 9111 §4.2.3).
                response.addsDate = false
                return response
            }
            let clock = ManualClock()
            let proxy = try Self.proxy(origin.baseURL, clock: clock)
            let client = try TestClient()
            _ = try client.send("GET", proxy.baseURL + "/v")
            clock.advance(by: 60)
            let revalidated = try client.send("GET", proxy.baseURL + "/v")
            #expect(revalidated.status == 200)
            #expect(revalidated.text == "versioned")
            #expect(revalidated.cacheStatus?.hasPrefix("httpcache; fwd=stale; fwd-status=304; stored") == true)
            #expect(origin.requests(to: "/v").map { $0.header("If-None-Match") } == [nil, "\"v1\""])
            let fresh = try client.send("GET", proxy.baseURL + "/v")
            #expect(fresh.isHit, "the 304 made it fresh again")
            #expect(origin.count("/v") == 2)
        }
    }

    @Test("Misses one after another share one pooled TLS connection to the origin (RFC 9112 §9.3)")
    func pooledConnection() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let origin = try RawOrigin(tls: certificates.serverContext(certificates.localhost)) { _ in
                [.send("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 2\r\n\r\nok")]
            }
            defer { origin.stop() }
            let proxy = try Self.proxy(origin.url(""))
            let client = try TestClient()
            for index in 0..<5 {
                let response = try client.send("GET", proxy.baseURL + "/p\(index)")
                #expect(response.text == "ok")
            }
            #expect(origin.received.count == 5)
            #expect(origin.connections == 1, "one TLS connection (one handshake) for five requests")
        }
    }

    @Test(
        "A certificate the proxy refuses: 502 with Cache-Status detail=origin-tls-failed, one log line naming host:port and the cause",
        arguments: ["certificate issued by an unknown authority", "certificate expired on", "wrong host name"])
    func refusedCertificate(cause: String) async throws {
        try await offPool {
            let leaf: KeyPath<TestCertificates, TestCertificates.Leaf> =
                switch cause {
                case "certificate expired on": \.expired
                case "wrong host name": \.wrongHost
                default: \.unknownIssuer
                }
            let origin = try Self.origin(leaf)
            defer { origin.stop() }
            origin.setDefault { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "never") }
            let log = Locked<[String]>([])
            let proxy = try Self.proxy(origin.baseURL, log: log)
            let response = try TestClient().send("GET", proxy.baseURL + "/a")
            #expect(response.status == 502)
            #expect(response.cacheStatus == "httpcache; fwd=uri-miss; detail=origin-tls-failed")
            #expect(response.text.contains(cause), "\(response.text)")
            #expect(origin.requests.isEmpty, "nothing is sent over a connection that failed verification")
            let lines = log.withLock { $0 }
            #expect(lines.count == 1, "\(lines)")
            let line = lines.first ?? ""
            #expect(line.contains("127.0.0.1:\(origin.port)") && line.contains(cause), "\(line)")
            if cause.contains("unknown authority") {
                #expect(line.contains("trust its CA with --origin-cacert FILE"), "\(line)")
            }
        }
    }

    @Test("The origin's TLS failing later: a stored response that allows stale-if-error is served (RFC 5861 §4)")
    func staleIfErrorWhenTLSFails() async throws {
        try await offPool {
            let first = try Self.origin()
            first.route("/s") { _ in
                .init(headers: [("Cache-Control", "max-age=1, stale-if-error=600")], body: "kept")
            }
            let clock = ManualClock()
            let proxy = try Self.proxy(first.baseURL, clock: clock)
            let client = try TestClient()
            _ = try client.send("GET", proxy.baseURL + "/s")
            // The same address now presents an expired certificate.
            first.stop()
            let certificates = try TestCertificates.shared()
            // Another process (a Redis test's bus port) may take the freed port for a moment.
            let expired = try certificates.serverContext(certificates.expired)
            var replacement: LoopbackOrigin?
            for _ in 0..<50 where replacement == nil {
                replacement = try? LoopbackOrigin(port: first.port, tls: expired)
                if replacement == nil { usleep(100_000) }
            }
            let second = try #require(replacement, "port \(first.port) stayed taken for 5 s")
            defer { second.stop() }
            clock.advance(by: 10)
            let stale = try client.send("GET", proxy.baseURL + "/s")
            #expect(stale.status == 200)
            #expect(stale.text == "kept")
            #expect(stale.cacheStatus?.contains("detail=stale-if-error") == true, "\(stale.fields)")
            let nothing = try client.send("GET", proxy.baseURL + "/never")
            #expect(nothing.status == 502)
            #expect(nothing.cacheStatus?.contains("detail=origin-tls-failed") == true)
        }
    }

    @Test(
        "Host names the origin and SNI carries its name: the origin chooses its certificate by it (RFC 9112 §3.2.2, RFC 6066 §3)"
    )
    func hostAndSNI() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            // Without SNI the origin presents the certificate for wrong.test, which the proxy refuses.
            let origin = try RawOrigin(
                tls: certificates.serverContext(certificates.wrongHost, others: [certificates.localhost])
            ) { _ in [.send("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 3\r\n\r\nsni")] }
            defer { origin.stop() }
            let proxy = try Self.proxy("https://localhost:\(origin.port)")
            let response = try TestClient().send("GET", proxy.baseURL + "/h")
            #expect(response.status == 200, "\(response.text)")
            #expect(response.text == "sni")
            let request = try #require(origin.received.first?.text)
            #expect(request.hasPrefix("GET /h HTTP/1.1\r\n"), "\(request)")
            #expect(request.contains("\r\nHost: localhost:\(origin.port)\r\n"), "\(request)")
        }
    }

    @Test(
        "A body delimited by the close is stored when TLS ends with close_notify, never when cut without it (RFC 9112 §8, §9.8; RFC 8446 §6.1)",
        arguments: [true, false])
    func closeDelimitedBody(notified: Bool) async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let origin = try RawOrigin(tls: certificates.serverContext(certificates.localhost)) { _ in
                [
                    .send("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n\r\nthe whole body"),
                    notified ? .closeNotify : .close,
                ]
            }
            defer { origin.stop() }
            let log = Locked<[String]>([])
            let proxy = try Self.proxy(origin.url(""), log: log)
            let client = try TestClient()
            if notified {
                #expect(try client.send("GET", proxy.baseURL + "/c").text == "the whole body")
                let again = try client.send("GET", proxy.baseURL + "/c")
                #expect(again.isHit, "\(again.fields)")
                #expect(origin.received.count == 1)
            } else {
                #expect(throws: (any Error).self, "the client sees the cut") {
                    try client.send("GET", proxy.baseURL + "/c")
                }
                #expect(throws: (any Error).self, "nothing stored: the origin is asked again, and cuts again") {
                    try client.send("GET", proxy.baseURL + "/c")
                }
                #expect(origin.received.count == 2)
                #expect(
                    log.withLock { $0 }.contains { $0.contains("without TLS close_notify") }, "\(log.withLock { $0 })")
            }
        }
    }
}
#endif
