#if os(Linux)
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// What a request means to the proxy before the cache is asked, through a real `httpcache
/// serve`: a GET with content is never stored, the proxy's own paths are never forwarded in any
/// request-target form, and what is forwarded is exactly what the cache key says.
@Suite("httpcache serve: content in GET, admin paths, targets as keyed")
struct ProxyFrontDoorTests {
    /// An origin that answers every target with the target it received and the body it got,
    /// storable for 10 minutes: one that does not normalize, so any difference between what is
    /// forwarded and what is keyed shows in a body.
    static func echoingOrigin() throws -> LoopbackOrigin {
        let origin = try LoopbackOrigin()
        origin.setDefault { request in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600")],
                body: Array("target=\(request.target) body=\(String(decoding: request.body, as: UTF8.self))".utf8))
        }
        return origin
    }

    @Test("a GET with content is sent on with it and its response never stored nor served to others (RFC 9110 §9.3.1)")
    func getWithContentBypassesTheCache() async throws {
        try await offPool {
            let origin = try Self.echoingOrigin()
            defer { origin.stop() }
            let proxy = try ServeProcess(["--origin", origin.baseURL])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }

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

    @Test(
        "the proxy's own paths are answered in origin-form, absolute-form and any spelling, and never forwarded",
        arguments: [false, true])
    func adminPathsNeverForwarded(forward: Bool) async throws {
        try await offPool {
            let origin = try Self.echoingOrigin()
            defer { origin.stop() }
            let proxy = try ServeProcess(
                forward ? ["--forward", "--allow-destination", "127.0.0.1"] : ["--origin", origin.baseURL])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            let host = "127.0.0.1:\(origin.port)"
            let metricsTargets = [
                "/_httpcache/metrics", "http://\(host)/_httpcache/metrics", "http://\(host)/_httpcache/metrics?x=1",
                "/%5Fhttpcache/metrics", "/a/../_httpcache/metrics", "HTTP://\(host.uppercased())/./_httpcache/metrics",
            ]
            for target in metricsTargets {
                try client.send("GET \(target) HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 200, "\(target)")
                #expect(response.bodyText.contains("httpcache_"), "\(target): the proxy's metrics")
            }
            try client.send("GET http://\(host)/_httpcache/anything HTTP/1.1\r\nHost: \(host)\r\n\r\n")
            #expect(try client.readResponse().status == 404)
            try client.send("POST /_httpcache/metrics HTTP/1.1\r\nHost: \(host)\r\nContent-Length: 0\r\n\r\n")
            let post = try client.readResponse()
            #expect(post.status == 405)
            #expect(post.field("Allow") == "GET, HEAD")
            #expect(origin.requests.isEmpty, "nothing reached the origin: \(origin.requests.map(\.target))")
        }
    }

    @Test(
        "what is forwarded is the normalized target the key names, so an origin that does not normalize cannot poison another URL (RFC 3986 §6.2.2, RFC 9110 §4.2.3)"
    )
    func forwardedTargetIsTheKeyedTarget() async throws {
        try await offPool {
            let origin = try Self.echoingOrigin()
            defer { origin.stop() }
            let proxy = try ServeProcess(["--origin", origin.baseURL])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            for (target, forwarded) in [
                ("/a/x/../t", "/a/t"), ("/a/t", "/a/t"), ("/a/%7Et?q=%7e", "/a/~t?q=~"), ("/a/~t?q=~", "/a/~t?q=~"),
                ("/a/./b/%2f", "/a/b/%2F"),
            ] {
                try client.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try client.readResponse().bodyText == "target=\(forwarded) body=", "\(target)")
            }
            #expect(origin.requests.map(\.target) == ["/a/t", "/a/~t?q=~", "/a/b/%2F"])
        }
    }

    @Test("dot segments cannot climb out of the origin's base path")
    func dotSegmentsStayUnderTheBasePath() async throws {
        try await offPool {
            let origin = try Self.echoingOrigin()
            defer { origin.stop() }
            let proxy = try ServeProcess(["--origin", origin.baseURL + "/base"])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            try client.send("GET /../secret HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().bodyText == "target=/base/secret body=")
            try client.send("GET http://a/x/../../secret HTTP/1.1\r\nHost: a\r\n\r\n")
            #expect(try client.readResponse().bodyText == "target=/base/secret body=")
            #expect(origin.requests.map(\.target) == ["/base/secret"])
        }
    }

    @Test("in forward mode the absolute-form target is forwarded normalized, with the normalized Host")
    func forwardModeNormalizes() async throws {
        try await offPool {
            let origin = try Self.echoingOrigin()
            defer { origin.stop() }
            let proxy = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1"])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            try client.send(
                "GET http://127.0.0.1:\(origin.port)/p/q/../r HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            #expect(try client.readResponse().bodyText == "target=/p/r body=")
            try client.send(
                "GET http://127.0.0.1:\(origin.port)/p/r HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            #expect(try client.readResponse().field("Cache-Status")?.contains("hit") == true)
            #expect(origin.requests.map(\.target) == ["/p/r"])
        }
    }
}
#endif
