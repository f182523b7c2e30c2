#if os(Linux)
import CacheSystem
import CacheSemantics
import CacheTestSupport
import CachingProxy
import Foundation
import LoopbackOrigin
import Testing

/// RFC 9111 in a shared cache, section by section, through a real `httpcache serve` process in
/// front of a loopback origin: what the client gets, and what reaches the origin. Also the
/// extensions the engine implements: RFC 5861, RFC 8246, RFC 9211 and RFC 9213.
///
/// Each test asserts exact statuses, bodies, origin request counts and the fields that reached
/// the origin, so that each can fail. Time passes only where the rule is about time passing
/// (one test); staleness comes from `max-age=0` or an `Age` sent by the origin instead.
@Suite("Shared-cache conformance of httpcache serve (RFC 9111, 5861, 8246, 9211, 9213)", .timeLimit(.minutes(10)))
struct SharedCacheConformanceTests {
    // MARK: §3 Storing responses

    @Test("RFC 9111 §3: only responses to GET are stored; a POST response with max-age is not reused")
    func postResponseIsNotStored() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/form") { request in
                LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=60")], body: request.method == "POST" ? "posted" : "got")
            }
            let first = try harness.get("/form", method: "POST", body: Array("a=1".utf8))
            #expect(first.status == 200)
            #expect(first.text == "posted")
            #expect(first.cacheStatus == "httpcache; fwd=method; fwd-status=200")
            let second = try harness.get("/form", method: "POST", body: Array("a=2".utf8))
            #expect(second.text == "posted")
            #expect(!second.isHit)
            let get = try harness.get("/form")
            #expect(get.text == "got", "a GET is never answered with a POST's response")
            #expect(get.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            #expect(harness.origin.requests(to: "/form").map(\.method) == ["POST", "POST", "GET"])
            #expect(harness.origin.requests(to: "/form").map(\.body) == [Array("a=1".utf8), Array("a=2".utf8), []])
        }
    }

    @Test(
        "RFC 9111 §3: a 302 without explicit freshness is not stored (not heuristically cacheable); with max-age it is")
    func redirectNeedsExplicitFreshness() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/moved", status: 302, [("Location", "/there"), ("Last-Modified", httpDate(-864_000))])
            harness.serve("/moved-explicitly", status: 302, [("Location", "/there"), ("Cache-Control", "max-age=60")])
            let first = try harness.get("/moved")
            #expect(first.status == 302)
            #expect(first["Location"] == "/there")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=302; stored=?0")
            let second = try harness.get("/moved")
            #expect(second.status == 302)
            #expect(!second.isHit)
            #expect(harness.origin.count("/moved") == 2)

            _ = try harness.get("/moved-explicitly")
            let hit = try harness.get("/moved-explicitly")
            #expect(hit.status == 302)
            #expect(hit.isHit)
            #expect(hit["Location"] == "/there")
            #expect(harness.origin.count("/moved-explicitly") == 1)
        }
    }

    @Test("RFC 9111 §3, §4.2.2: a 200 with only Last-Modified is stored with a heuristic lifetime of 10% of its age")
    func heuristicFreshness() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            // Modified five days ago: 10% is half a day (below the engine's one-day cap).
            harness.serve("/old", [("Last-Modified", httpDate(-432_000))], body: "old news")
            _ = try harness.get("/old")
            let hit = try harness.get("/old")
            #expect(hit.status == 200)
            #expect(hit.text == "old news")
            #expect(hit.isHit)
            let ttl = try #require(Self.ttl(hit))
            #expect((43_190...43_200).contains(ttl), "half a day less the response's age")
            #expect(harness.origin.count("/old") == 1)
        }
    }

    @Test("RFC 9111 §3: a 404 with max-age is stored and served with its status and body")
    func notFoundWithMaxAge() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/missing", status: 404, [("Cache-Control", "max-age=60")], body: "no such thing")
            _ = try harness.get("/missing")
            let hit = try harness.get("/missing")
            #expect(hit.status == 404)
            #expect(hit.text == "no such thing")
            #expect(hit.isHit)
            #expect(harness.origin.count("/missing") == 1)
        }
    }

    @Test(
        "RFC 9111 §3, §4; RFC 9110 §15.5.13, §15.5.17: one client's 416 or 412 is neither stored nor put in place of the stored 200"
    )
    func requestOutcomesNotStored() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            // An origin that evaluates Range and If-Match, and makes every answer fresh.
            harness.origin.route("/doc") { request in
                let fresh = ("Cache-Control", "max-age=100")
                if request.header("Range") != nil {
                    return LoopbackOrigin.Response(
                        status: 416, headers: [fresh, ("Content-Range", "bytes */8")], body: "")
                }
                if let condition = request.header("If-Match"), condition != "\"v1\"" {
                    return LoopbackOrigin.Response(status: 412, headers: [fresh], body: "")
                }
                return LoopbackOrigin.Response(headers: [fresh, ("ETag", "\"v1\"")], body: "the page")
            }
            // Not yet stored: the 416 and the 412 go to their own clients only.
            let unsatisfiable = try harness.get("/doc", [("Range", "bytes=100-")])
            #expect(unsatisfiable.status == 416)
            #expect(unsatisfiable.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=416; stored=?0")
            let failed = try harness.get("/doc", [("If-Match", "\"old\"")])
            #expect(failed.status == 412)
            let page = try harness.get("/doc")
            #expect(page.status == 200)
            #expect(page.text == "the page")
            #expect(page.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            // Stored: a 416 or 412 fetched past it (no-cache) does not take its place.
            _ = try harness.get("/doc", [("Range", "bytes=100-"), ("Cache-Control", "no-cache")])
            _ = try harness.get("/doc", [("If-Match", "\"old\""), ("Cache-Control", "no-cache")])
            let hit = try harness.get("/doc")
            #expect(hit.status == 200)
            #expect(hit.text == "the page")
            #expect(hit.isHit)
            #expect(harness.origin.count("/doc") == 5)
        }
    }

    @Test(
        "RFC 9111 §3.3, §3.4: a 206 that holds every byte (a browser's media request, bytes=0-) is stored as the complete 200"
    )
    func wholePartIsStoredComplete() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let media = "0123456789abcdef"
            harness.origin.route("/media") { request in
                var fields = [("Cache-Control", "max-age=100"), ("ETag", "\"m1\""), ("Content-Type", "audio/ogg")]
                guard request.header("Range") == "bytes=0-" else {
                    return LoopbackOrigin.Response(headers: fields, body: media)
                }
                fields.append(("Content-Range", "bytes 0-15/16"))
                return LoopbackOrigin.Response(status: 206, headers: fields, body: media)
            }
            let first = try harness.get("/media", [("Range", "bytes=0-")])
            #expect(first.status == 206)
            #expect(first.text == media)
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=206; stored")
            let again = try harness.get("/media", [("Range", "bytes=0-")])
            #expect(again.status == 206 && again.isHit && again.text == media)
            #expect(again["Content-Range"] == "bytes 0-15/16")
            let seek = try harness.get("/media", [("Range", "bytes=10-")])
            #expect(seek.status == 206 && seek.isHit && seek.text == "abcdef")
            let whole = try harness.get("/media")
            #expect(whole.status == 200 && whole.isHit && whole.text == media)
            #expect(whole["Content-Range"] == nil)
            #expect(harness.origin.count("/media") == 1)
        }
    }

    @Test("RFC 9111 §3, §5.2.2.5: a response with no-store is not stored")
    func responseNoStore() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/secret", [("Cache-Control", "no-store, max-age=60")], body: "secret")
            let first = try harness.get("/secret")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored=?0")
            let second = try harness.get("/secret")
            #expect(second.text == "secret")
            #expect(!second.isHit)
            #expect(harness.origin.count("/secret") == 2)
        }
    }

    @Test("RFC 9111 §5.2.1.5: the response to a request with no-store is not stored; a stored one may still answer it")
    func requestNoStore() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/r", [("Cache-Control", "max-age=60")], body: "r")
            let first = try harness.get("/r", [("Cache-Control", "no-store")])
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored=?0")
            let second = try harness.get("/r")
            #expect(second.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            let third = try harness.get("/r", [("Cache-Control", "no-store")])
            #expect(third.isHit, "no-store in a request does not apply to the already stored response")
            #expect(third.text == "r")
            #expect(harness.origin.count("/r") == 2)
        }
    }

    @Test("RFC 9111 §3, §5.2.2.7: a response with private is never stored in a shared cache")
    func privateNotStored() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/mine", [("Cache-Control", "private, max-age=60")], body: "mine")
            let first = try harness.get("/mine")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored=?0")
            let second = try harness.get("/mine")
            #expect(second.text == "mine")
            #expect(!second.isHit)
            #expect(harness.origin.count("/mine") == 2)
        }
    }

    @Test("RFC 9111 §3.1, §5.2.2.7: private=\"Set-Cookie\": the response is stored without the named field")
    func qualifiedPrivate() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve(
                "/page",
                [
                    ("Cache-Control", "max-age=60, private=\"Set-Cookie\""), ("Set-Cookie", "session=alice"),
                    ("X-Shared", "yes"),
                ], body: "page")
            let first = try harness.get("/page")
            #expect(first["Set-Cookie"] == "session=alice", "the user it was meant for gets it")
            let hit = try harness.get("/page")
            #expect(hit.isHit)
            #expect(hit.text == "page")
            #expect(hit["Set-Cookie"] == nil, "not stored, so never sent to another user")
            #expect(hit["X-Shared"] == "yes")
            #expect(harness.origin.count("/page") == 1)
        }
    }

    @Test("RFC 9111 §3.1, §5.2.2.4: no-cache=\"X-Secret\": the named field is not sent on a reuse without revalidation")
    func qualifiedNoCache() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve(
                "/doc", [("Cache-Control", "max-age=60, no-cache=\"X-Secret\""), ("X-Secret", "s3"), ("X-Other", "o")],
                body: "doc")
            let first = try harness.get("/doc")
            #expect(first["X-Secret"] == "s3")
            let hit = try harness.get("/doc")
            #expect(hit.isHit, "qualified no-cache does not forbid reuse of the rest")
            #expect(hit["X-Secret"] == nil)
            #expect(hit["X-Other"] == "o")
            #expect(harness.origin.count("/doc") == 1)
        }
    }

    @Test(
        "RFC 9111 §4, §5.2.2.4: a response with no-cache is validated before every reuse, and never served stale when disconnected"
    )
    func responseNoCache() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/nc") { request in
                request.header("If-None-Match") == "\"n\""
                    ? LoopbackOrigin.Response(status: 304, headers: [("ETag", "\"n\"")])
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60, no-cache"), ("ETag", "\"n\"")], body: "n")
            }
            _ = try harness.get("/nc")
            for _ in 0..<2 {
                let validated = try harness.get("/nc")
                #expect(validated.text == "n")
                #expect(validated.cacheStatus?.hasPrefix("httpcache; fwd=stale; fwd-status=304; stored") == true)
                #expect(harness.origin.requests(to: "/nc").last?.header("If-None-Match") == "\"n\"")
            }
            #expect(harness.origin.count("/nc") == 3)
            harness.origin.stop()
            let disconnected = try harness.get("/nc")
            #expect(disconnected.status == 504)
            #expect(disconnected.text != "n")
        }
    }

    @Test(
        "RFC 9111 §3.5: a response to a request with Authorization is stored only with public, s-maxage or must-revalidate",
        arguments: [
            ("max-age=60", false), ("public, max-age=60", true), ("s-maxage=60", true),
            ("max-age=60, must-revalidate", true),
        ])
    func authorization(cacheControl: String, stored: Bool) async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/account", [("Cache-Control", cacheControl)], body: "account")
            let credentials = [("Authorization", "Basic YWxpY2U6c2VjcmV0")]
            let first = try harness.get("/account", credentials)
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored" + (stored ? "" : "=?0"))
            let second = try harness.get("/account", credentials)
            #expect(second.text == "account")
            #expect(second.isHit == stored)
            #expect(harness.origin.count("/account") == (stored ? 1 : 2))
            #expect(
                harness.origin.requests(to: "/account").allSatisfy {
                    $0.header("Authorization") == "Basic YWxpY2U6c2VjcmV0"
                })
        }
    }

    @Test("RFC 9111 §3, §5.2.2.3: must-understand with an understood status overrides no-store")
    func mustUnderstandUnderstoodStatus() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/mu", [("Cache-Control", "must-understand, no-store, max-age=60")], body: "understood")
            let first = try harness.get("/mu")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            let hit = try harness.get("/mu")
            #expect(hit.isHit)
            #expect(hit.text == "understood")
            #expect(harness.origin.count("/mu") == 1)
        }
    }

    @Test(
        "RFC 9111 §3, §5.2.2.3: must-understand with a status the cache does not know: not stored (stored without it)")
    func mustUnderstandUnknownStatus() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/unknown", status: 299, [("Cache-Control", "max-age=60, must-understand")], body: "odd")
            harness.serve("/unknown-plain", status: 299, [("Cache-Control", "max-age=60")], body: "odd")
            let first = try harness.get("/unknown")
            #expect(first.status == 299)
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=299; stored=?0")
            let second = try harness.get("/unknown")
            #expect(second.status == 299)
            #expect(!second.isHit)
            #expect(harness.origin.count("/unknown") == 2)
            // The same status with explicit freshness and no must-understand is stored (§3).
            _ = try harness.get("/unknown-plain")
            let hit = try harness.get("/unknown-plain")
            #expect(hit.status == 299)
            #expect(hit.isHit)
            #expect(harness.origin.count("/unknown-plain") == 1)
        }
    }

    // MARK: §3.1 Storing header fields

    @Test("RFC 9111 §3.1; RFC 9110 §7.6.1: fields named by Connection are neither forwarded nor stored")
    func connectionNominatedFields() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve(
                "/hop",
                [("Cache-Control", "max-age=60"), ("Connection", "X-Hop"), ("X-Hop", "one hop"), ("X-Kept", "yes")],
                body: "hop")
            let first = try harness.get("/hop")
            #expect(first["X-Hop"] == nil)
            #expect(first["Connection"]?.lowercased().contains("x-hop") != true)
            #expect(first["X-Kept"] == "yes")
            let hit = try harness.get("/hop")
            #expect(hit.isHit)
            #expect(hit["X-Hop"] == nil)
            #expect(hit["Connection"]?.lowercased().contains("x-hop") != true)
            #expect(hit["X-Kept"] == "yes")
            #expect(hit.text == "hop")
        }
    }

    // MARK: §3.2, §4.3.4 Updating stored fields from a 304

    @Test(
        "RFC 9111 §3.2, §4.3.4: a 304's fields replace the stored ones, except Content-Length; the stored body is served"
    )
    func notModifiedUpdatesFields() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/fields") { request in
                if request.header("If-None-Match") == "\"v1\"" {
                    return LoopbackOrigin.Response(
                        status: 304,
                        headers: [
                            ("ETag", "\"v1\""), ("Cache-Control", "max-age=60"), ("X-Version", "2"),
                            ("Content-Length", "99"),
                        ])
                }
                return LoopbackOrigin.Response(
                    headers: [
                        ("ETag", "\"v1\""), ("Cache-Control", "max-age=0"), ("X-Version", "1"), ("X-Untouched", "kept"),
                    ],
                    body: "hello")
            }
            _ = try harness.get("/fields")
            let revalidated = try harness.get("/fields")
            #expect(revalidated.status == 200)
            #expect(revalidated.text == "hello")
            #expect(revalidated["Content-Length"] == "5")
            #expect(revalidated["X-Version"] == "2")
            #expect(revalidated["Cache-Control"] == "max-age=60")
            #expect(revalidated["X-Untouched"] == "kept", "fields the 304 lacks stay")
            #expect(revalidated.cacheStatus?.hasPrefix("httpcache; fwd=stale; fwd-status=304; stored; ttl=") == true)
            let hit = try harness.get("/fields")
            #expect(hit.isHit, "the 304's max-age=60 now applies")
            #expect(hit.text == "hello")
            #expect(hit["Content-Length"] == "5")
            #expect(hit["X-Version"] == "2")
            let requests = harness.origin.requests(to: "/fields")
            #expect(requests.count == 2)
            #expect(requests.last?.header("If-None-Match") == "\"v1\"")
        }
    }

    @Test(
        "RFC 9111 §3.1, §3.2, §5.2.2.4, §5.2.2.7: a 304 does not bring fields the stored private= or no-cache= names into storage"
    )
    func notModifiedKeepsQualifiedFieldsOut() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let past = httpDate(-3600)
            let future = httpDate(3600)
            harness.origin.route("/q") { request in
                if request.header("If-None-Match") == "\"q\"" {
                    // No Cache-Control: the stored one, with its field names, stays in force.
                    return LoopbackOrigin.Response(
                        status: 304,
                        headers: [
                            ("ETag", "\"q\""), ("Expires", future), ("Set-Cookie", "session=bob"), ("X-Secret", "new"),
                        ])
                }
                return LoopbackOrigin.Response(
                    headers: [
                        ("Cache-Control", "private=\"Set-Cookie\", no-cache=\"X-Secret\""), ("Expires", past),
                        ("ETag", "\"q\""),
                        ("Set-Cookie", "session=alice"), ("X-Secret", "old"),
                    ], body: "q")
            }
            _ = try harness.get("/q")
            let validated = try harness.get("/q")
            #expect(validated.status == 200)
            #expect(validated.text == "q")
            #expect(validated.cacheStatus?.hasPrefix("httpcache; fwd=stale; fwd-status=304; stored") == true)
            let hit = try harness.get("/q")
            #expect(hit.isHit, "fresh now by the 304's Expires")
            #expect(hit["Set-Cookie"] == nil, "Bob's cookie must not reach another user")
            #expect(hit["X-Secret"] == nil, "not to be sent on a reuse without validation")
            #expect(hit["Expires"] == future)
            #expect(harness.origin.count("/q") == 2)
        }
    }

    @Test("RFC 9111 §4.3.4: a 304 updates only the stored variant its strong ETag selects")
    func notModifiedUpdatesOnlyItsVariant() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            Self.routeVariants(harness, answering304With: { language in "\"\(language)\"" })
            _ = try harness.get("/v", [("Accept-Language", "fr")])
            _ = try harness.get("/v", [("Accept-Language", "de")])
            let french = try harness.get("/v", [("Accept-Language", "fr")])
            #expect(french.text == "in fr")
            #expect(french["X-Updated"] == "yes")
            #expect(french.cacheStatus?.hasPrefix("httpcache; fwd=stale; fwd-status=304; stored") == true)
            #expect(harness.origin.requests(to: "/v").last?.header("If-None-Match") == "\"fr\"", "only fr could answer")
            #expect(try harness.get("/v", [("Accept-Language", "fr")]).isHit)
            // The German variant is untouched: still stale, without the 304's field.
            harness.clock.advance(by: 1)
            let german = try harness.get("/v", [("Accept-Language", "de"), ("Cache-Control", "max-stale")])
            #expect(german.text == "in de")
            #expect(german.isHit)
            #expect(german["X-Updated"] == nil)
            #expect(try #require(Self.ttl(german)) < 0)
            #expect(harness.origin.count("/v") == 3)
        }
    }

    @Test("RFC 9111 §4.3.4: a 304 whose strong ETag matches no response the request could select updates none")
    func notModifiedForAnotherVariantUpdatesNothing() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            // Asked about fr, the origin answers 304 with de's tag.
            Self.routeVariants(harness, answering304With: { _ in "\"de\"" })
            _ = try harness.get("/v", [("Accept-Language", "fr")])
            _ = try harness.get("/v", [("Accept-Language", "de")])
            let french = try harness.get("/v", [("Accept-Language", "fr")])
            #expect(french.status == 200)
            #expect(french.text == "in fr")
            #expect(french["X-Updated"] == nil, "the 304 was not applied to fr")
            let requests = harness.origin.requests(to: "/v")
            #expect(requests.count == 4, "the 304 answered nothing stored: asked again without validators")
            #expect(requests[2].header("If-None-Match") == "\"fr\"")
            #expect(requests[3].header("If-None-Match") == nil)
            harness.clock.advance(by: 1)  // de, stale from the start, is stale by a second now
            let german = try harness.get("/v", [("Accept-Language", "de"), ("Cache-Control", "max-stale")])
            #expect(german.text == "in de")
            #expect(german["X-Updated"] == nil, "nor to de, which the request could not select")
            #expect(try #require(Self.ttl(german)) < 0)
            #expect(harness.origin.count("/v") == 4)
        }
    }

    /// `/v` varies on Accept-Language, stale at once, tagged with the language; a conditional
    /// request gets a 304 with the tag `tag(language)`, `max-age=60` and `X-Updated: yes`.
    private static func routeVariants(
        _ harness: ProxyHarness, answering304With tag: @escaping @Sendable (String) -> String
    ) {
        harness.origin.route("/v") { request in
            let language = request.header("Accept-Language") ?? "none"
            if request.header("If-None-Match") != nil {
                return LoopbackOrigin.Response(
                    status: 304,
                    headers: [("ETag", tag(language)), ("Cache-Control", "max-age=60"), ("X-Updated", "yes")])
            }
            return LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=0"), ("Vary", "Accept-Language"), ("ETag", "\"\(language)\"")],
                body: "in \(language)")
        }
    }

    // MARK: §4, §5.1 Age

    @Test("RFC 9111 §4, §4.2.3, §5.1: Age on a hit includes the origin's Age and grows while the response is stored")
    func ageOnHits() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/aged", [("Cache-Control", "max-age=60"), ("Age", "30")], body: "aged")
            let miss = try harness.get("/aged")
            #expect(miss["Age"] == "30", "relayed as received")
            let hit = try harness.get("/aged")
            #expect(hit.isHit)
            // On the proxy's clock no time passed since the response arrived: its Age alone.
            #expect(hit["Age"] == "30")
            #expect(hit.fields.values(named: "Age").count == 1, "replaced, not added")
            harness.clock.advance(by: 7)
            let later = try harness.get("/aged")
            #expect(later.isHit)
            #expect(later["Age"] == "37", "the 7 s it was stored are added")
            #expect(harness.origin.count("/aged") == 1)
        }
    }

    @Test("RFC 9111 §4.2, §4.2.3: a response whose Age exceeds its max-age is stale at once and validated")
    func ageBeyondMaxAgeIsStale() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/too-old", [("Cache-Control", "max-age=60"), ("Age", "120"), ("ETag", "\"x\"")], body: "x")
            let first = try harness.get("/too-old")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            let second = try harness.get("/too-old")
            #expect(!second.isHit)
            #expect(second.cacheStatus == "httpcache; fwd=stale; fwd-status=200; stored")
            let requests = harness.origin.requests(to: "/too-old")
            #expect(requests.count == 2)
            #expect(requests.last?.header("If-None-Match") == "\"x\"")
        }
    }

    @Test("RFC 9111 §4.2.3: a Date 100 s in the past gives an apparent age beyond max-age=60: stale at once")
    func apparentAge() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve(
                "/dated",
                [
                    ("Cache-Control", "max-age=60"), ("ETag", "\"d\""),
                    // 100 s before now on the proxy's clock, however long the machine took to get here.
                    ("Date", HTTPDate.format(Timestamp(secondsSince1970: harness.clock.now() - 100))),
                ], body: "d")
            _ = try harness.get("/dated")
            let second = try harness.get("/dated")
            #expect(!second.isHit)
            #expect(second.cacheStatus == "httpcache; fwd=stale; fwd-status=200; stored")
            #expect(harness.origin.requests(to: "/dated").last?.header("If-None-Match") == "\"d\"")
            #expect(harness.origin.count("/dated") == 2)
        }
    }

    // MARK: §4.1 Vary

    @Test("RFC 9111 §4.1: a response with Vary: * never matches, so is never reused")
    func varyStar() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/star", [("Cache-Control", "max-age=60"), ("Vary", "*")], body: "star")
            _ = try harness.get("/star")
            let second = try harness.get("/star")
            #expect(second.text == "star")
            #expect(!second.isHit)
            #expect(harness.origin.count("/star") == 2)
        }
    }

    @Test("RFC 9111 §4.1: a request without the varied field matches only a response to a request without it")
    func absentVariedFieldIsItsOwnVariant() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/lang") { request in
                LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                    body: "in \(request.header("Accept-Language") ?? "none")")
            }
            #expect(try harness.get("/lang", [("Accept-Language", "fr")]).text == "in fr")
            let bare = try harness.get("/lang")
            #expect(bare.text == "in none")
            #expect(bare.cacheStatus == "httpcache; fwd=vary-miss; fwd-status=200; stored")
            let bareAgain = try harness.get("/lang")
            #expect(bareAgain.isHit)
            #expect(bareAgain.text == "in none")
            let french = try harness.get("/lang", [("Accept-Language", "fr")])
            #expect(french.isHit)
            #expect(french.text == "in fr")
            #expect(harness.origin.requests(to: "/lang").map { $0.header("Accept-Language") } == ["fr", nil])
        }
    }

    @Test("RFC 9111 §4.1: varied fields match across whitespace and line combining")
    func varyNormalization() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/enc") { request in
                LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding")],
                    body: request.headers.filter { $0.name.lowercased() == "accept-encoding" }.map(\.value).joined(
                        separator: "|"))
            }
            #expect(
                try harness.get("/enc", [("Accept-Encoding", "gzip"), ("Accept-Encoding", "br")]).text == "gzip|br")
            let combined = try harness.get("/enc", [("Accept-Encoding", "gzip,   br")])
            #expect(combined.isHit, "two lines combine to the same value (§4.1)")
            #expect(combined.text == "gzip|br")
            let reordered = try harness.get("/enc", [("Accept-Encoding", "BR, gzip")])
            #expect(reordered.isHit, "order and case carry no meaning in Accept-Encoding (RFC 9110 §12.5.3)")
            let other = try harness.get("/enc", [("Accept-Encoding", "br;q=0.5, gzip")])
            #expect(other.text == "br;q=0.5, gzip", "a different value is a different variant")
            #expect(harness.origin.count("/enc") == 2)
        }
    }

    // MARK: §4.2.1 Freshness lifetime

    @Test(
        "RFC 9111 §4.2.1, §5.2.2.10: s-maxage overrides max-age and Expires in a shared cache",
        arguments: ["max-age=0, s-maxage=60", "s-maxage=60 (Expires in the past)"])
    func sMaxAgeMakesFresh(variant: String) async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let fields =
                variant.hasSuffix("(Expires in the past)")
                ? [("Cache-Control", "s-maxage=60"), ("Expires", httpDate(-3600))]
                : [("Cache-Control", variant)]
            harness.serve("/s", fields, body: "shared")
            _ = try harness.get("/s")
            let hit = try harness.get("/s")
            #expect(hit.isHit)
            #expect(hit.text == "shared")
            #expect(harness.origin.count("/s") == 1)
        }
    }

    @Test("RFC 9111 §4.2.1, §5.2.2.10: max-age=60 with s-maxage=0 is stale in a shared cache and validated")
    func sMaxAgeZeroMakesStale() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/s0", [("Cache-Control", "max-age=60, s-maxage=0"), ("ETag", "\"s0\"")], body: "s0")
            _ = try harness.get("/s0")
            let second = try harness.get("/s0")
            #expect(!second.isHit)
            #expect(second.cacheStatus == "httpcache; fwd=stale; fwd-status=200; stored")
            let requests = harness.origin.requests(to: "/s0")
            #expect(requests.count == 2)
            #expect(requests.last?.header("If-None-Match") == "\"s0\"")
        }
    }

    @Test("RFC 9111 §4.2.1, §5.3: max-age overrides Expires, either way")
    func maxAgeOverridesExpires() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/past", [("Cache-Control", "max-age=60"), ("Expires", httpDate(-3600))], body: "past")
            harness.serve(
                "/future", [("Cache-Control", "max-age=0"), ("Expires", httpDate(3600)), ("ETag", "\"f\"")],
                body: "future")
            _ = try harness.get("/past")
            #expect(try harness.get("/past").isHit)
            #expect(harness.origin.count("/past") == 1)
            _ = try harness.get("/future")
            #expect(!(try harness.get("/future").isHit))
            #expect(harness.origin.count("/future") == 2)
            #expect(harness.origin.requests(to: "/future").last?.header("If-None-Match") == "\"f\"")
        }
    }

    @Test("RFC 9111 §4.2.1, §5.3: Expires alone gives freshness; an invalid Expires such as 0 means already expired")
    func expires() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/expires", [("Expires", httpDate(3600))], body: "until later")
            harness.serve("/zero", [("Expires", "0"), ("ETag", "\"z\"")], body: "zero")
            _ = try harness.get("/expires")
            let hit = try harness.get("/expires")
            #expect(hit.isHit)
            #expect((3590...3600).contains(try #require(Self.ttl(hit))))
            let first = try harness.get("/zero")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored", "Expires makes it storable")
            let second = try harness.get("/zero")
            #expect(!second.isHit)
            #expect(second.cacheStatus == "httpcache; fwd=stale; fwd-status=200; stored")
            #expect(harness.origin.requests(to: "/zero").last?.header("If-None-Match") == "\"z\"")
            #expect(harness.origin.count("/zero") == 2)
        }
    }

    // MARK: §4.2.4 Serving stale with the origin down

    @Test("RFC 9111 §4.2.4: a disconnected cache serves a stale response that no directive forbids to serve stale")
    func disconnectedServesStale() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/plain", [("Cache-Control", "max-age=0")], body: "plain stale")
            _ = try harness.get("/plain")
            harness.clock.advance(by: 1)  // stale by a second
            harness.origin.stop()
            let stale = try harness.get("/plain")
            #expect(stale.status == 200)
            #expect(stale.text == "plain stale")
            #expect(stale.isHit)
            #expect(stale.cacheStatus?.hasSuffix("; detail=disconnected") == true, "\(stale.cacheStatus ?? "")")
            #expect(try #require(Self.ttl(stale)) < 0)
        }
    }

    @Test(
        "RFC 9111 §4.2.4, §5.2.2.2, §5.2.2.8, §5.2.2.10: must-revalidate, proxy-revalidate and s-maxage: 504 when disconnected",
        arguments: ["max-age=0, must-revalidate", "max-age=0, proxy-revalidate", "max-age=60, s-maxage=0"])
    func disconnectedMustNotServeStale(cacheControl: String) async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/strict", [("Cache-Control", cacheControl)], body: "strict")
            let first = try harness.get("/strict")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            harness.origin.stop()
            let answer = try harness.get("/strict")
            #expect(answer.status == 504)
            #expect(answer.text != "strict")
            #expect(!answer.isHit)
        }
    }

    // MARK: §4.3 Validation

    @Test("RFC 9111 §4.3.1: validation sends If-None-Match for an ETag and If-Modified-Since for a Last-Modified")
    func validationRequests() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let lastModified = httpDate(-86_400)
            harness.origin.route("/etag") { request in
                request.header("If-None-Match") == "\"e1\""
                    ? LoopbackOrigin.Response(status: 304, headers: [("ETag", "\"e1\"")])
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=0"), ("ETag", "\"e1\"")], body: "tagged")
            }
            harness.origin.route("/dated") { request in
                request.header("If-Modified-Since") == lastModified
                    ? LoopbackOrigin.Response(status: 304, headers: [("Last-Modified", lastModified)])
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=0"), ("Last-Modified", lastModified)], body: "dated")
            }
            _ = try harness.get("/etag")
            let tagged = try harness.get("/etag")
            #expect(tagged.status == 200)
            #expect(tagged.text == "tagged")
            #expect(tagged.cacheStatus?.hasPrefix("httpcache; fwd=stale; fwd-status=304; stored") == true)
            let tagRequest = try #require(harness.origin.requests(to: "/etag").last)
            #expect(tagRequest.header("If-None-Match") == "\"e1\"")
            #expect(tagRequest.header("If-Modified-Since") == nil)

            _ = try harness.get("/dated")
            let dated = try harness.get("/dated")
            #expect(dated.status == 200)
            #expect(dated.text == "dated")
            #expect(dated.cacheStatus?.hasPrefix("httpcache; fwd=stale; fwd-status=304; stored") == true)
            let dateRequest = try #require(harness.origin.requests(to: "/dated").last)
            #expect(dateRequest.header("If-Modified-Since") == lastModified)
            #expect(dateRequest.header("If-None-Match") == nil)
            #expect(harness.origin.count("/etag") == 2)
            #expect(harness.origin.count("/dated") == 2)
        }
    }

    @Test("RFC 9111 §4.3.2: a client's own validators are evaluated against a fresh stored response without the origin")
    func clientValidators() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let lastModified = httpDate(-86_400)
            harness.serve(
                "/c", [("Cache-Control", "max-age=60"), ("ETag", "\"c\""), ("Last-Modified", lastModified)],
                body: "conditional")
            _ = try harness.get("/c")
            let matching = try harness.get("/c", [("If-None-Match", "\"other\", \"c\"")])
            #expect(matching.status == 304)
            #expect(matching.body.isEmpty)
            #expect(matching["ETag"] == "\"c\"")
            let different = try harness.get("/c", [("If-None-Match", "\"other\"")])
            #expect(different.status == 200)
            #expect(different.text == "conditional")
            #expect(different.isHit)
            let unmodified = try harness.get("/c", [("If-Modified-Since", lastModified)])
            #expect(unmodified.status == 304)
            let modified = try harness.get("/c", [("If-Modified-Since", httpDate(-864_000))])
            #expect(modified.status == 200)
            #expect(modified.text == "conditional")
            // If-None-Match takes precedence over If-Modified-Since (RFC 9110 §13.2.2).
            let both = try harness.get("/c", [("If-None-Match", "\"other\""), ("If-Modified-Since", lastModified)])
            #expect(both.status == 200)
            #expect(harness.origin.count("/c") == 1)
        }
    }

    @Test(
        "RFC 9111 §4.3.2, §4.3.4: a 304 answering a client's own validators is relayed and freshens the stored response it selects"
    )
    func clientValidationFreshensStored() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/cv") { request in
                request.header("If-None-Match") == "\"cur\""
                    ? LoopbackOrigin.Response(
                        status: 304,
                        headers: [("ETag", "\"cur\""), ("Cache-Control", "max-age=60"), ("X-Checked", "yes")])
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=0"), ("ETag", "\"cur\"")], body: "current")
            }
            _ = try harness.get("/cv")
            let conditional = try harness.get("/cv", [("If-None-Match", "\"cur\"")])
            #expect(conditional.status == 304)
            #expect(conditional.body.isEmpty)
            #expect(conditional["ETag"] == "\"cur\"")
            #expect(conditional.cacheStatus == "httpcache; fwd=stale; fwd-status=304; stored")
            let request = try #require(harness.origin.requests(to: "/cv").last)
            #expect(request.header("If-None-Match") == "\"cur\"", "the client's own validators are sent")
            // The 304's strong validator selects the stored response: it is freshened (§4.3.4).
            let after = try harness.get("/cv")
            #expect(after.status == 200)
            #expect(after.text == "current")
            #expect(after.isHit)
            #expect(after["X-Checked"] == "yes")
            #expect(harness.origin.count("/cv") == 2)
        }
    }

    @Test("RFC 9111 §4.3.3: a 5xx answering a validation, without stale-if-error, is passed through")
    func serverErrorOnValidationPassedThrough() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/flaky") { request in
                request.header("If-None-Match") != nil
                    ? LoopbackOrigin.Response(status: 503, headers: [("Retry-After", "5")], body: "overloaded")
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=0"), ("ETag", "\"f\"")], body: "fine")
            }
            _ = try harness.get("/flaky")
            let answer = try harness.get("/flaky")
            #expect(answer.status == 503)
            #expect(answer.text == "overloaded")
            #expect(answer["Retry-After"] == "5")
            #expect(answer.cacheStatus == "httpcache; fwd=stale; fwd-status=503; stored=?0")
            #expect(harness.origin.count("/flaky") == 2)
        }
    }

    @Test("RFC 9111 §4.3.3: a 200 answering a validation is used and replaces the stored response")
    func fullResponseOnValidationReplaces() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/doc") { request in
                request.header("If-None-Match") == "\"v1\""
                    ? LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60"), ("ETag", "\"v2\"")], body: "second")
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=0"), ("ETag", "\"v1\"")], body: "first")
            }
            #expect(try harness.get("/doc").text == "first")
            let replaced = try harness.get("/doc")
            #expect(replaced.text == "second")
            #expect(replaced["ETag"] == "\"v2\"")
            #expect(replaced.cacheStatus == "httpcache; fwd=stale; fwd-status=200; stored")
            let hit = try harness.get("/doc")
            #expect(hit.isHit)
            #expect(hit.text == "second")
            #expect(hit["ETag"] == "\"v2\"")
            #expect(harness.origin.count("/doc") == 2)
        }
    }

    // MARK: §4.3.5 HEAD

    @Test("RFC 9111 §4.3.5, §4: HEAD is answered from a fresh stored GET response without the origin")
    func headFromStoredGet() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/h", [("Cache-Control", "max-age=60"), ("ETag", "\"h\"")], body: "hello")
            _ = try harness.get("/h")
            let head = try harness.get("/h", method: "HEAD")
            #expect(head.status == 200)
            #expect(head.body.isEmpty)
            #expect(head["Content-Length"] == "5")
            #expect(head["ETag"] == "\"h\"")
            #expect(head.isHit)
            #expect(harness.origin.requests(to: "/h").map(\.method) == ["GET"])
        }
    }

    @Test("RFC 9111 §4.3.5: a HEAD 200 with another ETag makes the stored GET response stale")
    func headWithNewETagMakesStale() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/res") { request in
                if request.method == "HEAD" {
                    return LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60"), ("ETag", "\"b\"")], body: "new!")
                }
                return request.header("If-None-Match") == "\"a\""
                    ? LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60"), ("ETag", "\"b\"")], body: "new!")
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60"), ("ETag", "\"a\"")], body: "old")
            }
            _ = try harness.get("/res")
            #expect(try harness.get("/res").isHit)
            let head = try harness.get("/res", [("Cache-Control", "no-cache")], method: "HEAD")
            #expect(head.status == 200)
            #expect(head["ETag"] == "\"b\"")
            let after = try harness.get("/res")
            #expect(!after.isHit, "the stored GET response needs validation now")
            #expect(after.text == "new!")
            let requests = harness.origin.requests(to: "/res")
            #expect(requests.map(\.method) == ["GET", "HEAD", "GET"])
            #expect(requests.last?.header("If-None-Match") == "\"a\"")
        }
    }

    @Test(
        "RFC 9111 §4.3.5, §3.2: a HEAD 200 with the same validators and length updates the stored GET response's fields"
    )
    func headWithSameValidatorsFreshens() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/same") { request in
                let extra = request.method == "HEAD" ? [("X-From", "head")] : [("X-From", "get")]
                return LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=60"), ("ETag", "\"s\"")] + extra, body: "same")
            }
            _ = try harness.get("/same")
            let head = try harness.get("/same", [("Cache-Control", "no-cache")], method: "HEAD")
            #expect(head.status == 200)
            #expect(head["X-From"] == "head")
            let hit = try harness.get("/same")
            #expect(hit.isHit)
            #expect(hit.text == "same")
            #expect(hit["X-From"] == "head")
            #expect(harness.origin.requests(to: "/same").map(\.method) == ["GET", "HEAD"])
        }
    }

    @Test(
        "RFC 9111 §4.3.5: a HEAD 200 with the same ETag but another Content-Length makes the stored GET response stale")
    func headWithOtherLengthMakesStale() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/len") { request in
                LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=60"), ("ETag", "\"same\"")],
                    body: request.method == "HEAD" ? "longer body" : "short")
            }
            _ = try harness.get("/len")
            let head = try harness.get("/len", [("Cache-Control", "no-cache")], method: "HEAD")
            #expect(head["Content-Length"] == "11")
            let after = try harness.get("/len")
            #expect(!after.isHit)
            #expect(harness.origin.requests(to: "/len").map(\.method) == ["GET", "HEAD", "GET"])
        }
    }

    @Test(
        "RFC 9111 §3, §4.3.4, §5.2.2.7: a 304 that brings private removes the stored response from a shared cache; the request goes again without validators",
        arguments: ["private, max-age=600", "no-store"])
    func notModifiedThatForbidsStoringRemoves(cacheControl: String) async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let requests = Locked(0)
            harness.origin.route("/turned") { request in
                let number = requests.withLock { count -> Int in
                    count += 1
                    return count
                }
                if request.header("If-None-Match") == "\"r7\"" {
                    return LoopbackOrigin.Response(
                        status: 304, headers: [("ETag", "\"r7\""), ("Cache-Control", cacheControl)])
                }
                // The first answer may be stored (and is stale at once); later ones carry the new directives.
                let directives = number == 1 ? "max-age=0" : cacheControl
                return LoopbackOrigin.Response(
                    headers: [("ETag", "\"r7\""), ("Cache-Control", directives)], body: "answer \(number)")
            }
            let first = try harness.get("/turned")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            let second = try harness.get("/turned")
            #expect(second.status == 200)
            #expect(second.text == "answer 3", "answered by the origin again, not with the stored body")
            #expect(!second.isHit)
            let third = try harness.get("/turned")
            #expect(!third.isHit, "nothing stored answers another request")
            #expect(third.text == "answer 4")
            let sent = harness.origin.requests(to: "/turned").map { $0.header("If-None-Match") }
            #expect(sent == [nil, "\"r7\"", nil, nil], "stored, validated, asked again whole, then a miss")
        }
    }

    @Test(
        "RFC 9111 §3, §4.3.5, §5.2.2.7: a HEAD 200 with the same validators that brings private removes the stored GET response"
    )
    func headThatForbidsStoringRemoves() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/went-private") { request in
                let directives = request.method == "HEAD" ? "private, max-age=600" : "max-age=60"
                return LoopbackOrigin.Response(
                    headers: [("Cache-Control", directives), ("ETag", "\"s\"")], body: "same")
            }
            _ = try harness.get("/went-private")
            #expect(try harness.get("/went-private").isHit)
            let head = try harness.get("/went-private", [("Cache-Control", "no-cache")], method: "HEAD")
            #expect(head.status == 200)
            let after = try harness.get("/went-private")
            #expect(!after.isHit)
            #expect(after.text == "same")
            #expect(harness.origin.requests(to: "/went-private").map(\.method) == ["GET", "HEAD", "GET"])
        }
    }

    // MARK: §4.4 Invalidation

    @Test(
        "RFC 9111 §4.4: an unsafe method invalidates its URI and a same-origin Location, not another origin's Content-Location",
        arguments: ["POST", "PUT", "DELETE"])
    func unsafeMethodInvalidates(method: String) async throws {
        try await offPool {
            let harness = try ProxyHarness()
            for path in ["/list", "/other"] {
                harness.serve(path, [("Cache-Control", "max-age=60")], body: path)
            }
            harness.origin.route("/item") { request in
                request.method == "GET"
                    ? LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: "item")
                    : LoopbackOrigin.Response(
                        status: 201,
                        headers: [("Location", "/list"), ("Content-Location", "http://elsewhere.example/other")])
            }
            for path in ["/item", "/list", "/other"] {
                _ = try harness.get(path)
                #expect(try harness.get(path).isHit)
            }
            let unsafe = try harness.get("/item", method: method, body: method == "DELETE" ? nil : Array("x".utf8))
            #expect(unsafe.status == 201)
            #expect(unsafe.cacheStatus == "httpcache; fwd=method; fwd-status=201")
            #expect(!(try harness.get("/item").isHit), "the target URI")
            #expect(!(try harness.get("/list").isHit), "Location on the same origin")
            #expect(try harness.get("/other").isHit, "Content-Location on another origin is not invalidated")
            #expect(harness.origin.requests(to: "/item").map(\.method) == ["GET", method, "GET"])
            #expect(harness.origin.count("/list") == 2)
            #expect(harness.origin.count("/other") == 1)
        }
    }

    @Test("RFC 9111 §4.4: an absolute same-origin Content-Location is invalidated, another origin's Location is not")
    func invalidationByAbsoluteURI() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            for path in ["/list", "/other"] {
                harness.serve(path, [("Cache-Control", "max-age=60")], body: path)
            }
            let sameOrigin = harness.origin.baseURL + "/other"
            harness.origin.route("/item") { _ in
                LoopbackOrigin.Response(
                    status: 200,
                    headers: [("Location", "http://elsewhere.example/list"), ("Content-Location", sameOrigin)],
                    body: "done")
            }
            for path in ["/list", "/other"] { _ = try harness.get(path) }
            #expect(try harness.get("/item", method: "POST", body: Array("x".utf8)).status == 200)
            #expect(try harness.get("/list").isHit)
            #expect(!(try harness.get("/other").isHit))
            #expect(harness.origin.count("/list") == 1)
            #expect(harness.origin.count("/other") == 2)
        }
    }

    @Test(
        "RFC 9111 §4.4: a forward proxy invalidates Location and Content-Location URIs only on the target's own origin")
    func invalidationAcrossOrigins() async throws {
        try await offPool {
            let first = try LoopbackOrigin()
            let second = try LoopbackOrigin()
            defer {
                first.stop()
                second.stop()
            }
            let proxy = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1"], memoryOnly: true)
            defer { proxy.terminate() }
            // One connection: the proxy answers its requests one at a time, so each response is
            // stored before the next request is read.
            let client = try RawHTTPClient(port: proxy.port)
            for origin in [first, second] {
                // A day: this proxy is a process on the real clock.
                origin.route("/x") { _ in
                    LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=86400")], body: "x")
                }
            }
            // The same path on both origins; the POST's response names both.
            first.route("/item") { _ in
                LoopbackOrigin.Response(
                    status: 201, headers: [("Location", second.baseURL + "/x"), ("Content-Location", "/x")])
            }
            for origin in [first, second] {
                _ = try Self.throughForwardProxy(client, origin.baseURL + "/x")
                #expect(Self.isHit(try Self.throughForwardProxy(client, origin.baseURL + "/x")))
            }
            let post = try Self.throughForwardProxy(client, first.baseURL + "/item", method: "POST", body: "x=1")
            #expect(post.status == 201)
            #expect(!Self.isHit(try Self.throughForwardProxy(client, first.baseURL + "/x")), "same origin: invalidated")
            #expect(Self.isHit(try Self.throughForwardProxy(client, second.baseURL + "/x")), "another origin: kept")
            #expect(first.count("/x") == 2)
            #expect(second.count("/x") == 1)
        }
    }

    /// `method url` in absolute form (RFC 9112 §3.2.2) to a forward proxy over `client`.
    private static func throughForwardProxy(
        _ client: RawHTTPClient, _ url: String, method: String = "GET", body: String? = nil
    ) throws -> RawHTTPClient.Response {
        let authority = url.dropFirst("http://".count).prefix { $0 != "/" }
        var text = "\(method) \(url) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let body { text += "Content-Length: \(body.utf8.count)\r\n" }
        try client.send(text + "\r\n" + (body ?? ""))
        return try client.readResponse(method: method)
    }

    private static func isHit(_ response: RawHTTPClient.Response) -> Bool {
        response.values("Cache-Status").last?.split(separator: ",").last?.contains("; hit") == true
    }

    @Test("RFC 9111 §4.4: an error response to an unsafe method invalidates nothing", arguments: [500, 404])
    func errorResponseDoesNotInvalidate(status: Int) async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/item") { request in
                request.method == "GET"
                    ? LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: "item")
                    : LoopbackOrigin.Response(status: status, headers: [("Location", "/item")], body: "failed")
            }
            _ = try harness.get("/item")
            let post = try harness.get("/item", method: "POST", body: Array("x".utf8))
            #expect(post.status == status)
            #expect(post.text == "failed", "relayed, not answered from the store")
            let after = try harness.get("/item")
            #expect(after.isHit)
            #expect(after.text == "item")
            #expect(harness.origin.requests(to: "/item").map(\.method) == ["GET", "POST"])
        }
    }

    // MARK: §5.2.1 Request directives

    @Test("RFC 9111 §5.2.1.1: a request's max-age below the stored response's age makes the cache validate")
    func requestMaxAge() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/m") { request in
                request.header("If-None-Match") == "\"m\""
                    ? LoopbackOrigin.Response(status: 304, headers: [("ETag", "\"m\""), ("Age", "30")])
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60"), ("Age", "30"), ("ETag", "\"m\"")], body: "m")
            }
            _ = try harness.get("/m")
            let accepted = try harness.get("/m", [("Cache-Control", "max-age=50")])
            #expect(accepted.isHit)
            for directive in ["max-age=10", "max-age=0"] {
                let validated = try harness.get("/m", [("Cache-Control", directive)])
                #expect(validated.status == 200)
                #expect(validated.text == "m")
                #expect(
                    validated.cacheStatus?.hasPrefix("httpcache; fwd=request; fwd-status=304; stored") == true,
                    "\(directive)")
                #expect(harness.origin.requests(to: "/m").last?.header("If-None-Match") == "\"m\"")
            }
            #expect(harness.origin.count("/m") == 3)
            #expect(
                harness.origin.requests(to: "/m").dropFirst().allSatisfy {
                    $0.header("Cache-Control")?.hasPrefix("max-age=") == true
                },
                "request directives are passed on (§5.2)")
        }
    }

    @Test(
        "RFC 9111 §5.2.1.2, §4.2.4: max-stale serves a stale response within its bound, unless must-, proxy-revalidate or s-maxage"
    )
    func maxStale() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            // Stale by about 90 s.
            harness.serve("/stale", [("Cache-Control", "max-age=10"), ("Age", "100")], body: "stale")
            harness.serve(
                "/strict", [("Cache-Control", "max-age=10, must-revalidate"), ("Age", "100")], body: "strict")
            harness.serve("/proxy", [("Cache-Control", "max-age=10, proxy-revalidate"), ("Age", "100")], body: "proxy")
            harness.serve("/shared", [("Cache-Control", "s-maxage=10"), ("Age", "100")], body: "shared")
            _ = try harness.get("/stale")
            for directive in ["max-stale=200", "max-stale"] {
                let served = try harness.get("/stale", [("Cache-Control", directive)])
                #expect(served.isHit, "\(directive)")
                #expect(served.text == "stale")
                #expect(try #require(Self.ttl(served)) < -80)
            }
            #expect(harness.origin.count("/stale") == 1)
            let tooStale = try harness.get("/stale", [("Cache-Control", "max-stale=30")])
            #expect(!tooStale.isHit)
            #expect(tooStale.cacheStatus == "httpcache; fwd=stale; fwd-status=200; stored")
            #expect(harness.origin.count("/stale") == 2)

            for (path, directive) in [
                ("/strict", "must-revalidate"), ("/proxy", "proxy-revalidate"), ("/shared", "s-maxage"),
            ] {
                _ = try harness.get(path)
                let strict = try harness.get(path, [("Cache-Control", "max-stale")])
                #expect(!strict.isHit, "\(directive) forbids serving it stale")
                #expect(harness.origin.count(path) == 2)
            }
        }
    }

    @Test("RFC 9111 §5.2.1.3: min-fresh makes the cache validate a response that will not stay fresh long enough")
    func minFresh() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/mf", [("Cache-Control", "max-age=60")], body: "mf")
            _ = try harness.get("/mf")
            #expect(try harness.get("/mf", [("Cache-Control", "min-fresh=30")]).isHit)
            let forwarded = try harness.get("/mf", [("Cache-Control", "min-fresh=120")])
            #expect(!forwarded.isHit)
            #expect(forwarded.cacheStatus == "httpcache; fwd=request; fwd-status=200; stored")
            #expect(harness.origin.count("/mf") == 2)
        }
    }

    @Test("RFC 9111 §5.2.1.4, §4.3.3: request no-cache sends a validation; a 200 replaces the stored response")
    func requestNoCache() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/nc") { request in
                request.header("If-None-Match") == "\"v1\""
                    ? LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60"), ("ETag", "\"v2\"")], body: "second")
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60"), ("ETag", "\"v1\"")], body: "first")
            }
            _ = try harness.get("/nc")
            #expect(try harness.get("/nc").isHit)
            let reloaded = try harness.get("/nc", [("Cache-Control", "no-cache")])
            #expect(reloaded.text == "second")
            #expect(reloaded.cacheStatus == "httpcache; fwd=request; fwd-status=200; stored")
            let request = try #require(harness.origin.requests(to: "/nc").last)
            #expect(request.header("If-None-Match") == "\"v1\"")
            #expect(request.header("Cache-Control") == "no-cache")
            let hit = try harness.get("/nc")
            #expect(hit.isHit)
            #expect(hit.text == "second")
            #expect(harness.origin.count("/nc") == 2)
        }
    }

    @Test(
        "RFC 9111 §5.2.1.7: only-if-cached answers 504 without contacting the origin unless a usable response is stored"
    )
    func onlyIfCached() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/fresh", [("Cache-Control", "max-age=60")], body: "fresh")
            harness.serve("/stale", [("Cache-Control", "max-age=0")], body: "stale")
            let miss = try harness.get("/nowhere", [("Cache-Control", "only-if-cached")])
            #expect(miss.status == 504)
            // Not forwarded, so no fwd (RFC 9211 §2.2): the cache alone answered.
            #expect(miss.cacheStatus == "httpcache; detail=only-if-cached")
            #expect(harness.origin.count("/nowhere") == 0)
            _ = try harness.get("/fresh")
            _ = try harness.get("/stale")
            let fresh = try harness.get("/fresh", [("Cache-Control", "only-if-cached")])
            #expect(fresh.status == 200)
            #expect(fresh.isHit)
            let stale = try harness.get("/stale", [("Cache-Control", "only-if-cached")])
            #expect(stale.status == 504)
            #expect(harness.origin.count("/fresh") == 1)
            #expect(harness.origin.count("/stale") == 1)
        }
    }

    @Test(
        "RFC 9111 §5.4, RFC 7234 §5.4: Pragma: no-cache without Cache-Control is no-cache; with Cache-Control it is ignored"
    )
    func pragmaNoCache() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/p", [("Cache-Control", "max-age=60"), ("ETag", "\"p\"")], body: "p")
            _ = try harness.get("/p")
            let pragma = try harness.get("/p", [("Pragma", "no-cache")])
            #expect(!pragma.isHit)
            #expect(pragma.cacheStatus == "httpcache; fwd=request; fwd-status=200; stored")
            #expect(harness.origin.requests(to: "/p").last?.header("Pragma") == "no-cache")
            let withCacheControl = try harness.get("/p", [("Pragma", "no-cache"), ("Cache-Control", "max-age=600")])
            #expect(withCacheControl.isHit)
            #expect(harness.origin.count("/p") == 2)
        }
    }

    // MARK: RFC 5861

    @Test(
        "RFC 5861 §3: stale-while-revalidate serves the stale response at once and validates it once in the background")
    func staleWhileRevalidate() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            let release = DispatchSemaphore(value: 0)
            harness.origin.route("/swr") { request in
                if request.header("If-None-Match") == "\"w\"" {
                    _ = release.wait(timeout: .now() + 20)
                    return LoopbackOrigin.Response(
                        status: 304,
                        // An hour: fresh however long a loaded machine takes for the steps below.
                        headers: [("ETag", "\"w\""), ("Cache-Control", "max-age=3600"), ("X-Revalidated", "yes")])
                }
                return LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=0, stale-while-revalidate=60"), ("ETag", "\"w\"")], body: "swr"
                )
            }
            _ = try harness.get("/swr")
            // The origin holds the revalidation: these can only be answered from the store.
            for _ in 0..<3 {
                let stale = try harness.get("/swr")
                #expect(stale.status == 200)
                #expect(stale.text == "swr")
                #expect(stale.isHit)
                #expect(
                    stale.cacheStatus?.hasSuffix("; detail=stale-while-revalidate") == true,
                    "\(stale.cacheStatus ?? "")")
                #expect(stale["X-Revalidated"] == nil)
            }
            #expect(Self.eventually { harness.origin.count("/swr") == 2 })
            release.signal()
            // Once the 304 is applied the response is fresh: a plain hit.
            var freshened: Received?
            #expect(
                try Self.eventually {
                    let answer = try harness.get("/swr")
                    freshened = answer
                    return answer["X-Revalidated"] == "yes"
                })
            #expect(freshened?.isHit == true)
            #expect(freshened?.cacheStatus?.contains("stale-while-revalidate") == false)
            let requests = harness.origin.requests(to: "/swr")
            #expect(
                requests.count == 2,
                "one background validation for all the stale answers: \(requests.map { "\($0.method) \($0.target) INM=\($0.header("If-None-Match") ?? "-")" })"
            )
            #expect(requests.last?.header("If-None-Match") == "\"w\"")
        }
    }

    @Test("RFC 5861 §3: a background revalidation answered with a new 200 stores it whole and says nothing was cut")
    func staleWhileRevalidateStoresTheNewResponse() async throws {
        try await offPool {
            let logs = Locked<[String]>([])
            let harness = try ProxyHarness { $0.log = { line in logs.withLock { $0.append(line) } } }
            let version = Locked(1)
            harness.origin.route("/swr-new") { _ in
                let current = version.withLock { $0 }
                return LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=0, stale-while-revalidate=60"), ("ETag", "\"v\(current)\"")],
                    body: String(repeating: "\(current)", count: 5000))
            }
            _ = try harness.get("/swr-new")
            version.withLock { $0 = 2 }
            let stale = try harness.get("/swr-new")
            #expect(stale["ETag"] == "\"v1\"")
            // The background exchange stores version 2; the stale answers after it serve it.
            #expect(try Self.eventually { try harness.get("/swr-new")["ETag"] == "\"v2\"" })
            let served = try harness.get("/swr-new")
            #expect(served.text == String(repeating: "2", count: 5000))
            let cut = logs.withLock { $0 }.filter { $0.contains("cut off") }
            #expect(cut.isEmpty, "a body read to its end was logged as cut: \(cut)")
        }
    }

    @Test("RFC 5861 §3: beyond its stale-while-revalidate window a response is validated before it is served")
    func staleBeyondWhileRevalidateWindow() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve(
                "/late",
                [("Cache-Control", "max-age=10, stale-while-revalidate=30"), ("Age", "100"), ("ETag", "\"l\"")],
                body: "late")
            _ = try harness.get("/late")
            let second = try harness.get("/late")
            #expect(!second.isHit)
            #expect(second.cacheStatus == "httpcache; fwd=stale; fwd-status=200; stored")
            #expect(harness.origin.count("/late") == 2)
        }
    }

    @Test(
        "RFC 5861 §4: stale-if-error (of the response or the request) serves the stored response when the origin answers 500"
    )
    func staleIfError() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            for (path, cacheControl) in [("/sie", "max-age=0, stale-if-error=60"), ("/plain", "max-age=0")] {
                harness.origin.route(path) { request in
                    request.header("If-None-Match") != nil
                        ? LoopbackOrigin.Response(status: 500, body: "broken")
                        : LoopbackOrigin.Response(
                            headers: [("Cache-Control", cacheControl), ("ETag", "\"e\"")], body: "kept")
                }
                _ = try harness.get(path)
            }
            let served = try harness.get("/sie")
            #expect(served.status == 200)
            #expect(served.text == "kept")
            // It went forward and the origin answered 500: fwd with fwd-status, never fwd-status
            // alone (RFC 9211 §2.3, §2.4), and not a hit (it was forwarded).
            #expect(!served.isHit)
            #expect(
                served.cacheStatus?.hasPrefix("httpcache; fwd=stale; fwd-status=500;") == true,
                "\(served.cacheStatus ?? "")")
            #expect(served.cacheStatus?.hasSuffix("detail=stale-if-error") == true, "\(served.cacheStatus ?? "")")
            let passed = try harness.get("/plain")
            #expect(passed.status == 500)
            #expect(passed.text == "broken")
            let asked = try harness.get("/plain", [("Cache-Control", "stale-if-error=60")])
            #expect(asked.status == 200)
            #expect(asked.text == "kept")
            #expect(harness.origin.count("/sie") == 2)
            #expect(harness.origin.count("/plain") == 3)
        }
    }

    // MARK: RFC 9213 CDN-Cache-Control

    @Test("RFC 9213 §2.2: CDN-Cache-Control: max-age=60 overrides Cache-Control: no-store; both are passed downstream")
    func cdnCacheControlAllowsStoring() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/cdn", [("CDN-Cache-Control", "max-age=60"), ("Cache-Control", "no-store")], body: "cdn")
            let first = try harness.get("/cdn")
            #expect(first["CDN-Cache-Control"] == "max-age=60")
            #expect(first["Cache-Control"] == "no-store")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            let hit = try harness.get("/cdn")
            #expect(hit.isHit)
            #expect(hit.text == "cdn")
            #expect(hit["CDN-Cache-Control"] == "max-age=60")
            #expect(hit["Cache-Control"] == "no-store", "the downstream caches' instructions are unchanged")
            #expect(harness.origin.count("/cdn") == 1)
        }
    }

    @Test("RFC 9213 §2.2: CDN-Cache-Control: no-store overrides Cache-Control: max-age=60")
    func cdnCacheControlForbidsStoring() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/cdn", [("CDN-Cache-Control", "no-store"), ("Cache-Control", "max-age=60")], body: "cdn")
            let first = try harness.get("/cdn")
            #expect(first["CDN-Cache-Control"] == "no-store")
            #expect(first["Cache-Control"] == "max-age=60")
            #expect(first.cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored=?0")
            #expect(!(try harness.get("/cdn").isHit))
            #expect(harness.origin.count("/cdn") == 2)
        }
    }

    @Test("RFC 9213 §2.1: a CDN-Cache-Control that is not a valid Dictionary is ignored for Cache-Control")
    func invalidCDNCacheControlIgnored() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve(
                "/bad", [("CDN-Cache-Control", "max-age=60 public"), ("Cache-Control", "no-store")], body: "bad")
            _ = try harness.get("/bad")
            #expect(!(try harness.get("/bad").isHit))
            #expect(harness.origin.count("/bad") == 2)
        }
    }

    @Test("RFC 9213 §2.2: with CDN-Cache-Control in force, Expires is ignored as Cache-Control is")
    func cdnCacheControlIgnoresExpires() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve(
                "/exp", [("CDN-Cache-Control", "must-revalidate"), ("Expires", httpDate(3600)), ("ETag", "\"x\"")],
                body: "exp")
            harness.serve(
                "/exp-plain", [("Cache-Control", "must-revalidate"), ("Expires", httpDate(3600))], body: "exp")
            _ = try harness.get("/exp")
            let second = try harness.get("/exp")
            #expect(!second.isHit, "no freshness from the targeted field, and Expires does not count")
            #expect(harness.origin.requests(to: "/exp").last?.header("If-None-Match") == "\"x\"")
            #expect(harness.origin.count("/exp") == 2)
            // Without the targeted field, the same Expires makes it fresh.
            _ = try harness.get("/exp-plain")
            #expect(try harness.get("/exp-plain").isHit)
            #expect(harness.origin.count("/exp-plain") == 1)
        }
    }

    // MARK: RFC 9211 Cache-Status

    @Test("RFC 9211 §2: an upstream cache's Cache-Status members are kept and this cache's member comes last")
    func upstreamCacheStatusKept() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve(
                "/chain",
                [
                    ("Cache-Control", "max-age=60"), ("Cache-Status", "OriginShield; hit; ttl=50"),
                    ("Cache-Status", "Edge; fwd=uri-miss"),
                ],
                body: "chain")
            let miss = try harness.get("/chain")
            #expect(
                miss.fields.listMembers(named: "Cache-Status")
                    == [
                        "OriginShield; hit; ttl=50", "Edge; fwd=uri-miss",
                        "httpcache; fwd=uri-miss; fwd-status=200; stored",
                    ])
            let hit = try harness.get("/chain")
            let members = hit.fields.listMembers(named: "Cache-Status")
            #expect(members.count == 3)
            #expect(Array(members.prefix(2)) == ["OriginShield; hit; ttl=50", "Edge; fwd=uri-miss"])
            #expect(hit.isHit)
        }
    }

    @Test(
        "RFC 9211 §2.2, §2.5: fwd is uri-miss, vary-miss, stale or request as the case is; stored says whether it was")
    func forwardReasons() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/r") { request in
                LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                    body: request.header("Accept-Language") ?? "none")
            }
            harness.serve("/old", [("Cache-Control", "max-age=0")], body: "old")
            harness.serve("/never", [("Cache-Control", "no-store")], body: "never")
            #expect(
                try harness.get("/r", [("Accept-Language", "fr")]).cacheStatus
                    == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            #expect(
                try harness.get("/r", [("Accept-Language", "de")]).cacheStatus
                    == "httpcache; fwd=vary-miss; fwd-status=200; stored")
            #expect(
                try harness.get("/r", [("Accept-Language", "de"), ("Cache-Control", "no-cache")]).cacheStatus
                    == "httpcache; fwd=request; fwd-status=200; stored")
            let hit = try harness.get("/r", [("Accept-Language", "fr")])
            #expect(hit.cacheStatus?.hasPrefix("httpcache; hit; ttl=") == true)
            _ = try harness.get("/old")
            #expect(try harness.get("/old").cacheStatus == "httpcache; fwd=stale; fwd-status=200; stored")
            #expect(try harness.get("/never").cacheStatus == "httpcache; fwd=uri-miss; fwd-status=200; stored=?0")
        }
    }

    // MARK: RFC 8246 immutable

    @Test(
        "RFC 8246 §2.1: a shared cache answers a reload (max-age=0) with a fresh immutable response, but validates on no-cache"
    )
    func immutable() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/app.js") { request in
                request.header("If-None-Match") == "\"i\""
                    ? LoopbackOrigin.Response(status: 304, headers: [("ETag", "\"i\"")])
                    : LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=31536000, immutable"), ("ETag", "\"i\"")], body: "code")
            }
            harness.serve("/mutable.js", [("Cache-Control", "max-age=31536000"), ("ETag", "\"m\"")], body: "code")
            _ = try harness.get("/app.js")
            // A second later: the stored responses' age is above the reloads' max-age=0.
            harness.clock.advance(by: 1)
            let reload = try harness.get("/app.js", [("Cache-Control", "max-age=0")])
            #expect(reload.isHit, "proxies SHOULD skip revalidating fresh immutable responses (RFC 8246 §2.1)")
            #expect(reload.text == "code")
            #expect(harness.origin.count("/app.js") == 1)
            let forced = try harness.get("/app.js", [("Cache-Control", "no-cache")])
            #expect(forced.cacheStatus?.hasPrefix("httpcache; fwd=request; fwd-status=304; stored") == true)
            #expect(forced.text == "code")
            #expect(harness.origin.count("/app.js") == 2)
            // Without immutable, the same reload is validated (§5.2.1.1).
            _ = try harness.get("/mutable.js")
            harness.clock.advance(by: 1)
            #expect(!(try harness.get("/mutable.js", [("Cache-Control", "max-age=0")]).isHit))
            #expect(harness.origin.count("/mutable.js") == 2)
        }
    }

    // MARK: Helpers

    /// The `ttl` parameter of this cache's `Cache-Status` member.
    static func ttl(_ received: Received) -> Int? {
        guard let status = received.cacheStatus else { return nil }
        for parameter in status.split(separator: ";").map({ $0.trimmingCharacters(in: .whitespaces) })
        where parameter.hasPrefix("ttl=") {
            return Int(parameter.dropFirst(4))
        }
        return nil
    }

    /// Polls `condition` every 10 ms for up to `timeout` seconds; whether it became true.
    static func eventually(timeout: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if try condition() { return true }
            Thread.sleep(forTimeInterval: 0.01)
        } while Date() < deadline
        return false
    }
}

/// An HTTP-date `offset` seconds from now (negative: in the past), in whole seconds.
private func httpDate(_ offset: Double) -> String {
    HTTPDate.format(Timestamp(secondsSince1970: Date().timeIntervalSince1970.rounded(.down) + offset))
}
#endif
