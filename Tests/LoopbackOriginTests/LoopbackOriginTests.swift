import CacheSystem
import CacheTestSupport
import Foundation
import Testing

@testable import LoopbackOrigin

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@Suite("LoopbackOrigin", .timeLimit(.minutes(10)))
struct LoopbackOriginTests {
    @Test func routeAnswersAndRecordsThePost() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/items") { request in
                .init(
                    status: 201,
                    headers: [("Content-Type", "text/plain"), ("X-Echo", request.header("x-test") ?? "-")],
                    body: "created \(request.body.count) bytes")
            }
            let session = Self.session()
            defer { session.finishTasksAndInvalidate() }

            var request = URLRequest(url: origin.url("/items?x=1&y=2"))
            request.httpMethod = "POST"
            request.setValue("hello", forHTTPHeaderField: "X-Test")
            request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data("payload-\u{e9}".utf8)
            let (data, response) = try await session.data(for: request)
            let http = try #require(response as? HTTPURLResponse)

            #expect(http.statusCode == 201)
            #expect(http.value(forHTTPHeaderField: "Content-Type") == "text/plain")
            #expect(http.value(forHTTPHeaderField: "X-Echo") == "hello")
            #expect(http.value(forHTTPHeaderField: "Content-Length") == "\(data.count)")
            let date = try #require(http.value(forHTTPHeaderField: "Date"))
            #expect(date.count == 29 && date.hasSuffix(" GMT"))
            #expect(String(decoding: data, as: UTF8.self) == "created 10 bytes")

            let recorded = try #require(origin.requests.only)
            #expect(recorded.method == "POST")
            #expect(recorded.target == "/items?x=1&y=2")
            #expect(recorded.path == "/items")
            #expect(recorded.header("X-TEST") == "hello")
            #expect(recorded.headers.contains { $0.name.lowercased() == "x-test" && $0.value == "hello" })
            #expect(recorded.header("content-length") == "10")
            #expect(recorded.body == Array("payload-\u{e9}".utf8))
            #expect(origin.count("/items") == 1)
            #expect(origin.requests(to: "/items").count == 1)
        }
    }

    @Test func unknownPathIsNotFoundAndTheDefaultCanBeReplaced() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let session = Self.session()
            defer { session.finishTasksAndInvalidate() }

            let (_, missing) = try await session.data(from: origin.url("/nowhere"))
            #expect((missing as? HTTPURLResponse)?.statusCode == 404)
            #expect(origin.count("/nowhere") == 1)

            origin.setDefault { _ in .init(status: 410, body: "gone") }
            let (data, gone) = try await session.data(from: origin.url("/elsewhere"))
            #expect((gone as? HTTPURLResponse)?.statusCode == 410)
            #expect(data == Data("gone".utf8))
        }
    }

    @Test func keepAliveSessionRequestsAreAllRecorded() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/n") { request in .init(body: request.target) }
            let session = Self.session()
            defer { session.finishTasksAndInvalidate() }

            for index in 0..<5 {
                let (data, _) = try await session.data(from: origin.url("/n?i=\(index)"))
                #expect(String(decoding: data, as: UTF8.self) == "/n?i=\(index)")
            }
            #expect(origin.requests.map(\.target) == (0..<5).map { "/n?i=\($0)" })
            #expect(origin.count("/n") == 5)
            origin.clearRecords()
            #expect(origin.requests.isEmpty)
        }
    }

    @Test func oneRawConnectionCarriesSeveralRequests() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/a") { _ in .init(body: "first") }
            origin.route("/b") { _ in .init(status: 304, headers: [("ETag", "\"x\"")], body: "never sent") }
            let client = try RawClient(port: origin.port)

            // Two pipelined requests, then a HEAD: three responses on one connection, none with a stray body.
            client.transmit("GET /a HTTP/1.1\r\nHost: t\r\n\r\nGET /b HTTP/1.1\r\nHost: t\r\n\r\n")
            let first = try #require(client.readResponse())
            #expect(first.head.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(first.body == "first")
            let second = try #require(client.readResponse())
            #expect(second.head.hasPrefix("HTTP/1.1 304 Not Modified\r\n"))
            #expect(!second.head.lowercased().contains("content-length"))
            client.transmit("HEAD /a HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            let third = try #require(client.readResponse(expectBody: false))
            #expect(third.head.contains("Content-Length: 5\r\n"))
            #expect(third.head.contains("Connection: close\r\n"))
            #expect(client.readToEnd().isEmpty)
            #expect(origin.requests.map(\.method) == ["GET", "GET", "HEAD"])
        }
    }

    @Test func http10ClosesUnlessTheClientAsksForKeepAlive() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let client = try RawClient(port: origin.port)
            client.transmit("GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            let kept = try #require(client.readResponse())
            #expect(kept.head.contains("Connection: keep-alive\r\n"))
            client.transmit("GET /k HTTP/1.0\r\n\r\n")
            let closing = try #require(client.readResponse())
            #expect(closing.head.contains("Connection: close\r\n"))
            #expect(client.readToEnd().isEmpty)
            #expect(origin.count("/k") == 2)
        }
    }

    @Test func expectContinueGetsAnInterimResponseBeforeTheBody() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/upload") { request in .init(body: request.body) }
            let client = try RawClient(port: origin.port)
            client.transmit("PUT /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
            let interim = try #require(client.readResponse(expectBody: false))
            #expect(interim.head == "HTTP/1.1 100 Continue\r\n\r\n")
            client.transmit("data")
            #expect(client.readResponse()?.body == "data")
        }
    }

    @Test func delayedAnswerWaitsAndStopCutsALongDelayShort() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/slow") { _ in .init(body: "late", delay: 0.1) }
            origin.route("/stuck") { _ in .init(body: "never", delay: 60) }
            let clock = ContinuousClock()
            let client = try RawClient(port: origin.port)
            let start = clock.now
            client.transmit("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(client.readResponse()?.body == "late")
            #expect(clock.now - start >= .milliseconds(100))

            client.transmit("GET /stuck HTTP/1.1\r\nHost: t\r\n\r\n")
            while origin.count("/stuck") == 0 { try await Task.sleep(for: .milliseconds(5)) }
            let stopping = clock.now
            origin.stop()
            #expect(client.readToEnd().isEmpty)  // the connection is shut down; no answer is sent
            #expect(clock.now - stopping < .seconds(5))
        }
    }

    @Test func chunkedRequestBodyIsDecoded() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let client = try RawClient(port: origin.port)
            client.transmit(
                "PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: y\r\n\r\n")
            let response = try #require(client.readResponse())
            #expect(response.head.hasPrefix("HTTP/1.1 404 Not Found\r\n"))
            #expect(origin.requests.first?.body == Array("hello, world".utf8))
        }
    }

    @Test func stoppedOriginRefusesAndRestartServesOnTheSamePort() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/r") { _ in .init(body: "up") }
            let port = origin.port
            let session = Self.session()
            defer { session.finishTasksAndInvalidate() }

            _ = try await session.data(from: origin.url("/r"))
            origin.stop()
            origin.stop()  // idempotent
            #expect(!origin.isRunning)
            await #expect(throws: URLError.self) { _ = try await session.data(from: origin.url("/r")) }
            #expect(throws: (any Error).self) { _ = try RawClient(port: port) }

            try origin.restart()
            #expect(origin.isRunning)
            #expect(origin.port == port)
            let (data, _) = try await session.data(from: origin.url("/r"))
            #expect(data == Data("up".utf8))
            #expect(origin.count("/r") == 2)
        }
    }

    @Test func cutAfterBodyBytesNeverDeliversTheFullBody() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let body = [UInt8](repeating: 0x61, count: 10_000)
            origin.route("/cut") { _ in .init(body: body, cutAfterBodyBytes: 1_000) }
            let session = Self.session()
            defer { session.finishTasksAndInvalidate() }

            do {
                let (data, _) = try await session.data(from: origin.url("/cut"))
                #expect(data.count < body.count)
            } catch {
                #expect(error is URLError)
            }

            let client = try RawClient(port: origin.port)
            client.transmit("GET /cut HTTP/1.1\r\nHost: t\r\n\r\n")
            let raw = client.readToEnd()
            let headEnd = try #require(raw.firstRange(of: Array("\r\n\r\n".utf8)))
            #expect(String(decoding: raw[..<headEnd.lowerBound], as: UTF8.self).contains("Content-Length: 10000"))
            #expect(raw.count - headEnd.upperBound == 1_000)
        }
    }

    @Test func chunkedResponseIsDecodedByURLSession() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let body = (0..<3000).map { UInt8($0 % 251) }
            origin.route("/chunked") { _ in
                .init(headers: [("Content-Type", "application/octet-stream")], body: body, chunked: true)
            }
            let session = Self.session()
            defer { session.finishTasksAndInvalidate() }

            let (data, response) = try await session.data(from: origin.url("/chunked"))
            #expect(Array(data) == body)
            #expect((response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Content-Length") == nil)

            let client = try RawClient(port: origin.port)
            client.transmit("GET /chunked HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            let raw = client.readToEnd()
            let text = String(decoding: raw, as: UTF8.self)
            #expect(text.contains("Transfer-Encoding: chunked\r\n"))
            #expect(text.contains("\r\n\r\nbb8\r\n"))  // one chunk of 3000 bytes
            #expect(raw.suffix(7) == Array("\r\n0\r\n\r\n".utf8))
        }
    }

    /// Input the origin must answer with an error status and a close, named briefly for test output.
    struct MalformedInput: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var text: String
        var status: Int
    }

    static let malformedInputs = [
        MalformedInput(testDescription: "garbage line", text: "GARBAGE\r\n\r\n", status: 400),
        MalformedInput(
            testDescription: "space in field name", text: "GET /x HTTP/1.1\r\nBad Name: v\r\n\r\n", status: 400),
        MalformedInput(
            testDescription: "conflicting Content-Length",
            text: "GET /x HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc", status: 400),
        MalformedInput(
            testDescription: "bad chunk size", text: "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            status: 400),
        MalformedInput(testDescription: "HTTP/2.0 request line", text: "GET /x HTTP/2.0\r\n\r\n", status: 505),
        MalformedInput(
            testDescription: "70 000-byte field",
            text: "GET /x HTTP/1.1\r\nX-Big: " + String(repeating: "a", count: 70_000) + "\r\n\r\n", status: 431),
    ]

    @Test(arguments: malformedInputs)
    func malformedInputIsRejectedAndTheOriginKeepsServing(input: MalformedInput) async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let client = try RawClient(port: origin.port)
            client.transmit(input.text)
            let reply = String(decoding: client.readToEnd(), as: UTF8.self)
            #expect(reply.hasPrefix("HTTP/1.1 \(input.status) "))
            #expect(reply.contains("Connection: close\r\n"))
            #expect(origin.requests.isEmpty)

            let session = Self.session()
            defer { session.finishTasksAndInvalidate() }
            let (_, response) = try await session.data(from: origin.url("/after"))
            #expect((response as? HTTPURLResponse)?.statusCode == 404)
            #expect(origin.count("/after") == 1)
        }
    }

    @Test func randomBytesNeverStopTheOrigin() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            var generator = SplitMix64(seed: 0x5EED)
            let alphabet = Array("GET /HTTP1.0\r\n:;, \tchunkedContent-LengthTransfer-Encoding0123456789abcdef\0".utf8)
            for _ in 0..<60 {
                let client = try RawClient(port: origin.port)
                let length = Int(generator.next() % 300)
                // Mostly HTTP-ish bytes, one in four fully random.
                let bytes = (0..<length).map { _ in
                    generator.next() % 4 == 0
                        ? UInt8(truncatingIfNeeded: generator.next())
                        : alphabet[Int(generator.next() % UInt64(alphabet.count))]
                }
                client.transmit(bytes, thenCloseWriting: true)
                _ = client.readToEnd()
            }
            let client = try RawClient(port: origin.port)
            client.transmit("GET /still-here HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(client.readResponse()?.head.hasPrefix("HTTP/1.1 404 ") == true)
        }
    }

    @Test func clientThatVanishesMidRequestDoesNotStopTheOrigin() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/big") { _ in .init(body: [UInt8](repeating: 1, count: 4 << 20), delay: 0.02) }
            do {
                let client = try RawClient(port: origin.port)
                client.transmit("POST /x HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly-part")
                let leaver = try RawClient(port: origin.port)
                leaver.transmit("GET /big HTTP/1.1\r\n\r\n")  // closes before the (large) answer is written
            }
            let client = try RawClient(port: origin.port)
            client.transmit("GET /ok HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(client.readResponse()?.head.hasPrefix("HTTP/1.1 404 ") == true)
        }
    }

    @Test func deinitStopsTheOrigin() async throws {
        try await offPool {
            var origin: LoopbackOrigin? = try LoopbackOrigin()
            let port = try #require(origin?.port)
            let client = try RawClient(port: port)  // an idle keep-alive connection must not keep it alive
            client.transmit("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(client.readResponse() != nil)
            origin = nil
            // Its connections are closed. (That the port refuses connections cannot be checked:
            // a test running alongside may bind the same port as soon as it is free.)
            #expect(client.readToEnd().isEmpty)
        }
    }

    @Test func bindingATakenPortThrowsAClearError() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let error = try #require(throws: LoopbackOrigin.SocketError.self) {
                _ = try LoopbackOrigin(port: origin.port)
            }
            #expect(error.description.contains("bind(127.0.0.1:\(origin.port))"))
            #expect(error.code == EADDRINUSE)
        }
    }

    private static func session() -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.timeoutIntervalForRequest = 5
        return URLSession(configuration: configuration)
    }
}

