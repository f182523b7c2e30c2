import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Several processes share one cache directory: what one stores is a hit in the other, and a
/// purge by one is seen by the other at once (the disk store's shared change counter).
@Suite("One cache directory, two processes")
struct CrossProcessTests {
    @Test func storedByAnotherProcessIsAHit() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/shared", [("Cache-Control", "max-age=600"), ("ETag", "\"s\"")], body: "from the child")
            let child = try await cli.run(["get", "--json", cli.url("/shared")])
            #expect(child.status == 0)
            #expect(try child.jsonObject()["outcome"] as? String == "miss")

            var configuration = HTTPCache.Configuration()
            configuration.directory = cli.cacheDirectory
            configuration.log = { _ in }
            let cache = try HTTPCache(configuration: configuration)
            let here = try await cache.data(for: URLRequest(url: cli.origin.url("/shared")))
            #expect(here.outcome == .hit)
            #expect(String(decoding: here.data, as: UTF8.self) == "from the child")
            #expect(cli.origin.count("/shared") == 1)

            // Stored here, a hit in a child; purged by a child, a miss here.
            cli.serve("/mine", [("Cache-Control", "max-age=600")], body: "from the parent")
            _ = try await cache.data(for: URLRequest(url: cli.origin.url("/mine")))
            let hit = try await cli.run(["get", "--json", cli.url("/mine")])
            #expect(try hit.jsonObject()["outcome"] as? String == "hit")
            #expect(try hit.jsonObject()["body"] as? String == "from the parent")
            let purge = try await cli.run(["purge", cli.url("/mine")])
            #expect(purge.status == 0)
            let after = try await cache.data(for: URLRequest(url: cli.origin.url("/mine")))
            #expect(after.outcome == .miss)
            #expect(cli.origin.count("/mine") == 2)
        }
    }
}
