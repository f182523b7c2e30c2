import Foundation
import HTTPCacheCore

#if !os(Linux) && canImport(HTTPCaching)
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
        let transport = HTTPClientTransport(configuration: configuration)
        if let failure = transport.setupFailure { throw .usage(command, "--cacert: \(failure)") }
        return transport
        #else
        guard files.isEmpty else {
            throw .usage(command, "--cacert is for Linux; on Apple platforms add the CA to the system's trust settings")
        }
        return URLRequestTransport(URLSessionTransport())
        #endif
    }
}
