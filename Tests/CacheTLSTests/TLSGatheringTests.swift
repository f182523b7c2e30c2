import CacheTLS
import CacheTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: Records gathered

/// Records gathered and sent together (``TLSConnection/cork()``), and TLS 1.3's session
/// tickets held until the first write (``TLSConnection/handshake(holdingLast:)``): nothing
/// leaves before its time, everything leaves in order, and a full socket loses nothing.
extension TLSConnectionTests {
    /// Four records written while corked stay in the connection (nothing reaches the socket)
    /// and leave together at uncork, in order.
    @Test func corkedRecordsLeaveTogetherAtUncork() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.readAll(pair.client).end == .wantRead)  // the session tickets, taken in
        let body = String(repeating: "0123456789abcdef", count: 3_000)  // 48,000 bytes: three records
        pair.server.cork()
        #expect(pair.write("HTTP/1.1 200 OK\r\n\r\n", from: pair.server) == .wrote(19))
        #expect(pair.write(body, from: pair.server) == .wrote(48_000))
        #expect(pair.bytesOnClientSocket == 0, "a corked record was sent")
        #expect(pair.server.unsentCount > 48_019)
        #expect(pair.server.uncork() == .done)
        #expect(pair.server.unsentCount == 0)
        #expect(pair.bytesOnClientSocket > 48_019)
        let (text, end) = pair.readAll(pair.client)
        #expect(text == "HTTP/1.1 200 OK\r\n\r\n" + body, "the bytes arrived in another order")
        #expect(end == .wantRead)
    }

    /// The buffer records are gathered in is given back once they are sent, unless the
    /// connection keeps it (a busy HTTP/2 connection): then it stays through several flushes,
    /// and a long body still leaves whole and in order; cleared, the empty buffer goes at once.
    @Test func aKeptGatheringBufferStaysUntilReleased() throws {
        // 128,000 bytes: past the 64 KiB gathered, so some leave before uncork.
        let long = String(repeating: "fedcba9876543210", count: 8_000)
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.readAll(pair.client).end == .wantRead)
        for keeps in [false, true, true] {
            pair.server.keepsBuffer = keeps
            pair.server.cork()
            #expect(pair.write(long, from: pair.server) == .wrote(128_000))
            #expect(pair.server.uncork() == .done)
            #expect(pair.server.unsentCount == 0)
            #expect(pair.server.holdsBuffer == keeps, keeps ? "the kept buffer was given back" : "a buffer stayed")
            #expect(pair.readAll(pair.client).text == long, "the bytes arrived in another order")
        }
        pair.server.keepsBuffer = false
        #expect(!pair.server.holdsBuffer, "the empty buffer stayed once no longer kept")
    }

    /// At most 64 KiB wait: a corked write beyond that sends what waits first, so a long body
    /// is not held whole.
    @Test func gatheringSendsOnceItHoldsSixtyFourKiB() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.readAll(pair.client).end == .wantRead)
        let body = String(repeating: "0123456789abcdef", count: 8_000)  // 128,000 bytes
        pair.server.cork()
        #expect(pair.write(body, from: pair.server) == .wrote(128_000))
        #expect(pair.bytesOnClientSocket > 0, "nothing left before uncork")
        #expect(pair.server.unsentCount <= 64 * 1024)
        #expect(pair.server.uncork() == .done)
        #expect(pair.readAll(pair.client).text == body)
    }

    /// A socket that takes nothing more keeps the gathered records in the connection: uncork
    /// says to wait for writability, and once the peer reads, the rest leaves, in order.
    @Test func aFullSocketKeepsWhatWaits() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake() == (.done, .done))
        #expect(pair.readAll(pair.client).end == .wantRead)
        var sent: [UInt8] = []
        var blocked = false
        // Corked writes until the socket is full: a write that would pass 64 KiB must send
        // first, and waits once the socket takes no more.
        pair.server.cork()
        for round in 0..<2_000 where !blocked {
            let piece = [UInt8](repeating: UInt8(ascii: "a") + UInt8(round % 26), count: 10_000)
            var offset = 0
            while offset < piece.count {
                let result = piece.withUnsafeBytes {
                    pair.server.write(UnsafeRawBufferPointer(rebasing: $0[offset...]))
                }
                guard case .wrote(let count) = result else {
                    #expect(result == .wantWrite)
                    blocked = true
                    break
                }
                sent += piece[offset..<offset + count]
                offset += count
            }
        }
        #expect(blocked, "the socket never filled")
        #expect(pair.server.uncork() == .wantWrite)
        #expect(pair.server.unsentCount > 0)
        // The client reads; the server sends what waits whenever it can.
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        for _ in 0..<100_000 {
            let result = buffer.withUnsafeMutableBytes { pair.client.read(into: $0) }
            if case .bytes(let count) = result {
                received += buffer[0..<count]
                continue
            }
            #expect(result == .wantRead)
            if pair.server.uncork() == .done && pair.server.unsentCount == 0 && received.count == sent.count { break }
        }
        #expect(pair.server.unsentCount == 0)
        #expect(received.count == sent.count)
        #expect(received == sent, "the bytes arrived in another order")
    }

    /// RFC 8446 §4.6.1: the tickets a TLS 1.3 server writes as its handshake completes are
    /// held, and leave with the first write; the client takes them in and resumes with one.
    @Test func heldTicketsLeaveWithTheFirstWrite() throws {
        let first = try ConnectedPair(client: client, server: server, port: 9101)
        #expect(first.handshake(serverHolds: true) == (.done, .done))
        #expect(first.server.protocolVersion == "TLSv1.3")
        #expect(first.server.unsentCount > 0, "no ticket was held")
        #expect(first.bytesOnClientSocket == 0, "a held ticket was sent")
        first.server.cork()
        #expect(first.write("response", from: first.server) == .wrote(8))
        #expect(first.server.uncork() == .done)
        #expect(first.server.unsentCount == 0)
        #expect(first.readAll(first.client).text == "response")
        try expectResumption(port: 9101)
    }

    /// An uncorked write after held tickets sends them first: they still arrive, before it.
    @Test func anUncorkedWriteSendsHeldTicketsFirst() throws {
        let first = try ConnectedPair(client: client, server: server, port: 9102)
        #expect(first.handshake(serverHolds: true) == (.done, .done))
        #expect(first.server.unsentCount > 0)
        #expect(first.write("response", from: first.server) == .wrote(8))
        #expect(first.server.unsentCount == 0)
        #expect(first.readAll(first.client).text == "response")
        try expectResumption(port: 9102)
    }

    /// A second connection to `port` resumes: the held tickets reached the client whole.
    private func expectResumption(port: UInt16) throws {
        let second = try ConnectedPair(client: client, server: server, port: port)
        #expect(second.handshake() == (.done, .done))
        #expect(second.client.isResumed)
    }

    /// close_notify goes after whatever waits: held tickets and gathered records arrive, then
    /// the close (RFC 8446 §6.1).
    @Test func shutdownSendsWhatWaitsThenCloseNotify() throws {
        let pair = try ConnectedPair(client: client, server: server)
        #expect(pair.handshake(serverHolds: true) == (.done, .done))
        pair.server.cork()
        #expect(pair.write("last words", from: pair.server) == .wrote(10))
        #expect(pair.bytesOnClientSocket == 0)
        #expect(pair.server.shutdown() == .done)
        #expect(pair.server.unsentCount == 0)
        let (text, end) = pair.readAll(pair.client)
        #expect(text == "last words")
        #expect(end == .closed)
    }
}
