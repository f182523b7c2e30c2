import CacheSystem
import CacheTLS
import CacheTestSupport
import LoopbackOrigin
import Testing

/// The loopback origins over HTTPS, met by a TLS client through the blocking layer: the same
/// routes, records and scripts as over HTTP, and the ways a TLS connection ends.
@Suite("TLS origins", .timeLimit(.minutes(5)))
struct TLSOriginTests {
    let certificates: TestCertificates
    let client: TLSClientContext

    init() throws {
        certificates = try TestCertificates.shared()
        client = try certificates.clientContext()
    }

    /// RFC 9110 §4.3.4: a valid chain, then a request and its response over the TLS origin,
    /// recorded as over HTTP; `Connection: close` ends it with close_notify (RFC 8446 §6.1).
    @Test func aRequestAndItsResponseOverTheTLSOrigin() async throws {
        try await offPool {
            let origin = try LoopbackOrigin(tls: certificates.serverContext(certificates.localhost))
            defer { origin.stop() }
            origin.route("/greeting") { request in
                .init(
                    headers: [("Cache-Control", "max-age=60")],
                    body: "hello \(String(decoding: request.body, as: UTF8.self))")
            }
            #expect(origin.baseURL == "https://127.0.0.1:\(origin.port)")
            let socket = try TLSClientSocket(port: origin.port, context: client)
            #expect(socket.tls.applicationProtocol == "http/1.1")
            #expect(
                socket.send(
                    "POST /greeting?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nworld"
                ))
            let (bytes, end) = socket.readToEnd()
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(text.contains("Cache-Control: max-age=60\r\n"))
            #expect(text.hasSuffix("\r\n\r\nhello world"))
            #expect(end == .closed)
            let recorded = try #require(origin.requests(to: "/greeting").first)
            #expect(recorded.target == "/greeting?x=1")
            #expect(recorded.body == Array("world".utf8))
        }
    }

    /// RFC 6066 §3: the origin presents the certificate for the name the client asks for.
    @Test func theOriginChoosesItsCertificateBySNI() async throws {
        try await offPool {
            let origin = try LoopbackOrigin(
                tls: certificates.serverContext(certificates.localhost, others: [certificates.second]))
            defer { origin.stop() }
            for host in ["sni.test", "localhost", "127.0.0.1"] {
                let socket = try TLSClientSocket(port: origin.port, host: host, context: client)
                #expect(socket.send("GET / HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n"))
                #expect(String(decoding: socket.readToEnd().bytes, as: UTF8.self).hasPrefix("HTTP/1.1 404 "))
            }
        }
    }

    /// A client that refuses the certificate sends no request: nothing is recorded.
    @Test func aRefusedCertificateRecordsNothing() async throws {
        try await offPool {
            let origin = try LoopbackOrigin(tls: certificates.serverContext(certificates.expired))
            defer { origin.stop() }
            #expect {
                _ = try TLSClientSocket(port: origin.port, context: client)
            } throws: { error in
                guard case .certificateExpired(let peer, _) = error as? TLSError else { return false }
                return peer == "127.0.0.1:\(origin.port)"
            }
            #expect(origin.requests.isEmpty)
        }
    }

    /// RFC 9112 §8, §9.8: a body cut short is dropped without close_notify, or, when the origin
    /// says so, closed with it; either way fewer bytes than Content-Length arrive.
    @Test(arguments: [false, true])
    func aCutBodyEndsWithOrWithoutCloseNotify(closeNotify: Bool) async throws {
        try await offPool {
            var response = LoopbackOrigin.Response(body: "0123456789", cutAfterBodyBytes: 5)
            response.cutWithCloseNotify = closeNotify
            let (bytes, end) = try fetch(response)
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(text.contains("Content-Length: 10\r\n"))
            #expect(text.hasSuffix("\r\n\r\n01234"))
            #expect(end == (closeNotify ? .closed : .closedWithoutNotify))
        }
    }

    /// RFC 9112 §6.3 item 8, §9.8: a close-delimited body is complete when close_notify ends
    /// it; the same bytes ended without close_notify are a truncation a client can tell.
    @Test(arguments: [false, true])
    func aCloseDelimitedBodyEndsWithCloseNotifyUnlessCut(cut: Bool) async throws {
        try await offPool {
            var response = LoopbackOrigin.Response(body: "the whole body", cutAfterBodyBytes: cut ? 14 : nil)
            response.closeDelimited = true
            let (bytes, end) = try fetch(response)
            let text = String(decoding: bytes, as: UTF8.self)
            #expect(!text.contains("Content-Length"))
            #expect(text.contains("Connection: close\r\n"))
            #expect(text.hasSuffix("\r\n\r\nthe whole body"))
            #expect(end == (cut ? .closedWithoutNotify : .closed))
        }
    }

    /// A large generated body crosses many TLS records and partial writes whole; chunked
    /// framing (RFC 9112 §7.1) over TLS ends with its last chunk.
    @Test(arguments: [false, true])
    func aLargeBodyArrivesWhole(chunked: Bool) async throws {
        try await offPool {
            let length = 1_000_000
            let (bytes, end) = try fetch(.init(generatedLength: Int64(length), seed: 7, chunked: chunked), close: true)
            #expect(end == .closed)
            let separator: [UInt8] = Array("\r\n\r\n".utf8)
            let headEnd = try #require(
                bytes.indices.first { bytes[$0...].starts(with: separator) }.map { $0 + separator.count })
            let expected = LoopbackOrigin.GeneratedBody.bytes(seed: 7, count: length)
            if chunked {
                #expect(bytes.count > headEnd + length)
                #expect(bytes.suffix(5) == Array("0\r\n\r\n".utf8))
            } else {
                #expect(bytes.count - headEnd == length)
                #expect(Array(bytes[headEnd...]) == expected, "the body arrived changed")
            }
        }
    }

    /// RFC 9112 §6.3: bytes after a complete response, in the same write or later, make the
    /// connection unusable for the next request: the idle check sees them.
    @Test func strayBytesAfterAResponseMakeTheConnectionNotIdle() async throws {
        try await offPool {
            let context = try certificates.serverContext(certificates.localhost)
            let responseA = PoisonedOrigin.response("A")
            for script in [PoisonedOrigin.secondResponseInSameWrite, PoisonedOrigin.lateStrayResponse] {
                let origin = try PoisonedOrigin(poisoned: script, tls: context)
                #expect(origin.url("/a").hasPrefix("https://127.0.0.1:"))
                let port = try #require(UInt16(origin.url("").split(separator: ":").last ?? ""))
                let socket = try TLSClientSocket(port: port, context: client)
                #expect(socket.send("GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
                #expect(socket.read(exactly: responseA.utf8.count) == responseA)
                #expect(socket.waitReadable(milliseconds: 5_000))
                #expect(!socket.tls.isIdle)
                #expect(origin.count("/a") == 1)
            }
        }
    }

    /// RFC 8446 §6.1: the raw origin's `.closeNotify` is a close; `.close` and `.reset` in
    /// the middle of a body are truncations.
    @Test(arguments: [RawOrigin.Step.closeNotify, .close, .reset])
    func theRawOriginEndsAConnectionAsScripted(ending: RawOrigin.Step) async throws {
        try await offPool {
            let origin = try RawOrigin(tls: certificates.serverContext(certificates.localhost)) { _ in
                [.send("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), .pause(0.05), ending]
            }
            defer { origin.stop() }
            let socket = try TLSClientSocket(port: origin.port, context: client)
            #expect(socket.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
            let (bytes, end) = socket.readToEnd()
            #expect(String(decoding: bytes, as: UTF8.self).hasSuffix("\r\n\r\nshort"))
            if case .closeNotify = ending {
                #expect(end == .closed)
            } else {
                #expect(end == .closedWithoutNotify)
            }
        }
    }

    /// What a client reads, until the connection ends, after `GET /` to a TLS origin that
    /// answers with `response` (asking for the connection to close when `close`).
    private func fetch(
        _ response: LoopbackOrigin.Response, close: Bool = false
    ) throws -> (bytes: [UInt8], end: TLSConnection.Received) {
        let origin = try LoopbackOrigin(tls: certificates.serverContext(certificates.localhost))
        defer { origin.stop() }
        origin.setDefault { _ in response }
        let socket = try TLSClientSocket(port: origin.port, context: client)
        let connection = close ? "Connection: close\r\n" : ""
        #expect(socket.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\(connection)\r\n"))
        return socket.readToEnd()
    }
}
