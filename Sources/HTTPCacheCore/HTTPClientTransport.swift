#if os(Linux)
import CacheSemantics
import CacheSystem
import Foundation
import HTTPClient
@_spi(Wire) import HTTPWire

/// An ``OriginTransport`` on the package's own HTTP/1.1 client, with TLS on OpenSSL 3 for
/// `https`: ``HTTPCache``'s network on Linux unless you pass another (HTTPCaching's
/// `URLSessionTransport` is still there).
///
/// It frames every response itself (RFC 9112 §6.3): bytes an origin sends beyond a response
/// are never taken for the next one (the connection is closed instead), a chunked body with a
/// trailer section is read whole (the trailer fields are not merged into the response's), and
/// a body cut short is an error, never a complete response. It loads no libcurl.
///
/// What it sends and hands back, as URLSession would:
/// - The request's method, URL, fields and content (with HTTPCaching, `httpBody` or
///   `httpBodyStream`), nothing
///   cached, cookies only as the request carries them, redirects returned rather than
///   followed (``HTTPCache`` follows them, caching each hop), interim `1xx` responses skipped.
/// - `Accept-Encoding: gzip, deflate, br` when the request has none (and no `Range`), with `dcz`
///   when a dictionary is offered (``Configuration/usesCompressionDictionaries``): bodies
///   in those codings (RFC 9110 §8.4.1, RFC 9842 §5), several too, are decoded as they stream, and
///   `Content-Encoding` and `Content-Length` are dropped from the fields, which then describe
///   the bytes delivered. Content in another coding is left as it came, its fields intact.
/// - `User-Agent: <process name> swift-http-cache` when the request has none (RFC 9110 §10.1.5:
///   a user agent SHOULD send one; URLSession on Linux names the process too).
/// - `timeoutInterval` is how long it waits for a connection and, once connected, how long no
///   byte may move before the request fails (URLSession's request timeout is such an idle
///   timeout), with `URLError(.timedOut)`.
/// - The proxy from the environment, as curl reads it: `http_proxy` (lower case only),
///   `https_proxy`/`HTTPS_PROXY`, `all_proxy`/`ALL_PROXY`, `no_proxy`/`NO_PROXY`.
/// - Failures as `URLError`s (`.cannotFindHost`, `.cannotConnectToHost`, `.timedOut`,
///   `.networkConnectionLost`, `.badServerResponse`, `.cannotDecodeContentData`), whose
///   `localizedDescription` is one sentence saying what happened to which URL.
///
/// Each request is performed on a thread of its own, at most
/// ``Configuration/maximumConcurrentRequests`` at once. The body streams with bounded
/// buffering: when the app reads slowly, the thread waits and the origin is slowed down by TCP,
/// and memory does not grow. Cancelling the task that awaits the response or reads the body,
/// or dropping the body unread, stops the transfer.
///
/// `https` origins are verified against the system's trust store (`/etc/ssl/certs`, or
/// `SSL_CERT_FILE`/`SSL_CERT_DIR`) and ``Configuration/trustedCertificateFiles``, with their host
/// name, over TLS 1.2 or 1.3; a failure is `URLError(.secureConnectionFailed)` whose description
/// names the origin and the cause in words (expired, wrong host name, unknown issuer, …).
/// Verification cannot be turned off.
public final class HTTPClientTransport: OriginTransport {
    /// How many requests at once, and how much of a body waits for a slow reader.
    public struct Configuration: Sendable {
        /// The most requests performed at once, each on a thread; more wait for one to end. A
        /// request holds its thread until its body is read to the end, cancelled or dropped.
        public var maximumConcurrentRequests = 64
        /// Bytes of a body held for a reader who has not taken them yet, before the transfer
        /// waits for it.
        public var bufferedBodyBytes = 256 * 1024
        /// PEM files of certificate authorities trusted for `https` origins besides the
        /// system's trust store: for origins whose certificates come from a private CA.
        public var trustedCertificateFiles: [String] = []
        /// How the user trusts another authority, named in the error about a certificate
        /// from an unknown one (`--cacert FILE` for the command-line tool).
        public var trustAdvice = "trustedCertificateFiles"
        /// Compression Dictionary Transport ([RFC 9842](https://www.rfc-editor.org/rfc/rfc9842)),
        /// for `https` and loopback origins (§8): a fresh response sent with `Use-As-Dictionary`
        /// and `max-age` is kept (in memory: at most 32 dictionaries of up to 8 MiB, 32 MiB in
        /// all) and offered for the URLs it matches (`Available-Dictionary`, `Dictionary-ID`,
        /// `dcz` added to the default `Accept-Encoding`), and a `dcz` response is decoded with it.
        /// On by default.
        public var usesCompressionDictionaries = true

