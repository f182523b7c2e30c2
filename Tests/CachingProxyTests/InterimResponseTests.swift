#if os(Linux)
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// Interim responses (RFC 9110 §15.2) from an origin, through the proxy.
@Suite("httpcache serve: interim 1xx responses are relayed, never stored", .timeLimit(.minutes(10)))
struct InterimResponseTests {
    /// An origin that answers every request with `103 Early Hints`, `102 Processing`, a
    /// `100 Continue` nobody asked for, then a fresh `200`.
    static func earlyHintsOrigin() throws -> RawOrigin {
        try RawOrigin(answer: { _ in
            [
                .send("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nX-Hint: 1\r\n\r\n"),
                .send("HTTP/1.1 102 Processing\r\n\r\n"),
                .send("HTTP/1.1 100 Continue\r\n\r\n"),
                .send("HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 5\r\n\r\nhello"),
            ]
        })
    }

    @Test(
        "RFC 9110 §15.2: 103 and 102 from the origin reach an HTTP/1.1 client before the final response; the stored response has none of their fields"
    )
    func relayedAndNotStored() async throws {
        try await offPool {
            let origin = try Self.earlyHintsOrigin()
            let proxy = try InProcessProxy(origin: origin.url(""))
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            try client.send("GET /page HTTP/1.1\r\nHost: origin.test\r\n\r\n")
            let hints = try client.readResponse(interim: true)
            #expect(hints.status == 103)
            #expect(hints.field("Link") == "</style.css>; rel=preload")
            #expect(hints.field("Via")?.contains("1.1") == true)
            let processing = try client.readResponse(interim: true)
            #expect(processing.status == 102)
            let final = try client.readResponse(interim: true)
            #expect(final.status == 200, "the origin's 100 Continue is not relayed: the proxy sent no Expect")
            #expect(final.bodyText == "hello")
            #expect(final.field("Link") == nil)
            #expect(final.field("X-Hint") == nil)

            // The stored response: a hit, with no interim field merged in, and no interim replayed.
            try client.send("GET /page HTTP/1.1\r\nHost: origin.test\r\n\r\n")
            let hit = try client.readResponse(interim: true)
            #expect(hit.status == 200)
            #expect(hit.field("Cache-Status")?.contains("; hit") == true)
            #expect(hit.field("Link") == nil)
            #expect(hit.field("X-Hint") == nil)
        }
    }

    @Test("RFC 9110 §15.2: an HTTP/1.0 client gets no 1xx response, only the final one")
    func notToHTTP10() async throws {
        try await offPool {
            let origin = try Self.earlyHintsOrigin()
            let proxy = try InProcessProxy(origin: origin.url(""))
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            try client.send("GET /old HTTP/1.0\r\nHost: origin.test\r\n\r\n")
            let first = try client.readResponse(interim: true)
            #expect(first.status == 200)
            #expect(first.bodyText == "hello")
        }
    }
}
#endif
