#if os(Linux)
import CacheSemantics
import CacheTestSupport
import Foundation
import LoopbackOrigin
@_spi(Wire) import HTTPWire
import Testing

@testable import HTTPClient

/// The upstream client against origins that send more or fewer bytes than their responses'
/// framing allows (RFC 9112 §6), in process: what reaches the receiver, and which connection
/// the next request goes on.
@Suite("UpstreamClient: response framing", .timeLimit(.minutes(10)))
struct UpstreamFramingTests {
    static let responseA = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA"
    static let stray = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"

    /// Answers `/b` (and anything but `/a`) with its own `B`; `/a` with `steps`.
    static func origin(answeringA steps: [RawOrigin.Step]) throws -> RawOrigin {
        try RawOrigin { request in
            request.target == "/a" ? steps : [.send("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB")]
        }
    }

    /// GET (or `method`) `/a`, then GET `/b` after `wait` seconds, on one client.
    static func aThenB(_ origin: RawOrigin, method: String = "GET", wait: Double = 0) async throws -> (Outcome, Outcome)
    {
        let client = try UpstreamClient()
        let a = await fetch(client, UpstreamRequest(method: method, url: origin.url("/a"), fields: [:]))
        if wait > 0 { try? await Task.sleep(for: .seconds(wait)) }
        let b = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/b"), fields: [:]))
        return (a, b)
    }

    // MARK: Excess data (RFC 9112 §6.3, last paragraph)

