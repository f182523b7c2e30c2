#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// The status page in headless Chromium and `httpcache top` under tmux, against a real
/// `httpcache serve` in front of the loopback origin. Loopback only: Chromium gets no proxy
/// and no name resolution, and loads nothing but the page and its JSON.
@Suite(.timeLimit(.minutes(10)))
struct CLIStatusTests {
    let cli: CLIHarness

    init() throws {
        cli = try CLIHarness()
        cli.origin.setDefault { request in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600")], body: Array("body of \(request.path)".utf8))
        }
    }

    /// A running `serve` and its base URL.
    func serve(_ more: [String] = []) async throws -> (run: PipedRun, url: String) {
        let run = try PipedRun(
            ["serve", "--origin", cli.origin.baseURL, "--listen", "127.0.0.1:0", "--memory-only"] + more,
            standardError: cli.directory.path + "/serve.log")
        let listening = await run.waitForOutput(seconds: 30) { $0.contains(UInt8(ascii: "\n")) }
        let line = String(decoding: run.stdout, as: UTF8.self).split(separator: "\n").first ?? ""
        let port = try #require(listening ? line.split(separator: ":").last.flatMap { UInt16($0) } : nil, "\(line)")
        return (run, "http://127.0.0.1:\(port)")
    }

    /// GETs `paths` from the proxy with curl (one connection).
    func traffic(_ proxy: String, _ paths: [String]) async throws {
        let result = try await CLIProcess.run(
            executable: "/usr/bin/curl", ["-sS", "-o", "/dev/null"] + paths.map { proxy + $0 }, in: cli.directory.path)
        #expect(result.status == 0, "\(result.stderr)")
    }

    /// The proxy's metrics: requests, hits and misses as the status page counts them.
    func counts(_ proxy: String) async throws -> (requests: Int, hits: Int, misses: Int) {
        let result = try await CLIProcess.run(
            executable: "/usr/bin/curl", ["-sS", proxy + "/_httpcache/metrics"], in: cli.directory.path)
        var outcomes: [String: Int] = [:]
        for line in result.stdout.split(separator: "\n") where line.hasPrefix("httpcache_requests_total{outcome=\"") {
            let parts = line.dropFirst("httpcache_requests_total{outcome=\"".count).split(separator: "\"")
            outcomes[String(parts[0])] = Int(parts[1].split(separator: " ").last ?? "")
        }
        let hits = outcomes["hit", default: 0] + outcomes["stale", default: 0]
        let misses = outcomes["miss", default: 0] + outcomes["revalidated", default: 0] + outcomes["pass", default: 0]
        return (hits + misses + outcomes["error", default: 0], hits, misses)
    }

    /// Headless Chromium, loopback only, with a profile of the test's own.
    func chromium(_ arguments: [String]) async throws -> CLIRun {
        let profile = cli.directory.path + "/chromium-profile"
        try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
        return try await CLIProcess.run(
            executable: "/usr/bin/chromium",
            [
                "--headless", "--no-sandbox",  // Chromium refuses to run as root with its sandbox.
                "--disable-gpu", "--user-data-dir=\(profile)", "--no-first-run", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-proxy-server", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--hide-scrollbars",
            ] + arguments, in: cli.directory.path, timeout: 120)
    }

    /// The text of the element whose `data-k` is `key` in a dumped DOM.
    func figure(_ key: String, in dom: String) -> String? {
        guard let attribute = dom.range(of: "data-k=\"\(key)\"") else { return nil }
        let rest = dom[attribute.upperBound...]
        guard let open = rest.firstIndex(of: ">"), let close = rest[open...].firstIndex(of: "<") else { return nil }
        return String(rest[rest.index(after: open)..<close])
    }

    /// `.build/NAME` in the package.
    static func buildPath(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/\(name)").path
    }

