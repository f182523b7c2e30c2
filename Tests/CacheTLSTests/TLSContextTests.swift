import CacheTLS
import CacheTestSupport
import Foundation
import Testing

/// Making contexts: an extra trust file that cannot be used is an error when the context is
/// made, in words that name the file, never at the first request.
@Suite("TLS contexts")
struct TLSContextTests {
    @Test func aMissingCAFileIsRefusedWhenTheContextIsMade() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/missing.pem"
        #expect(throws: TLSError.unusableTrustFile(path: path, reason: "cannot be read: No such file or directory")) {
            _ = try TLSClientContext(.init(extraTrustRoots: [path]))
        }
    }

    @Test func aCAFileWithoutACertificateIsRefusedWhenTheContextIsMade() throws {
        let directory = TemporaryDirectory()
        let path = directory.path + "/garbage.pem"
        try Data("this is not a certificate\n".utf8).write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: TLSError.self) { _ = try TLSClientContext(.init(extraTrustRoots: [path])) }
        guard case .unusableTrustFile(path, let reason) = error else {
            Issue.record("unexpected \(String(describing: error))")
            return
        }
        #expect(reason.contains("holds no PEM certificate"))
        #expect(error?.description.hasPrefix("CA file \(path): holds no PEM certificate") == true)
    }

    @Test func aDirectoryAsCAFileIsRefused() throws {
        let directory = TemporaryDirectory()
        #expect(throws: TLSError.unusableTrustFile(path: directory.path, reason: "is a directory, not a PEM file")) {
            _ = try TLSClientContext(.init(extraTrustRoots: [directory.path]))
        }
    }

    /// A certificate or key path that is a directory, or not a regular file (a device here; a
    /// FIFO would hold the reading thread until a writer came), is refused as such, before
    /// OpenSSL reads it and finds "no start line".
    @Test(arguments: [false, true])
    func aPathThatIsNotARegularFileIsRefusedAsSuch(asKey: Bool) throws {
        let certificates = try TestCertificates.shared()
        let directory = TemporaryDirectory()
        for (path, kind) in [(directory.path, "a directory"), ("/dev/null", "not a regular file")] {
            let identity = TLSServerContext.Identity(
                certificateFile: asKey ? certificates.localhost.certificateFile : path,
                keyFile: asKey ? path : certificates.localhost.keyFile)
            #expect(throws: TLSError.unusableIdentity(path: path, reason: "is \(kind), not a PEM file")) {
                _ = try TLSServerContext(default: identity)
            }
        }
    }

    /// A key encrypted with a passphrase (PKCS #8's `ENCRYPTED PRIVATE KEY`, or the traditional
    /// `Proc-Type: 4,ENCRYPTED`) is refused at once, in words that name the file and the way
    /// out, with no prompt: OpenSSL's default password callback asks on the terminal, which
    /// held a reload forever, and printed "Enter PEM pass phrase:" into the log without one.
    @Test(.timeLimit(.minutes(1)), arguments: [false, true])
    func anEncryptedKeyIsRefusedWithoutAPrompt(traditional: Bool) throws {
        let certificates = try TestCertificates.shared()
        let directory = TemporaryDirectory()
        let keyFile = directory.path + "/encrypted.key"
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: OpenSSLServer.command)
        process.arguments =
            ["pkey", "-in", certificates.localhost.keyFile, "-aes256", "-passout", "pass:secret", "-out", keyFile]
            + (traditional ? ["-traditional"] : [])
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        let written = try String(contentsOfFile: keyFile, encoding: .utf8)
        #expect(written.contains(traditional ? "Proc-Type: 4,ENCRYPTED" : "BEGIN ENCRYPTED PRIVATE KEY"))
        let identity = TLSServerContext.Identity(
            certificateFile: certificates.localhost.certificateFile, keyFile: keyFile)
        let error = #expect(throws: TLSError.self) { _ = try TLSServerContext(default: identity) }
        #expect(
            error?.description
                == "certificate or key file \(keyFile): is encrypted with a passphrase, which httpcache cannot ask "
                + "for: it needs the key unencrypted. Write an unencrypted copy with `openssl pkey -in \(keyFile) "
                + "-out PLAIN.key` (it asks for the passphrase), make it readable by its owner only "
                + "(`chmod 600 PLAIN.key`) and give that file instead")
    }

    /// OpenSSL's context and the system's trust store are made by the first connection, not with
    /// the context: a process that never speaks https (the CLI answering from its cache) never
    /// pays for them.
    @Test func openSSLIsSetUpByTheFirstConnection() throws {
        let certificates = try TestCertificates.shared()
        let context = try certificates.clientContext()
        #expect(!context.isSetUp)
        let pair = try ConnectedPair(client: context, server: certificates.serverContext(certificates.localhost))
        #expect(context.isSetUp)
        #expect(pair.handshake().client == .done)
    }

    /// A key file without a key says so with OpenSSL's words for what it found; one with two
    /// keys says how many: the operator reads which file to fix and why.
    @Test func aKeyFileWithoutOneKeyIsRefusedInWords() throws {
        let certificates = try TestCertificates.shared()
        let directory = TemporaryDirectory()
        let keyFile = directory.path + "/server.key"
        func refusal() -> String? {
            let identity = TLSServerContext.Identity(
                certificateFile: certificates.localhost.certificateFile, keyFile: keyFile)
            let error = #expect(throws: TLSError.self) { _ = try TLSServerContext(default: identity) }
            guard case .unusableIdentity(keyFile, let reason) = error else { return nil }
            return reason
        }
        try Data("not a key\n".utf8).write(to: URL(fileURLWithPath: keyFile))
        // OpenSSL 3's decoder names its reason ("unsupported", "no start line"): ours is the frame.
        let noKey = try #require(refusal())
        #expect(noKey.hasPrefix("holds no PEM private key (OpenSSL: ") && noKey.count > 36, "\(noKey)")
        let key = try String(contentsOfFile: certificates.localhost.keyFile, encoding: .utf8)
        try Data((key + key).utf8).write(to: URL(fileURLWithPath: keyFile))
        #expect(refusal() == "holds 2 private keys, not one")
    }

    /// RFC 7301 §3.1: a protocol name is 1 to 255 bytes.
    @Test func anEmptyALPNNameIsRefused() throws {
        #expect(throws: TLSError.setupFailed(reason: "the ALPN protocol name \"\" is not 1 to 255 bytes")) {
            _ = try TLSClientContext(.init(applicationProtocols: [""]))
        }
    }
}
