import Foundation
import HTTPCacheCore

#if os(Linux)
import CacheSystem
#elseif canImport(HTTPCaching)
import HTTPCaching
#endif

/// How the command-line tool reaches origins: on Linux the package's own HTTP client
/// (`HTTPClientTransport`, TLS on OpenSSL), so that the process never loads FoundationNetworking
/// and libcurl; elsewhere URLSession.
enum Network {
    /// The option of the fetching commands: `--cacert FILE` (repeatable), a PEM file of
    /// certificate authorities trusted for https origins besides the system's.
    static let specs: [OptionSpec] = [.value("--cacert")]

    /// The transport of a fetching command, trusting the `--cacert` files besides the system's
    /// store. Each request's `--timeout` goes with the request.
    /// - Throws: ``Failure`` when a `--cacert` file cannot be read or holds no certificate.
    static func transport(trusting files: [String], command: String) throws(Failure) -> any OriginTransport {
        #if os(Linux)
        var configuration = HTTPClientTransport.Configuration()
        configuration.trustedCertificateFiles = files
        configuration.trustAdvice = "--cacert FILE"
        // `--cacert` files are read now, so that one that cannot be used is a usage error
        // before anything else happens; without them, nothing can fail until a request is sent.
        guard files.isEmpty else {
            let transport = HTTPClientTransport(configuration: configuration)
            if let failure = transport.setupFailure { throw .usage(command, "--cacert: \(failure)") }
            return transport
        }
        return FirstUseTransport { [configuration] in HTTPClientTransport(configuration: configuration) }
        #else
        guard files.isEmpty else {
            throw .usage(command, "--cacert is for Linux; on Apple platforms add the CA to the system's trust settings")
        }
        return URLRequestTransport(URLSessionTransport())
        #endif
    }
}

#if os(Linux)
/// A transport made when the first request is sent: a command answered from the cache alone (a
/// hit) does not set up the HTTP client, whose making costs a short-lived process more than
/// the hit (0.7M instructions, most of them the Swift runtime's first look-ups of the
/// conformances of the client's types).
final class FirstUseTransport: OriginTransport {
    private let make: @Sendable () -> any OriginTransport
    private let made = Locked<(any OriginTransport)?>(nil)

    init(_ make: @escaping @Sendable () -> any OriginTransport) { self.make = make }

    func send(_ request: FetchRequest) async throws -> OriginResponse {
        let transport = made.withLock { made in
            if let made { return made }
            let transport = make()
            made = transport
            return transport
        }
        return try await transport.send(request)
    }
}
#endif
