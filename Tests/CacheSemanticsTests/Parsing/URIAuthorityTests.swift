import CacheSemantics
import Testing

@Suite("RFC 3986 §3.2.2-§3.2.3 authorities: host [\":\" port]")
struct URIAuthorityTests {
    @Test(
        "RFC 3986 §3.2.2: registered names, IPv4, IPv6 and IPvFuture literals, with an optional port",
        arguments: [
            ("example.com", "example.com", nil), ("Example.COM:8080", "Example.COM", 8080), ("h:", "h", nil),
            ("127.0.0.1:18941", "127.0.0.1", 18941), ("[::1]", "[::1]", nil), ("[::1]:8443", "[::1]", 8443),
            ("[2001:db8::ff00:42:8329]", "[2001:db8::ff00:42:8329]", nil),
            ("[::ffff:192.0.2.1]", "[::ffff:192.0.2.1]", nil),
            ("[1:2:3:4:5:6:7:8]", "[1:2:3:4:5:6:7:8]", nil), ("[1::]", "[1::]", nil), ("[::]", "[::]", nil),
            ("[v1.fe80::a+en1]", "[v1.fe80::a+en1]", nil), ("%65x.com", "%65x.com", nil),
            ("a!$&'()*+,;=b:1", "a!$&'()*+,;=b", 1),
            ("h:0065535", "h", 65535),
        ] as [(String, String, UInt16?)])
    func valid(text: String, host: String, port: UInt16?) throws {
        let authority = try URIAuthority(text)
        #expect(authority.host == host)
        #expect(authority.port == port)
    }

    @Test(
        "RFC 3986 §3.2.2-3, RFC 9110 §4.2.1, §4.2.4: anything else is refused, saying why",
        arguments: [
            "", ":80", "h:+18941", "h: 80", "h:8o", "h:65536", "h:0", "u@h", "[::1", "[::1]:x", "[::1]x",
            "[1:2:3:4:5:6:7:8:9]",
            "[1::2::3]", "[::12345]", "[1:2:3:4:5:6:7::8]", "[::1.2.3]", "[::1.2.3.04]", "[::256.1.1.1]", "[1.2.3.4::]",
            "[fe80::1%25en0]", "[v.x]", "[vg.x]", "[v1.]", "h/x", "h%4", "h%zz", "h h", "[]",
        ])
    func invalid(text: String) {
        #expect(throws: URIAuthority.Invalid.self) { try URIAuthority(text) }
    }

    @Test("RFC 9110 §4.2.3: the normal form lowers the host and drops the default port")
    func normalForm() throws {
        #expect(try URIAuthority("Example.COM:80").normalized(defaultPort: 80) == "example.com")
        #expect(try URIAuthority("Example.COM:080").normalized(defaultPort: 80) == "example.com")
        #expect(try URIAuthority("h:8080").normalized(defaultPort: 80) == "h:8080")
        #expect(try URIAuthority("[::1]:443").normalized(defaultPort: 80) == "[::1]:443")
        #expect(try URIAuthority("[::1]:443").lookupHost == "::1")
    }
}
