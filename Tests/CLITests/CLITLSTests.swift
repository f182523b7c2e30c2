#if os(Linux)
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache get https://…` on the package's own client with TLS: the tests' CA trusted with
/// `--cacert`, and each verification failure one line naming the origin and the cause.
@Suite(.timeLimit(.minutes(10)))
struct CLITLSTests {
    static func origin(_ leaf: (TestCertificates) -> TestCertificates.Leaf) throws -> LoopbackOrigin {
        let certificates = try TestCertificates.shared()
        let origin = try LoopbackOrigin(tls: certificates.serverContext(leaf(certificates)))
        origin.setDefault { _ in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600"), ("ETag", "\"v1\"")], body: Array("secure".utf8))
        }
        return origin
    }

    @Test("get https:// with --cacert: a miss, then a hit; without it, the unknown issuer in one line")
    func trustedWithCACert() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let origin = try Self.origin { $0.localhost }
            defer { origin.stop() }
            let cli = try CLIHarness()
            let refused = try await cli.run(["get", origin.url("/a").absoluteString])
            #expect(refused.status != 0)
            let line = refused.stderr.split(separator: "\n").first.map(String.init) ?? ""
            #expect(line.contains("127.0.0.1:\(origin.port)"), "\(refused.stderr)")
            #expect(line.contains("unknown authority") && line.contains("--cacert"), "\(refused.stderr)")
            #expect(origin.requests.isEmpty, "no request is sent over an unverified connection")

            let miss = try await cli.run(["get", "--cacert", certificates.caFile, origin.url("/a").absoluteString])
            #expect(miss.status == 0, "\(miss.stderr)")
            #expect(miss.stdout == "secure")
            let hit = try await cli.run([
                "get", "--json", "--cacert", certificates.caFile, origin.url("/a").absoluteString,
            ])
            .jsonObject()
            #expect(hit["outcome"] as? String == "hit")
            #expect(origin.requests.count == 1)
        }
    }

    @Test(
        "An expired certificate, a wrong host name: one line each naming the origin and the cause (RFC 9110 §4.3.4)",
        arguments: ["expired", "wrong host name", "not valid before"])
    func verificationFailures(cause: String) async throws {
        let leaf: @Sendable (TestCertificates) -> TestCertificates.Leaf =
            switch cause {
            case "expired": { $0.expired }
            case "wrong host name": { $0.wrongHost }
            default: { $0.notYetValid }
            }
        try await offPool {
            let certificates = try TestCertificates.shared()
            let origin = try Self.origin(leaf)
            defer { origin.stop() }
            let cli = try CLIHarness()
            let result = try await cli.run(["get", "--cacert", certificates.caFile, origin.url("/a").absoluteString])
            #expect(result.status != 0)
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(result.stderr)")
            #expect(
                result.stderr.contains("127.0.0.1:\(origin.port)") && result.stderr.contains(cause), "\(result.stderr)")
        }
    }

    @Test(
        "get https:// against nginx, an origin we did not write: a miss then a hit; no-cache revalidated with nginx's 304 (RFC 9111 §4.3)"
    )
    func againstNginx() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let files = ["/fresh/a.txt": Array("from nginx".utf8), "/revalidate/b.txt": Array("checked".utf8)]
            guard let nginx = try NginxOrigin.start(tls: certificates.localhost, files: files) else { return }
            defer { nginx.stop() }
            let cli = try CLIHarness()
            func get(_ path: String) async throws -> [String: Any] {
                try await cli.run(["get", "--json", "--cacert", certificates.caFile, nginx.url(path)]).jsonObject()
            }
            let miss = try await get("/fresh/a.txt")
            #expect(miss["outcome"] as? String == "miss")
            #expect(miss["status"] as? Int == 200)
            let hit = try await get("/fresh/a.txt")
            #expect(hit["outcome"] as? String == "hit")
            #expect(nginx.requests.count == 1, "\(nginx.requests)")
            let plain = try await cli.run(["get", "--cacert", certificates.caFile, nginx.url("/fresh/a.txt")])
            #expect(plain.stdout == "from nginx")

            #expect(try await get("/revalidate/b.txt")["outcome"] as? String == "miss")
            #expect(try await get("/revalidate/b.txt")["outcome"] as? String == "revalidated")
            let last = nginx.requests.last ?? ""
            #expect(last.contains("GET /revalidate/b.txt") && last.contains("\" 304 "), "\(nginx.requests)")
        }
    }

    @Test("--cacert naming a file that is not there is a usage error before anything is sent")
    func unusableCAFile() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let result = try await cli.run(["get", "--cacert", "/nonexistent/ca.pem", "https://127.0.0.1:9/"])
            #expect(result.status == 2, "\(result.stderr)")
            #expect(result.stderr.contains("/nonexistent/ca.pem"), "\(result.stderr)")
        }
    }
}
#endif
