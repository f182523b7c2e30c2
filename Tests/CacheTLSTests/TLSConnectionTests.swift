import CacheTLS
import CacheTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A TLS connection after verification: SNI, ALPN, resumption, how it ends, reads of any size,
/// and the blocking layer's timeouts. Over a socket pair, both ends driven by this thread.
@Suite("TLS connections")
struct TLSConnectionTests {
    let certificates: TestCertificates
    let client: TLSClientContext
    let server: TLSServerContext

    init() throws {
        certificates = try TestCertificates.shared()
        client = try certificates.clientContext()
        server = try certificates.serverContext(certificates.localhost)
    }

    // MARK: SNI and ALPN

    /// RFC 6066 §3: the server presents the certificate for the name the client sends, the
    /// first one when it sends a name no certificate covers, or none.
    @Test(arguments: [("sni.test", "sni.test"), ("localhost", "localhost")])
    func sniChoosesTheCertificateForTheName(host: String, sent: String) throws {
        let twoNames = try certificates.serverContext(certificates.localhost, others: [certificates.second])
        let pair = try ConnectedPair(client: client, server: twoNames, host: host)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.server.serverName == sent)
    }

    /// RFC 6066 §3: an IP literal is never sent as SNI; the default certificate (which covers
    /// 127.0.0.1 and ::1) is presented.
    @Test(arguments: ["127.0.0.1", "::1", "[::1]"])
    func anIPAddressIsNotSentAsSNI(host: String) throws {
        let twoNames = try certificates.serverContext(certificates.second, others: [certificates.localhost])
        let pair = try ConnectedPair(client: client, server: twoNames, host: host)
        // The default certificate is sni.test's: without SNI it is presented, and refused.
        guard case .failed(.wrongHost(_, let asked, let names)) = pair.handshake().client else {
            Issue.record("the default certificate was not the one presented")
            return
        }
        #expect(asked == "::1" || asked == "127.0.0.1")
        #expect(names == ["sni.test"])
        #expect(pair.server.serverName == nil)

        let localFirst = try certificates.serverContext(certificates.localhost, others: [certificates.second])
        let accepted = try ConnectedPair(client: client, server: localFirst, host: host)
        #expect(accepted.handshake() == (.done, .done))
        #expect(accepted.client.peer == (host == "127.0.0.1" ? "127.0.0.1:8443" : "[::1]:8443"))
    }

    /// RFC 7301 §3.2: the server picks the first of its protocols the client offers.
    @Test func alpnAgreesOnHTTP11() throws {
        let offering = try certificates.clientContext(applicationProtocols: ["h2", "http/1.1"])
        let pair = try ConnectedPair(client: offering, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.client.applicationProtocol == "http/1.1")
    }

    /// RFC 7301 §3.2: "In the event that the server supports no protocols that the client
    /// advertises, then the server SHALL respond with a fatal 'no_application_protocol' alert":
    /// a client of another protocol, or one offering h2 alone to a server without HTTP/2, is
    /// not served HTTP/1.1 (the cross-protocol confusion of the ALPACA attack).
    @Test(arguments: [["h2"], ["ftp", "http/1.0", "h3"]])
    func aClientOfferingNoneOfOurProtocolsGetsNoApplicationProtocol(offered: [String]) throws {
        let offering = try certificates.clientContext(applicationProtocols: offered)
        let pair = try ConnectedPair(client: offering, server: server)
        let (clientEnd, serverEnd) = pair.handshake()
        guard case .failed(.handshakeFailed(_, let reason)) = clientEnd else {
            Issue.record("the handshake did not fail on the client: \(clientEnd)")
            return
        }
        #expect(reason.contains("no application protocol"), "\(reason)")
        guard case .failed = serverEnd else {
            Issue.record("the handshake did not fail on the server: \(serverEnd)")
            return
        }
    }

    /// RFC 7301 §3.1: ALPN is the client's to offer; a client that sends none is served as
    /// before, with no protocol agreed (HTTP/1.1 by default).
    @Test func aClientWithoutALPNIsServed() throws {
        let silent = try certificates.clientContext(applicationProtocols: [])
        let pair = try ConnectedPair(client: silent, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.client.applicationProtocol == nil)
        #expect(pair.server.applicationProtocol == nil)
    }

    // MARK: Session resumption

    /// RFC 8446 §2.2: the second connection to an origin resumes the first's session from a
    /// ticket; a ticket serves one connection (RFC 8446 §C.4), and another port is another origin.
    @Test func theSecondConnectionResumesTheSession() throws {
        let first = try ConnectedPair(client: client, server: server, port: 9001)
        #expect(first.handshake() == (.done, .done))
        #expect(!first.client.isResumed)
        // TLS 1.3 tickets arrive after the handshake: the client takes them in while reading.
        #expect(first.write("response", from: first.server) == .wrote(8))
        #expect(first.readAll(first.client).text == "response")

        let second = try ConnectedPair(client: client, server: server, port: 9001)
        #expect(second.handshake() == (.done, .done))
        #expect(second.client.isResumed)
        #expect(second.server.isResumed)

        // The ticket was used; the second connection's tickets are not read yet.
        let third = try ConnectedPair(client: client, server: server, port: 9001)
        #expect(third.handshake() == (.done, .done))
        #expect(!third.client.isResumed)

        let otherPort = try ConnectedPair(client: client, server: server, port: 9002)
        #expect(otherPort.handshake() == (.done, .done))
        #expect(!otherPort.client.isResumed)
    }

    /// With no session cache, every connection is a full handshake.
    @Test func withoutASessionCacheNothingIsResumed() throws {
        let forgetful = try certificates.clientContext(sessionCacheCapacity: 0)
        let first = try ConnectedPair(client: forgetful, server: server)
        #expect(first.handshake() == (.done, .done))
        #expect(first.write("response", from: first.server) == .wrote(8))
        #expect(first.readAll(first.client).text == "response")
        let second = try ConnectedPair(client: forgetful, server: server)
        #expect(second.handshake() == (.done, .done))
        #expect(!second.client.isResumed)
    }

    // MARK: How a connection ends

    /// RFC 8446 §6.1: a peer that ends with close_notify is closed; the bytes before it all arrive.
    @Test func closeNotifyIsAClose() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.write("the whole body", from: pair.server) == .wrote(14))
        #expect(pair.server.shutdown() == .done)
        let (text, end) = pair.readAll(pair.client)
        #expect(text == "the whole body")
        #expect(end == .closed)
    }

    /// RFC 8446 §6.1, RFC 9112 §9.8: an EOF without close_notify is told apart from a close
    /// (it may be a truncation attack, and never completes a close-delimited body).
    @Test func anEOFWithoutCloseNotifyIsATruncation() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.write("half a bo", from: pair.server) == .wrote(9))
        pair.closeServerSocket()
        let (text, end) = pair.readAll(pair.client)
        #expect(text == "half a bo")
        #expect(end == .closedWithoutNotify)
        #expect(!pair.client.isIdle)
    }

    /// An EOF in the middle of the handshake is a failed handshake, in words.
    @Test func anEOFDuringTheHandshakeFailsIt() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.client.handshake() == .wantRead)
        pair.drainServerSocket()
        pair.closeServerSocket()
        #expect(
            pair.client.handshake()
                == .failed(
                    .handshakeFailed(peer: "127.0.0.1:8443", reason: "the connection was closed during the handshake")))
    }

    /// Sending close_notify on a connection that failed sends nothing and reports done.
    @Test func shutdownAfterAFailureSendsNothing() throws {
        let pair = try ConnectedPair(client: client, server: certificates.serverContext(certificates.expired))
        guard case .failed = pair.handshake().client else {
            Issue.record("the expired certificate was accepted")
            return
        }
        #expect(pair.client.shutdown() == .done)
    }

    // MARK: Reads

    /// Reads of one byte deliver every byte of every record, across record boundaries: the
    /// rest of a record waits inside OpenSSL (``TLSConnection/hasBufferedBytes``).
    @Test func oneByteReadsDeliverEveryByte() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        let large = String(repeating: "0123456789abcdef", count: 2_500)  // 40,000 bytes: three records
        for piece in ["first record", "second", large] {
            #expect(pair.write(piece, from: pair.server) == .wrote(piece.utf8.count))
        }
        var byte: [UInt8] = [0]
        #expect(byte.withUnsafeMutableBytes { pair.client.read(into: $0) } == .bytes(1))
        #expect(pair.client.hasBufferedBytes)
        let (rest, end) = pair.readAll(pair.client, bufferSize: 1)
        let delivered = String(decoding: byte, as: UTF8.self) + rest
        #expect(delivered.utf8.count == 18 + large.utf8.count)
        #expect(delivered == "first recordsecond" + large, "the bytes arrived in another order")
        #expect(end == .wantRead)
        #expect(!pair.client.hasBufferedBytes)
    }

    /// A read that took everything the socket held says so (an event loop then waits for the
    /// next readiness instead of reading again); one that leaves bytes on the socket or inside
    /// OpenSSL does not.
    @Test func aReadSaysWhenTheSocketIsDrained() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.write("GET / HTTP/1.1\r\nHost: a\r\n\r\n", from: pair.client) == .wrote(27))
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        #expect(buffer.withUnsafeMutableBytes { pair.server.read(into: $0) } == .bytes(27))
        #expect(pair.server.hasDrainedSocket)
        let large = String(repeating: "0123456789abcdef", count: 4_000)  // 64,000 bytes: four records
        #expect(pair.write(large, from: pair.client) == .wrote(64_000))
        #expect(buffer.withUnsafeMutableBytes { pair.server.read(into: $0) } == .bytes(16 * 1024))
        #expect(!pair.server.hasDrainedSocket, "records still wait on the socket or inside OpenSSL")
        let (rest, end) = pair.readAll(pair.server)
        #expect(rest.utf8.count == 64_000 - 16 * 1024)
        #expect(end == .wantRead)
        // Pipelined requests, a record each, taken in by one recv: the last one read comes from
        // OpenSSL's buffer, with no recv, so it says nothing of the socket (what came since
        // may have been signalled already, while the first was being answered).
        for request in ["GET /1", "GET /2", "GET /3"] { #expect(pair.write(request, from: pair.client) == .wrote(6)) }
        for _ in 1...3 {
            #expect(buffer.withUnsafeMutableBytes { pair.server.read(into: $0) } == .bytes(6))
            #expect(!pair.server.hasDrainedSocket)
        }
        #expect(buffer.withUnsafeMutableBytes { pair.server.read(into: $0) } == .wantRead)
    }

    /// RFC 9112 §6.3: bytes after a complete response make a kept connection unusable; an
    /// idle one stays usable after the check.
    @Test func aConnectionWithStrayBytesIsNotIdle() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.write("response", from: pair.server) == .wrote(8))
        #expect(pair.readAll(pair.client).text == "response")
        #expect(pair.client.isIdle)
        #expect(pair.write("stray", from: pair.server) == .wrote(5))
        #expect(!pair.client.isIdle)
        #expect(pair.readAll(pair.client).text == "stray")
    }

    // MARK: The blocking layer

    /// The handshake gives up at its deadline when the server says nothing.
    @Test func aSilentServerTimesTheHandshakeOut() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(throws: TLSError.timedOut(peer: "127.0.0.1:8443")) { try pair.client.handshake(timeout: 0.1) }
    }

    /// A read with nothing to read stalls after the stall timeout; bytes and the close that
    /// follow them come through the blocking layer as through the core.
    @Test func aReceiveStallsThenDeliversAndCloses() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        var buffer = [UInt8](repeating: 0, count: 64)
        #expect(buffer.withUnsafeMutableBytes { pair.client.receive(into: $0, stallTimeout: 0.05) } == .stalled)
        let request = Array("GET / HTTP/1.1\r\n\r\n".utf8)
        #expect(request.withUnsafeBytes { pair.client.send($0, stallTimeout: 1) } == nil)
        #expect(buffer.withUnsafeMutableBytes { pair.server.receive(into: $0, stallTimeout: 1) } == .bytes(18))
        #expect(pair.server.shutdown(stallTimeout: 1))
        #expect(buffer.withUnsafeMutableBytes { pair.client.receive(into: $0, stallTimeout: 1) } == .closed)
    }
}
