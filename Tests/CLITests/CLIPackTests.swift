import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `httpcache save` and `httpcache packs` as users run them, against the sample site.
@Suite("httpcache save and packs")
struct CLIPackTests {
    /// The cache in `directory`, opened in this process (as an app sharing the directory would).
    func cache(_ directory: String) throws -> HTTPCache {
        var configuration = HTTPCache.Configuration()
        configuration.directory = directory
        configuration.log = { _ in }
        return try HTTPCache(configuration: configuration)
    }

    /// Every resource's stored body, read without the network.
    func storedBodies(_ cache: HTTPCache, _ urls: [String]) async throws -> [String: Data] {
        var bodies: [String: Data] = [:]
        for url in urls {
            var request = URLRequest(url: try #require(URL(string: url)))
            request.cachePolicy = .returnCacheDataDontLoad
            bodies[url] = try await cache.data(for: request).data
        }
        return bodies
    }

    @Test("save prints what it saved, then each resource that failed or was skipped, with why")
    func saveSummary() async throws {
        let h = try CLIHarness()
        let site = try SampleSite(manyImages: 0)
        let run = try await h.run(["save", site.article.absoluteString, "--name", "article", "--max-bytes", "100000"])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("saved \(site.article.absoluteString) as pack article: 43 resources, ") == true)
        #expect(lines.contains("failed (1):"))
        #expect(lines.contains { $0.contains("/site/img/missing.svg") && $0.contains("HTTP 404") })
        #expect(lines.contains("skipped (1):"))
        #expect(lines.contains { $0.contains("/third-party.svg") && $0.contains("--third-party") })

        let listed = try await h.run(["packs", "--json"])
        let packs = try listed.jsonArray()
        #expect(packs.count == 1)
        #expect(packs.first?["name"] as? String == "article")
        #expect(packs.first?["resources"] as? Int == 43)
        #expect(packs.first?["complete"] as? Bool == false)
        let table = try await h.run(["packs"])
        #expect(table.stdout.contains("article") && table.stdout.contains("2 missing"))
        let shown = try await h.run(["packs", "show", "article"])
        #expect(shown.stdout.contains("\"v1\"") && shown.stdout.contains("/site/css/main.css"))
    }

