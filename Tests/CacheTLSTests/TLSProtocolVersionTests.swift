import CacheTLS
import CacheTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Protocol versions against a server we do not write: `openssl s_server` serving TLS 1.0 only.
@Suite("TLS protocol versions", .timeLimit(.minutes(5)))
struct TLSProtocolVersionTests {
    /// RFC 8996 deprecates TLS 1.0 and 1.1: a server that offers only TLS 1.0 is refused, in
    /// words that say so. `openssl s_client -tls1` first shows the server does speak TLS 1.0,
    /// so the refusal is about the version and nothing else.
    @Test func aTLS10OnlyServerIsRefusedWithTheProtocolVersionMessage() async throws {
        try await offPool {
            let openssl = "/usr/bin/openssl"
            guard FileManager.default.isExecutableFile(atPath: openssl) else {
                print("skipped: \(openssl) is missing (scripts/setup --tests installs it)")
                return
            }
            let certificates = try TestCertificates.shared()
            let server = try ChildProcess(
                openssl,
                [
                    "s_server", "-tls1", "-cipher", "DEFAULT:@SECLEVEL=0", "-cert",
                    certificates.localhost.certificateFile, "-key", certificates.localhost.keyFile, "-accept",
                    "127.0.0.1:0",
                ])
            defer { server.stop() }
            let accepting = try #require(server.line(startingWith: "ACCEPT 127.0.0.1:", within: 20))
            let port = try #require(UInt16(accepting.dropFirst("ACCEPT 127.0.0.1:".count)))

            let probe = try ChildProcess(
                openssl, ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1", "-cipher", "DEFAULT:@SECLEVEL=0"])
            defer { probe.stop() }
            guard probe.line(startingWith: "New, TLSv1.0, Cipher is ", within: 20) != nil else {
                print("skipped: OpenSSL on this machine cannot serve TLS 1.0 (s_client -tls1 did not agree on it)")
                return
            }
            probe.stop()  // s_server serves one connection at a time

            let client = try certificates.clientContext()
            #expect(throws: TLSError.protocolVersion(peer: "127.0.0.1:\(port)")) {
                _ = try TLSClientSocket(port: port, context: client)
            }
            #expect(
                TLSError.protocolVersion(peer: "127.0.0.1:\(port)").description
                    == "127.0.0.1:\(port): protocol version: the server offers only TLS 1.0/1.1 or older; "
                    + "we require TLS 1.2 or later")
        }
    }
}

/// A child process whose standard output is read line by line, its standard input held open
/// (`s_server` ends when it reads EOF there) until ``stop()``.
private final class ChildProcess {
    private let process = Process()
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
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? input.fileHandleForWriting.close()
    }
}
