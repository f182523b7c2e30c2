#if os(Linux)
import CacheCrypto
import CacheSemantics
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

@testable import CachingProxy

/// Compression Dictionary Transport (RFC 9842) through the proxy: dictionaries kept from
/// `Use-As-Dictionary` responses, `dcz` deltas made for clients that offer one, stored as a
/// variant of their own; checked by PyPI's zstandard, an implementation other than ours.
@Suite("httpcache serve: dictionary compression (RFC 9842)")
struct DictionaryCompressionTests {
    /// Two releases of a script: the second changes a few lines of the first and adds some.
    static let v1 = CodedBodies.text(120_000)
    static let v2: [UInt8] = {
        var text = String(decoding: v1, as: UTF8.self)
        text = text.replacingOccurrences(of: "line 500:", with: "line five hundred:")
        text = text.replacingOccurrences(of: "line 1000:", with: "line one thousand:")
        return Array(text.utf8) + Array("// release 2\n".utf8)
    }()
    static let dictionaryFields: [(String, String)] = [
        ("Cache-Control", "max-age=3600"), ("ETag", "\"v1\""), ("Use-As-Dictionary", "match=\"/app/*/main.js\""),
    ]

    /// The `Available-Dictionary` value naming `content` (RFC 9842 §2.2).
    static func available(_ content: [UInt8]) -> String {
        ":" + Base64.encode(DigestAlgorithm.sha256.hash(content)) + ":"
    }

    static func offering(_ content: [UInt8], encodings: String = "gzip, br, zstd, dcz") -> [(String, String)] {
        [("Available-Dictionary", available(content)), ("Accept-Encoding", encodings)]
    }

    /// A proxy with `--dictionary-compress` in front of an origin serving both releases.
    static func harness(v2Headers: [(String, String)] = [("Cache-Control", "max-age=3600"), ("ETag", "\"v2\"")])
        throws -> ProxyHarness
    {
        let harness = try ProxyHarness { $0.dictionaryCompression = .init() }
        harness.origin.route("/app/v1/main.js") { _ in
            LoopbackOrigin.Response(headers: dictionaryFields, body: v1)
        }
        harness.origin.route("/app/v2/main.js") { _ in LoopbackOrigin.Response(headers: v2Headers, body: v2) }
        return harness
    }

    @Test(
        "Memory: what all requests hold to delta-code is bounded (maxHeldBytes); past it a response is relayed as the origin sent it, and what a delta held is given back"
    )
    func heldBytesAreBounded() async throws {
        try await offPool {
            // Room for one response (each is about 120 KB), not two.
            let harness = try ProxyHarness {
                $0.dictionaryCompression = .init()
                $0.dictionaryCompression?.maxHeldBytes = 150_000
            }
            harness.origin.route("/app/v1/main.js") { _ in
                LoopbackOrigin.Response(headers: Self.dictionaryFields, body: Self.v1)
            }
            for release in 2...4 {
                harness.origin.route("/app/v\(release)/main.js") { _ in
                    LoopbackOrigin.Response(
                        headers: [("Cache-Control", "max-age=3600")], body: Self.v2 + Array("// \(release)\n".utf8))
                }
            }
            _ = try harness.get("/app/v1/main.js")
            // One after another: each delta gives back what it held, so the next one fits too.
            for release in 2...3 {
                let delta = try harness.get("/app/v\(release)/main.js", Self.offering(Self.v1))
                #expect(delta["Content-Encoding"] == "dcz", "release \(release): \(delta.cacheStatus ?? "")")
            }
            let small = try ProxyHarness {
                $0.dictionaryCompression = .init()
                $0.dictionaryCompression?.maxHeldBytes = 50_000
            }
            small.origin.route("/app/v1/main.js") { _ in
                LoopbackOrigin.Response(headers: Self.dictionaryFields, body: Self.v1)
            }
            small.origin.route("/app/v2/main.js") { _ in
                LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=3600")], body: Self.v2)
            }
            _ = try small.get("/app/v1/main.js")
            let relayed = try small.get("/app/v2/main.js", Self.offering(Self.v1))
            #expect(relayed.status == 200 && relayed["Content-Encoding"] == nil)
            #expect(relayed.body == Self.v2, "relayed whole, the bytes held first included")
            #expect(relayed.cacheStatus?.contains("dcz-delta") == false, "\(relayed.cacheStatus ?? "")")
        }
    }

    /// What removes a URL's stored responses, other than their expiry.
    enum Removal: String, CaseIterable, Sendable {
        case purge, post, cacheGroup, clearSiteData
    }

