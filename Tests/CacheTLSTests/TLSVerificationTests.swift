import COpenSSLHTTPCache
import CacheTLS
import CacheTestSupport
import Foundation
import Testing

/// The client's verification of the server's chain and name, each failure in words naming the
/// origin: over a socket pair, both ends driven by this thread.
@Suite("TLS verification")
struct TLSVerificationTests {
    let certificates: TestCertificates
    let client: TLSClientContext

    init() throws {
        certificates = try TestCertificates.shared()
        client = try certificates.clientContext()
    }

    /// RFC 9110 §4.3.4: a chain to a trusted CA, for the host asked for, is accepted; TLS 1.3
    /// and ALPN's `http/1.1` (RFC 7301) are agreed.
    @Test func aValidChainIsAccepted() throws {
        let pair = try ConnectedPair(client: client, server: certificates.serverContext(certificates.localhost))
        let (clientEnd, serverEnd) = pair.handshake()
        #expect(clientEnd == .done)
        #expect(serverEnd == .done)
        #expect(pair.client.protocolVersion == "TLSv1.3")
        #expect(pair.client.applicationProtocol == "http/1.1")
        #expect(pair.server.applicationProtocol == "http/1.1")
        #expect(pair.write("ping", from: pair.client) == .wrote(4))
        #expect(pair.readAll(pair.server).text == "ping")
    }

    /// RFC 5280 §4.1.2.5: past its notAfter, a certificate is refused; the error gives the date.
    @Test func anExpiredCertificateIsRefusedWithItsDate() throws {
        let error = try refusal(of: certificates.expired)
        guard case .certificateExpired(let peer, let notAfter) = error else {
            Issue.record("not an expiry: \(error)")
            return
        }
        #expect(peer == "127.0.0.1:8443")
        let date = try #require(Self.seconds(notAfter), "\(notAfter)")
        let now = Date().timeIntervalSince1970
        #expect(date < now && date > now - 2 * 86_400, "notAfter is a day ago")
        #expect(
            error.description == "127.0.0.1:8443: certificate expired on \(notAfter); the server must renew it "
                + "(or this machine's clock is wrong)")
    }

    /// RFC 5280 §4.1.2.5: before its notBefore, a certificate is refused; the error gives the date.
    @Test func aNotYetValidCertificateIsRefusedWithItsDate() throws {
        let error = try refusal(of: certificates.notYetValid)
        guard case .certificateNotYetValid(_, let notBefore) = error else {
            Issue.record("not a not-yet-valid: \(error)")
            return
        }
        let date = try #require(Self.seconds(notBefore), "\(notBefore)")
        let now = Date().timeIntervalSince1970
        #expect(date > now && date < now + 2 * 86_400, "notBefore is in a day")
        #expect(error.description.contains("certificate is not valid before \(notBefore); check this machine's clock"))
    }

    /// RFC 9110 §4.3.4, RFC 6125 §6: a certificate for another name is refused; the error names
    /// what it covers and what was asked for, for a name and for an IP address.
    @Test(arguments: ["127.0.0.1", "localhost"])
    func aCertificateForAnotherHostIsRefused(host: String) throws {
        let error = try refusal(of: certificates.wrongHost, host: host)
        #expect(error == .wrongHost(peer: "\(host):8443", host: host, certificateNames: ["wrong.test"]))
        #expect(error.description == "\(host):8443: wrong host name: the certificate covers wrong.test, not \(host)")
    }

    /// A chain to an authority nobody trusts is refused, naming it and how to trust it; trusted
    /// with that authority's file, the same certificate is accepted.
    @Test func anUnknownIssuerIsRefusedThenTrustedWithItsCAFile() throws {
        let error = try refusal(of: certificates.unknownIssuer)
        #expect(
            error
                == .unknownIssuer(
                    peer: "127.0.0.1:8443", issuer: "CN=httpcache other CA", selfSigned: false, advice: "--cacert FILE")
        )
        #expect(
            error.description
                == "127.0.0.1:8443: certificate issued by an unknown authority (CN=httpcache other CA); "
                + "trust its CA with --cacert FILE")

        let trusting = try TLSClientContext(.init(extraTrustRoots: [certificates.caFile, certificates.otherCAFile]))
        let pair = try ConnectedPair(client: trusting, server: certificates.serverContext(certificates.unknownIssuer))
        #expect(pair.handshake().client == .done)
    }

    /// A self-signed certificate is an unknown issuer too, said as such; the advice is the
    /// context's (the proxy names its own option).
    @Test func aSelfSignedCertificateIsRefused() throws {
        let proxyLike = try TLSClientContext(.init(trustAdvice: "--origin-cacert FILE"))
        let pair = try ConnectedPair(client: proxyLike, server: certificates.serverContext(certificates.selfSigned))
        guard case .failed(let error) = pair.handshake().client else {
            Issue.record("the self-signed certificate was accepted")
            return
        }
        #expect(
            error
                == .unknownIssuer(
                    peer: "127.0.0.1:8443", issuer: "CN=localhost", selfSigned: true, advice: "--origin-cacert FILE"))
        #expect(error.description.hasSuffix("trust it with --origin-cacert FILE"))
    }

    /// A failure leaves nothing in the thread's OpenSSL error queue for the next connection.
    @Test func aFailedHandshakeLeavesTheErrorQueueEmpty() throws {
        _ = try refusal(of: certificates.expired)
        #expect(ERR_peek_error() == 0)
        let server = try certificates.serverContext(certificates.localhost)
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake().client == .done)
    }

    // MARK: Helpers

    /// The client's error when `leaf` is presented to it, asked for `host`; the server sees
    /// the handshake fail too.
    private func refusal(
        of leaf: TestCertificates.Leaf, host: String = "127.0.0.1", sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> TLSError {
        let pair = try ConnectedPair(client: client, server: certificates.serverContext(leaf), host: host)
        let (clientEnd, serverEnd) = pair.handshake()
        guard case .failed(let error) = clientEnd else {
            Issue.record("the client accepted the certificate: \(clientEnd)", sourceLocation: sourceLocation)
            throw ConnectedPair.PairFailure(description: "accepted")
        }
        guard case .failed = serverEnd else {
            Issue.record("the server did not see the refusal: \(serverEnd)", sourceLocation: sourceLocation)
            return error
        }
        return error
    }

    /// `2025-01-31 12:00:00 UTC` as seconds since 1970.
    static func seconds(_ text: String) -> Double? {
        let parts = text.split(whereSeparator: { "-: ".contains($0) })
        guard parts.count == 7, parts[6] == "UTC" else { return nil }
        let numbers = parts[0..<6].compactMap { Int32($0) }
        guard numbers.count == 6 else { return nil }
        var fields = tm()
        fields.tm_year = numbers[0] - 1900
        fields.tm_mon = numbers[1] - 1
        fields.tm_mday = numbers[2]
        fields.tm_hour = numbers[3]
        fields.tm_min = numbers[4]
        fields.tm_sec = numbers[5]
        return Double(timegm(&fields))
    }
}
