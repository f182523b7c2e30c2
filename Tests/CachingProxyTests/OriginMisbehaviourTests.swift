#if os(Linux)
import CacheStorage
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// A real `httpcache serve` process in front of an origin that sends more or fewer bytes than
/// its responses' framing allows (RFC 9112 §6): no URL gets another URL's bytes, nothing
/// ambiguous or incomplete is stored, and a client never gets a short body that looks complete.
@Suite("httpcache serve: misbehaving origins", .timeLimit(.minutes(10)))
struct OriginMisbehaviourTests {
    /// A proxy in front of a ``PoisonedOrigin``.
    final class Setup: @unchecked Sendable {
        let origin: PoisonedOrigin
        let proxy: ServeProcess

        init(poisoned: [RawOrigin.Step]) throws {
            origin = try PoisonedOrigin(poisoned: poisoned)
            proxy = try ServeProcess(["--origin", origin.url("")], memoryOnly: true)
        }

        deinit { proxy.terminate() }

        /// A proxy in front of such an origin, made on a thread of its own (it blocks until the
        /// proxy listens), so the cooperative threads other suites wait on stay free.
        static func start(poisoned: [RawOrigin.Step]) async throws -> Setup {
            try await offPool { try Setup(poisoned: poisoned) }
        }

        /// `method path` through the proxy on a connection of its own, on a thread of its own.
        func request(_ path: String, method: String = "GET") async throws -> RawHTTPClient.Response {
            let port = proxy.port
            return try await offPool {
                let client = try RawHTTPClient(port: port)
                defer { client.close() }
                try client.send("\(method) \(path) HTTP/1.1\r\nHost: origin.test\r\n\r\n")
                return try client.readResponse(method: method)
            }
        }

        /// `/b` twice: its own body both times, the second a hit, so what was stored under `/b` is `/b`'s.
        func expectBIsItsOwn(sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let b = try await request("/b")
            #expect(b.status == 200, sourceLocation: sourceLocation)
            #expect(b.bodyText == "B", sourceLocation: sourceLocation)
            let again = try await request("/b")
            #expect(again.bodyText == "B", sourceLocation: sourceLocation)
            #expect(again.field("Cache-Status")?.contains("; hit") == true, sourceLocation: sourceLocation)
            #expect(origin.count("/b") == 1, sourceLocation: sourceLocation)
        }
    }

    // MARK: Excess data: another URL must never get it (RFC 9112 §6.3, last paragraph)

    @Test("A second response in the same write as /a's is neither served nor stored for /b (RFC 9112 §6.3)")
    func secondResponseInTheSameWrite() async throws {
        try await offPool {
            let setup = try await Setup.start(poisoned: PoisonedOrigin.secondResponseInSameWrite)
            #expect(try await setup.request("/a").bodyText == "A")
            try await setup.expectBIsItsOwn()
        }
    }

    @Test("Bytes arriving 50 ms after /a's response are neither served nor stored for /b (RFC 9112 §6.3)")
    func lateExtraBytes() async throws {
        try await offPool {
            let setup = try await Setup.start(poisoned: PoisonedOrigin.lateStrayResponse)
            #expect(try await setup.request("/a").bodyText == "A")
            try await Task.sleep(for: .milliseconds(300))
            try await setup.expectBIsItsOwn()
        }
    }

    @Test("A body after the head of a HEAD response is neither served nor stored for /b (RFC 9112 §6.3 item 1)")
    func bodyAfterHeadResponse() async throws {
        try await offPool {
            let setup = try await Setup.start(poisoned: PoisonedOrigin.bodyAfterHeadResponse)
            let head = try await setup.request("/a", method: "HEAD")
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            try await setup.expectBIsItsOwn()
        }
    }

    // MARK: Ambiguous framing: 502, nothing stored (RFC 9112 §6.1, §6.3)

    @Test(
        "Content-Length with Transfer-Encoding, or a coding other than chunked, gets 502 and nothing is stored (RFC 9112 §6.1, §6.3)",
        arguments: PoisonedOrigin.contentLengthWithChunked + [
            "Transfer-Encoding: gzip, chunked\r\n", "Transfer-Encoding: identity\r\n",
        ])
    func ambiguousFraming(fields: String) async throws {
        try await offPool {
            let setup = try await Setup.start(poisoned: PoisonedOrigin.chunkedHelloWorld(framingFields: fields))
            let first = try await setup.request("/a")
            #expect(first.status == 502)
            #expect(first.bodyText.contains("Transfer-Encoding"), "\(first.bodyText)")
            // Nothing was stored: the next request goes to the origin, which now answers well.
            let second = try await setup.request("/a")
            #expect(second.status == 200)
            #expect(second.bodyText == "A")
            #expect(setup.origin.count("/a") == 2)
            try await setup.expectBIsItsOwn()
        }
    }