    @Test(
        "RFC 9111 §4.4, RFC 9875 §3, W3C Clear Site Data §4.2: what removes a URL's stored responses removes its dcz delta too (PURGE, a POST, its cache group, Clear-Site-Data)",
        arguments: Removal.allCases)
    func deltaGoesWithItsURL(removal: Removal) async throws {
        try await offPool {
            let harness = try Self.harness(v2Headers: [
                ("Cache-Control", "max-age=3600"), ("ETag", "\"v2\""), ("Cache-Groups", "\"app\""),
            ])
            harness.serve("/admin", [("Cache-Group-Invalidation", "\"app\"")])
            harness.serve("/clear", [("Clear-Site-Data", "\"cache\"")])
            _ = try harness.get("/app/v1/main.js")
            _ = try harness.get("/app/v2/main.js", Self.offering(Self.v1))
            #expect(try harness.get("/app/v2/main.js", Self.offering(Self.v1)).isHit)
            switch removal {
            case .purge: #expect(try harness.get("/app/v2/main.js", method: "PURGE").status == 200)
            case .post: #expect(try harness.get("/app/v2/main.js", method: "POST", body: []).status == 200)
            case .cacheGroup: #expect(try harness.get("/admin", method: "POST", body: []).status == 200)
            case .clearSiteData: #expect(try harness.get("/clear").status == 200)
            }
            let before = harness.origin.count("/app/v2/main.js")
            let after = try harness.get("/app/v2/main.js", Self.offering(Self.v1))
            #expect(!after.isHit, "\(removal): \(after.cacheStatus ?? "")")
            #expect(harness.origin.count("/app/v2/main.js") == before + 1)
            #expect(after["Content-Encoding"] == "dcz")
        }
    }

