import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// HTTPCache keys a URL as it goes on the wire, as the proxy keys a target as it forwards it:
/// only scheme and host case and the default port are folded (RFC 9110 §4.2.3); escapes, their
/// case, `;parameters` and empty queries are kept, because an origin may read each spelling as
/// a resource of its own (RFC 9110 §7.7). Dot segments are the one rewrite: URLSession on Linux
/// removes them before sending (RFC 3986 §5.2.4), so the cache sends and keys that form.
@Suite("HTTPCache keys a URL as it is sent (RFC 9110 §4.2.3, §7.7)")
struct TargetKeyTests {
    /// A cache in front of an origin that answers each target with the target it received,
    /// storable for 10 minutes.
    static func echoing() throws -> Harness {
        let h = try Harness(memoryOnly: true)
        h.origin.setDefault { request in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=600")], body: "target=\(request.target)")
        }
        return h
    }

    @Test("spellings an origin may read differently reach it as written and are stored apart (RFC 9110 §7.7)")
    func spellingsAreEntriesOfTheirOwn() async throws {
        let h = try Self.echoing()
        let spellings = [
            "/s/a%2fb", "/s/a%2Fb", "/s/a/b", "/pu/%61", "/pu/a", "/q?x=%0d%0a", "/q?x=%0D%0A", "/t/%7e", "/t/%7E",
            "/t/~", "/e?", "/e", "/p;x", "/p", "/account%2fx.css", "/account/x.css", "/u/%C3%A9", "/u/%c3%a9",
        ]
        for round in 0..<2 {
            for path in spellings {
                let response = try await h.get(path)
                #expect(response.text == "target=\(path)", "\(path)")
                #expect(response.outcome == (round == 0 ? .miss : .hit), "\(path)")
            }
        }
        #expect(h.origin.requests.map(\.target) == spellings)
    }

    @Test("dot segments are removed as URLSession sends them, and that form is the key (RFC 3986 §5.2.4)")
    func dotSegmentsKeyedAsSent() async throws {
        let h = try Self.echoing()
        let first = try await h.get("/d/x/../t")
        #expect(first.text == "target=/d/t")
        #expect(first.outcome == .miss)
        // Each spelling twice: the second time what the URL is sent and keyed as is remembered.
        for path in ["/d/t", "/d/./t", "/d/y/../t", "/d/x/../t", "/d/./t"] {
            let response = try await h.get(path)
            #expect(response.outcome == .hit, "\(path)")
            #expect(response.text == "target=/d/t", "\(path)")
            #expect(response.url == h.origin.url("/d/t"), "\(path)")
        }
        // An escaped dot is no dot segment to URLSession: sent, and keyed, as written.
        let escaped = try await h.get("/d/x/%2e%2e/t")
        #expect(escaped.text == "target=/d/x/%2e%2e/t")
        #expect(escaped.outcome == .miss)
        #expect(h.origin.requests.map(\.target) == ["/d/t", "/d/x/%2e%2e/t"])

        // Inspection names a URL the same way.
        #expect(try h.cache.entries(for: h.origin.url("/d/z/../t")).count == 1)
        #expect(try h.cache.remove(url: h.origin.url("/d/./t")) == 1)
        #expect(try h.cache.entries(for: h.origin.url("/d/t")).isEmpty)
    }
}
