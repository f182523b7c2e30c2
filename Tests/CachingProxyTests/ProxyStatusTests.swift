#if os(Linux)
import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// `Proxy-Status` (RFC 9209) on the responses the proxy makes itself: one member naming the
/// proxy, its `error` the §2.3 type that says what went wrong, parsed back as an RFC 9651
/// List; and the one log line each failure writes, saying what to do.
@Suite("httpcache serve: Proxy-Status on the proxy's own answers (RFC 9209)", .timeLimit(.minutes(5)))
struct ProxyStatusTests {
    /// The proxy's member of `response`'s `Proxy-Status`: its name, `error` and the other
    /// parameters; the field must be a valid List with exactly one member.
    static func member(
        _ response: Received, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (name: String, error: String?, parameters: [String: StructuredItem]) {
        let value = try #require(
            response["Proxy-Status"], "no Proxy-Status in \(response.fields)", sourceLocation: sourceLocation)
        let list = try #require(
            StructuredFields.parseList(value), "not an RFC 9651 List: \(value)", sourceLocation: sourceLocation)
        try #require(list.count == 1, "\(value)", sourceLocation: sourceLocation)
        guard case .item(let item, let parameters) = list[0] else {
            Issue.record("an inner list: \(value)", sourceLocation: sourceLocation)
            return ("", nil, [:])
        }
        let name: String
        switch item {
        case .token(let token): name = token
        case .string(let string): name = string
        default: name = "not a Token or String (RFC 9209 §2)"
        }
        var byName: [String: StructuredItem] = [:]
        for (key, parameter) in parameters { byName[key] = parameter }
        var error: String?
        if case .token(let token)? = byName["error"] { error = token }
        return (name, error, byName)
    }

    /// A proxy in this process in front of `origin`, its log lines kept in `log`.
    static func proxy(
        _ origin: String, log: Locked<[String]>, configure: (inout CachingProxy.Configuration) -> Void = { _ in }
    ) throws -> InProcessProxy {
        try InProcessProxy(origin: origin) {
            $0.log = { line in log.withLock { $0.append(line) } }
            configure(&$0)
        }
    }

    @Test(
        "RFC 9209 §2.3.7: an origin that refuses the connection is a 502 with error=connection_refused and one log line"
    )
    func connectionRefused() async throws {
        try await offPool {
            let log = Locked<[String]>([])
            let refusing = try RefusingPort()
            defer { withExtendedLifetime(refusing) {} }  // held until the test is done
            let proxy = try Self.proxy("http://127.0.0.1:\(refusing.port)", log: log)
            let response = try TestClient().send("GET", proxy.baseURL + "/a")
            #expect(response.status == 502)
            let member = try Self.member(response)
            #expect(member.name == "httpcache" && member.error == "connection_refused", "\(member)")
            #expect(response["Proxy-Status"] == "httpcache; error=connection_refused")
            let lines = log.withLock { $0 }
            #expect(lines.count == 1, "\(lines)")
            let line = lines.first ?? ""
            #expect(line.contains("answered GET") && line.contains("with 502 (Proxy-Status error=connection_refused)"))
            #expect(line.contains("is the origin running?"), "the line says what to do: \(line)")
        }
    }

    @Test("RFC 9209 §2.3.14: an origin certificate the proxy refuses is tls_certificate_error, logged with what to do")
    func tlsCertificateError() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let origin = try LoopbackOrigin(tls: certificates.serverContext(certificates.localhost))
            defer { origin.stop() }
            let log = Locked<[String]>([])
            // The tests' CA is not trusted: the certificate's issuer is unknown.
            let proxy = try Self.proxy(origin.baseURL, log: log)
            let response = try TestClient().send("GET", proxy.baseURL + "/a")
            #expect(response.status == 502)
            #expect(try Self.member(response).error == "tls_certificate_error")
            let line = log.withLock { $0 }.joined(separator: "\n")
            #expect(line.contains("error=tls_certificate_error") && line.contains("--origin-cacert FILE"), "\(line)")
        }
    }

    @Test("RFC 9209 §2.3.13: TLS to an origin that does not speak it is tls_protocol_error, logged with what to do")
    func tlsProtocolError() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let log = Locked<[String]>([])
            let proxy = try Self.proxy("https://127.0.0.1:\(origin.port)", log: log)
            let response = try TestClient().send("GET", proxy.baseURL + "/a")
            #expect(response.status == 502)
            #expect(try Self.member(response).error == "tls_protocol_error")
            let line = log.withLock { $0 }.joined(separator: "\n")
            #expect(line.contains("check that the origin speaks TLS 1.2 or later on that port"), "\(line)")
        }
    }

    @Test(
        "RFC 9209 §2.3.9 and §2.3.10: a TLS handshake that never ends is connection_timeout, a connected origin that sends nothing connection_read_timeout; both 504"
    )
    func timeouts() async throws {
        try await offPool {
            // Connections complete in the backlog of a socket nobody accepts from, and get nothing.
            let (silent, port) = try Socket.listening(on: SocketAddress(ipv4: 0x7F00_0001, port: 0), backlog: 16)
            defer { close(silent) }
            let log = Locked<[String]>([])
            let handshake = try Self.proxy("https://127.0.0.1:\(port)", log: log) { $0.originConnectTimeout = 0.3 }
            let connecting = try TestClient().send("GET", handshake.baseURL + "/a")
            #expect(connecting.status == 504)
            #expect(try Self.member(connecting).error == "connection_timeout")
            let stalled = try Self.proxy("http://127.0.0.1:\(port)", log: log) { $0.originStallTimeout = 0.3 }
            let reading = try TestClient().send("GET", stalled.baseURL + "/a")
            #expect(reading.status == 504)
            #expect(try Self.member(reading).error == "connection_read_timeout")
            #expect(log.withLock { $0 }.contains { $0.contains("check the origin's load and logs") })
        }
    }

    @Test(
        "RFC 9209 §2.3.8 and §2.3.28: an origin that closes before any response is connection_terminated, one that sends no HTTP http_protocol_error"
    )
    func originBreaksTheExchange() async throws {
        try await offPool {
            let closing = try RawOrigin { connection in
                _ = connection.readRequest()
            }
            defer { closing.stop() }
            let garbage = try RawOrigin { connection in
                _ = connection.readRequest()
                connection.send("SSH-2.0-OpenSSH_9.2\r\n\r\n")
            }
            defer { garbage.stop() }
            let log = Locked<[String]>([])
            let closingProxy = try Self.proxy(closing.url(""), log: log)
            let garbageProxy = try Self.proxy(garbage.url(""), log: log)
            let first = try TestClient().send("GET", closingProxy.baseURL + "/a")
            #expect(first.status == 502)
            #expect(try Self.member(first).error == "connection_terminated")
            let second = try TestClient().send("GET", garbageProxy.baseURL + "/a")
            #expect(second.status == 502)
            #expect(try Self.member(second).error == "http_protocol_error")
        }
    }

    @Test(
        "RFC 9209 §2.3.16: a 4xx the proxy makes is http_request_error with status-code, from the handler and from the server's own parser"
    )
    func httpRequestError() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let log = Locked<[String]>([])
            // The server's refusals are logged on the proxy's clock: the burst below falls in
            // one second however slow the machine.
            let now = Locked(1_800_000_000.0)
            let proxy = try Self.proxy(origin.baseURL, log: log) { $0.clock = { now.withLock { $0 } } }
            let client = try RawHTTPClient(port: proxy.port)
            try client.send("GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n")
            let fragment = try client.readResponse()
            #expect(fragment.status == 400)
            #expect(fragment.field("Proxy-Status") == "httpcache; error=http_request_error; status-code=400")
            // A head the server's parser refuses never reaches the handler (RFC 9112 §3).
            try client.send("GET /a HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n")
            let rejected = try client.readResponse()
            #expect(rejected.status == 400)
            #expect(rejected.field("Proxy-Status") == "httpcache; error=http_request_error; status-code=400")
            // More of them within the second: logged once, not once each.
            for _ in 0..<3 {
                let again = try RawHTTPClient(port: proxy.port)
                try again.send("GET /a HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n")
                #expect(try again.readResponse().status == 400)
            }
            #expect(log.withLock { $0 }.filter { $0.contains("rejected a request from") }.count == 1, "\(log)")
            // A second later the next one is logged, with the count of those held back.
            now.withLock { $0 += 2 }
            let later = try RawHTTPClient(port: proxy.port)
            try later.send("GET /a HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n")
            #expect(try later.readResponse().status == 400)
            let rejections = log.withLock { $0 }.filter { $0.contains("rejected a request from") }
            #expect(rejections.count == 2 && rejections.last?.contains("(3 more like it") == true, "\(rejections)")
            // HTTP/2's own refusals too: a header list over the limit (RFC 9113 §6.5.2).
            let big = (0..<40).map { ("x-field-\($0)", String(repeating: "v", count: 500)) }
            let h2 = try HTTP2Client(port: proxy.port).send([HTTP2Request("GET", "/a", fields: big)])
            #expect(h2.first?.status == 431)
            #expect(h2.first?["proxy-status"] == "httpcache; error=http_request_error; status-code=431")
            #expect(origin.requests.isEmpty)
        }
    }

    @Test(
        "RFC 9209 §2.3.17: a destination the allow-list refuses is http_request_denied (decided on the name, not an IP)"
    )
    func httpRequestDenied() async throws {
        try await offPool {
            let log = Locked<[String]>([])
            let proxy = try InProcessProxy(origin: "http://unused.test") { configuration in
                configuration.mode = .forward
                configuration.allowedDestinations = ["127.0.0.1"]
                configuration.log = { line in log.withLock { $0.append(line) } }
            }
            let client = try RawHTTPClient(port: proxy.port)
            try client.send("GET http://elsewhere.test/ HTTP/1.1\r\nHost: elsewhere.test\r\n\r\n")
            let refused = try client.readResponse()
            #expect(refused.status == 403)
            #expect(refused.field("Proxy-Status") == "httpcache; error=http_request_denied")
            #expect(log.withLock { $0 }.contains { $0.contains("add it with --allow-destination") })
        }
    }

    @Test(
        "RFC 9209 §2.3.17: refusals for many destinations are logged once a second as one kind, the next line counting those held back"
    )
    func refusedDestinationsLoggedAsOneKind() async throws {
        try await offPool {
            let log = Locked<[String]>([])
            let now = Locked(1_800_000_000.0)
            let proxy = try InProcessProxy(origin: "http://unused.test") { configuration in
                configuration.mode = .forward
                configuration.allowedDestinations = ["127.0.0.1"]
                configuration.clock = { now.withLock { $0 } }
                configuration.log = { line in log.withLock { $0.append(line) } }
            }
            let client = try RawHTTPClient(port: proxy.port)
            func refuse(_ host: String) throws {
                try client.send("GET http://\(host)/ HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                #expect(try client.readResponse().status == 403)
            }
            // Each request names another destination: a client choosing them must not get a
            // line each.
            for index in 0..<20 { try refuse("10.0.\(index).1:\(1000 + index)") }
            var refusals: [String] { log.withLock { $0 }.filter { $0.contains("refused a request for") } }
            #expect(refusals.count == 1, "\(refusals)")
            now.withLock { $0 += 2 }
            try refuse("elsewhere.test")
            #expect(refusals.count == 2, "\(refusals)")
            #expect(refusals.last?.contains("elsewhere.test") == true, "\(refusals)")
            #expect(refusals.last?.contains("(19 more like it since the last such line") == true, "\(refusals)")
        }
    }

    @Test(
        "RFC 9209 §2.3.29: answers made without trying the origin are proxy_internal_response: only-if-cached (RFC 9111 §5.2.1.7) and 503 over the connection cap"
    )
    func proxyInternalResponse() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let proxy = try Self.proxy(origin.baseURL, log: Locked([])) { $0.maxConnections = 1 }
            let first = try RawHTTPClient(port: proxy.port)
            try first.send("GET /never HTTP/1.1\r\nHost: a\r\nCache-Control: only-if-cached\r\n\r\n")
            let onlyIfCached = try first.readResponse()
            #expect(onlyIfCached.status == 504)
            #expect(onlyIfCached.field("Proxy-Status") == "httpcache; error=proxy_internal_response")
            // The first connection is still open: a second is over the cap.
            let second = try RawHTTPClient(port: proxy.port)
            try? second.send("GET /a HTTP/1.1\r\nHost: a\r\n\r\n")
            let full = try second.readResponse()
            #expect(full.status == 503)
            #expect(
                full.field("Proxy-Status")
                    == "httpcache; error=proxy_internal_response; details=\"too many connections\"")
            #expect(origin.requests.isEmpty)
        }
    }

    @Test(
        "RFC 9209 §2: relayed and stored responses get no member of ours; the origin's own Proxy-Status passes unchanged"
    )
    func relayedResponsesUntouched() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/mine", [("Cache-Control", "max-age=60")])
            harness.serve("/theirs", [("Proxy-Status", "backend-lb; received-status=200")])
            #expect(try harness.get("/mine")["Proxy-Status"] == nil)
            #expect(try harness.get("/mine")["Proxy-Status"] == nil)
            #expect(try harness.get("/theirs")["Proxy-Status"] == "backend-lb; received-status=200")
        }
    }

    @Test(
        "A store that fails to write: the response is served, one log line says what to do, at most one line a second")
    func storeWriteFailure() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.setDefault { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "fine") }
            let log = Locked<[String]>([])
            let proxy = try Self.proxy(origin.baseURL, log: log) {
                $0.store = FailingStore(MemoryStore(capacity: 1 << 20))
                // The five requests fall in one second however busy the machine is.
                $0.clock = { 1_800_000_000 }
            }
            let client = try TestClient()
            for index in 0..<5 {
                let response = try client.send("GET", proxy.baseURL + "/s\(index)")
                #expect(response.status == 200 && response.text == "fine")
            }
            let lines = log.withLock { $0 }.filter { $0.contains("could not store the response") }
            #expect(lines.count == 1, "one line a second, not one per request: \(lines)")
            #expect(lines.first?.contains("check the store's free space and permissions") == true, "\(lines)")
            // Each refusal is counted for the operator, and none counted as stored.
            let metrics = try client.send("GET", proxy.baseURL + "/_httpcache/metrics").text
            #expect(metrics.contains("\nhttpcache_store_refusals_total 5\n"), "\(metrics)")
            #expect(metrics.contains("\nhttpcache_stored_total 0\n"), "\(metrics)")
        }
    }

    @Test("The rate limit: after a held-back burst the next line of that kind says how many were not logged")
    func limiterCountsHeldBackLines() {
        let lines = Locked<[String]>([])
        let now = Locked(100.0)
        let limiter = LogLimiter(interval: 1, clock: { now.withLock { $0 } }) { line in
            lines.withLock { $0.append(line) }
        }
        for _ in 0..<4 { limiter(.store, "disk full") }
        limiter(.cutOff, "cut")
        now.withLock { $0 = 100.9 }
        limiter(.store, "disk full")
        now.withLock { $0 = 101.1 }
        limiter(.store, "disk full")
        // A clock set back lets the next line through at once.
        now.withLock { $0 = 50 }
        limiter(.store, "disk full")
        #expect(
            lines.withLock { $0 } == [
                "disk full", "cut", "disk full (4 more like it since the last such line, not logged)", "disk full",
            ])
    }
}

/// A store whose writers fail, as a full disk makes them fail; reads go to `base`.
private final class FailingStore: ForwardingStore, @unchecked Sendable {
    override func makeWriter(for head: EntryHead) throws(StorageError) -> any EntryWriter {
        throw StorageError(.writeFailed, "No space left on device")
    }
}
#endif
