import CacheSemantics
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `ls`, `show`, `purge`, `pin`, `unpin` and `stats`, run as processes on a cache filled by
/// `get` from a loopback origin.
@Suite(.timeLimit(.minutes(10)))
struct CLIInspectionTests {
    /// A harness with two resources under /a/ and one under /b/, all fetched once.
    private func filled() async throws -> CLIHarness {
        let cli = try CLIHarness()
        // A day: each `httpcache` run is a process on the real clock, and the tests need these
        // fresh however long a loaded machine takes over the runs.
        cli.serveValidated("/a/one", cacheControl: "max-age=86400", etag: "\"one\"", body: "first")
        cli.serveValidated("/a/two", cacheControl: "max-age=86400", etag: "\"two\"", body: "second!")
        cli.serve("/b/three", [("Cache-Control", "max-age=0")], body: "3")
        for path in ["/a/one", "/a/two", "/b/three"] {
            let run = try await cli.run(["get", cli.url(path)])
            #expect(run.status == 0, "\(run.stderr)")
        }
        return cli
    }

    @Test func lsListsEntriesAsTextAndJSON() async throws {
        try await offPool {
            let cli = try await filled()
            _ = try await cli.run(["get", cli.url("/a/one")])  // one hit

            let text = try await cli.run(["ls"])
            #expect(text.status == 0)
            let lines = text.stdout.split(separator: "\n")
            #expect(lines.first?.hasPrefix("STATUS") == true)
            #expect(lines.last == "3 entries, 13 B")
            let one = try #require(lines.first { $0.hasSuffix(cli.url("/a/one")) })
            #expect(one.contains("fresh, "))
            #expect(one.contains("5 B"))
            let three = try #require(lines.first { $0.hasSuffix(cli.url("/b/three")) })
            #expect(three.contains("stale by"))

            let json = try await cli.run(["ls", "--json"]).jsonArray()
            #expect(json.count == 3)
            let entry = try #require(json.first { $0["url"] as? String == cli.url("/a/one") })
            #expect(entry["status"] as? Int == 200)
            #expect(entry["bodyBytes"] as? Int == 5)
            #expect(entry["hits"] as? Int == 1)
            #expect(entry["fresh"] as? Bool == true)
            #expect(entry["pinned"] as? Bool == false)
            #expect(entry["freshnessLifetime"] as? Double == 86400)
            #expect(json.first { $0["url"] as? String == cli.url("/b/three") }?["fresh"] as? Bool == false)

            let prefixed = try await cli.run(["ls", cli.url("/a/"), "--json"]).jsonArray()
            #expect(Set(prefixed.compactMap { $0["url"] as? String }) == [cli.url("/a/one"), cli.url("/a/two")])
            let none = try await cli.run(["ls", "http://127.0.0.1:1/nothing"])
            #expect(none.stdout.hasPrefix("nothing stored under http://127.0.0.1:1/nothing"))
        }
    }

    @Test func showPrintsFieldsFactsFreshnessAndReasons() async throws {
        try await offPool {
            let cli = try await filled()
            _ = try await cli.run(["get", cli.url("/a/two")])
            let run = try await cli.run(["show", cli.url("/a/two")])
            #expect(run.status == 0, "\(run.stderr)")
            let text = run.stdout
            for expected in [
                "URL:            \(cli.url("/a/two"))", "Status:         200 OK", "Body:           7 B (7 bytes)",
                "Hits:           1", "Pinned:         no", "Where:          disk", "ETag:           \"two\"",
                "Lifetime:       24 h, from max-age", "Freshness:      fresh, ", "  Cache-Control: max-age=86400",
                "Why:\n  - fresh: age ",
            ] {
                #expect(text.contains(expected), "missing \(expected.debugDescription) in:\n\(text)")
            }
            // The stored field, its name as URLSession spells it.
            #expect(text.lowercased().contains("\n  etag: \"two\"\n"))

            let missing = try await cli.run(["show", cli.url("/a/none")])
            #expect(missing.status == 3)
            #expect(missing.stderrLines.count == 1)
            #expect(missing.stderr.contains("nothing stored for \(cli.url("/a/none"))"))
        }
    }

