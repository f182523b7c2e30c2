#if os(Linux)
import CacheSemantics
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

    @Test("Via gets this proxy's received protocol and pseudonym (RFC 9110 §7.6.3)")
    func via() {
        var fields = HeaderFields([("Via", "1.1 upstream")])
        Messages.addingVia(&fields, version: "1.0", name: "edge")
        #expect(fields.values(named: "Via") == ["1.1 upstream", "1.0 edge"])
    }
}
#endif
