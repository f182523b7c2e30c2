import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache` on the package's own HTTP client: what crashed it on URLSession over libcurl 7.88.
@Suite(.timeLimit(.minutes(10)))
struct CLITransportTests {
    /// A chunked `/t` ("hello world") with a trailer section.
    static func trailerOrigin() throws -> RawOrigin {
        try RawOrigin(answer: { _ in
            [
                .send(
                    "HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\nContent-Type: text/plain\r\n"
                        + "Trailer: X-Checksum\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + "5\r\nhello\r\n6\r\n world\r\n0\r\nX-Checksum: 42\r\n\r\n")
            ]
        })
    }

    /// FoundationNetworking ended the process with "Transfer completed, but there's no
    /// response" on such a response.
    @Test(
        "get, get -o and explain read a chunked response with trailers; trailer fields are not stored (RFC 9112 §7.1.2)"
    )
    func chunkedWithTrailers() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let origin = try Self.trailerOrigin()
            defer { origin.stop() }
            let explain = try await cli.run(["explain", origin.url("/t")])
            #expect(explain.status == 0, "\(explain.stderr)")
            #expect(explain.stdout.contains("→ 200 OK, miss"), "\(explain.stdout)")
            #expect(!explain.stdout.contains("X-Checksum: 42"))

            let cli2 = try CLIHarness()
            let get = try await cli2.run(["get", "-i", origin.url("/t")])
            #expect(get.status == 0, "\(get.stderr)")
            #expect(
                get.stdout.hasSuffix("\r\n\r\nhello world") || get.stdout.hasSuffix("\n\nhello world"), "\(get.stdout)")
            #expect(!get.stdout.contains("X-Checksum: 42"))

            let cli3 = try CLIHarness()
            let file = cli3.directory.path + "/out.txt"
            let saved = try await cli3.run(["get", "-o", file, origin.url("/t")])
            #expect(saved.status == 0, "\(saved.stderr)")
            #expect(FileManager.default.contents(atPath: file) == Data("hello world".utf8))
            // Stored: the next get is a hit, without the trailer field.
            let hit = try await cli3.run(["get", "--json", origin.url("/t")]).jsonObject()
            #expect(hit["outcome"] as? String == "hit")
            #expect(cliHeader(hit, "X-Checksum") == nil)
        }
    }
}
