import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache` and RFC 9530 digests: a mismatch is one line and exit 1; `explain` and `show`
/// say what was verified. Digests are made by python3's hashlib.
@Suite(.timeLimit(.minutes(5)))
struct CLIDigestTests {
    static let body = "a body with a digest"

    @Test("RFC 9530 §2: get exits 1 with one line naming the URL, the field and the algorithm on a mismatch")
    func mismatchIsOneLineAndExit1() async throws {
        let wrong = try await CodedBodies.digestMember("sha-256", Array("another body".utf8))
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/d", [("Cache-Control", "max-age=600"), ("Content-Digest", wrong)], body: Self.body)
            let run = try await cli.run(["get", cli.url("/d")])
            #expect(run.status == 1)
            #expect(run.stderrLines.count == 1, "\(run.stderr)")
            #expect(run.stderr.contains("\(cli.url("/d")) does not match its Content-Digest (sha-256: expected"))
            #expect(run.stderr.contains("it was not stored"))
            let show = try await cli.run(["show", cli.url("/d")])
            #expect(show.status == 3, "nothing stored: \(show.stdout)")
        }
    }

    @Test("RFC 9530 §2, §3: show and explain say which digest was verified when the body was stored")
    func showAndExplainSayWhatWasVerified() async throws {
        let good = try await CodedBodies.digestMember("sha-512", Array(Self.body.utf8))
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/d", [("Cache-Control", "max-age=600"), ("Repr-Digest", good)], body: Self.body)
            cli.serve("/plain", [("Cache-Control", "max-age=600")], body: Self.body)
            cli.serve(
                "/bad", [("Cache-Control", "max-age=600"), ("Content-Digest", "sha-256=:AAAA:")], body: Self.body)
            for path in ["/d", "/plain", "/bad"] {
                let run = try await cli.run(["get", cli.url(path)])
                #expect(run.status == 0, "\(run.stderr)")
            }
            let show = try await cli.run(["show", cli.url("/d")])
            #expect(show.stdout.contains("sha-512 verified when stored (Repr-Digest)"), "\(show.stdout)")
            let explain = try await cli.run(["explain", cli.url("/d")])
            #expect(explain.stdout.contains("sha-512 verified when stored (Repr-Digest)"), "\(explain.stdout)")
            #expect(try await cli.run(["show", cli.url("/plain")]).stdout.contains("no digest sent"))
            let bad = try await cli.run(["show", cli.url("/bad")])
            #expect(
                bad.stdout.contains("content-digest sha-256 ignored: 3 bytes, not the 32 of sha-256"), "\(bad.stdout)")
        }
    }

    @Test("RFC 9530 §3, §4: get -C resumes with Want-Repr-Digest; a file failing its Repr-Digest is discarded, exit 1")
    func resumedMismatchIsDiscarded() async throws {
        let resource = LoopbackOrigin.GeneratedResource(length: 300 * 1024, seed: 4, etag: "\"c1\"")
        let wrong = try await CodedBodies.digestMember("sha-256", Array("another file".utf8))
        try await offPool {
            let cli = try CLIHarness()
            let attempts = Locked(0)
            var served = resource
            served.headers = [("Repr-Digest", wrong)]
            let file = served
            cli.origin.route("/file") { request in
                let attempt = attempts.withLock { count -> Int in
                    count += 1
                    return count
                }
                return file.response(to: request, cutAfterBodyBytes: attempt == 1 ? 100 * 1024 : nil)
            }
            let output = cli.directory.path + "/file.bin"
            let run = try await cli.run(["get", "-C", "-o", output, cli.url("/file")])
            #expect(run.status == 1)
            #expect(run.stderrLines.count == 1, "\(run.stderr)")
            #expect(run.stderr.contains("does not match its Repr-Digest (sha-256: expected"), "\(run.stderr)")
            #expect(run.stderr.contains("file.bin.partial were discarded"), "\(run.stderr)")
            #expect(!FileManager.default.fileExists(atPath: output))
            #expect(!FileManager.default.fileExists(atPath: output + ".partial"))
            let sent = cli.origin.requests(to: "/file")
            #expect(sent.count == 2)
            #expect(sent.last?.header("Want-Repr-Digest") == "sha-256=10, sha-512=3")
        }
    }
}
