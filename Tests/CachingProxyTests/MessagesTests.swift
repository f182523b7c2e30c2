#if os(Linux)
import CacheSemantics
import Testing

@testable import CachingProxy

@Suite("Proxy message rules")
struct MessagesTests {
    @Test("Absolute-form targets are split into URL and authority (RFC 9112 §3.2.2)")
    func absoluteForm() {
        #expect(
            Messages.absoluteTarget("http://example.test/a?b")
                == Target(url: "http://example.test/a?b", authority: "example.test"))
        #expect(Messages.absoluteTarget("HTTP://h:81") == Target(url: "http://h:81/", authority: "h:81"))
        #expect(Messages.absoluteTarget("http://h:81?q") == Target(url: "http://h:81/?q", authority: "h:81"))
        #expect(Messages.absoluteTarget("http://h/p#frag") == Target(url: "http://h/p", authority: "h"))
        #expect(Messages.absoluteTarget("https://h/") == nil, "https goes through CONNECT")
        #expect(Messages.absoluteTarget("http://user@h/") == nil, "userinfo is not allowed (RFC 9110 §4.2.4)")
        #expect(Messages.absoluteTarget("http:///path") == nil)
        #expect(Messages.absoluteTarget("/path") == nil)
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
        Messages.addingVia(&fields, minorVersion: 0, name: "edge")
        #expect(fields.values(named: "Via") == ["1.1 upstream", "1.0 edge"])
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
