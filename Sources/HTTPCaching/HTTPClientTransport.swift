#if os(Linux)
import CacheSemantics
import CacheSystem
import Foundation
import FoundationNetworking
import HTTPClient
@_spi(Wire) import HTTPWire

/// An ``HTTPTransport`` on the package's own HTTP/1.1 client: ``HTTPCache``'s network on Linux
/// unless you pass another (``URLSessionTransport`` is still there).
///
/// It frames every response itself (RFC 9112 §6.3): bytes an origin sends beyond a response
/// are never taken for the next one (the connection is closed instead), a chunked body with a
/// trailer section is read whole (the trailer fields are not merged into the response's), and
/// a body cut short is an error, never a complete response. It loads no libcurl.
///
/// What it sends and hands back, as URLSession would:
/// - The request's method, URL, fields and body (`httpBody` or `httpBodyStream`), nothing
///   cached, cookies only as the request carries them, redirects returned rather than
///   followed (``HTTPCache`` follows them, caching each hop), interim `1xx` responses skipped.
/// - `Accept-Encoding: gzip, deflate, br` when the request has none (and no `Range`): bodies
///   in those codings (RFC 9110 §8.4.1), several too, are decoded as they stream, and
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
/// `https` URLs go through a ``URLSessionTransport`` until the client speaks TLS.
public final class HTTPClientTransport: HTTPTransport {
    /// How many requests at once, and how much of a body waits for a slow reader.
    public struct Configuration: Sendable {
        /// The most requests performed at once, each on a thread; more wait for one to end. A
        /// request holds its thread until its body is read to the end, cancelled or dropped.
        public var maximumConcurrentRequests = 64
        /// Bytes of a body held for a reader who has not taken them yet, before the transfer
        /// waits for it.
        public var bufferedBodyBytes = 256 * 1024

        /// 64 requests at once, 256 KiB held per body.
        public init() {}
    }

    private let client: StreamingClient
    private let proxies: ProxyEnvironment
    private let userAgent: String
    /// For `https`, made when first needed.
    private let secure = LazyTransport()

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
        client = StreamingClient(configuration: settings)
        self.proxies = proxies
        let name = ProcessInfo.processInfo.processName.unicodeScalars.filter(Self.isTokenCharacter)
        userAgent = (name.isEmpty ? "" : String(String.UnicodeScalarView(name)) + " ") + "swift-http-cache"
    }

    public func send(_ request: URLRequest) async throws -> TransportResponse {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), let host = url.host else {
            throw URLError(.badURL, userInfo: [NSLocalizedDescriptionKey: "the request has no http URL"])
        }
        let route = proxies.route(scheme: scheme, host: host)
        if scheme == "https" {
            switch route {
            case .direct:
                return try await secure.transport.send(request)
            case .proxy(let server):
                throw Self.error(
                    .cannotConnectToHost, url,
                    "cannot reach \(url.absoluteString) through the proxy \(server.url) (from the environment): "
                        + "https through a proxy needs a CONNECT tunnel, which this client does not open yet; "
                        + "set no_proxy for this host, or pass URLSessionTransport() to HTTPCache")
            case .unusable: break  // said below
            }
        }
        var upstream = UpstreamRequest(
            method: request.httpMethod ?? "GET", url: url.absoluteString, fields: Self.fields(of: request),
            body: try Self.body(of: request))
        let fields = upstream.fields
        if !fields.contains(.acceptEncoding), !fields.contains(.range) {
            upstream.fields.append(name: .acceptEncoding, value: "gzip, deflate, br")
        }
        if !fields.contains(.userAgent) { upstream.fields.append(name: .userAgent, value: userAgent) }
        switch route {
        case .direct: break
        case .proxy(let server):
            upstream.proxy = server.url
            // The origin's authority, not the proxy's (RFC 9112 §3.2: Host names the target URI's).
            if !fields.contains(.host), let target = try? Target.absolute(upstream.url) {
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
            response = try await client.send(upstream, timeouts: timeouts, decodesContent: true)
        } catch {
            throw Self.urlError(error, url)
        }
        guard let head = Self.response(response.head, url) else {
            response.body.cancel()
            throw Self.error(
                .badServerResponse, url, "the response from \(url.absoluteString) could not be represented")
        }
        return TransportResponse(response: head, body: Self.stream(response.body, url))
    }

    // MARK: Request

    /// The request's fields, in the order `allHTTPHeaderFields` gives them.
    private static func fields(of request: URLRequest) -> HeaderFields {
        HeaderFields((request.allHTTPHeaderFields ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    /// `httpBody`, or all of `httpBodyStream`.
    private static func body(of request: URLRequest) throws -> [UInt8]? {
        if let body = request.httpBody { return [UInt8](body) }
        guard let stream = request.httpBodyStream else { return nil }
        stream.open()
        defer { stream.close() }
        var body: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count == 0 { return body }
            guard count > 0 else {
                let reason = stream.streamError.map { "\($0)" } ?? "the stream failed"
                throw URLError(
                    .requestBodyStreamExhausted,
                    userInfo: [NSLocalizedDescriptionKey: "could not read the request body: \(reason)"])
            }
            body += buffer[..<count]
        }
    }

    private static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.isASCII && HTTPBytes.isToken(UInt8(scalar.value))
    }

    // MARK: Response

    /// The head as an `HTTPURLResponse`: repeated fields joined with `, ` (RFC 9110 §5.3).
    private static func response(_ head: UpstreamResponseHead, _ url: URL) -> HTTPURLResponse? {
        var fields: [String: String] = [:]
        var names: [String: String] = [:]
        for field in head.fields {
            let key = field.lowercasedName
            if let name = names[key] {
                fields[name] = fields[name].map { $0 + ", " + field.value } ?? field.value
            } else {
                names[key] = field.name
                fields[field.name] = field.value
            }
        }
        return HTTPURLResponse(url: url, statusCode: head.status, httpVersion: "HTTP/1.1", headerFields: fields)
    }

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

/// A `URLSessionTransport` made on first use.
private final class LazyTransport: Sendable {
    private let made = Locked<URLSessionTransport?>(nil)

    var transport: URLSessionTransport {
        made.withLock { made in
            if let made { return made }
            let transport = URLSessionTransport()
            made = transport
            return transport
        }
    }
}

extension HTTPCache {
    /// The network a cache uses when none is given: this package's HTTP client on Linux.
    static func defaultTransport() -> any HTTPTransport { HTTPClientTransport() }
}
#else
extension HTTPCache {
    /// The network a cache uses when none is given: URLSession on Apple platforms.
    static func defaultTransport() -> any HTTPTransport { URLSessionTransport() }
}
#endif
