import CacheSemantics
import Testing

private func key(_ uri: String, method: String = "GET") -> String? {
    CacheKey(method: method, uri: uri)?.uri
}

@Suite("RFC 9110 §4.2.3 cache key normalization: scheme, host and port only")
struct CacheKeyNormalizationTests {
    @Test(
        "RFC 3986 §6.2.2.1: scheme and host are case-insensitive and lowered",
        arguments: [
            ("HTTP://EXAMPLE.COM/Path", "http://example.com/Path"),
            ("hTtPs://Example.Com/a?Q=B", "https://example.com/a?Q=B"),
            ("http://User@Example.COM/", "http://User@example.com/"),
        ])
    func caseNormalization(uri: String, expected: String) {
        #expect(key(uri) == expected)
    }

    @Test(
        "RFC 9110 §4.2.3: the default port and an empty port are removed",
        arguments: [
            ("http://example.com:80/a", "http://example.com/a"),
            ("https://example.com:443/a", "https://example.com/a"),
            ("http://example.com:/a", "http://example.com/a"),
            ("https://example.com:/", "https://example.com/"),
            ("http://example.com:443/a", "http://example.com:443/a"),
            ("https://example.com:80/a", "https://example.com:80/a"),
            ("http://example.com:8080/a", "http://example.com:8080/a"),
            ("http://[::1]:80/a", "http://[::1]/a"),
            ("http://[::1]/a", "http://[::1]/a"),
            ("http://[::1]:8080/a", "http://[::1]:8080/a"),
        ])
    func defaultPortRemoved(uri: String, expected: String) {
        #expect(key(uri) == expected)
    }

    @Test("RFC 9110 §4.2.3: an empty path is normalized to /")
    func emptyPath() {
        #expect(key("http://example.com") == "http://example.com/")
        #expect(key("http://example.com?q=1") == "http://example.com/?q=1")
        #expect(key("http://example.com:80") == "http://example.com/")
        #expect(key("http://example.com") == key("http://example.com/"))
    }

    @Test("RFC 9110 §4.2.3, RFC 3986 §3.5: the fragment is dropped")
    func fragmentDropped() {
        #expect(key("http://example.com/a#top") == "http://example.com/a")
        #expect(key("http://example.com/a?q=1#frag?x=2") == "http://example.com/a?q=1")
        #expect(key("http://example.com#frag") == "http://example.com/")
    }

    // A proxy forwards the path and query unchanged (RFC 9110 §7.7) and keys them as forwarded:
    // spellings RFC 3986 §6.2.2 calls equivalent may be different resources to an origin that
    // reads them differently, and one stored response must never answer both (cache deception).
    @Test(
        "RFC 9110 §7.7, §4.2.3: percent-encodings, dot segments and stray '%' in path and query are kept byte for byte",
        arguments: [
            "http://example.com/%7euser", "http://example.com/%7Euser", "http://example.com/a%2fb",
            "http://example.com/%41%62%2D%2e%5F%30", "http://example.com/a?x=%7e&y=%2f&z=%0d%0a",
            "http://example.com/%", "http://example.com/%zz?%", "http://example.com/a/b/c/./../../g",
            "http://example.com/../../a", "http://example.com/a/%2E%2E/b", "http://example.com//a;p",
        ])
    func pathAndQueryKept(uri: String) {
        #expect(key(uri) == uri)
        #expect(CacheKey.normalize(uri) == uri)
    }

    @Test("RFC 9110 §7.7: spellings an origin may read differently are different keys")
    func deceptionPairsAreDistinct() {
        for (one, other) in [
            ("/account/x.css", "/account%2fx.css"), ("/a/%61", "/a/a"), ("/p;x", "/p"), ("/t/%7e", "/t/~"),
            ("/s/a%2fb", "/s/a%2Fb"), ("/d/x/../t", "/d/t"), ("/d/./t", "/d/t"), ("/e?", "/e"),
        ] {
            #expect(key("http://example.com" + one) != key("http://example.com" + other), "\(one) \(other)")
        }
    }

    @Test(
        "RFC 9110 §4.2.3: a port with leading zeros is the same port",
        arguments: [
            ("http://example.com:080/a", "http://example.com/a"),
            ("http://example.com:0081/a", "http://example.com:81/a"),
            ("https://example.com:00443/", "https://example.com/"),
        ])
    func portLeadingZeros(uri: String, expected: String) {
        #expect(key(uri) == expected)
        #expect(CacheKey.normalize(expected) == expected)
    }

    @Test("An authority whose port is not a port keeps its text, case folded")
    func invalidPortKept() {
        #expect(key("http://Example.com:+80/a") == "http://example.com:+80/a")
        #expect(key("http://example.com:99999/a") == "http://example.com:99999/a")
    }

    @Test("RFC 9111 §4.1, RFC 9110 §4.2.3: the query is part of the key")
    func queryKept() {
        #expect(key("http://example.com/a?v=1") == "http://example.com/a?v=1")
        #expect(key("http://example.com/a?v=1") != key("http://example.com/a?v=2"))
        #expect(key("http://example.com/a?") == "http://example.com/a?")
        #expect(key("http://example.com/a?b&a") != key("http://example.com/a?a&b"))
    }

