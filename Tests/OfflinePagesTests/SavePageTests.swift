import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import OfflinePages
import Synchronization
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The network, fenced to loopback: requests to 127.0.0.0/8 go through the transport an
/// `HTTPCache` has by default (the package's client on Linux, URLSession elsewhere); any other
/// is recorded and refused without a connection, so a test of what a save must never fetch
/// (169.254.169.254) cannot reach the real network even when the save is wrong.
final class LoopbackFence: OriginTransport {
    #if os(Linux)
    private let network: any OriginTransport = HTTPClientTransport()
    #else
    private let network: any OriginTransport = URLRequestTransport(URLSessionTransport())
    #endif
    private let outside = Mutex([String]())

    /// URLs a request was attempted for outside 127.0.0.0/8.
    var refused: [String] { outside.withLock { $0 } }

    func send(_ request: FetchRequest) async throws -> OriginResponse {
        let host = request.url.host ?? ""
        guard host.hasPrefix("127."), host.split(separator: ".").count == 4 else {
            outside.withLock { $0.append(request.url.absoluteString) }
            throw URLError(.cannotConnectToHost)
        }
        return try await network.send(request)
    }
}

/// A cache in a fresh directory in front of the sample site.
struct SaveHarness {
    let site: SampleSite
    let directory = TemporaryDirectory("offline-pages-test")
    let cache: HTTPCache
    let fence = LoopbackFence()

    init(manyImages: Int = 20) throws {
        site = try SampleSite(manyImages: manyImages)
        var configuration = HTTPCache.Configuration()
        configuration.directory = directory.path
        configuration.log = { _ in }
        cache = try HTTPCache(configuration: configuration, transport: fence)
    }

    /// Saves `path` and returns the pack, with every progress step seen.
    func save(_ path: String, _ options: SaveOptions = SaveOptions()) async throws -> (OfflinePack, [SaveProgress]) {
        let save = cache.savePage(site.origin.url(path), options: options)
        var steps: [SaveProgress] = []
        for await step in save.progress { steps.append(step) }
        return (try await save.pack, steps)
    }

    /// The pack's URLs as paths on the site's origin (others in full).
    func paths(_ pack: OfflinePack) -> Set<String> {
        Set(pack.resources.map { $0.url.replacingOccurrences(of: site.origin.baseURL, with: "") })
    }
}

@Suite("Saving a page for offline reading")
struct SavePageTests {
    /// The article uses every construct a browser loads subresources from: the pack holds
    /// exactly those URLs (listed in `SampleSite.articleResources`), each once; what is not a
    /// subresource is never requested.
    @Test("Every subresource a browser loads, resolved against <base> (HTML §4.2.3), nothing else")
    func savesExactlyWhatThePageNeeds() async throws {
        let h = try SaveHarness()
        let (pack, steps) = try await h.save("/site/article.html")
        #expect(h.paths(pack) == Set(h.site.articleResources))
        #expect(pack.resources.count == h.site.articleResources.count)
        #expect(pack.resources.first?.url == h.site.url("/site/article.html"))
        #expect(pack.name == h.site.url("/site/article.html"))
        for never in [
            "/site/canonical.html", "/site/img/commented-out.svg", "/site/not-a-url.svg",
            "/site/css/not-a-url.svg", "/site/img/not-an-image.svg", "/site/page2.html", "/site/big.bin",
        ] {
            #expect(h.site.origin.count(never) == 0, "\(never) was requested")
        }
        #expect(h.site.thirdParty.requests.isEmpty, "a third-party resource was fetched")
        // The @import cycle (main.css ↔ base.css) fetched each stylesheet once.
        #expect(h.site.origin.count("/site/css/main.css") == 1 && h.site.origin.count("/site/css/base.css") == 1)
        // Progress grew to the final count and ended there.
        let last = try #require(steps.last)
        // One per resource found; the redirect's target is fetched with the redirect.
        #expect(last.done == last.total && last.total == h.site.articleResources.count - 1 + pack.problems.count)
        #expect(last.bytes == pack.bytes)
        #expect(zip(steps, steps.dropFirst()).allSatisfy { $0.done < $1.done })
    }

