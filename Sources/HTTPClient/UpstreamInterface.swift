#if os(Linux)
import CacheSemantics
@_spi(Wire) import HTTPWire

/// A request the proxy sends to an origin, exactly as given.
package struct UpstreamRequest: Sendable {
    package var method: String
    /// An absolute `http` URL.
    package var url: String
    /// Sent in this order, repeated names kept; nothing is added (no `Accept`, no
    /// `Accept-Encoding`, no `Expect`), `Host` included when given.
    package var fields: HeaderFields
    /// The request body; `nil` when the request has none.
    package var body: [UInt8]?
    /// When set, a proxy (`http://host[:port]`) the request is sent to with `url`, exactly as
    /// given, as its absolute-form request-target (RFC 9112 §3.2.2), rather than to `url`'s
    /// origin in origin-form.
    package var proxy: String?

    package init(method: String, url: String, fields: HeaderFields, body: [UInt8]? = nil, proxy: String? = nil) {
        self.method = method
        self.url = url
        self.fields = fields
        self.body = body
        self.proxy = proxy
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
}

extension UpstreamReceiver {
    /// Interim responses are skipped unless the receiver relays them.
    package func receive(interim: UpstreamResponseHead) {}
}
#endif
