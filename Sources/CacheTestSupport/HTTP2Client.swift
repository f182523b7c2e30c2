#if os(Linux)
import CNGHTTP2HTTPCache
import CacheSystem
import CacheTLS
import Glibc

/// One header field of an HTTP/2 message: a name and a value, as they go on the wire.
public struct HTTP2Field: Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    public var description: String { "\(name): \(value)" }
}

/// A request for ``HTTP2Client``: the four pseudo-header fields of RFC 9113 §8.3.1, the
/// other fields in order, and a body sent in DATA frames (none: the HEADERS frame carries
/// END_STREAM).
public struct HTTP2Request: Sendable {
    public var method: String
    public var path: String
    /// `:authority`; nil: the client's `127.0.0.1:PORT` (or the TLS host and port).
    public var authority: String?
    /// Whether `:authority` is sent at all; without it a `host` field names the authority
    /// (RFC 9113 §8.3.1).
    public var sendsAuthority = true
    /// `:scheme`; nil: `https` over TLS, `http` in cleartext.
    public var scheme: String?
    /// Sent as given, after the pseudo-header fields. ``init(_:_:fields:body:)`` lower-cases
    /// the names, as RFC 9113 §8.2.1 requires; set this afterwards to send what it forbids.
    public var fields: [HTTP2Field]
    public var body: [UInt8]?

    /// A request for `path`; field names are lower-cased (RFC 9113 §8.2.1).
    public init(_ method: String = "GET", _ path: String, fields: [(String, String)] = [], body: [UInt8]? = nil) {
        self.method = method
        self.path = path
        self.fields = fields.map { HTTP2Field($0.0.lowercased(), $0.1) }
        self.body = body
    }
}

/// What a stream of ``HTTP2Client`` brought back.
public struct HTTP2Response: Sendable, CustomStringConvertible {
    /// A response head: `:status` and the other fields, in the order they came.
    public struct Head: Sendable, Equatable {
        public var status: Int
        public var fields: [HTTP2Field]
    }

    /// How a stream ended (RFC 9113 §5.1).
    public enum End: Sendable, Equatable, CustomStringConvertible {
        /// A frame with END_STREAM ended the response: it is complete.
        case endStream
        /// RST_STREAM with this error code (RFC 9113 §7): sent by the server (`byPeer`), or by
        /// our nghttp2 because what the server sent broke a rule (then ``HTTP2Response/rejection``
        /// says which).
        case reset(code: UInt32, byPeer: Bool)
        /// The stream never ended: no byte for the timeout, the connection closed, or the
        /// request could not be sent. Says which.
        case unfinished(String)

        public var description: String {
            switch self {
            case .endStream: "END_STREAM"
            case .reset(let code, let byPeer):
                "RST_STREAM \(HTTP2Client.codeName(code)) \(byPeer ? "from the server" : "from the client")"
            case .unfinished(let why): "unfinished (\(why))"
            }
        }
    }

    /// The stream's identifier (0 when the request was never sent).
    public var streamID: Int32
    /// The 1xx heads that came before the final one (RFC 9113 §8.1), in order.
    public var interim: [Head] = []
    /// The final `:status`; 0 when no final head came.
    public var status = 0
    /// The final head's fields (pseudo-header fields left out), in order.
    public var fields: [HTTP2Field] = []
    /// The trailer section, if one came (RFC 9113 §8.1).
    public var trailers: [HTTP2Field] = []
    /// The DATA frames' payloads (empty when a data handler took them).
    public var body: [UInt8] = []
    public var end: End
    /// The GOAWAY error code, when the server sent one on this connection (RFC 9113 §6.8).
    public var goawayCode: UInt32?
    /// Why our nghttp2 refused a frame or a field of this stream, in its words
    /// (RFC 9113 §8.1.1: a malformed response is a stream error).
    public var rejection: String?

