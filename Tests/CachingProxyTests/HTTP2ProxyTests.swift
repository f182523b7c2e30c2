#if os(Linux)
import CacheSystem
import CacheTestSupport
import CachingProxy
import Foundation
import LoopbackOrigin
import Testing

/// The proxy's HTTP/2 (RFC 9113) as a client sees it through ``HTTP2Client``: request to
/// exchange, responses framed as HTTP/2 says, the malformed requests it must refuse, and GOAWAY.
/// The caching itself over HTTP/2 is HostDifferentialTests' table; frame-level attacks are the
/// Python checkers'.
@Suite("httpcache serve over HTTP/2", .timeLimit(.minutes(5)))
struct HTTP2ProxyTests {
    /// A proxy in this process in front of a fresh origin, with an access log kept.
    final class Setup: @unchecked Sendable {
        let origin: LoopbackOrigin
        let proxy: InProcessProxy
        let log = Locked<[String]>([])

        init(configure: (inout CachingProxy.Configuration) -> Void = { _ in }) throws {
            origin = try LoopbackOrigin()
            let log = log
            proxy = try InProcessProxy(origin: origin.baseURL) {
                $0.accessLog = { record in log.withLock { $0.append(record.formatted(.default)) } }
                configure(&$0)
            }
        }

        deinit { origin.stop() }

        func client() throws -> HTTP2Client { try HTTP2Client(port: proxy.port) }
    }

    /// Runs `action` on a thread of its own once `origin` has a request for `path` (10 s at
    /// most): the stream that asked for it is then in flight.
    static func whenInFlight(_ origin: LoopbackOrigin, _ path: String, _ action: @escaping @Sendable () -> Void) {
        Thread.detachNewThread {
            let deadline = MonotonicClock.seconds() + 10
            while origin.count(path) == 0 && MonotonicClock.seconds() < deadline { usleep(10_000) }
            action()
        }
    }

    /// A proxy in this process in front of `origin`, with a TLS listener too (the tests'
    /// certificate for localhost), configured by `configure`.
    static func proxyWithTLS(
        _ origin: LoopbackOrigin, configure: (inout CachingProxy.Configuration) -> Void = { _ in }
    ) throws -> CachingProxy {
        var configuration = CachingProxy.Configuration(mode: .reverse(origin: origin.baseURL))
        configuration.port = 0
        configuration.tlsPort = 0
        configuration.tlsIdentities = [try TestCertificates.shared().localhost.identity]
        configuration.log = { _ in }
        configure(&configuration)
        let proxy = try CachingProxy(configuration)
        proxy.start()
        return proxy
    }

