internal import COpenSSLHTTPCache
import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What every TLS server connection shares: the certificates it can present and the protocols
/// it can choose with ALPN. The certificate is chosen per connection by the name the client
/// asks for with SNI (RFC 6066 §3): the first identity whose certificate covers that name, the
/// default one otherwise (no SNI, as for an IP address, or a name nobody covers).
///
/// ```swift
/// let context = try TLSServerContext(
///     default: .init(certificateFile: "localhost.pem", keyFile: "localhost.key"),
///     others: [.init(certificateFile: "other.pem", keyFile: "other.key")])
/// let tls = try context.connection(fd: accepted)
/// try tls.handshake(timeout: 10)
/// ```
///
/// Session tickets (RFC 8446 §4.6.1) are encrypted with the keys of a ``TLSTicketKeys`` ring,
/// rotated in memory; OpenSSL's server-side session cache is off, so a ticket is the only way
/// to resume, and a context keeps no state per client.
///
/// Sendable: its `SSL_CTX` and identities are only read after `init`.
public final class TLSServerContext: @unchecked Sendable {
    /// A certificate (with its chain) and its private key, as PEM files.
    public struct Identity: Sendable, Equatable {
        /// The certificate first, then the intermediate certificates that lead to the root.
        public var certificateFile: String
        /// The private key of the first certificate.
        public var keyFile: String

        /// - Parameters:
        ///   - certificateFile: A PEM file: the certificate, then its intermediates.
        ///   - keyFile: A PEM file holding the certificate's private key (unencrypted).
        public init(certificateFile: String, keyFile: String) {
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }
    }

    /// A loaded identity: the certificate, its key and its chain, freed with the context.
    private struct Loaded {
        var certificate: OpaquePointer
        var key: OpaquePointer
        var chain: OpaquePointer?
    }

    let context: OpaquePointer
    /// The default identity first.
    private var loaded: [Loaded] = []
    /// The protocols this server can choose, in ALPN's wire form, most preferred first.
    private let alpn: [UInt8]
    /// The keys of the session tickets.
    let ticketKeys: TLSTicketKeys

