#if os(Linux)
import CacheSemantics
import CacheSystem

/// Opening TCP connections to origins: for the upstream client (``UpstreamClient``), the origin
/// side of a `CONNECT` tunnel (RFC 9110 §9.3.6), and the proxy for `purge --proxy`.
package enum OriginSocket {
    /// Why no connection was made.
    package struct Failure: Error, CustomStringConvertible {
        package var kind: ConnectFailure.Kind
        /// What happened, e.g. `Connection refused` or `the name a.test could not be resolved (…)`.
        package var description: String
    }

    /// `host:port` (or `[v6]:port`) from an authority-form target (RFC 9112 §3.2.3) or an
    /// `http` URL's authority (`host[:port]`, then `defaultPort` when it has none); `nil` when it
    /// is not `host[:port]` (RFC 3986 §3.2.2–§3.2.3) or names no port.
    package static func authority(_ target: String, defaultPort: UInt16? = nil) -> (host: String, port: UInt16)? {
        guard let authority = try? URIAuthority(target), let port = authority.port ?? defaultPort else { return nil }
        return (authority.lookupHost, port)
    }

    /// A connected TCP socket to `host:port` (``Socket/connected(host:port:timeout:blocking:)``:
    /// each address in turn, `TCP_NODELAY` and close-on-exec set), failures in the proxy's words.
    /// - Parameters:
    ///   - timeout: Seconds for the whole attempt; 0 or less: no bound.
    ///   - blocking: Whether the socket is returned in blocking mode (else `O_NONBLOCK` stays set).
    package static func connect(host: String, port: UInt16, timeout: Double, blocking: Bool = true) -> Result<
        Int32, Failure
    > {
        Socket.connected(host: host, port: port, timeout: timeout, blocking: blocking).mapError { failure in
            switch failure.kind {
            case .unresolved:
                Failure(kind: failure.kind, description: "the name \(host) could not be resolved (\(failure.reason))")
            case .timedOut: Failure(kind: failure.kind, description: "no answer within \(seconds(timeout))")
            case .failed: Failure(kind: failure.kind, description: failure.reason)
            }
        }
    }

    /// `10 s`, `0.5 s`.
    package static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? "\(Int(value)) s" : "\(value) s"
    }
}
#endif
