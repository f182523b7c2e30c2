#if os(Linux)
import CacheSemantics
import CacheTLS
import CacheTestSupport
import Foundation
import Glibc
import LoopbackOrigin
import Testing

@testable import HTTPClient

/// `https` URLs: TLS to origins made by the tests (``TestCertificates``), verified as every
/// client must; framing over TLS, where a close without `close_notify` is never the end of a
/// body that the close delimits (RFC 9112 §9.8); pooling and session resumption.
@Suite("UpstreamClient: https", .timeLimit(.minutes(5)))
struct TLSClientTests {
    static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    /// A client trusting the system's store and `roots` (the tests' CA by default), every host
    /// name resolved to 127.0.0.1 (as `/etc/hosts` would, for names such as `sni.test`).
    static func client(
        trusting roots: [String]? = nil, configure: (inout UpstreamClient.Configuration) -> Void = { _ in }
    ) throws -> UpstreamClient {
        var configuration = UpstreamClient.Configuration()
        configuration.extraTrustRoots = try roots ?? [TestCertificates.shared().caFile]
        configure(&configuration)
        let context = try TLSClientContext(.init(extraTrustRoots: configuration.extraTrustRoots))
        return UpstreamClient(configuration: configuration, tls: context) { _, port, timeout in
            OriginSocket.connect(host: "127.0.0.1", port: port, timeout: timeout, blocking: false)
        }
    }

    /// An origin presenting `leaf` that answers every request with `steps`.
    static func origin(
        _ leaf: KeyPath<TestCertificates, TestCertificates.Leaf> = \.localhost, others: [TestCertificates.Leaf] = [],
        answer: @escaping @Sendable (RawOrigin.Request) -> [RawOrigin.Step] = { _ in [.send(ok)] }
    ) throws -> RawOrigin {
        let certificates = try TestCertificates.shared()
        return try RawOrigin(
            tls: certificates.serverContext(certificates[keyPath: leaf], others: others), answer: answer)
    }

    // MARK: Verification

