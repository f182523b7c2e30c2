#if os(Linux)
import CacheSystem
import CacheSemantics
import CacheStorage
import CacheTestSupport
import Dispatch
import Foundation
@_spi(Wire) import HTTPWire
import LoopbackOrigin
import Testing

@testable import HTTPClient

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("UpstreamClient", .timeLimit(.minutes(10)))
struct UpstreamClientTests {
    // MARK: What goes out

    @Test func requestFieldsReachTheOriginExactlyInOrderWithNothingAdded() async throws {
        try await offPool {
            let origin = try RawOrigin.answeringEach()
            defer { origin.stop() }
            let client = try UpstreamClient()
            let fields = HeaderFields([
                ("X-B", "1"), ("Host", "example.test"), ("x-a", "2"), ("X-B", "3"), ("Cookie", "a=1"),
                ("Cookie", "b=2"),
                ("X-Empty", ""),
            ])
            let outcome = await fetch(
                client, UpstreamRequest(method: "GET", url: origin.url("/f?q=1&r"), fields: fields))
            #expect(outcome.error == nil)
            #expect(
                origin.received.map(\.text) == [
                    "GET /f?q=1&r HTTP/1.1\r\nX-B: 1\r\nHost: example.test\r\nx-a: 2\r\nX-B: 3\r\nCookie: a=1\r\n"
                        + "Cookie: b=2\r\nX-Empty:\r\n\r\n"
                ])
        }
    }

    @Test func withoutAHostFieldOnlyHostIsAdded() async throws {
        try await offPool {
            let origin = try RawOrigin.answeringEach()
            defer { origin.stop() }
            let outcome = await fetch(
                try UpstreamClient(),
                UpstreamRequest(method: "GET", url: origin.url("/a/../b"), fields: HeaderFields([("X-A", "1")])))
            #expect(outcome.error == nil)
            // The path as given (no dot-segment removal), Host from the URL, nothing else.
            #expect(
                origin.received.map(\.text) == [
                    "GET /a/../b HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\nX-A: 1\r\n\r\n"
                ])
        }
    }

    @Test func postBodyGoesWithContentLengthAndNoAddedFields() async throws {
        try await offPool {
            let origin = try RawOrigin.answeringEach()
            defer { origin.stop() }
            let request = UpstreamRequest(
                method: "POST", url: origin.url("/p"),
                fields: HeaderFields([("Host", "h"), ("Content-Type", "application/json")]),
                body: Array("{\"a\":1}".utf8))
            let outcome = await fetch(try UpstreamClient(), request)
            #expect(outcome.error == nil)
            #expect(
                origin.received.map(\.text) == [
                    "POST /p HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}"
                ])
        }
    }

    @Test func largePostHasNoExpectAndNoFormContentType() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/big") { request in .init(body: "\(request.body.count)") }
            let body = (0..<2_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let request = UpstreamRequest(
                method: "POST", url: origin.baseURL + "/big", fields: HeaderFields([("Host", "h"), ("X-Order", "1")]),
                body: body)
            let outcome = await fetch(try UpstreamClient(), request)
            #expect(outcome.error == nil)
            #expect(outcome.bodyText == "2000000")
            let recorded = try #require(origin.requests.first)
            #expect(recorded.headers.map(\.name) == ["Host", "X-Order", "Content-Length"])
            #expect(recorded.header("Content-Length") == "2000000")
            #expect(recorded.body == body)
        }
    }

    /// A body (even empty) is sent with its Content-Length; no body means no Content-Length.
    @Test(
        arguments: [
            ("POST", [UInt8]()), ("POST", nil), ("PUT", Array("abc".utf8)), ("DELETE", nil), ("OPTIONS", nil),
            ("PURGE", nil), ("PATCH", Array("x".utf8)), ("GET", Array("q".utf8)),
        ] as [(String, [UInt8]?)])
    func methodsAndBodies(method: String, body: [UInt8]?) async throws {
        try await offPool {
            let origin = try RawOrigin.answeringEach()
            defer { origin.stop() }
            let request = UpstreamRequest(
                method: method, url: origin.url("/m"), fields: HeaderFields([("Host", "h")]), body: body)
            let outcome = await fetch(try UpstreamClient(), request)
            #expect(outcome.error == nil)
            let framing = body.map { "Content-Length: \($0.count)\r\n" } ?? ""
            let sentBody = body.map { String(decoding: $0, as: UTF8.self) } ?? ""
            #expect(origin.received.map(\.text) == ["\(method) /m HTTP/1.1\r\nHost: h\r\n\(framing)\r\n\(sentBody)"])
        }
    }

    // MARK: What comes back

    @Test func responseFieldsKeepOrderAndRepeatedNames() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/c") { _ in
                .init(
                    headers: [("Set-Cookie", "a=1"), ("X-Z", "z"), ("Set-Cookie", "b=2"), ("x-z", "again")], body: "ok")
            }
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: origin.baseURL + "/c", fields: [:]))
            let head = try #require(outcome.head)
            #expect(head.status == 200)
            #expect(head.reason == "OK")
            let kept = head.fields.filter { ["set-cookie", "x-z"].contains($0.name.lowercased()) }
            #expect(
                kept.map { "\($0.name): \($0.value)" } == [
                    "Set-Cookie: a=1", "X-Z: z", "Set-Cookie: b=2", "x-z: again",
                ])
            #expect(outcome.bodyText == "ok")
        }
    }

    @Test func gzipBodyPassesThroughCompressed() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            // A gzip member of "hello" (RFC 1952); the client must not decode it.
            let gzip: [UInt8] = [
                0x1F, 0x8B, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xCB, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00,
                0x86, 0xA6, 0x10, 0x36, 0x05, 0x00, 0x00, 0x00,
            ]
            origin.route("/z") { _ in .init(headers: [("Content-Encoding", "gzip")], body: gzip) }
            origin.route("/zc") { _ in .init(headers: [("Content-Encoding", "gzip")], body: gzip, chunked: true) }
            let client = try UpstreamClient()
            for path in ["/z", "/zc"] {
                let request = UpstreamRequest(
                    method: "GET", url: origin.baseURL + path, fields: HeaderFields([("Accept-Encoding", "gzip")]))
                let outcome = await fetch(client, request)
                #expect(outcome.error == nil)
                #expect(outcome.head?.fields["Content-Encoding"] == "gzip")
                #expect(outcome.body == gzip, "\(path)")
            }
            #expect(origin.requests.allSatisfy { $0.header("Accept-Encoding") == "gzip" })
        }
    }

    @Test func chunkedBodyArrivesWithoutFraming() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/chunked") { _ in .init(generatedLength: 700_000, seed: 9, chunked: true) }
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: origin.baseURL + "/chunked", fields: [:]))
            #expect(outcome.error == nil)
            #expect(outcome.head?.fields["Transfer-Encoding"] == "chunked")
            #expect(outcome.body == LoopbackOrigin.GeneratedBody.bytes(seed: 9, count: 700_000))
        }
    }

    @Test func redirectIsReturnedNotFollowed() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/from") { _ in .init(status: 302, headers: [("Location", "/to")], body: "moved") }
            origin.route("/to") { _ in .init(body: "arrived") }
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: origin.baseURL + "/from", fields: [:]))
            #expect(outcome.head?.status == 302)
            #expect(outcome.head?.reason == "Found")
            #expect(outcome.head?.fields["Location"] == "/to")
            #expect(outcome.bodyText == "moved")
            #expect(origin.count("/to") == 0)
        }
    }

    @Test func headReturnsWithoutWaitingForABody() async throws {
        try await offPool {
            // The origin says 100 bytes and sends none, keeping the connection open: a client that
            // waited for them would stall and fail with .timeout.
            let origin = try RawOrigin(answer: { _ in
                [.send("HTTP/1.1 200 OK\r\nContent-Length: 100\r\nETag: \"v\"\r\n\r\n")]
            })
            defer { origin.stop() }
            var configuration = UpstreamClient.Configuration()
            configuration.stallTimeout = 5
            let client = try UpstreamClient(configuration: configuration)
            for _ in 0..<2 {
                let outcome = await fetch(
                    client,
                    UpstreamRequest(method: "HEAD", url: origin.url("/h"), fields: HeaderFields([("Host", "h")])))
                #expect(outcome.error == nil)
                #expect(outcome.head?.fields["Content-Length"] == "100")
                #expect(outcome.body.isEmpty)
            }
            #expect(origin.received.map(\.text).allSatisfy { $0.hasPrefix("HEAD /h HTTP/1.1\r\n") })
            #expect(origin.received.map(\.connection) == [0, 0])
        }
    }

    @Test func interimResponsesAreSkipped() async throws {
        try await offPool {
            let origin = try RawOrigin(answer: { _ in
                [
                    .send(
                        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                            + "HTTP/1.1 201 Created\r\nX-Final: yes\r\nContent-Length: 4\r\n\r\ndone")
                ]
            })
            defer { origin.stop() }
            let request = UpstreamRequest(
                method: "PUT", url: origin.url("/i"), fields: HeaderFields([("Host", "h")]), body: [1, 2])
            let outcome = await fetch(try UpstreamClient(), request)
            #expect(outcome.error == nil)
            #expect(outcome.heads.count == 1)
            #expect(outcome.head?.status == 201)
            #expect(outcome.head?.reason == "Created")
            #expect(outcome.head?.fields.map(\.name) == ["X-Final", "Content-Length"])
            #expect(outcome.bodyText == "done")
        }
    }

    @Test func obsFoldIsReplacedWithOneSpace() async throws {
        try await offPool {
            let origin = try RawOrigin(answer: { _ in
                [
                    .send(
                        "HTTP/1.1 200 Fine Thanks\r\nX-Folded: one\r\n  two\r\n\tthree  \r\nX-Next :  n  \r\n"
                            + "Content-Length: 2\r\n\r\nok")
                ]
            })
            defer { origin.stop() }
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: origin.url("/o"), fields: [:]))
            let head = try #require(outcome.head)
            #expect(head.reason == "Fine Thanks")
            #expect(
                head.fields.map { "\($0.name)=\($0.value)" } == [
                    "X-Folded=one two three", "X-Next=n", "Content-Length=2",
                ])
            #expect(outcome.bodyText == "ok")
        }
    }

    // MARK: Connections

    @Test func sequentialRequestsFromDifferentThreadsShareOneConnection() async throws {
        try await offPool {
            let origin = try RawOrigin.answeringEach()
            defer { origin.stop() }
            let client = try UpstreamClient()
            for index in 0..<6 {
                // `fetch` runs each request on a new thread of its own.
                let outcome = await fetch(
                    client, UpstreamRequest(method: "GET", url: origin.url("/r\(index)"), fields: [:]))
                #expect(outcome.error == nil)
            }
            #expect(origin.received.count == 6)
            #expect(origin.connections == 1)
        }
    }

    @Test func concurrentRequestsThenReuseWithoutNewConnections() async throws {
        try await offPool {
            // Answers after 0.1 s, so that the first requests overlap and need connections of their own.
            let origin = try RawOrigin(answer: { _ in
                [.pause(0.1), .send("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")]
            })
            defer { origin.stop() }
            let client = try UpstreamClient()
            await withTaskGroup(of: Outcome.self) { group in
                for index in 0..<4 {
                    group.addTask {
                        await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/c\(index)"), fields: [:]))
                    }
                }
                for await outcome in group { #expect(outcome.error == nil) }
            }
            let afterBurst = origin.connections
            #expect((1...4).contains(afterBurst))
            // Every later request finds an idle kept-alive connection in the pool.
            for index in 0..<6 {
                let outcome = await fetch(
                    client, UpstreamRequest(method: "GET", url: origin.url("/s\(index)"), fields: [:]))
                #expect(outcome.error == nil)
            }
            #expect(origin.connections == afterBurst)
        }
    }

    @Test func manyThreadsAtOnceEachGetTheirOwnResponse() async throws {
        try await offPool {
            let origin = try RawOrigin { connection in
                while let request = connection.readRequest() {
                    let target = request.split(separator: " ")[1]
                    connection.send("HTTP/1.1 200 OK\r\nContent-Length: \(target.utf8.count)\r\n\r\n\(target)")
                }
            }
            defer { origin.stop() }
            let client = try UpstreamClient()
            let failures = await withTaskGroup(of: Int.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var failures = 0
                        for index in 0..<25 {
                            let path = "/w\(worker)/\(index)"
                            let outcome = await fetch(
                                client, UpstreamRequest(method: "GET", url: origin.url(path), fields: [:]))
                            if outcome.error != nil || outcome.bodyText != path { failures += 1 }
                        }
                        return failures
                    }
                }
                return await group.reduce(0, +)
            }
            #expect(failures == 0)
            #expect(origin.received.count == 200)
            // Never more connections than requests in flight at once.
            #expect(origin.connections <= 8)
        }
    }

    /// An idle connection is not reused after `idleConnectionLifetime` (a request 1 s later
    /// connects anew), nor kept beyond `maxIdleConnections` (none: every request connects).
    @Test(arguments: [(0.3, 64, 1.0), (60, 0, 0)] as [(Double, Int, Double)])
    func idleConnectionsAreKeptForTheirLifetimeAndUpToTheirNumber(
        lifetime: Double, maxIdle: Int, pause: Double
    ) async throws {
        try await offPool {
            let origin = try RawOrigin.answeringEach()
            defer { origin.stop() }
            var configuration = UpstreamClient.Configuration()
            configuration.idleConnectionLifetime = lifetime
            configuration.maxIdleConnections = maxIdle
            let client = try UpstreamClient(configuration: configuration)
            #expect(
                await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/a"), fields: [:])).error == nil)
            try await Task.sleep(for: .seconds(pause))
            #expect(
                await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/b"), fields: [:])).error == nil)
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    @Test(arguments: ["GET", "HEAD", "DELETE"])
    func idempotentRequestIsRetriedOnceWhenAKeptAliveConnectionCloses(method: String) async throws {
        try await offPool {
            let origin = try RawOrigin(RawOrigin.answerOnceThenDropTheNext)
            defer { origin.stop() }
            let client = try UpstreamClient()
            let warm = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/warm"), fields: [:]))
            #expect(warm.error == nil)
            let outcome = await fetch(client, UpstreamRequest(method: method, url: origin.url("/again"), fields: [:]))
            #expect(outcome.error == nil)
            #expect(outcome.head?.status == 200)
            let sent = origin.received.filter { $0.text.hasPrefix("\(method) /again ") }
            #expect(sent.map(\.connection) == [0, 1])
        }
    }

    /// POST and PATCH are never sent twice, with a body, an empty one or none: the request
    /// the origin may have acted on fails as .closed instead.
    @Test(
        arguments: [
            ("POST", Array("abc".utf8)), ("POST", []), ("POST", nil), ("PATCH", Array("p".utf8)),
        ] as [(String, [UInt8]?)])
    func nonIdempotentRequestIsNotSentAgain(method: String, body: [UInt8]?) async throws {
        try await offPool {
            let origin = try RawOrigin(RawOrigin.answerOnceThenDropTheNext)
            defer { origin.stop() }
            let client = try UpstreamClient()
            let warm = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/warm"), fields: [:]))
            #expect(warm.error == nil)
            let url = origin.url("/once")
            let outcome = await fetch(client, UpstreamRequest(method: method, url: url, fields: [:], body: body))
            let error = try #require(outcome.error)
            #expect(error.kind == .closed)
            #expect(!error.receivedHead)
            #expect(error.description.contains(url))
            #expect(error.description.contains("not idempotent"))
            #expect(origin.received.filter { $0.text.hasPrefix("\(method) /once ") }.count == 1)
            // The client still works afterwards, on a new connection.
            let after = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/after"), fields: [:]))
            #expect(after.error == nil)
        }
    }

    // MARK: Failures

    @Test func refusedConnectionIsAConnectErrorThatSaysWhy() async throws {
        try await offPool {
            let refusing = try RefusingPort()
            defer { withExtendedLifetime(refusing) {} }  // held until the test is done
            let url = "http://127.0.0.1:\(refusing.port)/x"
            let outcome = await fetch(try UpstreamClient(), UpstreamRequest(method: "GET", url: url, fields: [:]))
            let error = try #require(outcome.error)
            #expect(error.kind == .connect)
            #expect(!error.receivedHead)
            #expect(error.description == "could not connect to \(url) (Connection refused); is the origin running?")
        }
    }

    @Test func connectTimeoutIsATimeout() async throws {
        try await offPool {
            // A listener whose accept queue is full drops further SYNs: connecting hangs.
            let full = try RawOrigin.FullListener()
            defer { full.close() }
            var configuration = UpstreamClient.Configuration()
            configuration.connectTimeout = 0.3
            let url = "http://127.0.0.1:\(full.port)/"
            let outcome = await fetch(
                try UpstreamClient(configuration: configuration), UpstreamRequest(method: "GET", url: url, fields: [:]))
            let error = try #require(outcome.error)
            #expect(error.kind == .timeout)
            #expect(error.description.hasPrefix("could not connect to \(url) within 0.3 s"))
        }
    }

    @Test func originThatSendsNothingIsAStallTimeout() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/wait") { _ in .init(body: "late", delay: 30) }
            origin.route("/pause") { _ in .init(generatedLength: 100_000, seed: 1, pauseAfterBodyBytes: 1_000) }
            var configuration = UpstreamClient.Configuration()
            configuration.stallTimeout = 1
            let client = try UpstreamClient(configuration: configuration)

            let beforeHead = await fetch(
                client, UpstreamRequest(method: "GET", url: origin.baseURL + "/wait", fields: [:]))
            let error = try #require(beforeHead.error)
            #expect(error.kind == .timeout)
            #expect(!error.receivedHead)
            #expect(error.description == "no byte from \(origin.baseURL)/wait for 1 s while waiting for a response")

            let inBody = await fetch(
                client, UpstreamRequest(method: "GET", url: origin.baseURL + "/pause", fields: [:]))
            #expect(inBody.error?.kind == .timeout)
            #expect(inBody.error?.receivedHead == true)
            #expect(inBody.body.count == 1_000)
        }
    }

    @Test func bodyShorterThanContentLengthIsClosedAfterTheHead() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/cut") { _ in .init(body: [UInt8](repeating: 0x61, count: 10_000), cutAfterBodyBytes: 1_000) }
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: origin.baseURL + "/cut", fields: [:]))
            let error = try #require(outcome.error)
            #expect(error.kind == .closed)
            #expect(error.receivedHead)
            #expect(outcome.heads.count == 1)
            #expect(outcome.body.count == 1_000)
            #expect(error.description.contains("\(origin.baseURL)/cut"))
        }
    }

    @Test func originClosingWithoutAnswerIsClosed() async throws {
        try await offPool {
            let origin = try RawOrigin { connection in _ = connection.readRequest() }
            defer { origin.stop() }
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: origin.url("/n"), fields: [:]))
            #expect(outcome.error?.kind == .closed)
            #expect(outcome.error?.receivedHead == false)
        }
    }

    @Test func receiverReturningFalseAborts() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/big") { _ in .init(generatedLength: 5_000_000, seed: 2) }
            let client = try UpstreamClient()
            let url = origin.baseURL + "/big"

            let atHead = await fetch(client, UpstreamRequest(method: "GET", url: url, fields: [:]), stopAtHead: true)
            #expect(atHead.error?.kind == .aborted)
            #expect(atHead.error?.receivedHead == true)
            #expect(atHead.body.isEmpty)

            let inBody = await fetch(
                client, UpstreamRequest(method: "GET", url: url, fields: [:]), stopAfterBodyBytes: 1)
            let error = try #require(inBody.error)
            #expect(error.kind == .aborted)
            #expect(error.receivedHead)
            #expect(error.description == "the transfer from \(url) was stopped by its receiver")
            #expect(inBody.body.count < 5_000_000)
            // The handle is usable again.
            origin.route("/small") { _ in .init(body: "s") }
            #expect(
                await fetch(client, UpstreamRequest(method: "GET", url: origin.baseURL + "/small", fields: [:]))
                    .bodyText
                    == "s")
        }
    }

    @Test(arguments: [
        "HTTP/1.1 abc Nope\r\n\r\n", "HTTP/1.1 2000 OK\r\n\r\n", "hello there\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello",
    ])
    func malformedStatusLineOrLengthIsAProtocolError(reply: String) async throws {
        try await offPool {
            let origin = try RawOrigin { connection in
                if connection.readRequest() != nil { connection.send(reply) }
            }
            defer { origin.stop() }
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: origin.url("/bad"), fields: [:]))
            #expect(outcome.error?.kind == .protocolError, "\(outcome.error?.description ?? "no error")")
            #expect(outcome.heads.isEmpty)
        }
    }

    @Test func brokenChunkedFramingIsAProtocolError() async throws {
        try await offPool {
            let origin = try RawOrigin { connection in
                if connection.readRequest() != nil {
                    connection.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n")
                }
            }
            defer { origin.stop() }
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: origin.url("/bad"), fields: [:]))
            #expect(outcome.error?.kind == .protocolError, "\(outcome.error?.description ?? "no error")")
            #expect(outcome.error?.receivedHead == true)
        }
    }

    @Test func onlyHTTPURLsWithoutUserInformationAreFetched() async throws {
        try await offPool {
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: "file:///etc/passwd", fields: [:]))
            #expect(outcome.error?.kind == .other)
            #expect(outcome.heads.isEmpty)
            let origin = try RawOrigin.answeringEach()
            defer { origin.stop() }
            let credentials = "http://user:secret@127.0.0.1:\(origin.port)/"
            let withUser = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: credentials, fields: [:]))
            #expect(withUser.error?.kind == .other)
            #expect(origin.received.isEmpty)
            let badMethod = await fetch(
                try UpstreamClient(),
                UpstreamRequest(method: "GET / HTTP/1.1\r\nX:", url: "http://127.0.0.1:1/", fields: [:]))
            #expect(badMethod.error?.kind == .other)
        }
    }

    // MARK: Parts without sockets

    @Test func idempotentMethodsFollowRFC9110() async {
        await offPool {
            #expect(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"].allSatisfy(UpstreamClient.isIdempotent))
            #expect(!["POST", "PATCH", "PURGE", "get", "CONNECT"].contains(where: UpstreamClient.isIdempotent))
        }
    }
}

