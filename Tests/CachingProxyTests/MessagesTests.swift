#if os(Linux)
import CacheSemantics
import CacheTestSupport
import Testing

@testable import CachingProxy

@Suite("Proxy message rules")
struct MessagesTests {
    @Test("A path read as leniently as any origin might: escapes decoded, slashes merged, dot segments removed")
    func lenientReading() {
        for (path, reading) in [
            ("/_httpcache/metrics", "/_httpcache/metrics"), ("/_httpcache/%6detrics", "/_httpcache/metrics"),
            ("//_httpcache//metrics", "/_httpcache/metrics"), ("/x/../_httpcache/metrics", "/_httpcache/metrics"),
            ("/x/%2e%2e%2f_httpcache%2Fmetrics", "/_httpcache/metrics"), ("/%255Fhttpcache/", "/_httpcache/"),
            ("/x\\..\\_httpcache/metrics;v=1", "/_httpcache/metrics"), ("/a/./b/", "/a/b/"), ("/a/b/..", "/a/"),
            ("/", "/"), ("/a", "/a"),
        ] {
            #expect(Messages.lenientReading(ofPath: Substring(path)) == (reading, false), "\(path)")
        }
        for path in ["/..", "/../a", "/a/../../b", "/%2e%2e/secret", "/a/..%2f..%2fb", "//..//x"] {
            #expect(Messages.lenientReading(ofPath: Substring(path)).climbsAboveRoot, "\(path)")
        }
    }

    @Test(
        "A path read as it is (no escape, backslash, parameter, run of slashes or dot segment) reads the same as the long way, on 20,000 generated paths"
    )
    func pathReadAsItIs() async {
        // Off the cooperative pool: in a debug build under ThreadSanitizer beside the other
        // tests the 20,000 paths took two minutes, and a test that holds one of the pool's
        // threads (one per core) that long holds up every async test of the run.
        await offPool {
            var generator = SystemRandomNumberGenerator()
            // Segments, most of them plain, and what a first character may be.
            let segments = ["a", "b9", "é", "~x", "a.b", "...", "", ".", "..", "%2e", "a%2F", "a\\b", "a;v=1"]
            let starts = ["/", "/", "/", "", "\\", "."]
            var readAsItIs = 0
            for _ in 0..<20_000 {
                let path =
                    starts.randomElement(using: &generator)!
                    + (0..<Int.random(in: 0...5, using: &generator)).map { _ in
                        segments.randomElement(using: &generator)!
                    }.joined(separator: "/")
                let fast = Messages.readsAsItIs(Substring(path))
                if fast { readAsItIs += 1 }
                #expect(
                    Messages.lenientReading(ofPath: Substring(path)) == Messages.fullReading(ofPath: Substring(path)),
                    "\(path)")
                #expect(!fast || Messages.fullReading(ofPath: Substring(path)) == (path, false), "\(path)")
            }
            // Both ways are taken often: the comparison is not only of the long way with itself.
            #expect(readAsItIs > 1_000 && readAsItIs < 19_000, "\(readAsItIs) of 20,000 read as they are")
            for path in ["/", "/a", "/a/", "/a.b/...", "/cold/123/4"] {
                #expect(Messages.readsAsItIs(Substring(path)), "\(path)")
            }
            for path in ["", "a", "//", "/a//b", "/.", "/..", "/a/./b", "/a/../b", "/a/..", "/%61", "/a\\b", "/a;v"] {
                #expect(!Messages.readsAsItIs(Substring(path)), "\(path)")
            }
        }
    }

    @Test("Hop-by-hop fields and those Connection names are removed (RFC 9110 §7.6.1)")
    func hopByHop() {
        let fields = HeaderFields([
            ("Connection", "close, X-Private"), ("Keep-Alive", "timeout=5"), ("X-Private", "1"), ("TE", "trailers"),
            ("Transfer-Encoding", "chunked"), ("Upgrade", "h2c"), ("Proxy-Connection", "keep-alive"),
            ("Cache-Control", "max-age=1"), ("X-Kept", "a"), ("X-Kept", "b"),
        ])
        let kept = Messages.removingHopByHop(fields)
        #expect(kept.map(\.name) == ["Cache-Control", "X-Kept", "X-Kept"])
        #expect(kept.values(named: "X-Kept") == ["a", "b"])
    }

    @Test("Max-Forwards is read only as one 1*DIGIT, a value too large saturating (RFC 9110 §7.6.2)")
    func maxForwardsValue() {
        func read(_ values: String...) -> Int? {
            Messages.maxForwards(HeaderFields(values.map { ("Max-Forwards", $0) }))
        }
        #expect(read() == nil)
        #expect(read("0") == 0)
        #expect(read("10") == 10)
        #expect(read("99999999999999999999999") == Int.max)
        for invalid in ["", "-1", "+1", "1.5", "0x1", "1 2"] { #expect(read(invalid) == nil, "\(invalid)") }
        #expect(read("1", "2") == nil, "two lines: not one value")
    }

    @Test("Via gets this proxy's received protocol and pseudonym (RFC 9110 §7.6.3)")
    func via() {
        var fields = HeaderFields([("Via", "1.1 upstream")])
        Messages.addingVia(&fields, version: "1.0", name: "edge")
        #expect(fields.values(named: "Via") == ["1.1 upstream", "1.0 edge"])
    }
}
#endif
