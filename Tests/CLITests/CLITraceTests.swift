import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `HTTPCACHE_TRACE=1`: the real `httpcache get` writes each request's transitions on standard
/// error, and writes none without it.
@Suite(.timeLimit(.minutes(5)))
struct CLITraceTests {
    @Test("HTTPCACHE_TRACE=1 writes a miss's and a hit's transitions to stderr; unset, nothing")
    func getTracesTransitions() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/a", [("Cache-Control", "max-age=600")])
            let url = cli.url("/a")
            let traced = ["HTTPCACHE_DIR": cli.cacheDirectory, "HTTPCACHE_TRACE": "1"]

            let miss = try await CLIProcess.run(["get", url], environment: traced, in: cli.directory.path)
            #expect(miss.status == 0, "\(miss.stderr)")
            #expect(miss.stdout == "body")
            let missTrace = miss.stderrLines.filter { $0.hasPrefix("trace ") }
            #expect(
                missTrace == [
                    "trace 1 GET \(url)",
                    "trace 1 idle start → readCandidates",
                    "trace 1 lookingUp candidatesRead(0) → join",
                    "trace 1 joining joinedAsLeader → forward(uri-miss)",
                    "trace 1 forwarding originResponded(200) → relay(200, store)",
                ], "\(miss.stderr)")

            let hit = try await CLIProcess.run(["get", url], environment: traced, in: cli.directory.path)
            #expect(hit.status == 0, "\(hit.stderr)")
            #expect(
                hit.stderrLines.filter { $0.hasPrefix("trace ") } == [
                    "trace 1 GET \(url)",
                    "trace 1 idle start → readCandidates",
                    "trace 1 lookingUp candidatesRead(1) → serveStored(hit)",
                ], "\(hit.stderr)")
            #expect(cli.origin.count("/a") == 1)

            let quiet = try await cli.run(["get", url])
            #expect(quiet.status == 0, "\(quiet.stderr)")
            #expect(!quiet.stderr.contains("trace "), "\(quiet.stderr)")
        }
    }
}