    @Test("A 404 subresource fails, a third-party one is skipped: both reported with why")
    func problemsAreReported() async throws {
        let h = try SaveHarness()
        let (pack, _) = try await h.save("/site/article.html")
        let problems = Dictionary(uniqueKeysWithValues: pack.problems.map { ($0.url, $0) })
        let missing = try #require(problems[h.site.url("/site/img/missing.svg")])
        #expect(missing.isFailure && missing.reason.contains("404"))
        let third = try #require(problems["http://127.0.0.1:\(h.site.thirdParty.port)/third-party.svg"])
        #expect(!third.isFailure && third.reason.contains("third party"))
        #expect(pack.problems.count == 2 && !pack.isComplete)
        // The 404 is not pinned or kept for offline use.
        #expect(try h.cache.entries(for: h.site.origin.url("/site/img/missing.svg")).allSatisfy { !$0.isPinned })
    }

    @Test("Every resource is stored and pinned; a redirect is saved with its target (RFC 9110 §15.4)")
    func resourcesArePinned() async throws {
        let h = try SaveHarness()
        let (pack, _) = try await h.save("/site/article.html")
        for resource in pack.resources {
            let entries = try h.cache.entries(for: try #require(URL(string: resource.url)))
            #expect(!entries.isEmpty && entries.allSatisfy(\.isPinned), "\(resource.url)")
        }
        let redirect = try #require(pack.resources.first { $0.url.hasSuffix("/img/redirect.svg") })
        #expect(redirect.status == 302)
        let image = try #require(pack.resources.first { $0.url.hasSuffix("/img/a.svg") })
        #expect(image.etag == "\"v1\"" && image.contentType == "image/svg+xml" && image.size > 0)
    }

    @Test("With the origin stopped, every resource of the pack is served from the store, saying so")
    func servedOffline() async throws {
        let h = try SaveHarness()
        let (pack, _) = try await h.save("/site/article.html")
        var online: [String: Data] = [:]
        for resource in pack.resources where resource.status == 200 {
            let url = try #require(URL(string: resource.url))
            var request = URLRequest(url: url)
            request.cachePolicy = .returnCacheDataDontLoad
            online[resource.url] = try await h.cache.data(for: request).data
        }
        h.site.origin.stop()
        for resource in pack.resources {
            let url = try #require(URL(string: resource.url))
            let result = try await h.cache.data(for: URLRequest(url: url))
            #expect(result.statusCode == 200, "\(resource.url)")
            #expect(result.outcome == .stale, "\(resource.url)")
            #expect(result.cacheStatus.fieldValue.contains("detail=saved-offline"), "\(resource.url)")
            // A redirect is followed to its saved target.
            let expected =
                resource.status == 200 ? online[resource.url] : online[h.site.url("/site/img/redirected.svg")]
            #expect(result.data == expected, "\(resource.url)")
        }
    }

    @Test("--depth 1 saves linked pages of the same origin with what they need; --max-bytes skips a large file")
    func depthAndSizeLimit() async throws {
        let h = try SaveHarness()
        var options = SaveOptions()
        options.depth = 1
        options.maximumResourceSize = 100_000
        options.name = "article and links"
        let (pack, _) = try await h.save("/site/article.html", options)
        #expect(pack.name == "article and links")
        let paths = h.paths(pack)
        #expect(paths.isSuperset(of: ["/site/page2.html", "/site/img/page2.svg"]))
        #expect(paths == Set(h.site.articleResources + ["/site/page2.html", "/site/img/page2.svg"]))
        let big = try #require(pack.problems.first { $0.url.hasSuffix("/site/big.bin") })
        #expect(!big.isFailure && big.reason.contains("100000"))
        #expect(try h.cache.entries(for: h.site.origin.url("/site/big.bin")).isEmpty)
        // A link to another origin is not followed.
        #expect(h.site.thirdParty.requests.isEmpty)
    }

    @Test("includesThirdParty saves the other origin's subresource too")
    func thirdParty() async throws {
        let h = try SaveHarness()
        var options = SaveOptions()
        options.includesThirdParty = true
        let (pack, _) = try await h.save("/site/article.html", options)
        #expect(h.paths(pack).contains("http://127.0.0.1:\(h.site.thirdParty.port)/third-party.svg"))
        #expect(pack.problems.map(\.url) == [h.site.url("/site/img/missing.svg")])
    }

    @Test(
        "A Latin-1 page, by Content-Type or by <meta>, refers to café.svg (HTML §13.2.3.1)",
        arguments: ["/site/latin1.html", "/site/latin1-meta.html"])
    func latin1(path: String) async throws {
        let h = try SaveHarness()
        let (pack, _) = try await h.save(path)
        #expect(h.paths(pack) == [path, "/site/img/caf%C3%A9.svg"])
        #expect(pack.isComplete)
    }

    @Test("A charset libxml2 does not know falls back to sniffing; links, bases and srcset are read as HTML says")
    func documentDetails() throws {
        let html = Array(
            """
            <img srcset="a.png 1x, b,c.png 2x, d.png, e.png (x, y) 3x"><base href="sub/"><base href="ignored/">
            <a href="p.html#frag">p</a><a href="p.html">again</a><img src="#only-fragment"><img src=" ">
            <img src="blob:http://x/1"><img src="javascript:alert(1)"><img src="mailto:a@b">
            """.utf8)
        let references = try HTMLReferences(
            parsing: html, url: try #require(URL(string: "http://127.0.0.1:9/dir/page.html")),
            charset: "no-such-charset")
        #expect(references.baseURL.absoluteString == "http://127.0.0.1:9/dir/sub/")
        #expect(
            references.subresources.map(\.url.absoluteString)
                == ["a.png", "b,c.png", "d.png", "e.png"].map { "http://127.0.0.1:9/dir/sub/" + $0 })
        #expect(references.links.map(\.absoluteString) == ["http://127.0.0.1:9/dir/sub/p.html"])
    }

