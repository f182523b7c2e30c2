#if os(Linux)
import CacheTLS
import CacheTestSupport
@testable import CachingProxy
@_spi(Wire) import HTTPWire
import Glibc
import Testing

/// The event loop's TLS handshake driven step by step, as epoll could order it: a client's
/// Finished and its first request taken from the socket by a step that no read woke.
@Suite struct TLSHandshakeWakeTests {
    @Test(
        "A handshake step woken for writing that reads the client's Finished and its request with it reads that request (RFC 8446 §4.4.4: the client sends data right after its Finished); before, the request waited inside OpenSSL until the header timeout closed the connection"
    )
    func requestTakenByAStepNotWokenForReading() throws {
        var pair: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &pair) == 0)
        defer { pair.forEach { Glibc.close($0) } }
        let certificates = try TestCertificates.shared()
        // Records what reaches it and answers nothing: the test looks at what arrived.
        let recorder = HTTPServerTests.RecordingHandler { _, _ in }
        var configuration = HTTPServer.Configuration()
        configuration.loops = 1
        let loop = EventLoop(
            configuration: configuration, listenFD: -1, tlsListenFD: -1, shareListener: false, handler: recorder,
            log: { _ in }, limitedLog: LogLimiter(clock: configuration.clock, { _ in }),
            counters: ConnectionCounters(maxConnections: 8))
        defer { loop.discard() }
        let connection = Connection(
            fd: pair[0], generation: 1, peerIsLoopback: true, peerAddress: nil,
            parser: RequestHeadParser(maxHeaderBytes: 16 * 1024, maxFieldCount: 100, maxBodyBytes: 0))
        connection.state.tls = try certificates.serverContext(certificates.localhost).connection(fd: pair[0])
        connection.state.phase = .handshake
        let client = try certificates.clientContext().connection(fd: pair[1], host: "localhost", port: 443)

        // The ClientHello; the server's step reads it, sends its flight and waits to read.
        guard case .wantRead = client.handshake() else { Issue.record("the ClientHello was not sent"); return }
        loop.drive(connection)
        #expect(!connection.state.canRead && connection.state.phase == .handshake)
        // The client verifies the flight, sends its Finished, then its request at once.
        guard case .done = client.handshake() else { Issue.record("the client's handshake did not finish"); return }
        let request = Array("GET /first HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
        let written = request.withUnsafeBytes { client.write($0) }
        guard case .wrote(request.count) = written else { Issue.record("the request was not sent: \(written)"); return }

        // The loop is woken for writing only: the read edge these bytes made was reported
        // before they came (they arrived between epoll_wait and this step). The step reads
        // them all, so no other edge will come.
        connection.state.canWrite = true
        loop.drive(connection)
        #expect(recorder.targets == ["/first"], "phase \(connection.state.phase)")
        #expect(connection.state.phase == .handling)
    }
}
#endif
