#if os(Linux)
import CacheTestSupport
import Testing

/// The tests' HTTP/2 client against nginx, an HTTP/2 server we did not write: over TLS with
/// ALPN `h2` and in cleartext with prior knowledge, several streams at once, request and
/// response bodies past the default flow-control window, HEAD, 304.
@Suite("HTTP/2 test client against nginx", .timeLimit(.minutes(5)))
struct HTTP2ClientTests {
    /// Distinct bodies: file i holds "file i" and then i × 1,000 bytes of its digit, so a body
    /// given to another stream shows.
    static let files: [String: [UInt8]] = Dictionary(
        uniqueKeysWithValues: (0..<8).map { index in
            (
                "/fresh/\(index).txt",
                Array("file \(index)".utf8) + [UInt8](repeating: 0x30 + UInt8(index), count: index * 1000)
            )
        })

    /// nginx with HTTP/2, or nil (skipped) when it is not installed.
    static func nginx(extra: [String: [UInt8]] = [:]) throws -> NginxOrigin? {
        try NginxOrigin.start(
            tls: try TestCertificates.shared().localhost, files: files.merging(extra) { $1 }, http2: true)
    }

    /// RFC 9113 §3.2, §5: ALPN chooses h2; eight requests go out at once on eight client-opened
    /// (odd) streams, and each stream ends with END_STREAM carrying its own file.
    @Test func severalStreamsAtOnceOverTLS() async throws {
        try await offPool {
            guard let nginx = try Self.nginx() else { return }
            defer { nginx.stop() }
            let client = try HTTP2Client(port: nginx.port, tls: .testCA())
            let paths = (0..<8).map { "/fresh/\($0).txt" }
            let responses = client.send(paths.map { HTTP2Request("GET", $0) })
            try #require(responses.count == 8)
            for (path, response) in zip(paths, responses) {
                #expect(response.status == 200, "\(response)")
                #expect(response.end == .endStream, "\(response)")
                #expect(response.body == Self.files[path], "\(path): \(response.body.prefix(20))")
                #expect(response["Cache-Control"] == "max-age=600")
                #expect(response["content-length"] == String(Self.files[path]?.count ?? -1))
            }
            #expect(Set(responses.map(\.streamID)) == [1, 3, 5, 7, 9, 11, 13, 15])
            let logged = nginx.requests(atLeast: 8)
            #expect(logged.count == 8)
            #expect(logged.allSatisfy { $0.contains("HTTP/2.0") }, "\(logged)")
            // The connection stays open for the next requests (RFC 9113 §5.1.1: new, higher ids).
            let again = client.send([HTTP2Request("GET", "/fresh/1.txt")])
            #expect(again.first?.streamID == 17)
            #expect(again.first?.body == Self.files["/fresh/1.txt"])
            #expect(client.isUsable)
        }
    }

    /// RFC 9113 §3.3: prior knowledge in cleartext; §8.1: a HEAD answer has the fields and no
    /// DATA; a conditional GET with the ETag is answered 304 without DATA (RFC 9110 §13.1.2);
    /// trailers come apart from the head.
    @Test func headNotModifiedAndTrailersInCleartext() async throws {
        try await offPool {
            guard let nginx = try Self.nginx(extra: ["/trailers/t.txt": Array("with a trailer".utf8)]),
                let port = nginx.cleartextHTTP2Port
            else { return }
            defer { nginx.stop() }
            let client = try HTTP2Client(port: port)
            let head = client.send([HTTP2Request("HEAD", "/fresh/3.txt")])[0]
            #expect(head.status == 200, "\(head)")
            #expect(head.end == .endStream)
            #expect(head.body.isEmpty)
            #expect(head["content-length"] == "3006")
            let etag = try #require(head["etag"])
            let conditional = client.send([
                HTTP2Request("GET", "/fresh/3.txt", fields: [("If-None-Match", etag)]),
                HTTP2Request("GET", "/fresh/3.txt", fields: [("If-None-Match", "\"other\"")]),
            ])
            #expect(conditional[0].status == 304, "\(conditional[0])")
            #expect(conditional[0].end == .endStream)
            #expect(conditional[0].body.isEmpty)
            #expect(conditional[0]["etag"] == etag)
            #expect(conditional[1].status == 200)
            #expect(conditional[1].body == Self.files["/fresh/3.txt"])
            // RFC 9113 §8.1: a trailer section, a HEADERS frame after the DATA.
            let trailed = client.send([HTTP2Request("GET", "/trailers/t.txt")])[0]
            #expect(trailed.text == "with a trailer")
            #expect(trailed.trailers == [HTTP2Field("x-checked", "yes")], "\(trailed)")
            #expect(trailed.end == .endStream)
        }
    }

    /// RFC 9113 §6.9: request and response bodies larger than the 65,535-byte windows go
    /// through as the peer's WINDOW_UPDATEs come; three at once. The bodies PUT are read back.
    @Test func bodiesPastTheFlowControlWindow() async throws {
        try await offPool {
            let big = (0..<3).map { index in (0..<300_000).map { UInt8(truncatingIfNeeded: $0 * 7 + index) } }
            guard let nginx = try Self.nginx() else { return }
            defer { nginx.stop() }
            let client = try HTTP2Client(port: nginx.port, tls: .testCA())
            let put = client.send(
                big.enumerated().map { HTTP2Request("PUT", "/upload/\($0.offset).bin", body: $0.element) })
            #expect(put.map(\.status) == [201, 201, 201], "\(put)")
            #expect(put.allSatisfy { $0.end == .endStream })
            let got = client.send((0..<3).map { HTTP2Request("GET", "/upload/\($0).bin") })
            #expect(got.map(\.body) == big, "\(got)")
            // The same bodies handed over in pieces: nothing kept, every byte seen once, in order.
            var pieces = [[UInt8]](repeating: [], count: 3)
            let streamed = client.send((0..<3).map { HTTP2Request("GET", "/upload/\($0).bin") }) { index, head, bytes in
                #expect(head.status == 200)
                pieces[index] += bytes
            }
            #expect(pieces == big)
            #expect(streamed.allSatisfy { $0.body.isEmpty && $0.end == .endStream })
        }
    }

    /// RFC 9113 §3.2: a TLS server whose ALPN does not choose h2 (nginx without `http2`, offered
    /// h2 and http/1.1) is refused in words before anything is sent.
    @Test func aServerThatDoesNotChooseH2IsRefused() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            guard let nginx = try NginxOrigin.start(tls: certificates.localhost, files: Self.files) else { return }
            defer { nginx.stop() }
            let both = HTTP2Client.TLSOptions(
                context: try certificates.clientContext(applicationProtocols: ["h2", "http/1.1"]))
            let error = #expect(throws: HTTP2Client.Failure.self) { try HTTP2Client(port: nginx.port, tls: both) }
            #expect(
                error?.description.contains("chose http/1.1 with ALPN, not h2") == true, "\(String(describing: error))")
            #expect(nginx.requests.isEmpty)
        }
    }
}
#endif
