internal import COpenSSLHTTPCache
import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What every TLS client connection of a program shares: the trusted authorities, the
/// protocols offered and the sessions kept for resumption. Make one and keep it; its first
/// connection reads the system's trust store.
///
/// Verification is always on: the chain must lead to an authority of the default trust store
/// (OpenSSL's default paths, which honour `SSL_CERT_FILE` and `SSL_CERT_DIR`) or of an extra
/// file the user names, and the certificate must cover the host asked for (RFC 9110 §4.3.4).
/// Only TLS 1.2 and 1.3 are spoken (RFC 8996 deprecates 1.0 and 1.1), renegotiation is
/// refused, and SNI is sent for host names (RFC 6066 §3).
///
/// ```swift
/// let context = try TLSClientContext(.init(extraTrustRoots: ["/etc/my-ca.pem"]))
/// let tls = try context.connection(fd: fd, host: "example.com", port: 443)
/// try tls.handshake(timeout: 10)
/// ```
///
/// Sendable: its `SSL_CTX` is made and set up once, by the first connection, under a lock every
/// connection takes before it reads the context, and only read after that (OpenSSL makes
/// connections from one context on many threads); the sessions are behind a lock.
public final class TLSClientContext: @unchecked Sendable {
    /// How a client context is made.
    public struct Configuration: Sendable {
        /// PEM files of certificate authorities trusted besides the default trust store (the
        /// CLI's `--cacert FILE`). Each must be readable and hold at least one certificate.
        public var extraTrustRoots: [String]
        /// The protocols offered with ALPN (RFC 7301), most preferred first.
        public var applicationProtocols: [String]
        /// How many origins' sessions are kept for resumption (RFC 8446 §2.2); 0 keeps none.
        public var sessionCacheCapacity: Int
        /// How a user trusts another authority, for the error about an unknown one: `--cacert FILE`.
        public var trustAdvice: String

        /// - Parameters:
        ///   - extraTrustRoots: PEM files of authorities trusted besides the default store.
        ///   - applicationProtocols: The ALPN protocols offered; `http/1.1` by default.
        ///   - sessionCacheCapacity: The origins whose sessions are kept; 64 by default.
        ///   - trustAdvice: How a user trusts another authority (`--cacert FILE`).
        public init(
            extraTrustRoots: [String] = [], applicationProtocols: [String] = ["http/1.1"],
            sessionCacheCapacity: Int = 64, trustAdvice: String = "--cacert FILE"
        ) {
            self.extraTrustRoots = extraTrustRoots
            self.applicationProtocols = applicationProtocols
            self.sessionCacheCapacity = sessionCacheCapacity
            self.trustAdvice = trustAdvice
        }
    }

    /// How this context was made.
    public let configuration: Configuration
    /// The certificates of ``Configuration/extraTrustRoots``, read by `init`.
    private let extraRoots: [Certificate]
    /// Sessions by `host:port`, newest ticket of each origin: bounded, least recently used first out.
    private let sessions: Locked<LRUCache<String, Session>>?
    /// The OpenSSL context (`nil`: not made yet), made by the first connection rather than by
    /// `init`: initialising libssl and parsing every certificate of the system's bundle cost
    /// tens of milliseconds and megabytes of memory, which a process that speaks only `http`
    /// (the command-line tool answering from its cache) never needs. Failing to make it fails
    /// every connection.
    private let made = Locked<Result<OpaquePointer, TLSError>?>(nil)

    /// Makes a context, reading the extra trust files; OpenSSL's own context is made by the
    /// first connection.
    /// - Throws: ``TLSError/unusableTrustFile(path:reason:)`` when an extra trust file cannot
    ///   be read or holds no certificate; ``TLSError/setupFailed(reason:)`` for an ALPN name
    ///   that is not 1 to 255 bytes.
    public init(_ configuration: Configuration = Configuration()) throws(TLSError) {
        self.configuration = configuration
        sessions =
            configuration.sessionCacheCapacity > 0
            ? Locked(LRUCache(capacity: configuration.sessionCacheCapacity)) : nil
        _ = try Configure.alpnWire(configuration.applicationProtocols)
        var roots: [Certificate] = []
        for path in configuration.extraTrustRoots {
            roots += try Self.certificates(in: path)
        }
        extraRoots = roots
    }

