#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// A running `httpcache serve` whose log goes to a file: where it listens, what it logged.
struct ServeRun {
    let run: PipedRun
    let port: UInt16
    let tlsPort: UInt16?
    let errors: String

    /// Starts `httpcache serve arguments` (which must listen on port 0) and waits until it says
    /// where it listens (`https` too when `tls`).
    static func start(
        _ arguments: [String], in directory: String, tls: Bool = false, environment: [String: String] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ServeRun {
        let errors = directory + "/serve-\(UUID().uuidString).log"
        let run = try PipedRun(["serve"] + arguments, standardError: errors, environment: environment)
        let listening = await run.waitForOutput(seconds: 30) { $0.filter { $0 == 0x0A }.count >= (tls ? 2 : 1) }
        let lines = String(decoding: run.stdout, as: UTF8.self).split(separator: "\n")
        func port(_ scheme: String) -> UInt16? {
            lines.first { $0.hasPrefix("listening on \(scheme)://") }?.split(separator: ":").last.flatMap { UInt16($0) }
        }
        let log = (try? String(contentsOfFile: errors, encoding: .utf8)) ?? ""
        let plain = try #require(
            listening ? port("http") : nil, "serve did not listen: \(log)", sourceLocation: sourceLocation)
        return ServeRun(run: run, port: plain, tlsPort: tls ? port("https") : nil, errors: errors)
    }

