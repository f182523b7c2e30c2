import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A plain URLSession with `CachingURLProtocol` installed. The protocol serves one cache per
/// process, so these tests run one at a time.
@Suite("A plain URLSession with CachingURLProtocol", .serialized)
struct URLProtocolTests {
    func session(_ h: Harness) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.useHTTPCache(h.cache)
        return URLSession(configuration: configuration)
    }

    func fetch(_ session: URLSession, _ request: URLRequest) async throws -> (String, HTTPURLResponse) {
        let (data, response) = try await session.data(for: request)
        return (String(decoding: data, as: UTF8.self), try #require(response as? HTTPURLResponse))
    }

    /// Miss then hit; the session sees Cache-Status; the inner request is never intercepted
    /// again (the origin gets exactly one request).
    @Test func missThenHit() async throws {
        let h = try Harness()
        h.serve("/p", [("Cache-Control", "max-age=60")], body: "through URLSession")
        let session = session(h)
        let (first, firstResponse) = try await fetch(session, h.request("/p"))
        let (second, secondResponse) = try await fetch(session, h.request("/p"))
        #expect(first == "through URLSession" && second == first)
        #expect(firstResponse.value(forHTTPHeaderField: "Cache-Status")?.contains("fwd=uri-miss") == true)
        #expect(secondResponse.value(forHTTPHeaderField: "Cache-Status")?.contains("hit") == true)
        #expect(secondResponse.value(forHTTPHeaderField: "Age") != nil)
        #expect(h.origin.count("/p") == 1)
    }

    /// A 304 reaches the app as the stored 200 body, never empty.
    @Test("Revalidation through URLSession (RFC 9111 §4.3.4)")
    func revalidation() async throws {
        let h = try Harness()
        h.serveValidated("/r", [("Cache-Control", "max-age=60")], body: "kept body")
        let session = session(h)
        _ = try await fetch(session, h.request("/r"))
        h.clock.advance(by: 120)
        let (body, response) = try await fetch(session, h.request("/r"))
        #expect(response.statusCode == 200 && body == "kept body")
        #expect(response.value(forHTTPHeaderField: "Cache-Status")?.contains("fwd-status=304") == true)
        #expect(h.origin.requests(to: "/r").last?.header("If-None-Match") == "\"v1\"")
    }

    /// The request's cachePolicy is honoured through URLSession, and the origin being down
    /// gives the stored response.
    @Test func policyAndOffline() async throws {
        let h = try Harness()
        h.serve("/o", [("Cache-Control", "max-age=60")], body: "cached")
        let session = session(h)
        _ = try await fetch(session, h.request("/o"))
        _ = try await fetch(session, h.request("/o", policy: .reloadIgnoringLocalCacheData))
        #expect(h.origin.count("/o") == 2)
        h.origin.stop()
        h.clock.advance(by: 600)
        let (body, response) = try await fetch(session, h.request("/o"))
        #expect(body == "cached")
        #expect(response.value(forHTTPHeaderField: "Cache-Status")?.contains("disconnected") == true)
        let (_, missing) = try await fetch(session, h.request("/never", policy: .returnCacheDataDontLoad))
        #expect(missing.statusCode == 504)
    }

    /// A POST body sent through URLSession reaches the origin.
    @Test func postBodyPassesThrough() async throws {
        let h = try Harness()
        h.origin.route("/echo") { request in LoopbackOrigin.Response(body: request.body) }
        let (body, _) = try await fetch(session(h), h.request("/echo", method: "POST", body: Data("ping".utf8)))
        #expect(body == "ping")
    }
}
