import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import OfflinePages
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Saving pages on `HTTPCache`'s default transport against an origin that frames badly.
@Suite("Saving pages from misbehaving origins", .timeLimit(.minutes(5)))
struct SaveTransportTests {
    static func page(_ title: String) -> String {
        let html = "<!doctype html><title>\(title)</title><p>\(title)</p>"
        return "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\(PoisonedOrigin.cacheable)"
            + "Content-Length: \(html.utf8.count)\r\n\r\n\(html)"
    }

    /// URLSession on libcurl 7.88 took the stray response for the next request on the pooled
    /// connection: the second page was saved as "stray".
    @Test("Bytes an origin sends after a page are not saved as the next page (RFC 9112 §6.3)")
    func strayBytesAfterAPage() async throws {
        let origin = try RawOrigin(answer: { request in
            request.target == "/one.html"
                ? [.send(Self.page("one")), .pause(0.05), .send(PoisonedOrigin.response("stray"))]
                : [.send(Self.page("two"))]
        })
        defer { origin.stop() }
        let directory = TemporaryDirectory("save-transport-test")
        var configuration = HTTPCache.Configuration()
        configuration.directory = directory.path
        configuration.log = { _ in }
        let cache = try HTTPCache(configuration: configuration)
        let one = try await cache.savePage(URL(string: origin.url("/one.html"))!).pack
        #expect(one.isComplete)
        // The stray response has arrived on the idle connection by now.
        try await Task.sleep(for: .milliseconds(300))
        let url = URL(string: origin.url("/two.html"))!
        let two = try await cache.savePage(url).pack
        #expect(two.isComplete)
        let stored = try await cache.data(for: URLRequest(url: url, cachePolicy: .returnCacheDataDontLoad))
        #expect(String(decoding: stored.data, as: UTF8.self).contains("<p>two</p>"))
    }
}
