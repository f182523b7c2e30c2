import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache get` run as a process against a loopback origin.
@Suite(.timeLimit(.minutes(10)))
struct CLIGetTests {
    /// Checks the `--json` fields every outcome has.
    private func checkJSON(
        _ run: CLIRun, outcome: String, body: String?, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [String: Any] {
        #expect(run.status == 0, "stderr: \(run.stderr)", sourceLocation: sourceLocation)
        let object = try run.jsonObject(sourceLocation: sourceLocation)
        #expect(object["outcome"] as? String == outcome, "\(object)", sourceLocation: sourceLocation)
        #expect(object["status"] as? Int == 200, sourceLocation: sourceLocation)
        let cacheStatus = try #require(object["cacheStatus"] as? String, sourceLocation: sourceLocation)
        #expect(cacheStatus.hasPrefix("HTTPCache"), sourceLocation: sourceLocation)
        #expect(cliHeader(object, "Cache-Status") == cacheStatus, sourceLocation: sourceLocation)
        if let body {
            #expect(object["body"] as? String == body, sourceLocation: sourceLocation)
            #expect(object["bodyBytes"] as? Int == body.utf8.count, sourceLocation: sourceLocation)
        }
        return object
    }

    @Test func outcomesMissHitRevalidatedStaleAsJSON() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serveValidated("/fresh", cacheControl: "max-age=86400", etag: "\"f1\"", body: "fresh body")
            // max-age=0: stored, and stale at once, so the next request revalidates it.
            cli.serveValidated("/soon", cacheControl: "max-age=0", etag: "\"s1\"", body: "soon body")

            let miss = try checkJSON(
                try await cli.run(["get", cli.url("/fresh"), "--json"]), outcome: "miss", body: "fresh body")
            #expect((miss["cacheStatus"] as? String)?.contains("fwd=uri-miss") == true)
            #expect((miss["cacheStatus"] as? String)?.contains("stored") == true)
            let hit = try checkJSON(
                try await cli.run(["get", cli.url("/fresh"), "--json"]), outcome: "hit", body: "fresh body")
            #expect((hit["cacheStatus"] as? String)?.contains("; hit") == true)
            #expect(cliHeader(hit, "Age") != nil)
            #expect(cli.origin.count("/fresh") == 1)

            _ = try checkJSON(
                try await cli.run(["get", cli.url("/soon"), "--json"]), outcome: "miss", body: "soon body")
            let revalidated = try checkJSON(
                try await cli.run(["get", cli.url("/soon"), "--json"]), outcome: "revalidated", body: "soon body")
            #expect((revalidated["cacheStatus"] as? String)?.contains("fwd-status=304") == true)
            #expect(cli.origin.count("/soon") == 2)
            #expect(cli.origin.requests(to: "/soon").last?.header("If-None-Match") == "\"s1\"")

            cli.origin.stop()
            let stale = try checkJSON(
                try await cli.run(["get", cli.url("/soon"), "--json"]), outcome: "stale", body: "soon body")
            #expect((stale["cacheStatus"] as? String)?.contains("detail=disconnected") == true)
            #expect((stale["reasons"] as? [String])?.contains { $0.contains("could not be reached") } == true)
        }
    }

    @Test("a URL given with a space keeps its own escapes: only what a URL cannot hold is encoded (RFC 3986 §2.1)")
    func invalidCharactersEncodedEscapesKept() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serveValidated("/p", cacheControl: "max-age=60", etag: "\"p\"", body: "p")
            let result = try await cli.run(["get", cli.url("/p") + "?q=1%20 x&r=%zz|"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(cli.origin.requests(to: "/p").map(\.target) == ["/p?q=1%20%20x&r=%25zz%7C"])
        }
    }

    @Test func staleWhileRevalidateFinishesBeforeTheProcessExits() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.origin.route("/swr") { request in
                let headers = [("Cache-Control", "max-age=0, stale-while-revalidate=86400"), ("ETag", "\"w\"")]
                if request.header("If-None-Match") == "\"w\"" {
                    return LoopbackOrigin.Response(status: 304, headers: headers, delay: 0.3)
                }
                return LoopbackOrigin.Response(headers: headers, body: "swr")
            }
            _ = try await cli.run(["get", cli.url("/swr")])
            let stale = try await cli.run(["get", cli.url("/swr"), "--json"]).jsonObject()
            #expect(stale["outcome"] as? String == "stale")
            #expect((stale["cacheStatus"] as? String)?.contains("detail=stale-while-revalidate") == true)
            // The background revalidation was sent, and answered, before the process exited.
            #expect(cli.origin.count("/swr") == 2)
            #expect(cli.origin.requests(to: "/swr").last?.header("If-None-Match") == "\"w\"")
        }
    }

    @Test func bypassAsJSONForPOST() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.origin.route("/submit") { request in
                LoopbackOrigin.Response(
                    headers: [("Content-Type", "text/plain")], body: "got \(request.body.count) bytes")
            }
            let run = try await cli.run(["get", cli.url("/submit"), "-X", "POST", "-d", "hello", "--json"])
            let object = try checkJSON(run, outcome: "bypass", body: "got 5 bytes")
            #expect((object["cacheStatus"] as? String)?.contains("fwd=method") == true)
            #expect(cli.origin.requests(to: "/submit").first?.method == "POST")
            #expect(cli.origin.requests(to: "/submit").first?.body == Array("hello".utf8))
        }
    }

    @Test func dataFromAFileAndVerboseReport() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.origin.route("/echo") { request in
                LoopbackOrigin.Response(headers: [("Content-Type", "text/plain")], body: request.body)
            }
            let payload = cli.directory.path + "/payload.txt"
            #expect(FileManager.default.createFile(atPath: payload, contents: Data("from a file".utf8)))
            let run = try await cli.run([
                "get", cli.url("/echo"), "-d", "@" + payload, "-H", "Content-Type: text/plain", "-v",
            ])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout == "from a file")
            #expect(cli.origin.requests(to: "/echo").first?.method == "POST")
            #expect(cli.origin.requests(to: "/echo").first?.header("Content-Type") == "text/plain")
            #expect(run.stderr.contains("httpcache: POST \(cli.url("/echo")) → 200 bypass in "))
            #expect(run.stderr.contains("httpcache: Cache-Status: HTTPCache; fwd=method; fwd-status=200"))

            let missing = try await cli.run(["get", cli.url("/echo"), "-d", "@" + cli.directory.path + "/absent"])
            #expect(missing.status == 2)
            #expect(missing.stderr.contains("cannot read the file"))
        }
    }

    @Test func timeoutGivesUpOnASlowOriginWithExitSeven() async throws {
        try await offPool {
            let cli = try CLIHarness()
            // The origin answers after 120 s; giving up well before proves the timeout, with room
            // for a loaded machine's process start-up (over 15 s once in CI, the full suite running).
            cli.origin.route("/slow") { _ in LoopbackOrigin.Response(body: "late", delay: 120) }
            let clock = ContinuousClock()
            let started = clock.now
            let run = try await cli.run(["get", cli.url("/slow"), "--timeout", "0.5"])
            #expect(run.status == 7, "\(run.stderr)")
            #expect(run.stderrLines.count == 1)
            #expect(clock.now - started < .seconds(60))
        }
    }

    @Test func jsonLeavesOutBinaryAndLargeBodies() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.origin.route("/binary") { _ in
                LoopbackOrigin.Response(
                    headers: [("Content-Type", "application/octet-stream"), ("Cache-Control", "max-age=60")],
                    body: [0, 1, 2, 255])
            }
            cli.serve("/large", [("Content-Type", "text/plain")], body: String(repeating: "a", count: 70_000))
            let binary = try await cli.run(["get", cli.url("/binary"), "--json"]).jsonObject()
            #expect(binary["body"] == nil)
            #expect(binary["bodyBytes"] as? Int == 4)
            let large = try await cli.run(["get", cli.url("/large"), "--json"]).jsonObject()
            #expect(large["body"] == nil)
            #expect(large["bodyBytes"] as? Int == 70_000)
        }
    }

    /// Each run is a new process, so the variants come from the disk index (RFC 9111 §4.1:
    /// an absent field matches only an absent one, so absent and empty are two variants).
    @Test func absentAndEmptyVaryFieldAreTwoStoredVariants() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve(
                "/flag", [("Cache-Control", "max-age=86400"), ("Vary", "X-Flag"), ("Content-Type", "text/plain")])
            var outcomes: [String] = []
            for flag in [false, true, false, true] {
                let run = try await cli.run(["get", cli.url("/flag"), "--json"] + (flag ? ["-H", "X-Flag:"] : []))
                outcomes.append(try run.jsonObject()["outcome"] as? String ?? "")
            }
            #expect(outcomes == ["miss", "miss", "hit", "hit"])
            #expect(cli.origin.count("/flag") == 2)
        }
    }

    @Test func jsonIncludesABodyOnlyUnder64KiB() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/under", [("Content-Type", "text/plain")], body: String(repeating: "u", count: 65_535))
            cli.serve("/exact", [("Content-Type", "text/plain")], body: String(repeating: "e", count: 65_536))
            let under = try await cli.run(["get", cli.url("/under"), "--json"]).jsonObject()
            #expect((under["body"] as? String)?.utf8.count == 65_535)
            // Exactly 64 KiB is not under 64 KiB, as --help and the README say.
            let exact = try await cli.run(["get", cli.url("/exact"), "--json"]).jsonObject()
            #expect(exact["body"] == nil)
            #expect(exact["bodyBytes"] as? Int == 65_536)
        }
    }

    /// Every output mode on a stale-while-revalidate hit with standard output a pipe (`| jq`,
    /// `$(…)`): the answer is there while the origin still holds the background revalidation,
    /// and the process exits only once it is answered, with the store updated (RFC 5861 §3).
    @Test(arguments: ["--json", "-i", "body", "-o"])
    func answerReachesAPipeBeforeTheBackgroundRevalidationEnds(_ mode: String) async throws {
        try await offPool {
            let cli = try CLIHarness()
            let released = DispatchSemaphore(value: 0)
            cli.origin.route("/swr") { request in
                if request.header("If-None-Match") == "\"w\"" {
                    // Held until the test has read the answer (30 s at most, well past its deadline).
                    _ = released.wait(timeout: .now() + 30)
                    return LoopbackOrigin.Response(
                        status: 304, headers: [("Cache-Control", "max-age=86400"), ("ETag", "\"w\"")])
                }
                return LoopbackOrigin.Response(
                    headers: [
                        ("Cache-Control", "max-age=0, stale-while-revalidate=86400"), ("ETag", "\"w\""),
                        ("Content-Type", "text/plain"),
                    ], body: "swr body")
            }
            _ = try await cli.run(["get", cli.url("/swr")])

            let file = cli.directory.path + "/out.txt"
            let options = ["--json": ["--json"], "-i": ["-i"], "-o": ["-o", file]][mode] ?? []
            let run = try PipedRun(["get", "--cache-dir", cli.cacheDirectory, cli.url("/swr")] + options)
            defer { released.signal() }
            let answered = await run.waitForOutput(seconds: 15) { stdout in
                let text = String(decoding: stdout, as: UTF8.self)
                switch mode {
                case "--json": return text.hasSuffix("}\n") && text.contains("\"outcome\":\"stale\"")
                case "-i": return text.contains("detail=stale-while-revalidate") && text.hasSuffix("swr body")
                case "-o": return FileManager.default.contents(atPath: file) == Data("swr body".utf8)
                default: return text == "swr body"
                }
            }
            #expect(answered, "stdout so far: \(String(decoding: run.stdout, as: UTF8.self))")
            #expect(run.isRunning, "the process must still wait for the revalidation")
            released.signal()
            #expect(await run.exitStatus(seconds: 30) == 0)
            #expect(cli.origin.requests(to: "/swr").last?.header("If-None-Match") == "\"w\"")
            // The 304 (max-age=86400) reached the store before the process exited.
            let next = try await cli.run(["get", cli.url("/swr"), "--json"]).jsonObject()
            #expect(next["outcome"] as? String == "hit")
        }
    }

    @Test func includePrintsStatusLineAndFieldsBeforeTheBody() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/page", [("Cache-Control", "max-age=86400"), ("X-Origin", "loopback")], body: "page body")
            let run = try await cli.run(["get", cli.url("/page"), "-i"])
            #expect(run.status == 0)
            let parts = run.stdout.components(separatedBy: "\n\n")
            let head = try #require(parts.first)
            #expect(head.hasPrefix("HTTP/1.1 200 OK\n"))
            #expect(head.contains("\nCache-Status: HTTPCache; fwd=uri-miss; fwd-status=200; stored"))
            #expect(head.contains("\nX-Origin: loopback"))
            #expect(head.contains("\nCache-Control: max-age=86400"))
            #expect(parts.dropFirst().joined(separator: "\n\n") == "page body")

            let again = try await cli.run(["get", cli.url("/page"), "-i"])
            #expect(again.stdout.contains("\nCache-Status: HTTPCache; hit; ttl="))
            #expect(again.stdout.hasSuffix("\n\npage body"))
        }
    }

    @Test func outputFileGetsTheBodyAndJSONGoesToStdout() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let body = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            cli.origin.route("/data.bin") { _ in
                LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=86400")], body: body)
            }
            let file = cli.directory.path + "/out.bin"
            let run = try await cli.run(["get", cli.url("/data.bin"), "-o", file, "--json"])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(FileManager.default.contents(atPath: file) == Data(body))
            let object = try run.jsonObject()
            #expect(object["file"] as? String == file)
            #expect(object["bodyBytes"] as? Int == body.count)
            #expect(object["body"] == nil)

            // From the cache this time, to another file, without --json: nothing on stdout.
            let second = cli.directory.path + "/again.bin"
            let hit = try await cli.run(["get", cli.url("/data.bin"), "-o", second])
            #expect(hit.status == 0)
            #expect(hit.stdoutData.isEmpty)
            #expect(FileManager.default.contents(atPath: second) == Data(body))
            #expect(cli.origin.count("/data.bin") == 1)
            // No temporary file is left beside them.
            let names = try FileManager.default.contentsOfDirectory(atPath: cli.directory.path)
            #expect(!names.contains { $0.hasSuffix(".part") })
        }
    }

    @Test func offlineMissPrintsTheCaches504AndExitsZero() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/never", [("Cache-Control", "max-age=60")])
            let run = try await cli.run(["get", cli.url("/never"), "--offline", "-i"])
            #expect(run.status == 0)
            #expect(run.stdout.hasPrefix("HTTP/1.1 504 Gateway Timeout\n"))
            #expect(run.stdout.contains("nothing stored for this URL"))
            #expect(cli.origin.count("/never") == 0)
            let json = try await cli.run(["get", cli.url("/never"), "--policy", "only-cache", "--json"]).jsonObject()
            #expect(json["status"] as? Int == 504)
            #expect(json["outcome"] as? String == "miss")
            #expect(cli.origin.requests.isEmpty)
        }
    }

    @Test func policiesByShortAndURLRequestNames() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serveValidated("/p", cacheControl: "max-age=86400", etag: "\"p1\"", body: "p")
            _ = try await cli.run(["get", cli.url("/p")])
            let reload = try await cli.run(["get", cli.url("/p"), "--policy", "reload", "--json"]).jsonObject()
            #expect(reload["outcome"] as? String == "miss")
            let revalidate = try await cli.run([
                "get", cli.url("/p"), "--policy", "reloadRevalidatingCacheData", "--json",
            ])
            .jsonObject()
            #expect(revalidate["outcome"] as? String == "revalidated")
            let prefer = try await cli.run(["get", cli.url("/p"), "--policy", "prefer-cache", "--json"]).jsonObject()
            #expect(prefer["outcome"] as? String == "hit")
            #expect(cli.origin.count("/p") == 3)
        }
    }

    @Test func unreachableOriginWithNothingStoredExitsSeven() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let url = cli.url("/gone")
            cli.origin.stop()
            let run = try await cli.run(["get", url])
            #expect(run.status == 7)
            #expect(run.stdoutData.isEmpty)
            #expect(run.stderrLines.count == 1, "\(run.stderr)")
            #expect(run.stderr.hasPrefix("httpcache: could not reach 127.0.0.1:\(cli.origin.port)"))
            #expect(run.stderr.contains("nothing stored could be served"))
        }
    }

    /// Each hop of a redirect is stored under its own URL (RFC 9110 §15.4), so the next run
    /// asks the origin for neither.
    @Test func redirectHopsAreStoredAndAnswerTheNextRun() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.origin.route("/old") { _ in
                LoopbackOrigin.Response(
                    status: 301, headers: [("Location", "/new"), ("Cache-Control", "max-age=86400")], body: "moved")
            }
            cli.serve("/new", [("Cache-Control", "max-age=86400")], body: "new body")
            for _ in 0..<2 {
                let run = try await cli.run(["get", cli.url("/old")])
                #expect(run.status == 0 && run.stdout == "new body", "\(run.stderr)")
            }
            #expect(cli.origin.count("/old") == 1 && cli.origin.count("/new") == 1)
        }
    }

    /// A redirect that leads back to itself is followed as often as the cache follows any
    /// (`maximumRedirects`), then the run fails saying so, as curl's `-L` does, rather than
    /// print the last redirect's empty body and exit 0 as if answered.
    @Test func redirectLoopFailsSayingSo() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.origin.route("/loop") { _ in LoopbackOrigin.Response(status: 302, headers: [("Location", "/loop")]) }
            let run = try await cli.run(["get", "-i", cli.url("/loop")])
            #expect(run.status == 1, "\(run.stderr)")
            #expect(run.stdoutData.isEmpty, "\(run.stdout)")
            #expect(run.stderrLines.count == 1, "\(run.stderr)")
            #expect(run.stderr.contains("more than 10 redirects"), "\(run.stderr)")
            #expect(run.stderr.contains("leads to \(cli.url("/loop"))"), "\(run.stderr)")
            #expect(cli.origin.count("/loop") == 11)
        }
    }

    /// RFC 9111 §5.2.2.2: with the origin unreachable, a stale response with must-revalidate
    /// is answered by the cache's 504, not served; the run exits 7 as when nothing is stored,
    /// and says the origin could not be reached (not only that the stored one is stale).
    @Test func originDownWithAStaleMustRevalidateResponseExitsSeven() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/strict", [("Cache-Control", "max-age=0, must-revalidate"), ("ETag", "\"s1\"")], body: "s")
            #expect(try await cli.run(["get", cli.url("/strict")]).status == 0)
            cli.origin.stop()
            let run = try await cli.run(["get", cli.url("/strict")])
            #expect(run.status == 7, "\(run.stderr)")
            #expect(run.stdoutData.isEmpty, "\(run.stdout)")
            #expect(run.stderr.hasPrefix("httpcache: could not reach 127.0.0.1:\(cli.origin.port)"), "\(run.stderr)")
            #expect(run.stderr.contains("must-revalidate forbids serving it stale"), "\(run.stderr)")
        }
    }

    /// RFC 9111 §3.3: a body cut off is kept as an incomplete response when it has a strong
    /// validator (the next run asks for the rest), and nothing is stored without one; the
    /// message says which, in the transport's own words, not an NSError's dump.
    @Test func cutOffSaysWhetherWhatCameIsKept() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let strong = LoopbackOrigin.GeneratedResource(
                length: 20_000, seed: 3, etag: "\"c1\"", headers: [("Cache-Control", "max-age=60")])
            let bare = LoopbackOrigin.GeneratedResource(
                length: 20_000, seed: 4, headers: [("Cache-Control", "max-age=60")])
            cli.origin.route("/strong") { strong.response(to: $0, cutAfterBodyBytes: 5_000) }
            cli.origin.route("/bare") { bare.response(to: $0, cutAfterBodyBytes: 5_000) }
            let kept = try await cli.run(["get", "-o", cli.directory.path + "/strong", cli.url("/strong")])
            #expect(kept.status == 1, "\(kept.stderr)")
            #expect(kept.stderr.contains("was cut off after 5000 bytes"), "\(kept.stderr)")
            #expect(kept.stderr.contains("are kept as an incomplete response"), "\(kept.stderr)")
            #expect(!kept.stderr.contains("Error Domain"), "\(kept.stderr)")
            let dropped = try await cli.run(["get", "-o", cli.directory.path + "/bare", cli.url("/bare")])
            #expect(dropped.status == 1, "\(dropped.stderr)")
            #expect(dropped.stderr.contains("nothing of it was stored"), "\(dropped.stderr)")
            let listing = try await cli.run(["ls"])
            #expect(listing.stdout.contains(cli.url("/strong")) && !listing.stdout.contains(cli.url("/bare")))
            #expect(listing.stdout.contains("4.9 KiB (incomplete)"), "\(listing.stdout)")
            let entries = try await cli.run(["ls", "--json"]).jsonArray()
            #expect(entries.map { $0["complete"] as? Bool } == [false], "\(entries)")
        }
    }

    /// `--policy reload` and `reload-all` promise a load from the origin (Apple's
    /// `reloadIgnoringLocalCacheData`, `reloadIgnoringLocalAndRemoteCacheData`): with the origin
    /// down they exit 7, as with nothing stored, and never print the stored body.
    @Test func reloadPoliciesWithTheOriginDownExitSevenInsteadOfServingTheStoredResponse() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/stored", [("Cache-Control", "max-age=86400")], body: "stored body")
            #expect(try await cli.run(["get", cli.url("/stored")]).status == 0)
            cli.origin.stop()
            for policy in ["reload", "reload-all"] {
                let run = try await cli.run(["get", cli.url("/stored"), "--policy", policy])
                #expect(run.status == 7, "--policy \(policy): \(run.stderr)")
                #expect(run.stdoutData.isEmpty, "--policy \(policy)")
            }
            // The default policy still answers from the cache (the response is fresh).
            let fallback = try await cli.run(["get", cli.url("/stored")])
            #expect(fallback.status == 0 && fallback.stdout == "stored body")
        }
    }

    @Test(arguments: [
        (["get"], "get: missing URL"),
        (["get", "http://127.0.0.1:1/", "--frobnicate"], "get: unknown option '--frobnicate'"),
        (["get", "http://127.0.0.1:1/", "-H", "no colon"], "is not a field"),
        (["get", "http://127.0.0.1:1/", "--policy", "sometimes"], "unknown policy 'sometimes'"),
        (["get", "http://127.0.0.1:1/", "-i", "--json"], "cannot be combined"),
        (["get", "http://127.0.0.1:1/", "-o"], "-o needs a value"),
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["purge"], "say what to remove"),
        (["ls", "a", "b"], "unexpected argument 'b'"),
        (
            ["serve", "--origin", "http://127.0.0.1:1", "--allow-destination", "127.0.0.1"],
            "--allow-destination goes with --forward"
        ),
        (["serve", "--forward", "--allow-destination", "http://127.0.0.1/"], "--allow-destination needs HOST"),
        (["serve", "--forward", "--allow-destination", "127.0.0.1:0"], "--allow-destination needs HOST"),
        (["serve", "--forward", "--allow-destination", "[::1"], "--allow-destination needs HOST"),
        // RFC 3986 §3.2.3: port = *DIGIT, so no sign and no space.
        (["serve", "--forward", "--allow-destination", "127.0.0.1:+80"], "--allow-destination needs HOST"),
        (["serve", "--forward", "--allow-destination", "[::1]:+80"], "--allow-destination needs HOST"),
        (["serve", "--forward", "--listen", "127.0.0.1:+8080"], "--listen needs HOST:PORT"),
        (["serve", "--forward", "--listen", "127.0.0.1:65536"], "--listen needs HOST:PORT"),
        (["serve", "--origin", "ftp://127.0.0.1:21"], "--origin needs an http or https URL"),
        (["serve", "--origin", "127.0.0.1:8081"], "--origin needs an http or https URL"),
        (["serve", "--forward", "--origin-cacert", "ca.pem"], "--origin-cacert goes with an https --origin"),
        (
            ["serve", "--origin", "http://127.0.0.1:1", "--origin-cacert", "ca.pem"],
            "--origin-cacert goes with an https"
        ),
    ])
    func usageErrorsExitTwoWithOneLine(arguments: [String], message: String) async throws {
        try await offPool {
            let cli = try CLIHarness()
            let run = try await cli.run(arguments)
            #expect(run.status == 2)
            #expect(run.stderrLines.count == 1, "\(run.stderr)")
            #expect(run.stderr.hasPrefix("httpcache: "))
            #expect(run.stderr.contains(message), "\(run.stderr)")
            #expect(run.stderr.contains("--help"))
            #expect(run.stdoutData.isEmpty)
        }
    }

    @Test(arguments: ["not a url", "127.0.0.1/no-scheme", "ftp://127.0.0.1/file", "http://", "http://exa mple/"])
    func malformedURLExitsTwoWithOneLine(url: String) async throws {
        try await offPool {
            let cli = try CLIHarness()
            for command in ["get", "explain", "show", "pin"] {
                let run = try await cli.run([command, url])
                #expect(run.status == 2, "\(command) \(url): \(run.stderr)")
                #expect(run.stderrLines.count == 1, "\(run.stderr)")
                #expect(run.stderr.contains("'\(url)'"))
            }
        }
    }

    @Test func unusableCacheDirectoryExitsOneWithOneLine() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let file = cli.directory.path + "/not-a-directory"
            _ = FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
            let run = try await CLIProcess.run(["ls", "--cache-dir", file], in: cli.directory.path)
            #expect(run.status == 1)
            #expect(run.stderrLines.count == 1, "\(run.stderr)")
            #expect(run.stderr.hasPrefix("httpcache: could not open the cache in \(file)"))
            #expect(run.stderr.contains("--cache-dir"))

            // get opens its output file first; it is not left behind.
            let output = cli.directory.path + "/out.txt"
            let get = try await CLIProcess.run(
                ["get", "http://127.0.0.1:1/", "--cache-dir", file, "-o", output], in: cli.directory.path)
            #expect(get.status == 1)
            let names = try FileManager.default.contentsOfDirectory(atPath: cli.directory.path)
            #expect(!names.contains { $0.hasPrefix(".out.txt") || $0 == "out.txt" }, "\(names)")
        }
    }

    @Test func cacheDirectoryComesFromHTTPCACHE_DIRWithoutTheOption() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/env", [("Cache-Control", "max-age=60")])
            let run = try await cli.run(["get", cli.url("/env")], cacheDir: false)
            #expect(run.status == 0)
            #expect(FileManager.default.fileExists(atPath: cli.cacheDirectory + "/cli-stats.json"))
            let listed = try await cli.run(["ls", "--json"]).jsonArray()
            #expect(listed.map { $0["url"] as? String } == [cli.url("/env")])
        }
    }

    /// util-linux's `script` gives the child a terminal (Debian's essential bsdutils package).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func progressBarOnATerminalForALargeBody() async throws {
        try await offPool {
            let script = "/usr/bin/script"
            let cli = try CLIHarness()
            let body = [UInt8](repeating: 7, count: 3 << 20)
            cli.origin.route("/big") { _ in
                LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: body)
            }
            let file = cli.directory.path + "/big.bin"
            let command = [
                try BuiltExecutable.path("httpcache"), "get", cli.url("/big"), "-o", file, "--cache-dir",
                cli.cacheDirectory,
            ]
            .map { "'\($0)'" }.joined(separator: " ")
            let run = try await CLIProcess.run(
                executable: script, ["-qec", command, "/dev/null"], in: cli.directory.path)
            #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
            #expect(run.stdout.contains("%"), "no progress bar in \(run.stdout.debugDescription)")
            #expect(run.stdout.contains("of 3.0 MiB"))
            #expect(FileManager.default.contents(atPath: file)?.count == body.count)

            // A binary body is not written to the terminal.
            let terminal = [
                try BuiltExecutable.path("httpcache"), "get", cli.url("/big"), "--cache-dir", cli.cacheDirectory,
            ]
            .map { "'\($0)'" }.joined(separator: " ")
            let binary = try await CLIProcess.run(
                executable: script, ["-qec", terminal, "/dev/null"], in: cli.directory.path)
            #expect(binary.status == 0)
            #expect(binary.stdout.contains("the body is binary (3.0 MiB); not written to the terminal"))
            #expect(!binary.stdout.contains("\u{7}\u{7}\u{7}"))
        }
    }
}