    /// What the proxy wrote to standard error so far.
    var log: String { (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "" }

    /// The log's lines containing `text`.
    func lines(containing text: String) -> [Substring] { log.split(separator: "\n").filter { $0.contains(text) } }

    /// Waits until `count` log lines contain `text`; whether they did within 10 s.
    func waitForLog(_ text: String, count: Int = 1) async -> Bool {
        for _ in 0..<500 {
            if lines(containing: text).count >= count { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// `curl` for `path` through the proxy's plain port: the body, or the status line with `-I`.
    func curl(_ path: String, _ more: [String] = [], in directory: String) async throws -> CLIRun {
        try await CLIProcess.run(
            executable: "/usr/bin/curl", ["-sS"] + more + ["http://127.0.0.1:\(port)\(path)"], in: directory)
    }
}

/// `httpcache serve --config FILE`, `--check-config FILE` and SIGHUP re-reading the file, on the
/// built binary: the TOML subset's keys are serve's options, flags win over the file, every
/// error names the file's line, a reload applies what it can and says what waits for a restart.
@Suite(.timeLimit(.minutes(10)))
struct CLIConfigTests {
    let cli: CLIHarness

    init() throws {
        cli = try CLIHarness()
        cli.serve("/page", [("Cache-Control", "max-age=600")], body: "from the origin")
    }

    /// Writes `text` to `name` in the test's directory (mode `mode`) and returns its path.
    func file(_ name: String, _ text: String, mode: mode_t = 0o600) throws -> String {
        let path = cli.directory.path + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, mode)
        return path
    }

    @Test(
        "--check-config prints every option in effect with its source (file line, command line, default) and binds nothing"
    )
    func checkConfigPrintsTheEffectiveConfiguration() async throws {
        // The origin's own port: a start would fail to bind it, a check does not try.
        let busy = "127.0.0.1:\(cli.origin.port)"
        let path = try file(
            "h.conf",
            """
            # the origin
            origin = "\(cli.url(""))"
            listen = "\(busy)"
            memory = "64M"
            loops = 2
            no-http2 = true
            """)
        let run = try await cli.run(["serve", "--check-config", path, "--loops", "3"], cacheDir: false)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.isEmpty, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n")
        func line(_ key: String) -> String {
            lines.first { $0.hasPrefix("\(key) = ") || $0.hasPrefix("# \(key) ") }.map(String.init) ?? ""
        }
        #expect(line("origin").hasSuffix("# \(path):2"), "\(run.stdout)")
        #expect(line("listen").hasPrefix("listen = \"\(busy)\"") && line("listen").hasSuffix("# \(path):3"))
        #expect(line("loops").hasPrefix("loops = 3 ") && line("loops").hasSuffix("# command line"))
        #expect(line("no-http2").hasPrefix("no-http2 = true"))
        #expect(line("idle-timeout").hasPrefix("idle-timeout = 60") && line("idle-timeout").hasSuffix("# default"))
        #expect(
            line("origin-timeout").hasPrefix("origin-timeout = 60") && line("origin-timeout").hasSuffix("# default"))
        #expect(line("tls-cert").hasPrefix("# tls-cert is not set"))
        // One line per option, each once: the 28 serve had when this was written, and any added since.
        let keys = lines.map { $0.split(separator: " ").prefix(2).joined(separator: " ") }
        #expect(Set(keys).count == lines.count && lines.count >= 28, "\(run.stdout)")
        #expect(!keys.contains { $0.contains("config") }, "--config and --check-config stay on the command line")
    }

    @Test(
        "A file that cannot be used: exit 2, one line naming FILE:LINE and what to write instead",
        arguments: [
            ("origin = \"http://127.0.0.1:1\"\norgin = \"x\"\n", ":2: unknown key orgin; did you mean origin?"),
            ("origin = \"http://127.0.0.1:1\"\nno-http2 = \"yes\"\n", ":2: no-http2 is a switch, not a string"),
            ("origin = \"http://127.0.0.1:1\"\nlisten = 127.0.0.1:80\n", ":2: listen = 127.0.0.1:80 is not a value"),
            ("[serve]\n", ":1: tables ([name]) are not supported"),
            // Checked as a start checks it, located in the file.
            ("\n\norigin = \"ftp://x\"\n", ":3: --origin needs an http or https URL"),
            ("origin = \"http://127.0.0.1:1\"\nlisten = \"nowhere\"\n", ":2: --listen needs HOST:PORT"),
            (
                "origin = \"http://127.0.0.1:1\"\nuser = \"no-such-user-here\"\n",
                ":2: --user no-such-user-here: no such user"
            ),
        ])
    func unusableFile(text: String, says: String) async throws {
        let path = try file("bad.conf", text)
        for command in ["--check-config", "--config"] {
            let run = try await cli.run(["serve", command, path], cacheDir: false)
            #expect(run.status == 2, "\(run.stderr)")
            #expect(run.stderrLines.count == 1, "\(run.stderr)")
            #expect(run.stderr.hasPrefix("httpcache: serve: \(path)\(says)"), "\(run.stderr)")
        }
    }

    @Test("A flag's error is not blamed on the file; a missing file and --config with --check-config are usage errors")
    func usageErrorsOutsideTheFile() async throws {
        let path = try file("h.conf", "origin = \"\(cli.url(""))\"\n")
        let flag = try await cli.run(["serve", "--check-config", path, "--listen", "nowhere"], cacheDir: false)
        #expect(
            flag.status == 2 && flag.stderr.hasPrefix("httpcache: serve: --listen needs HOST:PORT"), "\(flag.stderr)")
        let missing = try await cli.run(["serve", "--config", path + ".missing"], cacheDir: false)
        #expect(
            missing.status == 2 && missing.stderr.contains("cannot read the configuration file"), "\(missing.stderr)")
        let both = try await cli.run(["serve", "--config", path, "--check-config", path], cacheDir: false)
        #expect(both.status == 2 && both.stderr.contains("not both"), "\(both.stderr)")
    }