    /// The TLS 1.2 cipher suites, most preferred first, chosen by our order rather than the
    /// client's (`SSL_OP_CIPHER_SERVER_PREFERENCE`; ChaCha20 first for a client that prefers it,
    /// one without AES in hardware): ECDHE key exchange, for forward secrecy, with an AEAD
    /// cipher, AES-GCM or ChaCha20-Poly1305, for ECDSA and RSA certificates (RFC 9325 §4.2,
    /// BCP 195; Mozilla's "intermediate" list without DHE). Left out: static RSA key exchange
    /// (RFC 9325 §4.1), CBC and SHA-1 MACs, which are also the suites RFC 9113 §9.2.2 forbids
    /// under HTTP/2. TLS 1.3's suites are OpenSSL's, all AEAD.
    static let tls12CipherSuites =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    /// Makes a context presenting `defaultIdentity`, or one of `others` to a client whose SNI
    /// names a host its certificate covers.
    /// - Parameters:
    ///   - applicationProtocols: The protocols ALPN may choose (RFC 7301 §3.2), most
    ///     preferred first; a client that offers none of them gets a fatal
    ///     `no_application_protocol` alert, and one that offers no ALPN at all is served without.
    ///   - ticketKeys: The keys of the session tickets: the process's ring unless the
    ///     contexts that should resume each other's tickets share another.
    /// - Throws: ``TLSError/unusableIdentity(path:reason:)`` when a file cannot be read, holds
    ///   no certificate or key, or the key is not the certificate's; ``TLSError/setupFailed(reason:)``.
    public init(
        default defaultIdentity: Identity, others: [Identity] = [], applicationProtocols: [String] = ["http/1.1"],
        ticketKeys: TLSTicketKeys = .shared
    ) throws(TLSError) {
        alpn = try Configure.alpnWire(applicationProtocols)
        self.ticketKeys = ticketKeys
        try OpenSSLLibraries.load()
        OpenSSLErrorQueue.clear()
        guard let context = SSL_CTX_new(TLS_server_method()) else {
            throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "SSL_CTX_new failed"))
        }
        self.context = context
        try Configure.common(context, applicationProtocols: [], client: false)
        OpenSSLErrorQueue.clear()
        guard SSL_CTX_set_cipher_list(context, Self.tls12CipherSuites) == 1 else {
            throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "the TLS 1.2 cipher suites cannot be set"))
        }
        SSL_CTX_set_options(context, copenssl_op_cipher_server_preference() | copenssl_op_prioritize_chacha())
        for identity in [defaultIdentity] + others {
            loaded.append(try Self.load(identity))
        }
        _ = copenssl_ctx_set_session_cache_mode(context, Int(SSL_SESS_CACHE_OFF))
        SSL_CTX_set_tlsext_ticket_key_evp_cb(context) { ssl, name, iv, cipher, mac, encrypt in
            guard let ssl, let name, let iv, let cipher, let mac,
                let server = TLSConnection.owner(of: ssl)?.serverContext
            else { return 0 }
            return server.ticketKeys.ticket(
                name: name, iv: iv, cipher: cipher, mac: mac, encrypt: encrypt == 1,
                renewing: SSL_version(ssl) == TLS1_3_VERSION)
        }
        Self.bindResumptionToServerName(context)
        // The default identity is the context's: a handshake presents it with no work of its
        // own. Only with others does each handshake look at the SNI name.
        let first = loaded[0]
        guard SSL_CTX_use_cert_and_key(context, first.certificate, first.key, first.chain, 1) == 1 else {
            throw .setupFailed(reason: OpenSSLErrorQueue.drainText(or: "the certificate cannot be used"))
        }
        let this = Unmanaged.passUnretained(self).toOpaque()
        if loaded.count > 1 {
            SSL_CTX_set_cert_cb(
                context,
                { ssl, argument in
                    guard let ssl, let argument else { return 0 }
                    return Unmanaged<TLSServerContext>.fromOpaque(argument).takeUnretainedValue().present(on: ssl)
                }, this)
        }
        if !alpn.isEmpty {
            SSL_CTX_set_alpn_select_cb(
                context,
                { _, chosen, chosenLength, offered, offeredLength, argument in
                    guard let argument, let chosen, let chosenLength, let offered else {
                        return SSL_TLSEXT_ERR_NOACK
                    }
                    let server = Unmanaged<TLSServerContext>.fromOpaque(argument).takeUnretainedValue()
                    return server.choose(chosen, chosenLength, offered, offeredLength)
                }, this)
        }
    }

    deinit {
        SSL_CTX_free(context)
        for identity in loaded {
            X509_free(identity.certificate)
            EVP_PKEY_free(identity.key)
            if let chain = identity.chain { OPENSSL_sk_pop_free(chain) { X509_free(OpaquePointer($0)) } }
        }
    }

    /// A server connection over the accepted, non-blocking socket `fd`; the connection never
    /// closes it. Nothing is sent until ``TLSConnection/handshake()``.
    /// - Throws: ``TLSError/setupFailed(reason:)`` when OpenSSL cannot make the connection.
    public func connection(fd: Int32) throws(TLSError) -> TLSConnection {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        let peer = named == 0 ? SocketAddress(storage)?.description ?? "client" : "client"
        let connection = try TLSConnection(context: context, fd: fd, peer: peer, role: .server(self))
        SSL_set_accept_state(connection.ssl)
        return connection
    }

    /// Sets on `ssl` the identity whose certificate covers the SNI name, the first that does;
    /// the default (the context's already) when none does or no name came: 1, or 0 (a failed
    /// handshake) when OpenSSL refuses it.
    private func present(on ssl: OpaquePointer) -> Int32 {
        guard let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name),
            X509_check_host(loaded[0].certificate, name, 0, 0, nil) != 1,
            let match = loaded.dropFirst().first(where: { X509_check_host($0.certificate, name, 0, 0, nil) == 1 })
        else { return 1 }
        return SSL_use_cert_and_key(ssl, match.certificate, match.key, match.chain, 1) == 1 ? 1 : 0
    }

    /// ALPN (RFC 7301 §3.2): the first of our protocols the client offers. When it offers none
    /// of them the handshake ends with a fatal `no_application_protocol` alert, as §3.2 says: a
    /// client of another protocol (ftp, imap, or h2 while HTTP/2 is off) must not go on to have
    /// its bytes read as HTTP/1.1, the cross-protocol confusion of the ALPACA attack. (A client
    /// that sends no ALPN is not asked: OpenSSL calls this only when it offers protocols.)
    private func choose(
        _ chosen: UnsafeMutablePointer<UnsafePointer<UInt8>?>, _ chosenLength: UnsafeMutablePointer<UInt8>,
        _ offered: UnsafePointer<UInt8>, _ offeredLength: UInt32
    ) -> Int32 {
        alpn.withUnsafeBufferPointer { ours in
            guard let base = ours.baseAddress else { return SSL_TLSEXT_ERR_ALERT_FATAL }
            var out: UnsafeMutablePointer<UInt8>?
            let result = SSL_select_next_proto(
                &out, chosenLength, base, UInt32(ours.count), offered, offeredLength)
            guard result == OPENSSL_NPN_NEGOTIATED, let out else { return SSL_TLSEXT_ERR_ALERT_FATAL }
            // `out` points into `alpn`, which lives as long as this context.
            chosen.pointee = UnsafePointer(out)
            return SSL_TLSEXT_ERR_OK
        }
    }

    /// Reads an identity's certificate, chain and key, checking that the key is the certificate's.
    private static func load(_ identity: Identity) throws(TLSError) -> Loaded {
        let certificates = try readPEM(identity.certificateFile) { PEM_read_bio_X509($0, nil, refusePassphrase, $1) }
        guard let first = certificates.objects.first else {
            throw .unusableIdentity(
                path: identity.certificateFile,
                reason: "holds no PEM certificate (OpenSSL: \(certificates.lastError))")
        }
        let keys = try readPEM(identity.keyFile) { PEM_read_bio_PrivateKey($0, nil, refusePassphrase, $1) }
        func release() {
            certificates.objects.forEach { X509_free($0) }
            keys.objects.forEach { EVP_PKEY_free($0) }
        }
        // The key cannot be decrypted without its passphrase, which nobody is there to type at
        // a reload: the operator writes it unencrypted, readable by its owner alone.
        guard !keys.encrypted else {
            release()
            throw .unusableIdentity(
                path: identity.keyFile,
                reason: "is encrypted with a passphrase, which httpcache cannot ask for: it needs the key "
                    + "unencrypted. Write an unencrypted copy with `openssl pkey -in \(identity.keyFile) -out "
                    + "PLAIN.key` (it asks for the passphrase), make it readable by its owner only "
                    + "(`chmod 600 PLAIN.key`) and give that file instead")
        }
        guard let key = keys.objects.first, keys.objects.count == 1 else {
            release()
            let reason =
                keys.objects.isEmpty
                ? "holds no PEM private key (OpenSSL: \(keys.lastError))"
                : "holds \(keys.objects.count) private keys, not one"
            throw .unusableIdentity(path: identity.keyFile, reason: reason)
        }
        guard X509_check_private_key(first, key) == 1 else {
            OpenSSLErrorQueue.clear()
            release()
            throw .unusableIdentity(
                path: identity.keyFile, reason: "is not the key of the certificate in \(identity.certificateFile)")
        }
        var chain: OpaquePointer?
        if certificates.objects.count > 1 {
            chain = OPENSSL_sk_new_null()
            for certificate in certificates.objects.dropFirst() {
                _ = OPENSSL_sk_push(chain, UnsafeRawPointer(certificate))
            }
        }
        return Loaded(certificate: first, key: key, chain: chain)
    }

    /// Every object `read` takes off the PEM file `path` (``PEMFile/read(_:_:)``), as an
    /// identity's error when the file cannot be read.
    private static func readPEM(
        _ path: String, _ read: (OpaquePointer, UnsafeMutableRawPointer) -> OpaquePointer?
    ) throws(TLSError) -> PEMFile.Contents {
        do {
            return try PEMFile.read(path, read)
        } catch {
            throw .unusableIdentity(path: path, reason: error.reason)
        }
    }
}