    // MARK: Framing that fails before anything reached the client: 502 (RFC 9110 §15.6.3)

    /// A chunked `200` whose first chunk-size line is `line`, in the same write as its head.
    static func invalidFirstChunk(_ line: String) -> [RawOrigin.Step] {
        [.send("HTTP/1.1 200 OK\r\n\(PoisonedOrigin.cacheable)Transfer-Encoding: chunked\r\n\r\n\(line)\r\n")]
    }

    @Test(
        "A chunk-size line that is invalid before any body byte gets 502 with Proxy-Status, and nothing is stored (RFC 9110 §15.6.3, RFC 9112 §7.1)",
        arguments: ["ffffffffffffffffffff", "8000000000000005", "zz"])
    func invalidFirstChunkSize(line: String) async throws {
        try await offPool {
            let setup = try await Setup.start(poisoned: Self.invalidFirstChunk(line))
            let first = try await setup.request("/a")
            #expect(first.status == 502)
            #expect(first.field("Proxy-Status")?.contains("error=http_protocol_error") == true, "\(first.fields)")
            #expect(first.bodyText.contains("chunk"), "\(first.bodyText)")
            // Nothing was stored: the next request goes to the origin, which now answers well.
            let second = try await setup.request("/a")
            #expect(second.status == 200)
            #expect(second.bodyText == "A")
            #expect(setup.origin.count("/a") == 2)
        }
    }

    @Test(
        "On a kept-alive origin connection, from the event loop, a chunk-size line invalid before any body byte gets 502 too (RFC 9110 §15.6.3)"
    )
    func invalidFirstChunkSizeOnLoop() async throws {
        try await offPool {
            let setup = try await Setup.start(poisoned: Self.invalidFirstChunk("8000000000000005"))
            // /b leaves its origin connection in the pool: /a goes out on it from the event loop.
            #expect(try await setup.request("/b").bodyText == "B")
            try await Task.sleep(for: .milliseconds(100))
            let first = try await setup.request("/a")
            #expect(first.status == 502)
            #expect(first.field("Proxy-Status")?.contains("error=http_protocol_error") == true, "\(first.fields)")
            let metrics = try await setup.request("/_httpcache/metrics").bodyText
            #expect(metrics.contains("\nhttpcache_origin_requests_on_loop_total 1\n"), "\(metrics)")
        }
    }

    @Test(
        "Over HTTP/2, a chunk-size line that is invalid before any body byte gets 502 on the stream (RFC 9110 §15.6.3)"
    )
    func invalidFirstChunkSizeOverHTTP2() async throws {
        try await offPool {
            let setup = try await Setup.start(poisoned: Self.invalidFirstChunk("ffffffffffffffffffff"))
            let port = setup.proxy.port
            let response = try await offPool { try HTTP2Client(port: port).send([HTTP2Request("GET", "/a")]) }.first
            #expect(response?.status == 502, "\(String(describing: response))")
            #expect(response?.end == .endStream)
            let proxyStatus = response?.fields.first { $0.name == "proxy-status" }?.value
            #expect(proxyStatus?.contains("error=http_protocol_error") == true, "\(String(describing: proxyStatus))")
            #expect(try await setup.request("/a").bodyText == "A")
        }
    }

    /// Bodies cut after bytes of them were relayed (closed short of their length; an invalid
    /// chunk-size line after a first chunk), each with how what the client gets ends.
    static let cutAfterBytes: [([RawOrigin.Step], String)] = [
        (PoisonedOrigin.cutBodies[0], "Content-Length: 10\r\n\r\nshort"),
        (
            [
                .send(
                    "HTTP/1.1 200 OK\r\n\(PoisonedOrigin.cacheable)Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"
                )
            ], "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
        ),
    ]

