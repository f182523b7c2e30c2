#if os(Linux)
// HTTP/2 toward clients (RFC 9113) on libnghttp2's server session: nghttp2 frames, decodes
// HPACK and keeps flow control; this file turns each stream into one exchange for the handler
// (the same `RequestHandler` HTTP/1.1 requests go to) and each answer back into frames, and
// holds the limits against the known HTTP/2 attacks. Touched only on the connection's loop
// thread, except each stream's `shared`, which writers on other threads use under its lock.
import CNGHTTP2HTTPCache
import CacheSystem
import CacheSemantics
import CacheTLS
import HTTPClient
@_spi(Wire) import HTTPWire
import Glibc

/// The server's HTTP/2 settings and limits (RFC 9113 §6.5.2, §10.5).
enum HTTP2Limits {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams a client may have open at once. nghttp2
    /// enforces it: a stream past it is refused (REFUSED_STREAM) until the client has
    /// acknowledged the setting, and ends the connection (GOAWAY PROTOCOL_ERROR) after, where
    /// RFC 9113 §5.1.2 asks for a stream error. Advertising more than is served to get there
    /// first would refuse streams of clients that keep to the limit; only one that breaks it
    /// meets the stricter answer.
    static let maxConcurrentStreams: UInt32 = 100
    /// CONTINUATION frames one header block may take (CVE-2024-27316); a header block of
    /// 16 KiB fits in the HEADERS frame and at most one CONTINUATION at the default frame size.
    static let maxContinuations = 8
    /// Streams the client may reset in a burst, and how many more per second (Rapid Reset,
    /// CVE-2023-44487): beyond that the connection ends with ENHANCE_YOUR_CALM.
    static let resetBurst = 200.0
    static let resetsPerSecond = 100.0
    /// SETTINGS, PING and PRIORITY frames in a burst, and per second, before ENHANCE_YOUR_CALM.
    static let controlBurst = 1000.0
    static let controlFramesPerSecond = 200.0
    /// Request body bytes a connection may hold before its streams' windows stop opening: the
    /// client then waits (flow control, RFC 9113 §5.2) instead of the server buffering more.
    static let bufferedBodyBytes = 16 << 20
    /// Frames are produced only while less than this waits to be sent to the client.
    static let outputHighWater = 256 << 10
}

/// A token bucket: `burst` events at once, refilled at `perSecond`.
struct RateLimit {
    private let burst: Double
    private let perMillisecond: Double
    private var tokens: Double
    private var last: Int

    init(burst: Double, perSecond: Double, now: Int) {
        self.burst = burst
        perMillisecond = perSecond / 1000
        tokens = burst
        last = now
    }

