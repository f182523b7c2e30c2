import COpenSSLHTTPCache
import CacheSystem
import CacheTLS
import Foundation

/// A certificate authority and certificates signed by it, made with OpenSSL's library at test
/// time in a temporary directory, once per process, as PEM files (P-256 keys): what the TLS
/// tests present and trust. Nothing here is trusted by the system: a client trusts ``caFile``
/// only when told to (`--cacert`, ``TLSClientContext/Configuration/extraTrustRoots``).
///
/// ```swift
/// let certificates = try TestCertificates.shared()
/// let origin = try LoopbackOrigin(tls: certificates.serverContext(certificates.localhost))
/// let client = try TLSClientContext(.init(extraTrustRoots: [certificates.caFile]))
/// ```
public final class TestCertificates: Sendable {
    /// A certificate and its key, as PEM files.
    public struct Leaf: Sendable {
        /// The certificate's PEM file.
        public let certificateFile: String
        /// The private key's PEM file.
        public let keyFile: String

        /// A pair of files of your own (copies to change, in tests that reload them).
        public init(certificateFile: String, keyFile: String) {
            self.certificateFile = certificateFile
            self.keyFile = keyFile
        }

        /// The pair as a server presents it.
        public var identity: TLSServerContext.Identity {
            .init(certificateFile: certificateFile, keyFile: keyFile)
        }
    }

    /// Why the certificates could not be made: OpenSSL's words for the step that failed.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The directory of the files (removed when the process exits).
    public let directory: String
    /// The tests' certificate authority, `CN=httpcache test CA`: what a client is told to trust.
    public let caFile: String
    /// Another authority, `CN=httpcache other CA`, which signed ``unknownIssuer`` only.
    public let otherCAFile: String
    /// For `localhost`, `127.0.0.1` and `::1`, valid from a day ago for a year.
    public let localhost: Leaf
    /// For `sni.test` only: the second name of SNI tests.
    public let second: Leaf
    /// For `localhost`, `127.0.0.1` and `::1`, but expired: valid from 30 days ago to 1 day ago.
    public let expired: Leaf
    /// For `localhost`, `127.0.0.1` and `::1`, but valid only from 1 day on.
    public let notYetValid: Leaf
    /// For `wrong.test` only.
    public let wrongHost: Leaf
    /// For `localhost`, `127.0.0.1` and `::1`, signed by the other CA.
    public let unknownIssuer: Leaf
    /// For `localhost`, `127.0.0.1` and `::1`, signed by its own key.
    public let selfSigned: Leaf

    private static let made = Locked<Result<TestCertificates, Failure>?>(nil)

    /// The process's certificates, made on the first call.
    /// - Throws: ``Failure`` when OpenSSL could not make or write one.
    public static func shared() throws(Failure) -> TestCertificates {
        let result = made.withLock { made in
            if let made { return made }
            let result = Result { () throws(Failure) in try TestCertificates() }
            made = result
            if case .success(let certificates) = result { removeAtExit(certificates.directory) }
            return result
        }
        return try result.get()
    }

    /// A server context presenting `leaf`, or one of `others` to a client asking for a name
    /// its certificate covers.
    public func serverContext(
        _ leaf: Leaf, others: [Leaf] = [], applicationProtocols: [String] = ["http/1.1"]
    ) throws(TLSError) -> TLSServerContext {
        try TLSServerContext(
            default: leaf.identity, others: others.map(\.identity), applicationProtocols: applicationProtocols)
    }

    /// A client context that trusts the tests' CA (and the system's store).
    public func clientContext(
        applicationProtocols: [String] = ["http/1.1"], sessionCacheCapacity: Int = 64
    ) throws(TLSError) -> TLSClientContext {
        try TLSClientContext(
            .init(
                extraTrustRoots: [caFile], applicationProtocols: applicationProtocols,
                sessionCacheCapacity: sessionCacheCapacity))
    }

    private init() throws(Failure) {
        directory = NSTemporaryDirectory() + "/httpcache-certificates-\(UInt64.random(in: 0...UInt64.max))"
        guard mkdir(directory, 0o700) == 0 else {
            throw Failure(description: "mkdir \(directory): \(errnoText())")
        }
        let ca = try Authority(name: "httpcache test CA", directory: directory, file: "ca")
        let other = try Authority(name: "httpcache other CA", directory: directory, file: "other-ca")
        caFile = ca.file
        otherCAFile = other.file
        let local = "DNS:localhost,IP:127.0.0.1,IP:::1"
        localhost = try ca.issue("localhost", names: local, days: -1..<365)
        second = try ca.issue("sni", names: "DNS:sni.test", days: -1..<365)
        expired = try ca.issue("expired", names: local, days: -30..<(-1))
        notYetValid = try ca.issue("not-yet-valid", names: local, days: 1..<365)
        wrongHost = try ca.issue("wrong-host", names: "DNS:wrong.test", days: -1..<365)
        unknownIssuer = try other.issue("unknown-issuer", names: local, days: -1..<365)
        selfSigned = try Authority(name: "localhost", directory: directory, file: "self-signed", leafNames: local)
            .leaf
    }

    /// The directory to remove when the process exits.
    private static let removal = Locked<String?>(nil)

    /// Removes `directory` when the process exits.
    private static func removeAtExit(_ directory: String) {
        removal.withLock { $0 = directory }
        atexit {
            if let directory = TestCertificates.removal.withLock({ $0 }) {
                try? FileManager.default.removeItem(atPath: directory)
            }
        }
    }
}

