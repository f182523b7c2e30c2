#if os(Linux)
import CacheSystem
import CacheTLS

/// Why ``UpstreamClient/perform(_:_:)`` failed: a kind to act on, and a sentence for people
/// saying what happened and to what URL.
///
/// ```swift
/// do {
///     try client.perform(request, receiver)
/// } catch where error.kind == .connect && !error.receivedHead {
///     // answer 502 (or serve stale, RFC 5861 stale-if-error); error.description says why
/// }
/// ```
package struct UpstreamError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, by what the caller can do about it.
    package enum Kind: Sendable, Equatable {
        /// No connection: refused, unreachable, name not resolved.
        case connect
        /// No byte within the configured time.
        case timeout
        /// The connection closed or reset before the response was complete (a body shorter than
        /// its `Content-Length`, a chunked body without its last chunk), or before any response.
        case closed
        /// The receiver returned `false`.
        case aborted
        /// TLS to an `https` origin failed: its certificate was refused (expired, not yet valid,
        /// for another host, from an unknown authority), the handshake failed (no TLS 1.2 or
        /// later, an alert), or the TLS connection broke. The description names the origin and
        /// the cause in words.
        case tls
        /// The origin's response could not be parsed, or its framing is ambiguous or not
        /// decoded (`Content-Length` with `Transfer-Encoding`, a coding other than `chunked`,
        /// RFC 9112 §6.1, §6.3): refused before its head reached the receiver, or in the body.
        case protocolError
        /// A request that cannot be sent as given (nothing was sent): a method that is not a
        /// token, a URL that is not `http` or `https` or has user information, a field with CR,
        /// LF or NUL.
        case other
    }
    /// What went wrong.
    package var kind: Kind
    /// What happened and to what URL, e.g. `could not connect to http://127.0.0.1:9/
    /// (Connection refused); is the origin running?`.
    package var description: String
    /// Whether the response head had been delivered to the receiver.
    package var receivedHead: Bool
    /// For ``Kind/connect`` and a ``Kind/timeout`` while connecting: why the connection was
    /// not made, e.g. `Connection refused`.
    package var connectFailure: String? = nil
    /// For ``Kind/connect`` and a ``Kind/timeout`` while connecting: whether the name did not
    /// resolve, the connection timed out, or was refused or unreachable.
    package var connectFailureKind: ConnectFailure.Kind? = nil
    /// For ``Kind/tls`` while connecting: the cause (a certificate refused, a handshake failed).
    package var tlsFailure: TLSError? = nil

    package init(
        kind: Kind, description: String, receivedHead: Bool, connectFailure: String? = nil,
        connectFailureKind: ConnectFailure.Kind? = nil, tlsFailure: TLSError? = nil
    ) {
        self.kind = kind
        self.description = description
        self.receivedHead = receivedHead
        self.connectFailure = connectFailure
        self.connectFailureKind = connectFailureKind
        self.tlsFailure = tlsFailure
    }
}
#endif