    /// RFC 9113 §8.3.1: a request with `:authority` and no `host` is served, the origin getting
    /// the `Host` a reverse proxy names it with (RFC 9112 §3.2.2), as over HTTP/1.1; §8.2.3:
    /// cookie crumbs are joined with "; "; §8.1: a request body in DATA frames past the
    /// 65,535-byte window reaches the origin whole. The access log says `HTTP/2`.
    @Test func requestFieldsAndBodyReachTheOrigin() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/form") { request in .init(body: "got \(request.body.count)") }
            let body = Fixtures.bytes(count: 200_000) { UInt8(truncatingIfNeeded: $0 &* 31) }
            let client = try setup.client()
            let responses = client.send([
                HTTP2Request(
                    "POST", "/form", fields: [("cookie", "a=1"), ("cookie", "b=2"), ("content-type", "text/plain")],
                    body: body)
            ])
            let response = responses[0]
            #expect(response.status == 200, "\(response)")
            #expect(response.text == "got 200000")
            let received = try #require(setup.origin.requests(to: "/form").first)
            #expect(received.body == body)
            #expect(received.header("Content-Length") == "200000", "the length the DATA frames had")
            #expect(received.header("Host") == "127.0.0.1:\(setup.origin.port)")
            #expect(received.headers.filter { $0.name.lowercased() == "cookie" }.map(\.value) == ["a=1; b=2"])
            #expect(setup.log.withLock { $0 }.contains { $0.contains("POST /form HTTP/2 200") }, "\(setup.log)")
        }
    }

    /// RFC 9113 §6.9: bodies of 3 MiB, one of known length and one chunked by the origin, go
    /// to a client that keeps the default 65,535-byte windows, as its WINDOW_UPDATEs come;
    /// `content-length` only for the known length (§8.1).
    @Test func bodiesLargerThanTheDefaultWindows() async throws {
        try await offPool {
            let setup = try Setup()
            let body = Fixtures.bytes(count: 3 << 20) { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 >> 12) }
            setup.origin.route("/big") { _ in .init(body: body) }
            setup.origin.route("/big-chunked") { _ in .init(body: body, chunked: true) }
            let client = try setup.client()
            let answers = client.send([HTTP2Request("GET", "/big"), HTTP2Request("GET", "/big-chunked")])
            #expect(answers.allSatisfy { $0.end == .endStream }, "\(answers)")
            #expect(answers[0].body == body)
            #expect(answers[1].body == body)
            #expect(answers[0]["content-length"] == String(3 << 20))
            #expect(answers[1]["content-length"] == nil)
        }
    }

    /// RFC 9113 §8.1.1: no DATA after HEAD, 204 or 304; `content-length` for a known length;
    /// §8.2.2: no connection-specific fields in a response.
    @Test func responsesWithoutContent() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/page") { request in
                request.header("If-None-Match") == "\"v1\""
                    ? .init(status: 304, headers: [("ETag", "\"v1\"")], body: "")
                    : .init(headers: [("ETag", "\"v1\""), ("Cache-Control", "no-cache")], body: "page body")
            }
            setup.origin.route("/empty") { _ in .init(status: 204, headers: [("Connection", "keep-alive")], body: "") }
            let client = try setup.client()
            let answers = client.send([
                HTTP2Request("HEAD", "/page"), HTTP2Request("GET", "/page", fields: [("if-none-match", "\"v1\"")]),
                HTTP2Request("GET", "/empty"), HTTP2Request("GET", "/page"),
            ])
            let (head, notModified, noContent, get) = (answers[0], answers[1], answers[2], answers[3])
            for answer in answers { #expect(answer.end == .endStream, "\(answer)") }
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(notModified.status == 304)
            #expect(notModified.body.isEmpty)
            #expect(noContent.status == 204)
            #expect(noContent.body.isEmpty)
            #expect(get.text == "page body")
            #expect(get["content-length"] == "9")
            let connectionSpecific = ["connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"]
            for answer in answers {
                #expect(!answer.fields.contains { connectionSpecific.contains($0.name) }, "\(answer.fields)")
                #expect(answer.fields.allSatisfy { $0.name == $0.name.lowercased() }, "\(answer.fields)")
            }
        }
    }

    /// RFC 9113 §8.2.2: the origin's connection-specific fields, and the ones its `Connection`
    /// names (RFC 9110 §7.6.1), never reach an HTTP/2 client; nghttp2 would reset a response
    /// carrying them.
    @Test func connectionSpecificResponseFieldsAreDropped() async throws {
        try await offPool {
            let origin = try RawOrigin(answer: { _ in
                [
                    .send(
                        "HTTP/1.1 200 OK\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\n"
                            + "Proxy-Connection: keep-alive\r\nX-Hop: 1\r\nX-End: 2\r\nContent-Length: 5\r\n\r\nhello")
                ]
            })
            let proxy = try InProcessProxy(origin: origin.url(""))
            let client = try HTTP2Client(port: proxy.port)
            let response = client.send([HTTP2Request("GET", "/page")])[0]
            #expect(response.end == .endStream, "\(response)")
            #expect(response.text == "hello")
            #expect(response["x-end"] == "2")
            let dropped = ["connection", "keep-alive", "proxy-connection", "x-hop", "transfer-encoding", "upgrade"]
            #expect(!response.fields.contains { dropped.contains($0.name) }, "\(response.fields)")
        }
    }

    /// RFC 9113 §8.1: a 103 from the origin goes out as HEADERS without END_STREAM before the
    /// final response.
    @Test func earlyHintsComeFirst() async throws {
        try await offPool {
            let origin = try RawOrigin(answer: { _ in
                [
                    .send("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"),
                    .send("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\nhello"),
                ]
            })
            let proxy = try InProcessProxy(origin: origin.url(""))
            let client = try HTTP2Client(port: proxy.port)
            let response = client.send([HTTP2Request("GET", "/page")])[0]
            #expect(response.interim.map(\.status) == [103], "\(response)")
            #expect(response.interim.first?.fields.contains(HTTP2Field("link", "</style.css>; rel=preload")) == true)
            #expect(response.status == 200)
            #expect(response.text == "hello")
        }
    }

    /// RFC 9113 §8.2.1 (upper-case names), §8.2.2 (connection-specific fields, `te` other than
    /// "trailers"), §8.3.1 (`host` naming another host than `:authority`): each request is
    /// malformed, its stream reset with PROTOCOL_ERROR, nothing sent to the origin; the
    /// connection serves the well-formed request beside them.
    @Test func malformedRequestsAreReset() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/r") { _ in .init(headers: [("Cache-Control", "no-store")], body: "fine") }
            var upperCase = HTTP2Request("GET", "/r")
            upperCase.fields = [HTTP2Field("X-Upper", "1")]
            let malformed = [
                upperCase, HTTP2Request("GET", "/r", fields: [("connection", "keep-alive")]),
                HTTP2Request("GET", "/r", fields: [("keep-alive", "timeout=5")]),
                HTTP2Request("GET", "/r", fields: [("transfer-encoding", "chunked")]),
                HTTP2Request("GET", "/r", fields: [("upgrade", "websocket")]),
                HTTP2Request("GET", "/r", fields: [("te", "gzip")]),
                HTTP2Request("GET", "/r", fields: [("host", "elsewhere.test")]),
            ]
            let client = try setup.client()
            let answers = client.send(malformed + [HTTP2Request("GET", "/r", fields: [("te", "trailers")])])
            for (request, answer) in zip(malformed, answers) {
                #expect(answer.end == .reset(code: 1, byPeer: true), "\(request.fields): \(answer)")
            }
            #expect(
                answers.last?.status == 200,
                "te: trailers is allowed: \(answers.last.map(String.init(describing:)) ?? "")")
            #expect(setup.origin.count("/r") == 1)
            #expect(client.isUsable)
        }
    }

    /// RFC 9113 §8.3.1: `:path` is the path and query of a URI, which has no byte past ASCII
    /// (nghttp2 lets them through). Such a request is malformed (§8.1.1): answered `400` as
    /// HTTP/1.1 answers the same target, never sent on, so never an origin failure (`502`,
    /// `httpcache_origin_errors_total`); the connection serves the next request.
    @Test("A :path with bytes past ASCII is answered 400, not sent on (RFC 9113 §8.1.1, §8.3.1)")
    func pathBeyondASCIIIs400() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/r") { _ in .init(body: "fine") }
            let client = try setup.client()
            let answers = client.send([HTTP2Request("GET", "/na-\u{E9}"), HTTP2Request("GET", "/r")])
            #expect(answers[0].status == 400, "\(answers[0])")
            #expect(answers[0].text.contains("the :path contains the non-ASCII byte 0xC3"), "\(answers[0].text)")
            #expect(answers[0]["cache-status"] == nil, "\(answers[0])")
            #expect(answers[0]["proxy-status"]?.contains("proxy_internal_error") != true, "\(answers[0])")
            #expect(answers[1].text == "fine", "\(answers[1])")
            #expect(setup.origin.requests.count == 1, "only /r reached the origin")
            let metrics = client.send([HTTP2Request("GET", "/_httpcache/metrics")])[0].text
            #expect(metrics.contains("httpcache_origin_errors_total 0"), "\(metrics)")
        }
    }

    /// RFC 9113 §8.3.1: `:authority` is `host[:port]` and MUST NOT carry user information;
    /// `host` in its place (no `:authority`) is a `Host` (RFC 9110 §7.2). Each value HTTP/1.1
    /// refuses in `Host` is a malformed request here too, answered `400` whichever field brings
    /// it, and nothing is sent to the origin.
    @Test("An :authority or host that is not host[:port] is answered 400, as HTTP/1.1's Host (RFC 9113 §8.3.1)")
    func authorityThatIsNotHostAndPortIs400() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/r") { _ in .init(body: "fine") }
            let client = try setup.client()
            let invalid = ["user:pw@127.0.0.1:\(setup.proxy.port)", "u@x", "x:99999", "x:+80", "x:8x", "[::1"]
            var requests: [HTTP2Request] = []
            for value in invalid {
                var viaAuthority = HTTP2Request("GET", "/r")
                viaAuthority.authority = value
                var viaHost = HTTP2Request("GET", "/r", fields: [("host", value)])
                viaHost.sendsAuthority = false
                requests += [viaAuthority, viaHost]
            }
            let answers = client.send(requests)
            for (request, answer) in zip(requests, answers) {
                #expect(answer.status == 400, "\(request.authority ?? "") \(request.fields): \(answer)")
            }
            var hostOnly = HTTP2Request("GET", "/r", fields: [("host", "example.com:8080")])
            hostOnly.sendsAuthority = false
            #expect(client.send([hostOnly])[0].text == "fine")
            #expect(setup.origin.count("/r") == 1)
        }
    }

    /// RFC 9113 §8.3.1: `host` beside `:authority` must name the same entity; RFC 9110 §4.2.3:
    /// the scheme's default port, or none, is one authority, and a host's case does not matter.
    /// Another port is another entity: the stream is reset.
    @Test("host with the scheme's default port names the same authority as :authority without one (RFC 9110 §4.2.3)")
    func hostWithTheDefaultPortMatchesAuthority() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/r") { _ in .init(headers: [("Cache-Control", "no-store")], body: "fine") }
            let client = try setup.client()
            var same = HTTP2Request("GET", "/r", fields: [("host", "EXAMPLE.com:80")])
            same.authority = "example.com"
            var sameBracketed = HTTP2Request("GET", "/r", fields: [("host", "[::1]")])
            sameBracketed.authority = "[::1]:80"
            var otherPort = HTTP2Request("GET", "/r", fields: [("host", "example.com:8080")])
            otherPort.authority = "example.com"
            let answers = client.send([same, sameBracketed, otherPort])
            #expect(answers[0].text == "fine", "\(answers[0])")
            #expect(answers[1].text == "fine", "\(answers[1])")
            #expect(answers[2].end == .reset(code: 1, byPeer: true), "\(answers[2])")
            #expect(setup.origin.count("/r") == 2)
        }
    }

    /// RFC 9110 §10.1.1: a request with `Expect: 100-continue` and content to come gets a `100`
    /// (HEADERS without END_STREAM, RFC 9113 §8.1) at once, as over HTTP/1.1, then the final
    /// answer once the content came; none without content. As HTTP/1.1 answers the head: another
    /// expectation gets `417`, a `content-length` over the limit `413`, neither after a `100`.
    @Test("Expect: 100-continue gets a 100 before the content is sent; 417 and 413 as over HTTP/1.1 (RFC 9110 §10.1.1)")
    func expectContinueIsAnswered() async throws {
        try await offPool {
            let setup = try Setup { $0.maxRequestBodyBytes = 10_000 }
            setup.origin.route("/form") { request in .init(body: "got \(request.body.count)") }
            let client = try setup.client()
            let body = [UInt8](repeating: 1, count: 2_000)
            let answers = client.send([
                HTTP2Request("POST", "/form", fields: [("expect", "100-continue")], body: body),
                HTTP2Request("POST", "/form", fields: [("expect", "100-Continue")]),
                HTTP2Request("POST", "/form", fields: [("expect", "something-else")], body: body),
                HTTP2Request(
                    "POST", "/form", fields: [("expect", "100-continue"), ("content-length", "50000")],
                    body: [UInt8](repeating: 1, count: 50_000)),
            ])
            #expect(answers[0].interim.map(\.status) == [100], "\(answers[0])")
            #expect(answers[0].text == "got 2000", "\(answers[0])")
            #expect(answers[1].interim.isEmpty, "no content follows: \(answers[1])")
            #expect(answers[1].text == "got 0", "\(answers[1])")
            #expect(answers[2].status == 417, "\(answers[2])")
            #expect(answers[2].interim.isEmpty, "\(answers[2])")
            #expect(answers[3].status == 413, "\(answers[3])")
            #expect(answers[3].interim.isEmpty, "\(answers[3])")
            #expect(setup.origin.count("/form") == 2)
        }
    }

    /// RFC 9113 §3.2: the TLS listener's ALPN chooses h2; the same exchange, logged `HTTP/2+TLS`.
    @Test func overTLSWithALPN() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/r") { _ in .init(headers: [("Cache-Control", "max-age=60")], body: "over tls") }
            let log = Locked<[String]>([])
            let proxy = try Self.proxyWithTLS(origin) {
                $0.accessLog = { record in log.withLock { $0.append(record.formatted(.default)) } }
            }
            defer { proxy.shutdown(timeout: 5) }
            let client = try HTTP2Client(port: try #require(proxy.tlsPort), tls: .testCA())
            let answers = client.send([HTTP2Request("GET", "/r"), HTTP2Request("GET", "/r")])
            #expect(answers.map(\.text) == ["over tls", "over tls"], "\(answers)")
            #expect(answers.compactMap { $0["cache-status"] }.count == 2)
            #expect(origin.count("/r") == 1, "the two streams' misses collapse into one origin request")
            #expect(log.withLock { $0 }.filter { $0.contains("GET /r HTTP/2+TLS 200") }.count == 2, "\(log)")
        }
    }

    /// Large answers on many streams at once, over TLS, in two rounds on one connection: the
    /// second round's hits go through the output and TLS buffers the busy connection kept from
    /// the first (each flush writes past the 64 KiB TLS gathering), and every body arrives
    /// whole, its own, in order.
    @Test func largeAnswersOnManyStreamsInRounds() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let count = 12
            let bodies = (0..<count).map { index in
                Fixtures.bytes(count: 100_000 + index * 1_001) { UInt8(truncatingIfNeeded: $0 &* 7 &+ index) }
            }
            for index in 0..<count {
                origin.route("/big/\(index)") { _ in
                    .init(headers: [("Cache-Control", "max-age=60")], body: bodies[index])
                }
            }
            let proxy = try Self.proxyWithTLS(origin)
            defer { proxy.shutdown(timeout: 5) }
            let client = try HTTP2Client(port: try #require(proxy.tlsPort), tls: .testCA())
            for round in 0..<2 {
                let answers = client.send((0..<count).map { HTTP2Request("GET", "/big/\($0)") })
                #expect(answers.map(\.status) == Array(repeating: 200, count: count), "round \(round)")
                for (index, answer) in answers.enumerated() {
                    #expect(answer.body == bodies[index], "round \(round): /big/\(index) arrived changed")
                }
            }
            #expect(origin.count("/big/0") == 1, "the second round was not served from the cache")
            #expect(client.isUsable)
        }
    }

    /// RFC 9110 §15.5.14: a request body over the proxy's limit is answered 413 on its stream;
    /// the connection goes on.
    @Test func bodyOverTheLimitIs413() async throws {
        try await offPool {
            let setup = try Setup { $0.maxRequestBodyBytes = 10_000 }
            setup.origin.route("/form") { request in .init(body: "got \(request.body.count)") }
            let client = try setup.client()
            let answers = client.send([
                HTTP2Request("POST", "/form", body: [UInt8](repeating: 1, count: 50_000)),
                HTTP2Request("POST", "/form", body: [UInt8](repeating: 1, count: 5_000)),
            ])
            #expect(answers[0].status == 413, "\(answers[0])")
            #expect(answers[1].text == "got 5000", "\(answers[1])")
            #expect(setup.origin.count("/form") == 1)
        }
    }

    /// RFC 9113 §6.5.2, RFC 6585 §5: a header list over the proxy's limit (16 KiB, each field
    /// counted with 32 more octets) is answered 431 on its stream; the next stream is served.
    @Test func headerListOverTheLimitIs431() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/r") { _ in .init(body: "fine") }
            let client = try setup.client()
            let big = (0..<40).map { ("x-field-\($0)", String(repeating: "v", count: 500)) }
            let answers = client.send([HTTP2Request("GET", "/r", fields: big)])
            #expect(answers[0].status == 431, "\(answers[0])")
            #expect(setup.origin.count("/r") == 0)
            let next = client.send([HTTP2Request("GET", "/r")])
            #expect(next[0].status == 200, "\(next[0])")
        }
    }

    /// RFC 9113 §6.8: on shutdown a stream in flight finishes, and the connection gets
    /// GOAWAY(NO_ERROR).
    @Test func shutdownFinishesStreamsAndSendsGoaway() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/slow") { _ in .init(body: "late but whole", delay: 1) }
            let client = try setup.client()
            Self.whenInFlight(setup.origin, "/slow") { setup.proxy.terminate(timeout: 10) }
            let response = client.send([HTTP2Request("GET", "/slow")])[0]
            #expect(response.status == 200, "\(response)")
            #expect(response.text == "late but whole")
            #expect(response.end == .endStream)
            let after = client.send([HTTP2Request("GET", "/slow")])
            #expect(client.goaway?.code == 0, "\(after)")
            #expect(!client.isUsable)
        }
    }

    /// RFC 9113 §9.1: a connection without a stream for the idle timeout gets GOAWAY(NO_ERROR).
    @Test func idleConnectionGetsGoaway() async throws {
        try await offPool {
            let setup = try Setup { $0.idleTimeout = 1 }
            setup.origin.route("/r") { _ in .init(body: "fine") }
            let client = try setup.client()
            #expect(client.send([HTTP2Request("GET", "/r")])[0].status == 200)
            usleep(2_500_000)
            let late = client.send([HTTP2Request("GET", "/r")])[0]
            #expect(client.goaway?.code == 0, "\(late); \(client.closeReason ?? "")")
            #expect(!client.isUsable)
        }
    }

    /// RFC 9113 §5.1.2: 150 requests at once on one connection: past the proxy's
    /// MAX_CONCURRENT_STREAMS (100) the client waits for streams to close, and every one is
    /// answered with its own body.
    @Test func moreRequestsThanConcurrentStreams() async throws {
        try await offPool {
            let setup = try Setup()
            setup.origin.route("/n") { request in .init(body: "answer to \(request.target)", delay: 0.05) }
            let client = try setup.client()
            let answers = client.send((0..<150).map { HTTP2Request("GET", "/n?\($0)") })
            #expect(answers.map(\.text) == (0..<150).map { "answer to /n?\($0)" })
            #expect(answers.allSatisfy { $0.end == .endStream })
            #expect(setup.origin.count("/n") == 150)
        }
    }

    /// RFC 9113 §6.8: a certificate reload sends GOAWAY(NO_ERROR): the stream in flight
    /// finishes, the connection takes no new stream, and a new connection is served.
    @Test func reloadSendsGoawayAndStreamsFinish() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/slow") { _ in .init(body: "late but whole", delay: 1) }
            let proxy = try Self.proxyWithTLS(origin)
            defer { proxy.shutdown(timeout: 5) }
            let port = try #require(proxy.tlsPort)
            let client = try HTTP2Client(port: port, tls: .testCA())
            Self.whenInFlight(origin, "/slow") { proxy.reloadCertificates() }
            let slow = client.send([HTTP2Request("GET", "/slow")])[0]
            #expect(slow.text == "late but whole", "\(slow)")
            #expect(slow.end == .endStream)
            #expect(slow.goawayCode == 0, "the notice came while the stream was open: \(slow)")
            #expect(client.goaway?.code == 0, "\(slow)")
            #expect(!client.isUsable)
            let fresh = try HTTP2Client(port: port, tls: .testCA())
            #expect(fresh.send([HTTP2Request("GET", "/slow")])[0].text == "late but whole")
        }
    }

    /// `--no-http2`: the cleartext preface is not taken for HTTP/2, and ALPN chooses
    /// http/1.1 for a client offering both.
    @Test func http2TurnedOff() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/r") { _ in .init(body: "fine") }
            let proxy = try Self.proxyWithTLS(origin) { $0.http2 = false }
            defer { proxy.shutdown(timeout: 5) }
            let cleartext = try HTTP2Client(port: proxy.port)
            let answer = cleartext.send([HTTP2Request("GET", "/r")])[0]
            #expect(answer.status == 0, "\(answer)")
            #expect(answer.end == .unfinished("our nghttp2 ended the session: the server's bytes are not HTTP/2"))
            #expect(cleartext.closeReason == "our nghttp2 ended the session: the server's bytes are not HTTP/2")
            let both = HTTP2Client.TLSOptions(
                context: try TestCertificates.shared().clientContext(applicationProtocols: ["h2", "http/1.1"]))
            #expect(throws: HTTP2Client.Failure.self) { try HTTP2Client(port: try #require(proxy.tlsPort), tls: both) }
            #expect(origin.count("/r") == 0)
        }
    }
}
#endif
