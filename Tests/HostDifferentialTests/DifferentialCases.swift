#if os(Linux)
import CacheSemantics
import LoopbackOrigin

/// Helpers for the cases' own expectations.
extension Transcript {
    func status(_ index: Int) -> String { answers[index].cacheStatus ?? "" }
    func isHit(_ index: Int) -> Bool { status(index).contains("; hit") }
    var originRequests: Int { originLog.count }
}

extension DifferentialCase {
    static func make(
        _ name: String, _ setup: @escaping @Sendable (World) -> Void, _ steps: [Step],
        expect: @escaping @Sendable (Transcript) -> Bool
    ) -> DifferentialCase {
        DifferentialCase(name: name, setup: setup, steps: steps, expect: expect)
    }

    static let get: Step = .request("/r")

    /// The table: storing, reuse, freshness, validation, request directives, Vary, invalidation,
    /// stale-while-revalidate, stale-if-error, origin down, ranges, HEAD, coalescing.
    static let all: [DifferentialCase] = [
        // MARK: Storing and reuse (RFC 9111 §3, §4)
        make(
            "a fresh response is stored, then a hit with Age", { $0.serve("/r", [("Cache-Control", "max-age=60")]) },
            [get, .advance(10), get]
        ) { $0.originRequests == 1 && $0.isHit(1) && $0.answers[1].hasAge && $0.status(1).hasSuffix("ttl=50") },
        make(
            "no-store is never stored (§5.2.2.5)", { $0.serve("/r", [("Cache-Control", "no-store, max-age=60")]) },
            [get, get]
        ) { $0.originRequests == 2 && $0.status(1).contains("fwd=uri-miss") },
        make(
            "private is never stored by a shared cache (§5.2.2.7)",
            { $0.serve("/r", [("Cache-Control", "private, max-age=60")]) }, [get, get]
        ) { $0.originRequests == 2 },
        make(
            "s-maxage overrides max-age in a shared cache (§5.2.2.10)",
            { $0.serve("/r", [("Cache-Control", "max-age=600, s-maxage=5")]) }, [get, .advance(10), get]
        ) { $0.originRequests == 2 && !$0.isHit(1) },
        make(
            "a request with Authorization is not stored unless allowed (§3.5)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")]) },
            [
                .request("/r", headers: [("Authorization", "Bearer x")]),
                .request("/r", headers: [("Authorization", "Bearer x")]),
            ]
        ) { $0.originRequests == 2 },
        make(
            "Authorization with public is stored (§3.5)", { $0.serve("/r", [("Cache-Control", "public, max-age=60")]) },
            [.request("/r", headers: [("Authorization", "Bearer x")]), get]
        ) { $0.originRequests == 1 && $0.isHit(1) },
        make(
            "Expires in the future makes a hit (§5.3)",
            { world in
                world.route("/r") { _, _ in
                    .init(headers: [("Expires", HTTPDateOffset.format(world.clock, 60))], body: Array("e".utf8))
                }
            }, [get, get]
        ) { $0.originRequests == 1 && $0.isHit(1) },
        make(
            "Last-Modified gives a heuristic lifetime (§4.2.2)",
            { world in
                world.route("/r") { _, _ in
                    .init(
                        headers: [("Last-Modified", HTTPDateOffset.format(world.clock, -86_400))], body: Array("h".utf8)
                    )
                }
            }, [get, .advance(60), get]
        ) { $0.originRequests == 1 && $0.isHit(1) },
        make(
            "Age from upstream counts against the lifetime (§4.2.3)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("Age", "50")]) }, [get, .advance(20), get]
        ) { $0.originRequests == 2 },
        make(
            "a 301 is stored by default rules (§3, RFC 9110 §15.4.2)",
            { $0.serve("/r", status: 301, [("Location", "/other"), ("Cache-Control", "max-age=60")], body: "") },
            [get, get]
        ) { $0.originRequests == 1 && $0.answers[1].status == 301 && $0.isHit(1) },
        make(
            "a 404 with a lifetime is stored (§3)", { $0.serve("/r", status: 404, [("Cache-Control", "max-age=60")]) },
            [get, get]
        ) { $0.originRequests == 1 && $0.answers[1].status == 404 },
        make(
            "CDN-Cache-Control overrides Cache-Control in a shared cache (RFC 9213)",
            { $0.serve("/r", [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=60")]) }, [get, get]
        ) { $0.originRequests == 1 && $0.isHit(1) },
        make(
            "a 500 is not stored without explicit freshness (§3)", { $0.serve("/r", status: 500, []) }, [get, get]
        ) { $0.originRequests == 2 && $0.answers[1].status == 500 },

        // MARK: Validation (§4.3)
        make(
            "a stale response with an ETag is revalidated by a 304 (§4.3.1, §4.3.4)",
            { $0.serveValidated("/r", etag: "\"v1\"", [("Cache-Control", "max-age=10")]) },
            [get, .advance(20), get, get]
        ) {
            $0.originLog.last?.contains("If-None-Match: \"v1\"") == true && $0.status(1).contains("fwd-status=304")
                && $0.answers[1].body == "body" && $0.isHit(2)
        },
        make(
            "a stale response with Last-Modified is validated with If-Modified-Since (§4.3.1)",
            { world in
                let modified = HTTPDateOffset.format(world.clock, -86_400)
                world.route("/r") { request, _ in
                    request.header("If-Modified-Since") == modified
                        ? .init(status: 304, headers: [("Cache-Control", "max-age=10")])
                        : .init(
                            headers: [("Cache-Control", "max-age=10"), ("Last-Modified", modified)],
                            body: Array("lm".utf8))
                }
            }, [get, .advance(20), get]
        ) { $0.originLog.last?.contains("If-Modified-Since") == true && $0.answers[1].body == "lm" },
        make(
            "a changed response replaces the stored one (§4.3.3)",
            { world in
                world.route("/r") { _, number in
                    .init(
                        headers: [("Cache-Control", "max-age=10"), ("ETag", "\"v\(number)\"")],
                        body: Array("v\(number)".utf8))
                }
            }, [get, .advance(20), get, get]
        ) { $0.answers[1].body == "v2" && $0.answers[2].body == "v2" && $0.isHit(2) },
        make(
            "a 304 updates the stored fields (§3.2)",
            { world in
                world.route("/r") { request, number in
                    request.header("If-None-Match") != nil
                        ? .init(
                            status: 304,
                            headers: [("Cache-Control", "max-age=10"), ("ETag", "\"e\""), ("X-Version", "2")])
                        : .init(
                            headers: [("Cache-Control", "max-age=10"), ("ETag", "\"e\""), ("X-Version", "1")],
                            body: Array("x".utf8))
                }
            }, [get, .advance(20), get, get]
        ) { $0.originRequests == 2 && $0.isHit(2) },
        make(
            "no-cache in the response means validation every time (§5.2.2.4)",
            { $0.serveValidated("/r", etag: "\"n\"", [("Cache-Control", "no-cache, max-age=60")]) }, [get, get, get]
        ) { $0.originRequests == 3 && $0.status(1).contains("fwd-status=304") },
        make(
            "a 304 that matches nothing stored sends the request again (§4.3.4)",
            { world in
                world.route("/r") { request, number in
                    request.header("If-None-Match") != nil
                        ? .init(status: 304, headers: [("ETag", "\"other\"")])
                        : .init(
                            headers: [("Cache-Control", "max-age=10"), ("ETag", "\"e\"")],
                            body: Array("full\(number)".utf8))
                }
            }, [get, .advance(20), get]
        ) { $0.originRequests == 3 && $0.answers[1].body == "full3" },
        make(
            "the client's own matching If-None-Match is answered 304 from the store (§4.3.2)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("ETag", "\"e\"")]) },
            [get, .request("/r", headers: [("If-None-Match", "\"e\"")])]
        ) { $0.originRequests == 1 && $0.answers[1].status == 304 },
        make(
            "the client's own non-matching If-None-Match gets the stored 200 (§4.3.2)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("ETag", "\"e\"")]) },
            [get, .request("/r", headers: [("If-None-Match", "\"x\"")])]
        ) { $0.originRequests == 1 && $0.answers[1].status == 200 },

        // MARK: Request directives (§5.2.1), the policies a proxy client can ask for
        make(
            "request no-cache validates a fresh response (§5.2.1.4)",
            { $0.serveValidated("/r", etag: "\"q\"", [("Cache-Control", "max-age=60")]) },
            [get, .request("/r", headers: [("Cache-Control", "no-cache")])]
        ) { $0.originRequests == 2 && $0.status(1).contains("fwd=request") },
        make(
            "request max-age=0 validates (§5.2.1.1)",
            { $0.serveValidated("/r", etag: "\"q\"", [("Cache-Control", "max-age=60")]) },
            [get, .advance(5), .request("/r", headers: [("Cache-Control", "max-age=0")])]
        ) { $0.originRequests == 2 },
        make(
            "request max-stale serves a stale response (§5.2.1.2)",
            { $0.serve("/r", [("Cache-Control", "max-age=10")]) },
            [get, .advance(20), .request("/r", headers: [("Cache-Control", "max-stale=60")])]
        ) { $0.originRequests == 1 && $0.answers[1].hasAge },
        make(
            "request min-fresh forwards when too little freshness is left (§5.2.1.3)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")]) },
            [get, .advance(30), .request("/r", headers: [("Cache-Control", "min-fresh=40")])]
        ) { $0.originRequests == 2 },
        make(
            "only-if-cached with nothing stored is a 504, never forwarded (§5.2.1.7)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")]) },
            [.request("/r", headers: [("Cache-Control", "only-if-cached")])]
        ) { $0.originRequests == 0 && $0.answers[0].status == 504 },
        make(
            "only-if-cached with a fresh response stored is a hit (§5.2.1.7)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")]) },
            [get, .request("/r", headers: [("Cache-Control", "only-if-cached")])]
        ) { $0.originRequests == 1 && $0.isHit(1) },
        make(
            "request no-store: forwarded, and what comes back is not stored (§5.2.1.5)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")]) },
            [.request("/r", headers: [("Cache-Control", "no-store")]), get]
        ) { $0.originRequests == 2 },

        // MARK: Vary (§4.1)
        make(
            "two Vary variants of one URL are both kept",
            { world in
                world.route("/r") { request, _ in
                    .init(
                        headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept")],
                        body: Array((request.header("Accept") ?? "none").utf8))
                }
            },
            [
                .request("/r", headers: [("Accept", "a/1")]), .request("/r", headers: [("Accept", "a/2")]),
                .request("/r", headers: [("Accept", "a/1")]), .request("/r", headers: [("Accept", "a/2")]),
            ]
        ) { $0.originRequests == 2 && $0.answers[2].body == "a/1" && $0.answers[3].body == "a/2" && $0.isHit(3) },
        make(
            "Vary: * never matches (§4.1)", { $0.serve("/r", [("Cache-Control", "max-age=60"), ("Vary", "*")]) },
            [get, get]
        ) { $0.originRequests == 2 },
        make(
            "a variant that matches no stored one is a vary-miss (RFC 9211 §2.2)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("Vary", "X-Lang")]) },
            [.request("/r", headers: [("X-Lang", "en")]), .request("/r", headers: [("X-Lang", "de")])]
        ) { $0.status(1).contains("fwd=vary-miss") },

        // MARK: Invalidation (§4.4)
        make(
            "a POST invalidates the stored GET of its target",
            { world in
                world.serve("/r", [("Cache-Control", "max-age=60")])
            }, [get, .request("/r", method: "POST"), get]
        ) { $0.originRequests == 3 && $0.status(1).contains("fwd=method") && !$0.isHit(2) },
        make(
            "a PUT invalidates its Location on the same origin",
            { world in
                world.serve("/r", [("Cache-Control", "max-age=60")])
                world.serve("/w", status: 201, [("Location", "/r")])
            }, [get, .request("/w", method: "PUT"), get]
        ) { $0.originRequests == 3 },
        make(
            "a DELETE answered with an error invalidates nothing (§4.4)",
            { world in
                world.route("/r") { request, _ in
                    request.method == "DELETE"
                        ? .init(status: 404)
                        : .init(headers: [("Cache-Control", "max-age=60")], body: Array("kept".utf8))
                }
            }, [get, .request("/r", method: "DELETE"), get]
        ) { $0.originRequests == 2 && $0.answers[1].status == 404 && $0.isHit(2) },

        // MARK: Serving stale (§4.2.4, RFC 5861)
        make(
            "within stale-while-revalidate the stale response is served and revalidated in the background",
            { $0.serveValidated("/r", etag: "\"s\"", [("Cache-Control", "max-age=10, stale-while-revalidate=60")]) },
            [get, .advance(20), get, .waitForBackgroundWork, .advance(1), get]
        ) { $0.status(1).contains("detail=stale-while-revalidate") && $0.originRequests == 2 && $0.isHit(2) },
        make(
            "a 500 within stale-if-error is replaced by the stale response (RFC 5861 §4)",
            { world in
                world.route("/r") { request, _ in
                    request.header("If-None-Match") != nil
                        ? .init(status: 500, body: Array("broken".utf8))
                        : .init(
                            headers: [("Cache-Control", "max-age=10, stale-if-error=60"), ("ETag", "\"e\"")],
                            body: Array("kept".utf8))
                }
            }, [get, .advance(20), get]
        ) {
            $0.answers[1].body == "kept" && $0.status(1).contains("fwd-status=500")
                && $0.status(1).contains("stale-if-error")
        },
        make(
            "a 500 without stale-if-error is passed on",
            { world in
                world.route("/r") { request, _ in
                    request.header("If-None-Match") != nil
                        ? .init(status: 500, body: Array("broken".utf8))
                        : .init(
                            headers: [("Cache-Control", "max-age=10"), ("ETag", "\"e\"")], body: Array("kept".utf8))
                }
            }, [get, .advance(20), get]
        ) { $0.answers[1].status == 500 },
        make(
            "with the origin down a stale response is served: disconnected (§4.2.4)",
            { $0.serve("/r", [("Cache-Control", "max-age=10")]) }, [get, .advance(20), .originDown, get]
        ) { $0.answers[1].status == 200 && $0.status(1).contains("detail=disconnected") },
        make(
            "with the origin down must-revalidate gives a 504 with Cache-Status (§5.2.2.2)",
            { $0.serve("/r", [("Cache-Control", "max-age=10, must-revalidate")]) },
            [get, .advance(20), .originDown, get]
        ) { $0.answers[1].status == 504 && $0.status(1).contains("detail=stale-not-allowed") },
        make(
            "with the origin down and nothing stored the request fails",
            { $0.serve("/r", [("Cache-Control", "max-age=10")]) }, [.originDown, get]
        ) { $0.answers[0] == .failed },

        // MARK: Ranges (RFC 9110 §14) and HEAD (§9.3.2, RFC 9111 §4.3.5)
        make(
            "a Range is answered from the stored response: 206 (RFC 9110 §14.2)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")], body: "0123456789abcdef") },
            [get, .request("/r", headers: [("Range", "bytes=2-5")])]
        ) { $0.originRequests == 1 && $0.answers[1].status == 206 && $0.answers[1].body == "2345" },
        make(
            "several ranges are one multipart/byteranges answer (RFC 9110 §14.6)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")], body: "0123456789abcdef") },
            [get, .request("/r", headers: [("Range", "bytes=0-1,10-11")])]
        ) {
            $0.answers[1].status == 206 && $0.answers[1].body.contains("BOUNDARY") && $0.answers[1].body.contains("ab")
        },
        make(
            "an unsatisfiable Range is a 416 from the store (RFC 9110 §15.5.17)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")], body: "short") },
            [get, .request("/r", headers: [("Range", "bytes=100-200")])]
        ) { $0.originRequests == 1 && $0.answers[1].status == 416 },
        make(
            "a Range on a miss goes to the origin and its 206 is not stored (RFC 9111 §3.3)",
            { world in
                world.route("/r") { request, _ in
                    request.header("Range") != nil
                        ? .init(
                            status: 206, headers: [("Cache-Control", "max-age=60"), ("Content-Range", "bytes 0-1/4")],
                            body: Array("ab".utf8))
                        : .init(headers: [("Cache-Control", "max-age=60")], body: Array("abcd".utf8))
                }
            }, [.request("/r", headers: [("Range", "bytes=0-1")]), get]
        ) { $0.answers[0].status == 206 && $0.originRequests == 2 && $0.answers[1].body == "abcd" },
        make(
            "HEAD is answered from a stored GET response (RFC 9110 §9.3.2)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")], body: "payload") },
            [get, .request("/r", method: "HEAD")]
        ) { $0.originRequests == 1 && $0.answers[1].status == 200 && $0.answers[1].body.isEmpty && $0.isHit(1) },
        make(
            "HEAD on a miss is forwarded and nothing is stored", { $0.serve("/r", [("Cache-Control", "max-age=60")]) },
            [.request("/r", method: "HEAD"), get]
        ) { $0.originLog.first?.hasPrefix("HEAD") == true && $0.originRequests == 2 },

        // MARK: Coalescing (RFC 9211 §2.5)
        make(
            "concurrent misses share one origin request; the others are collapsed",
            { world in
                world.route("/r") { _, _ in
                    var response = LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60")], body: Array("one".utf8))
                    response.delay = 0.5
                    return response
                }
            }, [.concurrent("/r", count: 5)]
        ) { $0.originRequests == 1 && $0.answers.filter { $0.cacheStatus?.contains("collapsed") == true }.count == 4 },
        make(
            "concurrent misses of a response that is not stored are each forwarded",
            { world in
                world.route("/r") { _, _ in
                    var response = LoopbackOrigin.Response(
                        headers: [("Cache-Control", "no-store")], body: Array("each".utf8))
                    response.delay = 0.3
                    return response
                }
            }, [.concurrent("/r", count: 3)]
        ) { $0.originRequests == 3 && $0.answers.allSatisfy { $0.body == "each" } },

        // MARK: The target as sent (RFC 9110 §7.7, §4.2.3)
        make(
            "spellings an origin may read differently are sent as written and never share an entry (RFC 9110 §7.7)",
            { world in
                for path in ["/a/%61", "/a/a", "/account%2fx.css", "/account/x.css", "/p;x", "/p"] {
                    world.serve(path, [("Cache-Control", "max-age=60")], body: path)
                }
            },
            ["/a/%61", "/a/a", "/account%2fx.css", "/account/x.css", "/p;x", "/p", "/a/%61", "/a/a"].map {
                .request($0)
            }
        ) { transcript in
            transcript.originLog
                == ["/a/%61", "/a/a", "/account%2fx.css", "/account/x.css", "/p;x", "/p"].map {
                    "GET \($0)"
                }
                && transcript.answers.map(\.body) == [
                    "/a/%61", "/a/a", "/account%2fx.css", "/account/x.css", "/p;x", "/p", "/a/%61", "/a/a",
                ]
                && transcript.isHit(6) && transcript.isHit(7)
        },
    ]
}

/// HTTP-dates relative to a case's clock.
enum HTTPDateOffset {
    static func format(_ clock: FixedClock, _ offset: Double) -> String {
        HTTPDate.format(Timestamp(secondsSince1970: clock.now + offset))
    }
}
#endif