    @Test(
        "A body cut after bytes of it were relayed reaches the client as its head and those bytes, then the cut (RFC 9112 §6.3, §8)",
        arguments: cutAfterBytes)
    func cutAfterRelayedBytesKeepsThem(steps: [RawOrigin.Step], ending: String) async throws {
        try await offPool {
            let setup = try await Setup.start(poisoned: steps)
            let port = setup.proxy.port
            let received = try await offPool {
                let client = try RawHTTPClient(port: port)
                defer { client.close() }
                try client.send("GET /a HTTP/1.1\r\nHost: origin.test\r\n\r\n")
                return String(decoding: try client.readUntilClosed(), as: UTF8.self)
            }
            #expect(received.hasPrefix("HTTP/1.1 200 "), "\(received.debugDescription)")
            #expect(received.hasSuffix(ending), "\(received.debugDescription)")
            #expect(try await setup.request("/a").bodyText == "A")
        }
    }

    // MARK: Framing fields made right before they go on

    @Test(
        "Content-Length: 5, 5 or two lines of 5 go on as one line, and the response is stored and then a hit (RFC 9112 §6.3 item 5)",
        arguments: ["Content-Length: 5, 5\r\n", "Content-Length: 5\r\ncontent-length: 5\r\n"])
    func repeatedContentLengthGoesOnAsOne(fields: String) async throws {
        try await offPool {
            let (origin, proxy) = try Self.rawOriginAndProxy(
                "HTTP/1.1 200 OK\r\n\(PoisonedOrigin.cacheable)\(fields)\r\nhello")
            defer { proxy.terminate() }
            for attempt in 0..<2 {
                let response = try Self.get("/a", from: proxy)
                #expect(response.status == 200)
                #expect(response.bodyText == "hello")
                #expect(response.values("Content-Length") == ["5"])
                #expect(response.field("Cache-Status")?.contains("; hit") == (attempt == 1), "\(response.fields)")
            }
            #expect(origin.received.count == 1)
        }
    }

    @Test("A 204's Content-Length is not sent on, and the 204 is stored (RFC 9110 §8.6, §15.3.5)")
    func noContentLosesItsContentLength() async throws {
        try await offPool {
            let (origin, proxy) = try Self.rawOriginAndProxy(
                "HTTP/1.1 204 No Content\r\n\(PoisonedOrigin.cacheable)Content-Length: 5\r\n\r\n")
            defer { proxy.terminate() }
            for attempt in 0..<2 {
                let response = try Self.get("/a", from: proxy)
                #expect(response.status == 204)
                #expect(response.field("Content-Length") == nil)
                #expect(response.field("Cache-Status")?.contains("; hit") == (attempt == 1), "\(response.fields)")
            }
            #expect(origin.received.count == 1)
        }
    }

    /// An origin that answers every request with `response`, and a proxy in front of it.
    private static func rawOriginAndProxy(_ response: String) throws -> (RawOrigin, ServeProcess) {
        let origin = try RawOrigin { _ in [.send(response)] }
        return (origin, try ServeProcess(["--origin", origin.url("")], memoryOnly: true))
    }

    /// `GET path` through `proxy` on a connection of its own.
    private static func get(_ path: String, from proxy: ServeProcess) throws -> RawHTTPClient.Response {
        let client = try RawHTTPClient(port: proxy.port)
        defer { client.close() }
        try client.send("GET \(path) HTTP/1.1\r\nHost: origin.test\r\n\r\n")
        return try client.readResponse()
    }

    // MARK: Bodies cut short: the client's connection is cut, nothing stored (RFC 9112 §6.3, §8)

    @Test(
        "A body cut short cuts the client's connection and is not stored (RFC 9112 §6.3, §8)",
        arguments: PoisonedOrigin.cutBodies)
    func cutBody(steps: [RawOrigin.Step]) async throws {
        try await offPool {
            let setup = try await Setup.start(poisoned: steps)
            let port = setup.proxy.port
            let (response, closed) = try await offPool {
                let client = try RawHTTPClient(port: port)
                defer { client.close() }
                try client.send("GET /a HTTP/1.1\r\nHost: origin.test\r\n\r\n")
                let response = try? client.readResponse()
                return (response, client.waitForClose())
            }
            #expect(response == nil, "a complete-looking response: \(response?.bodyText ?? "")")
            #expect(closed)
            let second = try await setup.request("/a")
            #expect(second.bodyText == "A")
            #expect(setup.origin.count("/a") == 2)
            try await setup.expectBIsItsOwn()
        }
    }
}
#endif
