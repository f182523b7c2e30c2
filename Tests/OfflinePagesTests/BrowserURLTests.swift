import Foundation
import Testing

@testable import OfflinePages

private let page = "http://example.org/dir/page.html"

/// The serialization of `input` resolved against `base`, or `failure`/`scheme:` for what is not an
/// http(s) URL.
private func resolve(_ input: String, against base: String? = page) -> String {
    let parsedBase: BrowserURL?
    if let base, case .url(let url) = BrowserURL.parse(base) { parsedBase = url } else { parsedBase = nil }
    switch BrowserURL.parse(input, base: parsedBase) {
    case .url(let url): return url.serialization
    case .otherScheme(let scheme): return scheme + ":"
    case .failure: return "failure"
    }
}

/// URLs found in pages resolve as a browser resolves them: the WHATWG URL Standard's basic URL
/// parser for special schemes (its own examples where it gives them).
@Suite("URLs resolved as a browser resolves them (WHATWG URL Standard)")
struct BrowserURLTests {
    @Test(
        "A backslash is a path separator in http(s): http://a\\@b/ is host a (URL Standard §4.4 authority state)",
        arguments: [
            (#"http://a\@b/"#, "http://a/@b/"),
            (#"http://a\@127.0.0.2/secret.png"#, "http://a/@127.0.0.2/secret.png"),
            (#"\\other\path\x.png"#, "http://other/path/x.png"),
            (#"/\other/x"#, "http://other/x"),
            (#"img\a.png"#, "http://example.org/dir/img/a.png"),
            (#"http:\\host\x"#, "http://host/x"),
        ])
    func backslashes(input: String, expected: String) {
        #expect(resolve(input) == expected)
    }

    @Test(
        "Tabs and newlines are removed anywhere; leading and trailing C0 controls and spaces trimmed (§4.4)",
        arguments: [
            ("\thttp://ex\nample.org/a\tb\r", "http://example.org/ab"),
            ("h\tt\ntp://127.0.0.2/x", "http://127.0.0.2/x"),
            ("\u{0} \u{1F} img/a.png \u{0C}", "http://example.org/dir/img/a.png"),
            ("//127.0.0\t.2/", "http://127.0.0.2/"),
        ])
    func whitespace(input: String, expected: String) {
        #expect(resolve(input) == expected)
    }

    @Test(
        "Scheme-relative and scheme-only references (§4.4 special relative or authority state)",
        arguments: [
            ("//host/x", page, "http://host/x"),
            ("//host/x", "https://example.org/", "https://host/x"),
            ("http:foo", page, "http://example.org/dir/foo"),
            ("http:/foo", page, "http://example.org/foo"),
            ("http:foo", "https://example.org/", "http://foo/"),
            ("https:foo", page, "https://foo/"),
            ("http:///host//x", page, "http://host//x"),
            ("HTTP://Example.ORG", page, "http://example.org/"),
        ])
    func schemeRelative(input: String, base: String, expected: String) {
        #expect(resolve(input, against: base) == expected)
    }

    @Test(
        "Every IPv4 spelling is the address it names (§3.5 IPv4 parser, ends-in-a-number checker)",
        arguments: [
            ("http://2130706433/", "http://127.0.0.1/"),
            ("http://0x7f.1/", "http://127.0.0.1/"),
            ("http://0x7F.0.0.1/", "http://127.0.0.1/"),
            ("http://0177.0.0.1/", "http://127.0.0.1/"),
            ("http://127.1/", "http://127.0.0.1/"),
            ("http://127.0.0.1./", "http://127.0.0.1/"),
            ("http://%31%32%37.0.0.2/", "http://127.0.0.2/"),
            ("http://0xa9fea9fe/", "http://169.254.169.254/"),
            ("http://169.254.43518/", "http://169.254.169.254/"),
            ("http://0/", "http://0.0.0.0/"),
            ("http://09.example/", "http://09.example/"),
            ("https://1.2.3.4.5/", "failure"),
            ("https://127.0.0.0.1/", "failure"),
            ("https://0x100000000/test", "failure"),
            ("https://255.255.4000.1/", "failure"),
            ("https://256.0.0.1/", "failure"),
            ("https://0..0x300/", "failure"),
            ("http://example.09/", "failure"),
        ])
    func ipv4(input: String, expected: String) {
        #expect(resolve(input) == expected)
    }

    @Test(
        "IPv6 literals are parsed and compressed (§3.5 IPv6 parser, §3.6 serializer)",
        arguments: [
            ("http://[::1]/", "http://[::1]/"),
            ("http://[0:0:0:0:0:0:0:1]/", "http://[::1]/"),
            ("http://[0:f:0:0:f:f:0:0]/", "http://[0:f::f:f:0:0]/"),
            ("http://[1:0::]/", "http://[1::]/"),
            ("http://[FE80::1]:8080/", "http://[fe80::1]:8080/"),
            ("http://[::ffff:169.254.169.254]/", "http://[::ffff:a9fe:a9fe]/"),
            ("http://[::]/", "http://[::]/"),
            ("http://[www.example.com]/", "failure"),
            ("http://[::1/", "failure"),
            ("http://[1:2:3:4:5:6:7:8:9]/", "failure"),
            ("http://[::1.2.3]/", "failure"),
        ])
    func ipv6(input: String, expected: String) {
        #expect(resolve(input) == expected)
    }

    @Test(
        "Hosts: lower-cased, percent-decoded, IDNA to Punycode (RFC 3492), forbidden code points refused",
        arguments: [
            ("http://EX%41MPLE.org/", "http://example.org/"),
            ("http://bücher.de/", "http://xn--bcher-kva.de/"),
            ("http://MÜNCHEN.de/", "http://xn--mnchen-3ya.de/"),
            ("http://example\u{3002}org/", "http://example.org/"),
            ("http://ex ample.org/", "failure"),
            ("http://ex%20ample.org/", "failure"),
            ("http://a<b/", "failure"),
            ("http:///", "failure"),
            ("http://user@/", "failure"),
            ("http://%ff/", "failure"),
        ])
    func hosts(input: String, expected: String) {
        #expect(resolve(input) == expected)
    }

    @Test(
        "Ports: the scheme's default is dropped; not a number or over 65535 is not a URL (§4.4 port state)",
        arguments: [
            ("http://example.org:80/", "http://example.org/"),
            ("http://example.org:0080/", "http://example.org/"),
            ("https://example.org:443/", "https://example.org/"),
            ("https://example.org:80/", "https://example.org:80/"),
            ("http://example.org:/", "http://example.org/"),
            ("http://example.org:65535/", "http://example.org:65535/"),
            ("http://example.org:65536/", "failure"),
            ("https://example.com:demo", "failure"),
        ])
    func ports(input: String, expected: String) {
        #expect(resolve(input) == expected)
    }

    @Test(
        "Paths: dot segments resolved, code points percent-encoded; queries encoded; credentials split (§4.4, §1.3)",
        arguments: [
            ("/a/./b/../c", "http://example.org/a/c"),
            ("a/%2e%2E/b", "http://example.org/dir/b"),
            ("../../../x", "http://example.org/x"),
            ("..", "http://example.org/"),
            ("https://example.com/././foo", "https://example.com/foo"),
            ("https://example.org//", "https://example.org//"),
            ("img/café ü.png", "http://example.org/dir/img/caf%C3%A9%20%C3%BC.png"),
            ("?q=a b'c", "http://example.org/dir/page.html?q=a%20b%27c"),
            ("", "http://example.org/dir/page.html"),
            ("#part", "http://example.org/dir/page.html"),
            ("x.png#part", "http://example.org/dir/x.png"),
            ("http://user:pa:ss@host/", "http://user:pa%3Ass@host/"),
            ("http://a@b@c/", "http://a%40b@c/"),
        ])
    func paths(input: String, expected: String) {
        #expect(resolve(input) == expected)
    }

    @Test("Other schemes are named, never resolved against the page")
    func otherSchemes() {
        #expect(resolve("file:///etc/passwd") == "file:")
        #expect(resolve("FILE:x") == "file:")
        #expect(resolve("data:image/png;base64,AAAA") == "data:")
        #expect(resolve("javascript:alert(1)") == "javascript:")
        #expect(resolve("ftp://example.org/") == "ftp:")
        #expect(resolve("c:\\x") == "c:")
        #expect(resolve("x.png", against: nil) == "failure")
    }

    @Test("What a page refers to: local schemes are nothing to fetch; file: and broken URLs are reported")
    func referenceTargets() throws {
        let pageURL = try #require(URL(string: page))
        let base = try #require(BrowserURL(pageURL))
        for nothing in [
            "data:image/gif;base64,R0lGOD", "about:blank", "blob:http://x/1", "javascript:void(0)", "#t", " ",
        ] {
            #expect(ReferenceTarget(nothing, base: base) == .nothing, "\(nothing)")
        }
        guard case .unfetchable(let file) = ReferenceTarget("file:///etc/passwd", base: base) else {
            Issue.record("file: is not reported")
            return
        }
        #expect(file.contains("file:") && file.contains("only http and https"))
        guard case .unfetchable(let broken) = ReferenceTarget("http://[oops/", base: base) else {
            Issue.record("a broken URL is not reported")
            return
        }
        #expect(broken.contains("not a URL"))
        guard case .unfetchable(let relative) = ReferenceTarget("x.png", base: nil, baseScheme: "file") else {
            Issue.record("a reference relative to a file: base is not reported")
            return
        }
        #expect(relative.contains("file:"))
        guard case .url(_, let url) = ReferenceTarget(#"http://a\@127.0.0.2/x"#, base: base) else {
            Issue.record("not resolved")
            return
        }
        // What is checked is what the transport is given.
        #expect(url.host == "a" && url.absoluteString == "http://a/@127.0.0.2/x")
    }
}

@Suite("Which URLs a save may request")
struct SaveScopeTests {
    func scope(_ page: String, thirdParty: Bool = false) throws -> SaveScope {
        let pageURL = try #require(URL(string: page))
        return SaveScope(page: try #require(BrowserURL(pageURL)), includesThirdParty: thirdParty)
    }

    func url(_ text: String) throws -> BrowserURL {
        guard case .url(let url) = BrowserURL.parse(text) else { throw URLError(.badURL) }
        return url
    }

    @Test(
        "Link-local and unspecified addresses, in any spelling, are never fetched, even with third parties",
        arguments: [
            "http://169.254.169.254/latest/meta-data/", "http://0xa9fea9fe/", "http://2852039166/",
            "http://169.254.43518/", "http://[fe80::1]/", "http://[FEBF::1]/", "http://[::ffff:169.254.169.254]/",
            "http://0.0.0.0:8080/", "http://0/", "http://0.1.2.3/", "http://[::]/",
        ])
    func linkLocalNeverFetched(target: String) throws {
        for thirdParty in [false, true] {
            let reason = try scope("http://127.0.0.1:8080/page.html", thirdParty: thirdParty).refusal(url(target))
            #expect(reason?.contains("link-local or unspecified") == true, "\(target)")
        }
    }

    @Test("Unless the page itself is there; loopback and other addresses are ordinary origins")
    func pageOnLinkLocal() throws {
        let metadata = try scope("http://169.254.169.254/latest/")
        #expect(metadata.refusal(try url("http://169.254.169.254/latest/x")) == nil)
        #expect(metadata.refusal(try url("http://169.254.169.254:81/x"))?.contains("third party") == true)
        let loopback = try scope("http://127.0.0.1:8080/", thirdParty: true)
        for fine in [
            "http://[::1]/", "http://127.0.0.2/", "http://[fec0::1]/", "http://169.255.0.1/", "http://1.0.0.0/",
        ] {
            #expect(loopback.refusal(try url(fine)) == nil, "\(fine)")
        }
    }

    @Test("Another origin (scheme, host or port) is third party without includesThirdParty")
    func thirdParty() throws {
        let save = try scope("http://127.0.0.1:8080/page.html")
        #expect(save.refusal(try url("http://127.0.0.1:8080/x")) == nil)
        #expect(save.refusal(try url("http://0x7f.1:8080/x")) == nil)
        for other in [
            "http://127.0.0.2:8080/x", "https://127.0.0.1:8080/x", "http://127.0.0.1:8081/x", "http://localhost:8080/",
        ] {
            #expect(save.refusal(try url(other))?.contains("third party") == true, "\(other)")
        }
    }

    @Test("A redirect is resolved as a browser would and checked before it is followed")
    func redirects() throws {
        let save = try scope("http://127.0.0.1:8080/page.html")
        let from = try #require(URL(string: "http://127.0.0.1:8080/img/a.png"))
        #expect(try save.redirect(from: from, to: "b.png").get().absoluteString == "http://127.0.0.1:8080/img/b.png")
        for (location, says) in [
            ("http://127.0.0.2/secret.png", "third-party redirect"), (#"http://127.0.0.1:8080\@127.0.0.2/"#, ""),
            ("//169.254.169.254/", "link-local"), ("file:///etc/passwd", "file:"), ("http://[x/", "not a URL"),
        ] {
            switch save.redirect(from: from, to: location) {
            case .success(let next):
                // A backslash ends the authority: that one stays on the page's host.
                #expect(says.isEmpty && next.host == "127.0.0.1", "\(location) followed to \(next)")
            case .failure(let refusal):
                #expect(!says.isEmpty && refusal.reason.contains(says), "\(location): \(refusal.reason)")
            }
        }
    }
}
