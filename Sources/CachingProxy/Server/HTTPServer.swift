// SKELETON: the signatures the proxy uses; the server helper replaces the bodies.
import CacheSemantics

/// Answers one request; callable from any thread.
package final class Responder: @unchecked Sendable {
    /// Sends a complete response: `body` with `Content-Length`, or no body when `framing` is
    /// `.none` (answers to HEAD, 204, 304).
    package func respond(_ head: ServerResponseHead, body: [UInt8], framing: BodyFraming? = nil) { fatalError() }
    /// Sends the head; the body follows through ``write(_:)-(UnsafeRawBufferPointer)`` and ``finish()``.
    package func start(_ head: ServerResponseHead, framing: BodyFraming) { fatalError() }
    /// Appends body bytes. Off the loop thread it blocks while too much waits to be sent.
    /// `false` once the client is gone.
    @discardableResult package func write(_ bytes: UnsafeRawBufferPointer) -> Bool { fatalError() }
    @discardableResult package func write(_ bytes: [UInt8]) -> Bool { fatalError() }
    /// Ends the body.
    package func finish() { fatalError() }
    /// Ends the response early by closing the connection.
    package func abort() { fatalError() }
    package var isClientGone: Bool { fatalError() }
    /// Answers `200` to a `CONNECT` and relays bytes between the client and `fd` (a connected
    /// socket) until either side closes; the server owns `fd` from then on.
    package func tunnel(to fd: Int32) { fatalError() }
}

/// An HTTP/1.1 server on epoll.
package final class HTTPServer: Sendable {
    package struct Configuration: Sendable {
        package var host = "127.0.0.1"
        package var port: UInt16 = 0
        package var loops = 1
        package var maxHeaderBytes = 16 * 1024
        package var maxFieldCount = 100
        package var maxBodyBytes: Int64 = 8 << 20
        package var headerTimeout = 10.0
        package var idleTimeout = 60.0
        package var bodyTimeout = 30.0
        package var maxConnections = 4096
        package init() {}
    }

    package struct Statistics: Sendable {
        package var connectionsOpen = 0
        package var connectionsAccepted = 0
        package var connectionsRefused = 0
        package var requests = 0
        package var requestsRejected = 0
    }

    package init(
        configuration: Configuration, handler: any RequestHandler, log: @escaping @Sendable (String) -> Void
    ) throws(ServerError) { fatalError() }
    package var port: UInt16 { fatalError() }
    package func start() { fatalError() }
    package func shutdown(timeout: Double) { fatalError() }
    package var statistics: Statistics { fatalError() }
}

package struct ServerError: Error, CustomStringConvertible, Sendable {
    package var description: String
}
