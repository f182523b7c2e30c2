#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache serve` speaking HTTP/2 (RFC 9113) to clients we did not write: curl, nghttp,
/// h2load, headless Chromium, and a frame-level checker on PyPI's h2
/// (`Checkers/h2_attacks.py`) that sends what well-behaved clients send and what attackers send.
/// Each attack is checked for the answer the server promises (a GOAWAY or RST_STREAM code, a
/// status), for a normal request answered afterwards on a new connection, and for the server's
/// peak memory staying within ``memoryGrowthBoundKiB`` of what it was before.
///
/// The tools come from `scripts/setup --tests` (CI runs it); a test whose tool is missing is
/// skipped with a message saying so, and runs everywhere it is installed.
@Suite(.serialized, .timeLimit(.minutes(10)))
struct CLIServeHTTP2Tests {
    /// How much the server's peak RSS (VmHWM) may grow during one attack: 32 MiB. Each attack
    /// would cost more than that where it is not bounded: the HPACK bomb decodes to 40 MB, the
    /// unread PING flood's 300 000 ACKs queued are tens of MB of nghttp2 items, and the
    /// zero-window stall's 20 answers of 3 MB held whole are 60 MB (bounded: 256 KiB each). A
    /// bounded server grows by a few MiB (buffers, a connection, a 3 MB body in the store); the
    /// most is the zero-window stall's, 14–16 MiB: once the first stream's client has held its
    /// miss back for a second, the 19 streams waiting for it each go to the origin themselves,
    /// each held at its 256 KiB. Under ThreadSanitizer (`scripts/tsan` exports `TSAN_OPTIONS`)
    /// the same run's RSS is about twice that (its allocator's quarantine and shadow memory:
    /// 33 MiB measured), so the bound is doubled there.
    static let memoryGrowthBoundKiB =
        ProcessInfo.processInfo.environment["TSAN_OPTIONS"] == nil ? 32 * 1024 : 64 * 1024

    /// The TLS suite's harness: the test CA, a loopback origin, `serve` with a certificate, curl.
    let https: CLIServeHTTPSTests
    var certificates: TestCertificates { https.certificates }
    var origin: LoopbackOrigin { https.origin }
    var directory: String { https.cli.directory.path }

    init() throws {
        https = try CLIServeHTTPSTests()
        https.origin.route("/slow") { _ in
            LoopbackOrigin.Response(headers: [("Cache-Control", "no-store")], body: "slow body", delay: 3)
        }
        https.origin.route("/page.html") { _ in
            LoopbackOrigin.Response(
                headers: [("Content-Type", "text/html"), ("Cache-Control", "max-age=600")],
                body:
                    "<html><head><link rel=stylesheet href=/style.css></head><body><p id=p>served over h2</p></body></html>"
            )
        }
        https.origin.route("/style.css") { _ in
            LoopbackOrigin.Response(
                headers: [("Content-Type", "text/css"), ("Cache-Control", "max-age=600")], body: "p { color: teal }")
        }
    }

    /// `serve` with the localhost certificate on a TLS port and a plain one (prior knowledge).
    func serve(_ more: [String] = [], name: String = "serve") async throws -> CLIServeHTTPSTests.Proxy {
        try await https.serve([certificates.localhost], more, name: name)
    }

    /// Runs the checker's `name` case against `proxy`: over TLS (ALPN h2) or in cleartext.
    func check(
        _ name: String, _ proxy: CLIServeHTTPSTests.Proxy, tls: Bool = true, _ more: [String] = [],
        timeout: Double = 15
    ) async throws -> H2Report {
        try H2Report(try await checkerRun(name, proxy, tls: tls, more, timeout: timeout))
    }

    /// The checker's run, before its report is read (a value that can leave a task).
    func checkerRun(
        _ name: String, _ proxy: CLIServeHTTPSTests.Proxy, tls: Bool = true, _ more: [String] = [],
        timeout: Double = 15
    ) async throws -> CLIRun {
        var arguments = [H2Checker.script, name, "--timeout", "\(timeout)"]
        arguments +=
            tls
            ? ["--port", "\(proxy.tlsPort)", "--tls", "--cafile", certificates.caFile] : ["--port", "\(proxy.port)"]
        return try await CLIProcess.run(
            executable: H2Checker.python, arguments + more, in: directory, timeout: timeout + 60)
    }

