import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `openssl s_server` as a child process on 127.0.0.1, for servers CacheTLS will not be: one
/// that speaks only TLS 1.0 (RFC 8996 deprecates it; our client must refuse it in words).
///
/// ```swift
/// guard let server = try OpenSSLServer.tls10Only(try TestCertificates.shared()) else { return }
/// defer { server.stop() }
/// // connect to 127.0.0.1:server.port and expect TLSError.protocolVersion
/// ```
public final class OpenSSLServer {
    /// Where the tests expect the `openssl` command (Debian's `openssl` package, installed by
    /// `scripts/setup --tests`).
    public static let command = "/usr/bin/openssl"

    /// Its port on 127.0.0.1.
    public let port: UInt16
    private let child: LineReadingChild

    /// Why the server could not be started.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts `openssl s_server -accept 127.0.0.1:0` with `arguments` and reads the port it
    /// listens on from its `ACCEPT` line (20 s at most).
    public init(_ arguments: [String]) throws(Failure) {
        do {
            child = try LineReadingChild(Self.command, ["s_server", "-accept", "127.0.0.1:0"] + arguments)
        } catch {
            throw Failure(description: "cannot start \(Self.command) s_server: \(error)")
        }
        let prefix = "ACCEPT 127.0.0.1:"
        guard let line = child.line(startingWith: prefix, within: 20), let port = UInt16(line.dropFirst(prefix.count))
        else {
            child.stop()
            throw Failure(description: "openssl s_server \(arguments) did not say where it listens within 20 s")
        }
        self.port = port
    }

    /// A server offering TLS 1.0 and nothing later, with `certificates`' localhost identity;
    /// nil when the `openssl` command is missing or OpenSSL on this machine cannot speak TLS
    /// 1.0 (`openssl s_client -tls1` does not agree on it first), so a refusal the caller sees
    /// is about the version and nothing else.
    public static func tls10Only(_ certificates: TestCertificates) throws(Failure) -> OpenSSLServer? {
        guard FileManager.default.isExecutableFile(atPath: command) else {
            print("skipped: \(command) is missing (scripts/setup --tests installs it)")
            return nil
        }
        let legacy = ["-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"]
        let server = try OpenSSLServer(
            legacy + ["-cert", certificates.localhost.certificateFile, "-key", certificates.localhost.keyFile])
        let probe: LineReadingChild
        do {
            probe = try LineReadingChild(command, ["s_client", "-connect", "127.0.0.1:\(server.port)"] + legacy)
        } catch {
            server.stop()
            throw Failure(description: "cannot start \(command) s_client: \(error)")
        }
        let agreed = probe.line(startingWith: "New, TLSv1.0, Cipher is ", within: 20) != nil
        probe.stop()  // s_server serves one connection at a time
        guard agreed else {
            server.stop()
            print("skipped: OpenSSL on this machine cannot serve TLS 1.0 (s_client -tls1 did not agree on it)")
            return nil
        }
        return server
    }

    /// Kills the server and waits for it.
    public func stop() {
        child.stop()
    }
}

/// A child process whose standard output is read line by line, its standard input held open
/// (`s_server` and `s_client` end when they read EOF there) until ``stop()``.
private final class LineReadingChild {
    private let process = ChildProcess()
    private let output = Pipe()
    private let input = Pipe()
    private var buffered: [UInt8] = []

    init(_ path: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = input
        try process.run()
    }

    /// The first line of its output starting with `prefix`, waiting up to `seconds`; nil when
    /// the output ended or the time passed first.
    func line(startingWith prefix: String, within seconds: Double) -> String? {
        let deadline = Date().addingTimeInterval(seconds)
        let fd = output.fileHandleForReading.fileDescriptor
        while true {
            while let newline = buffered.firstIndex(of: 0x0A) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeSubrange(...newline)
                if line.hasPrefix(prefix) { return line }
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(left * 1000)) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = read(fd, &chunk, chunk.count)
            guard count > 0 else { return nil }
            buffered += chunk[0..<count]
        }
    }

    /// Kills the process and waits for it. SIGKILL, not `terminate()`'s SIGTERM: a child
    /// started from a thread that blocks signals (as libdispatch's do) inherits the block.
    func stop() {
        process.send(signal: SIGKILL)
        process.waitUntilExit()
        try? input.fileHandleForWriting.close()
    }
}
