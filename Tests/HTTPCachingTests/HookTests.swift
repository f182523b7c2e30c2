import CacheSemantics
import CacheStorage
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Coalescing, hooks, rules and the manifest")
struct HookTests {
    /// 20 concurrent identical requests make one origin request; the others wait for it
    /// and are answered from what it stored (RFC 9211 `collapsed`).
    @Test func twentyConcurrentRequestsMakeOne() async throws {
        let h = try Harness()
        h.origin.route("/slow") { _ in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: "shared", delay: 0.2)
        }
        let results = try await withThrowingTaskGroup(of: CachedResponse.self) { group in
            for _ in 0..<20 { group.addTask { try await h.get("/slow") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(h.origin.count("/slow") == 1)
        #expect(results.allSatisfy { $0.text == "shared" && $0.statusCode == 200 })
        #expect(results.filter(\.collapsed).count == 19)
        #expect(results.allSatisfy { $0.outcome == .miss })
        #expect(h.cache.statistics.collapsed == 19)
    }

    /// Seed 000: a will-store hook forces `max-age=60` on a response with no Cache-Control.
    @Test func willStoreForcesLifetime() async throws {
        let h = try Harness {
            $0.willStore = { candidate in
                candidate.hasCachingFields
                    ? .store : StoreChoice(fields: candidate.fields(withCacheControl: "max-age=60"))
            }
        }
        h.serve("/plain", body: "no caching fields")
        let first = try await h.get("/plain")
        #expect(first.cacheStatus.stored == true)
        h.clock.advance(by: 30)
        #expect(try await h.get("/plain").outcome == .hit)
        h.clock.advance(by: 60)
        #expect(try await h.get("/plain").outcome == .miss)
    }

    /// Memory-only entries are served but never reach the disk: another cache on the same
    /// directory does not see them.
    @Test func memoryOnlyNeverOnDisk() async throws {
        let h = try Harness { $0.willStore = { _ in .memoryOnly } }
        h.serve("/mem", [("Cache-Control", "max-age=60")], body: "volatile")
        _ = try await h.get("/mem")
        #expect(try await h.get("/mem").outcome == .hit)
        #expect(h.cache.totals.disk?.entries == 0)
        #expect(h.cache.totals.memory?.entries == 1)
        #expect(try h.cache.entries(for: h.origin.url("/mem")).first?.isMemoryOnly == true)
        let other = try Harness(directory: h.directory)
        #expect(try other.cache.entries().isEmpty)
    }

    /// A hook's refusal is honoured and says so.
    @Test func willStoreRefuses() async throws {
        let h = try Harness { $0.willStore = { _ in .doNotStore } }
        h.serve("/no", [("Cache-Control", "max-age=60")])
        let first = try await h.get("/no")
        #expect(first.cacheStatus.stored == false)
        #expect(first.reasons.contains { $0.description.contains("will-store hook refused") })
        #expect(try await h.get("/no").outcome == .miss)
    }

    /// userInfo is kept with the entry, returned on hits, and read by another cache
    /// instance on the same directory.
    @Test func userInfoRoundTrip() async throws {
        let h = try Harness {
            $0.willStore = { candidate in
                StoreChoice(userInfo: Data("tag:\(candidate.response.statusCode)".utf8))
            }
        }
        h.serve("/u", [("Cache-Control", "max-age=60")])
        let miss = try await h.get("/u")
        #expect(miss.userInfo == Data("tag:200".utf8))
        let hit = try await h.get("/u")
        #expect(hit.outcome == .hit && hit.userInfo == Data("tag:200".utf8))
        let other = try Harness(directory: h.directory, clock: h.clock)
        let elsewhere = try await other.cache.data(for: URLRequest(url: h.origin.url("/u")))
        #expect(elsewhere.outcome == .hit && elsewhere.userInfo == Data("tag:200".utf8))
    }

    /// The key hook: requests differing only in a volatile query item share one entry.
    @Test func keyHookDropsVolatileQueryItems() async throws {
        let h = try Harness { $0.cacheKey = { RequestKey.dropping(queryItems: ["_ts"], from: $0) } }
        h.serve("/k", [("Cache-Control", "max-age=60")])
        _ = try await h.get("/k?id=1&_ts=100")
        #expect(try await h.get("/k?id=1&_ts=200").outcome == .hit)
        #expect(try await h.get("/k?id=2&_ts=200").outcome == .miss)
    }

    /// Opt-in keying of a POST by its body (GraphQL-style queries): the same body is a hit,
    /// another body a miss, and such a POST invalidates nothing.
    @Test func postKeyedByBody() async throws {
        let h = try Harness {
            $0.cacheKey = { request in
                request.url.map { RequestKey(url: $0, includesBody: request.url?.path == "/graphql") }
            }
        }
        h.origin.route("/graphql") { request in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: request.body)
        }
        let query = Data(#"{"query":"{ me { id } }"}"#.utf8)
        let first = try await h.get("/graphql", method: "POST", body: query)
        let second = try await h.get("/graphql", method: "POST", body: query)
        let other = try await h.get("/graphql", method: "POST", body: Data(#"{"query":"{ you }"}"#.utf8))
        #expect(first.outcome == .miss && second.outcome == .hit && second.data == query)
        #expect(other.outcome == .miss)
        #expect(h.origin.count("/graphql") == 2)
        #expect(h.origin.requests(to: "/graphql").allSatisfy { $0.method == "POST" })
    }

    /// URL rules: never cache, force a lifetime, pin.
    @Test func urlRules() async throws {
        let h = try Harness {
            $0.rules = [
                CacheRule("*/live/*", .neverCache),
                CacheRule("*/forced", .forceLifetime(seconds: 300)),
                CacheRule("*/pinned", .pin),
            ]
        }
        h.serve("/live/score", [("Cache-Control", "max-age=60")])
        h.serve("/forced", [("Cache-Control", "no-cache")])
        h.serve("/pinned", [("Cache-Control", "max-age=60")])
        let live = try await h.get("/live/score")
        #expect(live.outcome == .bypass && live.cacheStatus.forward == .bypass)
        #expect(try await h.get("/live/score").outcome == .bypass)
        _ = try await h.get("/forced")
        h.clock.advance(by: 200)
        #expect(try await h.get("/forced").outcome == .hit)
        _ = try await h.get("/pinned")
        #expect(try h.cache.entries(for: h.origin.url("/pinned")).first?.isPinned == true)
        #expect(try h.cache.entries(for: h.origin.url("/forced")).first?.isPinned == false)
    }

    /// A pin set by hand (`setPinned`, `httpcache pin`) is kept when a new 200 replaces the
    /// pinned response: the store carries a variant's pin over to its replacement.
    @Test func aPinIsKeptWhenANewResponseReplacesThePinnedOne() async throws {
        let h = try Harness()
        h.serve("/p", [("Cache-Control", "max-age=60")], body: "v1")
        _ = try await h.get("/p")
        #expect(try h.cache.setPinned(true, url: h.origin.url("/p")) == 1)
        h.clock.advance(by: 120)
        h.serve("/p", [("Cache-Control", "max-age=60")], body: "v2")
        #expect(try await h.get("/p").text == "v2")
        let entries = try h.cache.entries(for: h.origin.url("/p"))
        #expect(entries.count == 1)
        #expect(entries.first?.isPinned == true)
        #expect(try await h.get("/p").text == "v2")
    }

    /// A pattern that starts with `/` matches the request-target, path and query (RFC 9112
    /// §3.2.1's origin-form), on any host: `CacheRule("/live/*", …)` applies to `/live/score`.
    @Test func rulesWithAPathPatternMatchThePathAndQueryOnAnyHost() async throws {
        let h = try Harness {
            $0.rules = [
                CacheRule("/live/*", .neverCache),
                CacheRule("/forced?v=*", .forceLifetime(seconds: 300)),
            ]
        }
        h.serve("/live/score", [("Cache-Control", "max-age=60")])
        h.serve("/forced", [("Cache-Control", "no-cache")])
        #expect(try await h.get("/live/score").outcome == .bypass)
        #expect(try await h.get("/live/score?period=2").outcome == .bypass)
        _ = try await h.get("/forced?v=1")
        _ = try await h.get("/forced")
        h.clock.advance(by: 200)
        #expect(try await h.get("/forced?v=1").outcome == .hit)
        #expect(try await h.get("/forced").outcome != .hit)
    }

    @Test(arguments: [
        ("/live/*", "https://example.com/live/score", true),
        ("/live/*", "http://127.0.0.1:8080/live/score?period=2", true),
        ("/live/*", "https://example.com/archive/live/score", false),
        ("/live", "https://example.com/live?x=1", false),
        ("/", "https://example.com", true),
        ("/?q=*", "https://example.com?q=1", true),
        ("/*.png", "https://user@example.com/a/b.png", true),
        ("/search?q=*", "https://example.com/search?q=swift", true),
        ("/search?q=*", "https://example.com/search", false),
        ("*/live/*", "https://example.com/live/score", true),
        ("https://example.com/live/*", "https://example.com/live/score", true),
        ("https://example.com/live/*", "https://example.org/live/score", false),
    ])
    func urlPatternsMatchTheWholeURLOrWithALeadingSlashTheRequestTarget(
        pattern: String, url: String, matches: Bool
    ) {
        #expect(URLPattern(pattern).matches(url) == matches)
    }

    /// Seed 003: a manifest's NETWORK patterns are never cached; its CACHE URLs are fetched,
    /// pinned and served while the origin is down — even one the origin marked no-store.
    @Test func manifestSections() async throws {
        let h = try Harness()
        h.serve("/app.css", [("Cache-Control", "max-age=60")], body: "css")
        h.serve("/offline.html", [("Cache-Control", "no-store")], body: "offline page")
        h.serve("/api/live", [("Cache-Control", "max-age=60")], body: "live")
        let manifest = try CacheManifest(
            parsing: """
                HTTPCACHE MANIFEST
                # pre-fetched for offline use
                CACHE:
                /app.css
                /offline.html
                NETWORK:
                /api/*
                """, baseURL: URL(string: h.origin.baseURL))
        #expect(manifest.cache.count == 2 && manifest.network.count == 1)
        let report = await h.cache.apply(manifest)
        #expect(report.failed.isEmpty)
        #expect(report.stored.count == 2)
        #expect(try h.cache.entries().allSatisfy(\.isPinned))
        #expect(try await h.get("/api/live").outcome == .bypass)
        #expect(try await h.get("/api/live").outcome == .bypass)

        h.origin.stop()
        h.clock.advance(by: 3600)
        let page = try await h.get("/offline.html")
        #expect(page.outcome == .stale && page.text == "offline page")
        #expect(try await h.get("/app.css").text == "css")
    }

    /// A manifest's CACHE URL promises offline use: one the origin sent with no-cache or
    /// must-revalidate is served when the origin cannot be reached (an appcache served its
    /// CACHE entries whatever their HTTP headers); a 5xx is still passed on, and an entry
    /// nobody saved still gives 504 (RFC 9111 §4.2.4, §5.2.2.2).
    @Test("Saved for offline: pinned CACHE entries with no-cache or must-revalidate are served offline")
    func manifestEntriesServedOfflineWhateverTheirDirectives() async throws {
        let h = try Harness()
        h.serve("/strict.js", [("Cache-Control", "max-age=60, must-revalidate")], body: "strict")
        h.serve("/checked.css", [("Cache-Control", "no-cache"), ("ETag", "\"c\"")], body: "checked")
        h.serve("/unsaved", [("Cache-Control", "max-age=60, must-revalidate")], body: "unsaved")
        let manifest = try CacheManifest(
            parsing: "HTTPCACHE MANIFEST\nCACHE:\n/strict.js\n/checked.css\n", baseURL: URL(string: h.origin.baseURL))
        #expect(await h.cache.apply(manifest).stored.count == 2)
        _ = try await h.get("/unsaved")
        h.clock.advance(by: 3600)
        h.origin.stop()
        for (path, body) in [("/strict.js", "strict"), ("/checked.css", "checked")] {
            let served = try await h.get(path)
            #expect(served.statusCode == 200 && served.text == body, "\(path)")
            #expect(served.field("Cache-Status")?.contains("detail=saved-offline") == true)
            #expect(served.reasons.contains(.savedForOffline(stale: true)))
        }
        #expect(try await h.get("/unsaved").statusCode == 504)
    }

    /// A manifest with an unknown section or a bad URL is refused with the line number.
    @Test func manifestErrors() throws {
        #expect(throws: ManifestError.self) { try CacheManifest(parsing: "CACHE:\n/a") }
        do {
            _ = try CacheManifest(parsing: "HTTPCACHE MANIFEST\nFALLBACK:\n/a /b")
            Issue.record("FALLBACK accepted")
        } catch {
            #expect(error.line == 2)
            #expect(error.description.contains("FALLBACK"))
        }
        do {
            _ = try CacheManifest(parsing: "HTTPCACHE MANIFEST\nCACHE:\n/relative")
            Issue.record("relative URL without a base accepted")
        } catch {
            #expect(error.line == 3)
        }
    }

    /// Inspection: list, remove by URL, prefix and all; pin and unpin.
    @Test func inspection() async throws {
        let h = try Harness()
        for path in ["/a/1", "/a/2", "/b/1"] { h.serve(path, [("Cache-Control", "max-age=60"), ("ETag", "\"e\"")]) }
        for path in ["/a/1", "/a/2", "/b/1"] { _ = try await h.get(path) }
        #expect(try h.cache.entries().count == 3)
        #expect(try h.cache.entries(urlPrefix: h.origin.baseURL + "/a/").count == 2)
        let entry = try #require(try h.cache.entries(for: h.origin.url("/a/1")).first)
        #expect(entry.isFresh && entry.status == 200 && entry.bodySize == 4)
        #expect(entry.facts?.entityTag == EntityTag("\"e\""))
        #expect(try h.cache.setPinned(true, url: h.origin.url("/a/1")) == 1)
        #expect(try h.cache.entries(for: h.origin.url("/a/1")).first?.isPinned == true)
        #expect(try h.cache.setPinned(false, url: h.origin.url("/a/1")) == 1)
        #expect(try h.cache.remove(url: h.origin.url("/b/1")) == 1)
        #expect(try h.cache.remove(urlPrefix: h.origin.baseURL + "/a/") == 2)
        #expect(h.cache.totals.all.entries == 0)
        _ = try await h.get("/a/1")
        try h.cache.removeAll()
        #expect(try h.cache.entries().isEmpty)
    }
}

/// Manifest revisions, as the precache manifests of service-worker tool kits have them.
@Suite("The manifest: revisions per CACHE URL")
struct ManifestRevisionTests {
    @Test("A later manifest fetches again only the URLs whose revision changed, keeps the rest, drops the unlisted")
    func revisions() async throws {
        let h = try Harness()
        for path in ["/a.js", "/b.css", "/c.png", "/d.txt"] {
            h.origin.route(path) { request in
                LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=60"), ("ETag", "\"\(path)\"")], body: "\(path) \(request.path)"
                )
            }
        }
        let first = try CacheManifest(
            parsing: "HTTPCACHE MANIFEST\nCACHE:\n/a.js r1\n/b.css r1\n/c.png\n", baseURL: URL(string: h.origin.baseURL)
        )
        #expect(first.revisions.count == 2)
        let applied = await h.cache.apply(first)
        #expect(applied.stored.count == 3 && applied.failed.isEmpty)
        h.origin.clearRecords()
        h.clock.advance(by: 3600)  // all stale: only a changed revision may go to the origin
        let second = try CacheManifest(
            parsing: "HTTPCACHE MANIFEST\nCACHE:\n/a.js r2\n/b.css r1\n/d.txt r1\n",
            baseURL: URL(string: h.origin.baseURL))
        let report = await h.cache.apply(second)
        #expect(report.unchanged == [h.origin.url("/b.css").absoluteString])
        #expect(report.dropped == [h.origin.url("/c.png").absoluteString])
        #expect(
            Set(report.stored.keys) == [h.origin.url("/a.js").absoluteString, h.origin.url("/d.txt").absoluteString])
        #expect(h.origin.count("/a.js") == 1 && h.origin.requests(to: "/a.js").first?.header("If-None-Match") == nil)
        #expect(h.origin.count("/b.css") == 0 && h.origin.count("/d.txt") == 1)
        #expect(try h.cache.entries(for: h.origin.url("/c.png")).isEmpty)
        let listed = try h.cache.entries().map(\.url)
        #expect(Set(listed) == Set(["/a.js", "/b.css", "/d.txt"].map { h.origin.url($0).absoluteString }))
        #expect(try h.cache.entries().allSatisfy(\.isPinned))
        // The manifest is an offline pack: its URLs with their revisions.
        let pack = try #require(try h.cache.pack(named: HTTPCache.manifestPackName))
        #expect(pack.resources.map(\.url) == ["/a.js", "/b.css", "/d.txt"].map { h.origin.url($0).absoluteString })
        #expect(pack.resources.map(\.revision) == ["r2", "r1", "r1"])
        #expect(pack.resources.map(\.etag) == ["\"/a.js\"", "\"/b.css\"", "\"/d.txt\""])
    }

