import Testing

@testable import CacheSemantics

@Suite("Cache partitions (RFC 9111 §2) and Clear-Site-Data (W3C Clear Site Data)")
struct CachePartitionTests {
    @Test("RFC 9111 §2: a partitioned key never equals another partition's key, nor an unpartitioned one")
    func keysAreApart() {
        let key = "https://example.com/a"
        let keys = [
            CachePartition.key(key, in: nil), CachePartition.key(key, in: "alice"), CachePartition.key(key, in: "bob"),
            // A partition named like a URL, or like a key and its partition together.
            CachePartition.key("a", in: "https://example.com/"), CachePartition.key(key, in: "alice\u{1F}x"),
        ]
        #expect(Set(keys).count == keys.count)
        #expect(CachePartition.key(key, in: nil) == key)
        // A partition named like a URL does not collide with that URL's key.
        #expect(CachePartition.key("", in: "https://example.com/a") != key)
    }

    @Test("a partitioned key splits back into its partition and the key within it")
    func splitRoundTrips() {
        for partition in ["alice", "https://site.example", "ü 名前 with spaces", "NVS x"] as [String?] + [nil] {
            for key in ["https://example.com/a", "POST https://example.com/q body=1:2", "NVS https://example.com/p"] {
                let split = CachePartition.split(CachePartition.key(key, in: partition))
                #expect(split.partition == partition)
                #expect(split.key == key)
            }
        }
        #expect(CachePartition.split("https://example.com/").partition == nil)
    }

    @Test("a partition name is non-empty UTF-8 of at most 512 bytes without control characters")
    func names() {
        #expect(CachePartition.problem(with: "user-42") == nil)
        #expect(CachePartition.problem(with: "https://top.example") == nil)
        #expect(CachePartition.problem(with: String(repeating: "é", count: 256)) == nil)
        #expect(CachePartition.problem(with: "")?.contains("empty") == true)
        #expect(CachePartition.problem(with: String(repeating: "é", count: 257))?.contains("514") == true)
        for control in ["\u{0}", "\t", "\n", "\u{1F}", "\u{7F}", "\u{85}"] {
            #expect(CachePartition.problem(with: "a" + control + "b")?.contains("control characters") == true)
        }
    }

    @Test("Clear Site Data §4.2: \"cache\" and \"*\" clear the cache; other, unquoted or malformed types do not")
    func clearSiteDataTypes() {
        func clears(_ values: String...) -> Bool {
            var fields = HeaderFields()
            for value in values { fields.append(name: .clearSiteData, value: value) }
            return ClearSiteData.clearsCache(fields)
        }
        #expect(clears("\"cache\""))
        #expect(clears("\"*\""))
        #expect(clears("\"cookies\", \"cache\""))
        #expect(clears("\"storage\"", " \"cache\" "))
        #expect(clears("\"unknown\",\t\"cache\""))
        #expect(!clears("\"cookies\", \"storage\", \"executionContexts\""))
        #expect(!clears("cache"))
        #expect(!clears("\"Cache\""))
        #expect(!clears("\"cache"))
        #expect(!clears("'cache'"))
        #expect(!clears("\"cache\"; x=1"))
        #expect(!clears(""))
        #expect(!ClearSiteData.clearsCache([:]))
    }

    @Test("Clear Site Data §4.1: honoured from potentially trustworthy URLs (https, loopback), for the URL's origin")
    func trustworthyOrigins() {
        let fields: HeaderFields = ["Clear-Site-Data": "\"cache\""]
        let cases: [(String, String?)] = [
            ("https://Example.com:443/logout", "https://example.com"),
            ("https://example.com:8443/a?b", "https://example.com:8443"),
            ("http://127.0.0.1:8080/logout", "http://127.0.0.1:8080"),
            ("http://127.3.4.5/", "http://127.3.4.5"),
            ("http://localhost/", "http://localhost"),
            ("http://app.localhost:81/", "http://app.localhost:81"),
            ("http://[::1]:9000/", "http://[::1]:9000"),
            ("http://example.com/logout", nil),
            ("http://128.0.0.1/", nil),
            ("http://127.0.0.256/", nil),
            ("http://localhost.example/", nil),
            ("http://[::2]/", nil),
        ]
        for (uri, origin) in cases {
            #expect(ClearSiteData.clearedOrigin(uri: uri, fields: fields) == origin, "\(uri)")
        }
        let cookies: HeaderFields = ["Clear-Site-Data": "\"cookies\""]
        #expect(ClearSiteData.clearedOrigin(uri: "https://example.com/", fields: cookies) == nil)
    }

    @Test("the key prefixes of an origin cover its GET, POST-by-body and No-Vary-Search keys in one partition")
    func originPrefixes() {
        let prefixes = CachePartition.keyPrefixes(of: "https://example.com", in: "alice")
        let inAlice = ["https://example.com/a", "POST https://example.com/q body=1:2", "NVS https://example.com/p"].map
        {
            CachePartition.key($0, in: "alice")
        }
        for key in inAlice { #expect(prefixes.contains { key.hasPrefix($0) }, "\(key)") }
        let elsewhere = [
            "https://example.com/a", CachePartition.key("https://example.com/a", in: "bob"),
            CachePartition.key("https://example.com.evil/a", in: "alice"),
            CachePartition.key("https://example.com:8443/a", in: "alice"),
        ]
        for key in elsewhere { #expect(!prefixes.contains { key.hasPrefix($0) }, "\(key)") }
    }
}