        /// 64 requests at once, 256 KiB held per body, the system's trust store alone.
        public init() {}
    }

    /// The client, or why it could not be made (an unreadable trusted-certificate file): every
    /// request then fails with that reason.
    private let client: Result<StreamingClient, UpstreamError>
    private let proxies: ProxyEnvironment
    /// The dictionaries kept (RFC 9842); `nil` when they are not used.
    private let dictionaries: CompressionDictionaryStore?

    /// Why this transport cannot send anything (a file in
    /// ``Configuration/trustedCertificateFiles`` that cannot be read or holds no certificate),
    /// in one line; `nil` when it can.
    public var setupFailure: String? {
        if case .failure(let error) = client { return error.description }
        return nil
    }

    /// A transport with its own connections; the proxy variables are read now.
    public convenience init(configuration: Configuration = Configuration()) {
        self.init(configuration: configuration, proxies: .current())
    }

    /// A transport whose proxies come from `proxies` rather than the process's environment.
    package init(configuration: Configuration = Configuration(), proxies: ProxyEnvironment) {
        var settings = StreamingClient.Configuration()
        // URLRequest's default timeoutInterval, for connecting too: requests that keep it share
        // the client's own pool.
        settings.client.connectTimeout = 60
        settings.client.stallTimeout = 60
        settings.maximumConcurrentTransfers = configuration.maximumConcurrentRequests
        settings.bufferedBodyBytes = configuration.bufferedBodyBytes
        settings.client.extraTrustRoots = configuration.trustedCertificateFiles
        settings.client.trustAdvice = configuration.trustAdvice
        client = Result { () throws(UpstreamError) in try StreamingClient(configuration: settings) }
        self.proxies = proxies
        dictionaries =
            configuration.usesCompressionDictionaries
            ? CompressionDictionaryStore(maxCount: 32, maxBytes: 32 << 20, maxContentBytes: 8 << 20) : nil
    }

    /// `<process name> swift-http-cache`, the name's token characters only: made on the first
    /// request that needs it, since reading the process's name costs a process that answers
    /// from its cache alone (the command-line tool) a tenth of a millisecond for nothing.
    private static let userAgent: String = {
        let name = ProcessInfo.processInfo.processName.unicodeScalars.filter(isTokenCharacter)
        return (name.isEmpty ? "" : String(String.UnicodeScalarView(name)) + " ") + "swift-http-cache"
    }()

