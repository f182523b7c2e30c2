/// Why a TLS context could not be made, or a TLS connection failed: one case per cause a person
/// can act on, and a one-line ``description`` naming the peer (`host:port`) and the cause.
///
/// ```swift
/// do {
///     try connection.handshake(timeout: 10)
/// } catch {
///     log(error.description)  // "127.0.0.1:8443: certificate expired on 2025-01-31 12:00:00 UTC; …"
/// }
/// ```
public enum TLSError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The peer's certificate (or one of its chain) is past its `notAfter` date (RFC 5280
    /// §4.1.2.5), given in UTC.
    case certificateExpired(peer: String, notAfter: String)
    /// The peer's certificate (or one of its chain) is not valid before `notBefore` (RFC 5280
    /// §4.1.2.5), given in UTC.
    case certificateNotYetValid(peer: String, notBefore: String)
    /// The certificate does not cover the host asked for (RFC 9110 §4.3.4, RFC 6125 §6):
    /// `certificateNames` are the DNS names and IP addresses it covers.
    case wrongHost(peer: String, host: String, certificateNames: [String])
    /// The chain does not lead to a trusted certificate authority: `issuer` names the
    /// authority that is not trusted; `selfSigned` when the certificate signed itself.
    /// `advice` names the way to trust it, e.g. `--cacert FILE`.
    case unknownIssuer(peer: String, issuer: String, selfSigned: Bool, advice: String)
    /// The chain was refused for another reason, in OpenSSL's words (a bad signature, a CA
    /// certificate used as a server's, a path too long, …).
    case untrustedCertificate(peer: String, reason: String)
    /// The peer offers only protocol versions older than TLS 1.2 (TLS 1.0 or 1.1, which RFC
    /// 8996 deprecates), or none we share.
    case protocolVersion(peer: String)
    /// The handshake failed for another reason, in OpenSSL's words (an alert from the peer, no
    /// cipher in common, a peer that does not speak TLS).
    case handshakeFailed(peer: String, reason: String)
    /// The handshake did not finish in the time allowed.
    case timedOut(peer: String)
    /// After the handshake, reading or writing failed (a record that does not decrypt, an
    /// alert, a socket error): the connection is unusable.
    case connectionFailed(peer: String, reason: String)
    /// A certificate-authority file to trust cannot be read, or holds no PEM certificate.
    case unusableTrustFile(path: String, reason: String)
    /// A server's certificate or key file cannot be read, holds no certificate or key, or
    /// the key does not belong to the certificate.
    case unusableIdentity(path: String, reason: String)
    /// OpenSSL could not make a context or connection (out of memory, a bad setting), or cannot
    /// be loaded (Linux: libssl.so.3 and libcrypto.so.3 are opened by the first context).
    case setupFailed(reason: String)

    /// One line: the peer or file, then the cause and what to do about it.
    public var description: String {
        switch self {
        case .certificateExpired(let peer, let notAfter):
            "\(peer): certificate expired on \(notAfter); the server must renew it (or this machine's clock is wrong)"
        case .certificateNotYetValid(let peer, let notBefore):
            "\(peer): certificate is not valid before \(notBefore); check this machine's clock"
        case .wrongHost(let peer, let host, let names):
            "\(peer): wrong host name: the certificate covers "
                + (names.isEmpty ? "no host name" : names.joined(separator: ", ")) + ", not \(host)"
        case .unknownIssuer(let peer, let issuer, let selfSigned, let advice):
            selfSigned
                ? "\(peer): certificate is self-signed (\(issuer)) and not trusted; trust it with \(advice)"
                : "\(peer): certificate issued by an unknown authority (\(issuer)); trust its CA with \(advice)"
        case .untrustedCertificate(let peer, let reason):
            "\(peer): certificate not trusted: \(reason)"
        case .protocolVersion(let peer):
            "\(peer): protocol version: the server offers only TLS 1.0/1.1 or older; we require TLS 1.2 or later"
        case .handshakeFailed(let peer, let reason):
            "\(peer): TLS handshake failed: \(reason)"
        case .timedOut(let peer):
            "\(peer): TLS handshake timed out"
        case .connectionFailed(let peer, let reason):
            "\(peer): TLS connection failed: \(reason)"
        case .unusableTrustFile(let path, let reason):
            "CA file \(path): \(reason)"
        case .unusableIdentity(let path, let reason):
            "certificate or key file \(path): \(reason)"
        case .setupFailed(let reason):
            "TLS setup failed: \(reason)"
        }
    }
}
