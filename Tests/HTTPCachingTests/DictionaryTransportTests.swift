#if os(Linux)
import CacheTestSupport
import Foundation
import FoundationNetworking
import HTTPCaching
import LoopbackOrigin
import Testing

/// Compression Dictionary Transport (RFC 9842) in HTTPCache's Linux transport: dictionaries
/// kept from responses, offered for the URLs they match, `dcz` bodies (made by PyPI's
/// zstandard) decoded for the app.
@Suite("HTTPCache: compression dictionaries in the HTTP client transport (RFC 9842)", .timeLimit(.minutes(5)))
struct DictionaryTransportTests {
    static let v1 = CodedBodies.text(60_000)
    static let v2 = v1 + Array("// the next release\n".utf8)

    /// `Available-Dictionary` for `content`, hashed by python's hashlib.
    static func available(_ content: [UInt8]) async throws -> String {
        String(try await CodedBodies.digestMember("sha-256", content).dropFirst("sha-256=".count))
    }

    /// An origin whose `/app/v1/main.js` is a dictionary for `/app/*/main.js` (with
    /// `dictionaryHeaders`), and whose `/app/v2/main.js` is `coded` (dcz) when offered
    /// `offered`, plain otherwise.
    static func origin(
        dictionaryHeaders: [(String, String)] = [
            ("Cache-Control", "max-age=600"), ("Use-As-Dictionary", "match=\"/app/*/main.js\", id=\"main v1\""),
        ],
        coded: [UInt8], offered: String
    ) throws -> LoopbackOrigin {
        let origin = try LoopbackOrigin()
        origin.route("/app/v1/main.js") { _ in LoopbackOrigin.Response(headers: dictionaryHeaders, body: v1) }
        origin.route("/app/v2/main.js") { request in
            var headers = [("Cache-Control", "max-age=600"), ("Vary", "Accept-Encoding, Available-Dictionary")]
            guard request.header("Available-Dictionary") == offered,
                request.header("Accept-Encoding")?.contains("dcz") == true
            else { return LoopbackOrigin.Response(headers: headers, body: v2) }
            headers.append(("Content-Encoding", "dcz"))
            return LoopbackOrigin.Response(headers: headers, body: coded)
        }
        origin.route("/other.js") { _ in LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=600")], body: v2)
        }
        return origin
    }

    @Test(
        "RFC 9842 §2.2, §2.3, §5: a kept dictionary is offered for the URLs its pattern matches, with its id, and a dcz response made with it reaches the app decoded"
    )
    func offeredAndDecoded() async throws {
        let offered = try await Self.available(Self.v1)
        let coded = try await CodedBodies.zstandardCompressed(Self.v2, dictionary: Self.v1)
        let origin = try Self.origin(coded: coded, offered: offered)
        defer { origin.stop() }
        let cache = try HTTPClientTransportTests.cache()
        #expect(try await cache.data(for: URLRequest(url: origin.url("/app/v1/main.js"))).data == Data(Self.v1))
        let delta = try await cache.data(for: URLRequest(url: origin.url("/app/v2/main.js")))
        #expect(delta.data == Data(Self.v2))
        #expect(delta.response.value(forHTTPHeaderField: "Content-Encoding") == nil)
        let sent = try #require(origin.requests(to: "/app/v2/main.js").first)
        #expect(sent.header("Available-Dictionary") == offered)
        #expect(sent.header("Dictionary-ID") == "\"main v1\"")
        #expect(sent.header("Accept-Encoding") == "gzip, deflate, br, dcz")
        #expect(origin.requests(to: "/app/v1/main.js").first?.header("Available-Dictionary") == nil)
        _ = try await cache.data(for: URLRequest(url: origin.url("/other.js")))
        let outside = try #require(origin.requests(to: "/other.js").first)
        #expect(outside.header("Available-Dictionary") == nil, "§2.2.2: not a URL the pattern matches")
        #expect(outside.header("Accept-Encoding") == "gzip, deflate, br")
    }

    @Test("RFC 9842 §5: a dcz body whose header names another dictionary is an error, never other bytes")
    func otherDictionaryIsAnError() async throws {
        let offered = try await Self.available(Self.v1)
        let coded = try await CodedBodies.zstandardCompressed(Self.v2, dictionary: Array("another".utf8))
        let origin = try Self.origin(coded: coded, offered: offered)
        defer { origin.stop() }
        let cache = try HTTPClientTransportTests.cache()
        _ = try await cache.data(for: URLRequest(url: origin.url("/app/v1/main.js")))
        let error = await #expect(throws: URLError.self) {
            try await cache.data(for: URLRequest(url: origin.url("/app/v2/main.js")))
        }
        #expect(error?.code == .cannotDecodeContentData)
        #expect(error?.localizedDescription.contains("another dictionary") == true, "\(String(describing: error))")
    }

    @Test(
        "RFC 9842 §2.2.1, §2.1.4: a dictionary without freshness, or of a type other than raw, is never offered"
    )
    func unusableDictionariesAreNotOffered() async throws {
        let offered = try await Self.available(Self.v1)
        for headers in [
            [("Use-As-Dictionary", "match=\"/app/*/main.js\"")],
            [("Cache-Control", "max-age=0"), ("Use-As-Dictionary", "match=\"/app/*/main.js\"")],
            [("Cache-Control", "max-age=600"), ("Use-As-Dictionary", "match=\"/app/*/main.js\", type=other")],
        ] {
            let origin = try Self.origin(dictionaryHeaders: headers, coded: [], offered: offered)
            defer { origin.stop() }
            let cache = try HTTPClientTransportTests.cache()
            _ = try await cache.data(for: URLRequest(url: origin.url("/app/v1/main.js")))
            let response = try await cache.data(for: URLRequest(url: origin.url("/app/v2/main.js")))
            #expect(response.data == Data(Self.v2))
            #expect(origin.requests(to: "/app/v2/main.js").first?.header("Available-Dictionary") == nil, "\(headers)")
        }
    }
}
#endif