    @Test("A valid chain to a trusted CA: the response arrives, its connection is kept, ALPN http/1.1")
    func validChain() async throws {
        try await offPool {
            let origin = try Self.origin()
            defer { origin.stop() }
            let client = try Self.client()
            for path in ["/a", "/b"] {
                let outcome = await fetch(client, UpstreamRequest(method: "GET", url: origin.url(path), fields: [:]))
                #expect(outcome.error == nil, "\(outcome.error?.description ?? "")")
                #expect(outcome.bodyText == "ok")
            }
            // Origin-form with the URL's Host, as over http (RFC 9112 §3.2); one connection, one handshake.
            #expect(
                origin.received.map(\.text) == [
                    "GET /a HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n",
                    "GET /b HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n",
                ])
            #expect(origin.handshakes.count == 1)
        }
    }

    @Test(
        "A certificate refused is a .tls error: one line naming the origin and the cause in words (RFC 9110 §4.3.4)",
        arguments: [
            ("expired", "certificate expired on"), ("not yet valid", "certificate is not valid before"),
            ("wrong host", "wrong host name: the certificate covers wrong.test, not 127.0.0.1"),
            ("unknown issuer", "certificate issued by an unknown authority"),
            ("self-signed", "certificate is self-signed"),
        ])
    func refusedCertificate(leaf: String, cause: String) async throws {
        try await offPool {
            let leaves: [String: KeyPath<TestCertificates, TestCertificates.Leaf>] = [
                "expired": \.expired, "not yet valid": \.notYetValid, "wrong host": \.wrongHost,
                "unknown issuer": \.unknownIssuer, "self-signed": \.selfSigned,
            ]
            let origin = try Self.origin(try #require(leaves[leaf]))
            defer { origin.stop() }
            let url = origin.url("/secret")
            let outcome = await fetch(try Self.client(), UpstreamRequest(method: "GET", url: url, fields: [:]))
            let error = try #require(outcome.error)
            #expect(error.kind == .tls)
            #expect(!error.receivedHead)
            #expect(error.description.hasPrefix("could not connect securely to \(url): 127.0.0.1:\(origin.port): "))
            #expect(error.description.contains(cause), "\(error.description)")
            #expect(!error.description.contains("\n"))
            #expect(origin.received.isEmpty, "nothing is sent to an origin whose certificate was refused")
        }
    }

    @Test("An unknown CA is refused with the way to trust it, then trusted with its file as an extra root")
    func unknownCAThenTrusted() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let origin = try Self.origin(\.unknownIssuer)
            defer { origin.stop() }
            let request = UpstreamRequest(method: "GET", url: origin.url("/x"), fields: [:])
            let refused = await fetch(try Self.client(trusting: []), request)
            #expect(refused.error?.kind == .tls)
            #expect(refused.error?.description.contains("trust its CA with --cacert FILE") == true)
            let trusted = await fetch(try Self.client(trusting: [certificates.otherCAFile]), request)
            #expect(trusted.error == nil, "\(trusted.error?.description ?? "")")
            #expect(trusted.bodyText == "ok")
        }
    }

    @Test("An extra trust root that cannot be read fails when the client is made, naming the file")
    func unreadableCAFile() throws {
        var configuration = UpstreamClient.Configuration()
        configuration.extraTrustRoots = ["/nonexistent/ca.pem"]
        #expect {
            _ = try UpstreamClient(configuration: configuration)
        } throws: { error in
            let error = error as? UpstreamError
            return error?.kind == .tls && error?.description.contains("/nonexistent/ca.pem") == true
        }
    }

    @Test("A server offering only TLS 1.0 is refused: protocol version (RFC 8996)")
    func tls10Refused() async throws {
        try await offPool {
            guard let server = try OpenSSLServer.tls10Only(try TestCertificates.shared()) else { return }
            defer { server.stop() }
            let url = "https://127.0.0.1:\(server.port)/"
            let outcome = await fetch(try Self.client(), UpstreamRequest(method: "GET", url: url, fields: [:]))
            let error = try #require(outcome.error)
            #expect(error.kind == .tls)
            #expect(error.description.contains("protocol version"), "\(error.description)")
        }
    }

    @Test("SNI carries the URL's host: the origin chooses between two names by it (RFC 6066 §3)")
    func sniChoosesTheCertificate() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let origin = try Self.origin(others: [certificates.second])
            defer { origin.stop() }
            let client = try Self.client()
            for host in ["sni.test", "localhost"] {
                let outcome = await fetch(
                    client, UpstreamRequest(method: "GET", url: "https://\(host):\(origin.port)/", fields: [:]))
                #expect(outcome.error == nil, "\(host): \(outcome.error?.description ?? "")")
            }
            // An IP literal is never sent as SNI (RFC 6066 §3); its certificate names the address.
            let literal = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/"), fields: [:]))
            #expect(literal.error == nil)
            #expect(origin.handshakes.map(\.serverName) == ["sni.test", "localhost", nil])
            #expect(
                origin.received.map { $0.text.split(separator: "\r\n")[1] } == [
                    "Host: sni.test:\(origin.port)", "Host: localhost:\(origin.port)", "Host: 127.0.0.1:\(origin.port)",
                ])
        }
    }

    // MARK: Framing over TLS

    @Test(
        "A cut without close_notify in a body of known length is .closed, never complete (RFC 9112 §9.8, §8)",
        arguments: [
            "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf!",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhalf!\r\na\r\nmid",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhalf!\r\n",
        ])
    func cutWithoutCloseNotify(response: String) async throws {
        try await offPool {
            let origin = try Self.origin { _ in [.send(response), .close] }
            defer { origin.stop() }
            let outcome = await fetch(
                try Self.client(), UpstreamRequest(method: "GET", url: origin.url("/c"), fields: [:]))
            let error = try #require(outcome.error)
            #expect(error.kind == .closed)
            #expect(error.receivedHead)
            #expect(error.description.contains("must not be used as complete"))
            #expect(outcome.body.count < 10)
        }
    }

    @Test("A body delimited by the close is complete with close_notify, and cut without it (RFC 9112 §9.8)")
    func closeDelimitedNeedsCloseNotify() async throws {
        try await offPool {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"
            let origin = try Self.origin { request in
                [.send(head + "the whole body"), request.target == "/notified" ? .closeNotify : .close]
            }
            defer { origin.stop() }
            let client = try Self.client()
            let notified = await fetch(
                client, UpstreamRequest(method: "GET", url: origin.url("/notified"), fields: [:]))
            #expect(notified.error == nil, "\(notified.error?.description ?? "")")
            #expect(notified.bodyText == "the whole body")

            let cut = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/cut"), fields: [:]))
            let error = try #require(cut.error)
            #expect(error.kind == .closed)
            #expect(error.receivedHead)
            #expect(
                error.description
                    == "the response from \(origin.url("/cut")) ended without TLS close_notify, so its body, delimited by "
                    + "the close, may be cut short (RFC 9112 §9.8); it is incomplete and must not be used as complete")
        }
    }

    @Test("A body of known length is complete even when the close after it has no close_notify (RFC 9112 §9.8)")
    func knownLengthThenCutIsComplete() async throws {
        try await offPool {
            let origin = try Self.origin { _ in
                [.send("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\nfull"), .close]
            }
            defer { origin.stop() }
            let outcome = await fetch(
                try Self.client(), UpstreamRequest(method: "GET", url: origin.url("/k"), fields: [:]))
            #expect(outcome.error == nil)
            #expect(outcome.bodyText == "full")
        }
    }

    @Test("Bytes after a response over TLS retire its connection: the next URL gets its own body (RFC 9112 §6.3)")
    func strayBytesAfterAResponse() async throws {
        try await offPool {
            let origin = try Self.origin { request in
                request.target == "/a"
                    ? [
                        .send(
                            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA"
                                + "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray")
                    ]
                    : [.send("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB")]
            }
            defer { origin.stop() }
            let client = try Self.client()
            let a = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/a"), fields: [:]))
            let b = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/b"), fields: [:]))
            #expect(a.bodyText == "A")
            #expect(b.error == nil)
            #expect(b.bodyText == "B")
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    @Test("Late bytes on an idle TLS connection retire it before reuse (RFC 9112 §6.3)")
    func lateStrayBytes() async throws {
        try await offPool {
            let origin = try Self.origin { request in
                request.target == "/a"
                    ? [
                        .send("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA"), .pause(0.05),
                        .send("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstray"),
                    ]
                    : [.send("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nB")]
            }
            defer { origin.stop() }
            let client = try Self.client()
            let a = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/a"), fields: [:]))
            try await Task.sleep(for: .milliseconds(300))
            let b = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/b"), fields: [:]))
            #expect(a.bodyText == "A")
            #expect(b.bodyText == "B")
            #expect(origin.received.map(\.connection) == [0, 1])
        }
    }

    @Test(
        "A chunked response with trailers: the body de-chunked, the trailers read, the connection kept (RFC 9112 §7.1.2)"
    )
    func chunkedWithTrailers() async throws {
        try await offPool {
            let origin = try Self.origin { _ in
                [
                    .send(
                        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n"
                            + "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: abc\r\nX-More: 1\r\n\r\n")
                ]
            }
            defer { origin.stop() }
            let client = try Self.client()
            for _ in 0..<2 {
                let outcome = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/t"), fields: [:]))
                #expect(outcome.error == nil)
                #expect(outcome.bodyText == "hello world")
            }
            #expect(origin.received.map(\.connection) == [0, 0])
        }
    }

    // MARK: Connections

    @Test("A new connection to the same origin resumes the TLS session of the one before (RFC 8446 §2.2)")
    func sessionResumption() async throws {
        try await offPool {
            let origin = try Self.origin()
            defer { origin.stop() }
            // No idle connection kept: every request makes a new one.
            let client = try Self.client { $0.maxIdleConnections = 0 }
            for path in ["/1", "/2", "/3"] {
                let outcome = await fetch(client, UpstreamRequest(method: "GET", url: origin.url(path), fields: [:]))
                #expect(outcome.error == nil)
            }
            #expect(origin.handshakes.map(\.resumed) == [false, true, true])
        }
    }

    @Test(
        "An idempotent request on a kept TLS connection the origin closed with close_notify goes once more, on a new one"
    )
    func closedKeptConnectionIsRetried() async throws {
        try await offPool {
            // The first connection answers once, then closes properly as its next request arrives.
            let origin = try Self.origin { request in
                request.connection == 0 && request.target == "/second" ? [.closeNotify] : [.send(Self.ok)]
            }
            defer { origin.stop() }
            let client = try Self.client()
            let first = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/first"), fields: [:]))
            let second = await fetch(client, UpstreamRequest(method: "GET", url: origin.url("/second"), fields: [:]))
            #expect(first.error == nil)
            #expect(second.error == nil, "\(second.error?.description ?? "")")
            #expect(origin.received.map(\.connection) == [0, 0, 1])
        }
    }

    @Test(
        "An origin that does not speak TLS is a .tls error naming it; the handshake is bounded by the connect timeout")
    func plainOriginOnAnHTTPSURL() async throws {
        try await offPool {
            // A plain server answers the ClientHello as the bad request it is.
            let plain = try RawOrigin { connection in connection.send("HTTP/1.1 400 Bad Request\r\n\r\n") }
            defer { plain.stop() }
            let url = "https://127.0.0.1:\(plain.port)/"
            let refused = await fetch(try Self.client(), UpstreamRequest(method: "GET", url: url, fields: [:]))
            #expect(refused.error?.kind == .tls, "\(refused.error?.description ?? "")")
            #expect(refused.error?.description.hasPrefix("could not connect securely to \(url): ") == true)

            // A server that accepts and says nothing.
            let silent = try RawOrigin { _ in usleep(3_000_000) }
            defer { silent.stop() }
            let client = try Self.client { $0.connectTimeout = 0.5 }
            let silentURL = "https://127.0.0.1:\(silent.port)/"
            let timedOut = await fetch(client, UpstreamRequest(method: "GET", url: silentURL, fields: [:]))
            #expect(timedOut.error?.kind == .timeout)
            #expect(timedOut.error?.description.contains("the TLS handshake did not finish within 0.5 s") == true)
        }
    }
}

#endif