    deinit {
        if case .success(let context) = made.withLock({ $0 }) { SSL_CTX_free(context) }
    }

    /// Whether OpenSSL's context, with the default trust store, has been made (by a first
    /// connection).
    package var isSetUp: Bool { made.withLock { $0 != nil } }

    /// OpenSSL's context, made on first use; its failure is every connection's.
    private func openSSLContext() throws(TLSError) -> OpaquePointer {
        try made.withLock { made -> Result<OpaquePointer, TLSError> in
            if let made { return made }
            let result = Result { () throws(TLSError) in try makeContext() }
            made = result
            return result
        }.get()
    }

    /// A new OpenSSL context: TLS 1.2 at least, ALPN, the default trust store and the extra
    /// roots, verification, sessions through ``remember(_:for:)``.
    private func makeContext() throws(TLSError) -> OpaquePointer {
        try OpenSSLLibraries.load()
        OpenSSLErrorQueue.clear()
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "SSL_CTX_new failed"))
        }
        do throws(TLSError) {
            try Configure.common(context, applicationProtocols: configuration.applicationProtocols, client: true)
            // The default paths read SSL_CERT_FILE and SSL_CERT_DIR when set.
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "the default trust store cannot be loaded"))
            }
            guard let store = SSL_CTX_get_cert_store(context) else { throw .setupFailed(reason: "no trust store") }
            for root in extraRoots {
                // A certificate already in the store (the same CA twice) is not an error.
                if X509_STORE_add_cert(store, root.pointer) != 1 { OpenSSLErrorQueue.clear() }
            }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER) { preverified, store in
            TLSConnection.recordVerification(preverified: preverified, store: store)
        }
        // Sessions reach us through the callback (TLS 1.3 tickets come after the handshake);
        // OpenSSL's own client cache is never used.
        if sessions != nil {
            _ = copenssl_ctx_set_session_cache_mode(
                context, Int(SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE))
            SSL_CTX_sess_set_new_cb(context) { ssl, session in
                guard let ssl, let session, let connection = TLSConnection.owner(of: ssl) else { return 0 }
                return connection.remember(session) ? 1 : 0
            }
        }
        return context
    }

    /// A client connection over `fd`, which must be connected to `host:port` and non-blocking;
    /// the connection never closes it. Nothing is sent until ``TLSConnection/handshake()``.
    ///
    /// SNI carries `host` unless it is an IP literal (RFC 6066 §3); the certificate must
    /// cover `host` (a DNS name, or an IP address for a literal). A session kept from an
    /// earlier connection to `host:port` is offered for resumption.
    /// - Parameters:
    ///   - host: The host of the URL: a name, or an IPv4 or IPv6 literal (brackets allowed).
    ///   - port: The port, for the session cache and error messages.
    /// - Throws: ``TLSError/setupFailed(reason:)`` when OpenSSL cannot make the connection.
    public func connection(fd: Int32, host: String, port: UInt16) throws(TLSError) -> TLSConnection {
        let context = try openSSLContext()
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let isAddress = SocketAddress(host: bare, port: port) != nil && bare != "localhost"
        let peer = bare.contains(":") ? "[\(bare)]:\(port)" : "\(bare):\(port)"
        let connection = try TLSConnection(
            context: context, fd: fd, peer: peer, role: .client(self, host: bare, sessionKey: peer))
        let ssl = connection.ssl
        SSL_set_connect_state(ssl)
        guard let parameters = SSL_get0_param(ssl) else {
            throw .setupFailed(reason: "no verification parameters")
        }
        X509_VERIFY_PARAM_set_hostflags(parameters, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
        let named =
            isAddress
            ? X509_VERIFY_PARAM_set1_ip_asc(parameters, bare)
            : X509_VERIFY_PARAM_set1_host(parameters, bare, 0)
        guard named == 1 else {
            throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "the host \(bare) cannot be verified"))
        }
        if !isAddress, copenssl_set_tlsext_host_name(ssl, bare) != 1 {
            throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "the host \(bare) cannot be sent as SNI"))
        }
        if let session = takeSession(for: peer) {
            SSL_set_session(ssl, session.pointer)
        }
        return connection
    }

    // MARK: Sessions

    /// A session OpenSSL gave us, freed when the cache lets it go.
    private final class Session {
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit { SSL_SESSION_free(pointer) }
    }

    /// Keeps `session` (whose reference we take) as the one to resume `key` with; false when
    /// it cannot be resumed or no sessions are kept (the reference is then OpenSSL's).
    func remember(_ session: OpaquePointer, for key: String) -> Bool {
        guard let sessions, SSL_SESSION_is_resumable(session) == 1 else { return false }
        let kept = Session(session)
        sessions.withLock { $0.set(kept, for: key) }
        return true
    }

    /// The session to offer `key`. A TLS 1.3 ticket is used once (RFC 8446 §C.4: a client
    /// should not reuse a ticket): it leaves the cache, and the new connection's tickets
    /// replace it. A TLS 1.2 session stays for the next connection.
    private func takeSession(for key: String) -> Session? {
        sessions?.withLock { cache in
            guard let session = cache.value(for: key) else { return nil }
            if SSL_SESSION_get_protocol_version(session.pointer) == TLS1_3_VERSION {
                cache.removeValue(for: key)
            }
            return session
        }
    }

    // MARK: Trust

    /// A certificate read from a trust file, freed with its last reference.
    private final class Certificate {
        let pointer: OpaquePointer
        init(_ pointer: OpaquePointer) { self.pointer = pointer }
        deinit { X509_free(pointer) }
    }

    /// Every certificate of the PEM file `path`.
    private static func certificates(in path: String) throws(TLSError) -> [Certificate] {
        let certificates: [Certificate]
        do {
            certificates = try PEMFile.read(path) { PEM_read_bio_X509($0, nil, refusePassphrase, $1) }.objects.map(
                Certificate.init)
        } catch {
            throw .unusableTrustFile(path: path, reason: error.reason)
        }
        // Reading stops at the end of the file (a "no start line" error) or at garbage.
        guard !certificates.isEmpty else {
            throw .unusableTrustFile(
                path: path, reason: "holds no PEM certificate (-----BEGIN CERTIFICATE-----); give a CA certificate")
        }
        return certificates
    }
}