    @Test("Malformed HTML is read as a browser reads it: every image found")
    func malformed() async throws {
        let h = try SaveHarness()
        let (pack, _) = try await h.save("/site/malformed.html")
        #expect(h.paths(pack) == ["/site/malformed.html", "/site/img/m1.svg", "/site/img/m2.svg", "/site/img/m3.svg"])
    }

    @Test("A page that cannot be fetched is an error, and no pack is recorded")
    func pageFails() async throws {
        let h = try SaveHarness()
        let save = h.cache.savePage(h.site.origin.url("/site/nothing-here.html"))
        await #expect(throws: SavePageError.self) { try await save.pack }
        #expect(try h.cache.packs().isEmpty)
    }

    @Test("Packs are listed; removing one removes what no other pack holds")
    func listAndRemove() async throws {
        let h = try SaveHarness()
        var named = SaveOptions()
        named.name = "second"
        _ = try await h.save("/site/article.html")
        _ = try await h.save("/site/page2.html", named)
        let packs = try h.cache.packs()
        #expect(packs.map(\.name) == [h.site.url("/site/article.html"), "second"])
        // Packs are records the cache keeps for itself, not entries.
        #expect(try h.cache.entries().allSatisfy { !$0.url.hasPrefix("httpcache:") })
        let removed = try #require(try h.cache.removePack(named: "second"))
        #expect(Set(removed) == [h.site.url("/site/page2.html"), h.site.url("/site/img/page2.svg")])
        #expect(try h.cache.entries(for: h.site.origin.url("/site/page2.html")).isEmpty)
        #expect(try h.cache.removePack(named: "second") == nil)
        // The article's resources stay.
        #expect(try h.cache.entries(for: h.site.article).allSatisfy(\.isPinned))
        let article = try #require(try h.cache.pack(named: h.site.url("/site/article.html")))
        #expect(try h.cache.removePack(named: article.name)?.count == article.resources.count)
        #expect(try h.cache.entries().isEmpty && h.cache.packs().isEmpty)
    }

    @Test("Saving again under the same name replaces the pack")
    func saveAgain() async throws {
        let h = try SaveHarness()
        var options = SaveOptions()
        options.name = "p"
        _ = try await h.save("/site/page2.html", options)
        _ = try await h.save("/site/malformed.html", options)
        let pack = try #require(try h.cache.pack(named: "p"))
        #expect(h.paths(pack).contains("/site/malformed.html"))
        #expect(try h.cache.entries(for: h.site.origin.url("/site/page2.html")).isEmpty)
    }
}

/// A page decides where its references and their redirects lead; the user decides which hosts a
/// save may read. A redirect to another origin is a third-party resource, checked before its
/// target is requested (RFC 9110 §15.4: the client chooses whether to follow a redirect).
@Suite("Saving stays on the page's origin")
struct SaveScopeIntegrationTests {
    /// Nothing of 127.0.0.2, 169.254.169.254 or 0.0.0.0 in the store.
    func storesNothingElsewhere(_ h: SaveHarness, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for entry in try h.cache.entries() {
            let host = URL(string: entry.url)?.host ?? ""
            #expect(host == "127.0.0.1", "\(entry.url) stored", sourceLocation: sourceLocation)
        }
    }

