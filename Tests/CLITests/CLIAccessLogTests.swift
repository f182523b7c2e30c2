#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache serve --access-log FILE --access-log-format …` as operators run it: curl as the
/// client, Python's `json` as the reader of the JSON lines, and logrotate's way of rotating
/// (rename the file, then `SIGUSR1` or `SIGHUP`) while requests keep coming.
@Suite(.timeLimit(.minutes(5)))
struct CLIAccessLogTests {
    /// The TLS suite's harness: a loopback origin, `serve` with a certificate, curl.
    let https: CLIServeHTTPSTests
    var directory: String { https.cli.directory.path }

    init() throws {
        https = try CLIServeHTTPSTests()
    }

    /// The lines of `path` (none when it does not exist).
    static func lines(_ path: String) -> [String] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Runs Python's `json.loads` over every line of the files; the objects, re-encoded with
    /// sorted keys, and what Python said when a line did not parse.
    func pythonParsed(_ paths: [String]) async throws -> (objects: [[String: Any]], complaint: String) {
        let script =
            "import sys, json\nfor path in sys.argv[1:]:\n    for line in open(path, encoding='utf-8'):\n"
            + "        print(json.dumps(json.loads(line), sort_keys=True))\n"
        let run = try await https.tool("/usr/bin/python3", ["-c", script] + paths)
        let objects = try run.stdout.split(separator: "\n").map { line in
            try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        return (objects, run.status == 0 ? "" : run.stderr)
    }

    @Test(
        "--access-log-format json: one object per request, over http, https and HTTP/2, each line read by Python's json.loads with its fields"
    )
    func jsonLinesParsedByPython() async throws {
        try await offPool {
            https.origin.route("/j") { _ in .init(headers: [("Cache-Control", "max-age=600")], body: "twelve bytes") }
            let log = directory + "/access.json"
            let proxy = try await https.serve(
                [https.certificates.localhost], ["--access-log", log, "--access-log-format", "json"])
            let plain = try await https.tool(
                "/usr/bin/curl",
                ["-sS", "-A", "say \"hi\" \\ now", "-e", "http://a.test/?q=1", "http://127.0.0.1:\(proxy.port)/j"])
            #expect(plain.status == 0 && plain.stdout == "twelve bytes", "\(plain.stderr)")
            let h2 = try await https.tool(
                "/usr/bin/curl",
                [
                    "-sS", "--http2", "--cacert", https.certificates.caFile, "--resolve",
                    "localhost:\(proxy.tlsPort):127.0.0.1", "https://localhost:\(proxy.tlsPort)/j",
                ])
            #expect(h2.status == 0, "\(h2.stderr)")
            let lines = Self.lines(log)
            #expect(lines.count == 2, "\(lines)")
            let (objects, complaint) = try await pythonParsed([log])
            #expect(complaint.isEmpty, "\(complaint)")
            try #require(objects.count == 2)
            let (miss, hit) = (objects[0], objects[1])
            #expect(miss["client"] as? String == "127.0.0.1")
            #expect(miss["method"] as? String == "GET" && miss["target"] as? String == "/j")
            #expect(miss["protocol"] as? String == "HTTP/1.1" && miss["status"] as? Int == 200)
            #expect(miss["bytes"] as? Int == 12 && miss["completed"] as? Bool == true)
            #expect(miss["user_agent"] as? String == "say \"hi\" \\ now")
            #expect(miss["referer"] as? String == "http://a.test/?q=1")
            #expect((miss["cache_status"] as? String)?.contains("fwd=uri-miss") == true)
            #expect((miss["origin_time"] as? Double).map { $0 >= 0 } == true, "\(miss)")
            #expect((miss["duration"] as? Double).map { $0 >= 0 && $0 < 10 } == true, "\(miss)")
            #expect((miss["time"] as? String)?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil)
            #expect(hit["protocol"] as? String == "HTTP/2+TLS" && hit["bytes"] as? Int == 12)
            #expect(hit["origin_time"] is NSNull && (hit["cache_status"] as? String)?.contains("hit") == true)
        }
    }

    @Test("--access-log-format combined: NCSA combined lines with the real client address and Cache-Status appended")
    func combinedLines() async throws {
        try await offPool {
            https.origin.route("/c") { _ in .init(body: "c") }
            let log = directory + "/access.log"
            let proxy = try await https.serve(
                [https.certificates.localhost], ["--access-log", log, "--access-log-format", "combined"])
            let run = try await https.tool(
                "/usr/bin/curl", ["-sS", "-A", "curl-test", "http://127.0.0.1:\(proxy.port)/c"])
            #expect(run.status == 0, "\(run.stderr)")
            let line = try #require(Self.lines(log).first)
            let pattern =
                /127\.0\.0\.1 - - \[\d\d\/[A-Z][a-z]{2}\/\d{4}:\d\d:\d\d:\d\d \+0000\] "GET \/c HTTP\/1\.1" 200 1 "-" "curl-test" "httpcache; fwd=uri-miss; fwd-status=200; stored"/
            #expect(line.wholeMatch(of: pattern) != nil, "\(line)")
        }
    }

    @Test("A format that does not exist, or a format without a file, is a usage error that says what to give")
    func badFormat() async throws {
        let unknown = try await https.cli.run([
            "serve", "--origin", "http://127.0.0.1:9", "--access-log-format", "xml", "--access-log", "-",
        ])
        #expect(unknown.status != 0 && unknown.stderr.contains("--access-log-format needs default, combined or json"))
        let alone = try await https.cli.run(["serve", "--origin", "http://127.0.0.1:9", "--access-log-format", "json"])
        #expect(alone.status != 0 && alone.stderr.contains("--access-log-format goes with --access-log FILE"))
    }

    @Test(
        "Rotation as logrotate does it: rename the file, signal; new lines go to a new file at the path, none lost or torn",
        arguments: [SIGUSR1, SIGHUP])
    func reopenOnSignal(signal: Int32) async throws {
        try await offPool {
            https.origin.setDefault { _ in .init(body: "r") }
            let log = directory + "/rotate.log"
            let proxy = try await https.serve(
                [https.certificates.localhost], ["--access-log", log, "--access-log-format", "json"])
            let count = 400
            let urls = (0..<count).map { "http://127.0.0.1:\(proxy.port)/r\($0)" }
            async let requests = https.tool(
                "/usr/bin/curl", ["-sS", "-o", "/dev/null"] + urls.flatMap { [$0, "-o", "/dev/null"] })
            // Rotate while the requests go on.
            let deadline = MonotonicClock.seconds() + 20
            while Self.lines(log).count < 50 && MonotonicClock.seconds() < deadline { usleep(5_000) }
            try FileManager.default.moveItem(atPath: log, toPath: log + ".1")
            proxy.run.signal(signal)
            let run = try await requests
            #expect(run.status == 0, "\(run.stderr)")
            // The signal is handled on a queue of its own: the new file appears once it was.
            while !FileManager.default.fileExists(atPath: log) && MonotonicClock.seconds() < deadline { usleep(5_000) }
            let last = try await https.tool(
                "/usr/bin/curl", ["-sS", "-o", "/dev/null", "http://127.0.0.1:\(proxy.port)/after"])
            #expect(last.status == 0)
            let (old, new) = (Self.lines(log + ".1"), Self.lines(log))
            #expect(old.count >= 50, "\(old.count) lines before the rotation")
            #expect(
                new.last?.contains("\"target\":\"/after\"") == true, "the line after the rotation went to the new file")
            #expect(old.count + new.count == count + 1, "\(old.count) + \(new.count) lines for \(count + 1) requests")
            let (objects, complaint) = try await pythonParsed([log + ".1", log])
            #expect(complaint.isEmpty, "a torn line: \(complaint)")
            let targets = Set(objects.compactMap { $0["target"] as? String })
            #expect(targets.count == count + 1, "every request has its line, once")
            #expect(proxy.run.isRunning, "the signal did not stop the proxy")
        }
    }
}
#endif
