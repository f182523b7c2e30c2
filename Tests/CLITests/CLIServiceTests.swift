#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache serve` as a service: systemd's notifications over a datagram socket the test
/// binds (the protocol of sd_notify(3)), `--user` giving up root after binding, the unit in
/// contrib/ and the Grafana dashboard beside it.
@Suite(.timeLimit(.minutes(10)))
struct CLIServiceTests {
    let cli: CLIHarness

    init() throws {
        cli = try CLIHarness()
        cli.serve("/page", [("Cache-Control", "max-age=600")], body: "from the origin")
    }

    static var contrib: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../contrib").standardized
    }

    /// A unix datagram socket bound at a path or an abstract name, as systemd's notify socket.
    final class NotifySocket: @unchecked Sendable {
        let descriptor: Int32
        /// The value for `$NOTIFY_SOCKET`.
        let name: String

        init(name: String) throws {
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            self.name = name
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            var path = Array(name.utf8)
            if path.first == UInt8(ascii: "@") { path[0] = 0 }
            withUnsafeMutableBytes(of: &address.sun_path) { bytes in
                for (index, byte) in path.enumerated() { bytes[index] = byte }
            }
            let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + path.count
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(length)) }
            }
            guard descriptor >= 0, bound == 0 else { throw SystemError("bind \(name)", code: errno) }
        }

        deinit { close(descriptor) }

        /// The next datagram's lines, or nil after `seconds` without one.
        func receive(seconds: Double) -> [String]? {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(seconds * 1000)) == 1 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = recv(descriptor, &buffer, buffer.count, 0)
            guard count > 0 else { return nil }
            return String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n").map(String.init)
        }

        /// Datagrams until one holds `line` (those received before it included); nil when none
        /// does within `seconds`.
        func receive(until line: String, seconds: Double = 10) async -> [[String]]? {
            await offPool {
                var received: [[String]] = []
                let deadline = MonotonicClock.seconds() + seconds
                while MonotonicClock.seconds() < deadline {
                    guard let lines = receive(seconds: max(0.01, deadline - MonotonicClock.seconds())) else { continue }
                    received.append(lines)
                    if lines.contains(line) { return received }
                }
                return nil
            }
        }
    }

    func serve(notifying socket: NotifySocket, watchdogMicroseconds: Int? = nil) async throws -> ServeRun {
        var environment = ["NOTIFY_SOCKET": socket.name]
        if let watchdogMicroseconds { environment["WATCHDOG_USEC"] = String(watchdogMicroseconds) }
        return try await ServeRun.start(
            ["--origin", cli.url(""), "--listen", "127.0.0.1:0", "--memory-only"], in: cli.directory.path,
            environment: environment)
    }

    @Test(
        "sd_notify: READY=1 with MAINPID and STATUS once listening, RELOADING=1 with MONOTONIC_USEC then READY=1 around SIGHUP, STOPPING=1 on SIGTERM"
    )
    func notifiesTheServiceManager() async throws {
        let socket = try NotifySocket(name: cli.directory.path + "/notify")
        let proxy = try await serve(notifying: socket)
        let pid = proxy.run.processIdentifier
        let ready = try #require(await socket.receive(until: "READY=1"))
        #expect(ready.count == 1, "READY=1 comes first: \(ready)")
        #expect(ready[0].contains("MAINPID=\(pid)"), "\(ready)")
        #expect(
            ready[0].contains("STATUS=reverse proxy to \(cli.url("")), listening on http://127.0.0.1:\(proxy.port)"),
            "\(ready)")

        var before = timespec()
        clock_gettime(CLOCK_MONOTONIC, &before)
        proxy.run.signal(SIGHUP)
        let reloading = try #require(await socket.receive(until: "RELOADING=1"))
        #expect(reloading.count == 1, "nothing between: \(reloading)")
        let stamp = reloading.last?.first { $0.hasPrefix("MONOTONIC_USEC=") }.flatMap { Int64($0.dropFirst(15)) }
        let microseconds = Int64(before.tv_sec) * 1_000_000 + Int64(before.tv_nsec) / 1000
        #expect(stamp.map { $0 >= microseconds && $0 < microseconds + 10_000_000 } == true, "\(reloading)")
        #expect(await socket.receive(until: "READY=1")?.count == 1, "READY=1 right after the reload")

        proxy.run.signal(SIGTERM)
        let stopping = try #require(await socket.receive(until: "STOPPING=1"))
        #expect(stopping.count == 1 && stopping[0].contains { $0.hasPrefix("STATUS=") }, "\(stopping)")
        #expect(await proxy.run.exitStatus(seconds: 30) == 0)
    }

    /// A service manager may stop the proxy as soon as it is ready: SIGTERM was ignored from
    /// before the address was printed until the proxy began waiting for it, and lost there.
    @Test("SIGTERM sent as soon as serve printed its address stops it")
    func stoppedRightAfterStart() async throws {
        for _ in 0..<5 {
            let run = try PipedRun(["serve", "--origin", cli.url(""), "--listen", "127.0.0.1:0", "--memory-only"])
            let listening = await run.waitForOutput(seconds: 30) {
                String(decoding: $0, as: UTF8.self).contains("listening on")
            }
            #expect(listening, "serve did not print its address")
            run.signal(SIGTERM)
            let status = await run.exitStatus(seconds: 30)
            #expect(status != nil, "serve still ran 30 s after a SIGTERM sent as it printed its address")
        }
    }

    @Test("The watchdog: WATCHDOG=1 every half of WATCHDOG_USEC, nothing else in between")
    func feedsTheWatchdog() async throws {
        let socket = try NotifySocket(name: cli.directory.path + "/notify")
        let proxy = try await serve(notifying: socket, watchdogMicroseconds: 1_000_000)
        #expect(await socket.receive(until: "WATCHDOG=1") != nil)
        // Whatever queued up while the test was busy elsewhere, then a window of 2.2 s.
        let fed = await offPool {
            while socket.receive(seconds: 0) != nil {}
            var received: [[String]] = []
            let end = MonotonicClock.seconds() + 2.2
            while MonotonicClock.seconds() < end {
                if let lines = socket.receive(seconds: max(0.01, end - MonotonicClock.seconds())) {
                    received.append(lines)
                }
            }
            return received
        }
        #expect(fed.allSatisfy { $0 == ["WATCHDOG=1"] }, "\(fed)")
        // About 4, 0.5 s apart. A loaded machine delays some and then delivers them together
        // (each waits for every loop to take a turn), so a few more arrive in one window; a
        // flood would be many more.
        #expect((2...10).contains(fed.count), "about 4 keep-alives 0.5 s apart in 2.2 s: \(fed.count)")
        proxy.run.signal(SIGTERM)
        #expect(await proxy.run.exitStatus(seconds: 30) == 0)
    }

    @Test("An abstract NOTIFY_SOCKET name (@…) is reached; without NOTIFY_SOCKET nothing is sent and no watchdog runs")
    func abstractSocketName() async throws {
        let socket = try NotifySocket(name: "@httpcache-test-\(UUID().uuidString)")
        let proxy = try await serve(notifying: socket)
        #expect(await socket.receive(until: "READY=1") != nil)
        proxy.run.signal(SIGTERM)
        #expect(await socket.receive(until: "STOPPING=1") != nil)
        #expect(await proxy.run.exitStatus(seconds: 30) == 0)
    }

    // MARK: --user

    static let needsRoot = "needs root: --user changes users"

    /// A directory others may traverse (the tests' temporary directories are 0700), removed
    /// at the end.
    func withOpenDirectory(_ body: (String) async throws -> Void) async throws {
        let path = "/tmp/httpcache-user-test-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        chmod(path, 0o755)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await body(path)
    }

    /// `Uid:`, `Gid:` and `Groups:` of /proc/PID/status.
    func ids(of pid: Int32) throws -> [String: [String]] {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        var ids: [String: [String]] = [:]
        for line in status.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).map(String.init)
            if let name = fields.first, ["Uid:", "Gid:", "Groups:"].contains(name) {
                ids[name] = Array(fields.dropFirst())
            }
        }
        return ids
    }

    @Test(
        "--user nobody: the process runs as nobody (real, effective, saved, filesystem ids and groups) once listening; the cache directory it creates and the files it stores are nobody's",
        .enabled(if: geteuid() == 0, Comment(rawValue: needsRoot)))
    func dropsPrivilegesAfterBinding() async throws {
        let nobody = try #require(getpwnam("nobody")?.pointee)
        let (uid, gid) = (String(nobody.pw_uid), String(nobody.pw_gid))
        try await withOpenDirectory { directory in
            let cache = directory + "/cache"
            let proxy = try await ServeRun.start(
                ["--origin", cli.url(""), "--listen", "127.0.0.1:0", "--user", "nobody", "--cache-dir", cache],
                in: cli.directory.path)
            let ids = try ids(of: proxy.run.processIdentifier)
            #expect(ids["Uid:"] == [uid, uid, uid, uid], "\(ids)")
            #expect(ids["Gid:"] == [gid, gid, gid, gid], "\(ids)")
            #expect(ids["Groups:"]?.allSatisfy { $0 == gid } == true, "no supplementary group of root's: \(ids)")
            #expect(proxy.log.contains("running as nobody"), "\(proxy.log)")

            #expect(try await proxy.curl("/page", in: cli.directory.path).stdout == "from the origin")
            #expect(try await proxy.curl("/page", ["-D", "-"], in: cli.directory.path).stdout.contains("hit"))
            var owners: [String: uid_t] = [:]
            for name in try FileManager.default.subpathsOfDirectory(atPath: cache) {
                var status = stat()
                lstat(cache + "/" + name, &status)
                owners[name] = status.st_uid
            }
            var status = stat()
            lstat(cache, &status)
            #expect(status.st_uid == nobody.pw_uid && status.st_mode & 0o777 == 0o700)
            #expect(owners.keys.contains("index.sqlite"), "\(owners)")
            #expect(owners.values.allSatisfy { $0 == nobody.pw_uid }, "\(owners)")
            proxy.run.signal(SIGTERM)
            #expect(await proxy.run.exitStatus(seconds: 30) == 0)
        }
    }

    @Test(
        "--user with a cache directory that is someone else's: refused in one line saying what to run, before serving",
        .enabled(if: geteuid() == 0, Comment(rawValue: needsRoot)))
    func refusesACacheDirectoryOfAnotherUser() async throws {
        try await withOpenDirectory { directory in
            let cache = directory + "/root-owned"
            try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: false)
            let run = try await CLIProcess.run(
                [
                    "serve", "--origin", cli.url(""), "--listen", "127.0.0.1:0", "--user", "nobody", "--cache-dir",
                    cache,
                ],
                in: cli.directory.path)
            #expect(run.status == 1)
            #expect(run.stdout.isEmpty, "nothing served")
            #expect(run.stderrLines.count == 1, "\(run.stderr)")
            #expect(
                run.stderr.contains(
                    "the cache directory \(cache) belongs to uid 0, not to nobody (uid 65534) whom --user runs the proxy as; run chown -R nobody \(cache)"
                ), "\(run.stderr)")
        }
    }

    // MARK: contrib/

    @Test("contrib/httpcache.service has the keys a sandboxed notify service needs")
    func unitHasItsKeys() throws {
        let unit = try String(contentsOf: Self.contrib.appendingPathComponent("httpcache.service"), encoding: .utf8)
        for key in [
            "Type=notify", "WatchdogSec=", "ExecReload=/bin/kill -HUP $MAINPID", "DynamicUser=yes",
            "StateDirectory=httpcache", "ProtectSystem=strict", "NoNewPrivileges=yes", "PrivateTmp=yes",
            "ProtectHome=yes", "RestrictAddressFamilies=", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
            "AmbientCapabilities=CAP_NET_BIND_SERVICE", "LimitNOFILE=", "ExecStart=",
        ] {
            #expect(unit.split(separator: "\n").contains { $0.hasPrefix(key) }, "the unit has \(key)")
        }
        #expect(unit.contains("--config /etc/httpcache/httpcache.conf --cache-dir ${STATE_DIRECTORY}"))
    }

    static let analyze = "/usr/bin/systemd-analyze"

    @Test(
        "contrib/httpcache.service: systemd-analyze verify finds nothing (the binary's path pointed at the one built)",
        .enabled(
            if: FileManager.default.isExecutableFile(atPath: analyze),
            Comment(rawValue: "needs systemd-analyze: apt-get install -y systemd")))
    func unitVerifies() async throws {
        let unit = try String(contentsOf: Self.contrib.appendingPathComponent("httpcache.service"), encoding: .utf8)
        let copy = cli.directory.path + "/httpcache.service"
        try unit.replacingOccurrences(of: "/usr/local/bin/httpcache", with: try BuiltExecutable.path("httpcache"))
            .write(toFile: copy, atomically: true, encoding: .utf8)
        let run = try await CLIProcess.run(executable: Self.analyze, ["verify", copy], in: cli.directory.path)
        #expect(run.status == 0 && run.stderr.isEmpty && run.stdout.isEmpty, "\(run.stdout)\(run.stderr)")
    }

    @Test("contrib/grafana-dashboard.json names only metrics a proxy with a Redis tier exports, and shows each of them")
    func dashboardMetricsAreExported() async throws {
        let data = try Data(contentsOf: Self.contrib.appendingPathComponent("grafana-dashboard.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        let expressions = panels.flatMap {
            ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String }
        }
        let named = Set(
            expressions.flatMap { expression in
                expression.matches(of: /httpcache_[a-z0-9_]+/).map { String($0.output) }
            })
        #expect(named.count >= 20, "\(named)")

        let redis = try await offPool { try RedisServer.shared().url }
        let proxy = try await ServeRun.start(
            [
                "--origin", cli.url(""), "--listen", "127.0.0.1:0", "--memory-only", "--redis", redis, "--redis-prefix",
                "dashboard-\(UUID().uuidString):",
            ], in: cli.directory.path)
        _ = try await proxy.curl("/page", in: cli.directory.path)
        let text = try await proxy.curl("/_httpcache/metrics", in: cli.directory.path).stdout
        var exported: Set<String> = []
        for line in text.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let fields = line.split(separator: " ")
            guard fields.count == 4 else { continue }
            let name = String(fields[2])
            exported.insert(name)
            if fields[3] == "histogram" { exported.formUnion(["_bucket", "_sum", "_count"].map { name + $0 }) }
        }
        #expect(exported.count >= 20, "\(text)")
        #expect(named.subtracting(exported).isEmpty, "in the dashboard, not exported: \(named.subtracting(exported))")
        // Every exported figure has a panel (a histogram through its buckets).
        let shown = named.map { $0.replacing(/_(bucket|sum|count)$/, with: "") }
        #expect(
            Set(exported.filter { !$0.hasSuffix("_bucket") && !$0.hasSuffix("_sum") && !$0.hasSuffix("_count") })
                .subtracting(shown).isEmpty,
            "exported, not in the dashboard")
        proxy.run.signal(SIGTERM)
        #expect(await proxy.run.exitStatus(seconds: 30) == 0)
    }
}
#endif
