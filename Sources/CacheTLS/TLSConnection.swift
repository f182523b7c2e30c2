internal import COpenSSLHTTPCache
import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// TLS over one connected, non-blocking socket, client or server side, used by one thread at a
/// time.
///
/// Every call here returns at once: when the socket is not ready it says which readiness it
/// needs (``ReadResult/wantRead``, ``ReadResult/wantWrite``), for an event loop to wait for and
/// then call again. The blocking calls (``handshake(timeout:)``, ``receive(into:stallTimeout:)``,
/// ``send(_:stallTimeout:)``, ``shutdown(stallTimeout:)``) wait with `poll(2)` on top of them.
///
/// The connection never closes the socket: its owner closes it after it is done with the
/// connection (and may keep the connection for reuse, checking ``isIdle`` first).
///
/// A read tells a close with `close_notify` (``ReadResult/closed``) from one without
/// (``ReadResult/closedWithoutNotify``): a peer, or an attacker, cutting the connection, which
/// never completes a message (RFC 9112 §9.8, RFC 8446 §6.1).
public final class TLSConnection {
    /// How a handshake or a shutdown stands.
    public enum Progress: Sendable, Equatable {
        /// Finished.
        case done
        /// Call again once the socket is readable.
        case wantRead
        /// Call again once the socket is writable.
        case wantWrite
        /// Failed; the connection is unusable (close the socket).
        case failed(TLSError)
    }

    /// What a read gave.
    public enum ReadResult: Sendable, Equatable {
        /// This many bytes were read into the buffer.
        case bytes(Int)
        /// The peer ended the connection with `close_notify`: nothing more will come.
        case closed
        /// The connection ended without `close_notify` (EOF or a reset): whatever was being
        /// received is truncated (RFC 8446 §6.1, RFC 9112 §9.8).
        case closedWithoutNotify
        /// Call again once the socket is readable.
        case wantRead
        /// Call again once the socket is writable (TLS may need to send while reading).
        case wantWrite
        /// Reading failed; the connection is unusable.
        case failed(TLSError)
    }

    /// What a write gave.
    public enum WriteResult: Sendable, Equatable {
        /// This many of the bytes were written (at least one; perhaps fewer than given).
        case wrote(Int)
        /// Call again once the socket is readable, with the same bytes (they may have moved).
        case wantRead
        /// Call again once the socket is writable, with the same bytes (they may have moved).
        case wantWrite
        /// Writing failed; the connection is unusable.
        case failed(TLSError)
    }

    enum Role {
        case client(TLSClientContext, host: String, sessionKey: String)
        /// The context is kept so its callbacks' argument outlives every connection.
        case server(TLSServerContext)
    }

    /// The socket (not owned).
    public let fd: Int32
    /// The other side, `host:port`, as errors name it: the host asked for on a client, the
    /// client's address on a server.
    public let peer: String
    let ssl: OpaquePointer
    private let role: Role
    private let socket: UnsafeMutablePointer<SocketState>
    /// The first failure of the peer's chain, recorded by the verification callback.
    private var verificationFailure: VerificationFailure?
    /// Set when the connection failed: no `close_notify` is sent after that.
    private var broken = false
    /// On a server, the host name the client's ClientHello asks for with SNI, as sent; nil when
    /// it names none. Read from the ClientHello before OpenSSL decrypts a session ticket, which
    /// under TLS 1.2 it does before it reads the SNI extension itself (RFC 6066 §3).
    var requestedServerName: String?