    /// The first field named `name` (any case).
    public subscript(name: String) -> String? {
        let lower = name.lowercased()
        return fields.first { $0.name == lower }?.value
    }

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }

    public var description: String {
        "stream \(streamID): \(status) \(fields) \(body.count) bytes, \(end)"
            + (goawayCode.map { ", GOAWAY \(HTTP2Client.codeName($0))" } ?? "") + (rejection.map { ", \($0)" } ?? "")
    }
}

/// A blocking HTTP/2 client for tests and the soak, on libnghttp2's client session: one
/// connection to 127.0.0.1, in cleartext with prior knowledge (RFC 9113 §3.3: the connection
/// preface first, no Upgrade) or over TLS with ALPN `h2` (§3.2). Requests given together go
/// out at once on separate streams (§5) and the call returns when every stream has ended.
///
/// nghttp2 checks what the server sends as RFC 9113 §8 says (pseudo-header fields, lower-case
/// names, `content-length` against the DATA received, no DATA after a HEAD or a 304): a
/// response that breaks a rule is reset by the client and says so in
/// ``HTTP2Response/rejection``.
///
/// ```swift
/// let client = try HTTP2Client(port: port, tls: .testCA())
/// let responses = client.send([HTTP2Request("GET", "/a"), HTTP2Request("HEAD", "/b")])
/// ```
///
/// Not Sendable: one thread uses a client.
public final class HTTP2Client {
    /// How to speak TLS to the server.
    public struct TLSOptions: Sendable {
        /// A client context offering `h2` with ALPN (RFC 7301).
        public var context: TLSClientContext
        /// The name asked for in SNI and checked against the certificate.
        public var host: String

        public init(context: TLSClientContext, host: String = "localhost") {
            self.context = context
            self.host = host
        }

        /// Trusting the tests' CA (``TestCertificates``), offering only `h2`.
        public static func testCA(host: String = "localhost") throws -> TLSOptions {
            TLSOptions(context: try TestCertificates.shared().clientContext(applicationProtocols: ["h2"]), host: host)
        }
    }

    /// Why a connection could not be made.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The connection's state, which nghttp2's callbacks reach through their user data.
    private let state = SessionState()
    private let session: OpaquePointer
    private let transport: Transport
    private let defaultAuthority: String
    private let defaultScheme: String
    /// Set once the connection failed or the server closed it.
    private var closedBecause: String?
    /// The bytes of submitted header fields, which nghttp2 reads when it sends the HEADERS
    /// (it is told not to copy them, so that it does not lower-case the names): freed once
    /// no stream is open, else with the client.
    private var fieldStorage: [UnsafeMutablePointer<UInt8>] = []

