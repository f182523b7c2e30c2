// SKELETON: the signatures the proxy uses; the upstream helper replaces the bodies.
package struct UpstreamError: Error, CustomStringConvertible, Sendable {
    package enum Kind: Sendable, Equatable {
        /// No connection: refused, unreachable, name not resolved.
        case connect
        /// No byte within the configured time.
        case timeout
        /// The connection closed or reset before the response was complete.
        case closed
        /// The receiver returned `false`.
        case aborted
        /// The origin's response could not be parsed.
        case protocolError
        case other
    }
    package var kind: Kind
    package var description: String
    /// Whether the response head had been delivered to the receiver.
    package var receivedHead: Bool
}

/// Sends requests to origins with libcurl, fields and bytes passed through exactly.
package final class UpstreamClient: Sendable {
    package struct Configuration: Sendable {
        package var connectTimeout = 10.0
        /// Abort when no byte arrives for this long.
        package var stallTimeout = 60.0
        package var maxIdleHandles = 64
        package init() {}
    }
    package init(configuration: Configuration = .init()) { fatalError() }
    /// Blocking: sends `request` and delivers the response to `receiver` on this thread.
    package func perform(_ request: UpstreamRequest, _ receiver: some UpstreamReceiver) throws(UpstreamError) {
        fatalError()
    }
}
