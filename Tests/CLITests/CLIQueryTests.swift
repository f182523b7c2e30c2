import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache get -X QUERY` and `explain` (RFC 10008) run as processes against a loopback origin.
@Suite(.timeLimit(.minutes(10)))
struct CLIQueryTests {
    /// §2.7: `get -X QUERY -d` twice is a miss then a hit, the origin asked once, content from
    /// `-d @file` too; `explain` shows the content's part of the key.
    @Test func rfc10008Section2_7QueryFromTheCommandLineIsCached() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.origin.route("/search") { request in
                LoopbackOrigin.Response(
                    headers: [("Content-Type", "text/plain"), ("Cache-Control", "max-age=600")],
                    body: "\(request.method) " + String(decoding: request.body, as: UTF8.self))
            }
            let json = "Content-Type: application/json"
            let first = try await cli.run([
                "get", cli.url("/search"), "-X", "QUERY", "-d", #"{"q": 1}"#, "-H", json, "-v",
            ])
            #expect(first.status == 0 && first.stdout == #"QUERY {"q": 1}"#, "\(first.stderr)")
            #expect(first.stderr.contains("→ 200 miss"), "\(first.stderr)")
            let payload = cli.directory.path + "/query.json"
            #expect(FileManager.default.createFile(atPath: payload, contents: Data("{ \"q\" : 1 }\n".utf8)))
            let second = try await cli.run([
                "get", cli.url("/search"), "-X", "QUERY", "-d", "@" + payload, "-H", json, "-v",
            ])
            #expect(second.stdout == #"QUERY {"q": 1}"# && second.stderr.contains("→ 200 hit"), "\(second.stderr)")
            #expect(cli.origin.count("/search") == 1)

            let explain = try await cli.run([
                "explain", cli.url("/search"), "-X", "QUERY", "-d", #"{"q":1}"#, "-H", json,
            ])
            #expect(explain.status == 0, "\(explain.stderr)")
            #expect(explain.stdout.contains("Content key:"), "\(explain.stdout)")
            #expect(explain.stdout.contains("(application/json; JSON without white space outside strings)"))
            #expect(explain.stdout.contains("Stored:") && explain.stdout.contains("yes,"), "\(explain.stdout)")
            #expect(cli.origin.count("/search") == 1)
        }
    }
}
