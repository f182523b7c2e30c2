#if os(Linux)
import CacheSystem
import CacheTestSupport
import CachingProxy
import Dispatch
import Testing

/// An answer whose bytes filled the client's window and whose end came after: the end of a
/// stream is a frame of its own then (an empty DATA frame with END_STREAM), and nghttp2 sends
/// none while the window is spent (RFC 9113 §6.9.1). A client that half-closed can send no
/// WINDOW_UPDATE any more; found by the HTTP/2 server's fuzzer, such a connection was held with no
/// limit (nothing queued, so neither the reset after the client's end nor the zero-window
/// deadline saw it, and an open stream kept the idle deadline off).
@Suite("HTTP/2: an answer's end waiting on a spent window", .timeLimit(.minutes(1)))
struct HTTP2SpentWindowTests {
    /// One HPACK literal field without indexing (RFC 7541 §6.2.2), for short names and values.
    static func literal(_ name: String, _ value: String) -> [UInt8] {
        [0x00, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
    }

    /// A frame (RFC 9113 §4.1).
    static func frame(_ type: UInt8, _ flags: UInt8, _ stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + [UInt8(stream >> 24 & 0x7F), UInt8(stream >> 16 & 0xFF), UInt8(stream >> 8 & 0xFF), UInt8(stream & 0xFF)]
            + payload
    }

    /// The complete frames at the start of `bytes` as (type, stream, payload length, payload).
    static func frames(_ bytes: [UInt8]) -> [(type: UInt8, stream: UInt32, length: Int, payload: [UInt8])] {
        var frames: [(UInt8, UInt32, Int, [UInt8])] = []
        var index = 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            guard index + 9 + length <= bytes.count else { break }
            let stream =
                UInt32(bytes[index + 5] & 0x7F) << 24 | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 8
                | UInt32(bytes[index + 8])
            frames.append((bytes[index + 3], stream, length, Array(bytes[index + 9..<index + 9 + length])))
            index += 9 + length
        }
        return frames
    }

    @Test(
        "RFC 9113 §6.9.1: a streamed answer that fills the 65,535-byte window and ends after, to a client that sends no WINDOW_UPDATE and half-closes: the stream is reset (CANCEL) and the connection closed, not held"
    )
    func endWaitingOnSpentWindowIsNotHeld() async throws {
        try await offPool {
            // The idle deadline far off: only the client's end may close the connection in time.
            let test = try HTTPServerTests.TestServer(
                handler: { _, responder in
                    responder.start(ServerResponseHead(status: 200), framing: .streamed)
                    responder.write([UInt8](repeating: 0x61, count: 65_535))
                    DispatchQueue.global().asyncAfter(deadline: .now() + 0.5) { responder.finish() }
                },
                configure: {
                    $0.http2 = true
                    $0.idleTimeout = 60
                })
            let client = try RawHTTPClient(port: test.port, timeout: 10)
            let block =
                Self.literal(":method", "GET") + Self.literal(":scheme", "http") + Self.literal(":path", "/window")
                + Self.literal(":authority", "example.test")
            // The preface, empty SETTINGS (the default windows, 65,535 bytes) and the request.
            try client.send(
                Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + Self.frame(4, 0, 0, []) + Self.frame(1, 0x05, 1, block)
            )
            func dataBytes() -> Int {
                Self.frames(client.buffer).filter { $0.type == 0 && $0.stream == 1 }.reduce(0) { $0 + $1.length }
            }
            // The window's worth of the answer first (kept in the client's buffer as it comes).
            let deadline = MonotonicClock.seconds() + 10
            while dataBytes() < 65_535 && MonotonicClock.seconds() < deadline && !client.waitForClose(within: 0.05) {}
            #expect(dataBytes() == 65_535, "the window's worth of the answer came first")
            // No WINDOW_UPDATE, and the client's end.
            client.shutdownWrite()
            let started = MonotonicClock.seconds()
            let closed = client.waitForClose(within: 10)
            let seconds = MonotonicClock.seconds() - started
            #expect(closed, "the connection was held for \(seconds) s")
            #expect(seconds < 5, "closed after \(seconds) s")
            let frames = Self.frames(client.buffer)
            let reset = frames.first { $0.type == 3 && $0.stream == 1 }
            #expect(
                reset?.payload == [0, 0, 0, 8],
                "RST_STREAM CANCEL on the stream: \(frames.map { ($0.type, $0.stream) })")
            #expect(!frames.contains { $0.type == 0 && $0.stream == 1 && $0.length == 0 }, "its end never went")
        }
    }
}
#endif