extension Array {
    fileprivate var only: Element? { count == 1 ? first : nil }
}

/// A small seeded generator, so the garbage test sends the same bytes on every run.
private struct SplitMix64 {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A blocking TCP client for sending bytes URLSession never would.
private final class RawClient {
    struct SocketFailure: Error { var code: Int32 }

    private let fd: Int32
    private var pending: [UInt8] = []

    init(port: UInt16) throws {
        #if canImport(Glibc)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        fd = socket(AF_INET, SOCK_STREAM, 0)
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        guard fd >= 0 else { throw SocketFailure(code: errno) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = SocketAddress(ipv4: POSIX.localhost, port: port).withSockaddr { connect(fd, $0, $1) }
        // No close here: a class whose init throws after setting every property still runs deinit,
        // and closing twice could close a descriptor another test has reused meanwhile.
        guard connected == 0 else { throw SocketFailure(code: errno) }
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    func transmit(_ text: String) {
        transmit(Array(text.utf8))
    }

    /// Sends `bytes`, stopping quietly if the server has closed; optionally half-closes afterwards.
    func transmit(_ bytes: [UInt8], thenCloseWriting: Bool = false) {
        #if canImport(Glibc)
        let flags = Int32(MSG_NOSIGNAL)
        #else
        let flags: Int32 = 0
        #endif
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, flags) }
            guard sent > 0 else { return }
            offset += sent
        }
        if thenCloseWriting {
            #if canImport(Glibc)
            shutdown(fd, Int32(SHUT_WR))
            #else
            shutdown(fd, SHUT_WR)
            #endif
        }
    }

    /// Reads one response framed by Content-Length (or none when `expectBody` is false or there is no
    /// length); nil when the connection ends first.
    func readResponse(expectBody: Bool = true) -> (head: String, body: String)? {
        let separator = Array("\r\n\r\n".utf8)
        while pending.firstRange(of: separator) == nil {
            guard receiveMore() else { return nil }
        }
        guard let end = pending.firstRange(of: separator) else { return nil }
        let head = String(decoding: pending[..<end.upperBound], as: UTF8.self)
        pending.removeSubrange(..<end.upperBound)
        var length = 0
        let lengthLine = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
        if expectBody, let lengthLine {
            length = Int(lengthLine.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        while pending.count < length {
            guard receiveMore() else { return nil }
        }
        let body = String(decoding: pending[..<length], as: UTF8.self)
        pending.removeSubrange(..<length)
        return (head, body)
    }

    /// Everything until the server closes (or 2 s pass).
    func readToEnd() -> [UInt8] {
        while receiveMore() {}
        defer { pending.removeAll() }
        return pending
    }

    private func receiveMore() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        let received = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard received > 0 else { return false }
        pending += chunk[..<received]
        return true
    }
}