    @Test("A second response in the same write as the first is not taken for the next request (RFC 9112 §6.3)")
    func secondResponseInTheSameWrite() async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [.send(Self.responseA + Self.stray)])
            defer { origin.stop() }
            let (a, b) = try await Self.aThenB(origin)
            #expect(a.error == nil)
            #expect(a.bodyText == "A")
            #expect(b.error == nil)
            #expect(b.bodyText == "B")
            // /b went on a new connection: the one that carried the stray response was closed.
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    @Test("Bytes arriving 50 ms after a complete response retire its connection (RFC 9112 §6.3)")
    func lateExtraBytes() async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [.send(Self.responseA), .pause(0.05), .send(Self.stray)])
            defer { origin.stop() }
            let (a, b) = try await Self.aThenB(origin, wait: 0.3)
            #expect(a.bodyText == "A")
            #expect(b.error == nil)
            #expect(b.bodyText == "B")
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    @Test("A body sent after the head of a HEAD response retires the connection (RFC 9112 §6.3 item 1)")
    func bodyAfterHeadResponse() async throws {
        try await offPool {
            // The head announces the 1,000 bytes a GET would get; what follows is another response.
            let origin = try Self.origin(answeringA: [
                .send("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + Self.stray)
            ])
            defer { origin.stop() }
            let (a, b) = try await Self.aThenB(origin, method: "HEAD")
            #expect(a.error == nil)
            #expect(a.head?.fields["Content-Length"] == "1000")
            #expect(a.body.isEmpty)
            #expect(b.error == nil)
            #expect(b.bodyText == "B")
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    @Test("A body sent after a 204 or 304 retires the connection (RFC 9112 §6.3 item 1)", arguments: [204, 304])
    func bodyAfterBodilessStatus(status: Int) async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [.send("HTTP/1.1 \(status) X\r\nContent-Length: 5\r\n\r\nhello")])
            defer { origin.stop() }
            let (a, b) = try await Self.aThenB(origin)
            #expect(a.error == nil)
            #expect(a.head?.status == status)
            #expect(a.body.isEmpty)
            #expect(b.bodyText == "B")
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    @Test("A connection the origin closed while idle is not used (RFC 9112 §9.3)")
    func connectionClosedWhileIdle() async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [.send(Self.responseA), .close])
            defer { origin.stop() }
            let client = try UpstreamClient()
            #expect(
                await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/a"), fields: [:])).bodyText == "A")
            try await Task.sleep(for: .milliseconds(100))
            // Not idempotent, so never sent twice: it must go on a new connection at once.
            let post = await fetch(
                client, UpstreamRequest(method: "POST", url: origin.url("/b"), fields: [:], body: [1]))
            #expect(post.error == nil)
            #expect(post.bodyText == "B")
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    // MARK: Ambiguous framing (RFC 9112 §6.1, §6.3)

    @Test("Content-Length with Transfer-Encoding is refused as a protocol error (RFC 9112 §6.1, §6.3 item 3)")
    func contentLengthWithTransferEncoding() async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [
                .send(
                    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nb\r\nhello world\r\n0\r\n\r\n"
                )
            ])
            defer { origin.stop() }
            let (a, b) = try await Self.aThenB(origin)
            let error = try #require(a.error)
            #expect(error.kind == .protocolError)
            #expect(!error.receivedHead)
            #expect(a.heads.isEmpty)
            #expect(error.description.contains(origin.url("/a")))
            #expect(error.description.contains("Content-Length and Transfer-Encoding"))
            #expect(b.bodyText == "B")
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    @Test(
        "A Transfer-Encoding other than exactly chunked is refused (RFC 9112 §6.1, §6.3 item 4)",
        arguments: ["gzip, chunked", "identity", "chunked, chunked", "gzip", "chunked;q=1"])
    func transferEncodingOtherThanChunked(coding: String) async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [
                .send("HTTP/1.1 200 OK\r\nTransfer-Encoding: \(coding)\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
            ])
            defer { origin.stop() }
            let (a, b) = try await Self.aThenB(origin)
            #expect(a.error?.kind == .protocolError, "\(a.error?.description ?? "no error")")
            #expect(a.heads.isEmpty)
            #expect(b.bodyText == "B")
        }
    }

    @Test("Two Transfer-Encoding lines are refused, even when each says chunked (RFC 9112 §6.1)")
    func transferEncodingRepeated() async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [
                .send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
            ])
            defer { origin.stop() }
            let (a, _) = try await Self.aThenB(origin)
            #expect(a.error?.kind == .protocolError)
        }
    }

    // MARK: Bodies cut short (RFC 9112 §6.3 items 4–5, §8)

    @Test(
        "A body cut short is an error after the head, never a complete response (RFC 9112 §6.3, §8)",
        arguments: [
            // Shorter than its Content-Length, then FIN.
            [RawOrigin.Step.send("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), .close],
            // Cut inside a chunk.
            [.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nhello"), .close],
            // Complete chunks, but no last chunk.
            [.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"), .close],
            // The last chunk without the empty line that ends the trailer section.
            [.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"), .close],
            // Reset after part of the body.
            [.send("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), .pause(0.05), .reset],
            [.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\na\r\nhello"), .pause(0.05), .reset],
        ])
    func cutBody(steps: [RawOrigin.Step]) async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: steps)
            defer { origin.stop() }
            let (a, b) = try await Self.aThenB(origin)
            let error = try #require(a.error)
            #expect(error.kind == .closed, "\(error.description)")
            #expect(error.receivedHead)
            #expect(a.heads.count == 1)
            #expect(a.bodyText == "hello" || a.bodyText == "short")
            #expect(error.description.contains(origin.url("/a")))
            #expect(b.bodyText == "B")
        }
    }

    @Test("A head cut short is closed without a head (RFC 9112 §8)")
    func cutHead() async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [.send("HTTP/1.1 200 OK\r\nContent-Le"), .close])
            defer { origin.stop() }
            let (a, _) = try await Self.aThenB(origin)
            #expect(a.error?.kind == .closed)
            #expect(a.error?.receivedHead == false)
            #expect(a.heads.isEmpty)
        }
    }

    // MARK: Connections kept and not kept (RFC 9112 §9.3)

    @Test("A well-behaved origin's connection is reused for every framing (RFC 9112 §9.3)")
    func wellBehavedOriginKeepsOneConnection() async throws {
        try await offPool {
            let origin = try RawOrigin { request in
                switch request.target {
                case "/length": [.send("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nlength")]
                case "/chunked":
                    [
                        .send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nchu\r\n4\r\n"),
                        .pause(0.02), .send("nked\r\n0\r\nTrailer-A: 1\r\n\r\n"),
                    ]
                case "/none": [.send("HTTP/1.1 204 No Content\r\n\r\n")]
                case "/interim":
                    [
                        .send(
                            "HTTP/1.1 103 Early Hints\r\nLink: </s>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                        )
                    ]
                case "/keep10": [.send("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok")]
                default: [.send("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")]  // HEAD
                }
            }
            defer { origin.stop() }
            let client = try UpstreamClient()
            let requests: [(String, String, String)] = [
                ("GET", "/length", "length"), ("GET", "/chunked", "chunked"), ("GET", "/none", ""),
                ("HEAD", "/head", ""),
                ("GET", "/interim", "ok"), ("GET", "/keep10", "ok"), ("GET", "/length", "length"),
            ]
            for (method, path, body) in requests {
                let outcome = await fetch(client, UpstreamRequest(method: method, url: origin.url(path), fields: [:]))
                #expect(outcome.error == nil, "\(path): \(outcome.error?.description ?? "")")
                #expect(outcome.bodyText == body, "\(path)")
            }
            #expect(origin.connections == 1)
            #expect(origin.received.count == requests.count)
        }
    }

    @Test(
        "A connection the response does not keep alive is closed (RFC 9112 §9.3, §9.6)",
        arguments: [
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nA",
            "HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 1\r\n\r\nA",
            "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nA",
        ])
    func responseThatDoesNotKeepAlive(response: String) async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [.send(response)])
            defer { origin.stop() }
            let (a, b) = try await Self.aThenB(origin)
            #expect(a.bodyText == "A")
            #expect(b.bodyText == "B")
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    @Test(
        "A body delimited by the close is complete at the close, and its connection is not reused (RFC 9112 §6.3 item 8)"
    )
    func closeDelimitedBody() async throws {
        try await offPool {
            let origin = try Self.origin(answeringA: [
                .send("HTTP/1.1 200 OK\r\n\r\nuntil "), .pause(0.02), .send("close"), .close,
            ])
            defer { origin.stop() }
            let (a, b) = try await Self.aThenB(origin)
            #expect(a.error == nil)
            #expect(a.bodyText == "until close")
            #expect(b.bodyText == "B")
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }
}
#endif
