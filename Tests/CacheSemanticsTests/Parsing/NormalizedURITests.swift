import CacheTestSupport
import Testing

@testable import CacheSemantics

/// The key form by the long way: split, then put together normalized.
private func splitAndNormalized(_ uri: String) -> [UInt8]? { URIParts(uri).map { Array($0.normalized.utf8) } }

/// The path key by the long way: split, the query dropped, put together normalized.
private func splitPathKey(_ uri: String) -> [UInt8]? {
    URIParts(uri).map { parts in
        var parts = parts
        parts.query = nil
        return Array(parts.normalized.utf8)
    }
}

@Suite("RFC 9110 §4.2.3: a URI already in key form is kept as it is")
struct NormalizedURITests {
    @Test(
        "Already in key form: lower-case scheme and host, no default or zero-led port, a path, no fragment",
        arguments: [
            "http://example.com/", "https://example.com/a/B?Q=A&b", "http://127.0.0.1:18911/cold/8985/73",
            "https://example.com:80/a", "http://example.com:443/a", "http://example.com:8080/a",
            "http://example.com:99999/", "http:///a", "a+b.c-d://host/p",
            "http://example.com/%41?%42", "http://ex%2ample.com/",
        ])
    func keptAsItIs(uri: String) {
        #expect(URIParts.isNormalized(uri))
        #expect(splitAndNormalized(uri) == Array(uri.utf8))
    }

    @Test(
        "Not in key form, or not sure: normalized the long way",
        arguments: [
            "HTTP://example.com/", "Http://example.com/", "http://Example.com/", "http://ex%4Ample.com/",
            "http://example.com", "http://example.com?q", "http://example.com:80/", "https://example.com:443/",
            "http://example.com:/", "http://example.com:080/", "http://example.com:00/", "http://user@example.com/",
            "http://[::1]/", "http://example.com:8a/", "http://example.com:0/", "http://example.com/a#f",
            "http://example.com/a?b#", "http://example.com/é",
            "http://exämple.com/", "http:/a", "http:a", "1http://example.com/", "", "http", "http:",
            "http:/", "http://",
        ])
    func notSure(uri: String) {
        #expect(!URIParts.isNormalized(uri))
    }

    @Test("The quick path gives the key and the path key the long way gives, byte for byte, on 20,000 URIs")
    func sameAsTheLongWay() {
        // Each part from those a key keeps three times in four, from the others once.
        let schemes = (good: ["http", "https", "ftp", "a+b.c-d"], other: ["HTTP", "Https", "1http", "", "ht tp"])
        let separators = (good: ["://"], other: [":", ":/", "///", "//", ":///"])
        let hosts = (
            good: ["example.com", "127.0.0.1", "ex%2a", ""],
            other: ["EXAMPLE.com", "ex%41mple", "[::1]", "[::1]:8080", "u@host", "u:p@Host", "exämple", "host\u{301}"]
        )
        let ports = (
            good: ["", ":8080", ":65535", ":65536", ":99999", ":1"],
            other: [":", ":80", ":080", ":443", ":0", ":00", ":8a", "::1"]
        )
        let paths = (good: ["/", "/a/b", "/A/%41", "/a/../b", "/a:b@c"], other: ["", "/é", "/a#frag", "/\u{301}x"])
        let queries = (good: ["", "?", "?q=1", "?Q=A&b", "?a/b?c"], other: ["?x#y", "?é", "#"])
        var random = SplitMix64(seed: 0x5EED_0F_A11)
        func pick(_ parts: (good: [String], other: [String])) -> String {
            (Int.random(in: 0..<4, using: &random) == 0 ? parts.other : parts.good).randomElement(using: &random)!
        }
        var kept = 0
        for _ in 0..<20_000 {
            let uri =
                pick(schemes) + pick(separators) + pick(hosts) + pick(ports) + pick(paths) + pick(queries)
            let slow = splitAndNormalized(uri)
            #expect(CacheKey.normalize(uri).map { Array($0.utf8) } == slow, "\(uri)")
            #expect(CacheKey(method: "GET", uri: uri).map { Array($0.uri.utf8) } == slow, "\(uri)")
            #expect(URLVariationConfig.pathKey(uri).map { Array($0.utf8) } == splitPathKey(uri), "\(uri)")
            if URIParts.isNormalized(uri) {
                kept += 1
                #expect(slow == Array(uri.utf8), "\(uri)")
            }
        }
        // Both ways are compared on many URIs each.
        #expect(kept > 1_000 && kept < 19_000, "\(kept) of 20,000 kept as they are")
    }
}