    @Test("RFC 9110 §4.2.3: URIs differing in scheme case, host case and default port get the same key")
    func equivalentURIs() {
        let forms = [
            "http://example.com:80/~smith/home.html", "HTTP://EXAMPLE.com/~smith/home.html",
            "http://EXAMPLE.com:/~smith/home.html",
        ]
        #expect(Set(forms.compactMap { key($0) }) == ["http://example.com/~smith/home.html"])
    }

    @Test(
        "RFC 3986 §4.3: a reference that is not an absolute URI has no key",
        arguments: [
            "", "/a/b", "//example.com/a", "example.com", "?q=1", "#f", ":", ":/a", "1http://x/", "ht tp://x/",
            "h_t://x/", "é://x/", "\"", "\\",
        ])
    func nonAbsoluteURI(uri: String) {
        #expect(CacheKey(method: "GET", uri: uri) == nil)
        #expect(CacheKey.normalize(uri) == nil)
    }

    @Test("RFC 3986 §3.1: schemes with digits, +, - and . are absolute URIs")
    func otherSchemes() {
        #expect(key("urn:ISBN:0451450523") == "urn:ISBN:0451450523")
        #expect(key("Coap+TCP://H/") == "coap+tcp://h/")
    }
}

@Suite("RFC 9111 §2 cache key methods and primary key")
struct CacheKeyMethodTests {
    @Test("RFC 9110 §9.3.2, RFC 9111 §2: HEAD uses the GET key")
    func headMapsToGet() throws {
        let head = try #require(CacheKey(method: "HEAD", uri: "http://example.com/a"))
        let get = try #require(CacheKey(method: "GET", uri: "http://example.com/a"))
        #expect(head == get)
        #expect(head.method == "GET")
    }

    @Test("RFC 9110 §9.1: methods are case-sensitive, so lower-case head is its own key")
    func methodsCaseSensitive() throws {
        let key = try #require(CacheKey(method: "head", uri: "http://example.com/a"))
        #expect(key.method == "head")
        #expect(key.primaryKey == "head http://example.com/a")
    }

    @Test("RFC 9111 §2: primaryKey is the URI for GET and METHOD URI otherwise")
    func primaryKeyFormat() throws {
        let get = try #require(CacheKey(method: "GET", uri: "HTTP://Example.com:80"))
        #expect(get.primaryKey == "http://example.com/")
        #expect(get.description == "http://example.com/")
        let post = try #require(CacheKey(method: "POST", uri: "https://example.com/form?x=1#f"))
        #expect(post.primaryKey == "POST https://example.com/form?x=1")
        #expect(post.uri == "https://example.com/form?x=1")
    }

    @Test("RFC 9111 §2: different methods and URIs give different keys")
    func distinctKeys() {
        let keys = [
            CacheKey(method: "GET", uri: "http://a/x"), CacheKey(method: "POST", uri: "http://a/x"),
            CacheKey(method: "GET", uri: "https://a/x"), CacheKey(method: "GET", uri: "http://a/y"),
        ].compactMap { $0 }
        #expect(Set(keys.map(\.primaryKey)).count == 4)
    }
}

@Suite("RFC 3986 URI rules work on bytes")
struct URIByteSemanticsTests {
    @Test(
        "RFC 3986 §3.2: '//' followed by a combining mark still starts an authority, and normalizing twice changes nothing"
    )
    func authorityAfterCombiningMark() throws {
        let normalized = try #require(CacheKey.normalize("HTTP://\u{0301}Host:80/a"))
        #expect(normalized == "http://\u{0301}host/a")
        #expect(CacheKey.normalize(normalized) == normalized)
    }

    @Test("RFC 3986 §5.2.4: a '/' followed by a combining mark still separates path segments")
    func segmentAfterCombiningMark() {
        // Found by FuzzURI: "/" + U+0347 is one Character, so a Character split kept "x/../" in place.
        #expect(CacheKey.removingDotSegments("https://example.com/x/\u{0347}/../y") == "https://example.com/x/y")
    }

    @Test("RFC 3986 §3.2.1: an '@' followed by a combining mark ends the userinfo at the '@' byte")
    func userinfoEndsAtAtSign() throws {
        // Found by FuzzURI: a Character range through "@" took the combining mark into the userinfo too.
        let normalized = try #require(CacheKey.normalize("http://u@\u{07EC}H/"))
        #expect(normalized == "http://u@\u{07EC}h/")
        #expect(CacheKey.normalize(normalized) == normalized)
    }
}

@Suite("RFC 3986 §5.2.4: dot segments removed as a client sends a URL")
struct DotSegmentRemovalTests {
    @Test(
        "RFC 3986 §5.2.4: literal dot segments of the path are removed, escapes, query and all else kept",
        arguments: [
            ("http://example.com/a/b/c/./../../g", "http://example.com/a/g"),
            ("http://example.com/a/./b", "http://example.com/a/b"),
            ("http://example.com/a/b/..", "http://example.com/a/"),
            ("http://example.com/../../a", "http://example.com/a"),
            ("http://example.com/a..b/.c", "http://example.com/a..b/.c"),
            ("http://example.com/a/%2e%2e/b?x=/../", "http://example.com/a/%2e%2e/b?x=/../"),
            ("http://Example.com/a/../%7e#frag", "http://Example.com/%7e"),
            ("http://example.com/a%2Fb", "http://example.com/a%2Fb"),
            ("not a uri/../x", "not a uri/../x"),
        ])
    func removesDotSegments(uri: String, expected: String) {
        #expect(CacheKey.removingDotSegments(uri) == expected)
    }
}
