import CacheSystem
import CacheTLS
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// What a server context agrees to under TLS 1.2 and at resumption, against `openssl s_client`:
/// the cipher suites (RFC 9325 §4.1, §4.2; RFC 9113 §9.2.2) and the SNI name a session may be
/// resumed under (RFC 6066 §3).
@Suite("TLS server handshakes", .timeLimit(.minutes(5)))
struct TLSServerHandshakeTests {
    let certificates: TestCertificates

    init() throws {
        certificates = try TestCertificates.shared()
    }

    /// A cipher suite a TLS 1.2 client offers alone, the key type of the server's certificate,
    /// and whether the server agrees to it.
    struct Offer: Sendable, CustomTestStringConvertible {
        var suite: String
        var rsa: Bool
        var accepted: Bool
        var testDescription: String { "\(suite) (\(rsa ? "RSA" : "ECDSA")): \(accepted ? "accepted" : "refused")" }
    }

    /// RFC 9325 §4.1, §4.2 (BCP 195): under TLS 1.2 only ECDHE key exchange with an AEAD cipher.
    /// Static RSA key exchange (no forward secrecy), CBC and SHA-1 MACs fail the handshake;
    /// they are also the suites RFC 9113 §9.2.2 forbids under HTTP/2.
    @Test(
        arguments: [
            Offer(suite: "ECDHE-ECDSA-AES128-GCM-SHA256", rsa: false, accepted: true),
            Offer(suite: "ECDHE-ECDSA-CHACHA20-POLY1305", rsa: false, accepted: true),
            Offer(suite: "ECDHE-ECDSA-AES128-SHA", rsa: false, accepted: false),
            Offer(suite: "ECDHE-ECDSA-AES256-SHA384", rsa: false, accepted: false),
            Offer(suite: "ECDHE-RSA-AES128-GCM-SHA256", rsa: true, accepted: true),
            Offer(suite: "AES128-SHA", rsa: true, accepted: false),
            Offer(suite: "AES256-GCM-SHA384", rsa: true, accepted: false),
            Offer(suite: "ECDHE-RSA-AES128-SHA", rsa: true, accepted: false),
        ])
    func tls12AgreesToECDHEWithAEADOnly(offer: Offer) async throws {
        try await offPool {
            let directory = TemporaryDirectory()
            let leaf = offer.rsa ? try rsaCertificate(in: directory) : certificates.localhost
            let origin = try LoopbackOrigin(tls: TLSServerContext(default: leaf.identity))
            defer { origin.stop() }
            let output = try OpenSSLClient.run(port: origin.port, ["-tls1_2", "-cipher", offer.suite])
            #expect(OpenSSLClient.cipher(in: output) == (offer.accepted ? offer.suite : nil), "\(output)")
        }
    }

    /// RFC 9325 §4.2: the server chooses by its own order (AES-128-GCM first), not the client's.
    @Test func tls12ChoosesTheServersPreferredSuite() async throws {
        try await offPool {
            let origin = try LoopbackOrigin(tls: TLSServerContext(default: certificates.localhost.identity))
            defer { origin.stop() }
            let clientOrder = "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256"
            let output = try OpenSSLClient.run(port: origin.port, ["-tls1_2", "-cipher", clientOrder])
            #expect(OpenSSLClient.cipher(in: output) == "ECDHE-ECDSA-AES128-GCM-SHA256", "\(output)")
        }
    }

    /// RFC 6066 §3: a session (its ticket) issued to a client that asked for `sni.test` resumes
    /// when it asks for `sni.test` again (in any case), and not under `localhost`, another name
    /// of the same server, nor without SNI: those get a full handshake. Under TLS 1.2, which
    /// the RFC is about, and TLS 1.3, which gets the same rule.
    @Test(arguments: ["-tls1_2", "-tls1_3"])
    func aSessionResumesOnlyUnderTheNameItWasIssuedFor(version: String) async throws {
        try await offPool {
            let server = try TLSServerContext(
                default: certificates.localhost.identity, others: [certificates.second.identity],
                ticketKeys: TLSTicketKeys())
            let origin = try LoopbackOrigin(tls: server)
            defer { origin.stop() }
            let directory = TemporaryDirectory()
            let session = directory.path + "/session.pem"
            func connect(_ more: [String]) throws -> String {
                try OpenSSLClient.run(port: origin.port, [version, "-sess_in", session] + more)
            }
            let issued = try OpenSSLClient.run(
                port: origin.port, [version, "-servername", "sni.test", "-sess_out", session])
            #expect(issued.contains("New, TLSv1."), "\(issued)")
            #expect(issued.contains("CN = sni"), "\(issued)")
            #expect(try connect(["-servername", "sni.test"]).contains("Reused, TLSv1."))
            #expect(try connect(["-servername", "SNI.test"]).contains("Reused, TLSv1."))
            let otherName = try connect(["-servername", "localhost"])
            #expect(otherName.contains("New, TLSv1."), "\(otherName)")
            #expect(otherName.contains("CN = localhost"), "the certificate for the name asked for now: \(otherName)")
            #expect(try connect(["-noservername"]).contains("New, TLSv1."))
        }
    }

    /// A self-signed RSA-2048 certificate for localhost, made with `openssl req`: the test
    /// certificates are P-256, under which no static-RSA suite can be negotiated at all.
    func rsaCertificate(in directory: TemporaryDirectory) throws -> TestCertificates.Leaf {
        let leaf = TestCertificates.Leaf(
            certificateFile: directory.path + "/rsa.pem", keyFile: directory.path + "/rsa.key")
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: OpenSSLServer.command)
        process.arguments = [
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", leaf.keyFile, "-out", leaf.certificateFile,
            "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost", "-days", "2",
        ]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "openssl req could not make an RSA certificate")
        return leaf
    }
}
