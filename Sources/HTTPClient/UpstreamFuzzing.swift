#if os(Linux)
// The one entry point of the libFuzzer target FuzzResponseStream (Fuzz/) into this module: the
// upstream client over sockets the fuzzer makes, plain or with TLS. Driving it, and deciding
// what the answers should be, is the Fuzz package's work.
import CacheSemantics
import CacheSystem
import CacheTLS
@_spi(Wire) import HTTPWire

/// The proxy's ``UpstreamClient`` with connections from `connect` (one end of a socketpair the
/// fuzzer writes to), pooled as usual; over TLS when given a trust root. Not API.
@_spi(Fuzzing) public final class FuzzingUpstreamClient: Sendable {
    private let client: UpstreamClient
    private let url: String

    /// - Parameters:
    ///   - limits: The response framer's limits.
    ///   - readSize: The most bytes one `recv` asks for.
    ///   - stallTimeout: Seconds without a byte before an exchange fails.
    ///   - tls: TLS to `https://localhost/`, trusting this context's authorities, with
    ///     `readSize` the most bytes one read takes from TLS; nil: plain `http://fuzz.test/`.
    ///   - connect: A connected socket, or nil for a refused connection.
    public init(
        limits: ResponseFramer.Limits, readSize: Int, stallTimeout: Double, tls: TLSClientContext? = nil,
        connect: @escaping @Sendable () -> Int32?
    ) {
        var configuration = UpstreamClient.Configuration()
        configuration.stallTimeout = stallTimeout
        configuration.idleConnectionLifetime = 3600
        url = tls == nil ? "http://fuzz.test/" : "https://localhost/"
        client = UpstreamClient(configuration: configuration, tls: tls, limits: limits, readSize: readSize) { _, _, _ in
            guard let fd = connect() else {
                return .failure(OriginSocket.Failure(kind: .unresolved, description: "the fuzzer made no socket"))
            }
            return .success(fd)
        }
    }

    /// Sends `method` for the URL (no body, `Host` only); the receiver stops at the head,
    /// or once it has `stopAfterBodyBytes` bytes, when asked.
    /// - Returns: The final head and the body received, and the error (its kind in words,
    ///   its description, whether the head had arrived) unless the exchange completed.
    public func perform(method: String, stopAtHead: Bool, stopAfterBodyBytes: Int?) -> (
        head: UpstreamResponseHead?, body: [UInt8], error: (kind: String, description: String, receivedHead: Bool)?
    ) {
        let collector = ResponseCollector(stopAtHead: stopAtHead, stopAfterBodyBytes: stopAfterBodyBytes)
        var failure: (kind: String, description: String, receivedHead: Bool)?
        do {
            try client.perform(UpstreamRequest(method: method, url: url, fields: [:]), collector)
        } catch {
            failure = ("\(error.kind)", error.description, error.receivedHead)
        }
        return (collector.heads.first, collector.body, failure)
    }
}
#endif
