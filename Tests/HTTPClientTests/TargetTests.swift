#if os(Linux)
import CacheSemantics
import Testing

@testable import HTTPClient

/// Where requests go: absolute-form targets and URLs read into ``Target``, authorities into a
/// host and port for ``OriginSocket``.
@Suite("Target and OriginSocket")
struct TargetTests {
    @Test(
        "Absolute-form targets are split into URL and authority (RFC 9112 §3.2.2); only the authority is normalized (RFC 9110 §4.2.3, §7.7)"
    )
    func absoluteForm() throws {
        #expect(
            try Target.absolute("http://example.test/a?b")
                == Target(url: "http://example.test/a?b", authority: "example.test"))
        #expect(try Target.absolute("HTTP://h:81") == Target(url: "http://h:81/", authority: "h:81"))
        #expect(try Target.absolute("http://h:81?q") == Target(url: "http://h:81/?q", authority: "h:81"))
        #expect(try Target.absolute("http://h/p#frag") == Target(url: "http://h/p", authority: "h"))
        #expect(
            try Target.absolute("http://EXAMPLE.test:80/A/../%2f%7e?Q=%0d")
                == Target(url: "http://example.test/A/../%2f%7e?Q=%0d", authority: "example.test"))
        #expect(try Target.absolute("http://h:/x") == Target(url: "http://h/x", authority: "h"))
        #expect(try Target.absolute("http://h:0081/x") == Target(url: "http://h:81/x", authority: "h:81"))
        #expect(try Target.absolute("http://[::1]:80/") == Target(url: "http://[::1]/", authority: "[::1]"))
        #expect(try Target.absolute("/path") == nil)
    }

    @Test(
        "An absolute-form authority that is not host[:port] is an error that says why (RFC 3986 §3.2.2-3, RFC 9110 §4.2.1, §4.2.4)",
        arguments: [
            ("http://h:+18941/", "port \"+18941\" is not a number"), ("http://h:8a/", "port \"8a\" is not a number"),
            ("http://h:-1/", "port \"-1\" is not a number"), ("http://h:99999/", "port 99999 is larger than 65535"),
            ("http://h:0/", "port is 0"), ("http://user@h/", "user information"), ("http://u:p@h/", "user information"),
            ("http:///path", "host is empty"), ("http://:80/", "host is empty"), ("http://h:80:80/", "not a number"),
            ("http://[::1/", "no closing ']'"), ("http://[::g]/", "not an IPv6 address"),
            ("http://[::1]x/", "is followed by"), ("http://h<x/", "contains '<'"), ("http://h%zz/", "%XX"),
        ])
    func invalidAuthority(target: String, reason: String) {
        #expect {
            _ = try Target.absolute(target)
        } throws: { error in
            (error as? URIAuthority.Invalid)?.description.contains(reason) == true
        }
    }

    @Test(
        "https URLs are targets of their own: the scheme lower-cased, port 443 the default (RFC 9110 §4.2.2, §4.2.3)"
    )
    func httpsTargets() throws {
        let secure = try #require(try Target.absolute("HTTPS://Example.test:443/a?b#f"))
        #expect(secure == Target(url: "https://example.test/a?b", authority: "example.test"))
        #expect(secure.scheme == .https)
        #expect(secure.pathAndQuery == "/a?b")
        #expect(try Target.absolute("https://h:80/") == Target(url: "https://h:80/", authority: "h:80"))
        #expect(
            try Target.absolute("https://[::1]:8443") == Target(url: "https://[::1]:8443/", authority: "[::1]:8443"))
        let plain = try #require(try Target.absolute("http://h:443/x"))
        #expect(plain == Target(url: "http://h:443/x", authority: "h:443"))
        #expect(plain.scheme == .http)
        #expect(plain.pathAndQuery == "/x")
        #expect(try Target.absolute("httpx://h/") == nil)
        #expect(try Target.absolute("ftp://h/") == nil)
        #expect(try Target.absolute("https:/h/") == nil)
    }

    @Test(
        "A reverse proxy's target is its origin's base path then the request-target, byte for byte (RFC 9112 §3.2.1, RFC 9110 §7.7): what Target.absolute reads from its URL",
        arguments: [
            "http://o.test", "http://o.test/", "http://o.test//", "HTTP://O.test:80/base/", "http://o.test/base",
            "https://[::1]:8443/a/b//", "https://o.test:443", "http://o.test:8080/q?x=1",
        ])
    func forwardingUnderAnOrigin(origin: String) throws {
        let base = try #require(try Target.absolute(origin))
        #expect(!base.basePath.hasSuffix("/"))
        for path in ["/", "/x", "//other.test/x", "/a/../b?c=%2f&d", "/?q", "/x#frag", "/%23?#"] {
            let target = base.forwarding(Substring(path))
            #expect(try Target.absolute(target.url) == target, "\(origin) + \(path)")
            #expect(target.authority == base.authority && target.scheme == base.scheme)
            let cut = path.prefix { $0 != "#" }
            #expect(target.pathAndQuery == base.basePath + cut, "\(origin) + \(path)")
            // What goes out is what the URL alone makes: the target spares reading it again.
            let fields: HeaderFields = ["Accept": "*/*", "Connection": "close"]
            let fromTarget = try UpstreamRequest(method: "GET", target: target, fields: fields).wire()
            let fromURL = try UpstreamRequest(method: "GET", url: target.url, fields: fields).wire()
            #expect(fromTarget.head == fromURL.head && fromTarget.poolKey == fromURL.poolKey)
            #expect(fromTarget.host == fromURL.host && fromTarget.port == fromURL.port)
            #expect(fromTarget.originHost == fromURL.originHost && fromTarget.closesConnection)
        }
        #expect(try #require(try Target.absolute("http://o.test/base//")).basePath == "/base")
        #expect(try #require(try Target.absolute("http://o.test/")).basePath == "")
    }

    @Test("A request made from a target and then given another URL sends that URL")
    func settingTheURLForgetsTheTarget() throws {
        let target = try #require(try Target.absolute("http://a.test/one"))
        var request = UpstreamRequest(method: "GET", target: target, fields: [:])
        request.url = "http://b.test/two"
        let wire = try request.wire()
        #expect(wire.host == "b.test" && String(decoding: wire.head, as: UTF8.self).hasPrefix("GET /two HTTP/1.1\r\n"))
    }

    @Test("CONNECT targets are host:port (RFC 9110 §9.3.6)")
    func connectAuthority() {
        #expect(OriginSocket.authority("example.test:443")! == ("example.test", 443))
        #expect(OriginSocket.authority("[::1]:8443")! == ("::1", 8443))
        #expect(OriginSocket.authority("example.test") == nil)
        #expect(OriginSocket.authority("example.test:0") == nil)
        #expect(OriginSocket.authority("example.test:99999") == nil)
        #expect(OriginSocket.authority("example.test:+443") == nil, "a port is digits only (RFC 3986 §3.2.3)")
        #expect(OriginSocket.authority("/path:80") == nil)
        #expect(OriginSocket.authority("example.test", defaultPort: 80)! == ("example.test", 80))
    }
}
#endif