    /// Connects to 127.0.0.1:`port` and sends the connection preface and our SETTINGS
    /// (RFC 9113 §3.4): ENABLE_PUSH 0, and `windowSize` as INITIAL_WINDOW_SIZE and as the
    /// connection's window (§6.9.2).
    /// - Parameters:
    ///   - tls: nil: cleartext with prior knowledge; else TLS, and the server must choose `h2`.
    ///   - windowSize: The receive window of each stream and of the connection (65,535 the default).
    /// - Throws: ``Failure`` when the connection, the handshake or ALPN fails.
    public init(port: UInt16, tls: TLSOptions? = nil, windowSize: Int32 = 65_535) throws {
        let fd: Int32
        switch Socket.connected(host: "127.0.0.1", port: port, timeout: 10, blocking: false) {
        case .success(let connected): fd = connected
        case .failure(let failure): throw Failure(description: "connect to 127.0.0.1:\(port): \(failure)")
        }
        if let tls {
            let connection: TLSConnection
            do {
                connection = try tls.context.connection(fd: fd, host: tls.host, port: port)
                try connection.handshake(timeout: 20)
            } catch {
                close(fd)
                throw Failure(description: "TLS to 127.0.0.1:\(port): \(error)")
            }
            guard connection.applicationProtocol == "h2" else {
                close(fd)
                throw Failure(
                    description:
                        "127.0.0.1:\(port) chose \(connection.applicationProtocol ?? "no protocol") with ALPN, not h2")
            }
            transport = .tls(connection)
            defaultAuthority = "\(tls.host):\(port)"
            defaultScheme = "https"
        } else {
            transport = .plain(fd)
            defaultAuthority = "127.0.0.1:\(port)"
            defaultScheme = "http"
        }
        var made: OpaquePointer?
        let callbacks = SessionState.callbacks()
        defer { nghttp2_session_callbacks_del(callbacks) }
        guard nghttp2_session_client_new(&made, callbacks, Unmanaged.passUnretained(state).toOpaque()) == 0,
            let made
        else {
            close(fd)
            throw Failure(description: "nghttp2_session_client_new failed")
        }
        session = made
        var settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(windowSize)),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        nghttp2_session_set_local_window_size(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, windowSize)
    }

    deinit {
        nghttp2_session_del(session)
        close(transport.fd)
        fieldStorage.forEach { $0.deallocate() }
    }

    /// The GOAWAY the server sent, if it sent one: its error code and last stream identifier
    /// (RFC 9113 §6.8).
    public var goaway: (code: UInt32, lastStreamID: Int32)? { state.goaway }

    /// Whether new streams may still be opened: no GOAWAY came and the connection is up.
    public var isUsable: Bool { closedBecause == nil && state.goaway == nil }

    /// Why the connection is gone (the server closed it, reading failed), or nil while it is up.
    public var closeReason: String? { closedBecause }

    /// Sends `requests` at once, each on a stream of its own, and waits until every stream has
    /// ended (END_STREAM or RST_STREAM), the connection closed, or nothing came for `timeout`
    /// seconds.
    /// - Parameters:
    ///   - timeout: Seconds without a byte from the server after which the open streams are
    ///     given up (``HTTP2Response/End/unfinished(_:)``).
    ///   - onData: Takes each DATA payload instead of ``HTTP2Response/body``: the request's
    ///     index, the response so far (its head), the bytes.
    /// - Returns: One response per request, in the requests' order.
    public func send(
        _ requests: [HTTP2Request], timeout: Double = 30,
        onData: ((Int, HTTP2Response, UnsafeRawBufferPointer) -> Void)? = nil
    ) -> [HTTP2Response] {
        state.start(count: requests.count, onData: onData)
        defer { state.onData = nil }
        for (index, request) in requests.enumerated() {
            guard closedBecause == nil else {
                state.responses[index].end = .unfinished("not sent: \(closedBecause ?? "")")
                continue
            }
            let id = submit(request)
            if id < 0 {
                state.responses[index].end = .unfinished("not sent: \(String(cString: nghttp2_strerror(id)))")
            } else {
                state.open(id, index: index, body: request.body)
            }
        }
        let unfinished = exchange(timeout: timeout)
        if state.openStreams == 0 {
            fieldStorage.forEach { $0.deallocate() }
            fieldStorage = []
        }
        for index in state.responses.indices {
            if case .unfinished("") = state.responses[index].end {
                state.responses[index].end = .unfinished(unfinished ?? "the stream did not end")
            }
            state.responses[index].goawayCode = state.goaway?.code
        }
        return state.responses
    }

    /// One request: its fields given to nghttp2 as they are, names not lower-cased (RFC 9113
    /// §8.3.1 order: pseudo-header fields first). Returns the stream identifier, or nghttp2's
    /// error.
    private func submit(_ request: HTTP2Request) -> Int32 {
        let authority = request.sendsAuthority ? [(":authority", request.authority ?? defaultAuthority)] : []
        let pairs =
            [(":method", request.method), (":scheme", request.scheme ?? defaultScheme)] + authority
            + [(":path", request.path)] + request.fields.map { ($0.name, $0.value) }
        let encoded = pairs.map { (Array($0.0.utf8), Array($0.1.utf8)) }
        let storage = UnsafeMutablePointer<UInt8>.allocate(
            capacity: max(1, encoded.reduce(0) { $0 + $1.0.count + $1.1.count }))
        fieldStorage.append(storage)
        var offset = 0
        var fields: [nghttp2_nv] = []
        for (name, value) in encoded {
            let namePointer = storage + offset
            namePointer.update(from: name, count: name.count)
            let valuePointer = namePointer + name.count
            valuePointer.update(from: value, count: value.count)
            offset += name.count + value.count
            fields.append(
                nghttp2_nv(
                    name: namePointer, value: valuePointer, namelen: name.count, valuelen: value.count,
                    flags: UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue)))
        }
        guard request.body != nil else {
            return nghttp2_submit_request(session, nil, fields, fields.count, nil, nil)
        }
        var provider = nghttp2_data_provider(
            source: nghttp2_data_source(ptr: nil), read_callback: SessionState.readBody)
        return nghttp2_submit_request(session, nil, fields, fields.count, &provider, nil)
    }

    /// Writes what nghttp2 has to send and feeds it what arrives until no stream is open;
    /// nil then, else why the streams still open did not end.
    private func exchange(timeout: Double) -> String? {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            if let failure = flush(timeout: timeout) { return failure }
            if state.openStreams == 0 { return nil }
            if let closedBecause { return closedBecause }
            if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 {
                // Without the server's GOAWAY, nghttp2 ended the session itself: what came was
                // not HTTP/2 (a connection error, RFC 9113 §5.4.1).
                closedBecause =
                    state.goaway == nil
                    ? "our nghttp2 ended the session: the server's bytes are not HTTP/2"
                    : "the session ended after the server's GOAWAY"
                return closedBecause
            }
            let received = buffer.withUnsafeMutableBytes { transport.read(into: $0, timeout: timeout) }
            switch received {
            case .bytes(let count):
                let taken = buffer.withUnsafeBytes { nghttp2_session_mem_recv(session, $0.baseAddress, count) }
                if taken < 0 {
                    // Our GOAWAY with the error goes out first (RFC 9113 §5.4.1).
                    _ = flush(timeout: 1)
                    closedBecause =
                        "nghttp2 refused what the server sent: \(String(cString: nghttp2_strerror(Int32(taken))))"
                    return closedBecause
                }
            case .ended(let why):
                closedBecause = why
                return why
            case .stalled:
                return "nothing from the server for \(timeout) s"
            }
        }
    }

    /// Writes everything nghttp2 has to send; nil, or why writing failed.
    private func flush(timeout: Double) -> String? {
        guard closedBecause == nil else { return nil }
        while true {
            var data: UnsafePointer<UInt8>?
            let count = nghttp2_session_mem_send(session, &data)
            if count < 0 { return "nghttp2_session_mem_send: \(String(cString: nghttp2_strerror(Int32(count))))" }
            guard count > 0, let data else { return nil }
            if let failure = transport.write(UnsafeRawBufferPointer(start: data, count: count), timeout: timeout) {
                closedBecause = failure
                return failure
            }
        }
    }

    /// The name of an HTTP/2 error code (RFC 9113 §7): `PROTOCOL_ERROR`, `ENHANCE_YOUR_CALM`…
    public static func codeName(_ code: UInt32) -> String {
        let name = String(cString: nghttp2_http2_strerror(code))
        return name == "unknown" ? "0x\(String(code, radix: 16))" : name
    }
}

