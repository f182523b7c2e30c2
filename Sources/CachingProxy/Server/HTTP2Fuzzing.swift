#if os(Linux)
// The entry point of the HTTP/2 server fuzzer (Fuzz/Sources/FuzzHTTP2Server): a server of the
// package's own on 127.0.0.1, HTTP/2 on, whose handler answers every way a handler can, and a
// client connection per input. Not API: `@_spi(Fuzzing)` keeps it out of everyone's sight.
import CacheSemantics
import CacheSystem
import Glibc

/// An HTTP/2 server for the fuzzer, started once per process.
@_spi(Fuzzing) public final class FuzzingHTTP2Server: Sendable {
    private let server: HTTPServer

    /// Starts the server; nil when it cannot listen.
    public init?() {
        var configuration = HTTPServer.Configuration()
        configuration.http2 = true
        configuration.loops = 1
        configuration.headerTimeout = 2
        configuration.idleTimeout = 2
        configuration.bodyTimeout = 2
        guard let server = try? HTTPServer(configuration: configuration, handler: FuzzingHandler(), log: { _ in })
        else { return nil }
        self.server = server
        server.start()
    }

    /// The server's port on 127.0.0.1.
    public var port: UInt16 { server.port }

    /// Whether the loop is still alive and counting: requests handed to the handler so far.
    public var requests: Int { server.statistics.requests }
}

/// Answers by the path's first letter after `/`: every way a handler can answer a stream.
private final class FuzzingHandler: RequestHandler {
    func handle(_ request: ServerRequest, _ responder: Responder) {
        let head = ServerResponseHead(status: 200, fields: ["Content-Type": "text/plain", "X-Path": "kept"])
        switch request.target.utf8.dropFirst().first {
        case UInt8(ascii: "s"):
            responder.respond(head, body: Array("small".utf8))
        case UInt8(ascii: "b"):
            responder.respond(head, body: [UInt8](repeating: 0x62, count: 70_000))
        case UInt8(ascii: "h"):
            responder.respond(ServerResponseHead(status: 304), body: [], framing: BodyFraming.none)
        case UInt8(ascii: "i"):
            responder.interim(ServerResponseHead(status: 103, fields: ["Link": "</s>; rel=preload"]))
            responder.respond(head, body: Array("after hints".utf8))
        case UInt8(ascii: "a"):
            responder.start(head, framing: .length(100))
            responder.write(Array("part".utf8))
            responder.abort()
        case UInt8(ascii: "n"):
            responder.start(head, framing: .length(10))
            responder.write(Array("short".utf8))
            responder.finish()
        case UInt8(ascii: "r"):
            // Released without an answer: the stream is reset.
            break
        case UInt8(ascii: "t"):
            // From another thread, as the proxy answers a miss: streamed, in pieces.
            _ = try? SystemThread.detached(name: "fuzz-answer") {
                responder.start(head, framing: .streamed)
                for piece in 0..<3 where !responder.isClientGone {
                    responder.write([UInt8](repeating: UInt8(0x30 + piece), count: 20_000))
                }
                responder.finish()
            }
        default:
            responder.respond(ServerResponseHead(status: 404), body: Array("not here".utf8))
        }
    }
}
#endif
