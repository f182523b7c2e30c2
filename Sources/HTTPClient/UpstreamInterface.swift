#if os(Linux)
import CacheSemantics
@_spi(Wire) import HTTPWire

/// A request sent to an origin, exactly as given.
package struct UpstreamRequest: Sendable {
    package var method: String
    /// An absolute `http` or `https` URL.
    package var url: String { didSet { target = nil } }
    /// ``url`` as ``Target/absolute(_:)`` reads it, when the request was made from a target
    /// (``init(method:target:fields:body:)``); `nil` otherwise, and once ``url`` is set.
    private(set) var target: Target?
    /// Sent in this order, repeated names kept; nothing is added (no `Accept`, no
    /// `Accept-Encoding`, no `Expect`), `Host` included when given.
    package var fields: HeaderFields
    /// The request body; `nil` when the request has none.
    package var body: [UInt8]?
    /// When set, a proxy (`http://host[:port]`) the request goes through. An `http` URL is
    /// sent to it as given, as its absolute-form request-target (RFC 9112 §3.2.2); an `https`
    /// URL goes through a tunnel the proxy opens to the origin (`CONNECT host:port`, RFC 9110
    /// §9.3.6), then TLS to the origin over it, and is sent in origin-form as to the origin
    /// itself (unless ``tunnelsThroughProxy`` is false).
    package var proxy: String?
    /// Whether an `https` URL goes to ``proxy`` through a `CONNECT` tunnel (`true`, as every
    /// client of a proxy does), or in absolute-form like an `http` one (`false`: a request meant
    /// for the proxy itself, such as `PURGE https://…`).
    package var tunnelsThroughProxy = true

    package init(
        method: String, url: String, fields: HeaderFields, body: [UInt8]? = nil, proxy: String? = nil,
        tunnelsThroughProxy: Bool = true
    ) {
        self.method = method
        self.url = url
        self.fields = fields
        self.body = body
        self.proxy = proxy
        self.tunnelsThroughProxy = tunnelsThroughProxy
    }

    /// A request for `target`'s URL, straight to the origin: the URL, already read, is not
    /// read again when the request is sent.
    package init(method: String, target: Target, fields: HeaderFields, body: [UInt8]? = nil) {
        self.init(method: method, url: target.url, fields: fields, body: body)
        self.target = target
    }
}

/// Receives one upstream response as it arrives, on the thread that called
/// ``UpstreamClient/perform(_:_:)``.
package protocol UpstreamReceiver: AnyObject {
    /// An interim (1xx) response head before the final one (RFC 9110 §15.2).
    func receive(interim: UpstreamResponseHead)
    /// The final response head. Return `false` to stop (the transfer is aborted).
    func receive(head: UpstreamResponseHead) -> Bool
    /// The next bytes of the body (as sent: never decoded, never de-compressed; de-chunked).
    /// Return `false` to stop.
    func receive(body: UnsafeRawBufferPointer) -> Bool
    /// The thread is about to wait for more of the response from the origin: what was received
    /// so far is all there is for now.
    func willWait()
}

extension UpstreamReceiver {
    /// Interim responses are skipped unless the receiver relays them.
    package func receive(interim: UpstreamResponseHead) {}
    /// Nothing to do before a wait unless the receiver holds back what it received.
    package func willWait() {}
}
#endif
