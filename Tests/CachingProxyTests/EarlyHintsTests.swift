#if os(Linux)
import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// `103 Early Hints` the proxy sends itself (RFC 8297), from the links of stored responses.
@Suite("httpcache serve: Early Hints from the cache (RFC 8297)")
struct EarlyHintsTests {
    static let page: [(String, String)] = [
        ("Cache-Control", "max-age=0"), ("ETag", "\"p1\""),
        ("Link", "</a.css>; rel=preload; as=style, </next>; rel=next"),
        ("Link", "<https://cdn.test>; rel=\"preconnect dns-prefetch\", </b.js>; REL=Preload; as=script"),
    ]

    /// Sends GET `path` on `client` and reads every response up to the final one.
    static func responses(
        _ client: RawHTTPClient, _ path: String, version: String = "1.1", _ fields: [(String, String)] = []
    ) throws -> [RawHTTPClient.Response] {
        let lines = fields.map { "\($0.0): \($0.1)\r\n" }.joined()
        try client.send("GET \(path) HTTP/\(version)\r\nHost: origin.test\r\n\(lines)\r\n")
        var read: [RawHTTPClient.Response] = []
        repeat { read.append(try client.readResponse(interim: true)) } while read.last!.status < 200
        return read
    }

    @Test(
        "RFC 8297 §2: a revalidation gets 103 at once with the stored response's preload and preconnect links, then the response"
    )
    func revalidationIsHinted() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/page") { request in
                request.header("If-None-Match") == "\"p1\""
                    ? LoopbackOrigin.Response(status: 304, headers: [("ETag", "\"p1\"")], body: "", delay: 0.2)
                    : LoopbackOrigin.Response(status: 200, headers: Self.page, body: "page")
            }
            let client = try RawHTTPClient(port: harness.proxy.port)
            defer { client.close() }
            let first = try Self.responses(client, "/page")
            #expect(first.map(\.status) == [200], "nothing is known of the URL before its first response")
            let second = try Self.responses(client, "/page")
            #expect(second.map(\.status) == [103, 200])
            #expect(
                second[0].fields.filter { $0.name == "Link" }.map(\.value) == [
                    "</a.css>; rel=preload; as=style", "<https://cdn.test>; rel=\"preconnect dns-prefetch\"",
                    "</b.js>; REL=Preload; as=script",
                ])
            #expect(second[1].bodyText == "page")
            #expect(second[1].field("Cache-Status")?.contains("fwd=stale") == true)
            // HTTP/1.0 clients never get a 1xx (RFC 9110 §15.2).
            let old = try Self.responses(client, "/page", version: "1.0")
            #expect(old.map(\.status) == [200])
        }
    }

    @Test("RFC 8297 §2, RFC 9113 §8.1: over HTTP/2 the proxy's 103 is a HEADERS frame before the final response")
    func overHTTP2() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/page", Self.page, body: "page")
            let client = try HTTP2Client(port: harness.proxy.port)
            #expect(client.send([HTTP2Request("GET", "/page")])[0].interim.isEmpty)
            let second = client.send([HTTP2Request("GET", "/page")])[0]
            #expect(second.interim.map(\.status) == [103], "\(second)")
            #expect(
                second.interim.first?.fields.contains(HTTP2Field("link", "</a.css>; rel=preload; as=style")) == true)
            #expect(second.status == 200)
            #expect(second.text == "page")
        }
    }

    @Test("RFC 9111 §5.2.2.5: nothing of a no-store response is kept, not even its links: no 103 follows it")
    func noStoreIsNeverLearned() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/private", [("Cache-Control", "no-store"), ("Link", "</a.css>; rel=preload")], body: "x")
            let client = try RawHTTPClient(port: harness.proxy.port)
            defer { client.close() }
            for _ in 0..<2 { #expect(try Self.responses(client, "/private").map(\.status) == [200]) }
        }
    }

    @Test(
        "RFC 9111 §4.1: the links of a response that varies on Cookie hint only requests with that Cookie; another user's request gets none"
    )
    func variedLinksStayWithTheirVariant() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/account") { request in
                let user = request.header("Cookie") ?? "nobody"
                return LoopbackOrigin.Response(
                    headers: [
                        ("Cache-Control", "max-age=0"), ("Vary", "Cookie"),
                        ("Link", "</u/\(user)/private.css>; rel=preload; as=style"),
                    ], body: "hello \(user)", delay: 0.05)
            }
            let client = try RawHTTPClient(port: harness.proxy.port)
            defer { client.close() }
            #expect(try Self.responses(client, "/account", [("Cookie", "alice")]).map(\.status) == [200])
            let bob = try Self.responses(client, "/account", [("Cookie", "bob")])
            #expect(bob.map(\.status) == [200], "alice's link went to bob: \(bob.first?.fields ?? [])")
            #expect(bob.last?.bodyText == "hello bob")
            // Bob again (his variant stale): his own link, at once.
            let again = try Self.responses(client, "/account", [("Cookie", "bob")])
            #expect(again.map(\.status) == [103, 200])
            #expect(again.first?.field("Link") == "</u/bob/private.css>; rel=preload; as=style")
            // Bob's response is the last stored: alice gets no hint of his.
            let alice = try Self.responses(client, "/account", [("Cookie", "alice")])
            #expect(alice.map(\.status) == [200], "\(alice.first?.fields ?? [])")
            #expect(alice.last?.bodyText == "hello alice")
        }
    }

    @Test(
        "RFC 9111 §5.2.2.4, §5.2.2.7: a Link that no-cache=\"Link\" or private=\"Link\" withholds is never sent as a hint",
        arguments: ["max-age=0, no-cache=\"Link\"", "max-age=0, private=\"Link\""])
    func withheldLinksAreNotHints(cacheControl: String) async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/page", [("Cache-Control", cacheControl), ("Link", "</a.css>; rel=preload")], body: "p")
            let client = try RawHTTPClient(port: harness.proxy.port)
            defer { client.close() }
            #expect(try Self.responses(client, "/page").map(\.status) == [200])
            let second = try Self.responses(client, "/page", [("Cache-Control", "no-cache")])
            #expect(second.map(\.status) == [200], "\(second.first?.fields ?? [])")
        }
    }

    @Test("A PURGE of the URL, or a POST to it, forgets its hints: the next request waits for the origin without a 103")
    func purgeForgetsHints() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.serve("/page", Self.page, body: "page")
            let client = try RawHTTPClient(port: harness.proxy.port)
            defer { client.close() }
            #expect(try Self.responses(client, "/page").map(\.status) == [200])
            #expect(try Self.responses(client, "/page").map(\.status) == [103, 200])
            #expect(try harness.get("/page", method: "PURGE").status == 200)
            #expect(try Self.responses(client, "/page").map(\.status) == [200])
            // Learned again; then an unsafe method to the URL (RFC 9111 §4.4) forgets them too.
            #expect(try Self.responses(client, "/page").map(\.status) == [103, 200])
            #expect(try harness.get("/page", method: "POST", body: Array("x".utf8)).status == 200)
            #expect(try Self.responses(client, "/page").map(\.status) == [200])
        }
    }

    @Test("--no-early-hints: the proxy sends none of its own")
    func turnedOff() async throws {
        try await offPool {
            let harness = try ProxyHarness { $0.earlyHints = false }
            harness.serve("/page", Self.page, body: "page")
            let client = try RawHTTPClient(port: harness.proxy.port)
            defer { client.close() }
            for _ in 0..<2 { #expect(try Self.responses(client, "/page").map(\.status) == [200]) }
        }
    }

    @Test(
        "RFC 8297 §2: an origin's 103 is merged: the links already sent are not repeated, new ones go on, one with none new is dropped"
    )
    func originHintsAreMerged() async throws {
        try await offPool {
            let served = Locked(0)
            let origin = try RawOrigin(answer: { _ in
                let number = served.withLock { count -> Int in
                    defer { count += 1 }
                    return count
                }
                let final =
                    "HTTP/1.1 200 OK\r\nCache-Control: max-age=0\r\nLink: </a.css>; rel=preload\r\n"
                    + "Content-Length: 4\r\n\r\npage"
                switch number {
                case 0: return [.send(final)]
                case 1:
                    return [
                        .send("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload, </c.css>; rel=preload\r\n\r\n"),
                        .send(final),
                    ]
                default:
                    return [.send("HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"), .send(final)]
                }
            })
            defer { origin.stop() }
            let proxy = try InProcessProxy(origin: origin.url(""))
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            _ = try Self.responses(client, "/m")
            let merged = try Self.responses(client, "/m")
            #expect(merged.map(\.status) == [103, 103, 200])
            #expect(merged[0].fields.filter { $0.name == "Link" }.map(\.value) == ["</a.css>; rel=preload"])
            #expect(merged[1].fields.filter { $0.name == "Link" }.map(\.value) == ["</c.css>; rel=preload"])
            let nothingNew = try Self.responses(client, "/m")
            #expect(nothingNew.map(\.status) == [103, 200])
        }
    }

    @Test(
        "RFC 8288 §3: link members split at commas outside <…> and quotes; rel compared ignoring case; bounded per URL")
    func parsing() {
        #expect(
            EarlyHints.members(of: "</a,b.css>; rel=preload; title=\"x, y\" , </c>; rel=next,,")
                == ["</a,b.css>; rel=preload; title=\"x, y\"", "</c>; rel=next"])
        #expect(EarlyHints.isHint("</a>; rel=PRELOAD"))
        #expect(EarlyHints.isHint("</a>; rel=\"prefetch preconnect\""))
        #expect(!EarlyHints.isHint("</a>; rel=prefetch"))
        #expect(!EarlyHints.isHint("/a; rel=preload"), "no <target>: not a link")
        #expect(!EarlyHints.isHint("</a>; rel=next; rel=preload"), "only the first rel counts (RFC 8288 §3.3)")
        let many = HeaderFields((0..<40).map { ("Link", "</r\($0).js>; rel=preload") })
        #expect(EarlyHints.hintMembers(many).count == EarlyHints.membersPerURL)
        let long = HeaderFields([("Link", "</\(String(repeating: "x", count: 3000))>; rel=preload")])
        #expect(EarlyHints.hintMembers(long).isEmpty)
    }
}
#endif
