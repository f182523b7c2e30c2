#if os(Linux)
import CacheTestSupport
import CachingProxy
import Foundation
import LoopbackOrigin
import Testing

/// What a request means to the proxy before the cache is asked, through a real `httpcache
/// serve`: a GET with content is never stored, the proxy's own paths are never forwarded in any
/// request-target form, the request-target is forwarded exactly as received and keyed exactly as
/// forwarded (RFC 9110 §7.7), and an authority that is not `host[:port]` is refused.
@Suite("httpcache serve: content in GET, admin paths, targets as received and keyed")
struct ProxyFrontDoorTests {
    /// An origin that answers every target with the target it received and the body it got,
    /// storable for 10 minutes: one that reads every spelling as its own resource, so a stored
    /// response served for another spelling, or a target changed on its way, shows in a body.
    static func echoingOrigin() throws -> LoopbackOrigin {
        let origin = try LoopbackOrigin()
        origin.setDefault { request in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600")],
                body: Array("target=\(request.target) body=\(String(decoding: request.body, as: UTF8.self))".utf8))
        }
        return origin
    }

    /// Runs `body` with an echoing origin, `httpcache serve` in front of it (reverse mode, the
    /// origin's URL with `basePath`; or `--forward` to 127.0.0.1) and a client of the proxy.
    static func withEchoingProxy(
        forward: Bool = false, basePath: String = "",
        _ body: (_ origin: LoopbackOrigin, _ proxy: ServeProcess, _ client: RawHTTPClient) throws -> Void
    ) async throws {
        try await offPool {
            let origin = try echoingOrigin()
            defer { origin.stop() }
            let proxy = try ServeProcess(
                forward ? ["--forward", "--allow-destination", "127.0.0.1"] : ["--origin", origin.baseURL + basePath])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            try body(origin, proxy, client)
        }
    }

    @Test("a GET with content is sent on with it and its response never stored nor served to others (RFC 9110 §9.3.1)")
    func getWithContentBypassesTheCache() async throws {
        try await Self.withEchoingProxy { origin, proxy, client in

            try client.send("GET /search HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nuser=alice")
            let fat = try client.readResponse()
            #expect(fat.bodyText == "target=/search body=user=alice")
            #expect(fat.field("Cache-Status")?.contains("fwd=bypass") == true)

            // A clean GET for the same URL must not get alice's answer.
            try client.send("GET /search HTTP/1.1\r\nHost: a\r\n\r\n")
            let clean = try client.readResponse()
            #expect(clean.bodyText == "target=/search body=")
            #expect(clean.field("Cache-Status")?.contains("stored") == true)

            // A stored response is not served to a GET with content either.
            try client.send(
                "GET /search HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nuser=bob\r\n0\r\n\r\n")
            let chunked = try client.readResponse()
            #expect(chunked.bodyText == "target=/search body=user=bob")
            #expect(origin.count("/search") == 3)

            // Content-Length: 0 is no content: an ordinary hit.
            try client.send("GET /search HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n")
            let empty = try client.readResponse()
            #expect(empty.bodyText == "target=/search body=")
            #expect(empty.field("Cache-Status")?.contains("hit") == true)
            #expect(origin.count("/search") == 3)
        }
    }

    /// Every spelling of the proxy's own paths a client may write, each of which some origin
    /// would read as `/_httpcache/metrics`: escapes (also double ones), repeated slashes, dot
    /// segments (also escaped), backslashes, `;parameters`, absolute-form with any host case.
    static func metricsSpellings(host: String) -> [String] {
        [
            "/_httpcache/metrics", "http://\(host)/_httpcache/metrics", "http://\(host)/_httpcache/metrics?x=1",
            "/%5Fhttpcache/metrics", "/_httpcache/%6detrics", "/%255Fhttpcache/metrics", "//_httpcache/metrics",
            "/_httpcache//metrics", "/a/../_httpcache/metrics", "/a/%2e%2e/_httpcache/metrics",
            "/a/..%2f_httpcache%2Fmetrics", "/a\\..\\_httpcache/metrics", "/_httpcache/metrics;v=1",
            "HTTP://\(host.uppercased())/./_httpcache/metrics", "http://LOCALHOST:80//_httpcache/metrics",
        ]
    }

    // The proxy's own paths are matched on the path as the most lenient origin would read it, so
    // no spelling reaches the origin, where a proxy behind this one could take it for its own.
    @Test(
        "the proxy's own paths are answered in every request-target form and spelling, never forwarded nor stored",
        arguments: [false, true])
    func adminPathsNeverForwarded(forward: Bool) async throws {
        try await Self.withEchoingProxy(forward: forward) { origin, proxy, client in
            let host = "127.0.0.1:\(origin.port)"
            for target in Self.metricsSpellings(host: host) {
                try client.send("GET \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 200, "\(target)")
                #expect(response.bodyText.contains("httpcache_"), "\(target): the proxy's metrics")
                #expect(response.field("Cache-Status") == nil, "\(target): the cache never saw it")
                #expect(response.bodyText.contains("httpcache_store_entries{tier=\"all\"} 0"), "\(target)")
            }
            for target in ["http://\(host)/_httpcache/anything", "/x/%2e%2e/_httpcache/anything"] {
                try client.send("GET \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 404, "\(target)")
                #expect(response.bodyText.contains("/_httpcache/anything is not one of the proxy's paths"), "\(target)")
            }
            try client.send("POST /_httpcache/metrics HTTP/1.1\r\nHost: \(host)\r\nContent-Length: 0\r\n\r\n")
            let post = try client.readResponse()
            #expect(post.status == 405)
            #expect(post.field("Allow") == "GET, HEAD")
            #expect(origin.requests.isEmpty, "nothing reached the origin: \(origin.requests.map(\.target))")
        }
    }

    /// Targets an origin may read as different resources, or that a normalizing proxy would
    /// change: dot segments (also escaped), `%2f` / `%2F` / `/`, an escaped unreserved
    /// character, CR LF escapes in a query in both cases, `%7e` / `~`, an empty query,
    /// `;parameters`, an empty segment, a stray `%`.
    static let targetSpellings = [
        "/d/x/../t", "/d/./t", "/d/x/%2e%2e/t", "/d/t", "/s/a%2fb", "/s/a%2Fb", "/s/a/b", "/pu/%61", "/pu/a",
        "/q?x=%0d%0a", "/q?x=%0D%0A", "/t/%7e", "/t/%7E", "/t/~", "/e?", "/e", "/p;x", "/p", "//d/t", "/a/b/..",
        "/u/%C3%A9", "/u/%c3%a9", "/h/%", "/account/x.css", "/account%2fx.css", "/a/%61", "/a/a",
    ]

    // RFC 9110 §7.7: "A proxy MUST NOT modify the "absolute-path" and "query" parts of the
    // received target URI when forwarding it to the next inbound server except as required by
    // that forwarding protocol." Keyed as forwarded, each spelling is an entry of its own.
    @Test(
        "the request-target reaches the origin byte for byte as received, and each spelling gets its own answer, stored and served under it (RFC 9110 §7.7)",
        arguments: [false, true])
    func targetsForwardedAsReceived(forward: Bool) async throws {
        try await Self.withEchoingProxy(forward: forward) { origin, proxy, client in
            let host = "127.0.0.1:\(origin.port)"
            for round in 0..<2 {
                for target in Self.targetSpellings {
                    let sent = forward ? "http://\(host)\(target)" : target
                    try client.send("GET \(sent) HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                    let response = try client.readResponse()
                    #expect(response.bodyText == "target=\(target) body=", "\(sent)")
                    let cacheStatus = response.field("Cache-Status") ?? ""
                    #expect(cacheStatus.contains(round == 0 ? "stored" : "hit"), "\(sent): \(cacheStatus)")
                }
            }
            #expect(origin.requests.map(\.target) == Self.targetSpellings)
        }
    }

    @Test("PURGE and httpcache purge --proxy remove exactly the spelling they name, nothing stored under another")
    func purgeNamesOneSpelling() async throws {
        try await Self.withEchoingProxy { origin, proxy, client in
            for target in ["/a/%61", "/a/a", "/a/%2e%2e/b", "/b"] {
                try client.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try client.readResponse().field("Cache-Status")?.contains("stored") == true, "\(target)")
            }
            let answer = try CachingProxy.purge(proxy.baseURL + "/a/%61", proxy: proxy.baseURL, token: nil)
            #expect(answer.status == 200)
            #expect(answer.message.contains("purged 1 stored response for"))
            try client.send("PURGE /a/%2e%2e/b HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            for (target, hit) in [("/a/%61", false), ("/a/a", true), ("/a/%2e%2e/b", false), ("/b", true)] {
                try client.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.bodyText == "target=\(target) body=")
                #expect(response.field("Cache-Status")?.contains(hit ? "hit" : "stored") == true, "\(target)")
            }
        }
    }

    @Test(
        "an absolute-form target in reverse mode reaches the origin with its path and query as received (RFC 9110 §7.7)"
    )
    func absoluteFormInReverseMode() async throws {
        try await Self.withEchoingProxy { origin, proxy, client in
            for (target, forwarded) in [
                ("http://a/d/x/../t?%0d%0a", "/d/x/../t?%0d%0a"), ("http://a?q", "/?q"), ("http://a", "/"),
                ("http://a/s/a%2fb", "/s/a%2fb"),
            ] {
                try client.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try client.readResponse().bodyText == "target=\(forwarded) body=", "\(target)")
            }
            #expect(origin.requests.map(\.target) == ["/d/x/../t?%0d%0a", "/?q", "/", "/s/a%2fb"])
        }
    }

    // RFC 9110 §4.2.3: scheme and host are case-insensitive, and an empty or default port is the
    // same as none; nothing else of a target is compared loosely.
    @Test("scheme and host case, an empty port and a port's leading zeros still share one entry (RFC 9110 §4.2.3)")
    func authorityCaseSharesAnEntry() async throws {
        try await offPool {
            let origin = try Self.echoingOrigin()
            defer { origin.stop() }
            let proxy = try ServeProcess(["--forward", "--allow-destination", "localhost"])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            let port = origin.port
            for (number, target) in [
                "HTTP://LOCALHOST:\(port)/x?Q", "http://localhost:\(port)/x?Q", "hTTp://LocalHost:0\(port)/x?Q",
            ].enumerated() {
                try client.send("GET \(target) HTTP/1.1\r\nHost: localhost:\(port)\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.bodyText == "target=/x?Q body=", "\(target)")
                #expect(response.field("Cache-Status")?.contains(number == 0 ? "stored" : "hit") == true, "\(target)")
            }
            #expect(origin.requests.map(\.target) == ["/x?Q"])
            #expect(origin.requests.first?.header("Host") == "localhost:\(port)", "the Host the proxy generates")

            // In reverse mode every authority names the one origin: `http://H:80/x`, `http://h/x`,
            // `http://h:/x` and `/x` are one entry.
            let reverse = try ServeProcess(["--origin", origin.baseURL])
            defer { reverse.terminate() }
            let reverseClient = try RawHTTPClient(port: reverse.port)
            defer { reverseClient.close() }
            for target in ["http://H:80/y", "http://h/y", "http://h:/y", "/y"] {
                try reverseClient.send("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n")
                #expect(try reverseClient.readResponse().bodyText == "target=/y body=", "\(target)")
            }
            #expect(origin.count("/y") == 1)
        }
    }

    @Test(
        "an authority or Host that is not host[:port] gets 400 saying why, and nothing is forwarded (RFC 3986 §3.2.2-3, RFC 9112 §3.2, RFC 9110 §4.2.4)"
    )
    func badAuthoritiesRefused() async throws {
        try await offPool {
            let origin = try Self.echoingOrigin()
            defer { origin.stop() }
            let forward = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1"])
            defer { forward.terminate() }
            let reverse = try ServeProcess(["--origin", origin.baseURL])
            defer { reverse.terminate() }
            let port = origin.port
            let targets: [(String, String)] = [
                ("http://127.0.0.1:+\(port)/", "port \"+\(port)\" is not a number"),
                ("http://127.0.0.1:-\(port)/", "is not a number"), ("http://127.0.0.1:\(port)x/", "is not a number"),
                ("http://127.0.0.1:1\(port)0/", "is larger than 65535"),
                ("http://127.0.0.1:99999999999999999999/", "larger than 65535"),
                ("http://127.0.0.1:0/", "port is 0"), ("http://u@127.0.0.1:\(port)/", "user information"),
                ("http://u:p@127.0.0.1:\(port)/", "user information"), ("http://:\(port)/", "host is empty"),
                ("http://[::1/", "no closing ']'"), ("http://127.0.0.1:\(port)/a#frag", "fragment"),
            ]
            for proxy in [forward, reverse] {
                for (target, reason) in targets {
                    let client = try RawHTTPClient(port: proxy.port)
                    defer { client.close() }
                    try client.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
                    let response = try client.readResponse()
                    #expect(response.status == 400, "\(target)")
                    #expect(response.bodyText.contains(reason), "\(target): \(response.bodyText)")
                }
            }
            let hosts: [(String, String)] = [
                ("127.0.0.1:+\(port)", "port \"+\(port)\" is not a number"), ("127.0.0.1:99999", "larger than 65535"),
                ("127.0.0.1:\(port)x", "is not a number"), ("127.0.0.1:0", "port is 0"), (":\(port)", "host is empty"),
                ("[::1", "no closing ']'"), ("[::1]x", "is followed by"), ("h:1:2", "is not a number"),
            ]
            for proxy in [forward, reverse] {
                for (host, reason) in hosts {
                    let client = try RawHTTPClient(port: proxy.port)
                    defer { client.close() }
                    let target = proxy === forward ? "http://127.0.0.1:\(port)/ok" : "/ok"
                    try client.send("GET \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                    let response = try client.readResponse()
                    #expect(response.status == 400, "Host: \(host)")
                    #expect(
                        response.bodyText.contains("Host value is not host[:port] (RFC 9112 §3.2): its"),
                        "Host: \(host)")
                    #expect(response.bodyText.contains(reason), "Host: \(host): \(response.bodyText)")
                }
            }
            #expect(origin.requests.isEmpty, "nothing reached the origin: \(origin.requests.map(\.target))")

            // An empty port is the default one (RFC 3986 §3.2.3); an empty Host names no authority
            // (RFC 9112 §3.2), and a reverse proxy has its origin's.
            let client = try RawHTTPClient(port: reverse.port)
            defer { client.close() }
            try client.send("GET http://a:/ok HTTP/1.1\r\nHost: a:\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            try client.send("GET /ok2 HTTP/1.1\r\nHost:\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            #expect(origin.requests.map(\.target) == ["/ok", "/ok2"])
        }
    }

    // Forwarded unchanged, `/base` + `/../secret` is a path the origin may resolve to `/secret`:
    // outside the part of it this proxy serves. Rewriting the target is not allowed (RFC 9110
    // §7.7), so such a target is refused; a `..` that stays under the base is forwarded as is.
    @Test("with a base path, a target whose dot segments climb above it gets 400; others are forwarded as received")
    func dotSegmentsCannotClimbOutOfTheBasePath() async throws {
        try await Self.withEchoingProxy(basePath: "/base") { origin, proxy, client in
            for target in [
                "/../secret", "http://a/x/../../secret", "/%2e%2e/secret", "/x/..%2f..%2fsecret", "//../secret",
            ] {
                try client.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 400, "\(target)")
                #expect(response.bodyText.contains("climbs above the root"), "\(target)")
            }
            try client.send("GET /x/../y?a=/../b HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().bodyText == "target=/base/x/../y?a=/../b body=")
            #expect(origin.requests.map(\.target) == ["/base/x/../y?a=/../b"])
        }
    }
}
#endif