// MARK: - Helpers

/// What a receiver saw, and how `perform` ended.
struct Outcome: Sendable {
    var heads: [UpstreamResponseHead] = []
    var body: [UInt8] = []
    var error: UpstreamError?
    var head: UpstreamResponseHead? { heads.first }
    var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// Runs `perform` on a new thread of its own (it blocks, as on the proxy's workers), keeping
/// the test's cooperative threads free.
func fetch(
    _ client: UpstreamClient, _ request: UpstreamRequest, stopAtHead: Bool = false, stopAfterBodyBytes: Int? = nil
) async -> Outcome {
    // Handed over through a lock, which ThreadSanitizer sees, rather than through the
    // continuation alone: the concurrency runtime's hand-off is out of its sight, and it took
    // the test's reads of the body for a race with the thread that wrote it.
    let handedOver = Locked(Outcome())
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread {
            let collector = ResponseCollector(stopAtHead: stopAtHead, stopAfterBodyBytes: stopAfterBodyBytes)
            var outcome = Outcome()
            do throws(UpstreamError) {
                try client.perform(request, collector)
            } catch {
                outcome.error = error
            }
            outcome.heads = collector.heads
            outcome.body = collector.body
            handedOver.withLock { $0 = outcome }
            continuation.resume()
        }
    }
    return handedOver.withLock { $0 }
}
#endif
