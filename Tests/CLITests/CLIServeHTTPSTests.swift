#if os(Linux)
import CacheSystem
import CacheTLS
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache serve --tls-cert … --tls-key …`: the proxy terminates TLS toward its clients.
/// Clients are curl, `openssl s_client` and the package's own TLS client (CacheTLS), each
/// trusting the tests' CA.
@Suite(.timeLimit(.minutes(10)))
struct CLIServeHTTPSTests {
    /// A running `serve --origin ORIGIN --tls-…` and where it listens.
    struct Proxy {
        let run: PipedRun
        let port: UInt16
        let tlsPort: UInt16
        let errors: String

        /// What the proxy wrote to standard error so far.
        var log: String { (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "" }

        /// Waits until the log holds a line containing `text`; whether it did within 10 s.
        func waitForLog(_ text: String) async -> Bool {
            for _ in 0..<500 {
                if log.contains(text) { return true }
                try? await Task.sleep(for: .milliseconds(20))
            }
            return false
        }
    }

    let certificates: TestCertificates
    let cli: CLIHarness
    let origin: LoopbackOrigin

    init() throws {
        certificates = try TestCertificates.shared()
        cli = try CLIHarness()
        origin = try LoopbackOrigin()
        origin.setDefault { request in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600")],
                body: request.path == "/big" ? Self.bigBody : Array("body of \(request.path)".utf8))
        }
    }

    /// Starts `serve` with `identities` (certificate, key) on a TLS port the system picks, in
    /// front of `originURL` (the test's origin when nil).
    func serve(
        _ identities: [TestCertificates.Leaf], _ more: [String] = [], name: String = "serve", originURL: String? = nil
    ) async throws -> Proxy {
        let errors = cli.directory.path + "/\(name).log"
        var arguments = ["serve", "--origin", originURL ?? origin.baseURL, "--listen", "127.0.0.1:0", "--memory-only"]
        arguments += ["--tls-listen", "127.0.0.1:0"] + more
        for leaf in identities { arguments += ["--tls-cert", leaf.certificateFile, "--tls-key", leaf.keyFile] }
        let run = try PipedRun(arguments, standardError: errors)
        let listening = await run.waitForOutput(seconds: 30) { $0.filter { $0 == UInt8(ascii: "\n") }.count >= 2 }
        let lines = String(decoding: run.stdout, as: UTF8.self).split(separator: "\n")
        func port(_ scheme: String) -> UInt16? {
            lines.first { $0.hasPrefix("listening on \(scheme)://") }?.split(separator: ":").last.flatMap { UInt16($0) }
        }
        let plain = try #require(listening ? port("http") : nil, "serve did not listen: \(lines)")
        let tls = try #require(port("https"), "serve did not say where https listens: \(lines)")
        return Proxy(run: run, port: plain, tlsPort: tls, errors: errors)
    }

    /// Copies `leaf` into the test's directory as `name.pem` / `name.key` (mode 0600).
    func copy(_ leaf: TestCertificates.Leaf, as name: String) throws -> TestCertificates.Leaf {
        let copied = TestCertificates.Leaf(
            certificateFile: cli.directory.path + "/\(name).pem", keyFile: cli.directory.path + "/\(name).key")
        try replace(copied, with: leaf)
        return copied
    }

    /// Overwrites `target`'s files with `source`'s.
    func replace(_ target: TestCertificates.Leaf, with source: TestCertificates.Leaf) throws {
        for (from, to) in [(source.certificateFile, target.certificateFile), (source.keyFile, target.keyFile)] {
            try Data(contentsOf: URL(fileURLWithPath: from)).write(to: URL(fileURLWithPath: to))
            chmod(to, 0o600)
        }
    }

    /// Runs `executable arguments` (curl, openssl), standard input empty.
    func tool(_ executable: String, _ arguments: [String]) async throws -> CLIRun {
        try await CLIProcess.run(executable: executable, arguments, in: cli.directory.path)
    }

    /// curl over https to `host` (resolved to 127.0.0.1) on the proxy's TLS port, trusting the
    /// tests' CA, in HTTP/1.1 (these tests are about it; HTTP/2 has its own): `-w` gives the
    /// status and how many connections curl opened. `verbose`: curl's trace on standard error.
    func curl(_ proxy: Proxy, _ paths: [String], host: String = "localhost", verbose: Bool = false) async throws
        -> CLIRun
    {
        var arguments = [
            "-sS", "--http1.1", "--cacert", certificates.caFile, "--resolve", "\(host):\(proxy.tlsPort):127.0.0.1",
        ]
        arguments += ["-w", "%{http_code} %{num_connects}\n", "-D", "-"] + (verbose ? ["-v"] : [])
        arguments += paths.map { "https://\(host):\(proxy.tlsPort)\($0)" }
        return try await tool("/usr/bin/curl", arguments)
    }

    // MARK: Serving

    @Test(
        "curl over https: a miss then a hit, two requests on one kept-alive connection, the access log saying HTTP/1.1+TLS (RFC 9110 §4.2.2, RFC 9112 §9.3)"
    )
    func missThenHitOverTLS() async throws {
        try await offPool {
            let accessLog = cli.directory.path + "/access.log"
            let proxy = try await serve([certificates.localhost], ["--access-log", accessLog])
            let result = try await curl(proxy, ["/a", "/a"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(
                result.stdout.contains("Cache-Status: httpcache; fwd=uri-miss; fwd-status=200; stored"),
                "\(result.stdout)")
            #expect(result.stdout.contains("Cache-Status: httpcache; hit"), "\(result.stdout)")
            #expect(result.stdout.components(separatedBy: "body of /a").count == 3, "\(result.stdout)")
            // The first request opened the one connection, the second reused it.
            #expect(result.stdout.contains("200 1\n") && result.stdout.contains("200 0\n"), "\(result.stdout)")
            #expect(origin.requests.count == 1)
            let lines = try String(contentsOfFile: accessLog, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == 2 && lines.allSatisfy { $0.contains(" GET /a HTTP/1.1+TLS 200 ") }, "\(lines)")
        }
    }

    @Test(
        "Our TLS client: five requests pipelined in five TLS records (four of them waiting decrypted inside OpenSSL, which epoll does not signal), kept alive, close_notify at the end, the session resumed on the next connection (RFC 9112 §9.3.2, RFC 8446 §2.2, §6.1)"
    )
    func keepAlivePipeliningAndResumption() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost])
            let client = try certificates.clientContext()
            let connection = try TLSClientSocket(port: proxy.tlsPort, host: "localhost", context: client)
            let paths = (1...5).map { "/p\($0)" }
            for path in paths { #expect(connection.send("GET \(path) HTTP/1.1\r\nHost: localhost\r\n\r\n")) }
            for path in paths {
                let response = connection.response() ?? ""
                #expect(response.hasPrefix("HTTP/1.1 200") && response.hasSuffix("body of \(path)"), "\(response)")
            }
            #expect(connection.send("GET /p1 HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
            #expect((connection.response() ?? "").contains("Cache-Status: httpcache; hit"))
            #expect(connection.readToEnd().end == .closed, "the proxy ends with close_notify")
            let second = try TLSClientSocket(port: proxy.tlsPort, host: "localhost", context: client)
            #expect(second.tls.isResumed, "the session ticket of the first connection was taken")
            #expect(second.tls.applicationProtocol == "http/1.1")
        }
    }

    @Test("SNI chooses between two certificates: each name gets the one covering it (RFC 6066 §3)")
    func sniChoosesTheCertificate() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost, certificates.second])
            let local = try await curl(proxy, ["/a"])
            #expect(local.status == 0 && local.stdout.hasSuffix("200 1\n"), "\(local.stderr)")
            let other = try await curl(proxy, ["/b"], host: "sni.test")
            #expect(other.status == 0 && other.stdout.hasSuffix("200 1\n"), "\(other.stderr)")
            // Without sni.test's certificate, curl refuses the default one for that name.
            let single = try await serve([certificates.localhost], name: "single")
            let refused = try await curl(single, ["/b"], host: "sni.test")
            #expect(refused.status != 0, "\(refused.stdout)")
        }
    }

    /// 3 MB: more than the proxy reads whole for a hit (1 MiB), so it is streamed both times.
    static let bigBody = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 % 251) }

    @Test(
        "Over https as over http: a 3 MB body streamed on the miss and on the hit, PURGE, a head over the limit refused with 431 (RFC 9110 §15.5.20 via RFC 6585 §5)"
    )
    func streamingPurgeAndLimitsOverTLS() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost])
            let file = cli.directory.path + "/big"
            for expected in ["fwd=uri-miss", "hit"] {
                let result = try await tool(
                    "/usr/bin/curl",
                    [
                        "-sS", "--cacert", certificates.caFile, "-D", "-", "-o", file,
                        "https://localhost:\(proxy.tlsPort)/big",
                    ])
                #expect(result.status == 0 && result.stdout.contains(expected), "\(result.stdout) \(result.stderr)")
                #expect(FileManager.default.contents(atPath: file) == Data(Self.bigBody), "\(expected): the body whole")
            }
            #expect(origin.requests.count == 1)
            let purge = try await tool(
                "/usr/bin/curl",
                [
                    "-sS", "--cacert", certificates.caFile, "-X", "PURGE", "-o", "/dev/null", "-w", "%{http_code}",
                    "https://localhost:\(proxy.tlsPort)/big",
                ])
            #expect(purge.stdout == "200", "\(purge.stderr)")
            #expect(try await curl(proxy, ["/big"]).stdout.contains("fwd=uri-miss"), "purged")
            let large = try await tool(
                "/usr/bin/curl",
                [
                    "-sS", "--cacert", certificates.caFile, "-o", "/dev/null", "-w", "%{http_code}", "-H",
                    "X-Large: \(String(repeating: "a", count: 20_000))", "https://localhost:\(proxy.tlsPort)/a",
                ])
            #expect(large.stdout == "431", "\(large.stderr)")
        }
    }

    @Test(
        "A TLS 1.2 client is served: the flight that completes its handshake (the server's Finished, which it waits for) is sent at once, not held as TLS 1.3's session tickets are (RFC 5246 §7.3)"
    )
    func aTLS12ClientIsServed() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost])
            let result = try await tool(
                "/usr/bin/curl",
                [
                    "-sS", "-v", "--http1.1", "--tls-max", "1.2", "--max-time", "20", "--cacert", certificates.caFile,
                    "-w", "%{http_code}", "-o", "/dev/null", "-o", "/dev/null",
                    "https://localhost:\(proxy.tlsPort)/a", "https://localhost:\(proxy.tlsPort)/a",
                ])
            #expect(result.stdout == "200200", "\(result.stderr)")
            #expect(result.stderr.contains("TLSv1.2"), "\(result.stderr)")
        }
    }

    @Test(
        "TLS 1.3 session tickets are sent at once when no request came with the client's Finished: they acknowledge it, which a client with Nagle's algorithm on waits for before it sends its request (RFC 8446 §4.6.1)"
    )
    func ticketsLeaveAtOnceWithoutARequest() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost])
            let connection = try TLSClientSocket(
                port: proxy.tlsPort, host: "localhost", context: try certificates.clientContext())
            #expect(connection.tls.protocolVersion == "TLSv1.3")
            var poller = pollfd(fd: connection.tls.fd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&poller, 1, 10_000) == 1, "no session ticket came before a request")
            #expect(connection.send("GET /t HTTP/1.1\r\nHost: localhost\r\n\r\n"))
            #expect((connection.response() ?? "").hasSuffix("body of /t"))
        }
    }

    // MARK: Refusals

    @Test("A client offering only TLS 1.0 is refused with a protocol_version alert (RFC 8996 §2)")
    func tls10IsRefused() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost])
            let result = try await tool(
                "/usr/bin/openssl",
                ["s_client", "-tls1", "-cipher", "DEFAULT:@SECLEVEL=0", "-connect", "127.0.0.1:\(proxy.tlsPort)"])
            #expect(result.status != 0)
            #expect(result.stderr.contains("alert protocol version"), "\(result.stderr)")
            let metrics = try CLITLSTests.get("/_httpcache/metrics", port: proxy.port)
            #expect(metrics.contains("httpcache_tls_handshakes_total{result=\"failed\"} 1"), "\(metrics)")
        }
    }

    @Test("A client that opens TCP and never handshakes is cut at --header-timeout; others are served meanwhile")
    func silentClientIsCutAtTheDeadline() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost], ["--header-timeout", "1"])
            let silent = try LoopbackOrigin.connect(port: proxy.tlsPort)
            defer { close(silent) }
            let started = MonotonicClock.seconds()
            // Timed beside the curl (a child task, on this test's threads), so that a slow curl on
            // a busy machine does not count as a late cut.
            async let cut: (received: Int, after: Double) = {
                var timeout = timeval(tv_sec: 20, tv_usec: 0)
                setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                var byte: UInt8 = 0
                let received = recv(silent, &byte, 1, 0)
                return (received, MonotonicClock.seconds() - started)
            }()
            #expect(try await curl(proxy, ["/a"]).status == 0)
            let (received, waited) = await cut
            #expect(received == 0, "closed, not timed out")
            // Not the default --header-timeout (10 s).
            #expect(waited >= 0.9 && waited < 8, "cut after \(waited) s")
        }
    }

    @Test("Garbage instead of a ClientHello closes that connection and nothing else")
    func garbageClosesOnlyItsConnection() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost])
            let kept = try TLSClientSocket(
                port: proxy.tlsPort, host: "localhost", context: try certificates.clientContext())
            let garbage = try LoopbackOrigin.connect(port: proxy.tlsPort)
            defer { close(garbage) }
            let bytes: [UInt8] =
                [0x16, 0x03, 0x01, 0x00, 0x05, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF] + Array("xyz\r\n\r\n".utf8)
            _ = bytes.withUnsafeBytes { send(garbage, $0.baseAddress, $0.count, 0) }
            var buffer = [UInt8](repeating: 0, count: 512)
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(garbage, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var received = 0
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(garbage, $0.baseAddress, $0.count, 0) }
                if count <= 0 {
                    #expect(count == 0 || errno == ECONNRESET, "closed, not timed out: \(errnoText(errno))")
                    break
                }
                received += count
            }
            #expect(received < 64, "at most a TLS alert")
            #expect(kept.send("GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n"))
            #expect((kept.response() ?? "").hasSuffix("body of /a"))
        }
    }

    @Test(
        "A TLS connection over --max-connections gets a fatal internal_error alert, not a plain-text 503 its TLS cannot read (RFC 8446 §6.2), and the refusal is logged"
    )
    func overTheCapOnTheTLSPort() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost], ["--max-connections", "1"])
            // The one connection allowed, held open (kept alive after its answer).
            let held = try TLSClientSocket(
                port: proxy.tlsPort, host: "localhost", context: try certificates.clientContext())
            #expect(held.send("GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n"))
            #expect((held.response() ?? "").hasSuffix("body of /a"))
            let refused = try await curl(proxy, ["/b"])
            #expect(refused.status == 35, "\(refused.stderr)")
            #expect(refused.stderr.contains("alert internal error"), "\(refused.stderr)")
            #expect(await proxy.waitForLog("refused 1 connection: 1 connections are open"), "\(proxy.log)")
        }
    }

    @Test("Plain HTTP sent to the TLS port is answered 400 in plain text saying so, and closed")
    func plainHTTPToTheTLSPort() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost])
            let response = try CLITLSTests.get("/a", port: proxy.tlsPort)
            #expect(response.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(response)")
            #expect(response.contains("Connection: close\r\n"), "\(response)")
            #expect(response.contains("plain HTTP was sent to the TLS port"), "\(response)")
            #expect(origin.requests.isEmpty)
        }
    }

    // MARK: Reloading

    @Test(
        "SIGHUP: an open keep-alive connection keeps working, new handshakes get the new certificate; a failed reload keeps it and says why in one line"
    )
    func reloadOnSIGHUP() async throws {
        try await offPool {
            let files = try copy(certificates.localhost, as: "served")
            let proxy = try await serve([files])
            let open = try TLSClientSocket(
                port: proxy.tlsPort, host: "localhost", context: try certificates.clientContext())
            #expect(open.send("GET /a HTTP/1.1\r\nHost: localhost\r\n\r\n"))
            #expect((open.response() ?? "").hasSuffix("body of /a"))
            #expect(try await curl(proxy, ["/a"], host: "sni.test").status != 0, "sni.test is not covered yet")

            try replace(files, with: certificates.second)
            proxy.run.signal(SIGHUP)
            #expect(await proxy.waitForLog("certificates reloaded"), "\(proxy.log)")
            let renewed = try await curl(proxy, ["/b"], host: "sni.test")
            #expect(renewed.status == 0, "the new certificate is presented: \(renewed.stderr)")
            #expect(open.send("GET /c HTTP/1.1\r\nHost: localhost\r\n\r\n"))
            #expect((open.response() ?? "").hasSuffix("body of /c"), "the open connection goes on")

            try Data("not a key\n".utf8).write(to: URL(fileURLWithPath: files.keyFile))
            proxy.run.signal(SIGHUP)
            #expect(await proxy.waitForLog("not reloaded"), "\(proxy.log)")
            let failed = proxy.log.split(separator: "\n").filter { $0.contains("not reloaded") }
            #expect(failed.count == 1 && failed[0].contains(files.keyFile), "\(failed)")
            #expect(try await curl(proxy, ["/d"], host: "sni.test").status == 0, "the certificate in use stays")
        }
    }

    @Test("SIGHUP keeps the session ticket keys: a client resumes its session across the reload (RFC 8446 §4.6.1)")
    func sessionResumesAcrossAReload() async throws {
        try await offPool {
            let proxy = try await serve([certificates.localhost])
            let client = try certificates.clientContext()
            let before = try TLSClientSocket(port: proxy.tlsPort, host: "localhost", context: client)
            #expect(before.send("GET /a HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
            #expect(before.readToEnd().end == .closed, "the tickets came before the response")
            proxy.run.signal(SIGHUP)
            #expect(await proxy.waitForLog("certificates reloaded"), "\(proxy.log)")
            let after = try TLSClientSocket(port: proxy.tlsPort, host: "localhost", context: client)
            #expect(after.tls.isResumed, "the ticket issued before the reload resumes after it")
        }
    }

    // MARK: Start-up

    @Test("A key file readable by others is warned about in one line at start and at reload; a 0600 one is not")
    func readableKeyIsWarnedAbout() async throws {
        try await offPool {
            let files = try copy(certificates.localhost, as: "open")
            chmod(files.keyFile, 0o644)
            let proxy = try await serve([files])
            #expect(await proxy.waitForLog("can be read by group or others"), "\(proxy.log)")
            let warnings = { proxy.log.split(separator: "\n").filter { $0.contains("can be read by group or others") } }
            #expect(warnings().count == 1 && warnings()[0].contains("chmod 600 \(files.keyFile)"), "\(proxy.log)")
            proxy.run.signal(SIGHUP)
            #expect(await proxy.waitForLog("certificates reloaded"))
            #expect(warnings().count == 2, "\(proxy.log)")

            let closed = try copy(certificates.localhost, as: "closed")
            let quiet = try await serve([closed], name: "quiet")
            #expect(!quiet.log.contains("can be read"), "\(quiet.log)")
        }
    }

    @Test(
        "An unusable certificate or key, unpaired flags, or TLS with --forward: exit 2 with one line naming the cause",
        arguments: [
            (["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "KEY"], "/nonexistent/cert.pem"),
            (["--tls-cert", "CERT", "--tls-key", "OTHERKEY"], "is not the key of the certificate"),
            (["--tls-cert", "CERT"], "in pairs"),
            (["--tls-listen", "127.0.0.1:0"], "--tls-listen needs a certificate"),
        ])
    func unusableAtStart(arguments: [String], cause: String) async throws {
        try await offPool {
            let substituted = arguments.map {
                switch $0 {
                case "CERT": certificates.localhost.certificateFile
                case "KEY": certificates.localhost.keyFile
                case "OTHERKEY": certificates.second.keyFile
                default: $0
                }
            }
            let result = try await cli.run(["serve", "--origin", origin.baseURL, "--memory-only"] + substituted)
            #expect(result.status == 2, "\(result.stderr)")
            #expect(result.stderrLines.count == 1 && result.stderr.contains(cause), "\(result.stderr)")
        }
    }

    @Test("--tls-cert with --forward is a usage error: a forward proxy listens in plain HTTP")
    func noTLSForAForwardProxy() async throws {
        try await offPool {
            let forward = try await cli.run([
                "serve", "--forward", "--tls-cert", certificates.localhost.certificateFile, "--tls-key",
                certificates.localhost.keyFile,
            ])
            #expect(
                forward.status == 2 && forward.stderr.contains("--tls-cert goes with --origin"), "\(forward.stderr)")
        }
    }
}
#endif