    /// util-linux's `script` gives the child a terminal (Debian's essential bsdutils package).
    @Test(
        "On a terminal, save shows resources done/found and bytes as it goes",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script")))
    func progressOnATerminal() async throws {
        let h = try CLIHarness()
        let site = try SampleSite(manyImages: 300)
        let command = [
            try BuiltExecutable.path("httpcache"), "save", site.url("/site/many.html"), "--cache-dir", h.cacheDirectory,
        ]
        .map { "'\($0)'" }.joined(separator: " ")
        let run = try await CLIProcess.run(
            executable: "/usr/bin/script", ["-qec", command, "/dev/null"], in: h.directory.path)
        #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
        // The last progress line: everything found is done.
        #expect(run.stdout.contains("saving: 301/301 resources, "), "\(run.stdout.debugDescription)")
        #expect(run.stdout.contains("as pack \(site.url("/site/many.html")): 301 resources"))
    }

    @Test("A page in another encoding than it declares is saved without libxml2 writing to stderr")
    func misdeclaredEncodingIsQuiet() async throws {
        let h = try CLIHarness()
        let site = try SampleSite(manyImages: 0)
        let run = try await h.run(["save", site.url("/site/misdeclared.html")])
        #expect(run.status == 0)
        #expect(run.stderr.isEmpty, "\(run.stderr)")
    }

    @Test("packs rm removes the pack and its resources; a name that is not a pack exits 3")
    func remove() async throws {
        let h = try CLIHarness()
        let site = try SampleSite(manyImages: 0)
        #expect(try await h.run(["save", site.url("/site/page2.html"), "--name", "two"]).status == 0)
        let removed = try await h.run(["packs", "rm", "two"])
        #expect(removed.status == 0 && removed.stdout == "removed pack two and 2 resources no other pack holds\n")
        let again = try await h.run(["packs", "rm", "two"])
        #expect(again.status == 3 && again.stderr.contains("no offline pack named two"))
        #expect(try await h.run(["packs", "show", "two"]).status == 3)
        #expect(try await h.run(["packs", "frobnicate", "two"]).status == 2)
        #expect(try await h.run(["save", site.url("/site/page2.html"), "--jobs", "0"]).status == 2)
    }

    @Test("packs refresh downloads exactly the two resources that changed; the rest get 304 (RFC 9110 §13.1.2)")
    func refresh() async throws {
        let h = try CLIHarness()
        let site = try SampleSite(manyImages: 0)
        #expect(try await h.run(["save", site.article.absoluteString, "--name", "article"]).status == 0)
        site.change("/site/img/a.svg")
        site.change("/site/css/main.css")
        site.origin.clearRecords()
        let run = try await h.run(["packs", "refresh", "article"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("refreshed pack article: 41 resources unchanged (304), 2 changed and downloaded"))
        // Unconditional only where nothing with a validator is stored: the redirect, the 404.
        let full = site.origin.requests.filter { $0.header("If-None-Match") == nil }.map(\.path)
        #expect(full.sorted() == ["/site/img/missing.svg", "/site/img/redirect.svg"])
        let downloaded = site.origin.requests.filter { $0.header("If-None-Match") == "\"v1\"" }.map(\.path)
        #expect(downloaded.contains("/site/img/a.svg") && downloaded.contains("/site/css/main.css"))
    }

    @Test("A refresh killed half way (SIGKILL) leaves the previous version served whole; the next one completes")
    func refreshKilledHalfWay() async throws {
        let h = try CLIHarness()
        let site = try SampleSite(manyImages: 0)
        #expect(try await h.run(["save", site.article.absoluteString, "--name", "article"]).status == 0)
        let urls = site.articleResources.map(site.url).filter { !$0.hasSuffix("/img/redirect.svg") }
        let before = try await storedBodies(try cache(h.cacheDirectory), urls)
        site.change("/site/img/a.svg")
        site.change("/site/css/main.css")
        site.delay("/site/media/sound.ogg", seconds: 60)
        site.origin.clearRecords()

        let refresh = ChildProcess()
        refresh.executableURL = URL(fileURLWithPath: try BuiltExecutable.path("httpcache"))
        refresh.arguments = ["packs", "refresh", "article", "--cache-dir", h.cacheDirectory]
        refresh.standardOutput = FileHandle.nullDevice
        refresh.standardError = FileHandle.nullDevice
        try refresh.run()
        // Half way: the changed image is downloaded, the held-back resource is not.
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline,
            site.origin.count("/site/img/a.svg") == 0 || site.origin.count("/site/media/sound.ogg") == 0
        {
            try await Task.sleep(for: .milliseconds(20))
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(refresh.isRunning)
        refresh.send(signal: SIGKILL)
        await offPool { refresh.waitUntilExit() }
        #expect(refresh.terminationReason == .uncaughtSignal)

        site.origin.stop()
        let after = try await storedBodies(try cache(h.cacheDirectory), urls)
        for url in urls { #expect(after[url] == before[url], "\(url) changed") }
        let shown = try await h.run(["packs", "show", "article", "--json"])
        let items = try #require(try shown.jsonObject()["items"] as? [[String: Any]])
        #expect(items.first { ($0["url"] as? String)?.hasSuffix("/img/a.svg") == true }?["etag"] as? String == "\"v1\"")

        site.delay("/site/media/sound.ogg", seconds: 0)
        try site.origin.restart()
        let completed = try await h.run(["packs", "refresh", "article"])
        #expect(completed.status == 0 && completed.stdout.contains("2 changed and downloaded"), "\(completed.stderr)")
        let refreshed = try await storedBodies(try cache(h.cacheDirectory), urls)
        #expect(refreshed[site.url("/site/img/a.svg")] != before[site.url("/site/img/a.svg")])
        #expect(refreshed[site.url("/site/js/app.js")] == before[site.url("/site/js/app.js")])
    }
}

/// `save` and `packs refresh` against pages whose references redirect elsewhere. Every request
/// that would leave 127.0.0.1 and 127.0.0.2 goes to a fence origin set as the HTTP proxy, which
/// records it: nothing can reach the real network even when the check is missing.
@Suite("httpcache save stays on the page's origin")
struct CLISaveScopeTests {
    let h: CLIHarness
    let site: SampleSite
    let fence: LoopbackOrigin

    init() throws {
        h = try CLIHarness()
        site = try SampleSite(manyImages: 0)
        fence = try LoopbackOrigin()
    }

    func run(_ arguments: [String]) async throws -> CLIRun {
        var full = arguments
        full.insert(contentsOf: ["--cache-dir", h.cacheDirectory], at: 1)
        return try await CLIProcess.run(
            full, environment: ["http_proxy": fence.baseURL, "no_proxy": "127.0.0.1,127.0.0.2"], in: h.directory.path)
    }

    @Test("A redirect to another origin, 169.254.169.254 or 0.0.0.0 is skipped and reported; none is requested")
    func redirectsAreNotFollowed() async throws {
        let saved = try await run(["save", site.redirectsPage.absoluteString, "--name", "r", "--depth", "1"])
        #expect(saved.status == 0, "\(saved.stderr)")
        #expect(site.elsewhere.requests.isEmpty, "\(site.elsewhere.requests.map(\.path))")
        #expect(fence.requests.isEmpty, "\(fence.requests.map(\.target))")
        let lines = saved.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("skipped (\(SampleSite.redirectedReferences.count + 2)):"), "\(saved.stdout)")
        for name in SampleSite.redirectedReferences {
            #expect(
                lines.contains { $0.contains(site.url("/site/r/" + name)) && $0.contains("third-party redirect") },
                "\(name)")
        }
        for name in ["metadata.svg", "zero.svg"] {
            #expect(lines.contains { $0.contains(site.url("/site/r/" + name)) && $0.contains("link-local") }, "\(name)")
        }
        #expect(saved.stdout.hasPrefix("saved \(site.redirectsPage.absoluteString) as pack r: 2 resources"))
    }

    @Test("A page that redirects in a loop, or to another origin, exits 1 and makes no pack")
    func pageThatCannotBeSaved() async throws {
        let loop = try await run(["save", site.url("/site/r/loop.html")])
        #expect(loop.status == 1 && loop.stderr.contains("too many redirects"), "\(loop.stderr)")
        let elsewhere = try await run(["save", site.url("/site/r/page.html")])
        #expect(elsewhere.status == 1 && elsewhere.stderr.contains("--third-party"), "\(elsewhere.stderr)")
        #expect(site.elsewhere.requests.isEmpty && fence.requests.isEmpty)
        let packs = try await run(["packs", "--json"])
        #expect(try packs.jsonArray().isEmpty, "\(packs.stdout)")
    }

    @Test("packs refresh does not follow a resource that now redirects to another origin")
    func refreshDoesNotFollow() async throws {
        #expect(try await run(["save", site.article.absoluteString, "--name", "article"]).status == 0)
        let location = "\(site.elsewhere.baseURL)/redirected.svg"
        site.origin.route("/site/img/redirect.svg") { _ in
            LoopbackOrigin.Response(status: 302, headers: [("Location", location)], body: "")
        }
        let refreshed = try await run(["packs", "refresh", "article"])
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        #expect(site.elsewhere.requests.isEmpty && fence.requests.isEmpty)
        #expect(
            refreshed.stdout.split(separator: "\n").contains {
                $0.contains(site.url("/site/img/redirect.svg")) && $0.contains("third-party redirect")
            }, "\(refreshed.stdout)")
    }
}

@Suite("httpcache save on a page of 10,000 images", .timeLimit(.minutes(10)))
struct CLIManyImagesTests {
    @Test("10,000 images are saved in bounded memory (and within the time limit)")
    func tenThousandImages() async throws {
        let h = try CLIHarness()
        let site = try SampleSite(manyImages: 10_000)
        let save = try await MeasuredRun.run(
            try BuiltExecutable.path("httpcache"),
            ["save", site.url("/site/many.html"), "--cache-dir", h.cacheDirectory], outputIn: h.directory.path)
        let elapsed = Duration.seconds(save.seconds)
        let peakKiB = save.peakKiB
        #expect(save.status == 0)
        #expect(save.stdout.contains("as pack \(site.url("/site/many.html")): 10001 resources"))
        #expect(site.origin.requests.count == 10_001)
        // Debug build, 2 cores: measured 10.5 s and 77 MiB alone, 210 s beside the rest of the
        // suite and stress-ng. Time is not asserted (the time limit catches a hang;
        // `benchmarks offline` measures speed); memory does not depend on the machine's load.
        #expect(peakKiB < 256 << 10, "peak RSS \(peakKiB >> 10) MiB")
        print("10,000 images: \(elapsed), peak RSS \(peakKiB >> 10) MiB")
    }
}

/// `httpcache import` on files made to make it grow: what it stores, what it refuses, and the
/// peak memory of the (debug) process, measured by the kernel for the whole run.
@Suite("httpcache import")
struct CLIImportTests {
    @Test("A hostless WARC-Target-URI amid good records: skipped with its offset, the rest stored, exit 1")
    func hostlessRecord() async throws {
        let h = try CLIHarness()
        let path = h.directory.path + "/mixed.warc.gz"
        let offsets = try WARCFixtures.writeTinyRecords(to: path, count: 5, hostless: [2])
        let run = try await h.run(["import", path, "--name", "mixed"])
        #expect(run.status == 1, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first == "imported \(path) as pack mixed: 4 responses, 32 B", "\(run.stdout)")
        #expect(lines.contains("refused 1 record (not stored, not in the pack): 1 no http(s) target URI"))
        let offset = try #require(offsets.first)
        #expect(lines.contains { $0.hasPrefix("  record at offset \(offset): not an http(s)") }, "\(run.stdout)")
        #expect(run.stderr.contains("1 record of \(path) not stored"), "\(run.stderr)")
        let shown = try await h.run(["packs", "show", "mixed", "--json"])
        let pack = try shown.jsonObject()
        let items = try #require(pack["items"] as? [[String: Any]])
        #expect(items.compactMap { $0["url"] as? String } == [0, 1, 3, 4].map { "http://example.org/r/\($0)" })
        #expect(pack["complete"] as? Bool == false)
        let table = try await h.run(["packs", "show", "mixed"])
        #expect(!table.stdout.contains("complete") && table.stdout.contains("record at offset"))
    }

