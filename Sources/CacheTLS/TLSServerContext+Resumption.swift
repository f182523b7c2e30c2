internal import COpenSSLHTTPCache

/// Resumption bound to the name the client asks for (RFC 6066 §3): "A server that implements
/// this extension MUST NOT accept the request to resume the session if the server_name
/// extension contains a different name. Instead, it proceeds with a full handshake." A ticket
/// issued under one SNI name (or none) resumes only under that name, compared without case, as
/// DNS names are; under another, the client gets a full handshake (with the certificate for
/// the name it asks for now) and a new ticket. TLS 1.3 gets the same rule: RFC 8446 §4.6.1
/// leaves the check to the client, but a session set up for one name, under that name's
/// certificate, should not serve another (a name whose certificate was replaced at a reload
/// because its key leaked, say).
extension TLSServerContext {
    /// Installs the three callbacks the rule needs on a server `context`:
    /// - the servername callback accepts every name, which is what makes OpenSSL keep it in the
    ///   session, and so in its ticket (without the callback it keeps none);
    /// - the ClientHello callback reads the name the client asks for now, before any ticket is
    ///   decrypted (``TLSConnection/requestedServerName``);
    /// - the ticket callback lets a decrypted ticket resume only when both names agree.
    static func bindResumptionToServerName(_ context: OpaquePointer) {
        _ = copenssl_ctx_set_tlsext_servername_callback(context) { _, _, _ in SSL_TLSEXT_ERR_OK }
        SSL_CTX_set_client_hello_cb(
            context,
            { ssl, _, _ in
                if let ssl, let connection = TLSConnection.owner(of: ssl) {
                    connection.requestedServerName = TLSServerContext.serverName(inClientHello: ssl)
                }
                return SSL_CLIENT_HELLO_SUCCESS
            }, nil)
        _ = SSL_CTX_set_session_ticket_cb(
            context, nil,
            { ssl, session, _, _, status, _ in
                TLSServerContext.resumption(status: status, session: session, ssl: ssl)
            }, nil)
    }

    /// The host name of the ClientHello's server_name extension, as sent; nil without one. The
    /// extension is a list of (type, name) whose only defined type is 0, host_name (RFC 6066
    /// §3); a list that does not parse counts as no name (OpenSSL refuses the handshake later).
    private static func serverName(inClientHello ssl: OpaquePointer) -> String? {
        var data: UnsafePointer<UInt8>?
        var length = 0
        guard SSL_client_hello_get0_ext(ssl, UInt32(TLSEXT_TYPE_server_name), &data, &length) == 1, let data else {
            return nil
        }
        let bytes = UnsafeBufferPointer(start: data, count: length)
        guard bytes.count >= 2 else { return nil }
        let end = min(bytes.count, 2 + (Int(bytes[0]) << 8 | Int(bytes[1])))
        var at = 2
        while at + 3 <= end {
            let type = bytes[at]
            let nameLength = Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            at += 3
            guard at + nameLength <= end else { return nil }
            if type == 0 { return String(decoding: bytes[at..<(at + nameLength)], as: UTF8.self) }
            at += nameLength
        }
        return nil
    }

    /// OpenSSL's decrypted-ticket callback: resume (as the ticket key callback decided, renewing
    /// the ticket or not) when the session's name is the one the client asks for now; else a
    /// full handshake, and a new ticket. A ticket that is empty or does not decrypt stays what
    /// it was: a full handshake, and a new ticket.
    private static func resumption(status: Int32, session: OpaquePointer?, ssl: OpaquePointer?) -> Int32 {
        guard status == SSL_TICKET_SUCCESS || status == SSL_TICKET_SUCCESS_RENEW else {
            return SSL_TICKET_RETURN_IGNORE_RENEW
        }
        guard let session, let ssl, let connection = TLSConnection.owner(of: ssl),
            SSL_SESSION_get0_hostname(session).map({ String(cString: $0).lowercased() })
                == connection.requestedServerName?.lowercased()
        else { return SSL_TICKET_RETURN_IGNORE_RENEW }
        return status == SSL_TICKET_SUCCESS ? SSL_TICKET_RETURN_USE : SSL_TICKET_RETURN_USE_RENEW
    }
}
