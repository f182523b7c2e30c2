#if os(Linux)
import CacheSemantics
import CacheTestSupport
import LoopbackOrigin
import Testing

@testable import HTTPClient

/// Requests through a proxy: `http` URLs in absolute-form to it, `https` URLs through a
/// `CONNECT` tunnel it opens (RFC 9110 §9.3.6), against a scripted proxy on loopback.
@Suite("UpstreamClient: through a proxy", .timeLimit(.minutes(5)))
struct ProxyTunnelTests {
    @Test("An http URL goes to the proxy in absolute-form, with Host from the URL's authority (RFC 9112 §3.2, §3.2.2)")
    func httpInAbsoluteForm() async throws {
        try await offPool {
            let proxy = try RawOrigin.answeringEach()
            defer { proxy.stop() }
            let outcome = await fetch(
                try UpstreamClient(),
                UpstreamRequest(
                    method: "GET", url: "http://Origin.test:8080/a?b", fields: [:], proxy: proxy.url("")))
            #expect(outcome.error == nil)
            #expect(
                proxy.received.map(\.text) == [
                    "GET http://Origin.test:8080/a?b HTTP/1.1\r\nHost: origin.test:8080\r\n\r\n"
                ])
        }
    }

    @Test(
        "CONNECT opens a tunnel: the authority as request-target and Host, the origin's bytes right after the 2xx head (RFC 9110 §9.3.6, RFC 9112 §6.3 item 2)"
    )
    func tunnelCarriesTheOriginsBytes() async throws {
        try await offPool {
            // The proxy answers CONNECT, then plays the origin on the same connection.
            let proxy = try RawOrigin { connection in
                guard connection.readRequest() != nil else { return }
                connection.send("HTTP/1.1 200 Connection established\r\nX-Proxy: 1\r\n\r\n")
                guard connection.readRequest() != nil else { return }
                connection.send("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\ntunnel")
            }
            defer { proxy.stop() }
            let client = try UpstreamClient()
            let fd = try OriginSocket.connect(host: "127.0.0.1", port: proxy.port, timeout: 5, blocking: false).get()
            let request = UpstreamRequest(method: "GET", url: "https://origin.test/", fields: [:], proxy: proxy.url(""))
            let tunnel = try client.openTunnel(
                on: SocketStream(fd: fd), to: "origin.test:443", through: proxy.url(""), request)
            let connection = UpstreamConnection(stream: tunnel, reused: false, stallTimeout: 5)
            let sent = Array("GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n".utf8)
            #expect(sent.withUnsafeBytes { connection.send($0) } == nil)
            var received: [UInt8] = []
            while !received.elementsEqual("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\ntunnel".utf8) {
                guard case .bytes = connection.receive() else { break }
                received = Array(connection.pending)
            }
            #expect(String(decoding: received, as: UTF8.self).hasSuffix("tunnel"))
            #expect(
                proxy.received.map(\.text) == [
                    "CONNECT origin.test:443 HTTP/1.1\r\nHost: origin.test:443\r\n\r\n",
                    "GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n",
                ])
            #expect(proxy.received.map(\.connection) == [0, 0])
        }
    }

    @Test(
        "A proxy that refuses CONNECT is a connect error naming the proxy and its status (RFC 9110 §9.3.6)",
        arguments: [
            ("https://origin.test/x", "origin.test:443"), ("https://Origin.test:8443/x", "origin.test:8443"),
            ("https://[::1]/x", "[::1]:443"),
        ])
    func refusedTunnel(url: String, authority: String) async throws {
        try await offPool {
            let proxy = try RawOrigin(answer: { _ in
                [.send("HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\n\r\nforbidden")]
            })
            defer { proxy.stop() }
            let outcome = await fetch(
                try UpstreamClient(), UpstreamRequest(method: "GET", url: url, fields: [:], proxy: proxy.url("")))
            let error = try #require(outcome.error)
            #expect(error.kind == .connect)
            #expect(!error.receivedHead)
            #expect(
                error.description
                    == "could not reach \(url): the proxy \(proxy.url("")) refused to open a tunnel to \(authority): "
                    + "403 Forbidden; is the destination allowed by the proxy?")
            #expect(outcome.heads.isEmpty)
            #expect(proxy.received.map(\.text) == ["CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n\r\n"])
        }
    }

    @Test("A proxy that closes, stalls or speaks before the origin does is an error naming the proxy, never a tunnel")
    func brokenTunnels() async throws {
        try await offPool {
            // Only the stalling proxy needs a short stall timeout; the others get a long one, so a
            // busy machine that is slow to run the proxy's thread does not turn them into stalls.
            func client(stallTimeout: Double) throws -> UpstreamClient {
                var configuration = UpstreamClient.Configuration()
                configuration.stallTimeout = stallTimeout
                return try UpstreamClient(configuration: configuration)
            }
            let patient = try client(stallTimeout: 30)
            let impatient = try client(stallTimeout: 0.5)
            let cases: [(steps: [RawOrigin.Step], kind: UpstreamError.Kind, says: String)] = [
                ([.close], .connect, "closed the connection without answering CONNECT origin.test:443"),
                ([.pause(2)], .timeout, "sent no answer to CONNECT origin.test:443 for 0.5 s"),
                (
                    [.send("HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 200 OK\r\n\r\n")], .connect,
                    "sent bytes after its 200 answer to CONNECT origin.test:443"
                ),
                ([.send("SSH-2.0-OpenSSH\r\n\r\n")], .connect, "answered CONNECT origin.test:443 with something"),
            ]
            for (steps, kind, says) in cases {
                let proxy = try RawOrigin(answer: { _ in steps })
                defer { proxy.stop() }
                let outcome = await fetch(
                    kind == .timeout ? impatient : patient,
                    UpstreamRequest(method: "GET", url: "https://origin.test/", fields: [:], proxy: proxy.url("")))
                let error = try #require(outcome.error)
                #expect(error.kind == kind, "\(error)")
                #expect(error.description.contains("the proxy \(proxy.url("")) \(says)"), "\(error)")
            }
        }
    }

    @Test("A proxy that is not an http URL is refused before anything is sent")
    func proxyMustBeHTTP() async throws {
        try await offPool {
            for proxy in ["https://127.0.0.1:3128", "socks5://127.0.0.1:1080", "127.0.0.1:3128"] {
                let outcome = await fetch(
                    try UpstreamClient(),
                    UpstreamRequest(method: "GET", url: "https://a.test/", fields: [:], proxy: proxy))
                #expect(outcome.error?.kind == .other, "\(proxy)")
                #expect(outcome.error?.description.contains("is not an http URL") == true, "\(proxy)")
            }
        }
    }
}
#endif