    @Test("A record that inflates to 256 MiB from a 256 KiB file is refused at the store's limit; memory stays low")
    func gzipBomb() async throws {
        let h = try CLIHarness()
        let path = h.directory.path + "/bomb.warc.gz"
        let bomb = try WARCFixtures.writeGzipBomb(to: path, inflatedSize: 256 << 20)
        let run = try await MeasuredRun.run(
            try BuiltExecutable.path("httpcache"), ["import", path, "--cache-dir", h.cacheDirectory],
            outputIn: h.directory.path)
        #expect(run.status == 1, "\(run.stderr)")
        #expect(run.stdout.hasPrefix("imported \(path) as pack bomb.warc.gz: 2 responses"), "\(run.stdout)")
        #expect(run.stdout.contains("record at offset \(bomb.offset): stopped storing http://example.org/bomb"))
        // Debug build: measured 40 MiB (a whole record in memory, as before, is 256 MiB at least).
        #expect(run.peakKiB < 160 << 10, "peak RSS \(run.peakKiB >> 10) MiB")
        print("import of a \(bomb.fileSize >> 10) KiB file inflating to 256 MiB: peak RSS \(run.peakKiB >> 10) MiB")
    }

    @Test(
        "Memory does not grow with the number of records: 4,000 and 16,000 tiny records",
        .disabled(if: MeasuredRun.underThreadSanitizer, "ThreadSanitizer's shadow memory multiplies peak RSS"))
    func manyRecords() async throws {
        let h = try CLIHarness()
        var peaks: [Int: Int] = [:]
        for count in [4_000, 16_000] {
            let path = h.directory.path + "/tiny-\(count).warc.gz"
            try WARCFixtures.writeTinyRecords(to: path, count: count)
            let run = try await MeasuredRun.run(
                try BuiltExecutable.path("httpcache"),
                ["import", path, "--cache-dir", h.cacheDirectory + "-\(count)"], outputIn: h.directory.path)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stdout.hasPrefix("imported \(path) as pack tiny-\(count).warc.gz: \(count) responses"))
            peaks[count] = run.peakKiB
            print("import of \(count) tiny records: \(run.seconds) s, peak RSS \(run.peakKiB >> 10) MiB")
        }
        // Bounded caches fill while these first records go in (SQLite's page cache and the
        // store's remembered heads, 16 MiB and 16,384 keys each), so this slope is an upper
        // bound: 793 bytes a record on a busy machine, 1,135 when half of the remembered heads
        // were the empty answers of the records' No-Vary-Search markers, 1,611–1,669 since a
        // miss no longer reads its marker and a head is remembered for every record; 3,035 with
        // every record's block and pack entry in memory (main before streaming). The release
        // benchmark (`benchmarks import`) measures the slope past the caches, from 100,000 to
        // 1,000,000 records.
        let perRecord = (peaks[16_000, default: 0] - peaks[4_000, default: 0]) * 1024 / 12_000
        #expect(perRecord < 2_200, "\(perRecord) bytes of peak RSS a record")
    }
}