    /// Runs attack `name` against a fresh `serve` (started with `serveArguments`), then checks
    /// that a normal request on a new connection is answered 200 and that the server's peak
    /// memory grew by less than ``memoryGrowthBoundKiB``.
    /// - Returns: The checker's report, and the server's metrics afterwards.
    func attack(
        _ name: String, tls: Bool = true, _ more: [String] = [], serve serveArguments: [String] = [],
        timeout: Double = 15, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (report: H2Report, metrics: String) {
        let proxy = try await serve(serveArguments)
        let warm = try await check("normal", proxy, tls: tls, ["--path", "/warm"])
        #expect(warm.statuses["1"] == [200], "before \(name): \(warm.text)", sourceLocation: sourceLocation)
        let before = MeasuredRun.peakResidentKiB(of: proxy.run.processIdentifier) ?? 0
        let report = try await check(name, proxy, tls: tls, more, timeout: timeout)
        let after = try await check("normal", proxy, tls: tls, ["--path", "/after-\(name)"])
        #expect(
            after.statuses["1"] == [200], "serve answers a new connection after \(name): \(after.text)",
            sourceLocation: sourceLocation)
        let peak = MeasuredRun.peakResidentKiB(of: proxy.run.processIdentifier) ?? Int.max
        #expect(
            peak - before < Self.memoryGrowthBoundKiB,
            "\(name): peak RSS \(before) KiB before, \(peak) KiB after", sourceLocation: sourceLocation)
        return (report, try CLITLSTests.get("/_httpcache/metrics", port: proxy.port))
    }

    // MARK: Clients we did not write

    @Test(
        "curl --http2 over TLS and --http2-prior-knowledge in cleartext: a miss then a hit with Cache-Status, the access log saying HTTP/2+TLS and HTTP/2 (RFC 9113 §3.2, §3.3; RFC 9211)",
        .enabled(if: H2Checker.has("/usr/bin/curl"), "curl is missing: run scripts/setup --tests"))
    func curlMissThenHit() async throws {
        try await offPool {
            let accessLog = directory + "/access.log"
            let proxy = try await serve(["--access-log", accessLog])
            let format = ["-w", "%{http_version} %{http_code}\n", "-D", "-"]
            let secure = try await https.tool(
                "/usr/bin/curl",
                ["-sS", "--http2", "--cacert", certificates.caFile] + format + [
                    "https://localhost:\(proxy.tlsPort)/a", "https://localhost:\(proxy.tlsPort)/a",
                ])
            #expect(secure.status == 0, "\(secure.stderr)")
            #expect(
                secure.stdout.contains("cache-status: httpcache; fwd=uri-miss; fwd-status=200; stored"),
                "\(secure.stdout)")
            #expect(secure.stdout.contains("cache-status: httpcache; hit"), "\(secure.stdout)")
            #expect(secure.stdout.components(separatedBy: "2 200\n").count == 3, "\(secure.stdout)")
            // One curl a request: curl 7.88 fails the second transfer on a reused prior-knowledge
            // connection with "Error in the HTTP2 framing layer" (nginx's too).
            var plain = try await https.tool(
                "/usr/bin/curl", ["-sS", "--http2-prior-knowledge"] + format + ["http://127.0.0.1:\(proxy.port)/b"])
            plain.stdoutData += try await https.tool(
                "/usr/bin/curl", ["-sS", "--http2-prior-knowledge"] + format + ["http://127.0.0.1:\(proxy.port)/b"]
            ).stdoutData
            #expect(plain.status == 0, "\(plain.stderr)")
            #expect(plain.stdout.contains("fwd=uri-miss") && plain.stdout.contains("httpcache; hit"), "\(plain.stdout)")
            #expect(plain.stdout.components(separatedBy: "2 200\n").count == 3, "\(plain.stdout)")
            #expect(origin.requests.map(\.path) == ["/a", "/b"])
            let lines = try String(contentsOfFile: accessLog, encoding: .utf8).split(separator: "\n")
            #expect(lines.filter { $0.contains(" GET /a HTTP/2+TLS 200 ") }.count == 2, "\(lines)")
            #expect(lines.filter { $0.contains(" GET /b HTTP/2 200 ") }.count == 2, "\(lines)")
        }
    }

    @Test(
        "A hit over HTTP/2 carries the stored fields, in their order, then age and cache-status (RFC 9111 §5.1, RFC 9113 §8.3.2)",
        .enabled(if: H2Checker.has("/usr/bin/curl"), "curl is missing: run scripts/setup --tests"))
    func hitFieldsOverHTTP2() async throws {
        try await offPool {
            let proxy = try await serve()
            var names: [String] = []
            for _ in 0..<2 {
                let fetched = try await https.tool(
                    "/usr/bin/curl",
                    ["-sS", "--http2", "--cacert", certificates.caFile, "-D", "-", "-o", "/dev/null"]
                        + ["https://localhost:\(proxy.tlsPort)/page.html"])
                #expect(fetched.status == 0, "\(fetched.stderr)")
                names = fetched.stdout.split(separator: "\r\n").dropFirst().compactMap {
                    $0.split(separator: ":").first.map(String.init)
                }
                if fetched.stdout.contains("httpcache; hit") { break }
            }
            let kept = names.filter { ["content-type", "cache-control", "age", "cache-status"].contains($0) }
            #expect(kept == ["content-type", "cache-control", "age", "cache-status"], "\(names)")
        }
    }

    @Test(
        "nghttp: three URLs on one connection, each answered 200 on its own stream (RFC 9113 §5)",
        .enabled(if: H2Checker.has("/usr/bin/nghttp"), "nghttp is missing: run scripts/setup --tests (nghttp2-client)"))
    func nghttpSeveralStreamsOnOneConnection() async throws {
        try await offPool {
            let proxy = try await serve()
            let urls = ["/n1", "/n2", "/n3"].map { "https://localhost:\(proxy.tlsPort)\($0)" }
            let result = try await https.tool("/usr/bin/nghttp", ["-n", "-v"] + urls)
            #expect(result.status == 0, "\(result.stderr)")
            let connects = result.stdout.components(separatedBy: "] Connected").count - 1
            #expect(connects == 1, "\(result.stdout.prefix(2000))")
            let answered = result.stdout.split(separator: "\n").filter { $0.contains(":status: 200") }
            #expect(answered.count == 3, "\(result.stdout.suffix(3000))")
            #expect(origin.requests.map(\.path).sorted() == ["/n1", "/n2", "/n3"])
        }
    }

    @Test(
        "h2load -n 2000 -c 4 -m 10: no request failed, every status 2xx, memory bounded",
        .enabled(if: H2Checker.has("/usr/bin/h2load"), "h2load is missing: run scripts/setup --tests (nghttp2-client)"))
    func h2loadAllSucceed() async throws {
        try await offPool {
            let proxy = try await serve()
            let before = MeasuredRun.peakResidentKiB(of: proxy.run.processIdentifier) ?? 0
            let result = try await CLIProcess.run(
                executable: "/usr/bin/h2load",
                ["-n", "2000", "-c", "4", "-m", "10", "https://localhost:\(proxy.tlsPort)/load"], in: directory,
                timeout: 120)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout.contains("2000 succeeded, 0 failed, 0 errored, 0 timeout"), "\(result.stdout)")
            #expect(result.stdout.contains("status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx"), "\(result.stdout)")
            let peak = MeasuredRun.peakResidentKiB(of: proxy.run.processIdentifier) ?? Int.max
            #expect(peak - before < Self.memoryGrowthBoundKiB, "peak RSS \(before) KiB before, \(peak) KiB after")
        }
    }

    @Test(
        "Headless Chromium loads a page and its stylesheet over https from serve, on HTTP/2 (the access log says HTTP/2+TLS)",
        .enabled(if: H2Checker.has("/usr/bin/chromium"), "Chromium is missing: run scripts/setup --tests"))
    func chromiumOverHTTP2() async throws {
        try await offPool {
            let accessLog = directory + "/access.log"
            let proxy = try await serve(["--access-log", accessLog])
            let profile = directory + "/chromium-profile"
            try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
            let result = try await https.tool(
                "/usr/bin/chromium",
                [
                    "--headless", "--no-sandbox",  // Chromium refuses to run as root with its sandbox.
                    "--disable-gpu", "--user-data-dir=\(profile)", "--no-first-run", "--disable-extensions",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    // The test CA is trusted by its key alone: the leaf's public key hash.
                    "--ignore-certificate-errors-spki-list=\(try spkiHash(certificates.localhost.certificateFile))",
                    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost",
                    "--virtual-time-budget=3000", "--dump-dom", "https://localhost:\(proxy.tlsPort)/page.html",
                ])
            #expect(result.stdout.contains("served over h2"), "\(result.stdout) \(result.stderr.suffix(2000))")
            let lines = try String(contentsOfFile: accessLog, encoding: .utf8).split(separator: "\n")
            #expect(lines.contains { $0.contains(" GET /page.html HTTP/2+TLS 200 ") }, "\(lines)")
            #expect(lines.contains { $0.contains(" GET /style.css HTTP/2+TLS 200 ") }, "\(lines)")
        }
    }

    /// The base64 SHA-256 of the certificate's SubjectPublicKeyInfo (what Chromium's
    /// `--ignore-certificate-errors-spki-list` takes), from the openssl command.
    func spkiHash(_ certificate: String) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [
            "-c",
            "openssl x509 -pubkey -noout -in \"$0\" | openssl pkey -pubin -outform der"
                + " | openssl dgst -sha256 -binary | openssl base64 -A", certificate,
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let hash = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return try #require(process.terminationStatus == 0 && hash.count == 44 ? hash : nil, "openssl: \(hash)")
    }

    @Test(
        "serve --no-http2: ALPN gives http/1.1 (curl --http2 falls back, h2 alone gets a no_application_protocol alert), the cleartext preface is answered 505 (RFC 9113 §3.2, §3.3; RFC 7301 §3.2; RFC 9110 §15.6.6)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func noHTTP2() async throws {
        try await offPool {
            let proxy = try await serve(["--no-http2"])
            let curl = try await https.tool(
                "/usr/bin/curl",
                [
                    "-sS", "--http2", "--cacert", certificates.caFile, "-o", "/dev/null", "-w",
                    "%{http_version} %{http_code}",
                    "https://localhost:\(proxy.tlsPort)/a",
                ])
            #expect(curl.stdout == "1.1 200", "\(curl.stdout) \(curl.stderr)")
            let h2Only = try await check("normal", proxy)
            // Python's ssl module: "tlsv1 alert no application protocol".
            #expect(h2Only.error?.contains("no application protocol") == true, "\(h2Only.text)")
            let fd = try LoopbackOrigin.connect(port: proxy.port)
            defer { close(fd) }
            let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
            #expect(preface.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) } == preface.count)
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 512)
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            let answer = String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 505 "), "\(answer)")
        }
    }

    // MARK: Reloading

    @Test(
        "SIGHUP three times under load (curls of 10 streams at a time), the certificate replaced between: no request fails, new handshakes get the new certificate, an open HTTP/2 connection gets GOAWAY(NO_ERROR) and finishes its stream (RFC 9113 §6.8)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func reloadUnderLoad() async throws {
        try await offPool {
            let files = try https.copy(certificates.localhost, as: "served")
            let proxy = try await https.serve([files])
            // Two clients, each running curls of 200 requests (10 streams at a time) one after
            // another until the three rounds are over. (h2load cannot be the load: it does not
            // reconnect after a GOAWAY, and counts the requests it then cannot start as failed.)
            let stop = Locked(false)
            let loads = (1...2).map { client in
                Task {
                    var runs: [CLIRun] = []
                    while !stop.withLock({ $0 }) {
                        runs.append(
                            try await CLIProcess.run(
                                executable: "/usr/bin/curl",
                                [
                                    // -k: the certificate alternates between names (checked below
                                    // with sni.test).
                                    "-sS", "-k", "--http2", "--parallel", "--parallel-max", "10", "-o", "/dev/null",
                                    "-w", "%{http_code} %{http_version} %{num_connects}\n",
                                    "https://localhost:\(proxy.tlsPort)/load\(client)-\(runs.count)-[1-200]",
                                ], in: directory, timeout: 60))
                    }
                    return runs
                }
            }
            let rounds = [certificates.localhost, certificates.second, certificates.localhost, certificates.second]
            for round in 1..<rounds.count {
                let (served, leaf) = (rounds[round - 1], rounds[round])
                // A stream in flight (the origin takes 3 s) on a connection open before the reload.
                let name = served.certificateFile == certificates.second.certificateFile ? "sni.test" : "localhost"
                let open = Task { try await checkerRun("normal", proxy, ["--path", "/slow", "--server-name", name]) }
                // Reloaded only once the stream is at the origin: its connection began before.
                #expect(await slowRequests(reach: round), "round \(round): the stream never reached the origin")
                try https.replace(files, with: leaf)
                proxy.run.signal(SIGHUP)
                #expect(await reloads(of: proxy, reach: round), "\(proxy.log)")
                let finished = try H2Report(try await open.value)
                #expect(finished.goawayCode == 0, "round \(round): \(finished.text)")
                #expect(finished.statuses["1"] == [200] && finished.bytes["1"] == 9, "round \(round): \(finished.text)")
                // A new handshake after the reload: the name sni.test is covered by the second
                // certificate only (curl exit 60: the peer's certificate failed verification).
                let started = MonotonicClock.seconds()
                let after = try await https.curl(proxy, ["/after-reload-\(round)"], host: "sni.test", verbose: true)
                let expected: Int32 = leaf.certificateFile == certificates.second.certificateFile ? 0 : 60
                if after.status != expected {
                    // What the proxy counted, and how long curl waited (a request left inside
                    // OpenSSL waited for the header timeout, 10 s, then got an empty reply).
                    let took = MonotonicClock.seconds() - started
                    let metrics = try await https.tool(
                        "/usr/bin/curl", ["-sS", "http://127.0.0.1:\(proxy.port)/_httpcache/metrics"])
                    let names = ["connections", "tls_handshakes", "rejected", "http2_goaways"]
                    let counters = metrics.stdout.split(separator: "\n").filter { line in
                        !line.hasPrefix("#") && names.contains { line.contains($0) }
                    }
                    Issue.record(
                        """
                        round \(round): curl exited \(after.status) after \(took) s: \(after.stderr)
                        the proxy's log: \(proxy.log)
                        its counters: \(counters.joined(separator: "\n"))
                        """)
                }
            }
            stop.withLock { $0 = true }
            var (runs, connections) = (0, 0)
            for load in loads {
                for result in try await load.value {
                    let lines = result.stdout.split(separator: "\n")
                    #expect(result.status == 0 && lines.count == 200, "\(result.stderr.suffix(500))")
                    #expect(lines.allSatisfy { $0.hasPrefix("200 2 ") }, "\(lines.filter { !$0.hasPrefix("200 2 ") })")
                    connections += lines.compactMap { Int($0.split(separator: " ").last ?? "") }.reduce(0, +)
                    runs += 1
                }
            }
            // A curl that got a GOAWAY went on on a new connection: more connections than curls.
            #expect(runs >= 6 && connections > runs, "\(runs) curls, \(connections) connections")
            #expect(proxy.log.components(separatedBy: "certificates reloaded").count == 4, "\(proxy.log)")
        }
    }

    @Test(
        "A reload gives a connection with no stream open notice first (GOAWAY naming stream 2^31-1): a request its client sent before reading it is answered (RFC 9113 §6.8)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func reloadGivesNoticeFirst() async throws {
        try await offPool {
            let proxy = try await serve()
            let (ready, sent) = (directory + "/first-answered", directory + "/goaway-sent")
            let run = Task {
                try await checkerRun(
                    "request-during-goaway", proxy,
                    ["--path", "/page.html", "--ready-file", ready, "--wait-file", sent])
            }
            var answered = false
            for _ in 0..<1000 where !answered {
                answered = FileManager.default.fileExists(atPath: ready)
                if !answered { try? await Task.sleep(for: .milliseconds(10)) }
            }
            #expect(answered, "the first request was not answered")
            proxy.run.signal(SIGHUP)
            #expect(await reloads(of: proxy, reach: 1), "\(proxy.log)")
            // The loop sends its GOAWAY as soon as it takes the reload (a final one, naming
            // stream 1, would be on the wire well before this).
            try await Task.sleep(for: .milliseconds(300))
            #expect(FileManager.default.createFile(atPath: sent, contents: nil))
            let report = try H2Report(try await run.value)
            #expect(report.goawayCode == 0 && report.goawayLastStream == Int(Int32.max), "\(report.text)")
            #expect(report.statuses["3"] == [200], "\(report.text)")
            // Then the final GOAWAY, and the connection ends once the stream has.
            #expect(report.closed, "\(report.text)")
        }
    }

    @Test(
        "SIGTERM: an open HTTP/2 connection gets GOAWAY(NO_ERROR), its stream in flight finishes, serve exits 0 (RFC 9113 §6.8)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func shutdownFinishesStreams() async throws {
        try await offPool {
            let proxy = try await serve()
            let open = Task { try await checkerRun("normal", proxy, tls: false, ["--path", "/slow"]) }
            #expect(await slowRequests(reach: 1), "the stream never reached the origin")
            proxy.run.signal(SIGTERM)
            let finished = try H2Report(try await open.value)
            #expect(finished.goawayCode == 0, "\(finished.text)")
            #expect(finished.statuses["1"] == [200] && finished.bytes["1"] == 9, "\(finished.text)")
            #expect(await proxy.run.exitStatus(seconds: 20) == 0, "\(proxy.log)")
        }
    }

    /// Waits until the origin has had `count` requests for `/slow` (a stream in flight through
    /// the proxy); whether it had within 20 s.
    func slowRequests(reach count: Int) async -> Bool {
        for _ in 0..<2000 {
            if origin.requests.count(where: { $0.path == "/slow" }) >= count { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// Waits until `proxy` has logged `count` reloads; whether it did within 10 s.
    func reloads(of proxy: CLIServeHTTPSTests.Proxy, reach count: Int) async -> Bool {
        for _ in 0..<500 {
            if proxy.log.components(separatedBy: "certificates reloaded").count - 1 >= count { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    // MARK: Requests a client may send

    @Test(
        "A request body of 200 000 octets, three times the initial window, reaches the origin whole as the server's WINDOW_UPDATEs allow (RFC 9113 §5.2, §6.9)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func requestBodyIsFlowControlled() async throws {
        try await offPool {
            let report = try await attack("flow-control", tls: false, ["--path", "/upload"]).report
            #expect(report.statuses["1"] == [200] && report.windowUpdates > 0, "\(report.text)")
            let upload = try #require(origin.requests.first { $0.path == "/upload" })
            #expect(upload.body == (0..<200_000).map { UInt8($0 % 251) })
        }
    }

    @Test(
        "Request trailers are ignored: the request is answered, the trailer field never reaches the origin (RFC 9113 §8.1)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func requestTrailersAreIgnored() async throws {
        try await offPool {
            let report = try await attack("trailers", ["--path", "/posted"]).report
            #expect(report.statuses["1"] == [200], "\(report.text)")
            let posted = try #require(origin.requests.first { $0.path == "/posted" })
            #expect(posted.body == Array("posted body".utf8))
            #expect(posted.header("x-request-trailer") == nil)
        }
    }

    @Test(
        "HEAD is answered without DATA, a miss and a hit; cookie crumbs reach the origin joined with \"; \" (RFC 9113 §8.1, §8.2.3)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func headAndCookieCrumbs() async throws {
        try await offPool {
            let proxy = try await serve()
            // A HEAD miss (not stored), a GET that stores, then a HEAD answered from the entry.
            for (method, expected) in [("HEAD", "fwd=uri-miss"), ("GET", "stored"), ("HEAD", "hit")] {
                let head = try await check("normal", proxy, ["--method", method, "--path", "/head"])
                #expect(head.statuses["1"] == [200], "\(head.text)")
                #expect(head.bytes.isEmpty == (method == "HEAD"), "\(head.text)")
                #expect(head.headers["1"]?["cache-status"]?.contains(expected) == true, "\(head.text)")
                #expect(head.headers["1"]?["content-length"] == "13", "the GET's length: \(head.text)")
            }
            let cookies = ["--header", "cookie:a=1", "--header", "cookie:b=2", "--path", "/cookies"]
            let crumbs = try await check("normal", proxy, tls: false, cookies)
            #expect(crumbs.statuses["1"] == [200], "\(crumbs.text)")
            let request = try #require(origin.requests.first { $0.path == "/cookies" })
            #expect(request.headers.filter { $0.name.lowercased() == "cookie" }.map(\.value) == ["a=1; b=2"])
        }
    }

    @Test(
        "103 Early Hints from the origin is relayed as HEADERS without END_STREAM before the final response (RFC 9113 §8.1, RFC 8297)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func earlyHintsAreRelayed() async throws {
        try await offPool {
            let hinting = try RawOrigin(answer: { _ in
                [
                    .send("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"),
                    .send("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\nhello"),
                ]
            })
            defer { hinting.stop() }
            let proxy = try await https.serve([certificates.localhost], originURL: hinting.url(""))
            let report = try await check("normal", proxy, ["--path", "/hinted"])
            #expect(report.statuses["1"] == [103, 200] && report.bytes["1"] == 5, "\(report.text)")
            #expect(report.ended == [1], "END_STREAM once, after the body: \(report.text)")
        }
    }

    @Test(
        "A slow origin response does not hold another stream of the same connection (RFC 9113 §5)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func slowStreamDoesNotHoldOthers() async throws {
        try await offPool {
            let report = try await attack("multiplexing", tls: false, ["--path", "/slow", "--second-path", "/fast"])
                .report
            #expect(report.statuses["1"] == [200] && report.statuses["3"] == [200], "\(report.text)")
            let slow = try #require(report.endedSeconds["1"], "\(report.text)")
            let fast = try #require(report.endedSeconds["3"], "\(report.text)")
            #expect(fast < 1.5 && slow - fast > 1.5, "fast ended at \(fast) s, slow at \(slow) s")
        }
    }

    @Test(
        "A connection idle after its stream is closed with GOAWAY(NO_ERROR) at --idle-timeout, one that never opens a stream at --header-timeout (RFC 9113 §6.8, §9.1)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func idleConnectionIsClosed() async throws {
        try await offPool {
            let timeouts = ["--idle-timeout", "2", "--header-timeout", "4"]
            let idle = try await attack("idle", ["--path", "/idle"], serve: timeouts).report
            #expect(idle.goawayCode == 0 && idle.closed && idle.statuses["1"] == [200], "\(idle.text)")
            let idleFor = idle.closedSeconds ?? 99
            #expect(idleFor > 1.5 && idleFor < 3.9, "closed after \(idleFor) s")
            let silent = try await attack("idle", ["--count", "0"], serve: timeouts).report
            #expect(silent.goawayCode == 0 && silent.closed, "\(silent.text)")
            let silentFor = silent.closedSeconds ?? 99
            #expect(silentFor > 3.9 && silentFor < 8, "closed after \(silentFor) s")
        }
    }

    // MARK: Malformed requests

    @Test(
        "A field name with upper-case letters: RST_STREAM(PROTOCOL_ERROR) (RFC 9113 §8.2.1)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func uppercaseFieldName() async throws {
        try await offPool {
            let report = try await attack("uppercase", tls: false).report
            #expect(report.resets["1"] == 0x1 && report.statuses.isEmpty, "\(report.text)")
            #expect(origin.requests.allSatisfy { $0.path != "/" })
        }
    }

    @Test(
        "A connection-specific field: RST_STREAM(PROTOCOL_ERROR); TE: trailers is allowed (RFC 9113 §8.2.2)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing),
        arguments: [
            "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te=gzip", "te=trailers",
        ])
    func connectionSpecificField(field: String) async throws {
        try await offPool {
            let report = try await attack("connection-field", ["--field", field]).report
            if field == "te=trailers" {
                #expect(report.statuses["1"] == [200], "\(report.text)")
            } else {
                #expect(report.resets["1"] == 0x1 && report.statuses.isEmpty, "\(field): \(report.text)")
            }
        }
    }

    @Test(
        "`:authority` and a `Host` naming another host: RST_STREAM(PROTOCOL_ERROR) (RFC 9113 §8.3.1)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func authorityAndHostDiffer() async throws {
        try await offPool {
            let report = try await attack("authority-host", ["--path", "/mismatch"]).report
            #expect(report.resets["1"] == 0x1 && report.statuses.isEmpty, "\(report.text)")
            #expect(!origin.requests.contains { $0.path == "/mismatch" })
        }
    }

    @Test(
        "A header list over MAX_HEADER_LIST_SIZE (HEADERS and CONTINUATION): the stream is answered 431 (RFC 9113 §6.5.2, §10.5.1; RFC 6585 §5)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func headerListOverTheLimit() async throws {
        try await offPool {
            let report = try await attack("oversized-headers", tls: false, ["--path", "/large"]).report
            #expect(report.statuses["1"] == [431], "\(report.text)")
            #expect(report.serverSettings["6"] == 16384, "MAX_HEADER_LIST_SIZE advertised: \(report.text)")
            #expect(!origin.requests.contains { $0.path == "/large" })
        }
    }

    @Test(
        "The 101st concurrent stream is refused (REFUSED_STREAM, or nghttp2's PROTOCOL_ERROR once the limit is acknowledged), the first 100 are not (RFC 9113 §5.1.2)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func concurrentStreamsOverTheLimit() async throws {
        try await offPool {
            let report = try await attack("concurrent-streams").report
            #expect(report.serverSettings["3"] == 100, "MAX_CONCURRENT_STREAMS: \(report.text)")
            // A stream error on the 101st (§5.1.2), or, as nghttp2 does once the client has
            // acknowledged the limit, a connection error naming stream 199 the last one taken
            // (docs/PROXY.md says why it stays).
            let refused =
                [0x7, 0x1].contains(report.resets["201"] ?? -1)
                || (report.goawayCode == 0x1 && report.goawayLastStream == 199)
            #expect(refused, "\(report.text)")
            #expect(!report.resets.contains { Int($0.key)! < 201 && $0.value == 0x7 }, "\(report.resets)")
        }
    }

    // MARK: Attacks

    @Test(
        "Rapid Reset: 1000 streams opened and cancelled at once end in GOAWAY(ENHANCE_YOUR_CALM) (CVE-2023-44487)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func rapidReset() async throws {
        try await offPool {
            let (report, metrics) = try await attack("rapid-reset", ["--count", "1000"])
            #expect(report.goawayCode == 0xB, "\(report.text.prefix(1000))")
            #expect(report.closed, "closed after the GOAWAY")
            #expect(
                metrics.contains("httpcache_http2_goaways_sent_total{code=\"ENHANCE_YOUR_CALM\"} 1\n"), "\(metrics)")
            // The normal request's connection before, the attack's, the normal one after.
            #expect(metrics.contains("httpcache_http2_connections_total 3\n"), "\(metrics)")
        }
    }

    @Test(
        "CONTINUATION flood: a header block that never ends is cut with a GOAWAY (CVE-2024-27316)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func continuationFlood() async throws {
        try await offPool {
            let report = try await attack("continuation-flood", tls: false).report
            #expect([0xB, 0x9, 0x1].contains(report.goawayCode ?? -1) && report.closed, "\(report.text)")
            #expect((report.sent["continuations"] ?? .max) < 10000, "cut before the end: \(report.text)")
        }
    }

    @Test(
        "HPACK bomb: one 4 KB table entry referenced 10 000 times (40 MB decoded) is answered 431 or reset, memory bounded (RFC 9113 §10.5.1, RFC 7541 §7.3)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func hpackBomb() async throws {
        try await offPool {
            let report = try await attack("hpack-bomb").report
            #expect(report.statuses["1"] == [431] || report.resets["1"] != nil, "\(report.text)")
        }
    }

    @Test(
        "SETTINGS flood and PING flood: 5000 frames asking for ACKs end in GOAWAY(ENHANCE_YOUR_CALM) (RFC 9113 §10.5)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing), arguments: ["settings-flood", "ping-flood"])
    func controlFrameFlood(name: String) async throws {
        try await offPool {
            let (report, metrics) = try await attack(name)
            #expect(report.goawayCode == 0xB && report.closed, "\(report.text)")
            #expect(
                metrics.contains("httpcache_http2_goaways_sent_total{code=\"ENHANCE_YOUR_CALM\"} 1\n"), "\(metrics)")
        }
    }

    @Test(
        "A PING flood from a client that never reads the ACKs is cut, not queued (RFC 9113 §10.5)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func pingFloodNeverRead() async throws {
        try await offPool {
            let report = try await attack("ping-flood-unread", ["--count", "300000"], serve: ["--idle-timeout", "5"])
                .report
            #expect(report.closed, "\(report.text)")
        }
    }

    @Test(
        "Zero-window stall: INITIAL_WINDOW_SIZE 0 and no WINDOW_UPDATE on 20 streams of 3 MB ends in GOAWAY(ENHANCE_YOUR_CALM) after --idle-timeout, memory bounded (RFC 9113 §6.9.2, §10.5)",
        .enabled(if: H2Checker.isInstalled, H2Checker.missing))
    func zeroWindowStall() async throws {
        try await offPool {
            // 20 streams of 3 MB: 60 MB held if answers waited whole, 5 MiB at 256 KiB a stream.
            let report = try await attack(
                "zero-window", ["--path", "/big", "--count", "20"], serve: ["--idle-timeout", "2"], timeout: 20
            ).report
            #expect(report.goawayCode == 0xB && report.closed, "\(report.text)")
            #expect(report.bytes.isEmpty, "nothing sent into a zero window: \(report.text)")
            let closedAfter = report.closedSeconds ?? 99
            #expect(closedAfter > 1.5 && closedAfter < 12, "closed after \(closedAfter) s")
        }
    }
}

/// The frame-level checker, `Checkers/h2_attacks.py`, run by the Python of the checkers'
/// environment that `scripts/setup --tests` makes in `.build/checkers` (or the one
/// `HTTPCACHE_CHECKERS` names), which has PyPI's h2.
enum H2Checker {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Checkers/h2_attacks.py").path

    static var python: String { CodedBodies.checkersPython }

    /// Whether that Python imports h2.
    static let isInstalled: Bool = {
        guard has(python) else { return false }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-c", "import h2"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }()

    static let missing: Comment = "PyPI's h2 is missing from .build/checkers: run scripts/setup --tests"

    static func has(_ executable: String) -> Bool { FileManager.default.isExecutableFile(atPath: executable) }
}

/// What the server did, as the checker printed it (one JSON line).
struct H2Report {
    let text: String
    private let json: [String: Any]

    init(_ run: CLIRun, sourceLocation: SourceLocation = #_sourceLocation) throws {
        text = run.stdout
        json = try #require(
            (try? JSONSerialization.jsonObject(with: run.stdoutData)) as? [String: Any],
            "the checker printed no report (status \(run.status)): \(run.stdout) \(run.stderr)",
            sourceLocation: sourceLocation)
    }

    private func numbers(_ key: String) -> [String: Int] { json[key] as? [String: Int] ?? [:] }

    /// The GOAWAY's error code, or nil when none came.
    var goawayCode: Int? { (json["goaway"] as? [String: Any])?["code"] as? Int }
    /// The GOAWAY's last stream id.
    var goawayLastStream: Int? { (json["goaway"] as? [String: Any])?["last_stream_id"] as? Int }
    /// RST_STREAM error codes by stream.
    var resets: [String: Int] { numbers("resets") }
    /// The statuses of each stream (interim ones first).
    var statuses: [String: [Int]] { json["statuses"] as? [String: [Int]] ?? [:] }
    /// DATA octets by stream.
    var bytes: [String: Int] { numbers("bytes") }
    /// The final response's fields (without pseudo-fields) by stream.
    var headers: [String: [String: String]] { json["headers"] as? [String: [String: String]] ?? [:] }
    /// The streams that ended (END_STREAM), in order, each time it came.
    var ended: [Int] { json["ended"] as? [Int] ?? [] }
    /// Seconds from the start until each stream ended.
    var endedSeconds: [String: Double] { json["ended_seconds"] as? [String: Double] ?? [:] }
    /// The server's SETTINGS, by identifier.
    var serverSettings: [String: Int] { numbers("server_settings") }
    var sent: [String: Int] { numbers("sent") }
    var windowUpdates: Int { json["window_updates"] as? Int ?? 0 }
    /// Whether the server closed the connection.
    var closed: Bool { json["closed"] as? Bool ?? false }
    var closedSeconds: Double? { json["closed_seconds"] as? Double }
    /// Why the checker could not run the case (a refused connection, no h2 in ALPN).
    var error: String? { json["error"] as? String }
}
#endif