    init(context: OpaquePointer, fd: Int32, peer: String, role: Role) throws(TLSError) {
        OpenSSLErrorQueue.clear()
        guard let ssl = SSL_new(context) else {
            throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "SSL_new failed"))
        }
        socket = .allocate(capacity: 1)
        socket.initialize(to: SocketState(fd: fd))
        guard let bio = SocketBIO.make(socket) else {
            SSL_free(ssl)
            socket.deallocate()
            throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "the socket BIO cannot be made"))
        }
        SSL_set_bio(ssl, bio, bio)  // the SSL owns the BIO (one reference for both directions)
        self.ssl = ssl
        self.fd = fd
        self.peer = peer
        self.role = role
        #if canImport(Darwin)
        Socket.setOption(fd, SOL_SOCKET, SO_NOSIGPIPE)
        #endif
        SSL_set_ex_data(ssl, 0, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        SSL_free(ssl)
        socket.pointee.releasePending()
        socket.deallocate()
    }

    // MARK: Non-blocking core

    /// Advances the handshake: ``Progress/done`` once it is complete (the peer verified, on
    /// a client), else what to wait for, or why it failed.
    ///
    /// A server's records are gathered while OpenSSL writes them and sent in one `send`. With
    /// `holdingLast`, under TLS 1.3, what the step that completes the handshake wrote (the
    /// session tickets, RFC 8446 §4.6.1, which the client does not wait for) is kept instead, to leave with the next ``write(_:)``, or at
    /// ``uncork()`` or ``shutdown()``: the first response and the tickets then leave together.
    /// A caller that holds them must send them: write, uncork or shut down before it waits for
    /// the peer to answer something written.
    public func handshake(holdingLast: Bool = false) -> Progress {
        if socket.pointee.pendingCount > 0 {
            switch SocketBIO.sendPending(socket) {
            case .sent: break
            case .blocked: return .wantWrite
            case .failed(let code): return failHandshake(code)
            }
        }
        let server = serverContext != nil
        socket.pointee.corked = server
        let error = perform({ SSL_do_handshake($0) })
        socket.pointee.corked = false
        // Under TLS 1.2 the step that completes a full handshake writes the server's Finished,
        // which the client waits for: only TLS 1.3's tickets may wait.
        if error == nil && holdingLast && SSL_version(ssl) == TLS1_3_VERSION { return .done }
        if server {
            // The flight, or a failure's alert (sent if the socket takes it, not waited for).
            let sent = SocketBIO.sendPending(socket)
            if error == nil || error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE {
                switch sent {
                case .sent: break
                case .blocked: return .wantWrite
                case .failed(let code): return failHandshake(code)
                }
            }
        }
        guard let error else { return .done }
        switch error {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default:
            broken = true
            return .failed(handshakeError())
        }
    }

    /// A handshake whose records could not be sent: the socket failed with `code`.
    private func failHandshake(_ code: Int32) -> Progress {
        broken = true
        OpenSSLErrorQueue.clear()
        return .failed(.handshakeFailed(peer: peer, reason: errnoText(code)))
    }

    /// Gathers the records of the writes that follow (at most 64 KiB wait) until ``uncork()``,
    /// which sends them in one `send`: a response of several records leaves in one system call
    /// and reaches the peer in one wake-up.
    public func cork() {
        socket.pointee.corked = true
    }

    /// Ends gathering and sends what waits (records gathered, or held by
    /// ``handshake(holdingLast:)``): ``Progress/done`` once all of it is sent,
    /// ``Progress/wantWrite`` while the socket cannot take the rest (call again when it is
    /// writable; nothing is lost meanwhile).
    public func uncork() -> Progress {
        socket.pointee.corked = false
        switch SocketBIO.sendPending(socket) {
        case .sent: return .done
        case .blocked: return .wantWrite
        case .failed(let code):
            broken = true
            return .failed(.connectionFailed(peer: peer, reason: errnoText(code)))
        }
    }

    /// Whether the buffer records are gathered in stays once they are sent: set while a busy
    /// connection writes response after response (each flush would otherwise allocate it and
    /// fault it in again); cleared, an empty one is given back at once (an idle connection
    /// holds none).
    public var keepsBuffer: Bool {
        get { socket.pointee.keepsBuffer }
        set {
            socket.pointee.keepsBuffer = newValue
            if !newValue && socket.pointee.pendingCount == 0 { socket.pointee.releasePending() }
        }
    }

    /// Whether the connection holds a buffer for gathered records now (sent or not).
    package var holdsBuffer: Bool { socket.pointee.pending != nil }

    /// Bytes written through TLS and not yet sent: records gathered (``cork()``) or held
    /// (``handshake(holdingLast:)``), or left when the socket was full at ``uncork()``.
    public var unsentCount: Int { socket.pointee.pendingCount }

    /// Reads decrypted bytes into `buffer` (at most its size).
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult {
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return .bytes(0) }
        var count = 0
        // Only a recv of this read says how the socket stands now (hasDrainedSocket).
        socket.pointee.drained = false
        guard let error = perform({ SSL_read_ex($0, base, buffer.count, &count) }) else { return .bytes(count) }
        switch error {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN:
            OpenSSLErrorQueue.clear()
            return .closed
        default:
            broken = true
            switch ioFailure(error) {
            case .truncated: return .closedWithoutNotify
            case .failed(let reason): return .failed(.connectionFailed(peer: peer, reason: reason))
            }
        }
    }

    /// Writes some of `bytes`: ``WriteResult/wrote(_:)`` says how many.
    public func write(_ bytes: UnsafeRawBufferPointer) -> WriteResult {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return .wrote(0) }
        var count = 0
        guard let error = perform({ SSL_write_ex($0, base, bytes.count, &count) }) else { return .wrote(count) }
        switch error {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default:
            broken = true
            switch ioFailure(error) {
            case .truncated: return .failed(.connectionFailed(peer: peer, reason: "the peer closed the connection"))
            case .failed(let reason): return .failed(.connectionFailed(peer: peer, reason: reason))
            }
        }
    }

    /// Sends `close_notify` (RFC 8446 §6.1), without waiting for the peer's: ``Progress/done``
    /// once it is sent (at once, when the connection never finished its handshake or failed:
    /// nothing is sent then).
    public func shutdown() -> Progress {
        guard !broken, SSL_is_init_finished(ssl) == 1 else { return .done }
        // 0: sent, the peer's not yet received (we do not wait for it); 1: both sent. Called
        // again (after wantWrite), OpenSSL does not send a second close_notify.
        if let error = perform({
            let result = SSL_shutdown($0)
            return result >= 0 ? 1 : result
        }) {
            switch error {
            case SSL_ERROR_WANT_READ: return .wantRead
            case SSL_ERROR_WANT_WRITE: return .wantWrite
            default:
                broken = true
                if case .failed(let reason) = ioFailure(error) {
                    return .failed(.connectionFailed(peer: peer, reason: reason))
                }
                return .done  // the peer is gone: nobody is left to tell
            }
        }
        // Records gathered or held go before the close_notify, which waits behind them.
        guard socket.pointee.pendingCount > 0 else { return .done }
        return uncork()
    }

    /// Whether decrypted or received bytes wait inside OpenSSL: a reader must read them before
    /// waiting for the socket, which will not signal them.
    public var hasBufferedBytes: Bool {
        SSL_pending(ssl) > 0 || SSL_has_pending(ssl) == 1
    }

    /// Whether a read may stop here without asking the socket again: the last ``read(into:)``
    /// called `recv`, which got fewer bytes than asked for (read-ahead asks for a whole
    /// buffer), and nothing waits inside OpenSSL. An edge-triggered reader then waits for the
    /// socket's next readiness instead of a read that would only return `EAGAIN`: one `recv`
    /// per request, not two. A read served from OpenSSL's buffer alone says nothing of the
    /// socket (bytes that came since its last `recv` may have been signalled already).
    public var hasDrainedSocket: Bool {
        socket.pointee.drained && !hasBufferedBytes
    }

    /// Whether a kept connection can carry another request: nothing has arrived on it (an
    /// origin that sent bytes after a complete response, RFC 9112 §6.3), and it is neither
    /// closed nor failed. Session tickets that arrived meanwhile are taken in.
    public var isIdle: Bool {
        guard !broken else { return false }
        var byte: UInt8 = 0
        var count = 0
        guard let error = perform({ SSL_peek_ex($0, &byte, 1, &count) }) else { return false }
        OpenSSLErrorQueue.clear()
        if error == SSL_ERROR_WANT_READ { return true }
        if error != SSL_ERROR_WANT_WRITE { broken = true }
        return false
    }

    /// The protocol ALPN chose (RFC 7301), e.g. `http/1.1`; nil when none was.
    public var applicationProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// Whether the handshake resumed an earlier session (RFC 8446 §2.2) rather than a full one.
    public var isResumed: Bool { SSL_session_reused(ssl) == 1 }

    /// The protocol version agreed, e.g. `TLSv1.3`.
    public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// The host name the client asked for with SNI, on a server; nil when it sent none.
    public var serverName: String? {
        SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name).map { String(cString: $0) }
    }

    // MARK: Failures

    /// Runs one OpenSSL call on the connection, with the error queue and the socket's `errno`
    /// cleared first (so only its own failure is read): nil when it returned 1, else
    /// `SSL_get_error`'s code for what it returned.
    private func perform(_ call: (OpaquePointer) -> Int32) -> Int32? {
        OpenSSLErrorQueue.clear()
        socket.pointee.lastErrno = 0
        let result = call(ssl)
        return result == 1 ? nil : SSL_get_error(ssl, result)
    }

    private enum IOFailure {
        /// The connection ended without `close_notify`: EOF or a reset.
        case truncated
        /// Anything else, in words.
        case failed(String)
    }

    /// What an `SSL_ERROR_SYSCALL` or `SSL_ERROR_SSL` after the handshake means; drains the queue.
    private func ioFailure(_ error: Int32) -> IOFailure {
        let queued = OpenSSLErrorQueue.drain()
        let code = socket.pointee.lastErrno
        if error == SSL_ERROR_SYSCALL {
            if code == 0 || code == ECONNRESET || socket.pointee.sawEOF { return .truncated }
            return .failed(errnoText(code))
        }
        // OpenSSL 3 reports an EOF without close_notify as this error (we do not set
        // SSL_OP_IGNORE_UNEXPECTED_EOF, which would make it look like close_notify).
        if queued?.reason == SSL_R_UNEXPECTED_EOF_WHILE_READING || code == ECONNRESET { return .truncated }
        if let queued { return .failed(queued.text) }
        return .failed(code != 0 ? errnoText(code) : "error \(error)")
    }

    /// The error a failed handshake reports: the chain's first failure, an old protocol, an
    /// early close, or OpenSSL's words. Drains the queue.
    private func handshakeError() -> TLSError {
        let queued = OpenSSLErrorQueue.drain()
        if case .client(let context, let host, _) = role {
            if let failure = verificationFailure {
                return failure.error(peer: peer, host: host, advice: context.configuration.trustAdvice)
            }
            let verified = Int32(SSL_get_verify_result(ssl))
            if verified != X509_V_OK, queued?.reason == SSL_R_CERTIFICATE_VERIFY_FAILED {
                return VerificationFailure(code: verified, certificate: nil)
                    .error(peer: peer, host: host, advice: context.configuration.trustAdvice)
            }
        }
        switch queued?.reason {
        case SSL_R_UNSUPPORTED_PROTOCOL, SSL_R_TLSV1_ALERT_PROTOCOL_VERSION, SSL_R_NO_PROTOCOLS_AVAILABLE,
            SSL_R_VERSION_TOO_LOW:
            return .protocolVersion(peer: peer)
        case SSL_R_UNEXPECTED_EOF_WHILE_READING:
            return .handshakeFailed(peer: peer, reason: "the connection was closed during the handshake")
        case .some:
            return .handshakeFailed(peer: peer, reason: queued?.text ?? "")
        case nil:
            // A socket error (a reset), or an EOF that OpenSSL saw as SSL_ERROR_SYSCALL.
            let code = socket.pointee.lastErrno
            let reason = code != 0 ? errnoText(code) : "the connection was closed during the handshake"
            return .handshakeFailed(peer: peer, reason: reason)
        }
    }

    // MARK: Callbacks

    /// The context of a server connection; nil on a client.
    var serverContext: TLSServerContext? {
        guard case .server(let context) = role else { return nil }
        return context
    }

    /// The connection `ssl` belongs to.
    static func owner(of ssl: OpaquePointer) -> TLSConnection? {
        SSL_get_ex_data(ssl, 0).map { Unmanaged<TLSConnection>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The verification callback: keeps the first failure and its certificate, and lets it
    /// stand (verification is never overridden).
    static func recordVerification(preverified: Int32, store: OpaquePointer?) -> Int32 {
        guard preverified != 1, let store,
            let raw = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()),
            let connection = owner(of: OpaquePointer(raw)), connection.verificationFailure == nil
        else { return preverified }
        let certificate = X509_STORE_CTX_get_current_cert(store).map(CertificateFacts.init)
        connection.verificationFailure = VerificationFailure(
            code: X509_STORE_CTX_get_error(store), certificate: certificate)
        return preverified
    }

    /// Keeps a new session of this client connection for the next connection to its origin:
    /// whether the reference was taken.
    func remember(_ session: OpaquePointer) -> Bool {
        guard case .client(let context, _, let key) = role else { return false }
        return context.remember(session, for: key)
    }
}

@available(*, unavailable)
extension TLSConnection: Sendable {}