    @Test func purgeByURLPrefixAndAll() async throws {
        try await offPool {
            let cli = try await filled()
            let one = try await cli.run(["purge", cli.url("/a/one")])
            #expect(one.stdout == "removed 1 stored response for \(cli.url("/a/one"))\n")
            let again = try await cli.run(["purge", cli.url("/a/one")])
            #expect(again.status == 0)
            #expect(again.stdout.hasPrefix("removed 0 stored responses"))
            let prefix = try await cli.run(["purge", "--prefix", cli.url("/a/")])
            #expect(prefix.stdout == "removed 1 stored response under \(cli.url("/a/"))\n")
            #expect(
                try await cli.run(["ls", "--json"]).jsonArray().compactMap { $0["url"] as? String } == [
                    cli.url("/b/three")
                ]
            )
            let all = try await cli.run(["purge", "--all"])
            #expect(all.stdout == "removed 1 stored response: the cache is empty\n")
            #expect(try await cli.run(["ls", "--json"]).jsonArray().isEmpty)
            let both = try await cli.run(["purge", "--all", "--prefix", "x"])
            #expect(both.status == 2)
        }
    }

    @Test("purge --group removes the responses whose Cache-Groups lists the group (RFC 9875), by origin or all")
    func purgeByGroup() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/g/1", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"news\"")])
            cli.serve("/g/2", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"news\", \"sport\"")])
            cli.serve("/g/3", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"sport\"")])
            for path in ["/g/1", "/g/2", "/g/3"] { _ = try await cli.run(["get", cli.url(path)]) }
            let elsewhere = try await cli.run(["purge", "--group", "news", "--origin", "http://127.0.0.1:1/"])
            #expect(elsewhere.stdout == "removed 0 stored responses in cache group \"news\" of http://127.0.0.1:1\n")
            let news = try await cli.run(["purge", "--group", "news", "--origin", cli.url("/")])
            #expect(news.status == 0, "\(news.stderr)")
            #expect(news.stdout.hasPrefix("removed 2 stored responses in cache group \"news\" of http://127.0.0.1:"))
            let sport = try await cli.run(["purge", "--group", "sport"])
            #expect(sport.stdout == "removed 1 stored response in cache group \"sport\" of every origin\n")
            #expect(try await cli.run(["ls", "--json"]).jsonArray().isEmpty)
            #expect(try await cli.run(["purge", "--group", ""]).status == 2)
            #expect(try await cli.run(["purge", "--origin", cli.url("/")]).status == 2)
            #expect(try await cli.run(["purge", "--group", "news", cli.url("/g/1")]).status == 2)
        }
    }

    @Test(
        "show and ls: a URL equivalent modulo No-Vary-Search shows the response stored for another; no marker is listed"
    )
    func showEquivalent() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/n", [("Cache-Control", "max-age=60"), ("No-Vary-Search", "key-order")])
            _ = try await cli.run(["get", cli.url("/n?b=2&a=1")])
            let show = try await cli.run(["show", cli.url("/n?a=1&b=2")])
            #expect(show.status == 0, "\(show.stderr)")
            #expect(show.stdout.contains("URL:            \(cli.url("/n?b=2&a=1"))"))
            #expect(show.stdout.contains("No-Vary-Search: key-order"))
            let listed = try await cli.run(["ls", "--json"]).jsonArray().compactMap { $0["url"] as? String }
            #expect(listed == [cli.url("/n?b=2&a=1")])
            let purged = try await cli.run(["purge", cli.url("/n?a=1&b=2")])
            #expect(purged.stdout.hasPrefix("removed 1 stored response"))
        }
    }

    @Test func pinAndUnpin() async throws {
        try await offPool {
            let cli = try await filled()
            let pin = try await cli.run(["pin", cli.url("/a/one")])
            #expect(pin.status == 0)
            #expect(pin.stdout == "pinned 1 stored response for \(cli.url("/a/one"))\n")
            func pinned() async throws -> [String: Bool] {
                var result: [String: Bool] = [:]
                for entry in try await cli.run(["ls", "--json"]).jsonArray() {
                    result[entry["url"] as? String ?? ""] = entry["pinned"] as? Bool
                }
                return result
            }
            #expect(
                try await pinned() == [cli.url("/a/one"): true, cli.url("/a/two"): false, cli.url("/b/three"): false])
            #expect(try await cli.run(["show", cli.url("/a/one")]).stdout.contains("Pinned:         yes"))
            let stats = try await cli.run(["stats", "--json"]).jsonObject()
            #expect(stats["pinnedBytes"] as? Int == 5)

            let unpin = try await cli.run(["unpin", cli.url("/a/one")])
            #expect(unpin.stdout == "unpinned 1 stored response for \(cli.url("/a/one"))\n")
            #expect(try await pinned()[cli.url("/a/one")] == false)

            let nothing = try await cli.run(["pin", cli.url("/a/none")])
            #expect(nothing.status == 3)
            #expect(nothing.stderrLines.count == 1)
            #expect(nothing.stderr.contains("fetch it first"))
        }
    }

    @Test func statsCountOutcomesAcrossRuns() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serveValidated("/s", cacheControl: "max-age=0", etag: "\"s\"", body: "12345")
            cli.serve("/f", [("Cache-Control", "max-age=86400")], body: "abc")
            _ = try await cli.run(["get", cli.url("/s")])  // miss
            _ = try await cli.run(["get", cli.url("/s")])  // revalidated
            _ = try await cli.run(["get", cli.url("/f")])  // miss
            _ = try await cli.run(["get", cli.url("/f")])  // hit
            cli.serve("/post", [], body: "posted")
            _ = try await cli.run(["get", cli.url("/post"), "-X", "POST"])  // bypass (and invalidates only /post)

            let json = try await cli.run(["stats", "--json"]).jsonObject()
            let outcomes = try #require(json["outcomes"] as? [String: Int])
            #expect(outcomes == ["hit": 1, "miss": 2, "revalidated": 1, "stale": 0, "bypass": 1])
            #expect(json["responses"] as? Int == 5)
            #expect(json["hitRatio"] as? Double == 0.4)
            #expect(json["entries"] as? Int == 2)
            #expect(
                (json["tiers"] as? [String: Any])?["disk"] as? [String: Int] == [
                    "entries": 2, "bodyBytes": 8, "pinnedBytes": 0,
                ])
            #expect(json["bytesServedFromCache"] as? Int == 8)
            #expect(json["bytesSavedByRevalidation"] as? Int == 5)

            let text = try await cli.run(["stats"])
            #expect(text.stdout.contains("Stored (disk):    2 entries, 8 B of bodies, 0 B pinned"))
            #expect(text.stdout.contains("Outcomes:         hit 1, miss 2, revalidated 1, stale 0, bypass 1; errors 0"))
            #expect(text.stdout.contains("Hit ratio:        40.0%"))

            let reset = try await cli.run(["stats", "--reset", "--json"]).jsonObject()
            #expect(reset["responses"] as? Int == 0)
            #expect(reset["entries"] as? Int == 2)
        }
    }

    /// The counts file an earlier release wrote (JSONEncoder's pretty-printed, sorted keys) is
    /// read and added to, in place; a damaged one is replaced, counting from zero.
    @Test func statsReadAnEarlierReleasesFile() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/f", [("Cache-Control", "max-age=86400")], body: "abc")
            _ = try await cli.run(["get", cli.url("/f")])  // creates the directory; a miss
            let earlier = """
                {
                  "bytesFromOrigin" : 100,
                  "since" : 1733000000.25,
                  "statistics" : {
                    "bypassed" : 1,
                    "bytesSavedByRevalidation" : 7,
                    "bytesServedFromCache" : 40,
                    "collapsed" : 0,
                    "errors" : 2,
                    "hits" : 4,
                    "misses" : 3,
                    "revalidated" : 1,
                    "stale" : 0
                  },
                  "version" : 1
                }
                """
            let path = cli.cacheDirectory + "/cli-stats.json"
            try Data(earlier.utf8).write(to: URL(fileURLWithPath: path))
            _ = try await cli.run(["get", cli.url("/f")])  // a hit: 3 bytes from the cache
            // Rewritten in place and never shorter: what is left of the longer earlier text is spaces.
            let rewritten = try Data(contentsOf: URL(fileURLWithPath: path))
            #expect(rewritten.count == earlier.utf8.count)
            #expect(try JSONSerialization.jsonObject(with: rewritten) is [String: Any])
            let json = try await cli.run(["stats", "--json"]).jsonObject()
            let outcomes = try #require(json["outcomes"] as? [String: Int])
            #expect(outcomes == ["hit": 5, "miss": 3, "revalidated": 1, "stale": 0, "bypass": 1])
            #expect(json["errors"] as? Int == 2 && json["bytesFromOrigin"] as? Int == 100)
            #expect(json["bytesServedFromCache"] as? Int == 43 && json["bytesSavedByRevalidation"] as? Int == 7)
            #expect((json["since"] as? String)?.hasPrefix("2024-11-30") == true, "\(json["since"] ?? "none")")

            try Data("{\"version\": 1, \"hits\": ".utf8).write(to: URL(fileURLWithPath: path))
            let damaged = try await cli.run(["get", cli.url("/f")])
            #expect(damaged.status == 0 && damaged.stderr.contains("counting from zero"), "\(damaged.stderr)")
            let fresh = try await cli.run(["stats", "--json"]).jsonObject()
            #expect(fresh["responses"] as? Int == 1)
        }
    }

    @Test func concurrentRunsLoseNoCounts() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/c", [("Cache-Control", "max-age=60")], body: "c")
            let runs = 8
            let results = try await withThrowingTaskGroup(of: CLIRun.self) { group in
                for _ in 0..<runs { group.addTask { try await cli.run(["get", cli.url("/c")]) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(
                results.map(\.status) == [Int32](repeating: 0, count: runs),
                "\(results.filter { $0.status != 0 }.map(\.stderr))")
            let json = try await cli.run(["stats", "--json"]).jsonObject()
            #expect(json["responses"] as? Int == runs)
        }
    }
}

