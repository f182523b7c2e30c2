#if os(Linux)
import CacheSystem
import CacheSemantics
import CacheTestSupport
import CachingProxy
import Dispatch
import Foundation
import Glibc
import Testing

private let ok = ServerResponseHead(status: 200, fields: ["Content-Type": "text/plain"])

private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Runs `body` on a thread of its own: blocking work must not wait for a free thread of
/// Dispatch's small pool, which other tests' blocked work may hold.
private func onNewThread(_ body: @escaping @Sendable () -> Void) {
    let thread = Thread(block: body)
    thread.stackSize = 1 << 20
    thread.start()
}

private func wait(_ semaphore: DispatchSemaphore, seconds: Double = 10) -> Bool {
    semaphore.wait(timeout: .now() + seconds) == .success
}

@Suite("HTTPServer")
struct HTTPServerTests {
    // MARK: connections and framing

    @Test("Keep-alive: several requests on one HTTP/1.1 connection (RFC 9112 §9.3)")
    func keepAlive() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            for target in ["/a", "/b?c=d", "/e"] {
                try client.send("GET \(target) HTTP/1.1\r\nHost: example.com\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 200)
                #expect(response.reason == "OK")
                #expect(response.bodyText == target)
                #expect(response.field("Content-Length") == "\(target.utf8.count)")
                #expect(response.field("Connection") == nil)
            }
            #expect(!client.waitForClose(within: 0.1))
            #expect(test.handler.targets == ["/a", "/b?c=d", "/e"])
            let request = try #require(test.handler.requests.first)
            #expect(request.method == "GET")
            #expect(request.minorVersion == 1)
            #expect(request.peerIsLoopback)
            #expect(request.fields["Host"] == "example.com")
            let statistics = test.server.statistics
            #expect(statistics.requests == 3)
            #expect(statistics.connectionsAccepted == 1)
            #expect(statistics.connectionsOpen == 1)
        }
    }

    @Test("A higher HTTP/1.x minor version is processed as HTTP/1.1 and answered in it (RFC 9112 §2.3)")
    func higherMinorVersion() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            for target in ["/v12", "/v19"] {
                try client.send("GET \(target) HTTP/1.\(target.suffix(1))\r\nHost: a\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 200 && response.version == "HTTP/1.1", "\(response)")
                #expect(response.bodyText == target)
            }
            #expect(!client.waitForClose(within: 0.1), "kept open as HTTP/1.1 is")
            #expect(test.handler.requests.map(\.minorVersion) == [1, 1])
        }
    }

    @Test("A port in use is a clear ServerError naming the address")
    func portInUse() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            var configuration = HTTPServer.Configuration()
            configuration.port = test.port
            do {
                _ = try HTTPServer(configuration: configuration, handler: test.handler, log: { _ in })
                Issue.record("a second server could listen on port \(test.port)")
            } catch {
                #expect(
                    "\(error)"
                        == "cannot listen on 127.0.0.1:\(test.port): Address already in use; choose another --listen port"
                )
            }
            configuration.host = "example.com"
            #expect(throws: ServerError.self) {
                _ = try HTTPServer(configuration: configuration, handler: test.handler, log: { _ in })
            }
        }
    }

    @Test(
        "With two loops on one listener concurrent clients are all served, answers from other threads too (RFC 9112 §9.3)"
    )
    func twoLoops() async throws {
        try await offPool {
            let test = try TestServer(
                handler: { request, responder in
                    if request.target.hasSuffix("/late") {
                        onNewThread { TestServer.echo(request, responder) }
                    } else {
                        TestServer.echo(request, responder)
                    }
                }, configure: { $0.loops = 2 })
            defer { test.server.shutdown(timeout: 1) }
            let failures = Locked(0)
            let done = DispatchSemaphore(value: 0)
            for client in 0..<8 {
                onNewThread {
                    do {
                        let connection = try RawHTTPClient(port: test.port)
                        for request in 0..<20 {
                            let target = "/\(client)/\(request)" + (request % 3 == 0 ? "/late" : "")
                            try connection.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
                            if try connection.readResponse().bodyText != target { failures.withLock { $0 += 1 } }
                        }
                    } catch {
                        failures.withLock { $0 += 1 }
                    }
                    done.signal()
                }
            }
            for _ in 0..<8 { #expect(wait(done)) }
            #expect(failures.withLock { $0 } == 0)
            #expect(test.server.statistics.requests == 160)
            #expect(test.server.statistics.connectionsAccepted == 8)
        }
    }

    @Test("Connection: close is honoured and answered with Connection: close (RFC 9112 §9.6)")
    func connectionClose() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.field("Connection") == "close")
            #expect(client.waitForClose())
        }
    }

    @Test(
        "A client's last request, read whole, is answered and the connection closed at once, not in stages (RFC 9112 §9.6)",
        arguments: [
            "GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            "GET /x HTTP/1.0\r\nHost: a\r\n\r\n",
            "POST /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 4\r\n\r\nbody",
        ])
    func lastRequestClosesAtOnce(request: String) async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send(request)
            #expect(try client.readResponse().status == 200)
            #expect(client.waitForClose())
            #expect(!client.wasReset)
            // The client keeps its socket open. A byte it sends now reaches a socket the server
            // has closed, which resets; a server closing in stages would read and drop it.
            var byte = UInt8(ascii: "x")
            #expect(Glibc.send(client.fd, &byte, 1, Int32(MSG_NOSIGNAL)) == 1)
            #expect(Self.waitForReset(client.fd))
        }
    }

    @Test("A last request followed by more bytes is still closed in stages: the response arrives whole (RFC 9112 §9.6)")
    func bytesAfterTheLastRequestGetAStagedClose() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /y HTTP/1.1\r\nHost: a\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText == "/x")
            #expect(client.waitForClose())
            #expect(!client.wasReset)
            #expect(test.handler.targets == ["/x"])
        }
    }

    /// Whether `fd`, past the end of stream, is reset within 5 s. A read there returns the end
    /// of stream, not the reset; the socket's pending error has it (Linux: `EPIPE` for a socket
    /// that had read the peer's FIN, `ECONNRESET` otherwise).
    private static func waitForReset(_ fd: Int32) -> Bool {
        let deadline = MonotonicClock.seconds() + 5
        while MonotonicClock.seconds() < deadline {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && (error == EPIPE || error == ECONNRESET) {
                return true
            }
            usleep(5_000)
        }
        return false
    }

    @Test(
        "Fields keep their order, repetition and spelling; OWS is trimmed; empty lines before the request-line are ignored (RFC 9112 §2.2, §5)"
    )
    func fieldsAsReceived() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send(
                "\r\n\r\nGET /f HTTP/1.1\r\nHost: a\r\nX-One:  first \t\r\nx-one: second\r\nACCEPT:\r\nVia: 1.1 p, 1.0 q\r\n\r\n"
            )
            #expect(try client.readResponse().status == 200)
            let fields = try #require(test.handler.requests.first).fields
            #expect(fields.map(\.name) == ["Host", "X-One", "x-one", "ACCEPT", "Via"])
            #expect(fields.map(\.value) == ["a", "first", "second", "", "1.1 p, 1.0 q"])
            #expect(fields.values(named: "X-ONE") == ["first", "second"])
        }
    }

    @Test(
        "Pipelined requests are answered one at a time and in order, the first late from another thread (RFC 9112 §9.3.2)"
    )
    func pipelining() async throws {
        try await offPool {
            let firstArrived = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let test = try TestServer { request, responder in
                guard request.target == "/1" else { return TestServer.echo(request, responder) }
                firstArrived.signal()
                onNewThread {
                    _ = wait(release)
                    responder.respond(ok, body: bytes("one"))
                }
            }
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send(
                "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\n\r\n"
            )
            #expect(wait(firstArrived))
            // While /1 is unanswered the later requests wait in the server's buffer.
            #expect(client.receiveAvailable(within: 0.2).isEmpty)
            #expect(test.handler.targets == ["/1"])
            release.signal()
            let responses = try (0..<3).map { _ in try client.readResponse() }
            #expect(responses.map(\.bodyText) == ["one", "/2", "/3"])
            #expect(test.handler.targets == ["/1", "/2", "/3"])
        }
    }

    @Test("A chunked request body is de-chunked: extensions ignored, trailers dropped (RFC 9112 §7.1)")
    func chunkedRequestBody() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            let request =
                "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                + "5;name=value\r\nhello\r\n7 ; q=\"x\"\r\n, world\r\n0\r\nX-Trailer: yes\r\n\r\n"
            // Once in one piece, once a byte at a time.
            try client.send(request)
            #expect(try client.readResponse().bodyText == "hello, world")
            for byte in bytes(request) { try client.send([byte]) }
            #expect(try client.readResponse().bodyText == "hello, world")
            try client.send("GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().bodyText == "/after")
            let received = try #require(test.handler.requests.first)
            #expect(received.body == bytes("hello, world"))
            #expect(!received.fields.contains("X-Trailer"))
        }
    }

    @Test("A Content-Length body arriving in pieces is read in full (RFC 9112 §6.2)")
    func contentLengthBody() async throws {
        try await offPool {
            // Made before the connection: the server's 5-s timeouts are not to include the
            // test's own work (under ThreadSanitizer beside other tests, building these took
            // longer than that).
            let body = Fixtures.bytes(count: 200_000) { UInt8(truncatingIfNeeded: $0 &* 7) }
            let (first, rest) = (Array(body[..<1000]), Array(body[1000...]))
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("PUT /p HTTP/1.1\r\nHost: a\r\nContent-Length: \(body.count)\r\n\r\n")
            try client.send(first)
            try client.send(rest)
            let response = try client.readResponse()
            #expect(response.body == body)
        }
    }

    @Test("A streamed response is chunked to HTTP/1.1 (RFC 9112 §7.1) and close-delimited to HTTP/1.0 (RFC 9112 §6.3)")
    func streamedResponse() async throws {
        try await offPool {
            let test = try TestServer { _, responder in
                responder.start(ok, framing: .streamed)
                responder.write(bytes("hello "))
                bytes("world").withUnsafeBytes { _ = responder.write($0) }
                responder.finish()
            }
            defer { test.server.shutdown(timeout: 1) }

            let modern = try RawHTTPClient(port: test.port)
            try modern.send("GET /s HTTP/1.1\r\nHost: a\r\n\r\n")
            let chunked = try modern.readResponse()
            #expect(chunked.framing == .chunked)
            #expect(chunked.field("Transfer-Encoding") == "chunked")
            #expect(chunked.field("Content-Length") == nil)
            #expect(chunked.rawBody == bytes("6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n"))
            #expect(!modern.waitForClose(within: 0.1))

            let legacy = try RawHTTPClient(port: test.port)
            try legacy.send("GET /s HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            let delimited = try legacy.readResponse()
            #expect(delimited.framing == .untilClose)
            #expect(delimited.field("Transfer-Encoding") == nil)
            #expect(delimited.field("Connection") == "close")
            #expect(delimited.bodyText == "hello world")
            #expect(legacy.peerClosed)
        }
    }

    @Test("HTTP/1.0 keeps the connection only with Connection: keep-alive, and says so (RFC 9112 §9.3, §C.2.2)")
    func http10KeepAlive() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            for target in ["/1", "/2"] {
                try client.send("GET \(target) HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.version == "HTTP/1.1")
                #expect(response.field("Connection") == "keep-alive")
                #expect(response.bodyText == target)
            }
            try client.send("GET /3 HTTP/1.0\r\n\r\n")
            let last = try client.readResponse()
            #expect(last.field("Connection") == "close")
            #expect(last.bodyText == "/3")
            #expect(client.waitForClose())
            #expect(test.handler.requests.map(\.minorVersion) == [0, 0, 0])
        }
    }

    @Test("Expect: 100-continue gets 100 before the body is read, then the final answer (RFC 9110 §10.1.1)")
    func expectContinue() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
            #expect(try client.receive(count: 25) == bytes("HTTP/1.1 100 Continue\r\n\r\n"))
            #expect(test.handler.requests.isEmpty)
            try client.send("hello")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText == "hello")
        }
    }

    @Test("An expectation other than 100-continue is answered 417 (RFC 9110 §10.1.1)")
    func expectUnknown() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: teapot\r\n\r\nhello")
            try expectRejected(client, status: 417, test)
        }
    }

    @Test("100-continue with a Content-Length over the limit gets 413 instead of 100 (RFC 9110 §10.1.1, §15.5.14)")
    func expectContinueTooLarge() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.maxBodyBytes = 100 })
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\nExpect: 100-continue\r\n\r\n")
            let response = try client.readResponse(interim: true)
            #expect(response.status == 413)
            #expect(client.waitForClose())
            #expect(test.handler.requests.isEmpty)
        }
    }

    @Test("HEAD and .none framing: Content-Length as announced, no body bytes (RFC 9110 §9.3.2, RFC 9112 §6.3)")
    func headAndNoneFraming() async throws {
        try await offPool {
            let test = try TestServer { request, responder in
                switch request.target {
                case "/head":
                    responder.respond(ok, body: [], framing: .length(1234))
                case "/304":
                    responder.respond(
                        ServerResponseHead(status: 304, fields: ["ETag": "\"v1\"", "Content-Length": "99"]), body: [],
                        framing: BodyFraming.none)
                default:
                    responder.respond(ok, body: bytes("full body"))
                }
            }
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("HEAD /head HTTP/1.1\r\nHost: a\r\n\r\n")
            let head = try client.readResponse(method: "HEAD")
            #expect(head.field("Content-Length") == "1234")
            try client.send("GET /304 HTTP/1.1\r\nHost: a\r\n\r\n")
            let notModified = try client.readResponse()
            #expect(notModified.status == 304)
            #expect(notModified.reason == "Not Modified")
            #expect(notModified.values("Content-Length") == ["99"])
            #expect(notModified.field("ETag") == "\"v1\"")
            // Had any body byte been sent, this response would not parse.
            try client.send("HEAD /other HTTP/1.1\r\nHost: a\r\n\r\nGET /other HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse(method: "HEAD").field("Content-Length") == "9")
            #expect(try client.readResponse().bodyText == "full body")
        }
    }

    @Test(
        "The server writes its own framing fields and drops the handler's Connection, Keep-Alive, Transfer-Encoding, Content-Length (RFC 9112 §6, §9.6)"
    )
    func framingFieldsAreTheServers() async throws {
        try await offPool {
            let test = try TestServer { _, responder in
                responder.respond(
                    ServerResponseHead(
                        status: 299, reason: "Custom",
                        fields: [
                            "Connection": "close", "Keep-Alive": "timeout=5", "Transfer-Encoding": "gzip",
                            "Content-Length": "3", "X-Kept": "yes",
                        ]), body: bytes("hello"))
            }
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.headText == "HTTP/1.1 299 Custom\r\nX-Kept: yes\r\nContent-Length: 5\r\n\r\n")
            #expect(response.bodyText == "hello")
            #expect(!client.waitForClose(within: 0.1))
        }
    }

    // MARK: limits

    @Test("A head over maxHeaderBytes is refused with 431 (RFC 6585 §5)")
    func headTooLarge() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.maxHeaderBytes = 1024 })
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET / HTTP/1.1\r\nHost: a\r\nX-Big: \(String(repeating: "b", count: 2000))\r\n\r\n")
            try expectRejected(client, status: 431, test)
        }
    }

    @Test("A request-target longer than maxHeaderBytes is refused with 414, URI Too Long (RFC 9112 §3)")
    func targetTooLong() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.maxHeaderBytes = 1024 })
            defer { test.server.shutdown(timeout: 1) }
            let long = try RawHTTPClient(port: test.port)
            try long.send("GET /\(String(repeating: "a", count: 1100)) HTTP/1.1\r\nHost: a\r\n\r\n")
            try expectRejected(long, status: 414, test)
            // Without a line end in sight too (its log line held back: one a second).
            let endless = try RawHTTPClient(port: test.port)
            try endless.send("GET /\(String(repeating: "a", count: 1100))")
            try expectRejected(endless, status: 414, test, rejections: 2)
        }
    }

    @Test(
        "A method longer than the head limit is refused with 501, Not Implemented, not 431; a version past a long target with 400 (RFC 9112 §3)"
    )
    func methodTooLong() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.maxHeaderBytes = 1024 })
            defer { test.server.shutdown(timeout: 1) }
            let long = try RawHTTPClient(port: test.port)
            try long.send("\(String(repeating: "A", count: 2000)) / HTTP/1.1\r\nHost: a\r\n\r\n")
            try expectRejected(long, status: 501, test)
            // Without a space or line end in sight, in pieces (its log line held back: one a second).
            let endless = try RawHTTPClient(port: test.port)
            for _ in 0..<4 { try endless.send(String(repeating: "A", count: 300)) }
            try expectRejected(endless, status: 501, test, rejections: 2)
        }
        try await offPool {
            let test = try TestServer(configure: { $0.maxHeaderBytes = 1024 })
            defer { test.server.shutdown(timeout: 1) }
            // A control byte within the limit makes it malformed, whatever its length.
            let control = try RawHTTPClient(port: test.port)
            try control.send("\(String(repeating: "A", count: 500))\u{1}\(String(repeating: "A", count: 1500))")
            try expectRejected(control, status: 400, test)
            // A short target followed by no line end is no long target: its version is malformed.
            let version = try RawHTTPClient(port: test.port)
            try version.send("GET / HTTP/1.1\(String(repeating: "1", count: 1100))")
            try expectRejected(version, status: 400, test, rejections: 2)
        }
    }

    @Test("More than maxFieldCount field lines are refused with 431 (RFC 6585 §5)")
    func tooManyFields() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.maxFieldCount = 10 })
            defer { test.server.shutdown(timeout: 1) }
            let accepted = try RawHTTPClient(port: test.port)
            let nine = (1...9).map { "X-\($0): v\r\n" }.joined()
            try accepted.send("GET / HTTP/1.1\r\nHost: a\r\n\(nine)\r\n")
            #expect(try accepted.readResponse().status == 200)
            let refused = try RawHTTPClient(port: test.port)
            try refused.send("GET / HTTP/1.1\r\nHost: a\r\n\(nine)X-10: v\r\n\r\n")
            try expectRejected(refused, status: 431, test, handled: 1)
        }
    }

    @Test("A body over maxBodyBytes is refused with 413, declared or while de-chunking (RFC 9110 §15.5.14)")
    func bodyTooLarge() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.maxBodyBytes = 100 })
            defer { test.server.shutdown(timeout: 1) }
            let declared = try RawHTTPClient(port: test.port)
            try declared.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n")
            try expectRejected(declared, status: 413, test)

            let chunked = try RawHTTPClient(port: test.port)
            let sixty = String(repeating: "x", count: 60)
            try chunked.send(
                "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3c\r\n\(sixty)\r\n3c\r\n\(sixty)\r\n0\r\n\r\n"
            )
            try expectRejected(chunked, status: 413, test, rejections: 2)

            let exact = try RawHTTPClient(port: test.port)
            try exact.send(
                "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n\(String(repeating: "y", count: 100))")
            #expect(try exact.readResponse().body.count == 100)
        }
    }

    // MARK: malformed requests

    static let malformed: [MalformedRequest] = [
        .init(
            "Content-Length with Transfer-Encoding (RFC 9112 §6.3)",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        .init(
            "Transfer-Encoding with Content-Length (RFC 9112 §6.3)",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n0\r\n\r\n", 400),
        .init(
            "differing Content-Length lines (RFC 9112 §6.3)",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400),
        .init(
            "differing Content-Length list (RFC 9112 §6.3)",
            "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\nhello!", 400),
        .init(
            "signed Content-Length (RFC 9112 §6.3)", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello",
            400),
        .init(
            "hex Content-Length (RFC 9112 §6.3)", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\nhello", 400),
        .init("empty Content-Length (RFC 9112 §6.3)", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", 400),
        .init(
            "Transfer-Encoding not ending in chunked (RFC 9112 §6.3)",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 400),
        .init(
            "Transfer-Encoding gzip alone (RFC 9112 §6.3)",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400),
        .init(
            "Transfer-Encoding gzip, chunked (RFC 9112 §6.1)",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
        .init(
            "chunked twice (RFC 9112 §7)",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400),
        .init(
            "Transfer-Encoding in HTTP/1.0 (RFC 9112 §6.1)",
            "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
        .init("obs-fold (RFC 9112 §5.2)", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n  c\r\n\r\n", 400),
        .init("space before the colon (RFC 9112 §5.1)", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),
        .init("empty field name (RFC 9112 §5)", "GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", 400),
        .init("no colon (RFC 9112 §5)", "GET / HTTP/1.1\r\nHost: a\r\nX-A\r\n\r\n", 400),
        .init("NUL in a value (RFC 9110 §5.5)", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\u{0}c\r\n\r\n", 400),
        .init("bare CR in a value (RFC 9112 §2.2)", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", 400),
        .init("bare LF ending a field line (RFC 9112 §2.2)", "GET / HTTP/1.1\r\nHost: a\nX-A: b\r\n\r\n", 400),
        .init("bare LF ending the request-line (RFC 9112 §2.2)", "GET / HTTP/1.1\nHost: a\r\n\r\n", 400),
        .init("bare LF ending the head (RFC 9112 §2.2)", "GET / HTTP/1.1\r\nHost: a\r\n\n", 400),
        .init("missing Host (RFC 9112 §3.2)", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400),
        .init("two Host lines (RFC 9112 §3.2)", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        .init("invalid Host value (RFC 9112 §3.2)", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
        .init("Host port with a sign (RFC 3986 §3.2.3)", "GET / HTTP/1.1\r\nHost: 127.0.0.1:+18941\r\n\r\n", 400),
        .init("Host port not digits (RFC 3986 §3.2.3)", "GET / HTTP/1.1\r\nHost: a:8o\r\n\r\n", 400),
        .init("Host port above 65535 (RFC 3986 §3.2.3)", "GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n", 400),
        .init("Host with two ports (RFC 3986 §3.2)", "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", 400),
        .init("Host with an empty host (RFC 9110 §4.2.1)", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", 400),
        .init("Host IP literal unclosed (RFC 3986 §3.2.2)", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400),
        .init("Host IP literal not IPv6 (RFC 3986 §3.2.2)", "GET / HTTP/1.1\r\nHost: [1::2::3]\r\n\r\n", 400),
        .init("Host bad escape (RFC 3986 §2.1)", "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", 400),
        .init("HTTP/2.0 (RFC 9112 §2.3)", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
        .init("HTTP/2 connection preface (RFC 9112 §2.3)", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        .init("lower-case version (RFC 9112 §2.3)", "GET / http/1.1\r\nHost: a\r\n\r\n", 400),
        .init("space in the target (RFC 9112 §3.2)", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        .init("two spaces after the method (RFC 9112 §3)", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        .init("no version (RFC 9112 §3)", "GET /\r\n\r\n", 400),
        .init("method not a token (RFC 9112 §3)", "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        .init("garbage line (RFC 9112 §3)", "hello there\r\n\r\n", 400),
        .init(
            "TLS handshake bytes (RFC 9112 §3)", bytes: [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03],
            400),
        .init(
            "chunk size not hex (RFC 9112 §7.1)",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400),
        .init(
            "chunk size overflow (RFC 9112 §7.1)",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n",
            400),
        .init(
            "chunk data without CRLF (RFC 9112 §7.1)",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n", 400),
        .init(
            "bare LF after a chunk size (RFC 9112 §7.1)",
            "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400),
    ]

    @Test(
        "Malformed and smuggling requests are refused and the connection closed (RFC 9112 §2–§7)", arguments: malformed)
    func malformedRequest(_ request: MalformedRequest) async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send(request.bytes)
            try expectRejected(client, status: request.status, test)
        }
    }

    /// Reads a rejection: the status, a text/plain reason, `Connection: close`, a `Date`, and
    /// then the connection closed; the handler never called.
    private func expectRejected(
        _ client: RawHTTPClient, status: Int, _ test: TestServer, handled: Int = 0, rejections: Int = 1,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let response = try client.readResponse()
        #expect(response.status == status, "\(response.bodyText)", sourceLocation: sourceLocation)
        #expect(response.field("Connection") == "close", sourceLocation: sourceLocation)
        #expect(response.field("Content-Type") == "text/plain; charset=utf-8", sourceLocation: sourceLocation)
        #expect(response.field("Date")?.hasSuffix(" GMT") == true, sourceLocation: sourceLocation)
        #expect(response.bodyText.hasPrefix("\(status) "), sourceLocation: sourceLocation)
        #expect(response.bodyText.hasSuffix("; the connection is closed\n"), sourceLocation: sourceLocation)
        #expect(client.waitForClose(), "the connection stays open", sourceLocation: sourceLocation)
        #expect(test.handler.requests.count == handled, sourceLocation: sourceLocation)
        #expect(test.waitForStatistics { $0.requestsRejected == rejections }, sourceLocation: sourceLocation)
        #expect(
            test.logs.all.filter { $0.contains("rejected") && $0.contains(": \(status) ") }.count >= 1,
            sourceLocation: sourceLocation)
    }

    @Test("Identical Content-Length duplicates are read as one (RFC 9112 §6.3)")
    func identicalContentLengths() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5, 5\r\n\r\nhello")
            #expect(try client.readResponse().bodyText == "hello")
        }
    }

    // MARK: timeouts and load

    @Test("A slowloris head is cut at headerTimeout while another client is served (RFC 9112 §9.5)")
    func slowloris() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.headerTimeout = 0.5 })
            defer { test.server.shutdown(timeout: 1) }
            // The other client's first request goes at once: a new connection has headerTimeout
            // to send a head too, and a busy machine could hold this thread longer than that.
            let normal = try RawHTTPClient(port: test.port)
            try normal.send("GET /n HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try normal.readResponse().bodyText == "/n")
            let slow = try RawHTTPClient(port: test.port)
            let head = bytes("GET / HTTP/1.1\r\nHost: a\r\nX-Slow: " + String(repeating: "z", count: 400))
            var sent = 0
            var served = 0
            var cut = false
            for byte in head {
                // One byte now and then keeps the connection busy but the head never completes.
                if (try? slow.send([byte])) == nil || slow.waitForClose(within: 0.02) {
                    cut = true
                    break
                }
                sent += 1
                try normal.send("GET /n HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try normal.readResponse().bodyText == "/n")
                served += 1
                usleep(20_000)
            }
            #expect(cut, "the slow head was never cut")
            #expect(sent < head.count)
            #expect(served > 0)
            #expect(test.handler.targets.allSatisfy { $0 == "/n" })
        }
    }

    @Test("An idle keep-alive connection is closed after idleTimeout (RFC 9112 §9.5)")
    func idleTimeout() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.idleTimeout = 0.3 })
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            #expect(client.waitForClose())
            #expect(client.buffer.isEmpty)
        }
    }

    @Test("A body that stops arriving is cut at bodyTimeout (RFC 9112 §9.5)")
    func bodyTimeout() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.bodyTimeout = 0.3 })
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
            let response = try client.readResponse()
            #expect(response.status == 408)
            #expect(response.bodyText.contains("no body byte arrived for 0.3 s"), "\(response.bodyText)")
            #expect(client.waitForClose())
            #expect(test.handler.requests.isEmpty)
        }
    }

    @Test(
        "A body that trickles in slower than bodyMinimumRate is cut once bodyTimeout has passed, though bytes keep coming (RFC 9112 §9.5)"
    )
    func bodyTrickleIsCut() async throws {
        try await offPool {
            let test = try TestServer(configure: {
                $0.bodyTimeout = 0.5
                $0.bodyMinimumRate = 1_000
            })
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n")
            // A byte every 50 ms, each well within bodyTimeout of the one before: 100 bytes take 5 s.
            let started = MonotonicClock.seconds()
            var answer: [UInt8] = []
            for _ in 0..<100 where answer.isEmpty {
                try? client.send("x")
                answer = client.receiveAvailable(within: 0.05)
            }
            let waited = MonotonicClock.seconds() - started
            // Cut before the last byte could arrive (a 200 would follow it).
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 408 "), "after \(waited) s")
            #expect(test.handler.requests.isEmpty)
            #expect(test.logs.all.contains { $0.contains("slower than 1000 bytes a second") }, "\(test.logs.all)")
        }
    }

    @Test(
        "HTTP/2: a stream's body trickled in slower than bodyMinimumRate is answered 408 once bodyTimeout has passed (RFC 9113 §8.1)"
    )
    func http2BodyTrickleIsCut() async throws {
        try await offPool {
            let test = try TestServer(configure: {
                $0.http2 = true
                $0.bodyTimeout = 0.5
                $0.bodyMinimumRate = 1_000
            })
            defer { test.server.shutdown(timeout: 1) }
            typealias Frames = HTTP2SpentWindowTests
            let client = try RawHTTPClient(port: test.port, timeout: 10)
            let block =
                Frames.literal(":method", "POST") + Frames.literal(":scheme", "http") + Frames.literal(":path", "/up")
                + Frames.literal(":authority", "example.test") + Frames.literal("content-length", "100")
            // The preface, empty SETTINGS, and the request's HEADERS without END_STREAM.
            try client.send(
                Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + Frames.frame(4, 0, 0, [])
                    + Frames.frame(1, 0x04, 1, block)
            )
            // A byte of DATA every 50 ms: 100 bytes take 5 s.
            func answered() -> Bool { Frames.frames(client.buffer).contains { $0.type == 1 && $0.stream == 1 } }
            for _ in 0..<100 where !answered() {
                try client.send(Frames.frame(0, 0, 1, [0x78]))
                _ = client.waitForClose(within: 0.05)
            }
            #expect(answered(), "no answer before the body's last byte")
            #expect(test.handler.requests.isEmpty)
            // The answer's text, DATA on the stream: the server's own 408 and why.
            _ = client.waitForClose(within: 0.5)
            let text = Frames.frames(client.buffer).filter { $0.type == 0 && $0.stream == 1 }.flatMap(\.payload)
            let answer = String(decoding: text, as: UTF8.self)
            #expect(answer.hasPrefix("408 "), "\(answer)")
            #expect(answer.contains("slower than 1000 bytes a second"), "\(answer)")
        }
    }

    @Test("A body that keeps bodyMinimumRate is read whole however long it takes past bodyTimeout (RFC 9112 §9.5)")
    func steadyBodyIsRead() async throws {
        try await offPool {
            let test = try TestServer(configure: {
                $0.bodyTimeout = 0.3
                $0.bodyMinimumRate = 1_000
            })
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 20000\r\n\r\n")
            // 2,000 bytes every 100 ms: 1 s in all, past bodyTimeout, at 20 times the rate asked.
            for _ in 0..<10 {
                try client.send([UInt8](repeating: UInt8(ascii: "y"), count: 2_000))
                usleep(100_000)
            }
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.body.count == 20_000)
        }
    }

    @Test("200 idle connections do not stop a normal client (RFC 9112 §9.4)")
    func manyIdleConnections() async throws {
        try await offPool {
            let test = try TestServer()
            defer { test.server.shutdown(timeout: 1) }
            let idle = try (0..<200).map { _ in try RawHTTPClient(port: test.port) }
            #expect(test.waitForStatistics { $0.connectionsOpen == 200 })
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET /through HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().bodyText == "/through")
            #expect(test.server.statistics.connectionsOpen == 201)
            withExtendedLifetime(idle) {}
        }
    }

    @Test(
        "Beyond maxConnections new connections are refused with 503, and accepted again once one closes (RFC 9110 §15.6.4)"
    )
    func connectionCap() async throws {
        try await offPool {
            let test = try TestServer(configure: { $0.maxConnections = 3 })
            defer { test.server.shutdown(timeout: 1) }
            var clients = try (0..<3).map { _ in try RawHTTPClient(port: test.port) }
            for client in clients {
                try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try client.readResponse().status == 200)
            }
            let extra = try RawHTTPClient(port: test.port)
            // A 503 when it arrives before the close, or only the close.
            let answer = extra.receiveAvailable(within: 5)
            #expect(extra.peerClosed)
            if let end = answer.firstRange(of: bytes("\r\n\r\n")) {
                let head = try RawHTTPClient.parseHead(Array(answer[..<end.upperBound]))
                #expect(head.status == 503)
                #expect(head.field("Content-Length") == "\(answer.count - end.upperBound)")
                #expect(head.field("Connection") == "close")
            } else {
                #expect(answer.isEmpty, "\(String(decoding: answer, as: UTF8.self))")
            }
            #expect(test.server.statistics.connectionsRefused == 1)
            #expect(test.logs.all.contains { $0.contains("refused 1 connection") })

            clients.removeFirst().close()
            #expect(test.waitForStatistics { $0.connectionsOpen == 2 })
            let again = try RawHTTPClient(port: test.port)
            try again.send("GET /again HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try again.readResponse().bodyText == "/again")
            #expect(test.server.statistics.connectionsAccepted == 4)
        }
    }

    // MARK: streaming, back-pressure, shutdown

    @Test("Shutdown closes idle connections, lets an in-flight streamed response finish, then returns (RFC 9112 §9.6)")
    func shutdownFinishesInFlight() async throws {
        try await offPool {
            let release = DispatchSemaphore(value: 0)
            let test = try TestServer { request, responder in
                guard request.target == "/stream" else { return TestServer.echo(request, responder) }
                responder.start(ok, framing: .streamed)
                responder.write(bytes("first"))
                onNewThread {
                    _ = wait(release)
                    responder.write(bytes("second"))
                    responder.finish()
                }
            }
            let streaming = try RawHTTPClient(port: test.port)
            try streaming.send("GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")
            var response = try streaming.readHead()
            #expect(try streaming.receive(count: 10) == bytes("5\r\nfirst\r\n"))
            let idle = try RawHTTPClient(port: test.port)
            try idle.send("GET /idle HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try idle.readResponse().status == 200)

            let stopped = DispatchSemaphore(value: 0)
            onNewThread {
                test.server.shutdown(timeout: 30)
                stopped.signal()
            }
            #expect(idle.waitForClose(), "an idle keep-alive connection stays open during shutdown")
            #expect(!wait(stopped, seconds: 0.2), "shutdown returned with a response in flight")
            release.signal()
            try streaming.readBody(into: &response)
            #expect(response.rawBody == bytes("6\r\nsecond\r\n0\r\n\r\n"))
            #expect(streaming.waitForClose())
            #expect(wait(stopped))
            #expect(test.server.statistics.connectionsOpen == 0)
        }
    }

    @Test("Shutdown with a zero timeout cuts what is in flight and returns")
    func shutdownCutsAtTimeout() async throws {
        try await offPool {
            let test = try TestServer { _, responder in responder.start(ok, framing: .length(100)) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            _ = try client.readHead()
            test.server.shutdown(timeout: 0)
            #expect(client.waitForClose())
            #expect(test.server.statistics.connectionsOpen == 0)
        }
    }

    @Test(
        "An 8 MiB body written from another thread reaches a slow reader intact; the writer is held back (RFC 9112 §6.2)"
    )
    func backPressure() async throws {
        try await offPool {
            let total = 8 << 20
            let block = 64 * 1024
            let written = Locked(0)
            let writerDone = DispatchSemaphore(value: 0)
            let allAccepted = Locked(false)
            let pattern: @Sendable (Int) -> UInt8 = { UInt8(truncatingIfNeeded: $0 ^ ($0 >> 9)) }
            let test = try TestServer { request, responder in
                guard request.target == "/big" else { return TestServer.echo(request, responder) }
                responder.start(ok, framing: .length(Int64(total)))
                onNewThread {
                    var accepted = true
                    for offset in stride(from: 0, to: total, by: block) {
                        let bytes = Fixtures.bytes(count: block) { pattern(offset + $0) }
                        guard responder.write(bytes) else {
                            accepted = false
                            break
                        }
                        written.withLock { $0 += block }
                    }
                    responder.finish()
                    allAccepted.withLock { $0 = accepted }
                    writerDone.signal()
                }
            }
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port, timeout: 10, receiveBuffer: 64 * 1024)
            try client.send("GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
            let head = try client.readHead()
            #expect(head.field("Content-Length") == "\(total)")
            var received = try client.receive(count: 256 * 1024)
            // The client pauses: the writer must stall well short of the end (1 MiB queue plus
            // socket buffers), not pile all 8 MiB up in memory.
            var last = -1
            for _ in 0..<60 where written.withLock({ $0 }) != last {
                last = written.withLock { $0 }
                usleep(100_000)
            }
            #expect(written.withLock { $0 } < total, "the writer was never held back")
            while received.count < total {
                received += try client.receive(count: min(512 * 1024, total - received.count))
                usleep(1_000)
            }
            // The connection carries on with the next request.
            try client.send("GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().bodyText == "/next")
            #expect(received.count == total)
            #expect(received == Fixtures.bytes(count: total, pattern))
            #expect(wait(writerDone))
            #expect(allAccepted.withLock { $0 })
        }
    }

    @Test("Once the client is gone write returns false and isClientGone is true")
    func clientGone() async throws {
        try await offPool {
            let result = Locked<(Bool, Bool)?>(nil)
            let done = DispatchSemaphore(value: 0)
            let test = try TestServer { _, responder in
                responder.start(ok, framing: .streamed)
                onNewThread {
                    let block = [UInt8](repeating: 0x61, count: 64 * 1024)
                    var accepted = true
                    for _ in 0..<20_000 {
                        accepted = responder.write(block)
                        if !accepted { break }
                    }
                    result.withLock { $0 = (accepted, responder.isClientGone) }
                    done.signal()
                }
            }
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            _ = try client.readHead()
            client.close()
            #expect(wait(done))
            #expect(result.withLock { $0.map { $0.0 } } == false)
            #expect(result.withLock { $0.map { $0.1 } } == true)
            #expect(test.waitForStatistics { $0.connectionsOpen == 0 })
        }
    }

    @Test("abort() cuts the body: the client sees fewer bytes than announced, then the close")
    func abortCutsTheBody() async throws {
        try await offPool {
            let test = try TestServer { _, responder in
                responder.start(ok, framing: .length(10))
                responder.write(bytes("abc"))
                onNewThread { responder.abort() }
            }
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(throws: RawHTTPClient.ClientError.self) { try client.readResponse() }
            #expect(client.peerClosed)
        }
    }

    @Test("A responder released without an answer closes its connection")
    func unansweredRequest() async throws {
        try await offPool {
            let test = try TestServer { _, _ in }
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(client.waitForClose())
            #expect(client.buffer.isEmpty)
            #expect(test.logs.all.contains { $0.contains("never answered") })
        }
    }

    // MARK: CONNECT

    @Test("A CONNECT tunnel relays both ways, early bytes first, and half-closes (RFC 9110 §9.3.6)")
    func tunnel() async throws {
        try await offPool {
            // Made before the connection, as in contentLengthBody.
            let large = Fixtures.bytes(count: 300_000) { UInt8(truncatingIfNeeded: $0 &* 13) }
            let echo = try EchoServer()
            let test = try TestServer { request, responder in
                guard request.method == "CONNECT" else { return TestServer.echo(request, responder) }
                responder.tunnel(to: echo.connect())
            }
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send(
                "CONNECT 127.0.0.1:\(echo.port) HTTP/1.1\r\nHost: 127.0.0.1:\(echo.port)\r\n\r\nearly bytes")
            #expect(try client.receive(count: 39) == bytes("HTTP/1.1 200 Connection Established\r\n\r\n"))
            #expect(try client.receive(count: 11) == bytes("early bytes"))
            try client.send("ping")
            #expect(try client.receive(count: 4) == bytes("ping"))
            try client.send(large)
            #expect(try client.receive(count: large.count) == large)
            // The client ends its stream: the echo side sees EOF, ends too, and so does the tunnel.
            client.shutdownWrite()
            #expect(try client.readUntilClosed().isEmpty)
            #expect(echo.finished())
            #expect(test.waitForStatistics { $0.connectionsOpen == 0 })
            #expect(test.handler.requests.first?.target == "127.0.0.1:\(echo.port)")
        }
    }

    @Test(
        "A tunnel's upstream that sent its last bytes and its end together: the client gets both at once, not at the idle timeout; an end right behind bytes has no edge of its own (RFC 9110 §9.3.6)"
    )
    func tunnelUpstreamEndsWithItsLastBytes() async throws {
        try await offPool {
            let upstream = Locked<Int32>(-1)
            let (inHandler, release) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            let test = try TestServer(
                handler: { request, responder in
                    guard request.method == "CONNECT" else {
                        // Holds the loop's thread (one loop): what arrives meanwhile is reported
                        // by the loop's next epoll_wait, together.
                        inHandler.signal()
                        release.wait()
                        return TestServer.echo(request, responder)
                    }
                    var pair: [Int32] = [-1, -1]
                    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else {
                        return responder.abort()
                    }
                    upstream.withLock { $0 = pair[1] }
                    responder.tunnel(to: pair[0])
                }, configure: { $0.idleTimeout = 600 })
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
            #expect(try client.receive(count: 39) == bytes("HTTP/1.1 200 Connection Established\r\n\r\n"))
            let end = upstream.withLock { $0 }
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(end, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            // A byte through the tunnel: the relay is running, its first events taken.
            try client.send("x")
            var byte: UInt8 = 0
            #expect(recv(end, &byte, 1, 0) == 1 && byte == UInt8(ascii: "x"))
            // While the loop is held, the upstream sends its last bytes and closes.
            let other = try RawHTTPClient(port: test.port)
            try other.send("GET /held HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(inHandler.wait(timeout: .now() + 5) == .success)
            _ = Array("banner".utf8).withUnsafeBytes { send(end, $0.baseAddress, $0.count, 0) }
            Glibc.close(end)
            release.signal()
            #expect(try other.readResponse().status == 200)
            // The upstream's end reaches the client as a half-close within the client's 5 s.
            #expect(try client.readUntilClosed() == bytes("banner"))
            client.shutdownWrite()
            other.close()
            #expect(test.waitForStatistics { $0.connectionsOpen == 0 })
        }
    }

    @Test(
        "A client that sent its last bytes and its end together while its CONNECT was being answered: the upstream gets both, the tunnel ends, not at the idle timeout (RFC 9110 §9.3.6)"
    )
    func tunnelClientEndsWithItsLastBytes() async throws {
        try await offPool {
            let echo = try EchoServer()
            let (connectSeen, proceed) = (DispatchSemaphore(value: 0), DispatchSemaphore(value: 0))
            let test = try TestServer(
                handler: { _, responder in
                    onNewThread {
                        connectSeen.signal()
                        proceed.wait()
                        responder.tunnel(to: echo.connect())
                    }
                }, configure: { $0.idleTimeout = 600 })
            defer { test.server.shutdown(timeout: 1) }
            let client = try RawHTTPClient(port: test.port)
            try client.send("CONNECT 127.0.0.1:\(echo.port) HTTP/1.1\r\nHost: 127.0.0.1:\(echo.port)\r\n\r\n")
            #expect(connectSeen.wait(timeout: .now() + 5) == .success)
            try client.send("last bytes")
            client.shutdownWrite()
            // The loop takes the event for both (a read edge with EPOLLRDHUP) while it answers
            // the CONNECT, so the relay's first read finds the bytes and the end behind them.
            usleep(200_000)
            proceed.signal()
            #expect(try client.receive(count: 39) == bytes("HTTP/1.1 200 Connection Established\r\n\r\n"))
            #expect(try client.readUntilClosed() == bytes("last bytes"))
            #expect(echo.finished())
            #expect(test.waitForStatistics { $0.connectionsOpen == 0 })
        }
    }
}

// Helpers, nested so that their names cannot clash with other test files'.
extension HTTPServerTests {
    /// A handler whose behaviour each test sets; it records every request it is given.
    final class RecordingHandler: RequestHandler {
        private let received = Locked<[ServerRequest]>([])
        private let action: @Sendable (ServerRequest, Responder) -> Void

        init(_ action: @escaping @Sendable (ServerRequest, Responder) -> Void) { self.action = action }

        func handle(_ request: ServerRequest, _ responder: Responder) {
            received.withLock { $0.append(request) }
            action(request, responder)
        }

        var requests: [ServerRequest] { received.withLock { $0 } }
        var targets: [String] { requests.map(\.target) }
    }

    /// Log lines a server wrote.
    final class LogLines: Sendable {
        private let lines = Locked<[String]>([])
        var all: [String] { lines.withLock { $0 } }
        var sink: @Sendable (String) -> Void { { line in self.lines.withLock { $0.append(line) } } }
    }

    /// A started server on 127.0.0.1, an ephemeral port, with timeouts short enough for tests.
    struct TestServer {
        let server: HTTPServer
        let handler: RecordingHandler
        let logs = LogLines()
        var port: UInt16 { server.port }

        init(
            handler action: @escaping @Sendable (ServerRequest, Responder) -> Void = TestServer.echo,
            configure: (inout HTTPServer.Configuration) -> Void = { _ in }
        ) throws {
            var configuration = HTTPServer.Configuration()
            configuration.headerTimeout = 5
            configuration.idleTimeout = 10
            configuration.bodyTimeout = 5
            configure(&configuration)
            handler = RecordingHandler(action)
            server = try HTTPServer(configuration: configuration, handler: handler, log: logs.sink)
            server.start()
        }

        /// Answers 200 with the request's body, or its target when the body is empty.
        static let echo: @Sendable (ServerRequest, Responder) -> Void = { request, responder in
            responder.respond(
                ServerResponseHead(status: 200, fields: ["Content-Type": "text/plain"]),
                body: request.body.isEmpty ? Array(request.target.utf8) : request.body)
        }

        /// Waits (up to 5 s) until `condition` holds for the server's statistics.
        func waitForStatistics(_ condition: (HTTPServer.Statistics) -> Bool) -> Bool {
            for _ in 0..<500 {
                if condition(server.statistics) { return true }
                usleep(10_000)
            }
            return condition(server.statistics)
        }
    }

    /// A request the server must refuse, with the status it must answer.
    struct MalformedRequest: Sendable, CustomTestStringConvertible {
        var name: String
        var bytes: [UInt8]
        var status: Int

        init(_ name: String, _ text: String, _ status: Int) {
            self.name = name
            self.bytes = Array(text.utf8)
            self.status = status
        }

        init(_ name: String, bytes: [UInt8], _ status: Int) {
            self.name = name
            self.bytes = bytes
            self.status = status
        }

        var testDescription: String { "\(name) → \(status)" }
    }

    /// A one-connection TCP echo server on 127.0.0.1: echoes until EOF, then closes.
    final class EchoServer: Sendable {
        let port: UInt16
        private let listener: Int32
        private let done = DispatchSemaphore(value: 0)

        init() throws {
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            self.listener = listener
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(listener, $0, length) == 0 && listen(listener, 4) == 0
                        && getsockname(listener, $0, &length) == 0
                }
            }
            guard bound else { throw RawHTTPClient.ClientError.connect(errno) }
            port = UInt16(bigEndian: address.sin_port)
            let done = done
            onNewThread {
                let fd = accept(listener, nil, nil)
                if fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while fd >= 0 {
                    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    guard count > 0 else { break }
                    var offset = 0
                    while offset < count {
                        let sent = buffer.withUnsafeBytes {
                            send(fd, $0.baseAddress! + offset, count - offset, Int32(MSG_NOSIGNAL))
                        }
                        guard sent > 0 else { break }
                        offset += sent
                    }
                }
                if fd >= 0 { close(fd) }
                done.signal()
            }
        }

        deinit { close(listener) }

        /// A new connected socket to the echo server.
        func connect() -> Int32 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = in_addr(s_addr: UInt32(0x7F00_0001).bigEndian)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            return fd
        }

        /// Whether the echo side saw EOF and closed (waits up to 10 s).
        func finished() -> Bool { done.wait(timeout: .now() + 10) == .success }
    }
}
#endif