    @Test("A URL a manifest drops stays while another pack holds it; removing the manifest's pack removes the rest")
    func droppedButHeldByAnotherPack() async throws {
        let h = try Harness()
        for path in ["/shared.css", "/only.js"] {
            h.origin.route(path) { _ in LoopbackOrigin.Response(headers: [("Cache-Control", "no-cache")], body: path) }
        }
        let base = URL(string: h.origin.baseURL)
        _ = await h.cache.apply(try CacheManifest(parsing: "CACHE MANIFEST\n/shared.css\n/only.js\n", baseURL: base))
        try PackRecord.write(
            OfflinePack(
                name: "other", page: h.origin.url("/shared.css").absoluteString, savedAt: 0,
                resources: [
                    OfflinePack.Resource(
                        url: h.origin.url("/shared.css").absoluteString, status: 200, size: 11, savedAt: 0)
                ]),
            to: h.cache.store)
        let report = await h.cache.apply(try CacheManifest(parsing: "CACHE MANIFEST\n", baseURL: base))
        #expect(report.dropped == [h.origin.url("/only.js").absoluteString])
        #expect(try h.cache.entries(for: h.origin.url("/shared.css")).allSatisfy(\.isPinned))
        #expect(try h.cache.entries(for: h.origin.url("/only.js")).isEmpty)
        #expect(try h.cache.removePack(named: "other") == [h.origin.url("/shared.css").absoluteString])
    }

    @Test("A CACHE line with more than a URL and a revision is refused with its line number")
    func tooManyWords() {
        do {
            _ = try CacheManifest(
                parsing: "HTTPCACHE MANIFEST\nCACHE:\n/a r1 extra\n", baseURL: URL(string: "http://h/"))
            Issue.record("accepted")
        } catch {
            #expect(error.line == 3 && error.message.contains("at most one revision"))
        }
    }
}
