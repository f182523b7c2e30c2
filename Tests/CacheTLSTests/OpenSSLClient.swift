import CacheTestSupport
import Foundation

/// `openssl s_client`, a TLS client we did not write, for what ours cannot be made to offer: TLS
/// 1.2 alone, a chosen cipher suite, any ALPN list, a session file resumed under another SNI
/// name. It sends one request with `Connection: close` and reads until the server closes (so a
/// TLS 1.3 session ticket, which comes after the handshake, is read and `-sess_out` keeps it),
/// within 10 seconds.
enum OpenSSLClient {
    /// What `openssl s_client -connect 127.0.0.1:port` with `arguments` prints on its standard
    /// output and error: the handshake, the session and the response (`Cipher is …`,
    /// `Reused, …` or `New, …`, alerts).
    static func run(port: UInt16, _ arguments: [String]) throws -> String {
        let directory = TemporaryDirectory()
        let request = directory.path + "/request"
        try Data("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".utf8)
            .write(to: URL(fileURLWithPath: request))
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        process.arguments =
            ["10", OpenSSLServer.command, "s_client", "-connect", "127.0.0.1:\(port)", "-ign_eof"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle(forReadingAtPath: request)
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return text
    }

    /// The suite `s_client` says the handshake agreed on (`Cipher is …`); nil when it failed.
    static func cipher(in output: String) -> String? {
        guard let line = output.split(separator: "\n").first(where: { $0.contains("Cipher is ") }),
            let name = line.components(separatedBy: "Cipher is ").last, name != "(NONE)"
        else { return nil }
        return name
    }
}
