import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("URLSessionTransport: its session's life")
struct URLSessionTransportTests {
    /// A session keeps its delegate until it is invalidated; with the transport as its
    /// delegate, neither was ever freed, and every cache made and dropped on Apple platforms
    /// (where the transport is the default) kept a session, its connections and its threads.
    @Test("a transport released while a body arrives is freed; the body still arrives whole, then the session goes")
    func releasedTransportIsFreed() async throws {
        let origin = try GeneratedResourceTests.origin()
        defer { origin.stop() }
        weak var released: URLSessionTransport?
        let response: TransportResponse
        do {
            let transport = URLSessionTransport()
            released = transport
            response = try await transport.send(URLRequest(url: origin.url("/r")))
        }
        #expect(released == nil)
        // The body still arrives whole: the session finishes its tasks before it goes.
        var received = 0
        for try await chunk in response.body { received += chunk.count }
        #expect(response.response.statusCode == 200 && received == 300_000)
    }
}
