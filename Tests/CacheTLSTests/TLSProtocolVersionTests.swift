import CacheTLS
import CacheTestSupport
import Testing

/// Protocol versions against a server we do not write: `openssl s_server` serving TLS 1.0 only.
@Suite("TLS protocol versions", .timeLimit(.minutes(5)))
struct TLSProtocolVersionTests {
    /// RFC 8996 deprecates TLS 1.0 and 1.1: a server that offers only TLS 1.0 is refused, in
    /// words that say so. `openssl s_client -tls1` first shows the server does speak TLS 1.0,
    /// so the refusal is about the version and nothing else.
    @Test func aTLS10OnlyServerIsRefusedWithTheProtocolVersionMessage() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            guard let server = try OpenSSLServer.tls10Only(certificates) else { return }
            defer { server.stop() }
            let port = server.port
            let client = try certificates.clientContext()
            #expect(throws: TLSError.protocolVersion(peer: "127.0.0.1:\(port)")) {
                _ = try TLSClientSocket(port: port, context: client)
            }
            #expect(
                TLSError.protocolVersion(peer: "127.0.0.1:\(port)").description
                    == "127.0.0.1:\(port): protocol version: the server offers only TLS 1.0/1.1 or older; "
                    + "we require TLS 1.2 or later")
        }
    }
}