    public func send(_ request: FetchRequest) async throws -> OriginResponse {
        let url = request.url
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", let host = url.host else {
            throw Self.error(.badURL, url, "\(url.absoluteString) is not an http or https URL")
        }
        let client: StreamingClient
        switch self.client {
        case .success(let made): client = made
        case .failure(let error): throw Self.urlError(error, url)
        }
        let route = proxies.route(scheme: scheme, host: host)
        var upstream = UpstreamRequest(
            method: request.method, url: url.absoluteString, fields: request.fields, body: try Self.body(of: request))
        let fields = upstream.fields
        let dictionaries = offerDictionary(&upstream)
        if !fields.contains(.acceptEncoding), !fields.contains(.range) {
            upstream.fields.append(
                name: .acceptEncoding,
                value: dictionaries?.offered == nil ? "gzip, deflate, br" : "gzip, deflate, br, dcz")
        }
        if !fields.contains(.userAgent) { upstream.fields.append(name: .userAgent, value: Self.userAgent) }
        switch route {
        case .direct: break
        case .proxy(let server):
            // http in absolute-form to the proxy; https through a CONNECT tunnel it opens.
            upstream.proxy = server.url
            if scheme == "http", !fields.contains(.host), let target = try? Target.absolute(upstream.url) {
                // The origin's authority, not the proxy's (RFC 9112 §3.2: Host names the target URI's).
                upstream.fields.append(name: .host, value: target.authority)
            }
            if let user = server.user, !fields.contains(.proxyAuthorization) {
                let credentials = Data((user + ":" + (server.password ?? "")).utf8).base64EncodedString()
                upstream.fields.append(name: .proxyAuthorization, value: "Basic " + credentials)
            }
        case .unusable(let variable, let reason):
            throw Self.error(
                .cannotConnectToHost, url,
                "cannot send the request to \(url.absoluteString): the proxy in \(variable) cannot be used: \(reason); "
                    + "fix or unset \(variable), or name the host in no_proxy")
        }
        let timeout = request.timeoutInterval
        let timeouts = timeout > 0 ? StreamingClient.Timeouts(connect: timeout, stall: timeout) : nil
        let response: StreamingClient.Response
        do {
            response = try await client.send(
                upstream, timeouts: timeouts, decodesContent: true, dictionaries: dictionaries)
        } catch {
            throw Self.urlError(error, url)
        }
        var origin = OriginResponse(
            status: response.head.status, fields: response.head.fields, url: url, body: Self.stream(response.body, url))
        origin.decodedContentCodings = response.decodedCodings
        return origin
    }

    // MARK: Request

    /// Offers the best dictionary kept for the request's URL (RFC 9842 §2.2, §2.3) when the
    /// request leaves content codings to the transport (no `Accept-Encoding`, no `Range`, no
    /// `Available-Dictionary` of its own) and its URL is a secure context (§8); returns what the
    /// response is decoded with and where a dictionary it carries is kept.
    private func offerDictionary(_ upstream: inout UpstreamRequest) -> StreamingClient.Dictionaries? {
        guard let dictionaries, CompressionDictionaries.isSecureContext(upstream.url) else { return nil }
        let now = Date().timeIntervalSince1970
        var use = StreamingClient.Dictionaries(offered: nil, store: dictionaries, url: upstream.url, now: now)
        let fields = upstream.fields
        guard !fields.contains(.acceptEncoding), !fields.contains(.range),
            !fields.contains(CompressionDictionaries.availableDictionary),
            let best = dictionaries.best(for: upstream.url, now: now)
        else { return use }
        use.offered = best
        upstream.fields.append(name: CompressionDictionaries.availableDictionary, value: best.fieldValue)
        if !best.offer.id.isEmpty {
            upstream.fields.append(
                name: CompressionDictionaries.dictionaryID, value: StructuredFields.serialize(.string(best.offer.id)))
        }
        return use
    }

    /// The request's content: ``FetchRequest/body``, or all of the stream the platform's
    /// request holds (HTTPCaching's `httpBodyStream`).
    private static func body(of request: FetchRequest) throws -> [UInt8]? {
        if let body = request.body { return [UInt8](body) }
        guard request.hasBodyStream, let stream = request.platformRequest as? any StreamedContent else { return nil }
        return try stream.content()
    }

    private static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.isASCII && HTTPBytes.isToken(UInt8(scalar.value))
    }

    // MARK: Response

    /// The body's pieces as `Data`; dropping the stream unread stops the transfer.
    private static func stream(_ body: StreamingTransfer, _ url: URL) -> AsyncThrowingStream<Data, any Error> {
        let reader = BodyReader(body)
        return AsyncThrowingStream {
            do {
                return try await reader.body.next().map { Data($0) }
            } catch {
                throw urlError(error, url)
            }
        }
    }

    // MARK: Errors

    private static func error(_ code: URLError.Code, _ url: URL, _ description: String) -> URLError {
        URLError(
            code,
            userInfo: [
                NSLocalizedDescriptionKey: description, NSURLErrorFailingURLErrorKey: url,
            ])
    }

    /// The client's error as the `URLError` URLSession would give, its description the client's.
    package static func urlError(_ error: any Error, _ url: URL) -> any Error {
        if let error = error as? ContentDecodingError {
            return Self.error(.cannotDecodeContentData, url, "\(url.absoluteString): \(error.description)")
        }
        guard let error = error as? UpstreamError else { return error }
        let code: URLError.Code
        switch error.kind {
        case .connect:
            code = error.connectFailureKind == .unresolved ? .cannotFindHost : .cannotConnectToHost
        case .timeout: code = .timedOut
        case .closed: code = .networkConnectionLost
        case .aborted: code = .cancelled
        case .protocolError: code = .badServerResponse
        case .tls: code = .secureConnectionFailed
        case .other: code = .badURL
        }
        return Self.error(code, url, error.description)
    }
}

/// Holds a body for its stream: when the stream is dropped, so is this, and the transfer stops.
private final class BodyReader: Sendable {
    let body: StreamingTransfer

    init(_ body: StreamingTransfer) { self.body = body }

    deinit { body.cancel() }
}

extension HTTPCache {
    /// The network a cache uses when none is given: this package's HTTP client.
    package static func defaultTransport() -> any OriginTransport { HTTPClientTransport() }
}
#endif

/// Content a platform's request holds as a stream (HTTPCaching's `URLRequest.httpBodyStream`),
/// read whole when the request is sent.
package protocol StreamedContent: Sendable {
    /// All of the content.
    /// - Throws: When the stream fails, saying why.
    func content() throws -> [UInt8]
}
