#if os(Linux)
import CacheSemantics
import CacheSystem
@_spi(Wire) import HTTPWire

/// A request as ``HTTPServer`` parsed it: head in wire order and the whole body.
package struct ServerRequest: Sendable {
    /// The method token, as sent (case-sensitive, RFC 9110 §9.1).
    package var method: String
    /// The request-target, as sent: origin-form (`/a?b`), absolute-form (`http://h/a`),
    /// authority-form (`h:443`, CONNECT only) or `*` (RFC 9112 §3.2).
    package var target: String
    /// `2` for HTTP/2 (one stream), `1` for HTTP/1.x.
    package var majorVersion: Int
    /// `1` for HTTP/1.1, `0` for HTTP/1.0 (and HTTP/2).
    package var minorVersion: Int
    /// Field lines in the order received, repeated names kept, values trimmed of OWS.
    package var fields: HeaderFields
    /// The body, de-chunked; empty when the request has none.
    package var body: [UInt8]
    /// Whether the client connected from 127.0.0.0/8 or ::1.
    package var peerIsLoopback: Bool
    /// The client's address, as the connection was accepted from it; `nil` when unknown.
    package var peerAddress: SocketAddress?
    /// Whether the request came over TLS (the server's TLS listener).
    package var isTLS: Bool

    package init(
        method: String, target: String, majorVersion: Int = 1, minorVersion: Int = 1, fields: HeaderFields,
        body: [UInt8] = [], peerIsLoopback: Bool = true, peerAddress: SocketAddress? = nil, isTLS: Bool = false
    ) {
        self.method = method
        self.target = target
        self.majorVersion = majorVersion
        self.minorVersion = minorVersion
        self.fields = fields
        self.body = body
        self.peerIsLoopback = peerIsLoopback
        self.peerAddress = peerAddress
        self.isTLS = isTLS
    }

    /// The version as `Via` names it (RFC 9110 §7.6.3): `1.0`, `1.1` or `2`.
    package var version: String { majorVersion == 2 ? "2" : minorVersion == 0 ? "1.0" : "1.1" }
}

/// How a response's body is delimited on the wire.
package enum BodyFraming: Sendable, Equatable {
    /// No body follows the head whatever its fields say: answers to `HEAD`, `1xx`, `204`,
    /// `304` (RFC 9112 §6.3). The head's own `Content-Length` is sent as given.
    case none
    /// Exactly this many bytes follow; the server writes `Content-Length` itself.
    case length(Int64)
    /// Length unknown in advance: chunked to HTTP/1.1 clients, delimited by closing the
    /// connection for HTTP/1.0 clients.
    case streamed
}

/// The status line and fields of a response the handler gives the server. The server drops
/// `Connection`, `Keep-Alive`, `Transfer-Encoding` and (unless framing is `.none`)
/// `Content-Length` from `fields`, and writes its own.
package struct ServerResponseHead: Sendable {
    package var status: Int
    /// The reason phrase; the standard one for `status` when `nil`.
    package var reason: String?
    /// The fields, after ``leadingFields``.
    package var fields: HeaderFields
    /// Fields that go before ``fields``: a stored response's own, kept apart from the few each
    /// answer adds so that a hit does not copy them.
    package var leadingFields = HeaderFields()
    /// The first `count` of ``leadingFields`` then ``fields`` as `EventLoop.serializedFields(_:)`
    /// wrote them (an HTTP/1.1 answer with a body length sends these bytes in their place);
    /// `nil` when none are.
    package var serializedFields: (bytes: [UInt8], count: Int)?

    /// The value of the field `name` in ``fields``, else in ``leadingFields``.
    package func value(_ name: HeaderField.Name) -> String? { fields[name] ?? leadingFields[name] }

    package init(status: Int, reason: String? = nil, fields: HeaderFields = [:]) {
        self.status = status
        self.reason = reason
        self.fields = fields
    }
}

/// How one response ended, as ``Responder/observeCompletion(requestIsHead:_:)`` reports it.
package struct ResponseCompletion: Sendable {
    /// The final response's head; `nil` when none was sent (the client went away first, or the
    /// request was never answered).
    package var head: ServerResponseHead?
    /// Body bytes handed to the connection (none for HEAD, 1xx, 204, 304; at most the
    /// announced length).
    package var bodyBytes: Int64 = 0
    /// Every byte of the response was handed to the connection while the client was there.
    package var completed = false
    /// Seconds spent waiting for an origin's response head; `nil` when no origin was asked.
    package var originTime: Double?
}

/// What the server calls for every complete request.
package protocol RequestHandler: AnyObject, Sendable {
    /// Called on the connection's event-loop thread once the request's body has been read in
    /// full. Must not block: answer through `responder` at once (from this thread) or later
    /// from any thread. Every request must be answered exactly once (or aborted).
    func handle(_ request: ServerRequest, _ responder: Responder)

    /// Called on the event-loop thread once for each request the server answered itself
    /// instead of handing it on: malformed, too large or too slow (`400`, `408`, `413`, `414`,
    /// `431`, `501`…). `request` holds what was read of it: its method and request-target once
    /// its request-line was read, else `-` for both; fields once its head was complete.
    /// `bodyBytes`: the length of the server's answer's body. Must not block.
    func rejected(_ request: ServerRequest, status: Int, bodyBytes: Int)
}

extension RequestHandler {
    /// Nothing: a handler that keeps no record of refused requests.
    package func rejected(_ request: ServerRequest, status: Int, bodyBytes: Int) {}
}

extension RequestHeadParser {
    /// The complete head as a ``ServerRequest`` (without its body); `base` is the start of
    /// the request the head was parsed from.
    func makeRequest(_ base: UnsafePointer<UInt8>, peer: Connection, isTLS: Bool) -> ServerRequest {
        let head = parsedHead(base)
        return ServerRequest(
            method: head.method, target: head.target, minorVersion: head.minorVersion, fields: head.fields,
            peerIsLoopback: peer.peerIsLoopback, peerAddress: peer.peerAddress, isTLS: isTLS)
    }
}
#endif