    @Test("admin-token in a file others can read is warned about in one line; in a 0640 file it is not")
    func secretInAReadableFile() async throws {
        let text = "origin = \"\(cli.url(""))\"\nadmin-token = \"s3cret\"\n"
        let readable = try file("readable.conf", text, mode: 0o644)
        let run = try await cli.run(["serve", "--check-config", readable], cacheDir: false)
        #expect(run.status == 0)
        #expect(
            run.stderrLines == [
                "httpcache serve: warning: \(readable) holds admin-token and others can read it (mode 644); run chmod o-rwx \(readable)"
            ])
        #expect(run.stdout.contains("admin-token = \"(hidden, 6 characters)\""), "\(run.stdout)")
        #expect(!run.stdout.contains("s3cret"))
        let kept = try file("kept.conf", text, mode: 0o640)
        #expect(try await cli.run(["serve", "--check-config", kept], cacheDir: false).stderr.isEmpty)
    }

    @Test("contrib/httpcache.conf, the example the unit reads, passes --check-config")
    func contribExampleIsValid() async throws {
        let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../contrib/httpcache.conf"
        ).standardized.path
        let run = try await cli.run(
            ["serve", "--check-config", example, "--cache-dir", cli.cacheDirectory], cacheDir: false)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("origin = \"http://127.0.0.1:8081\""), "\(run.stdout)")
    }

    @Test(
        "serve --config: the file's origin is served; SIGHUP applies admin-token, logs each other change once with what stays, and keeps everything when the file breaks"
    )
    func reloadAppliesWhatItCan() async throws {
        let path = try file(
            "h.conf", "origin = \"\(cli.url(""))\"\nlisten = \"127.0.0.1:0\"\nmemory-only = true\nmemory = \"64M\"\n")
        let proxy = try await ServeRun.start(["--config", path], in: cli.directory.path)
        #expect(try await proxy.curl("/page", in: cli.directory.path).stdout == "from the origin")

        _ = try file(
            "h.conf",
            "origin = \"\(cli.url(""))\"\nlisten = \"127.0.0.1:0\"\nmemory-only = true\nmemory = \"128M\"\nadmin-token = \"new\"\nno-http2 = true\n"
        )
        proxy.run.signal(SIGHUP)
        #expect(await proxy.waitForLog("admin-token changed in \(path): in use from now on"), "\(proxy.log)")
        #expect(await proxy.waitForLog("no-http2 changed"), "\(proxy.log)")
        #expect(
            proxy.lines(containing: "memory changed") == [
                "httpcache serve: memory changed in \(path): restart to apply it; keeping 64M"
            ])
        #expect(
            proxy.lines(containing: "no-http2 changed") == [
                "httpcache serve: no-http2 changed in \(path): restart to apply it; keeping false"
            ])
        #expect(proxy.lines(containing: "changed in").count == 3, "only what changed: \(proxy.log)")

        // The same file again: what was applied is not news, what waits for a restart is said again.
        proxy.run.signal(SIGHUP)
        #expect(await proxy.waitForLog("memory changed", count: 2), "\(proxy.log)")
        #expect(proxy.lines(containing: "admin-token changed").count == 1, "\(proxy.log)")

        _ = try file("h.conf", "origin = \"\(cli.url(""))\"\nmemory = 128M\n")
        proxy.run.signal(SIGHUP)
        #expect(await proxy.waitForLog("not reloaded"), "\(proxy.log)")
        #expect(
            proxy.lines(containing: "not reloaded") == [
                "httpcache serve: \(path) not reloaded: \(path):2: memory = 128M is not a value: quote text (memory = \"128M\"); numbers are integers, switches true or false; the configuration in use stays"
            ])
        #expect(try await proxy.curl("/page", in: cli.directory.path).stdout == "from the origin")
        proxy.run.signal(SIGTERM)
        #expect(await proxy.run.exitStatus(seconds: 30) == 0)
    }

    @Test("SIGHUP with tls-cert and tls-key changed in the file: new handshakes present the new files")
    func reloadPresentsNewCertificateFiles() async throws {
        let certificates = try TestCertificates.shared()
        func conf(_ leaf: TestCertificates.Leaf) -> String {
            """
            origin = "\(cli.url(""))"
            listen = "127.0.0.1:0"
            tls-listen = "127.0.0.1:0"
            memory-only = true
            tls-cert = ["\(leaf.certificateFile)"]
            tls-key = ['\(leaf.keyFile)']
            """
        }
        let path = try file("tls.conf", conf(certificates.localhost))
        let proxy = try await ServeRun.start(["--config", path], in: cli.directory.path, tls: true)
        let tlsPort = try #require(proxy.tlsPort)
        func curl(_ host: String) async throws -> CLIRun {
            try await CLIProcess.run(
                executable: "/usr/bin/curl",
                [
                    "-sS", "--cacert", certificates.caFile, "--resolve", "\(host):\(tlsPort):127.0.0.1",
                    "https://\(host):\(tlsPort)/page",
                ],
                in: cli.directory.path)
        }
        #expect(try await curl("sni.test").status != 0, "sni.test is not covered by the first certificate")
        _ = try file("tls.conf", conf(certificates.second))
        proxy.run.signal(SIGHUP)
        #expect(
            await proxy.waitForLog(
                "certificates reloaded: new TLS handshakes present \(certificates.second.certificateFile)"),
            "\(proxy.log)")
        #expect(try await curl("sni.test").stdout == "from the origin")
        #expect(proxy.lines(containing: "restart").isEmpty, "\(proxy.log)")
        proxy.run.signal(SIGTERM)
        #expect(await proxy.run.exitStatus(seconds: 30) == 0)
    }
}
#endif
