import CacheSemantics
import Testing

/// The fields of Compression Dictionary Transport (RFC 9842 §2) and its match patterns, with
/// bad input: never a crash, never a dictionary that must not be used.
@Suite("Compression dictionaries (RFC 9842 §2)")
struct CompressionDictionariesTests {
    static let url = "https://example.com/app/v1/main.js"
    static let hash = "pZGm1Av0IEBKARczz7exkNYsZb8LzaMrV7J32a2fFG4="

    static func offer(_ value: String, url: String = url) -> DictionaryOffer? {
        DictionaryOffer(fields: ["Use-As-Dictionary": value], url: url)
    }

    @Test("RFC 9842 §2.1: match, match-dest, id and type=raw are read; members not defined are ignored")
    func validOffer() throws {
        let offer = try #require(
            Self.offer(#"match="/app/*/main.js", match-dest=("script" "worker"), id="v1 abc", type=raw, ttl=60"#))
        #expect(offer.pattern.text == "/app/*/main.js")
        #expect(offer.pattern.origin == "https://example.com")
        #expect(offer.destinations == ["script", "worker"])
        #expect(offer.id == "v1 abc")
        let plain = try #require(Self.offer(#"match="/app/*""#))
        #expect(plain.destinations.isEmpty && plain.id.isEmpty, "§2.1.2, §2.1.3: the defaults")
    }

    @Test(
        "RFC 9842 §2.1.1–§2.1.4: no match, a match that is not a String, a regular expression, match-dest not an Inner List of Strings, an id over 1024 characters, a type other than raw, or a field that is not a Dictionary: no dictionary",
        arguments: [
            "", "id=\"x\"", "match=/app", "match=app", "match=\"/app/(\\\\d+)/main.js\"", "match=\"/app/:v(\\\\d+)\"",
            "match=\"/a\", match-dest=\"script\"", "match=\"/a\", match-dest=(script)", "match=\"/a\", id=5",
            "match=\"/a\", id=\"\(String(repeating: "x", count: 1025))\"", "match=\"/a\", type=zstd",
            "match=\"/a\", type=\"raw\"", "match=\"/a\";", "match=\"/a\" junk", "match=\"unterminated",
            "match=\"https://other.example/app/*\"", "match=\"https://*.example.com/app/*\"", "match=\"/a/{b}?\"",
            "match=\"/a/*+\"", "match=\"/a#frag\"", "match=\"/a\\\\\"",
        ])
    func refusedOffers(_ value: String) {
        #expect(Self.offer(value) == nil, "\(value)")
    }

    @Test("RFC 9842 §2.1.3: an id of exactly 1024 characters is kept")
    func longestID() {
        let id = String(repeating: "x", count: 1024)
        #expect(Self.offer("match=\"/a\", id=\"\(id)\"")?.id == id)
    }

    @Test("RFC 9842 §2.2: Available-Dictionary is one Byte Sequence of 32 bytes; anything else names none")
    func availableDictionary() {
        func hash(_ values: [String]) -> String? {
            CompressionDictionaries.availableHash(in: HeaderFields(values.map { ("Available-Dictionary", $0) }))
        }
        #expect(hash([":\(Self.hash):"]) == Self.hash)
        #expect(hash([":\(Self.hash):;p=1"]) == Self.hash, "parameters are ignored")
        #expect(hash([]) == nil)
        #expect(hash([":AAAA:"]) == nil, "3 bytes, not 32")
        #expect(hash([Self.hash]) == nil, "a Token, not a Byte Sequence")
        #expect(hash(["\"\(Self.hash)\""]) == nil, "a String")
        #expect(hash([":\(Self.hash):, :\(Self.hash):"]) == nil, "§2.2: a single hash")
        #expect(hash([":\(Self.hash):", ":\(Self.hash):"]) == nil, "two fields")
        #expect(hash([":not base64!:"]) == nil)
        #expect(hash([":\(Self.hash)"]) == nil, "unterminated")
    }

    @Test("RFC 9110 §12.5.3: a coding is accepted when listed without q=0")
    func acceptEncoding() {
        func accepts(_ value: String) -> Bool {
            CompressionDictionaries.accepts("dcz", in: ["Accept-Encoding": value])
        }
        #expect(accepts("gzip, br, zstd, dcb, dcz"))
        #expect(accepts("DCZ;q=0.5"))
        #expect(!accepts("gzip, dcz;q=0"))
        #expect(!accepts("gzip, dcz ; q=0.0"))
        #expect(!accepts("gzip, dczz"))
        #expect(!accepts(""))
    }

    @Test(
        "RFC 9842 §2.2.2: a URL matches when it has the dictionary's origin and its path fits the pattern",
        arguments: [
            ("/app/*/main.js", "https://example.com/app/v2/main.js", true),
            ("/app/*/main.js", "https://example.com/app/v2/main.js?cache=1", true),
            ("/app/*/main.js", "https://example.com/app/a/b/main.js", true),
            ("/app/*/main.js", "https://example.com/app/v2/main.css", false),
            ("/app/*/main.js", "https://example.com/other/v2/main.js", false),
            ("/app/*/main.js", "http://example.com/app/v2/main.js", false),
            ("/app/*/main.js", "https://example.com:8443/app/v2/main.js", false),
            ("/app/*/main.js", "https://other.example/app/v2/main.js", false),
            ("/app/:version/main.js", "https://example.com/app/v3/main.js", true),
            ("/app/:version/main.js", "https://example.com/app/a/b/main.js", false),
            ("/app/:version/main.js", "https://example.com/app//main.js", false),
            ("main.js", "https://example.com/app/v1/main.js", true),
            ("main.js", "https://example.com/main.js", false),
            ("https://EXAMPLE.com:443/app/*", "https://example.com/app/x", true),
            ("/app/*.js?v=*", "https://example.com/app/x.js?v=2", true),
            ("/app/*.js?v=*", "https://example.com/app/x.js?w=2", false),
            ("/app/\\\\*.js", "https://example.com/app/*.js", true),
            ("/app/\\\\*.js", "https://example.com/app/x.js", false),
            ("/*", "https://example.com/anything/at/all", true),
            ("/exact", "https://example.com/exact", true),
            ("/exact", "https://example.com/exact/more", false),
        ])
    func matching(_ pattern: String, _ url: String, _ matches: Bool) throws {
        let offer = try #require(Self.offer("match=\"\(pattern)\""), "\(pattern)")
        #expect(offer.pattern.matches(url) == matches, "\(pattern) against \(url)")
    }

    @Test("RFC 9842 §2.1.1: a dictionary URL that is not absolute has no origin to match: no dictionary")
    func relativeDictionaryURL() {
        #expect(Self.offer("match=\"/a\"", url: "/app/main.js") == nil)
        #expect(Self.offer("match=\"/a\"", url: "not a url") == nil)
    }

    @Test("Long paths and many wildcards are matched in time proportional to their product, not exponential")
    func manyWildcards() throws {
        let pattern = String(repeating: "*a", count: 200) + "b"
        let offer = try #require(Self.offer("match=\"/\(pattern)\""))
        #expect(!offer.pattern.matches("https://example.com/" + String(repeating: "a", count: 4000)))
    }
}