/// `httpcache export --warc` on a store with a large body.
@Suite("httpcache export")
struct CLIExportTests {
    @Test(
        "A body found damaged is left out of the export and listed (exit 1), the rest written; the file is renamed into place whole, no partial left"
    )
    func damagedBodyLeftOut() async throws {
        let h = try CLIHarness()
        h.serve("/big", [("Cache-Control", "max-age=3600")], body: String(repeating: "b", count: 100_000))
        h.serve("/small", [("Cache-Control", "max-age=3600")], body: "small body")
        for path in ["/big", "/small"] { #expect(try await h.run(["get", h.url(path)]).status == 0) }
        let path = h.directory.path + "/export.warc"
        let first = try await h.run(["export", "--warc", path])
        #expect(first.status == 0 && first.stdout.contains("2 response records"), "\(first.stdout) \(first.stderr)")
        // The one body kept in a file (100 KB; the small one is in the index): a byte changed.
        let names = FileManager.default.enumerator(atPath: h.cacheDirectory + "/bodies")?.allObjects ?? []
        let bodies = names.compactMap { $0 as? String }.map { h.cacheDirectory + "/bodies/" + $0 }.filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: $0, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        #expect(bodies.count == 1, "\(bodies)")
        let body = try #require(bodies.first)
        let file = try #require(FileHandle(forUpdatingAtPath: body))
        try file.seek(toOffset: 50_000)
        try file.write(contentsOf: Data("X".utf8))
        try file.close()
        let second = try await h.run(["export", "--warc", path])
        #expect(second.status == 1, "\(second.stderr)")
        #expect(second.stdout.contains("1 response record"), "\(second.stdout)")
        #expect(second.stdout.contains("left out \(h.url("/big"))"), "\(second.stdout)")
        #expect(second.stderr.contains("1 stored response left out of \(path)"), "\(second.stderr)")
        #expect(!FileManager.default.fileExists(atPath: path + ".partial"))
        let warcio = URL(fileURLWithPath: CodedBodies.checkersPython).deletingLastPathComponent()
            .appendingPathComponent("warcio").path
        let check = try await MeasuredRun.run(warcio, ["check", "-v", path], outputIn: h.directory.path)
        #expect(check.status == 0, "warcio check: \(check.stdout) \(check.stderr)")
        #expect(check.stdout.components(separatedBy: "digest pass").count - 1 == 1 + 1, "\(check.stdout)")
    }

    @Test(
        "A 48 MiB body is exported a chunk at a time: warcio checks its digests, the peak RSS stays far below it (ISO 28500)",
        .disabled(if: MeasuredRun.underThreadSanitizer, "ThreadSanitizer's shadow memory multiplies peak RSS"))
    func largeBodyStreamed() async throws {
        let h = try CLIHarness()
        let source = h.directory.path + "/large.warc.gz"
        _ = try WARCFixtures.writeGzipBomb(to: source, inflatedSize: 48 << 20)
        let imported = try await h.run(["import", source, "--name", "large"])
        #expect(imported.status == 0, "\(imported.stderr)")
        let path = h.directory.path + "/export.warc.gz"
        let run = try await MeasuredRun.run(
            try BuiltExecutable.path("httpcache"), ["export", "--warc", path, "--cache-dir", h.cacheDirectory],
            outputIn: h.directory.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("3 response records, 48 MiB of bodies"), "\(run.stdout)")
        // Debug build: measured 29 MiB (the same with a 96 MiB body); 124 MiB when the body was
        // read whole and its record and gzip member made in memory.
        #expect(run.peakKiB < 80 << 10, "peak RSS \(run.peakKiB >> 10) MiB")
        print("export of a 48 MiB body: \(run.seconds) s, peak RSS \(run.peakKiB >> 10) MiB")
        // PyPI's warcio recomputes every record's digests: one line for the warcinfo record,
        // one for each response record.
        let warcio = URL(fileURLWithPath: CodedBodies.checkersPython).deletingLastPathComponent()
            .appendingPathComponent("warcio").path
        let check = try await MeasuredRun.run(warcio, ["check", "-v", path], outputIn: h.directory.path)
        #expect(check.status == 0, "warcio check: \(check.stdout) \(check.stderr)")
        #expect(check.stdout.components(separatedBy: "digest pass").count - 1 == 1 + 3, "\(check.stdout)")
    }
}