    @Test(
        "Headless Chromium: the status page's SVG charts are drawn, its script updates it from status.json, its requests, hits, misses and hit ratio match the metrics; screenshots at 1280 and 420 wide",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium"), "run scripts/setup --tests"))
    func statusPageInChromium() async throws {
        try await offPool {
            let (run, proxy) = try await serve()
            defer { run.signal(SIGTERM) }
            try await traffic(proxy, ["/a", "/a", "/a", "/b", "/b", "/c", "/a"])
            // Let a tick or two take the traffic into the history.
            try await Task.sleep(for: .milliseconds(2500))
            let metrics = try await counts(proxy)
            #expect(metrics.requests == 7 && metrics.hits == 4 && metrics.misses == 3, "\(metrics)")
            // The script fetches status.json at 2 s and 4 s of virtual time, before the DOM is dumped.
            let dump = try await chromium(["--virtual-time-budget=5000", "--dump-dom", proxy + "/_httpcache/status"])
            let dom = dump.stdout
            #expect(dump.status == 0, "\(dump.stderr.suffix(2000))")
            // The script says "updating" when it starts and "live" once it has drawn what it fetched.
            #expect(dom.contains("(live, every 2 s)"), "the script did not update the page: \(dom.suffix(3000))")
            #expect(figure("totals.requests", in: dom) == String(metrics.requests))
            #expect(figure("totals.hits", in: dom) == String(metrics.hits))
            #expect(figure("totals.misses", in: dom) == String(metrics.misses))
            let ratio = String(format: "%.1f %%", Double(metrics.hits) / Double(metrics.hits + metrics.misses) * 100)
            #expect(figure("totals.hitRatio", in: dom) == ratio)
            #expect(dom.components(separatedBy: "<svg ").count - 1 == 5)
            // The requests chart has a line that rose above its floor (y < 100) for the traffic.
            let requestsChart = try #require(dom.range(of: "data-series=\"requests,hits,misses\""))
            let firstPath = try #require(dom[requestsChart.upperBound...].range(of: "<path fill=\"none\""))
            let pathText = dom[firstPath.upperBound...].prefix { $0 != ">" }
            #expect(pathText.contains(" d=\"M0 100.0L1 100.0"), "\(pathText.prefix(200))")
            #expect(pathText.split(separator: "L").contains { !$0.hasSuffix(" 100.0") }, "\(pathText.suffix(300))")
            #expect(dom.contains("<code>/a</code>"))
            // The figures did not move while the browser looked: only its own paths were asked.
            let after = try await counts(proxy)
            #expect(after == metrics)
            for width in [1280, 420] {
                let path = Self.buildPath("status-page-\(width).png")
                try? FileManager.default.removeItem(atPath: path)
                // Chromium on a machine busy with the whole suite once exited 0 without writing the
                // file: asked a second time, and its output kept for the message.
                var size = 0
                var output = ""
                for _ in 0..<2 where size <= 10_000 {
                    let shot = try await chromium([
                        "--virtual-time-budget=3000", "--window-size=\(width),1700", "--screenshot=\(path)",
                        proxy + "/_httpcache/status",
                    ])
                    #expect(shot.status == 0, "\(shot.stderr.suffix(2000))")
                    output = String(shot.stderr.suffix(2000))
                    size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
                }
                #expect(size > 10_000, "no screenshot at \(path): \(output)")
                print("status page screenshot, \(width) px wide: \(path)")
            }
        }
    }

    @Test("top --once prints one plain frame with the proxy's figures; an unreachable proxy is one line and exit 1")
    func topOnce() async throws {
        try await offPool {
            let (run, proxy) = try await serve()
            defer { run.signal(SIGTERM) }
            let minute = { Int(Date().timeIntervalSince1970) / 60 }
            let trafficMinute = minute()
            try await traffic(proxy, ["/x", "/x", "/y"])
            let once = try await CLIProcess.run(["top", "--once", "--proxy", proxy], in: cli.directory.path)
            // The busiest counts are halved at the first second of each wall-clock minute: /x's
            // 2 is 1 once a minute began since its requests.
            let xCounts = minute() == trafficMinute ? ["2 "] : ["2 ", "1 "]
            #expect(once.status == 0, "\(once.stderr)")
            #expect(!once.stdout.contains("\u{1B}"), "escape sequences in --once")
            let lines = once.stdout.split(separator: "\n")
            #expect(lines.first?.hasPrefix("httpcache top  \(proxy)  httpcache ") == true, "\(once.stdout)")
            #expect(lines.contains { $0.hasPrefix("  Requests") && $0.hasSuffix(" 3") }, "\(once.stdout)")
            #expect(lines.contains { $0.hasPrefix("  Hits") && $0.hasSuffix(" 1") }, "\(once.stdout)")
            #expect(lines.contains { $0.hasPrefix("  Misses") && $0.hasSuffix(" 2") }, "\(once.stdout)")
            #expect(lines.contains { $0.hasPrefix("  memory ") }, "\(once.stdout)")
            #expect(
                lines.contains { line in line.hasSuffix("  /x") && xCounts.contains { line.hasPrefix($0) } },
                "\(once.stdout)")
            let refusing = try RefusingPort()
            defer { withExtendedLifetime(refusing) {} }  // held until the test is done
            let closed = refusing.port
            let unreachable = try await CLIProcess.run(
                ["top", "--once", "--proxy", "http://127.0.0.1:\(closed)"], in: cli.directory.path)
            #expect(unreachable.status == 1)
            #expect(unreachable.stdout.isEmpty)
            #expect(unreachable.stderrLines.count == 1, "\(unreachable.stderr)")
            #expect(unreachable.stderr.contains("could not connect to the proxy at http://127.0.0.1:\(closed)"))
            #expect(unreachable.stderr.contains("is `httpcache serve` running?"))
            let usage = try await CLIProcess.run(["top", "--interval", "0"], in: cli.directory.path)
            #expect(usage.status == 2 && usage.stderr.contains("--interval"), "\(usage.stderr)")
        }
    }

