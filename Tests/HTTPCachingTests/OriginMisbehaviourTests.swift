import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `HTTPCache` on its default transport (the package's own client on Linux, URLSession
/// elsewhere) in front of an origin that sends more or fewer bytes than its responses' framing
/// allows (RFC 9112 §6). Framing is the transport's job here; these tests show that what it
/// hands the cache never makes one URL's bytes another's, and that nothing ambiguous or
/// incomplete is stored.
@Suite("HTTPCache: misbehaving origins", .timeLimit(.minutes(10)))
struct OriginMisbehaviourTests {
    /// A cache in front of a ``PoisonedOrigin``.
    final class Setup: Sendable {
        let origin: PoisonedOrigin
        let cache: HTTPCache

        init(poisoned: [RawOrigin.Step]) throws {
            origin = try PoisonedOrigin(poisoned: poisoned)
            var configuration = HTTPCache.Configuration()
            configuration.directory = nil
            configuration.log = { _ in }
            // A stored response stays fresh however long the machine takes between requests.
            configuration.clock = ManualClock().function
            cache = try HTTPCache(configuration: configuration)
        }

        func request(_ path: String, method: String = "GET") -> URLRequest {
            var request = URLRequest(url: URL(string: origin.url(path))!)
            request.httpMethod = method
            return request
        }

        func get(_ path: String, method: String = "GET") async throws -> CachedResponse {
            try await cache.data(for: request(path, method: method))
        }

        /// `/b` twice: its own body both times, the second a hit, so what was stored under `/b` is `/b`'s.
        func expectBIsItsOwn(sourceLocation: SourceLocation = #_sourceLocation) async throws {
            let b = try await get("/b")
            #expect(b.response.statusCode == 200, sourceLocation: sourceLocation)
            #expect(b.text == "B", sourceLocation: sourceLocation)
            let again = try await get("/b")
            #expect(again.text == "B", sourceLocation: sourceLocation)
            #expect(again.outcome == .hit, sourceLocation: sourceLocation)
            #expect(origin.count("/b") == 1, sourceLocation: sourceLocation)
        }
    }

    // MARK: Excess data: another URL must never get it (RFC 9112 §6.3, last paragraph)

    @Test("A second response in the same write as /a's is neither served nor stored for /b (RFC 9112 §6.3)")
    func secondResponseInTheSameWrite() async throws {
        let setup = try Setup(poisoned: PoisonedOrigin.secondResponseInSameWrite)
        #expect(try await setup.get("/a").text == "A")
        try await setup.expectBIsItsOwn()
    }

    @Test("Bytes arriving 50 ms after /a's response are neither served nor stored for /b (RFC 9112 §6.3)")
    func lateExtraBytes() async throws {
        let setup = try Setup(poisoned: PoisonedOrigin.lateStrayResponse)
        #expect(try await setup.get("/a").text == "A")
        try await Task.sleep(for: .milliseconds(300))
        // URLSession on libcurl before 8.0 (Debian 12 has 7.88) took the pooled connection with
        // the stray response for /b's (curl/curl#10690); the default transport on Linux closes it.
        try await setup.expectBIsItsOwn()
    }

    @Test("A body after the head of a HEAD response is neither served nor stored for /b (RFC 9112 §6.3 item 1)")
    func bodyAfterHeadResponse() async throws {
        let setup = try Setup(poisoned: PoisonedOrigin.bodyAfterHeadResponse)
        let head = try await setup.get("/a", method: "HEAD")
        #expect(head.response.statusCode == 200)
        #expect(head.data.isEmpty)
        try await setup.expectBIsItsOwn()
    }

    // MARK: Content-Length with Transfer-Encoding (RFC 9112 §6.1, §6.3)

    @Test(
        "Content-Length with chunked Transfer-Encoding: the chunked body wins, whole, never the first Content-Length bytes (RFC 9112 §6.3 item 3)",
        arguments: PoisonedOrigin.contentLengthWithChunked)
    func contentLengthWithTransferEncoding(fields: String) async throws {
        let setup = try Setup(poisoned: PoisonedOrigin.chunkedHelloWorld(framingFields: fields))
        // Our client refuses the response (an error); URLSession decodes the chunked body and
        // ignores Content-Length.
        // What must never happen is "hello" served or stored as the whole body.
        let first = try? await setup.get("/a")
        if let first { #expect(first.text == "hello world") }
        let second = try await setup.get("/a")
        #expect(second.text == (first == nil ? "A" : "hello world"))
        #expect(setup.origin.count("/a") == (first == nil ? 2 : 1))
        try await setup.expectBIsItsOwn()
    }

    // MARK: Bodies cut short: an error, nothing stored (RFC 9112 §6.3, §8)

    @Test(
        "A body cut short is an error and is not stored (RFC 9112 §6.3, §8)",
        arguments: PoisonedOrigin.cutBodies)
    func cutBody(steps: [RawOrigin.Step]) async throws {
        let setup = try Setup(poisoned: steps)
        await #expect(throws: URLError.self) { try await setup.get("/a") }
        let second = try await setup.get("/a")
        #expect(second.text == "A")
        #expect(setup.origin.count("/a") == 2)
        try await setup.expectBIsItsOwn()
    }
}