/// What the callbacks of one session record: the responses of the current ``HTTP2Client/send``.
private final class SessionState {
    var responses: [HTTP2Response] = []
    var onData: ((Int, HTTP2Response, UnsafeRawBufferPointer) -> Void)?
    /// Stream identifier → index of its response, for the streams of the current call.
    private var indices: [Int32: Int] = [:]
    /// The header block each stream is receiving.
    private var blocks: [Int32: [HTTP2Field]] = [:]
    /// Request bodies still to send, and how far each has gone.
    private var uploads: [Int32: (bytes: [UInt8], sent: Int)] = [:]
    private(set) var openStreams = 0
    var goaway: (code: UInt32, lastStreamID: Int32)?

    func start(count: Int, onData: ((Int, HTTP2Response, UnsafeRawBufferPointer) -> Void)?) {
        responses = Array(repeating: HTTP2Response(streamID: 0, end: .unfinished("")), count: count)
        indices = [:]
        blocks = [:]
        uploads = [:]
        openStreams = 0
        self.onData = onData
    }

    func open(_ id: Int32, index: Int, body: [UInt8]?) {
        indices[id] = index
        responses[index].streamID = id
        if let body { uploads[id] = (body, 0) }
        openStreams += 1
    }

    private static func of(_ userData: UnsafeMutableRawPointer?) -> SessionState {
        Unmanaged<SessionState>.fromOpaque(userData!).takeUnretainedValue()
    }

