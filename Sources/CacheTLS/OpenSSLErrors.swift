internal import COpenSSLHTTPCache
internal import COpenSSLLoaderHTTPCache

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// libssl and libcrypto, which Linux opens at the first context made (COpenSSLLoaderHTTPCache).
enum OpenSSLLibraries {
    /// Opens them unless they are open; when they cannot be, throws the loader's line saying
    /// which file failed and what to install.
    static func load() throws(TLSError) {
        if let unavailable = httpcache_openssl_unavailable() {
            throw .setupFailed(reason: String(cString: unavailable))
        }
    }
}

/// OpenSSL's error queue, which is per thread: emptied before every call whose failure we read,
/// and drained after it, so one connection's error never shows up in another's report.
enum OpenSSLErrorQueue {
    /// One error taken off the queue: its reason code (`SSL_R_…`) and OpenSSL's words for it.
    struct Entry {
        var reason: Int32
        var text: String
    }

    /// Empties the queue (before a call whose failure will be read). An empty queue, the usual
    /// case, is only looked at: `ERR_clear_error` wipes all its 16 slots on every call, twice a
    /// request over TLS, and `SSL_get_error` needs only that no error is queued.
    static func clear() {
        if ERR_peek_error() != 0 { ERR_clear_error() }
    }

    /// The oldest error in the queue (the cause; later ones are consequences), emptying it.
    static func drain() -> Entry? {
        var first: Entry?
        while true {
            let code = ERR_get_error()
            guard code != 0 else { return first }
            if first == nil {
                let reason = ERR_GET_REASON(code)
                let text = ERR_reason_error_string(code).map { String(cString: $0) } ?? "OpenSSL error \(code)"
                first = Entry(reason: reason, text: text)
            }
        }
    }

    /// The oldest error's words, emptying the queue; `fallback` when it was empty.
    static func drainText(or fallback: String) -> String {
        drain()?.text ?? fallback
    }
}

/// What a certificate says that a person needs to read in an error: its subject and issuer,
/// its validity dates and the names it covers. Read in the verification callback, while the
/// certificate is at hand.
struct CertificateFacts: Sendable, Equatable {
    var subject: String
    var issuer: String
    var notBefore: String
    var notAfter: String
    var names: [String]
    var selfSigned: Bool

    init(_ certificate: OpaquePointer) {
        subject = Self.commonName(X509_get_subject_name(certificate))
        issuer = Self.commonName(X509_get_issuer_name(certificate))
        notBefore = Self.utc(X509_get0_notBefore(certificate))
        notAfter = Self.utc(X509_get0_notAfter(certificate))
        names = Self.names(certificate)
        selfSigned = X509_check_issued(certificate, certificate) == X509_V_OK
    }

    /// `CN=…` of `name`, or its one-line form when it has no common name.
    private static func commonName(_ name: OpaquePointer?) -> String {
        guard let name else { return "no name" }
        let index = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
        if index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) {
            return "CN=" + text(data)
        }
        var buffer = [CChar](repeating: 0, count: 256)
        guard X509_NAME_oneline(name, &buffer, Int32(buffer.count)) != nil else { return "no name" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The bytes of an ASN.1 string, as UTF-8 (what names are in practice).
    private static func text(_ string: UnsafePointer<ASN1_STRING>) -> String {
        guard let bytes = ASN1_STRING_get0_data(string) else { return "" }
        return String(
            decoding: UnsafeBufferPointer(start: bytes, count: Int(ASN1_STRING_length(string))), as: UTF8.self)
    }

    /// `2025-01-31 12:00:00 UTC`.
    private static func utc(_ time: UnsafePointer<ASN1_TIME>?) -> String {
        var parts = tm()
        guard let time, ASN1_TIME_to_tm(time, &parts) == 1 else { return "an unreadable date" }
        func padded(_ value: Int32, _ width: Int = 2) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(padded(parts.tm_year + 1900, 4))-\(padded(parts.tm_mon + 1))-\(padded(parts.tm_mday)) "
            + "\(padded(parts.tm_hour)):\(padded(parts.tm_min)):\(padded(parts.tm_sec)) UTC"
    }

    /// The DNS names and IP addresses of the subject alternative names (RFC 5280 §4.2.1.6),
    /// or the common name when there are none (what RFC 6125 §6.4.4 falls back on).
    private static func names(_ certificate: OpaquePointer) -> [String] {
        var names: [String] = []
        if let list = X509_get_ext_d2i(certificate, NID_subject_alt_name, nil, nil) {
            let stack = OpaquePointer(list)
            for index in 0..<max(0, OPENSSL_sk_num(stack)) {
                guard let raw = OPENSSL_sk_value(stack, index) else { continue }
                let name = raw.assumingMemoryBound(to: GENERAL_NAME.self).pointee
                switch name.type {
                case GEN_DNS:
                    if let dns = name.d.dNSName { names.append(text(dns)) }
                case GEN_IPADD:
                    if let ip = name.d.iPAddress { names.append(address(ip)) }
                default:
                    continue
                }
            }
            GENERAL_NAMES_free(stack)
        }
        if names.isEmpty, let subject = X509_get_subject_name(certificate) {
            let index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1)
            if index >= 0, let entry = X509_NAME_get_entry(subject, index), let data = X509_NAME_ENTRY_get_data(entry) {
                names.append(text(data))
            }
        }
        return names
    }

    /// An IPv4 or IPv6 address in an `iPAddress` name, as text.
    private static func address(_ octets: UnsafePointer<ASN1_STRING>) -> String {
        let count = Int(ASN1_STRING_length(octets))
        guard let bytes = ASN1_STRING_get0_data(octets), count == 4 || count == 16 else { return "an IP address" }
        var text = [CChar](repeating: 0, count: 64)
        _ = inet_ntop(count == 4 ? AF_INET : AF_INET6, bytes, &text, socklen_t(text.count))
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The first failure the chain's verification met (`X509_V_ERR_…`) and the certificate it
/// met it on, turned into the error a person reads.
struct VerificationFailure {
    var code: Int32
    /// The certificate the failure is about; nil when only the code is known.
    var certificate: CertificateFacts?

    /// The error for a client of `peer` that asked for `host`.
    func error(peer: String, host: String, advice: String) -> TLSError {
        switch code {
        case X509_V_ERR_CERT_HAS_EXPIRED:
            return .certificateExpired(peer: peer, notAfter: certificate?.notAfter ?? "an earlier date")
        case X509_V_ERR_CERT_NOT_YET_VALID:
            return .certificateNotYetValid(peer: peer, notBefore: certificate?.notBefore ?? "a later date")
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
            return .wrongHost(peer: peer, host: host, certificateNames: certificate?.names ?? [])
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
            return .unknownIssuer(
                peer: peer, issuer: certificate?.subject ?? "itself", selfSigned: true, advice: advice)
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
            X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
            // The certificate at hand is the last one the chain reached: its issuer is the
            // authority nobody trusts (itself, for a self-signed root sent in the chain).
            let issuer =
                code == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN ? certificate?.subject : certificate?.issuer
            return .unknownIssuer(peer: peer, issuer: issuer ?? "unknown", selfSigned: false, advice: advice)
        default:
            let reason = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "error \(code)"
            return .untrustedCertificate(peer: peer, reason: reason)
        }
    }
}
