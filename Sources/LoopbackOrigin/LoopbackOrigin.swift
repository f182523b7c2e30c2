import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A scriptable HTTP/1.1 origin server on 127.0.0.1 that records every request it receives.
///
/// For integration tests, benchmarks and demos: routes answer with whatever ``Response`` a closure
/// builds (status, fields, body, a delay, a dropped connection, chunked framing), and ``requests``
/// shows exactly what the client sent. Connections are persistent (RFC 9112 §9.3), each served on
/// its own thread; malformed input gets a 400-class reply and a closed connection, never a crash.
///
/// ```swift
/// let origin = try LoopbackOrigin()
/// origin.route("/greeting") { _ in
///     .init(headers: [("Cache-Control", "max-age=60")], body: "hello")
/// }
/// let (data, _) = try await URLSession.shared.data(from: origin.url("/greeting?lang=en"))
/// #expect(origin.count("/greeting") == 1)
/// origin.stop()
/// ```
///
/// The origin stops when ``stop()`` is called or when it is deinitialised. A handler that captures
/// the origin strongly keeps it alive: capture it weakly, or call ``stop()``.
public final class LoopbackOrigin: Sendable {  // all mutable state is inside `core`, behind its lock
    /// A request as received, recorded before its handler runs.
    public struct Request: Sendable {
        /// The method token, e.g. `GET`.
        public var method: String
        /// The request-target as sent, e.g. `/a?x=1` (RFC 9112 §3.2).
        public var target: String
        /// The target without its query, used for routing: `/a` for `/a?x=1`. For an absolute-form
        /// target (`http://host/a?x=1`, as sent to proxies) the path part, `/a`.
        public var path: String
        /// The header fields in the order received, names as the client spelled them.
        public var headers: [(name: String, value: String)]
        /// The body, with chunked transfer coding removed; empty when there was none.
        public var body: [UInt8]

        init(method: String, target: String, headers: [(name: String, value: String)], body: [UInt8]) {
            self.method = method
            self.target = target
            self.path = Self.path(of: target)
            self.headers = headers
            self.body = body
        }

        /// The first value of the field `name`, compared case-insensitively (RFC 9110 §5.1); nil if absent.
        public func header(_ name: String) -> String? {
            let wanted = ASCII.lowercased(name)
            return headers.first { ASCII.equalsIgnoringCase($0.name, wanted) }?.value
        }

