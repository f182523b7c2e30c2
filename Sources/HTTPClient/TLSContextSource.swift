#if os(Linux)
import CacheSystem
import CacheTLS

/// Where a client's TLS context comes from: made already, or made when the first `https`
/// connection needs it. Loading the system's trust store parses every certificate in it, which
/// costs a short-lived process that fetches only `http` (a page saved from a plain origin, say)
/// more CPU than its first requests; when it cannot be loaded, only `https` requests fail.
final class TLSContextSource: Sendable {
    private let configuration: UpstreamClient.Configuration
    private let made: Locked<Result<TLSClientContext, UpstreamError>?>

    /// A context made already; `configuration` is the one it was made for.
    init(_ context: TLSClientContext, of configuration: UpstreamClient.Configuration) {
        self.configuration = configuration
        made = Locked(.success(context))
    }

    /// The context of `configuration` (the system's trust store and its extra trust roots),
    /// made on first use.
    init(lazy configuration: UpstreamClient.Configuration) {
        self.configuration = configuration
        made = Locked(nil)
    }

    /// The context, made now if it was not yet (once: a failure is kept and thrown again).
    /// - Throws: ``UpstreamError/Kind/tls`` saying why it cannot be made.
    func context() throws(UpstreamError) -> TLSClientContext {
        try made.withLock { made throws(UpstreamError) in
            if made == nil {
                made = Result { () throws(UpstreamError) in try UpstreamClient.tlsContext(configuration) }
            }
            return try made!.get()
        }
    }
}
#endif