    @Test(
        "RFC 9842 §2.1, §5, §6.2: a kept dictionary makes the next release a dcz delta that zstandard decodes to the origin's bytes, stored as its own variant (a hit next)"
    )
    func deltaOfTheNextRelease() async throws {
        let harness = try Self.harness()
        let dictionary = try await offPool { try harness.get("/app/v1/main.js") }
        #expect(dictionary.body == Self.v1)
        let delta = try await offPool { try harness.get("/app/v2/main.js", Self.offering(Self.v1)) }
        #expect(delta.status == 200)
        #expect(delta["Content-Encoding"] == "dcz")
        #expect(delta["Content-Length"] == String(delta.body.count))
        #expect(delta.body.count * 20 < Self.v2.count, "\(delta.body.count) bytes for \(Self.v2.count)")
        #expect(
            Set(delta.fields.listMembers(named: "Vary").map { $0.lowercased() }) == [
                "accept-encoding", "available-dictionary",
            ])
        #expect(delta["ETag"] == "W/\"v2\"", "the representation changed: its tag is weak")
        #expect(delta.cacheStatus?.contains("detail=dcz-delta") == true, "\(delta.cacheStatus ?? "")")
        #expect(try await CodedBodies.zstandardDecoded(delta.body, dictionary: Self.v1) == Self.v2)
        let again = try await offPool { try harness.get("/app/v2/main.js", Self.offering(Self.v1)) }
        #expect(again.isHit, "\(again.cacheStatus ?? "")")
        #expect(again.cacheStatus?.contains("detail=dcz-delta") == true)
        #expect(again.body == delta.body)
        #expect(harness.origin.count("/app/v2/main.js") == 1, "the delta is stored: never made twice")
    }

    @Test(
        "RFC 9842 §2.2, §6.2: no delta for a client without Available-Dictionary, with a hash the proxy does not hold, or without dcz in Accept-Encoding"
    )
    func plainUnlessTheDictionaryIsOffered() async throws {
        let harness = try Self.harness()
        _ = try await offPool { try harness.get("/app/v1/main.js") }
        let unknown = [UInt8](repeating: 7, count: 300)
        let cases: [(String, [(String, String)])] = [
            ("no Available-Dictionary", [("Accept-Encoding", "gzip, dcz")]),
            ("a hash of another dictionary", Self.offering(unknown)),
            ("dcz not accepted", Self.offering(Self.v1, encodings: "gzip, br")),
            ("dcz refused with q=0", Self.offering(Self.v1, encodings: "gzip, dcz;q=0")),
            ("a hash that is not 32 bytes", [("Available-Dictionary", ":AAAA:"), ("Accept-Encoding", "dcz")]),
        ]
        for (name, fields) in cases {
            let plain = try await offPool { try harness.get("/app/v2/main.js", fields) }
            #expect(plain["Content-Encoding"] == nil, "\(name)")
            #expect(plain.body == Self.v2, "\(name)")
        }
        // And the case that is offered one is a delta: the cases above can fail.
        let delta = try await offPool { try harness.get("/app/v2/main.js", Self.offering(Self.v1)) }
        #expect(delta["Content-Encoding"] == "dcz")
    }

    @Test("RFC 9842 §5: a gzip response is decoded and its content delta-coded; the client decodes to the content")
    func gzipOriginResponse() async throws {
        let gzipped = try await CodedBodies.python("gzip.compress(data)", Self.v2)
        let harness = try ProxyHarness { $0.dictionaryCompression = .init() }
        harness.origin.route("/app/v1/main.js") { _ in
            LoopbackOrigin.Response(headers: Self.dictionaryFields, body: Self.v1)
        }
        harness.origin.route("/app/v2/main.js") { _ in
            LoopbackOrigin.Response(
                headers: [
                    ("Cache-Control", "max-age=3600"), ("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding"),
                ],
                body: gzipped)
        }
        _ = try await offPool { try harness.get("/app/v1/main.js") }
        let delta = try await offPool { try harness.get("/app/v2/main.js", Self.offering(Self.v1)) }
        #expect(delta["Content-Encoding"] == "dcz")
        #expect(delta["Vary"] == "Accept-Encoding, Available-Dictionary", "the origin's Vary, merged")
        #expect(try await CodedBodies.zstandardDecoded(delta.body, dictionary: Self.v1) == Self.v2)
    }

    @Test(
        "RFC 9111 §4.3, RFC 9110 §8.8.3.2: a stale delta is revalidated with its weak tag and, whatever the origin answers, the client gets a dcz body of the current content"
    )
    func staleDeltaIsRevalidated() async throws {
        let harness = try Self.harness(v2Headers: [])
        harness.origin.route("/app/v2/main.js") { request in
            let headers = [("Cache-Control", "max-age=60"), ("ETag", "\"v2\"")]
            guard request.header("If-None-Match")?.contains("\"v2\"") == true else {
                return LoopbackOrigin.Response(headers: headers, body: Self.v2)
            }
            return LoopbackOrigin.Response(status: 304, headers: headers, body: "")
        }
        _ = try await offPool { try harness.get("/app/v1/main.js") }
        let first = try await offPool { try harness.get("/app/v2/main.js", Self.offering(Self.v1)) }
        #expect(first["Content-Encoding"] == "dcz")
        harness.clock.advance(by: 120)
        let again = try await offPool { try harness.get("/app/v2/main.js", Self.offering(Self.v1)) }
        #expect(again.status == 200)
        #expect(again["Content-Encoding"] == "dcz")
        #expect(try await CodedBodies.zstandardDecoded(again.body, dictionary: Self.v1) == Self.v2)
        let revalidation = try #require(harness.origin.requests(to: "/app/v2/main.js").dropFirst().first)
        #expect(revalidation.header("If-None-Match") == "W/\"v2\"", "the stored delta's tag")
    }

    @Test(
        "Memory stays bounded: a body over maxBodyBytes is relayed as the origin sends it, whether its length is announced or it is chunked",
        arguments: [false, true])
    func largeBodiesAreRelayed(chunked: Bool) async throws {
        let large = Self.v2 + Self.v2
        let harness = try ProxyHarness {
            var settings = CachingProxy.DictionaryCompression()
            settings.maxBodyBytes = 150_000
            $0.dictionaryCompression = settings
        }
        harness.origin.route("/app/v1/main.js") { _ in
            LoopbackOrigin.Response(headers: Self.dictionaryFields, body: Self.v1)
        }
        harness.origin.route("/app/v2/main.js") { _ in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=3600")], body: Self.v2, chunked: chunked)
        }
        harness.origin.route("/app/v3/main.js") { _ in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=3600")], body: large, chunked: chunked)
        }
        _ = try await offPool { try harness.get("/app/v1/main.js") }
        let plain = try await offPool { try harness.get("/app/v3/main.js", Self.offering(Self.v1)) }
        #expect(plain["Content-Encoding"] == nil)
        #expect(plain.body == large)
        let delta = try await offPool { try harness.get("/app/v2/main.js", Self.offering(Self.v1)) }
        #expect(delta["Content-Encoding"] == "dcz", "within the limit")
    }

    @Test("RFC 9110 §7.7: content marked no-transform is sent as the origin coded it, dictionary or not")
    func noTransformIsLeftAlone() async throws {
        let harness = try Self.harness(v2Headers: [("Cache-Control", "max-age=3600, no-transform")])
        _ = try await offPool { try harness.get("/app/v1/main.js") }
        let response = try await offPool { try harness.get("/app/v2/main.js", Self.offering(Self.v1)) }
        #expect(response["Content-Encoding"] == nil)
        #expect(response.body == Self.v2)
    }

    @Test("RFC 9842 §2.1.1, §2.2.2: a URL outside the dictionary's match pattern gets no delta")
    func outsideThePattern() async throws {
        let harness = try Self.harness()
        harness.origin.route("/other/main.js") { _ in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=3600")], body: Self.v2)
        }
        _ = try await offPool { try harness.get("/app/v1/main.js") }
        let response = try await offPool { try harness.get("/other/main.js", Self.offering(Self.v1)) }
        #expect(response["Content-Encoding"] == nil)
        #expect(response.body == Self.v2)
    }

    @Test(
        "RFC 9842 §2.2.2, §9.3.1: a dictionary of one origin is never used for another's URL (forward proxy, two origins)"
    )
    func otherOriginsDictionaryIsNeverUsed() async throws {
        try await offPool {
            let first = try LoopbackOrigin()
            let second = try LoopbackOrigin()
            defer {
                first.stop()
                second.stop()
            }
            for origin in [first, second] {
                origin.route("/app/v1/main.js") { _ in
                    LoopbackOrigin.Response(headers: Self.dictionaryFields, body: Self.v1)
                }
                origin.route("/app/v2/main.js") { _ in
                    LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=3600")], body: Self.v2)
                }
            }
            let proxy = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1", "--dictionary-compress"])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            func get(_ origin: LoopbackOrigin, _ path: String, _ fields: [(String, String)] = []) throws
                -> RawHTTPClient.Response
            {
                let lines = fields.map { "\($0.0): \($0.1)\r\n" }.joined()
                try client.send(
                    "GET \(origin.baseURL)\(path) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\(lines)\r\n")
                return try client.readResponse()
            }
            // The first origin's v1 is the only dictionary the proxy holds.
            #expect(try get(first, "/app/v1/main.js").body == Self.v1)
            let crossOrigin = try get(second, "/app/v2/main.js", Self.offering(Self.v1))
            #expect(crossOrigin.field("Content-Encoding") == nil)
            #expect(crossOrigin.body == Self.v2)
            let sameOrigin = try get(first, "/app/v2/main.js", Self.offering(Self.v1))
            #expect(sameOrigin.field("Content-Encoding") == "dcz", "the same request to the dictionary's origin")
        }
    }

    @Test(
        "RFC 9842 §6.2, RFC 9111 §4.1: without --dictionary-compress, an origin's responses that vary on Available-Dictionary and Accept-Encoding are stored and served per variant"
    )
    func originVariantsPassThrough() async throws {
        let harness = try ProxyHarness()
        harness.origin.route("/app.js") { request in
            let offered = request.header("Available-Dictionary")
            var headers = [("Cache-Control", "max-age=3600"), ("Vary", "Accept-Encoding, Available-Dictionary")]
            if offered != nil { headers.append(("Content-Encoding", "dcz")) }
            return LoopbackOrigin.Response(headers: headers, body: "coded for " + (offered ?? "none"))
        }
        let first = Self.offering(Array("one".utf8))
        let other = Self.offering(Array("two".utf8))
        let sequence: [([(String, String)], String, Bool)] = [
            (first, "coded for \(Self.available(Array("one".utf8)))", false),
            ([("Accept-Encoding", "gzip, br, zstd, dcz")], "coded for none", false),
            (first, "coded for \(Self.available(Array("one".utf8)))", true),
            ([("Accept-Encoding", "gzip, br, zstd, dcz")], "coded for none", true),
            (other, "coded for \(Self.available(Array("two".utf8)))", false),
        ]
        for (index, (fields, body, hit)) in sequence.enumerated() {
            let response = try await offPool { try harness.get("/app.js", fields) }
            #expect(response.text == body, "request \(index)")
            #expect(response.isHit == hit, "request \(index): \(response.cacheStatus ?? "")")
            #expect(response["Content-Encoding"] == (body.hasSuffix("none") ? nil : "dcz"), "request \(index)")
        }
        #expect(harness.origin.count("/app.js") == 3)
    }
}
#endif