    /// Takes one token; `false` when none is left.
    mutating func take(now: Int) -> Bool {
        tokens = min(burst, tokens + Double(max(0, now - last)) * perMillisecond)
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// One stream (RFC 9113 §5.1): the request as it arrives, then the answer as the handler gives it.
final class HTTP2Stream {
    let id: Int32
    /// What writers on other threads see: the bytes they queued, and whether the stream is gone.
    let shared = Locked(ConnectionShared())

    // The request.
    var method = ""
    var scheme = ""
    var path = ""
    var authority: String?
    /// `Expect` held `100-continue`; the first other expectation (RFC 9110 §10.1.1).
    var expectsContinue = false
    var unknownExpectation: String?
    var fields = HeaderFields()
    var cookies: [String] = []
    /// Header list size as RFC 9113 §6.5.2 counts it (name + value + 32 per field).
    var headerListSize = 0
    /// The status the server answers itself (431, 413, 400) instead of handing the request on.
    var refusal: Rejection?
    var body: [UInt8] = []
    /// Body bytes received whose window is not yet given back (RFC 9113 §6.9).
    var unacknowledged = 0
    /// How the body has come since the header block ended, for its time limits
    /// (``EventLoop/bodyDeadline(_:)``).
    var progress: BodyProgress
    var headersDone = false
    /// The client ended the request (END_STREAM).
    var requestEnded = false
    var dispatched = false

    // The answer.
    var responseStarted = false
    var finished = false
    /// The response's `Content-Length` still to come; nil when streamed.
    var remaining: Int64?
    var bodyAllowed = true
    var chunks: [[UInt8]] = []
    var accounted: [Bool] = []
    var firstChunk = 0
    var chunkOffset = 0
    var pendingBytes = 0
    /// END_STREAM left: the answer is complete on the wire.
    var endSent = false
    /// nghttp2 was told there is no data now; it must be resumed when some arrives.
    var deferred = false
    var closed = false

    init(id: Int32, now: Int) {
        self.id = id
        progress = BodyProgress(start: now)
    }
}

/// nghttp2's callbacks, made once for every session.
private final class SessionCallbacks: @unchecked Sendable {
    let pointer: OpaquePointer

    static let shared = SessionCallbacks()

    private init() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        pointer = callbacks!
        nghttp2_session_callbacks_set_send_callback(pointer) { _, data, length, _, user in
            HTTP2Session.from(user).sendCallback(data!, length)
        }
        nghttp2_session_callbacks_set_on_begin_frame_callback(pointer) { _, header, user in
            HTTP2Session.from(user).beginFrame(header!.pointee)
        }
        nghttp2_session_callbacks_set_on_begin_headers_callback(pointer) { _, frame, user in
            HTTP2Session.from(user).beginHeaders(frame!)
        }
        nghttp2_session_callbacks_set_on_header_callback(pointer) {
            _, frame, name, nameLength, value, valueLength, _, user in
            HTTP2Session.from(user).header(
                frame!, UnsafeBufferPointer(start: name, count: nameLength),
                UnsafeBufferPointer(start: value, count: valueLength))
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(pointer) { _, frame, user in
            HTTP2Session.from(user).frameReceived(frame!)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(pointer) { _, _, stream, data, length, user in
            HTTP2Session.from(user).dataReceived(stream, UnsafeBufferPointer(start: data, count: length))
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(pointer) { _, stream, _, user in
            HTTP2Session.from(user).streamClosed(stream)
        }
        nghttp2_session_callbacks_set_send_data_callback(pointer) { _, frame, header, length, _, user in
            HTTP2Session.from(user).sendData(frame!.pointee.hd.stream_id, header!, length)
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(pointer) { _, frame, user in
            HTTP2Session.from(user).frameSent(frame!)
        }
    }
}

/// nghttp2's options: the limits it enforces itself.
private final class SessionOptions: @unchecked Sendable {
    let pointer: OpaquePointer

    static let shared = SessionOptions()

    private init() {
        var options: OpaquePointer?
        nghttp2_option_new(&options)
        pointer = options!
        // Windows open as the server takes body bytes (HTTP2Limits.bufferedBodyBytes).
        nghttp2_option_set_no_auto_window_update(pointer, 1)
        // Ours act first, with ENHANCE_YOUR_CALM; nghttp2's stay as a backstop.
        nghttp2_option_set_max_continuations(pointer, HTTP2Limits.maxContinuations * 4)
        nghttp2_option_set_stream_reset_rate_limit(pointer, 1000, 500)
        // A client that does not read our SETTINGS/PING acknowledgements is cut (RFC 9113 §10.5).
        nghttp2_option_set_max_outbound_ack(pointer, 1000)
        nghttp2_option_set_max_settings(pointer, 32)
    }
}

/// An HTTP/2 connection's session (RFC 9113): nghttp2 underneath, the streams on top.
final class HTTP2Session {
    private let session: OpaquePointer
    unowned let loop: EventLoop
    unowned let connection: Connection
    let isTLS: Bool
    /// Open streams by id.
    private(set) var streams: [Int32: HTTP2Stream] = [:]
    /// CONTINUATION frames in the header block being read.
    private var continuations = 0
    /// When the header block being read began (loop ms); 0 when none is.
    private(set) var headerBlockSince = 0
    private var resets: RateLimit
    private var controlFrames: RateLimit
    /// Response bytes waiting in streams for the client's window or for the socket.
    private(set) var pendingBytes = 0
    /// When DATA last left (or data began to wait): the zero-window stall clock.
    private(set) var lastDataSent = 0
    /// The GOAWAY code sent, once one was.
    private(set) var goAwaySent: UInt32?
    /// When the final GOAWAY follows the shutdown notice (loop ms); 0 when none is due.
    private var finalGoAwayAt = 0
    /// A response head's names and values, and where each starts (name, value, name, …, end):
    /// kept between responses so that a head costs no allocation.
    private var fieldBytes: [UInt8] = []
    private var fieldOffsets: [Int] = []
    private var pairs: [nghttp2_nv] = []

    static func from(_ user: UnsafeMutableRawPointer?) -> HTTP2Session {
        Unmanaged<HTTP2Session>.fromOpaque(user!).takeUnretainedValue()
    }

    /// A server session on `connection`, its SETTINGS queued (RFC 9113 §3.4).
    init?(loop: EventLoop, connection: Connection, isTLS: Bool, maxHeaderListSize: Int) {
        self.loop = loop
        self.connection = connection
        self.isTLS = isTLS
        resets = RateLimit(burst: HTTP2Limits.resetBurst, perSecond: HTTP2Limits.resetsPerSecond, now: loop.now)
        controlFrames = RateLimit(
            burst: HTTP2Limits.controlBurst, perSecond: HTTP2Limits.controlFramesPerSecond, now: loop.now)
        lastDataSent = loop.now
        var made: OpaquePointer?
        guard
            nghttp2_session_server_new2(
                &made, SessionCallbacks.shared.pointer, nil, SessionOptions.shared.pointer) == 0,
            let made
        else { return nil }
        session = made
        nghttp2_session_set_user_data(made, Unmanaged.passUnretained(self).toOpaque())
        var settings = [
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: HTTP2Limits.maxConcurrentStreams),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: UInt32(maxHeaderListSize)),
        ]
        nghttp2_submit_settings(made, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
    }

    deinit {
        nghttp2_session_del(session)
    }

    // MARK: driving

    /// Feeds bytes read from the client; `false` when the session failed beyond repair (the
    /// connection is to be closed once what is queued has gone).
    func receive(_ bytes: UnsafePointer<UInt8>, count: Int) -> Bool {
        let result = nghttp2_session_mem_recv(session, bytes, count)
        guard result < 0 else { return true }
        let code: nghttp2_error_code =
            Int32(result) == NGHTTP2_ERR_FLOODED.rawValue
                || Int32(result) == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS.rawValue
            ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR
        if Int32(result) != NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue { terminate(code) }
        return false
    }

    /// Has nghttp2 write what it can into the connection's output queue (until the queue is
    /// past its high-water mark).
    func send() -> Bool {
        return nghttp2_session_send(session) == 0
    }

    /// Whether the session is over: nothing more to read or write (RFC 9113 §6.8: after a
    /// GOAWAY, once the streams before it ended).
    var isFinished: Bool { nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 }

    /// Ends the connection with `code` (RFC 9113 §5.4.1): a GOAWAY, and nothing read after it.
    func terminate(_ code: nghttp2_error_code) {
        guard goAwaySent == nil || goAwaySent == NGHTTP2_NO_ERROR.rawValue else { return }
        goAwaySent = code.rawValue
        nghttp2_session_terminate_session(session, code.rawValue)
    }

    /// A graceful GOAWAY(NO_ERROR) (shutdown, reload, idle): streams already begun finish, no
    /// new ones are taken (RFC 9113 §6.8). With `notice` it goes in two steps, as §6.8 says a
    /// server shutting down gracefully should: first a GOAWAY naming the largest stream id, so
    /// that requests the client is sending at this moment are still taken, then a second later
    /// the one naming the last stream taken. Also on a connection with no stream open: its
    /// client may be sending one now, which a single GOAWAY naming the last stream taken would
    /// refuse (curl 7.88 then fails that transfer: "Error in the HTTP2 framing layer").
    func goAway(notice: Bool) {
        guard goAwaySent == nil else { return }
        goAwaySent = NGHTTP2_NO_ERROR.rawValue
        if notice {
            nghttp2_submit_shutdown_notice(session)
            finalGoAwayAt = loop.now + 1000
        } else {
            finalGoAway()
        }
    }

    private func finalGoAway() {
        finalGoAwayAt = 0
        nghttp2_submit_goaway(
            session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
            NGHTTP2_NO_ERROR.rawValue, nil, 0)
    }

    /// Marks every stream gone (the connection closed): writers waiting on them wake up.
    func closeAll() {
        for stream in streams.values { Self.markGone(stream) }
        streams.removeAll()
    }

    private static func markGone(_ stream: HTTP2Stream) {
        stream.closed = true
        stream.chunks = []
        stream.accounted = []
        stream.shared.withLock { shared in
            shared.gone = true
            shared.queuedBytes = 0
        }
        stream.shared.wakeWaiters()
    }

    /// Timeouts, from the loop's sweep: the idle connection, a header block or a body that does
    /// not come, data stalled on a closed window.
    func sweep(now: Int, header: Int, idle: Int) {
        if finalGoAwayAt > 0 && now >= finalGoAwayAt { finalGoAway() }
        if headerBlockSince > 0 && now - headerBlockSince >= header {
            return terminate(NGHTTP2_ENHANCE_YOUR_CALM)
        }
        // Zero-window stall: answers (or only their ends) wait and the client has not let a byte
        // go for idle ms.
        if now - lastDataSent >= idle && hasStreamWaitingOnWindow { return terminate(NGHTTP2_ENHANCE_YOUR_CALM) }
        if streams.isEmpty {
            keepBuffers(false)
            if now >= connection.state.deadline { goAway(notice: false) }
            return
        }
        for stream in streams.values where stream.headersDone && !stream.dispatched && stream.refusal == nil {
            if now >= loop.bodyDeadline(stream.progress) { refuse(stream, loop.lateBody(stream.progress)) }
        }
    }

    /// Whether the connection's output buffers (the queue's, and TLS's records being gathered)
    /// stay between flushes: while streams are open (set as the connection is driven) and up to
    /// a sweep after the last one ended, when they are given back (an idle connection holds none).
    func keepBuffers(_ keep: Bool) {
        connection.state.output.keepsBuffer = keep
        connection.state.tls?.keepsBuffer = keep
    }

    // MARK: callbacks

    fileprivate func sendCallback(_ data: UnsafePointer<UInt8>, _ length: Int) -> Int {
        guard connection.state.output.count < HTTP2Limits.outputHighWater else {
            return Int(NGHTTP2_ERR_WOULDBLOCK.rawValue)
        }
        connection.state.output.append(UnsafeRawBufferPointer(start: data, count: length))
        return length
    }

    fileprivate func beginFrame(_ header: nghttp2_frame_hd) -> Int32 {
        switch Int(header.type) {
        case Int(NGHTTP2_HEADERS.rawValue):
            continuations = 0
            if header.flags & UInt8(NGHTTP2_FLAG_END_HEADERS.rawValue) == 0 { headerBlockSince = loop.now }
        case Int(NGHTTP2_CONTINUATION.rawValue):
            continuations += 1
            // CVE-2024-27316: a header block that never ends, frame after frame.
            if continuations > HTTP2Limits.maxContinuations { terminate(NGHTTP2_ENHANCE_YOUR_CALM) }
            if header.flags & UInt8(NGHTTP2_FLAG_END_HEADERS.rawValue) != 0 { headerBlockSince = 0 }
        default:
            break
        }
        return 0
    }

    fileprivate func beginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
            frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
        else { return 0 }
        let id = frame.pointee.hd.stream_id
        streams[id] = HTTP2Stream(id: id, now: loop.now)
        return 0
    }

    fileprivate func header(
        _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>
    ) -> Int32 {
        // Trailers (a second HEADERS) are read and ignored (RFC 9113 §8.1).
        guard frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST,
            let stream = streams[frame.pointee.hd.stream_id], stream.refusal == nil
        else { return 0 }
        stream.headerListSize += name.count + value.count + 32
        if stream.headerListSize > loop.maxHeaderBytes || stream.fields.count >= loop.maxFieldCount {
            // An HPACK bomb decodes to far more than it took on the wire: counted as decoded.
            stream.refusal = Rejection(
                status: 431, reason: "the request's header list is larger than \(loop.maxHeaderBytes) bytes")
            stream.fields = HeaderFields()
            stream.cookies = []
            return 0
        }
        let valueText = String(decoding: value, as: UTF8.self)
        // nghttp2 has checked the names (lower case, §8.2.1) and the pseudo-header fields (known,
        // once, before the others, §8.3): plain byte comparisons tell them apart.
        if name.first == UInt8(ascii: ":") {
            if Self.equals(name, ":method") {
                stream.method = valueText
            } else if Self.equals(name, ":scheme") {
                stream.scheme = valueText
            } else if Self.equals(name, ":path") {
                // nghttp2 lets bytes past ASCII through; a request-target has none (RFC 9113
                // §8.3.1: the path and query of the URI; RFC 9112 §3.2), as HTTP/1.1 refuses.
                if let byte = value.first(where: { !HTTPBytes.isTarget($0) }) {
                    return malformed(
                        stream,
                        Rejection(
                            status: 400,
                            reason: "the :path contains \(HTTPBytes.describe(byte)) (RFC 9113 §8.3.1, RFC 9112 §3.2)"))
                }
                stream.path = valueText
            } else if Self.equals(name, ":authority") {
                // host[:port] without user information (RFC 9113 §8.3.1), as HTTP/1.1's Host.
                if let rejection = RequestHeadParser.checkHost(value, field: ":authority", rule: "RFC 9113 §8.3.1") {
                    return malformed(stream, rejection)
                }
                stream.authority = valueText
                // The origin gets it as Host (RFC 9113 §8.3.1), first as HTTP/1.1 has it.
                stream.fields.append(name: .host, value: valueText)
            }
            return 0
        }
        if Self.equals(name, "cookie") {
            stream.cookies.append(valueText)
        } else if Self.equals(name, "host") {
            if let rejection = RequestHeadParser.checkHost(value, field: "host", rule: "RFC 9113 §8.3.1") {
                return malformed(stream, rejection)
            }
            guard let authority = stream.authority else {
                stream.fields.append(name: .host, value: valueText)
                return 0
            }
            // RFC 9113 §8.3.1: a Host naming another entity than :authority is malformed; the
            // same one is already there.
            guard Self.sameHost(authority, valueText, scheme: stream.scheme) else {
                reset(stream, NGHTTP2_PROTOCOL_ERROR)
                return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
            }
        } else {
            if Self.equals(name, "expect"), let base = value.baseAddress {
                let expectations = RequestHeadParser.expectations(base, value.count)
                stream.expectsContinue = stream.expectsContinue || expectations.continues
                stream.unknownExpectation = stream.unknownExpectation ?? expectations.unknown
            }
            stream.fields.append(name: String(decoding: name, as: UTF8.self), value: valueText)
        }
        return 0
    }

    private static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ text: StaticString) -> Bool {
        bytes.count == text.utf8CodeUnitCount && memcmp(bytes.baseAddress!, text.utf8Start, bytes.count) == 0
    }

    /// Whether `host` names the entity `authority` names (RFC 9113 §8.3.1), both already
    /// checked as `host[:port]`: compared in normal form, the host's case ignored and the
    /// scheme's default port the same as none (RFC 9110 §4.2.3), so `example.com` and
    /// `EXAMPLE.com:80` are one for `http`.
    private static func sameHost(_ authority: String, _ host: String, scheme: String) -> Bool {
        guard let named = try? URIAuthority(authority), let other = try? URIAuthority(host) else {
            return authority.isEmpty && host.isEmpty
        }
        let defaultPort = Target.Scheme(rawValue: scheme)?.defaultPort
        return named.normalized(defaultPort: defaultPort) == other.normalized(defaultPort: defaultPort)
    }

    /// Refuses a malformed request (RFC 9113 §8.1.1) with `rejection` once its header block is
    /// read, as HTTP/1.1 refuses the same head: nothing of it goes on, the rest of the block is
    /// ignored.
    private func malformed(_ stream: HTTP2Stream, _ rejection: Rejection) -> Int32 {
        stream.refusal = rejection
        stream.fields = HeaderFields()
        stream.cookies = []
        return 0
    }

    fileprivate func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let header = frame.pointee.hd
        let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch Int(header.type) {
        case Int(NGHTTP2_HEADERS.rawValue):
            headerBlockSince = 0
            guard let stream = streams[header.stream_id] else { return 0 }
            stream.requestEnded = endStream
            if frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST { headersComplete(stream) }
            if endStream { requestComplete(stream) }
        case Int(NGHTTP2_DATA.rawValue):
            if endStream, let stream = streams[header.stream_id] {
                stream.requestEnded = true
                requestComplete(stream)
            }
        case Int(NGHTTP2_RST_STREAM.rawValue):
            // CVE-2023-44487: streams opened and reset at once, each one work for the server.
            if !resets.take(now: loop.now) { terminate(NGHTTP2_ENHANCE_YOUR_CALM) }
        case Int(NGHTTP2_SETTINGS.rawValue), Int(NGHTTP2_PING.rawValue):
            guard header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 else { return 0 }
            if !controlFrames.take(now: loop.now) { terminate(NGHTTP2_ENHANCE_YOUR_CALM) }
        case Int(NGHTTP2_PRIORITY.rawValue):
            if !controlFrames.take(now: loop.now) { terminate(NGHTTP2_ENHANCE_YOUR_CALM) }
        default:
            break
        }
        return 0
    }

    fileprivate func frameSent(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let header = frame.pointee.hd
        switch Int(header.type) {
        case Int(NGHTTP2_GOAWAY.rawValue):
            // Every GOAWAY that leaves, ours or nghttp2's (a protocol error it found), is counted.
            loop.countGoAway(frame.pointee.goaway.error_code)
        case Int(NGHTTP2_HEADERS.rawValue), Int(NGHTTP2_DATA.rawValue):
            // The server's own answer (431, 413, 408) went out before the request ended: the
            // rest of it is not wanted (RFC 9113 §8.1: RST_STREAM NO_ERROR after a complete response).
            guard header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0, let stream = streams[header.stream_id]
            else { return 0 }
            stream.endSent = true
            guard stream.refusal != nil, !stream.requestEnded
            else { return 0 }
            reset(stream, NGHTTP2_NO_ERROR)
        default:
            break
        }
        return 0
    }

    /// The client's side of the connection ended (FIN): requests not ended yet never will be.
    /// They are reset (CANCEL); the ones handed on are still answered.
    func clientEnded() {
        for stream in streams.values where !stream.requestEnded { reset(stream, NGHTTP2_CANCEL) }
    }

    /// After the client's FIN no WINDOW_UPDATE can come: answers waiting on a shut window never
    /// leave, so their streams are reset (CANCEL) rather than held until the stall timeout.
    func resetStalledAfterClientEnded() {
        for stream in streams.values where waitsOnWindow(stream) { reset(stream, NGHTTP2_CANCEL) }
    }

    /// Whether the stream's answer waits on a shut window: bytes queued, or only its end (with
    /// the window at 0 nghttp2 does not ask for the last, empty DATA frame with END_STREAM).
    private func waitsOnWindow(_ stream: HTTP2Stream) -> Bool {
        guard !stream.closed, !stream.endSent,
            stream.pendingBytes > 0 || (stream.finished && stream.responseStarted && stream.bodyAllowed)
        else { return false }
        return nghttp2_session_get_remote_window_size(session) <= 0
            || nghttp2_session_get_stream_remote_window_size(session, stream.id) <= 0
    }

    /// Whether some answer waits on a shut window (`pendingBytes` counts only queued bytes).
    var hasStreamWaitingOnWindow: Bool { pendingBytes > 0 || streams.values.contains { waitsOnWindow($0) } }

    private func headersComplete(_ stream: HTTP2Stream) {
        stream.headersDone = true
        stream.progress = BodyProgress(start: loop.now)
        if let refusal = stream.refusal { return respondItself(stream, refusal) }
        // As HTTP/1.1 answers the head: an expectation it cannot meet, a length over the limit.
        if let unknown = stream.unknownExpectation {
            return refuse(stream, RequestHeadParser.unmetExpectation(unknown))
        }
        let length = stream.fields[.contentLength].flatMap { Int64($0) }
        if let length, length > loop.maxBodyBytes {
            return refuse(
                stream,
                Rejection(
                    status: 413,
                    reason: "the body of \(length) bytes is larger than the limit of \(loop.maxBodyBytes) bytes"))
        }
        // RFC 9110 §10.1.1: ask for the content at once, when HTTP/1.1 would: content follows
        // (the HEADERS did not end the stream, no `content-length: 0`) and none has arrived.
        if stream.expectsContinue && !stream.requestEnded && stream.body.isEmpty && length != 0 {
            interim(stream, ServerResponseHead(status: 100, fields: HeaderFields()))
        }
    }

    fileprivate func dataReceived(_ id: Int32, _ data: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard let stream = streams[id] else {
            nghttp2_session_consume(session, id, data.count)
            return 0
        }
        stream.progress.received(data.count, at: loop.now)
        guard stream.refusal == nil, !stream.dispatched else {
            nghttp2_session_consume(session, id, data.count)
            return 0
        }
        if Int64(stream.body.count + data.count) > loop.maxBodyBytes {
            nghttp2_session_consume(session, id, data.count)
            refuse(stream, Rejection(status: 413, reason: "the request body is larger than \(loop.maxBodyBytes) bytes"))
            return 0
        }
        stream.body.append(contentsOf: data)
        stream.unacknowledged += data.count
        acknowledgeBodies()
        return 0
    }

    /// Gives windows back (RFC 9113 §6.9) for body bytes received while the connection holds
    /// less than its budget; past it the client waits until bodies are handed on. What it holds
    /// are the bodies of streams not handed on yet (a stream handed on or refused has none left)
    /// whose windows were given back.
    private func acknowledgeBodies() {
        let held = streams.values.reduce(0) { $0 + $1.body.count - $1.unacknowledged }
        var room = HTTP2Limits.bufferedBodyBytes - held
        for stream in streams.values where stream.unacknowledged > 0 && room > 0 {
            let count = min(stream.unacknowledged, room)
            nghttp2_session_consume(session, stream.id, count)
            stream.unacknowledged -= count
            room -= count
        }
    }

    fileprivate func streamClosed(_ id: Int32) -> Int32 {
        guard let stream = streams.removeValue(forKey: id) else { return 0 }
        pendingBytes -= stream.pendingBytes
        // Windows of bytes received on it stay with the connection: nghttp2 counts them itself.
        releaseAccounted(stream)
        Self.markGone(stream)
        if streams.isEmpty { connection.state.deadline = loop.now + loop.idleMilliseconds }
        acknowledgeBodies()
        return 0
    }

    // MARK: requests

    /// The request has ended (END_STREAM): it goes to the handler, or the server answers it.
    private func requestComplete(_ stream: HTTP2Stream) {
        guard !stream.dispatched, stream.refusal == nil, stream.headersDone else { return }
        stream.dispatched = true
        var body: [UInt8] = []
        swap(&body, &stream.body)
        giveBackWindow(stream)
        acknowledgeBodies()
        var fields = HeaderFields()
        swap(&fields, &stream.fields)
        // RFC 9113 §8.2.3: cookie crumbs are joined before the request goes on as HTTP/1.1.
        if !stream.cookies.isEmpty { fields.append(name: "cookie", value: stream.cookies.joined(separator: "; ")) }
        // The length DATA frames gave (nghttp2 checked a content-length against them, §8.1.1),
        // for the HTTP/1.1 request to the origin.
        if !body.isEmpty && !fields.contains(.contentLength) {
            fields.append(name: .contentLength, value: String(body.count))
        }
        stream.bodyAllowed = stream.method != "HEAD"
        let request = ServerRequest(
            method: stream.method, target: stream.method == "CONNECT" ? (stream.authority ?? "") : stream.path,
            majorVersion: 2, minorVersion: 0, fields: fields, body: body, peerIsLoopback: connection.peerIsLoopback,
            peerAddress: connection.peerAddress, isTLS: isTLS)
        loop.countRequest(http2: true)
        let responder = Responder(
            loop: loop, target: ResponseTarget(connection: connection, sequence: 0, stream: stream))
        loop.handler.handle(request, responder)
    }

    /// Answers the stream with the server's own short text (431, 413, 408), whatever follows.
    private func refuse(_ stream: HTTP2Stream, _ rejection: Rejection) {
        guard stream.refusal == nil else { return }
        stream.refusal = rejection
        stream.body = []
        giveBackWindow(stream)
        if stream.headersDone { respondItself(stream, rejection) }
    }

    /// Gives back the window of the stream's body bytes not yet acknowledged: the body was
    /// handed on or refused, so the connection no longer holds them.
    private func giveBackWindow(_ stream: HTTP2Stream) {
        guard stream.unacknowledged > 0 else { return }
        nghttp2_session_consume(session, stream.id, stream.unacknowledged)
        stream.unacknowledged = 0
    }

    private func respondItself(_ stream: HTTP2Stream, _ rejection: Rejection) {
        loop.countRejection()
        let phrase = reasonPhrase(rejection.status) ?? "Error"
        let text = Array("\(rejection.status) \(phrase): \(rejection.reason)\n".utf8)
        stream.dispatched = true
        loop.handler.rejected(
            ServerRequest(
                method: stream.method.isEmpty ? "-" : stream.method, target: stream.path.isEmpty ? "-" : stream.path,
                majorVersion: 2, minorVersion: 0, fields: stream.fields, peerIsLoopback: connection.peerIsLoopback,
                peerAddress: connection.peerAddress, isTLS: isTLS), status: rejection.status, bodyBytes: text.count)
        var fields: HeaderFields = ["content-type": "text/plain; charset=utf-8"]
        if let proxyStatus = loop.proxyStatus(rejecting: rejection.status) { fields[.proxyStatus] = proxyStatus }
        submit(
            stream, ServerResponseHead(status: rejection.status, fields: fields), framing: .length(Int64(text.count)))
        append(stream, text, accounted: false)
        finish(stream)
    }

    // MARK: answers

    /// Whether the stream is still waiting for (or receiving) its answer.
    func isAnswering(_ stream: HTTP2Stream) -> Bool { !stream.closed && streams[stream.id] === stream }

    /// Submits the response head (RFC 9113 §8.3.2); the body, if any, follows as DATA.
    func submit(_ stream: HTTP2Stream, _ head: ServerResponseHead, framing: BodyFraming) {
        stream.responseStarted = true
        let status = (100...999).contains(head.status) && head.status >= 200 ? head.status : 500
        let bodyAllowed = stream.bodyAllowed && status != 204 && status != 304
        var contentLength: Int64?
        switch framing {
        case .none:
            stream.bodyAllowed = false
        case .length(let length):
            stream.remaining = max(0, length)
            stream.bodyAllowed = bodyAllowed
            if status != 204 { contentLength = max(0, length) }
            if length <= 0 { stream.bodyAllowed = false }
        case .streamed:
            stream.remaining = nil
            stream.bodyAllowed = bodyAllowed
        }
        withFields(
            status, head.leadingFields, head.fields, contentLength: contentLength, keepContentLength: framing == .none
        ) {
            fields, count in
            if stream.bodyAllowed {
                var provider = nghttp2_data_provider(
                    source: nghttp2_data_source(ptr: nil),
                    read_callback: { _, id, _, length, flags, _, user in
                        HTTP2Session.from(user).readData(id, length, flags!)
                    })
                nghttp2_submit_response(session, stream.id, fields, count, &provider)
            } else {
                nghttp2_submit_response(session, stream.id, fields, count, nil)
            }
        }
    }

    /// Submits an interim response (RFC 9113 §8.1: HEADERS without END_STREAM before the final ones).
    func interim(_ stream: HTTP2Stream, _ head: ServerResponseHead) {
        withFields(head.status, head.leadingFields, head.fields, contentLength: nil, keepContentLength: false) {
            fields, count in
            nghttp2_submit_headers(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, nil, fields, count, nil)
        }
    }

    /// Queues body bytes for the stream (those past its `Content-Length` dropped).
    func append(_ stream: HTTP2Stream, _ bytes: [UInt8], accounted: Bool) {
        var bytes = bytes
        if let remaining = stream.remaining, Int64(bytes.count) > remaining {
            if accounted { loop.releaseAccounted(stream.shared, bytes.count - Int(remaining)) }
            bytes = Array(bytes[0..<Int(remaining)])
        }
        guard stream.bodyAllowed, !stream.closed, !bytes.isEmpty else {
            if accounted { loop.releaseAccounted(stream.shared, bytes.count) }
            return
        }
        if let remaining = stream.remaining { stream.remaining = remaining - Int64(bytes.count) }
        if pendingBytes == 0 { lastDataSent = loop.now }
        stream.chunks.append(bytes)
        stream.accounted.append(accounted)
        stream.pendingBytes += bytes.count
        pendingBytes += bytes.count
        resume(stream)
    }

    /// The handler is done with the body: END_STREAM once the queued bytes are sent; a body
    /// short of its `Content-Length` ends in RST_STREAM instead (the client must see the cut).
    func finish(_ stream: HTTP2Stream) {
        stream.finished = true
        if let remaining = stream.remaining, remaining > 0, stream.bodyAllowed {
            loop.log(
                "HTTP server: a response ended \(remaining) bytes short of its Content-Length; resetting its HTTP/2 stream"
            )
        }
        resume(stream)
    }

    /// Resets the stream (RFC 9113 §6.4): the handler gave up on it.
    func reset(_ stream: HTTP2Stream, _ code: nghttp2_error_code = NGHTTP2_INTERNAL_ERROR) {
        guard !stream.closed else { return }
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream.id, code.rawValue)
    }