    private static func frameType(_ frame: UnsafePointer<nghttp2_frame>) -> UInt32 { UInt32(frame.pointee.hd.type) }

    /// A header block is complete: an interim head, the final head, or trailers (RFC 9113 §8.1).
    private func headersReceived(_ id: Int32, endStream: Bool) {
        guard let index = indices[id] else { return }
        let block = blocks.removeValue(forKey: id) ?? []
        let fields = block.filter { !$0.name.hasPrefix(":") }
        if let status = block.first(where: { $0.name == ":status" }).flatMap({ Int($0.value) }) {
            if (100..<200).contains(status) {
                responses[index].interim.append(HTTP2Response.Head(status: status, fields: fields))
            } else {
                responses[index].status = status
                responses[index].fields = fields
            }
        } else {
            responses[index].trailers = fields
        }
        if endStream { responses[index].end = .endStream }
    }

    /// The callbacks every session uses; the caller deletes them once the session is made.
    static func callbacks() -> OpaquePointer {
        var made: OpaquePointer?
        nghttp2_session_callbacks_new(&made)
        let callbacks = made!
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            guard let frame, SessionState.frameType(frame) == NGHTTP2_HEADERS.rawValue else { return 0 }
            SessionState.of(userData).blocks[frame.pointee.hd.stream_id] = []
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, userData in
            guard let frame, let name, let value else { return 0 }
            let field = HTTP2Field(
                String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
                String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self))
            SessionState.of(userData).blocks[frame.pointee.hd.stream_id, default: []].append(field)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            guard let frame else { return 0 }
            let state = SessionState.of(userData)
            let id = frame.pointee.hd.stream_id
            let endStream = frame.pointee.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            switch SessionState.frameType(frame) {
            case NGHTTP2_HEADERS.rawValue: state.headersReceived(id, endStream: endStream)
            case NGHTTP2_DATA.rawValue where endStream:
                if let index = state.indices[id] { state.responses[index].end = .endStream }
            case NGHTTP2_RST_STREAM.rawValue:
                if let index = state.indices[id] {
                    state.responses[index].end = .reset(code: frame.pointee.rst_stream.error_code, byPeer: true)
                }
            case NGHTTP2_GOAWAY.rawValue:
                state.goaway = (frame.pointee.goaway.error_code, frame.pointee.goaway.last_stream_id)
            default: break
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, id, data, length, userData in
            let state = SessionState.of(userData)
            guard let index = state.indices[id], let data else { return 0 }
            let bytes = UnsafeRawBufferPointer(start: data, count: length)
            if let onData = state.onData {
                onData(index, state.responses[index], bytes)
            } else {
                state.responses[index].body.append(contentsOf: bytes)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, id, code, userData in
            let state = SessionState.of(userData)
            state.uploads[id] = nil
            guard let index = state.indices[id] else { return 0 }
            state.openStreams -= 1
            switch state.responses[index].end {
            case .endStream, .reset: break
            case .unfinished:
                // Closed without END_STREAM or RST_STREAM from the server: reset by our side (a
                // rule broken), or refused by a GOAWAY's last stream identifier.
                state.responses[index].end = code == 0 ? .endStream : .reset(code: code, byPeer: false)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks) { _, frame, error, userData in
            let state = SessionState.of(userData)
            if let frame, let index = state.indices[frame.pointee.hd.stream_id] {
                state.responses[index].rejection = String(cString: nghttp2_strerror(error))
            }
            return 0
        }
        return callbacks
    }

    /// nghttp2's data source for request bodies: the next bytes of the stream's upload.
    static let readBody: nghttp2_data_source_read_callback = { _, id, buffer, length, flags, _, userData in
        let state = SessionState.of(userData)
        guard let upload = state.uploads[id], let buffer, let flags else { return 0 }
        let count = min(length, upload.bytes.count - upload.sent)
        upload.bytes.withUnsafeBufferPointer { bytes in
            buffer.update(from: bytes.baseAddress! + upload.sent, count: count)
        }
        state.uploads[id]?.sent += count
        if upload.sent + count == upload.bytes.count { flags.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
        return count
    }
}

/// The connection under the session: a non-blocking socket, or TLS over one.
private enum Transport {
    case plain(Int32)
    case tls(TLSConnection)

    enum Received {
        case bytes(Int)
        case ended(String)
        case stalled
    }

    var fd: Int32 {
        switch self {
        case .plain(let fd): fd
        case .tls(let connection): connection.fd
        }
    }

    /// Reads what is there, waiting up to `timeout` seconds for a first byte.
    func read(into buffer: UnsafeMutableRawBufferPointer, timeout: Double) -> Received {
        let deadline = MonotonicClock.seconds() + timeout
        while true {
            var events = Int16(POLLIN)
            switch self {
            case .plain(let fd):
                let count = recv(fd, buffer.baseAddress, buffer.count, 0)
                if count > 0 { return .bytes(count) }
                if count == 0 { return .ended("the server closed the connection") }
                guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                    return .ended("reading failed: \(errnoText(errno))")
                }
            case .tls(let connection):
                switch connection.read(into: buffer) {
                case .bytes(let count): return .bytes(count)
                case .closed: return .ended("the server closed the connection (close_notify)")
                case .closedWithoutNotify: return .ended("the server closed the connection without close_notify")
                case .failed(let error): return .ended("reading failed: \(error)")
                case .wantRead: break
                case .wantWrite: events = Int16(POLLOUT)
                }
            }
            guard Self.wait(fd, events, until: deadline) else { return .stalled }
        }
    }

    /// Writes all of `bytes`; nil, or why not.
    func write(_ bytes: UnsafeRawBufferPointer, timeout: Double) -> String? {
        var offset = 0
        var deadline = MonotonicClock.seconds() + timeout
        while offset < bytes.count {
            var events = Int16(POLLOUT)
            let rest = UnsafeRawBufferPointer(rebasing: bytes[offset...])
            switch self {
            case .plain(let fd):
                let count = Glibc.send(fd, rest.baseAddress, rest.count, Int32(MSG_NOSIGNAL))
                if count > 0 {
                    offset += count
                    deadline = MonotonicClock.seconds() + timeout
                    continue
                }
                guard count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                    return "writing failed: \(errnoText(errno))"
                }
            case .tls(let connection):
                switch connection.write(rest) {
                case .wrote(let count):
                    offset += count
                    deadline = MonotonicClock.seconds() + timeout
                    continue
                case .failed(let error): return "writing failed: \(error)"
                case .wantRead: events = Int16(POLLIN)
                case .wantWrite: break
                }
            }
            guard Self.wait(fd, events, until: deadline) else { return "the server read nothing for \(timeout) s" }
        }
        return nil
    }

    /// Waits until `fd` is ready for `events` (or has an error or hang-up, which the next call
    /// reports); false when `deadline` passed first.
    private static func wait(_ fd: Int32, _ events: Int16, until deadline: Double) -> Bool {
        var poller = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let left = deadline - MonotonicClock.seconds()
            guard left > 0 else { return false }
            let ready = poll(&poller, 1, Int32(min(left * 1000, 86_400_000).rounded(.up)))
            if ready > 0 || (ready < 0 && errno != EINTR) { return true }
        }
    }
}
#endif