    @Test("A redirect to another origin is skipped for every kind of reference; the other origin is never asked")
    func crossOriginRedirectsAreSkipped() async throws {
        let h = try SaveHarness()
        var options = SaveOptions()
        options.depth = 1
        let (pack, _) = try await h.save("/site/redirects.html", options)
        #expect(h.site.elsewhere.requests.isEmpty, "\(h.site.elsewhere.requests.map(\.path))")
        for name in SampleSite.redirectedReferences {
            let problem = pack.problems.first { $0.url == h.site.url("/site/r/" + name) }
            #expect(problem?.isFailure == false, "\(name)")
            #expect(
                problem?.reason.contains("third-party redirect") == true, "\(name): \(problem?.reason ?? "no report")")
            #expect(problem?.reason.contains("--third-party") == true, "\(name)")
        }
        #expect(h.paths(pack) == ["/site/redirects.html", "/site/linked.css"])
        try storesNothingElsewhere(h)
    }

    @Test("A redirect to 169.254.169.254 or 0.0.0.0 is never requested, even with --third-party")
    func linkLocalRedirectsAreNeverFollowed() async throws {
        for thirdParty in [false, true] {
            let h = try SaveHarness()
            var options = SaveOptions()
            options.includesThirdParty = thirdParty
            let (pack, _) = try await h.save("/site/redirects.html", options)
            for name in ["metadata.svg", "zero.svg"] {
                let problem = pack.problems.first { $0.url == h.site.url("/site/r/" + name) }
                #expect(
                    problem?.reason.contains("link-local or unspecified") == true,
                    "\(name): \(problem?.reason ?? "no report")")
            }
            // The fence saw no attempt to leave loopback, and 0.0.0.0 (this machine) was not asked.
            #expect(h.fence.refused.isEmpty, "\(h.fence.refused)")
            #expect(h.site.origin.count("/site/zero-target.svg") == 0)
        }
    }

    @Test("With includesThirdParty every redirected reference is saved from the other origin")
    func thirdPartyRedirectsAreSaved() async throws {
        let h = try SaveHarness()
        var options = SaveOptions()
        options.depth = 1
        options.includesThirdParty = true
        let (pack, _) = try await h.save("/site/redirects.html", options)
        let saved = h.paths(pack)
        for name in SampleSite.redirectedReferences {
            #expect(
                saved.contains("/site/r/" + name) && saved.contains("\(h.site.elsewhere.baseURL)/\(name)"), "\(name)")
        }
        // What the other origin's frame needs, too.
        #expect(saved.contains("\(h.site.elsewhere.baseURL)/secret.svg"))
        #expect(Set(pack.problems.map(\.url)) == [h.site.url("/site/r/metadata.svg"), h.site.url("/site/r/zero.svg")])
    }

    @Test("A page that redirects to another origin is not saved without includesThirdParty, and says why")
    func pageRedirectingElsewhere() async throws {
        let h = try SaveHarness()
        let save = h.cache.savePage(h.site.origin.url("/site/r/page.html"))
        do {
            _ = try await save.pack
            Issue.record("saved")
        } catch let error as SavePageError {
            #expect(error.reason.contains("third-party redirect") && error.reason.contains("--third-party"))
        }
        #expect(h.site.elsewhere.requests.isEmpty)
        #expect(try h.cache.packs().isEmpty)
        try storesNothingElsewhere(h)
        var options = SaveOptions()
        options.includesThirdParty = true
        let (pack, _) = try await h.save("/site/r/page.html", options)
        #expect(
            h.paths(pack) == [
                "/site/r/page.html", "\(h.site.elsewhere.baseURL)/page.html", "\(h.site.elsewhere.baseURL)/secret.svg",
            ])
    }

    @Test("A page that redirects in a loop is an error: no pack")
    func redirectLoop() async throws {
        let h = try SaveHarness()
        let save = h.cache.savePage(h.site.origin.url("/site/r/loop.html"))
        do {
            _ = try await save.pack
            Issue.record("saved")
        } catch let error as SavePageError {
            #expect(error.reason.contains("too many redirects"), "\(error.reason)")
        }
        #expect(try h.cache.packs().isEmpty)
    }

    @Test("URLs are resolved as a browser resolves them: backslash, tab, numeric hosts; file: and ftp: reported")
    func browserResolution() async throws {
        let h = try SaveHarness()
        let (pack, _) = try await h.save("/site/resolution.html")
        #expect(h.site.elsewhere.requests.isEmpty)
        #expect(Set(h.site.origin.requests.map(\.path)) == Set(h.site.resolvedPaths))
        #expect(pack.resources.count == h.site.resolvedPaths.count)
        let skipped = pack.problems.filter { !$0.isFailure }.map(\.url)
        #expect(Set(skipped) == ["file:///etc/passwd", "ftp://127.0.0.1/x.svg"])
        #expect(pack.problems.allSatisfy { $0.reason.contains("only http and https") })
    }
}

