import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `httpcache get -C -o FILE URL` run as a process: resumable downloads.
@Suite(.timeLimit(.minutes(10)))
struct CLIResumeTests {
    static func size(_ path: String) -> Int64? {
        var status = stat()
        return stat(path, &status) == 0 ? Int64(status.st_size) : nil
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    @Test("-C without -o FILE, or with a method, a body or a Range of its own, is a usage error")
    func continueNeedsAnOutputFile() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let url = cli.url("/file")
            let cases: [([String], String)] = [
                (["get", "-C", url], "-C needs -o FILE"),
                (["get", "-C", "-o", "-", url], "-C needs -o FILE"),
                (["get", "-C", "-o", "f", "-X", "POST", url], "-C downloads with GET"),
                (["get", "-C", "-o", "f", "-d", "x", url], "-C downloads with GET"),
                (["get", "-C", "-o", "f", "-H", "Range: bytes=0-1", url], "-C sets Range and If-Range itself"),
            ]
            for (arguments, message) in cases {
                let run = try await cli.run(arguments)
                #expect(run.status == 2, "\(arguments): \(run.stderr)")
                #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
                #expect(run.stderr.contains("httpcache get --help"))
            }
            #expect(cli.origin.count("/file") == 0)
            let help = try await cli.run(["get", "--help"])
            #expect(help.status == 0)
            #expect(help.stdout.contains("-C, --continue"))
            #expect(help.stdout.contains("httpcache get -C -o big.iso"))
        }
    }

    @Test("-C follows a symbolic link (the link stays) and refuses a FIFO, which the partial file could never replace")
    func continueFollowsALinkAndRefusesAFIFO() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let resource = LoopbackOrigin.GeneratedResource(length: 100_000, seed: 5, etag: "\"l1\"")
            cli.origin.route("/file") { request in resource.response(to: request) }
            let directory = cli.directory.path
            try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: "target.bin")
            let linked = try await cli.run(["get", "-C", "-o", directory + "/link", cli.url("/file")])
            #expect(linked.status == 0, "\(linked.stderr)")
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: directory + "/link") == "target.bin")
            #expect(FileManager.default.contents(atPath: directory + "/target.bin") == Data(resource.bytes))

            let fifo = directory + "/pipe"
            try #require(mkfifo(fifo, 0o600) == 0)
            let refused = try await cli.run(["get", "-C", "-o", fifo, cli.url("/file")])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("not a regular file"), "\(refused.stderr)")
            var info = stat()
            #expect(lstat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO)
            #expect(!Self.exists(fifo + ".partial"))
            #expect(cli.origin.count("/file") == 1)
        }
    }

    @Test("A transfer cut off twice is resumed within one run; --json reports the last response")
    func cutsAreResumedWithinOneRun() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let resource = LoopbackOrigin.GeneratedResource(length: 3 << 20, seed: 21, etag: "\"c1\"")
            let served = Locked(0)
            cli.origin.route("/file") { request in
                let number = served.withLock { count -> Int in
                    count += 1
                    return count
                }
                return resource.response(to: request, cutAfterBodyBytes: number <= 2 ? number * 500_000 : nil)
            }
            let file = cli.directory.path + "/file.bin"
            let run = try await cli.run(["get", "-C", "-o", file, cli.url("/file"), "--json", "-v"])
            #expect(run.status == 0, "\(run.stderr)")
            let object = try run.jsonObject()
            #expect(object["status"] as? Int == 206)
            #expect(object["bodyBytes"] as? Int == 3 << 20)
            #expect(object["file"] as? String == file)
            #expect(run.stderr.contains("2 resumed, 0 restarted, 3 requests"), "\(run.stderr)")
            #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: file, seed: 21, length: 3 << 20) == nil)
            #expect(!Self.exists(file + ".partial") && !Self.exists(file + ".partial.json"))
            let requests = cli.origin.requests(to: "/file")
            #expect(requests.map { $0.header("Range") } == [nil, "bytes=500000-", "bytes=1500000-"])
            #expect(requests.map { $0.header("If-Range") } == [nil, "\"c1\"", "\"c1\""])
        }
    }

    @Test("Failed runs keep the partial file (exit 1 cut off, exit 7 unreachable); the next run resumes it")
    func failedRunsKeepThePartialFile() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let resource = LoopbackOrigin.GeneratedResource(length: 2 << 20, seed: 22, etag: "\"u1\"")
            let served = Locked(0)
            cli.origin.route("/file") { request in
                let number = served.withLock { count -> Int in
                    count += 1
                    return count
                }
                // 700,000 bytes, then every retry is cut before its first body byte.
                return resource.response(to: request, cutAfterBodyBytes: number == 1 ? 700_000 : 0)
            }
            let file = cli.directory.path + "/file.bin"
            let cut = try await cli.run(["get", "-C", "-o", file, cli.url("/file")])
            #expect(cut.status == 1, "\(cut.stderr)")
            #expect(cut.stderr.contains("was cut off"), "\(cut.stderr)")
            #expect(cut.stderr.contains("run the same command again to resume"), "\(cut.stderr)")
            #expect(cli.origin.count("/file") == 6)  // the first request and 5 retries without progress
            #expect(Self.size(file + ".partial") == 700_000)
            #expect(!Self.exists(file))

            cli.origin.stop()
            let unreachable = try await cli.run(["get", "-C", "-o", file, cli.url("/file")])
            #expect(unreachable.status == 7, "\(unreachable.stderr)")
            #expect(unreachable.stderr.contains("could not reach 127.0.0.1"), "\(unreachable.stderr)")
            #expect(unreachable.stderr.contains("run the same command again to resume"), "\(unreachable.stderr)")
            #expect(Self.size(file + ".partial") == 700_000)

            cli.origin.route("/file") { request in resource.response(to: request) }
            try cli.origin.restart()
            let resumed = try await cli.run(["get", "-C", "-o", file, cli.url("/file")])
            #expect(resumed.status == 0, "\(resumed.stderr)")
            #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: file, seed: 22, length: 2 << 20) == nil)
            #expect(cli.origin.count("/file") == 7)
            let last = try #require(cli.origin.requests(to: "/file").last)
            #expect(last.header("Range") == "bytes=700000-")
            #expect(last.header("If-Range") == "\"u1\"")
        }
    }

    /// util-linux's `script` gives the child a terminal (Debian's essential bsdutils package).
    @Test(
        "On a terminal the progress bar shows where the download resumed",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func progressBarShowsTheResumption() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let length: Int64 = 4 << 20
            let resource = LoopbackOrigin.GeneratedResource(length: length, seed: 23, etag: "\"p1\"")
            cli.origin.route("/big") { request in resource.response(to: request) }
            let file = cli.directory.path + "/big.bin"
            // What an earlier run killed half-way leaves: half the bytes and the record.
            try Data(LoopbackOrigin.GeneratedBody.bytes(seed: 23, count: 2 << 20)).write(
                to: URL(fileURLWithPath: file + ".partial"))
            let record =
                #"{"version":1,"url":"\#(cli.url("/big"))","etag":"\"p1\"","validator":"\"p1\"","expectedLength":\#(length)}"#
            try Data(record.utf8).write(to: URL(fileURLWithPath: file + ".partial.json"))
            let command = [
                try BuiltExecutable.path("httpcache"), "get", "-C", "-o", file, cli.url("/big"), "--cache-dir",
                cli.cacheDirectory,
            ]
            .map { "'\($0)'" }.joined(separator: " ")
            let run = try await CLIProcess.run(
                executable: "/usr/bin/script", ["-qec", command, "/dev/null"], in: cli.directory.path)
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            #expect(run.stdout.contains("of 4.0 MiB"), "no progress bar in \(run.stdout.debugDescription)")
            #expect(run.stdout.contains("(resumed at 2.0 MiB)"), "\(run.stdout.debugDescription)")
            #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: file, seed: 23, length: length) == nil)
            #expect(cli.origin.requests(to: "/big").map { $0.header("Range") } == ["bytes=2097152-"])
        }
    }

    /// The issue's proof: 1 GiB generated by the origin (never stored anywhere but the output
    /// file), the client killed with SIGKILL past 200 MB, then the same command again.
    @Test("A 1 GiB download resumes after the client is killed with SIGKILL")
    func gigabyteResumesAfterSIGKILL() async throws {
        try await offPool {
            let clock = ContinuousClock()
            let started = clock.now
            let cli = try CLIHarness()
            let length: Int64 = 1 << 30
            let seed: UInt64 = 0x5EED
            let resource = LoopbackOrigin.GeneratedResource(length: length, seed: seed, etag: "\"gib-1\"")
            cli.origin.route("/big") { request in resource.response(to: request) }
            let file = cli.directory.path + "/big.bin"
            let partial = file + ".partial"
            let arguments = ["get", "--cache-dir", cli.cacheDirectory, "-C", "-o", file, cli.url("/big")]

            // First run: killed once the partial file passes 200 MB.
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: try BuiltExecutable.path("httpcache"))
            process.arguments = arguments
            var environment = ProcessInfo.processInfo.environment.filter { !$0.key.lowercased().hasSuffix("_proxy") }
            environment["no_proxy"] = "127.0.0.1,localhost"
            process.environment = environment
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = FileHandle.nullDevice
            let stderrPath = cli.directory.path + "/first-stderr"
            _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
            try process.run()
            let threshold: Int64 = 200_000_000
            let deadline = clock.now + .seconds(180)
            while (Self.size(partial) ?? 0) <= threshold {
                guard process.isRunning, clock.now < deadline else {
                    process.send(signal: SIGKILL)
                    let stderr = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
                    Issue.record(
                        "the first run did not pass \(threshold) bytes (\(Self.size(partial) ?? 0)): \(stderr)")
                    return
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(process.send(signal: SIGKILL))
            while process.isRunning { try await Task.sleep(for: .milliseconds(5)) }
            #expect(process.terminationReason == .uncaughtSignal)
            #expect(process.terminationStatus == SIGKILL)
            let kept = try #require(Self.size(partial))
            let killedAt = clock.now
            #expect(kept > threshold && kept < length, "kept \(kept)")
            #expect(Self.exists(partial + ".json"))
            #expect(!Self.exists(file))

            // Second run: the same command resumes at the partial file's size.
            let second = try await CLIProcess.run(
                arguments, environment: ["HTTPCACHE_DIR": cli.cacheDirectory], in: cli.directory.path, timeout: 300)
            let finishedAt = clock.now
            #expect(second.status == 0, "\(second.stderr)")
            #expect(Self.size(file) == length)
            #expect(!Self.exists(partial) && !Self.exists(partial + ".json"))
            let requests = cli.origin.requests(to: "/big")
            #expect(requests.count == 2)
            #expect(requests.first?.header("Range") == nil)
            #expect(requests.last?.header("Range") == "bytes=\(kept)-")
            #expect(requests.last?.header("If-Range") == "\"gib-1\"")

            // The content, compared with the generator a mebibyte at a time.
            #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: file, seed: seed, length: length) == nil)
            let verifiedAt = clock.now
            print(
                "CLIResumeTests: 1 GiB: killed at \(kept) bytes after \(killedAt - started), second run "
                    + "\(finishedAt - killedAt), verification \(verifiedAt - finishedAt), total \(verifiedAt - started)"
            )
        }
    }
}