        static func path(of target: String) -> String {
            var rest = Substring(target)
            let lowered = ASCII.lowercased(String(rest.prefix(8)))
            if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
                rest = rest.drop { $0 != ":" }.dropFirst(3)  // scheme "://"
                rest = rest.drop { $0 != "/" && $0 != "?" }  // authority
            }
            let path = rest.prefix { $0 != "?" }
            return path.isEmpty ? "/" : String(path)
        }
    }

    /// What a handler answers with.
    public struct Response: Sendable {
        /// The status code; one outside 100...999 is sent as 500.
        public var status: Int
        /// Header fields sent in this order, after the status line. CR, LF and NUL are dropped from them.
        public var headers: [(name: String, value: String)]
        /// The content. Not sent for HEAD requests or 1xx, 204 and 304 responses.
        public var body: [UInt8]
        /// Seconds to wait before answering (a slow origin). Cut short, without answering, by ``stop()``.
        public var delay: Double
        /// When set: send the head with the full `Content-Length` (or chunk size), then only this many
        /// body bytes, then shut the connection down, as a dropped download looks to the client.
        public var cutAfterBodyBytes: Int?
        /// Send the body with `Transfer-Encoding: chunked` instead of `Content-Length` (HTTP/1.1 clients).
        public var chunked: Bool

        /// A response with a byte body.
        /// - Parameters:
        ///   - status: The status code.
        ///   - headers: Fields in order, as `(name, value)`. The origin adds `Content-Length`, `Date` and,
        ///     when closing, `Connection: close` unless present here.
        ///   - body: The content.
        ///   - delay: Seconds to wait before answering.
        ///   - cutAfterBodyBytes: Body bytes to send before dropping the connection; nil sends all.
        ///   - chunked: Whether to use chunked transfer coding.
        public init(
            status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = [], delay: Double = 0,
            cutAfterBodyBytes: Int? = nil, chunked: Bool = false
        ) {
            self.status = status
            self.headers = headers.map { (name: $0.0, value: $0.1) }
            self.body = body
            self.delay = delay
            self.cutAfterBodyBytes = cutAfterBodyBytes
            self.chunked = chunked
        }

        /// A response with a text body, sent as UTF-8. Parameters as in the byte-body initializer.
        public init(
            status: Int = 200, headers: [(String, String)] = [], body: String, delay: Double = 0,
            cutAfterBodyBytes: Int? = nil, chunked: Bool = false
        ) {
            self.init(
                status: status, headers: headers, body: Array(body.utf8), delay: delay,
                cutAfterBodyBytes: cutAfterBodyBytes, chunked: chunked)
        }
    }

    /// Builds the response to a request. Runs on the connection's thread, outside any lock.
    public typealias Handler = @Sendable (Request) -> Response

    /// A socket call that failed while the origin started listening.
    public struct SocketError: Error, Sendable, CustomStringConvertible {
        /// The call that failed, e.g. `bind(127.0.0.1:8080)`.
        public var operation: String
        /// The `errno` the call left.
        public var code: Int32

        init(operation: String, code: Int32) {
            self.operation = operation
            self.code = code
        }

        /// What failed and why, e.g. `LoopbackOrigin: bind(127.0.0.1:8080) failed: Address already in use (errno 98)`.
        public var description: String {
            "LoopbackOrigin: \(operation) failed: \(POSIX.errorText(code)) (errno \(code))"
        }
    }

    private let core = OriginCore()

    /// Starts listening on 127.0.0.1.
    /// - Parameter port: The port to bind; 0 lets the kernel choose a free one (see ``port``).
    /// - Throws: ``SocketError`` naming the call that failed (`bind` when the port is taken).
    public init(port: UInt16 = 0) throws {
        try core.start(port: port)
    }

    deinit {
        core.stop()
    }

    /// The port listened on (kept across ``stop()`` and ``restart()``).
    public var port: UInt16 { core.state.withLock { $0.port } }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// ``baseURL`` followed by `pathAndQuery` (a `/` is put in front if it has none).
    ///
    /// Characters not allowed in a URL are percent-encoded rather than making the URL invalid.
    public func url(_ pathAndQuery: String) -> URL {
        let suffix = pathAndQuery.hasPrefix("/") ? pathAndQuery : "/" + pathAndQuery
        if let url = URL(string: baseURL + suffix) { return url }
        var allowed = CharacterSet.urlQueryAllowed
        allowed.insert(charactersIn: "#%")
        let encoded = suffix.addingPercentEncoding(withAllowedCharacters: allowed) ?? "/"
        return URL(string: baseURL + encoded) ?? URL(string: baseURL + "/")
            ?? URL(fileURLWithPath: "/")  // unreachable: the base URL is always valid
    }

    /// Answers requests whose path (the target without its query) is exactly `path`, replacing any
    /// handler already routed there. Every method, HEAD included, goes to the same handler.
    public func route(_ path: String, _ handler: @escaping Handler) {
        core.state.withLock { $0.routes[path] = handler }
    }

    /// Answers requests no route matches. Initially a 404 with a short `text/plain` body.
    public func setDefault(_ handler: @escaping Handler) {
        core.state.withLock { $0.fallback = handler }
    }

    /// Every request received since the start or the last ``clearRecords()``, in arrival order.
    ///
    /// A request is recorded once it has been read in full, before its handler runs. Input rejected
    /// as malformed is not recorded.
    public var requests: [Request] { core.state.withLock { $0.records } }

    /// The recorded requests whose ``Request/path`` is `path`.
    public func requests(to path: String) -> [Request] {
        core.state.withLock { $0.records.filter { $0.path == path } }
    }

    /// How many recorded requests have ``Request/path`` `path`.
    public func count(_ path: String) -> Int {
        core.state.withLock { $0.records.reduce(0) { $1.path == path ? $0 + 1 : $0 } }
    }

    /// Forgets all recorded requests; routes stay.
    public func clearRecords() {
        core.state.withLock { $0.records.removeAll() }
    }

    /// Closes the listening socket and shuts down every open connection, then returns once the accept
    /// thread has exited; connecting afterwards is refused. Handlers still running finish, but their
    /// answers are not delivered. Does nothing when already stopped.
    public func stop() {
        core.stop()
    }

    /// Listens again on the same ``port``, keeping routes and records; stops first if running.
    /// - Throws: ``SocketError``, e.g. when another process took the port meanwhile.
    public func restart() throws {
        core.stop()
        try core.start(port: nil)
    }

    /// Whether the origin is listening.
    public var isRunning: Bool { core.isRunning }
}