@Suite("Refreshing an offline pack")
struct PackRefreshTests {
    @Test("Only what changed is downloaded; the rest is asked for conditionally (RFC 9110 §13.1.2)")
    func downloadsOnlyWhatChanged() async throws {
        let h = try SaveHarness()
        let (saved, _) = try await h.save("/site/article.html")
        let beforeImage = try await h.cache.data(for: URLRequest(url: h.site.origin.url("/site/img/a.svg"))).data
        h.site.change("/site/img/a.svg")
        h.site.change("/site/css/main.css")
        h.site.origin.clearRecords()
        let report = try await h.cache.refreshPack(named: saved.name)
        #expect(Set(report.changed) == [h.site.url("/site/img/a.svg"), h.site.url("/site/css/main.css")])
        #expect(report.added.isEmpty && report.removed.isEmpty)
        #expect(report.unchanged.count == saved.resources.count - 2)
        // The origin's log: a conditional request for every other resource, answered 304.
        for resource in saved.resources where resource.status == 200 {
            let path = resource.url.replacingOccurrences(of: h.site.origin.baseURL, with: "")
            let requests = h.site.origin.requests.filter { h.site.origin.baseURL + $0.target == resource.url }
            #expect(requests.count == 1, "\(path)")
            #expect(requests.first?.header("If-None-Match") == "\"v1\"", "\(path)")
        }
        let pack = try #require(try h.cache.pack(named: saved.name))
        #expect(pack.resources.first { $0.url.hasSuffix("/img/a.svg") }?.etag == "\"v2\"")
        #expect(pack.resources.count == saved.resources.count)
        // Offline, the new version is served.
        h.site.origin.stop()
        let image = try await h.cache.data(for: URLRequest(url: h.site.origin.url("/site/img/a.svg")))
        #expect(image.data != beforeImage && image.cacheStatus.fieldValue.contains("detail=saved-offline"))
        #expect(String(decoding: image.data, as: UTF8.self).contains("hsl(") && image.statusCode == 200)
    }

    @Test("A resource that now redirects to another origin is not followed by a refresh; it leaves the pack")
    func refreshDoesNotFollowCrossOriginRedirects() async throws {
        let h = try SaveHarness()
        let (saved, _) = try await h.save("/site/article.html")
        let location = "\(h.site.elsewhere.baseURL)/redirected.svg"
        h.site.origin.route("/site/img/redirect.svg") { _ in
            LoopbackOrigin.Response(status: 302, headers: [("Location", location)], body: "")
        }
        let report = try await h.cache.refreshPack(named: saved.name)
        #expect(h.site.elsewhere.requests.isEmpty)
        let problem = report.pack.problems.first { $0.url == h.site.url("/site/img/redirect.svg") }
        #expect(problem?.reason.contains("third-party redirect") == true, "\(problem?.reason ?? "no report")")
        #expect(!report.pack.resources.contains { $0.url.hasSuffix("/img/redirect.svg") })
        for entry in try h.cache.entries() { #expect(URL(string: entry.url)?.host == "127.0.0.1", "\(entry.url)") }
    }

    @Test("A refresh that cannot finish changes nothing: the old version stays whole")
    func interruptedRefreshKeepsOldVersion() async throws {
        let h = try SaveHarness()
        let (saved, _) = try await h.save("/site/article.html")
        var before: [String: Data] = [:]
        for resource in saved.resources where resource.status == 200 {
            var request = URLRequest(url: try #require(URL(string: resource.url)))
            request.cachePolicy = .returnCacheDataDontLoad
            before[resource.url] = try await h.cache.data(for: request).data
        }
        h.site.change("/site/img/a.svg")
        h.site.change("/site/css/main.css")
        // The refresh is cancelled while the origin holds one resource back.
        h.site.delay("/site/media/sound.ogg", seconds: 30)
        let refresh = Task { try await h.cache.refreshPack(named: saved.name) }
        try await Task.sleep(for: .milliseconds(1500))
        refresh.cancel()
        _ = await refresh.result
        h.site.origin.stop()
        for (url, body) in before {
            let served = try await h.cache.data(for: URLRequest(url: try #require(URL(string: url))))
            #expect(served.data == body, "\(url) changed")
        }
        #expect(try h.cache.pack(named: saved.name) == saved)
    }
}