    private func resume(_ stream: HTTP2Stream) {
        if stream.deferred {
            stream.deferred = false
            nghttp2_session_resume_data(session, stream.id)
        }
    }

    /// nghttp2 asks how much of the stream's body the next DATA frame carries (at most
    /// `length`). The bytes stay where they are (`NO_COPY`): ``sendData(_:_:_:)`` copies them
    /// once, straight into the connection's output, instead of into nghttp2's frame buffer
    /// first.
    fileprivate func readData(_ id: Int32, _ length: Int, _ flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let stream = streams[id] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let count = min(length, stream.pendingBytes)
        if count == stream.pendingBytes && stream.finished {
            // A body short of its Content-Length ends in RST_STREAM once what came is sent.
            if let remaining = stream.remaining, remaining > 0, stream.bodyAllowed {
                return count > 0 ? count : Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
            }
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        } else if count == 0 {
            stream.deferred = true
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        }
        flags.pointee |= NGHTTP2_DATA_FLAG_NO_COPY.rawValue
        return count
    }

    /// Writes a DATA frame nghttp2 framed (`header`, 9 bytes) with `length` bytes of the
    /// stream's body into the output (RFC 9113 §6.1; no padding is ever asked for).
    fileprivate func sendData(_ id: Int32, _ header: UnsafePointer<UInt8>, _ length: Int) -> Int32 {
        guard connection.state.output.count < HTTP2Limits.outputHighWater else {
            return Int32(NGHTTP2_ERR_WOULDBLOCK.rawValue)
        }
        guard let stream = streams[id], stream.pendingBytes >= length else {
            return Int32(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        let output = connection.state.output.reserve(9 + length)
        output.update(from: header, count: 9)
        var copied = 0
        var released = 0
        while copied < length {
            let chunk = stream.chunks[stream.firstChunk]
            let take = min(length - copied, chunk.count - stream.chunkOffset)
            chunk.withUnsafeBufferPointer {
                (output + 9 + copied).update(from: $0.baseAddress! + stream.chunkOffset, count: take)
            }
            copied += take
            if stream.accounted[stream.firstChunk] { released += take }
            stream.chunkOffset += take
            if stream.chunkOffset == chunk.count {
                stream.chunks[stream.firstChunk] = []
                stream.firstChunk += 1
                stream.chunkOffset = 0
            }
        }
        connection.state.output.commit(9 + length)
        if stream.firstChunk == stream.chunks.count {
            stream.chunks.removeAll(keepingCapacity: true)
            stream.accounted.removeAll(keepingCapacity: true)
            stream.firstChunk = 0
        }
        stream.pendingBytes -= length
        pendingBytes -= length
        if released > 0 { loop.releaseAccounted(stream.shared, released) }
        if length > 0 { lastDataSent = loop.now }
        return 0
    }

    private func releaseAccounted(_ stream: HTTP2Stream) {
        var total = 0
        for index in stream.firstChunk..<stream.chunks.count where stream.accounted[index] {
            total += stream.chunks[index].count - (index == stream.firstChunk ? stream.chunkOffset : 0)
        }
        if total > 0 { loop.releaseAccounted(stream.shared, total) }
    }

    /// Calls `body` with the response's fields (`leading`, then `fields`) as nghttp2 name-value
    /// pairs: `:status` first, names lower-cased (RFC 9113 §8.2.1), connection-specific fields dropped (§8.2.2), and the
    /// ones that could not be sent safely left out. The bytes go into buffers the session keeps.
    private func withFields(
        _ status: Int, _ leading: HeaderFields, _ fields: HeaderFields, contentLength: Int64?, keepContentLength: Bool,
        _ body: (UnsafePointer<nghttp2_nv>, Int) -> Void
    ) {
        fieldBytes.removeAll(keepingCapacity: true)
        fieldOffsets.removeAll(keepingCapacity: true)
        func add(_ name: StaticString, _ value: Int64) {
            fieldOffsets.append(fieldBytes.count)
            fieldBytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            fieldOffsets.append(fieldBytes.count)
            fieldBytes.append(contentsOf: String(value).utf8)
        }
        add(":status", Int64(status))
        func addLines(_ fields: HeaderFields) {
            fields.withLines { lines in
                // Each line read where it is: a copy costs a retain and a release of each string.
                for index in lines.indices {
                    ASCII.withUTF8(lines[index].name) { name in
                        ASCII.withUTF8(lines[index].value) { value in
                            guard !name.isEmpty, !Self.isDropped(name, keepContentLength: keepContentLength),
                                value.isEmpty || !HTTPBytes.hasInvalidFieldValueByte(value.baseAddress!, value.count)
                            else { return }
                            let start = fieldBytes.count
                            for byte in name {
                                guard HTTPBytes.isToken(byte) else {
                                    fieldBytes.removeSubrange(start...)
                                    return
                                }
                                fieldBytes.append(byte | (byte >= 0x41 && byte <= 0x5A ? 0x20 : 0))
                            }
                            fieldOffsets.append(start)
                            fieldOffsets.append(fieldBytes.count)
                            fieldBytes.append(contentsOf: value)
                        }
                    }
                }
            }
        }
        addLines(leading)
        addLines(fields)
        if let contentLength { add("content-length", contentLength) }
        fieldOffsets.append(fieldBytes.count)
        pairs.removeAll(keepingCapacity: true)
        fieldBytes.withUnsafeMutableBufferPointer { storage in
            let base = storage.baseAddress ?? UnsafeMutablePointer<UInt8>(bitPattern: 1)!
            var index = 0
            while index + 2 < fieldOffsets.count {
                let (name, value, end) = (fieldOffsets[index], fieldOffsets[index + 1], fieldOffsets[index + 2])
                pairs.append(
                    nghttp2_nv(
                        name: base + name, value: base + value, namelen: value - name, valuelen: end - value,
                        flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
                index += 2
            }
            pairs.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }

    /// Whether a handler's field is one the server leaves out: connection-specific fields
    /// (RFC 9113 §8.2.2), and `Content-Length` unless the head keeps its own.
    private static func isDropped(_ name: UnsafeBufferPointer<UInt8>, keepContentLength: Bool) -> Bool {
        let base = name.baseAddress!
        switch name.count {
        case 7: return HTTPBytes.equalsLowercase(base, 7, "upgrade")
        case 10:
            return HTTPBytes.equalsLowercase(base, 10, "connection")
                || HTTPBytes.equalsLowercase(base, 10, "keep-alive")
        case 14: return !keepContentLength && HTTPBytes.equalsLowercase(base, 14, "content-length")
        case 16: return HTTPBytes.equalsLowercase(base, 16, "proxy-connection")
        case 17: return HTTPBytes.equalsLowercase(base, 17, "transfer-encoding")
        default: return false
        }
    }
}

/// The client connection preface (RFC 9113 §3.4) a cleartext HTTP/2 client opens with.
enum HTTP2Preface {
    static let bytes: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Whether `count` bytes at `base` begin the preface (`.partial` when too few to tell).
    static func match(_ base: UnsafePointer<UInt8>, count: Int) -> Match {
        let checked = min(count, bytes.count)
        for index in 0..<checked where base[index] != bytes[index] { return .no }
        return checked == bytes.count ? .yes : .partial
    }

    enum Match {
        case yes
        case no
        case partial
    }
}
#endif
