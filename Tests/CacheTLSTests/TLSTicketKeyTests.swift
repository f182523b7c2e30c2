import CacheSystem
import CacheTLS
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// Session tickets under keys rotated in memory (RFC 8446 §4.6.1; RFC 5077 for TLS 1.2): a
/// ticket resumes while its key is current or the one before, never after that, and across
/// contexts sharing the ring (a certificate reload). The ring's clock is the test's: rotations
/// happen without waiting.
@Suite("TLS session ticket keys", .timeLimit(.minutes(5)))
struct TLSTicketKeyTests {
    let certificates: TestCertificates
    let client: TLSClientContext
    /// Seconds on the ring's clock.
    let now = Locked(0.0)
    let keys: TLSTicketKeys
    let server: TLSServerContext

    init() throws {
        certificates = try TestCertificates.shared()
        client = try certificates.clientContext()
        keys = TLSTicketKeys(rotation: 3600) { [now] in now.withLock { $0 } }
        server = try TLSServerContext(default: certificates.localhost.identity, ticketKeys: keys)
    }

    /// Moves the ring's clock on by `rotations` key lifetimes.
    func advance(rotations: Double) {
        now.withLock { $0 += rotations * keys.rotation }
    }

    /// Connects the client to `server`, reads a response (TLS 1.3 tickets arrive after the
    /// handshake) and closes with close_notify (OpenSSL forgets the session of a connection
    /// dropped without it): whether both sides resumed a session.
    func connect(to server: TLSServerContext) throws -> Bool {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.write("response", from: pair.server) == .wrote(8))
        #expect(pair.readAll(pair.client).text == "response")
        #expect(pair.client.isResumed == pair.server.isResumed)
        #expect(pair.client.shutdown() == .done)
        return pair.client.isResumed
    }

    /// RFC 8446 §4.6.1: the server's NewSessionTicket lets the next connection resume, and a
    /// resumed connection gets a new ticket (the client uses each once, RFC 8446 §C.4).
    @Test func aTicketResumesTheSession() throws {
        #expect(try !connect(to: server))
        #expect(try connect(to: server))
        advance(rotations: 0.9)
        #expect(try connect(to: server))
    }

    /// RFC 8446 §4.6.1: a ticket under the key before the current one still resumes, and the
    /// client leaves with a ticket under the current key, which resumes after the next rotation.
    @Test func aTicketUnderThePreviousKeyResumesAndIsRenewed() throws {
        #expect(try !connect(to: server))
        advance(rotations: 1)
        #expect(try connect(to: server))
        advance(rotations: 1)
        #expect(try connect(to: server))
    }

    /// RFC 8446 §4.6.1: a ticket whose key is two rotations old is refused: a full handshake,
    /// which gives the client a ticket that resumes again.
    @Test func aTicketTwoRotationsOldIsRefused() throws {
        #expect(try !connect(to: server))
        advance(rotations: 2)
        #expect(try !connect(to: server))
        #expect(try connect(to: server))
    }

    /// RFC 8446 §4.6.1: a context made at a reload with the same ring resumes the tickets of
    /// the one it replaces; one with another ring cannot read them.
    @Test func aTicketResumesOnAContextMadeAtReload() throws {
        #expect(try !connect(to: server))
        let reloaded = try TLSServerContext(default: certificates.localhost.identity, ticketKeys: keys)
        #expect(try connect(to: reloaded))
        let otherKeys = try TLSServerContext(
            default: certificates.localhost.identity, ticketKeys: TLSTicketKeys(rotation: 3600))
        #expect(try !connect(to: otherKeys))
    }

    /// RFC 5077 §3.3: under TLS 1.2 (`openssl s_client -tls1_2`, its session kept in a file) a
    /// ticket resumes and is kept while its key is current; under the previous key it resumes
    /// and the server sends a new one; two rotations after its key, it is refused.
    @Test func aTLS12TicketResumesUntilItsKeyIsTwoRotationsOld() async throws {
        try await offPool {
            let origin = try LoopbackOrigin(tls: server)
            defer { origin.stop() }
            let directory = TemporaryDirectory()
            let file = directory.path + "/session.pem"
            let first = try sClient(origin.port, ["-sess_out", file])
            #expect(first.contains("New, TLSv1.2,"))
            let issued = try #require(ticket(in: first))
            let resumed = try sClient(origin.port, ["-sess_in", file])
            #expect(resumed.contains("Reused, TLSv1.2,"))
            #expect(ticket(in: resumed) == issued)
            advance(rotations: 1)
            let renewed = try sClient(origin.port, ["-sess_in", file])
            #expect(renewed.contains("Reused, TLSv1.2,"))
            #expect(ticket(in: renewed).map { $0 != issued } == true)
            advance(rotations: 1)
            #expect(try sClient(origin.port, ["-sess_in", file]).contains("New, TLSv1.2,"))
        }
    }

    /// The ticket `openssl s_client` prints with the session it ends with: its hex dump.
    func ticket(in output: String) -> Substring? {
        guard let start = output.range(of: "TLS session ticket:"), let end = output.range(of: "Start Time:") else {
            return nil
        }
        return output[start.upperBound..<end.lowerBound]
    }

    /// What `openssl s_client -tls1_2` connecting to `port` with `arguments` prints: the
    /// handshake and the session; it leaves at once (its input is empty).
    func sClient(_ port: UInt16, _ arguments: [String]) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: OpenSSLServer.command)
        process.arguments =
            ["s_client", "-tls1_2", "-connect", "127.0.0.1:\(port)", "-CAfile", certificates.caFile] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return text
    }
}