/// Settings both sides share.
enum Configure {
    /// TLS 1.2 at least, no renegotiation, partial writes (the non-blocking writer keeps the
    /// rest), a write buffer that may move between retries, read-ahead (fewer `recv` calls),
    /// and the ALPN protocols (offered by a client; chosen from by a server).
    static func common(_ context: OpaquePointer, applicationProtocols: [String], client: Bool) throws(TLSError) {
        guard copenssl_ctx_set_min_proto_version(context, TLS1_2_VERSION) == 1 else {
            throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "TLS 1.2 cannot be the minimum"))
        }
        SSL_CTX_set_options(context, copenssl_op_no_renegotiation())
        _ = copenssl_ctx_set_mode(
            context, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS)
        )
        copenssl_ctx_set_read_ahead(context, 1)
        if client, !applicationProtocols.isEmpty {
            let wire = try alpnWire(applicationProtocols)
            guard SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) == 0 else {
                throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "the ALPN protocols cannot be set"))
            }
        }
    }

    /// Protocol names as ALPN sends them (RFC 7301 §3.1): each preceded by its length.
    static func alpnWire(_ protocols: [String]) throws(TLSError) -> [UInt8] {
        var wire: [UInt8] = []
        for name in protocols {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else {
                throw .setupFailed(reason: "the ALPN protocol name \"\(name)\" is not 1 to 255 bytes")
            }
            wire.append(UInt8(bytes.count))
            wire += bytes
        }
        return wire
    }
}