    @Test("With a shared Redis store: the status has Redis's figures and its local tier, and top shows them")
    func redisFigures() async throws {
        try await offPool {
            let redis = [
                "--redis", try RedisServer.shared().url, "--redis-prefix",
                "status-\(UInt64.random(in: 0...UInt64.max)):",
                "--redis-timeout", "1000",
            ]
            let (run, proxy) = try await serve(redis)
            defer { run.signal(SIGTERM) }
            try await traffic(proxy, ["/r", "/r"])
            let json = try await CLIProcess.run(
                executable: "/usr/bin/curl", ["-sS", proxy + "/_httpcache/status.json"], in: cli.directory.path)
            let status = try #require(try JSONSerialization.jsonObject(with: json.stdoutData) as? [String: Any])
            let figures = try #require(status["redis"] as? [String: Any], "\(json.stdout.prefix(500))")
            #expect((figures["roundTrips"] as? Int ?? 0) > 0)
            #expect((status["tiers"] as? [[String: Any]])?.map { $0["name"] as? String } == ["redis-local"])
            let once = try await CLIProcess.run(["top", "--once", "--proxy", proxy], in: cli.directory.path)
            #expect(
                once.stdout.split(separator: "\n").contains {
                    $0.hasPrefix("Redis  ") && $0.contains(" round trips, 0 errors")
                }, "\(once.stdout)")
            #expect(once.stdout.contains("  redis-local "), "\(once.stdout)")
        }
    }

    /// tmux on a server of the test's own (`-L`), with a shell in one pane.
    struct Tmux {
        let socket = "httpcache-top-\(UUID().uuidString.prefix(8))"
        let directory: String

        /// Runs a tmux client. Through bash, which closes every descriptor above 2 first: the
        /// server the first client starts lives on, and must not hold the socket by which
        /// Foundation sees that client exit.
        @discardableResult
        func callAsFunction(_ arguments: [String]) async throws -> CLIRun {
            let closingAll =
                "for fd in /proc/$$/fd/*; do n=${fd##*/}; [ \"$n\" -gt 2 ] && eval \"exec $n>&-\"; done 2>/dev/null; "
                + "exec /usr/bin/tmux \"$@\""
            return try await CLIProcess.run(
                executable: "/bin/bash", ["-c", closingAll, "tmux", "-L", socket, "-f", "/dev/null"] + arguments,
                in: directory)
        }

        /// Ends the pane's shell, and with it the server (which `kill-server` alone leaves
        /// running while the shell lives).
        func stop() {
            for arguments in [["send-keys", "-t", "top", "exit", "Enter"], ["kill-server"]] {
                let client = ChildProcess()
                client.executableURL = URL(fileURLWithPath: "/usr/bin/tmux")
                client.arguments = ["-L", socket] + arguments
                client.standardError = FileHandle.nullDevice
                if (try? client.run()) != nil { client.waitUntilExit() }
            }
        }

        func screen() async throws -> String { try await self(["capture-pane", "-p", "-t", "top"]).stdout }

        /// Waits up to 15 s for the pane to show `text`; the screen then.
        func waitFor(_ text: String) async throws -> String {
            var shown = ""
            for _ in 0..<150 {
                shown = try await screen()
                if shown.contains(text) { return shown }
                try await Task.sleep(for: .milliseconds(100))
            }
            return shown
        }
    }

    @Test(
        "top under tmux: figures drawn and redrawn after traffic, q quits and the terminal is restored (echo, canonical mode, main screen), and so does Ctrl-C",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"), "run scripts/setup --tests"))
    func topUnderTmux() async throws {
        try await offPool {
            let (run, proxy) = try await serve()
            defer { run.signal(SIGTERM) }
            let tmux = Tmux(directory: cli.directory.path)
            let shell = try await tmux([
                "new-session", "-d", "-s", "top", "-x", "120", "-y", "50", "env", "PS1=$ ", "/bin/sh",
            ])
            #expect(shell.status == 0, "\(shell.stderr)")
            defer { tmux.stop() }
            let top = try BuiltExecutable.path("httpcache")
            for (key, status) in [("q", "0"), ("C-c", "130")] {
                try await tmux([
                    "send-keys", "-t", "top",
                    "clear; \(top) top --proxy \(proxy) --interval 0.5; echo TOP-EXIT=$?; stty -a; echo STTY-$((1 + 1))",
                    "Enter",
                ])
                let first = try await tmux.waitFor("q quits")
                #expect(first.contains("httpcache top  \(proxy)"), "\(first)")
                /// The since-start count of requests on a screen.
                func requests(_ screen: String) -> Substring? {
                    screen.split(separator: "\n").first { $0.hasPrefix("  Requests") }?.split(separator: " ").last
                }
                let before = requests(first)
                try await traffic(proxy, ["/t", "/t", "/t", "/u"])
                // Redrawn every half second: the since-start count moves.
                var after = before
                for _ in 0..<50 where after == before {
                    try await Task.sleep(for: .milliseconds(100))
                    after = requests(try await tmux.screen())
                }
                #expect(after != before, "\(String(describing: before)) → \(String(describing: after))")
                #expect(try await tmux.screen().contains("/t"))
                try await tmux(["send-keys", "-t", "top", key])
                // The line typed reads STTY-$((1 + 1)); its output, once stty is done, STTY-2.
                let restored = try await tmux.waitFor("STTY-2")
                #expect(restored.contains("TOP-EXIT=\(status)"), "\(restored)")
                // stty -a after top: canonical mode and echo are back on, and the frame is gone with
                // the alternate screen.
                let words = restored.split(whereSeparator: { $0 == " " || $0 == "\n" })
                #expect(words.contains("icanon") && words.contains("echo"), "\(restored)")
                #expect(!restored.contains("q quits"), "\(restored)")
            }
        }
    }
}
#endif