/// `explain`, `demo` and `--help`.
@Suite(.timeLimit(.minutes(10)))
struct CLIExplainAndDemoTests {
    @Test func explainNamesLifetimeSourceValidatorsAndNextRequests() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serveValidated("/e", cacheControl: "max-age=300", etag: "\"e1\"", body: "explained")
            let run = try await cli.run(["explain", cli.url("/e")])
            #expect(run.status == 0, "\(run.stderr)")
            let text = run.stdout
            for expected in [
                "GET \(cli.url("/e"))\n→ 200 OK, miss, in ",
                "Cache-Status: HTTPCache; fwd=uri-miss; fwd-status=200; stored",
                "Stored:      yes, 9 B on disk", "Lifetime:    5 min, from max-age",
                "Validators:  ETag \"e1\" (strong)",
                "Vary:        none", "now: served from the cache without contacting the origin, for ",
                "revalidated with If-None-Match: \"e1\"", "if the origin cannot be reached then: served stale anyway",
                "Warnings: none",
            ] {
                #expect(text.contains(expected), "missing \(expected.debugDescription) in:\n\(text)")
            }
            // The body is not printed, and the fetch counted.
            #expect(!text.contains("explained\n"))
            let stats = try await cli.run(["stats", "--json"]).jsonObject()
            #expect(stats["responses"] as? Int == 1)
        }
    }

    @Test func explainWarnsAboutTheOriginsFields() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let past = HTTPDate.format(Timestamp(secondsSince1970: Date().timeIntervalSince1970 - 86_400))
            cli.serve("/past", [("Cache-Control", "max-age=120"), ("Expires", past)])
            cli.serve("/star", [("Cache-Control", "max-age=60"), ("Vary", "*")])
            cli.serve("/nocache", [("Cache-Control", "no-cache")])
            let lastModified = HTTPDate.format(Timestamp(secondsSince1970: Date().timeIntervalSince1970 - 10 * 86_400))
            cli.serve("/heuristic", [("Last-Modified", lastModified)])

            let pastText = try await cli.run(["explain", cli.url("/past")]).stdout
            #expect(pastText.contains("Lifetime:    2 min, from max-age"))
            #expect(pastText.contains("Validators:  none"))
            #expect(pastText.contains("- no validator (ETag or Last-Modified)"))
            #expect(pastText.contains("- Expires (\(past)) is in the past beside max-age=120"))

            let starText = try await cli.run(["explain", cli.url("/star")]).stdout
            #expect(starText.contains("Stored:  no: not stored: Vary: * never matches a later request"))
            #expect(starText.contains("- Vary: * means no later request can match"))
            #expect(starText.contains("go to the origin: nothing stored answers them"))

            let noCacheText = try await cli.run(["explain", cli.url("/nocache")]).stdout
            #expect(noCacheText.contains("- no-cache without a validator"))

            let heuristicText = try await cli.run(["explain", cli.url("/heuristic")]).stdout
            #expect(heuristicText.contains("24 h, heuristic: a fraction of the time since Last-Modified"))
            #expect(heuristicText.contains("- no explicit freshness: a heuristic lifetime of 24 h"))
        }
    }

    @Test func explainOfflineExplainsWhatIsStoredWithoutTheOrigin() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serveValidated("/o", cacheControl: "max-age=86400, stale-while-revalidate=30", etag: "\"o\"", body: "o")
            _ = try await cli.run(["get", cli.url("/o")])
            cli.origin.stop()
            let run = try await cli.run(["explain", cli.url("/o"), "--offline"])
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.contains("→ 200 OK, hit"))
            #expect(run.stdout.contains("Also:        stale-while-revalidate=30"))
            #expect(run.stdout.contains("served stale at once while it is revalidated in the background"))
        }
    }

    @Test func demoRunsTheFourStepsAndExitsZero() async throws {
        try await offPool {
            let directory = FileManager.default.temporaryDirectory.path
            let run = try await CLIProcess.run(["demo"], in: directory)
            #expect(run.status == 0, "\(run.stdout)\n\(run.stderr)")
            let lines = run.stdout.split(separator: "\n")
            for (number, step) in ["MISS", "HIT", "REVALIDATED", "STALE"].enumerated() {
                #expect(
                    lines.contains { $0.hasPrefix("\(number + 1). \(step) ") }, "no step \(step) in:\n\(run.stdout)")
            }
            #expect(run.stdout.contains("Cache-Status: HTTPCache; fwd=stale; fwd-status=304"))
            #expect(run.stdout.contains("detail=disconnected"))
            #expect(run.stdout.contains("All four steps behaved as expected"))
            // Its temporary cache is gone.
            let line = try #require(lines.first { $0.contains("a disk cache in ") })
            let cacheDirectory = String(line[line.range(of: "a disk cache in ")!.upperBound...])
            #expect(!FileManager.default.fileExists(atPath: cacheDirectory))
        }
    }

    @Test(arguments: ["get", "explain", "ls", "show", "purge", "pin", "unpin", "stats", "demo"])
    func everyCommandHasHelp(command: String) async throws {
        try await offPool {
            let directory = FileManager.default.temporaryDirectory.path
            let run = try await CLIProcess.run([command, "--help"], in: directory)
            #expect(run.status == 0)
            #expect(run.stdout.hasPrefix("Usage: httpcache \(command)"), "\(run.stdout)")
            let viaHelp = try await CLIProcess.run(["help", command], in: directory)
            #expect(viaHelp.stdout == run.stdout)
        }
    }

    @Test func topLevelHelpListsCommandsAndExitCodes() async throws {
        try await offPool {
            let run = try await CLIProcess.run(["--help"], in: FileManager.default.temporaryDirectory.path)
            #expect(run.status == 0)
            for command in [
                "get URL", "explain URL", "ls [PREFIX]", "show URL", "purge", "pin URL", "unpin URL", "stats", "demo",
            ] {
                #expect(run.stdout.contains("\n  \(command)"), "\(command)")
            }
            for code in ["  0  ", "  1  ", "  2  ", "  3  ", "  7  "] { #expect(run.stdout.contains(code)) }
            #expect(run.stdout.contains("HTTPCACHE_DIR"))
        }
    }
}
