import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Interim responses (RFC 9110 §15.2) reach HTTPCache through URLSession, which keeps them to
/// itself: what is stored and served is the final response alone.
@Suite("HTTPCache: interim 1xx responses are never stored")
struct InterimResponseTests {
    @Test("RFC 9110 §15.2, RFC 9111 §3: fields of a 103 Early Hints are neither served nor stored with the final 200")
    func earlyHintsNotStored() async throws {
        let origin = try RawOrigin(answer: { _ in
            [
                .send("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nX-Hint: 1\r\n\r\n"),
                .send("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\nhello"),
            ]
        })
        var configuration = HTTPCache.Configuration.memoryOnly
        configuration.log = { _ in }
        // The second request is a hit however long the machine takes between the two.
        configuration.clock = ManualClock().function
        let cache = try HTTPCache(configuration: configuration)
        let url = URL(string: origin.url("/page"))!
        let first = try await cache.data(for: URLRequest(url: url))
        #expect(first.statusCode == 200)
        #expect(String(decoding: first.data, as: UTF8.self) == "hello")
        #expect(first.response.value(forHTTPHeaderField: "X-Hint") == nil)
        let second = try await cache.data(for: URLRequest(url: url))
        #expect(second.response.value(forHTTPHeaderField: "Cache-Status")?.contains("; hit") == true)
        #expect(second.response.value(forHTTPHeaderField: "X-Hint") == nil)
        #expect(second.response.value(forHTTPHeaderField: "Link") == nil)
        let stored = try #require(try cache.entries(for: url).first)
        #expect(stored.fields.allSatisfy { $0.name.lowercased() != "x-hint" && $0.name.lowercased() != "link" })
    }
}