/// A key and a self-signed certificate (a CA's, or a self-signed leaf's), which issues others.
private final class Authority {
    let key: OpaquePointer
    let certificate: OpaquePointer
    let directory: String
    /// The certificate's PEM file.
    let file: String
    /// The certificate and key files, for a self-signed leaf.
    let leaf: TestCertificates.Leaf

    /// - Parameter leafNames: Subject alternative names for a self-signed server certificate;
    ///   nil for a CA.
    init(name: String, directory: String, file: String, leafNames: String? = nil) throws(TestCertificates.Failure) {
        self.directory = directory
        let key = try Self.generateKey()
        let extensions: [(Int32, String)] =
            if let leafNames {
                [(NID_basic_constraints, "CA:FALSE"), (NID_subject_alt_name, leafNames)]
            } else {
                [
                    (NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign"),
                    (NID_subject_key_identifier, "hash"),
                ]
            }
        do {
            certificate = try Self.certificate(
                name: name, key: key, issuer: nil, extensions: extensions, days: -1..<3650)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        self.key = key
        self.file = directory + "/\(file).pem"
        leaf = TestCertificates.Leaf(certificateFile: self.file, keyFile: directory + "/\(file).key")
        try Self.write(certificate: certificate, key: key, to: leaf)
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
    }

    /// A server certificate for `names` (`DNS:…,IP:…`), valid for `days` around now.
    func issue(_ file: String, names: String, days: Range<Int>) throws(TestCertificates.Failure)
        -> TestCertificates.Leaf
    {
        let leafKey = try Self.generateKey()
        defer { EVP_PKEY_free(leafKey) }
        let extensions: [(Int32, String)] = [
            (NID_basic_constraints, "CA:FALSE"), (NID_key_usage, "critical,digitalSignature"),
            (NID_ext_key_usage, "serverAuth"), (NID_subject_alt_name, names),
            (NID_subject_key_identifier, "hash"), (NID_authority_key_identifier, "keyid:always"),
        ]
        let leafCertificate = try Self.certificate(
            name: file, key: leafKey, issuer: (certificate, key), extensions: extensions, days: days)
        defer { X509_free(leafCertificate) }
        let leaf = TestCertificates.Leaf(
            certificateFile: directory + "/\(file).pem", keyFile: directory + "/\(file).key")
        try Self.write(certificate: leafCertificate, key: leafKey, to: leaf)
        return leaf
    }

    private static func generateKey() throws(TestCertificates.Failure) -> OpaquePointer {
        guard let key = copenssl_ec_generate("P-256") else { throw failure("generating a P-256 key") }
        return key
    }

    /// A v3 certificate for `key`, named `CN=name`, signed by `issuer` (itself when nil), valid
    /// from `days.lowerBound` to `days.upperBound` days from now.
    private static func certificate(
        name: String, key: OpaquePointer, issuer: (certificate: OpaquePointer, key: OpaquePointer)?,
        extensions: [(Int32, String)], days: Range<Int>
    ) throws(TestCertificates.Failure) -> OpaquePointer {
        guard let certificate = X509_new() else { throw failure("X509_new") }
        var made = false
        defer { if !made { X509_free(certificate) } }
        guard X509_set_version(certificate, 2) == 1,
            ASN1_INTEGER_set(X509_get_serialNumber(certificate), Int.random(in: 1...Int(Int32.max))) == 1,
            X509_time_adj_ex(X509_getm_notBefore(certificate), Int32(days.lowerBound), 0, nil) != nil,
            X509_time_adj_ex(X509_getm_notAfter(certificate), Int32(days.upperBound), 0, nil) != nil,
            X509_NAME_add_entry_by_txt(
                X509_get_subject_name(certificate), "CN", MBSTRING_ASC, Array(name.utf8), Int32(name.utf8.count), -1,
                0) == 1,
            X509_set_issuer_name(certificate, X509_get_subject_name(issuer?.certificate ?? certificate)) == 1,
            X509_set_pubkey(certificate, key) == 1
        else { throw failure("filling the certificate \(name)") }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.certificate ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let made = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                throw failure("the extension \(value) of \(name)")
            }
            defer { X509_EXTENSION_free(made) }
            guard X509_add_ext(certificate, made, -1) == 1 else { throw failure("adding \(value) to \(name)") }
        }
        guard X509_sign(certificate, issuer?.key ?? key, EVP_sha256()) > 0 else { throw failure("signing \(name)") }
        made = true
        return certificate
    }

    private static func write(
        certificate: OpaquePointer, key: OpaquePointer, to leaf: TestCertificates.Leaf
    ) throws(TestCertificates.Failure) {
        guard let file = BIO_new_file(leaf.certificateFile, "w") else {
            throw failure("creating \(leaf.certificateFile)")
        }
        let wroteCertificate = PEM_write_bio_X509(file, certificate)
        BIO_free(file)
        guard wroteCertificate == 1, let keyFile = BIO_new_file(leaf.keyFile, "w") else {
            throw failure("writing \(leaf.certificateFile)")
        }
        let wroteKey = PEM_write_bio_PrivateKey(keyFile, key, nil, nil, 0, nil, nil)
        BIO_free(keyFile)
        guard wroteKey == 1 else { throw failure("writing \(leaf.keyFile)") }
    }

    private static func failure(_ step: String) -> TestCertificates.Failure {
        let code = ERR_get_error()
        ERR_clear_error()
        let reason =
            code == 0 ? "unknown error" : ERR_reason_error_string(code).map { String(cString: $0) } ?? "\(code)"
        return TestCertificates.Failure(description: "TestCertificates: \(step) failed: \(reason)")
    }
}
