#if os(Linux)
import CacheSemantics
import LoopbackOrigin

extension DifferentialCase {
    /// The rest of the standards, through both hosts: strict targeted fields (RFC 9213), the
    /// client's own conditionals (RFC 9110 §13.2.2, §15.4.5), POST reuse (RFC 9110 §9.3.3),
    /// Vary normalisation (RFC 9111 §4.1), Cache Groups (RFC 9875), QUERY (RFC 10008).
    static let standards: [DifferentialCase] = [
        // MARK: QUERY (RFC 10008)
        make(
            "a QUERY is answered from the store for the same content only, JSON white space aside, and never a GET (RFC 10008 §2.7)",
            { world in
                world.route("/r") { request, number in
                    .init(
                        headers: [("Cache-Control", "max-age=60")],
                        body: Array(
                            "\(request.method) \(String(decoding: request.body, as: UTF8.self)) #\(number)".utf8))
                }
            },
            [
                query(#"{"q": 1}"#), query(#"{ "q":1 }"#), query(#"{"q": 2}"#), get, query(#"{"q":1}"#),
                .request("/r", method: "POST", body: "x"), query(#"{"q": 1}"#),
            ]
        ) {
            $0.originRequests == 5 && $0.isHit(1) && $0.isHit(4) && !$0.isHit(2) && !$0.isHit(3) && !$0.isHit(6)
                && $0.answers[4].body == #"QUERY {"q": 1} #1"# && $0.answers[3].body == "GET  #3"
        },

        // MARK: Targeted fields (RFC 9213)
        make(
            "a CDN-Cache-Control max-age given as a String is not consumed: Cache-Control applies (RFC 9213 §2.1)",
            { $0.serve("/r", [("Cache-Control", "no-store"), ("CDN-Cache-Control", "max-age=\"60\"")]) }, [get, get]
        ) { $0.originRequests == 2 },
        make(
            "a CDN-Cache-Control with an upper-case key is ignored: Cache-Control applies (RFC 9213 §2.1)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("CDN-Cache-Control", "No-Store")]) }, [get, get]
        ) { $0.originRequests == 1 && $0.isHit(1) },
        make(
            "the cache's own NAME-Cache-Control comes before CDN-Cache-Control (RFC 9213 §2.2)",
            {
                $0.serve(
                    "/r",
                    [
                        ("Cache-Control", "no-store"), ("CDN-Cache-Control", "no-store"),
                        ("Cache-Cache-Control", "max-age=60"),
                    ])
            }, [get, .advance(30), get]
        ) { $0.originRequests == 1 && $0.isHit(1) && $0.status(1).hasSuffix("ttl=30") },

        // MARK: The client's own conditional request (RFC 9110 §13.2.2, RFC 9111 §4.3.2)
        make(
            "If-Modified-Since against a response without Last-Modified uses its Date (RFC 9111 §4.3.2)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")]) },
            [
                get, .advance(5), .request("/r", headers: [("If-Modified-Since", "Sun, 06 Nov 1994 08:49:37 GMT")]),
                .request("/r", headers: [("If-Modified-Since", "Fri, 31 Dec 2100 23:59:59 GMT")]),
                // cache-tests conditional-lm-fresh-no-lm sends the Date less 3000 s and wants a 304;
                // the Date is later than that, so the representation was modified since: 200.
                .request("/r", headers: [("If-Modified-Since", imfDate(-3000))]),
                .request("/r", headers: [("If-Modified-Since", imfDate(-1))]),
                .request("/r", headers: [("If-Modified-Since", imfDate(0))]),
            ]
        ) {
            $0.originRequests == 1 && $0.answers.map(\.status) == [200, 200, 304, 200, 200, 304]
                && (1...5).allSatisfy($0.isHit)
        },
        make(
            "If-Modified-Since against a response without Last-Modified or Date uses the time it was received (RFC 9111 §4.3.2)",
            { world in
                world.route("/r") { _, _ in
                    var response = LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=60")], body: Array("b".utf8))
                    response.addsDate = false
                    return response
                }
            },
            [
                get, .advance(5), .request("/r", headers: [("If-Modified-Since", imfDate(-1))]),
                .request("/r", headers: [("If-Modified-Since", imfDate(0))]),
            ]
        ) { $0.originRequests == 1 && $0.answers.map(\.status) == [200, 200, 304] && $0.isHit(1) && $0.isHit(2) },
        make(
            "If-Modified-Since against Last-Modified: equal or later is 304, earlier is 200, in any date format (RFC 9110 §13.1.3; cache-tests conditional-lm-fresh, -fresh-earlier, -fresh-rfc850)",
            { $0.serve("/r", [("Cache-Control", "max-age=100000"), ("Last-Modified", imfDate(-3000))]) },
            [
                get, .request("/r", headers: [("If-Modified-Since", imfDate(-3000))]),
                .request("/r", headers: [("If-Modified-Since", imfDate(-2000))]),
                .request("/r", headers: [("If-Modified-Since", rfc850Date(-3000))]),
                .request("/r", headers: [("If-Modified-Since", imfDate(-3001))]),
            ]
        ) { $0.originRequests == 1 && $0.answers.map(\.status) == [200, 304, 304, 304, 200] },
        make(
            "If-None-Match uses the weak comparison (RFC 9110 §13.1.2)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("ETag", "\"e\"")]) },
            [get, .request("/r", headers: [("If-None-Match", "\"x\", W/\"e\"")])]
        ) { $0.originRequests == 1 && $0.answers[1].status == 304 },
        make(
            "If-Modified-Since on a POST is ignored (RFC 9110 §13.1.3)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")]) },
            [.request("/r", method: "POST", headers: [("If-Modified-Since", "Fri, 31 Dec 2100 23:59:59 GMT")])]
        ) { $0.answers[0].status == 200 },
        make(
            "a 304 from the store carries the fields RFC 9110 §15.4.5 lists and no other representation metadata",
            {
                $0.serve(
                    "/r",
                    [
                        ("Cache-Control", "max-age=60"), ("ETag", "\"e\""), ("Content-Type", "text/plain"),
                        ("Content-Language", "en"), ("Vary", "Accept"), ("Content-Location", "/r"),
                        ("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"),
                    ])
            }, [get, .request("/r", headers: [("If-None-Match", "\"e\"")])]
        ) {
            $0.answers[1].status == 304
                && $0.answers[1].metadata == ["ETag", "Vary", "Cache-Control", "Content-Location"]
                && $0.answers[0].metadata.isSuperset(of: ["Content-Type", "Content-Language", "Last-Modified"])
        },

        // MARK: Vary normalisation (RFC 9111 §4.1)
        make(
            "Accept-Language: FR,EN selects the variant stored for en, fr (RFC 9111 §4.1)",
            { world in
                world.route("/r") { request, _ in
                    .init(
                        headers: [("Cache-Control", "max-age=60"), ("Vary", "Accept-Language")],
                        body: Array("for \(request.header("Accept-Language") ?? "-")".utf8))
                }
            },
            [
                .request("/r", headers: [("Accept-Language", "en, fr")]),
                .request("/r", headers: [("Accept-Language", "FR,EN")]),
                .request("/r", headers: [("Accept-Language", "fr, en;q=0.5")]),
            ]
        ) { $0.originRequests == 2 && $0.isHit(1) && $0.answers[1].body == "for en, fr" && !$0.isHit(2) },
        make(
            "Accept-Language: a q=0 range no other range covers excludes nothing: en, fr;q=0 selects the variant stored for en (RFC 9111 §4.1, RFC 9110 §12.4.3)",
            { world in
                world.route("/r") { request, _ in
                    .init(
                        headers: [
                            ("Cache-Control", "max-age=60"), ("Vary", "Accept-Language"), ("Content-Language", "en"),
                        ],
                        body: Array("for \(request.header("Accept-Language") ?? "-")".utf8))
                }
            },
            [
                .request("/r", headers: [("Accept-Language", "en")]),
                .request("/r", headers: [("Accept-Language", "en, fr;q=0")]),
                .request("/r", headers: [("Accept-Language", "en, en-GB;q=0")]),
                // cache-tests vary-normalise-lang-select wants this answered by Content-Language;
                // "en" and "fr;q=0.5, en;q=1.0" differ in meaning, so §4.1 forbids it.
                .request("/r", headers: [("Accept-Language", "fr;q=0.5, en;q=1.0")]),
            ]
        ) { $0.originRequests == 3 && $0.isHit(1) && $0.answers[1].body == "for en" && !$0.isHit(2) && !$0.isHit(3) },
        make(
            "Vary: X-Flag absent and X-Flag empty are two variants, kept side by side (RFC 9111 §4.1)",
            { world in
                world.route("/r") { request, number in
                    .init(
                        headers: [("Cache-Control", "max-age=60"), ("Vary", "X-Flag")],
                        body: Array("#\(number) \(request.header("X-Flag").map { "[\($0)]" } ?? "absent")".utf8))
                }
            },
            [
                .request("/r"), .request("/r", headers: [("X-Flag", "")]), .request("/r"),
                .request("/r", headers: [("X-Flag", "")]),
            ]
        ) { $0.originRequests == 2 && $0.isHit(2) && $0.isHit(3) && $0.answers[3].body == "#2 []" },
        make(
            "Accept-Encoding members in another order and case select the same variant (RFC 9111 §4.1)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("Vary", "Accept-Encoding")]) },
            [
                .request("/r", headers: [("Accept-Encoding", "gzip, br")]),
                .request("/r", headers: [("Accept-Encoding", "BR ,gzip;q=1")]),
            ]
        ) { $0.originRequests == 1 && $0.isHit(1) },

        // MARK: POST (RFC 9110 §9.3.3)
        make(
            "a POST response with max-age and Content-Location equal to the target answers later GET and HEAD (RFC 9110 §9.3.3)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("Content-Location", "/r")], body: "created") },
            [.request("/r", method: "POST"), get, .request("/r", method: "HEAD")]
        ) {
            $0.originRequests == 1 && $0.status(0).contains("stored") && $0.isHit(1) && $0.answers[1].body == "created"
                && $0.isHit(2)
        },
        make(
            "a later POST is never answered from a stored POST response (RFC 9110 §9.3.3)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("Content-Location", "/r")], body: "created") },
            [.request("/r", method: "POST"), .request("/r", method: "POST")]
        ) { $0.originRequests == 2 },
        make(
            "a POST response without Content-Location is not stored (RFC 9110 §9.3.3)",
            { $0.serve("/r", [("Cache-Control", "max-age=60")], body: "created") },
            [.request("/r", method: "POST"), get]
        ) { $0.originRequests == 2 },
        make(
            "a POST response whose Content-Location names another URI is not stored for either (RFC 9110 §9.3.3)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("Content-Location", "/other")], body: "created") },
            [.request("/r", method: "POST"), get, .request("/other")]
        ) { $0.originRequests == 3 },
        make(
            "a POST response with only a heuristic lifetime is not stored (RFC 9110 §9.3.3: explicit freshness)",
            {
                $0.serve(
                    "/r", [("Last-Modified", "Sun, 06 Nov 1994 08:49:37 GMT"), ("Content-Location", "/r")],
                    body: "created")
            }, [.request("/r", method: "POST"), get]
        ) { $0.originRequests == 2 },
        make(
            "a POST replaces the stored GET response for its target (RFC 9111 §4.4, RFC 9110 §9.3.3)",
            { world in
                world.route("/r") { request, number in
                    .init(
                        headers: [("Cache-Control", "max-age=60"), ("Content-Location", "/r")],
                        body: Array("\(request.method) \(number)".utf8))
                }
            }, [get, .request("/r", method: "POST"), get]
        ) { $0.originRequests == 2 && $0.answers[2].body == "POST 2" && $0.isHit(2) },

        // MARK: Cache groups (RFC 9875)
        make(
            "a POST whose response has Cache-Group-Invalidation removes the stored responses in that group (RFC 9875 §3)",
            { world in
                world.serve("/a", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"news\", \"x\"")])
                world.serve("/b", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"news\"")])
                world.serve("/c", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"sport\"")])
                world.serve("/vote", [("Cache-Group-Invalidation", "\"news\"")])
            },
            [
                .request("/a"), .request("/b"), .request("/c"), .request("/vote", method: "POST"), .request("/a"),
                .request("/b"), .request("/c"),
            ]
        ) { $0.originRequests == 6 && !$0.isHit(4) && !$0.isHit(5) && $0.isHit(6) },
        make(
            "a 304 with another Cache-Groups moves the stored response to those groups (RFC 9111 §3.2, RFC 9875 §2)",
            { world in
                world.route("/a") { request, _ in
                    request.header("If-None-Match") != nil
                        ? .init(
                            status: 304,
                            headers: [("Cache-Control", "max-age=60"), ("ETag", "\"e\""), ("Cache-Groups", "\"new\"")])
                        : .init(
                            headers: [("Cache-Control", "max-age=1"), ("ETag", "\"e\""), ("Cache-Groups", "\"old\"")],
                            body: Array("a".utf8))
                }
                world.serve("/old", [("Cache-Group-Invalidation", "\"old\"")])
                world.serve("/new", [("Cache-Group-Invalidation", "\"new\"")])
            },
            [
                .request("/a"), .advance(5), .request("/a"), .request("/old", method: "POST"), .request("/a"),
                .request("/new", method: "POST"), .request("/a"),
            ]
        ) { $0.originRequests == 5 && $0.status(1).contains("fwd-status=304") && $0.isHit(3) && !$0.isHit(5) },
        make(
            "Cache-Group-Invalidation on a response to GET is ignored (RFC 9875 §3)",
            { world in
                world.serve("/a", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"news\"")])
                world.serve("/poll", [("Cache-Group-Invalidation", "\"news\"")])
            }, [.request("/a"), .request("/poll"), .request("/a")]
        ) { $0.originRequests == 2 && $0.isHit(2) },
        make(
            "the Cache-Groups field is stored and served with the response (RFC 9875 §2)",
            { $0.serve("/r", [("Cache-Control", "max-age=60"), ("Cache-Groups", "\"scripts\"")]) }, [get, get]
        ) { $0.isHit(1) && $0.answers[1].metadata.contains("Cache-Groups") },

        // MARK: Partial content (RFC 9111 §3.3, §3.4; RFC 9110 §14)
        partialContent(
            "a 206 holding the first bytes is stored incomplete; ranges wholly within it are answered from it (RFC 9111 §3.4)",
            etag: "\"v\"", ["bytes=0-7", "bytes=2-5", "bytes=0-1, 4-5", "bytes=10-12", "bytes=-3"]
        ) {
            $0.originRequests == 3 && $0.isHit(1) && $0.answers[1].status == 206 && $0.answers[1].body == "2345"
                && $0.isHit(2) && $0.answers[2].body.contains("BOUNDARY") && $0.answers[2].body.contains("bytes 4-5/16")
                && !$0.isHit(3) && $0.answers[3].body == "abc" && !$0.isHit(4)
        },
        partialContent(
            "a 206 with a weak validator is stored alone: ranges within it are answered from it, it is never combined (RFC 9111 §3.3, §3.4)",
            etag: "W/\"v\"", ["bytes=0-7", "bytes=2-5", "bytes=8-15", "bytes=6-9"]
        ) { $0.originRequests == 3 && $0.isHit(1) && $0.answers[1].body == "2345" && !$0.isHit(3) },
        partialContent(
            "a 206 with no validator is stored: ranges within it are answered from it, never combined, never as the whole (RFC 9111 §3.3, §3.4)",
            etag: nil, ["bytes=0-7", "bytes=2-5", "bytes=8-15", "bytes=6-9", "bytes=9-10", ""]
        ) {
            $0.originRequests == 4 && $0.isHit(1) && $0.answers[1].status == 206 && $0.answers[1].body == "2345"
                && !$0.isHit(3) && $0.answers[3].body == "6789" && $0.isHit(4) && $0.answers[4].body == "9a"
                && !$0.isHit(5) && $0.answers[5].status == 200 && $0.answers[5].body == "0123456789abcdef"
        },
        make(
            "a part with no validator, once stale, is fetched again: there is nothing to validate it with (RFC 9111 §3.3, §4.2)",
            rangeOrigin { _ in nil },
            [
                .request("/r", headers: [("Range", "bytes=0-7")]), .advance(30),
                .request("/r", headers: [("Range", "bytes=2-5")]), .advance(31),
                .request("/r", headers: [("Range", "bytes=2-5")]),
            ]
        ) { $0.isHit(1) && !$0.isHit(2) && $0.originLog == ["GET /r Range: bytes=0-7", "GET /r Range: bytes=2-5"] },
        partialContent(
            "a 206 of a later part is stored too; ranges within it are answered from it (RFC 9111 §3.3, §3.4)",
            etag: "\"v\"", ["bytes=4-9", "bytes=5-6", "bytes=4-5, 8-9", "bytes=3-5"]
        ) {
            $0.originRequests == 2 && $0.isHit(1) && $0.answers[1].body == "56" && $0.isHit(2)
                && $0.answers[2].body.contains("bytes 8-9/16") && !$0.isHit(3)
        },
        partialContent(
            "parts with the same strong validator that meet are combined; covering the whole, they are a complete response (RFC 9111 §3.4)",
            etag: "\"v\"", ["bytes=10-15", "bytes=0-4", "bytes=3-11", "bytes=2-13", ""]
        ) {
            $0.originRequests == 3 && $0.isHit(3) && $0.answers[3].body == "23456789abcd" && $0.isHit(4)
                && $0.answers[4].status == 200 && $0.answers[4].body == "0123456789abcdef"
        },
        make(
            "parts with different validators are never combined (RFC 9111 §3.4)", rangeOrigin { "\"v\($0)\"" },
            [
                .request("/r", headers: [("Range", "bytes=0-7")]), .request("/r", headers: [("Range", "bytes=8-15")]),
                .request("/r", headers: [("Range", "bytes=6-9")]), .request("/r", headers: [("Range", "bytes=1-2")]),
            ]
        ) { $0.originRequests == 3 && !$0.isHit(2) && $0.isHit(3) },
        partialContent(
            "a range request with If-Range is not answered from an incomplete response (RFC 9110 §13.1.5)",
            etag: "\"v\"",
            ["bytes=0-7", "bytes=2-5"], ifRange: true
        ) { $0.originRequests == 2 && !$0.isHit(1) },
        make(
            "only-if-cached takes a stored part holding the range; a range it does not hold, or once stale, is a 504 (RFC 9111 §5.2.1.7, §3.4)",
            rangeOrigin { _ in "\"v\"" },
            [
                .request("/r", headers: [("Range", "bytes=0-4")]),
                .request("/r", headers: [("Range", "bytes=1-2"), ("Cache-Control", "only-if-cached")]),
                .request("/r", headers: [("Range", "bytes=3-7"), ("Cache-Control", "only-if-cached")]),
                .advance(61), .request("/r", headers: [("Range", "bytes=1-2"), ("Cache-Control", "only-if-cached")]),
            ]
        ) {
            $0.originRequests == 1 && $0.isHit(1) && $0.answers[1].status == 206 && $0.answers[1].body == "12"
                && $0.answers[2].status == 504 && $0.answers[3].status == 504
        },

        // MARK: No-Vary-Search (draft-ietf-httpbis-no-vary-search)
        searchVariance(
            "key-order: the same parameters in another order are answered from the store (§6, §7)", "key-order",
            ["/r?b=2&a=1", "/r?a=1&b=2", "/r?a=1&b=3"]
        ) { $0.originRequests == 2 && $0.isHit(1) && $0.answers[1].body == "/r?b=2&a=1 #1" && !$0.isHit(2) },
        searchVariance(
            "params: the parameters named do not matter, the others do (§6, §7)", "params=(\"utm_source\")",
            ["/r?id=1&utm_source=a", "/r?utm_source=b&id=1", "/r?id=1", "/r?id=2&utm_source=a"]
        ) { $0.originRequests == 2 && $0.isHit(1) && $0.isHit(2) && !$0.isHit(3) },
        searchVariance(
            "except: only the parameters named matter (§6, §7)", "except=(\"id\"), key-order",
            ["/r?id=7&ref=x", "/r?session=9&id=7", "/r?id=8&ref=x"]
        ) { $0.originRequests == 2 && $0.isHit(1) && !$0.isHit(2) },
        searchVariance(
            "an invalid No-Vary-Search is the default: every URL its own (§5.1)", "params=(\"a\"), except=(\"b\")",
            ["/r?a=1", "/r?a=2", "/r?a=1"]
        ) { $0.originRequests == 2 && !$0.isHit(1) && $0.isHit(2) },
        make(
            "an unsafe request invalidates the responses stored for URIs equivalent to its target (RFC 9111 §4.4, §7)",
            { world in
                world.route("/r") { request, number in
                    .init(
                        headers: [("Cache-Control", "max-age=60"), ("No-Vary-Search", "params=(\"utm\")")],
                        body: Array("\(request.method) \(request.target) #\(number)".utf8))
                }
            },
            [.request("/r?utm=1"), .request("/r?utm=2", method: "POST"), .request("/r?utm=3"), .request("/r")]
        ) { $0.originRequests == 3 && !$0.isHit(2) && $0.isHit(3) && $0.answers[3].body == "GET /r?utm=3 #3" },
    ]

    /// The IMF-fixdate `offset` seconds from the time ``FixedClock`` starts at.
    static func imfDate(_ offset: Double) -> String {
        HTTPDate.format(Timestamp(secondsSince1970: FixedClock.start + offset))
    }

    /// The same time in the obsolete RFC 850 format (RFC 9110 §5.6.7), `Friday, 15-Jan-27 07:10:00 GMT`.
    static func rfc850Date(_ offset: Double) -> String {
        // "Fri, 15 Jan 2027 07:10:00 GMT"
        let parts = imfDate(offset).split(separator: " ")
        let days = [
            "Mon": "Monday", "Tue": "Tuesday", "Wed": "Wednesday", "Thu": "Thursday", "Fri": "Friday",
            "Sat": "Saturday", "Sun": "Sunday",
        ]
        return
            "\(days[String(parts[0].dropLast())] ?? ""), \(parts[1])-\(parts[2])-\(parts[3].suffix(2)) \(parts[4]) GMT"
    }

    /// A case whose origin is ``rangeOrigin(etag:)`` with one `etag`; `ranges` are requested in
    /// turn (none for an empty one; with `If-Range: etag` after the first when `ifRange`).
    static func partialContent(
        _ name: String, etag: String?, _ ranges: [String], ifRange: Bool = false,
        expect: @escaping @Sendable (Transcript) -> Bool
    ) -> DifferentialCase {
        make(
            name, rangeOrigin { _ in etag },
            ranges.enumerated().map { index, range in
                .request(
                    "/r",
                    headers: (range.isEmpty ? [] : [("Range", range)])
                        + (ifRange && index > 0 ? [("If-Range", etag ?? "")] : []))
            }, expect: expect)
    }

    /// An origin serving /r, the 16 bytes `0123456789abcdef`, with `etag(n)` on its n-th
    /// response (no `ETag` for `nil`, and never a `Last-Modified`), answering a `Range: bytes=`
    /// of one part with a `206` of it.
    static func rangeOrigin(etag: @escaping @Sendable (Int) -> String?) -> @Sendable (World) -> Void {
        let body = Array("0123456789abcdef".utf8)
        return { world in
            world.route("/r") { request, number in
                let headers = [("Cache-Control", "max-age=60")] + (etag(number).map { [("ETag", $0)] } ?? [])
                guard let text = request.header("Range"), let range = ByteRangeRequest(text),
                    range.ranges.count == 1, let part = range.satisfiableRanges(length: 16).first
                else { return .init(headers: headers, body: body) }
                return .init(
                    status: 206,
                    headers: headers + [("Content-Range", ContentRange(range: part, completeLength: 16).fieldValue)],
                    body: Array(body[Int(part.lowerBound)...Int(part.upperBound)]))
            }
        }
    }

    /// A QUERY of /r with JSON `content`.
    static func query(_ content: String) -> Step {
        .request("/r", method: "QUERY", headers: [("Content-Type", "application/json")], body: content)
    }

    /// A case whose origin answers every request of /r with `No-Vary-Search: value` and a body
    /// naming the request target and its number; `paths` are requested in turn.
    static func searchVariance(
        _ name: String, _ value: String, _ paths: [String], expect: @escaping @Sendable (Transcript) -> Bool
    ) -> DifferentialCase {
        make(
            name,
            { world in
                world.route("/r") { request, number in
                    .init(
                        headers: [("Cache-Control", "max-age=60"), ("No-Vary-Search", value)],
                        body: Array("\(request.target) #\(number)".utf8))
                }
            }, paths.map { .request($0) }, expect: expect)
    }
}
#endif
