#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache get https://…` on the package's own client with TLS: the tests' CA trusted with
/// `--cacert`, and each verification failure one line naming the origin and the cause; and
/// `httpcache serve` in front of an https origin, its CA trusted with `--origin-cacert`.
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
                let run = try await cli.run(["get", "--json", "--cacert", certificates.caFile, nginx.url(path)])
                try #require(run.status == 0, "get \(path): \(run.stderr)")
                return try run.jsonObject()
            }
            let miss = try await get("/fresh/a.txt")
            #expect(miss["outcome"] as? String == "miss")
            #expect(miss["status"] as? Int == 200)
            let hit = try await get("/fresh/a.txt")
            #expect(hit["outcome"] as? String == "hit")
            #expect(nginx.requests(atLeast: 1).count == 1, "\(nginx.requests)")
            let plain = try await cli.run(["get", "--cacert", certificates.caFile, nginx.url("/fresh/a.txt")])
            #expect(plain.stdout == "from nginx")

            #expect(try await get("/revalidate/b.txt")["outcome"] as? String == "miss")
            #expect(try await get("/revalidate/b.txt")["outcome"] as? String == "revalidated")
            let last = nginx.requests(atLeast: 3).last ?? ""
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

    // MARK: serve --origin https://…

    /// `httpcache serve ARGUMENTS --listen 127.0.0.1:0 --memory-only` once it listens, its
    /// standard error in the file `errors`; and its port.
    static func serve(_ arguments: [String], errors: String) async throws -> (run: PipedRun, port: UInt16) {
        let run = try PipedRun(
            ["serve"] + arguments + ["--listen", "127.0.0.1:0", "--memory-only"], standardError: errors)
        let listening = await run.waitForOutput(seconds: 30) { $0.contains(UInt8(ascii: "\n")) }
        let line = String(decoding: run.stdout, as: UTF8.self)
        let port = try #require(
            listening ? line.split(separator: "\n").first?.split(separator: ":").last.flatMap { UInt16($0) } : nil,
            "httpcache serve did not say where it listens: \(line) \((try? String(contentsOfFile: errors, encoding: .utf8)) ?? "")"
        )
        return (run, port)
    }

    /// `method path` to 127.0.0.1:`port` on a connection of its own (`Connection: close`): the
    /// whole response as text.
    static func get(_ path: String, port: UInt16, method: String = "GET") throws -> String {
        let fd = try LoopbackOrigin.connect(port: port)
        defer { close(fd) }
        let request = Array("\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else {
            throw CLIServeFailure(description: "could not send the request to 127.0.0.1:\(port)")
        }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            response += buffer[..<count]
        }
        return String(decoding: response, as: UTF8.self)
    }

    struct CLIServeFailure: Error, CustomStringConvertible {
        var description: String
    }

    @Test(
        "serve --origin https://… --origin-cacert CA: a miss, then a hit; without the CA, 502 naming a TLS failure and one log line naming the origin and the fix"
    )
    func serveInFrontOfAnHTTPSOrigin() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let origin = try Self.origin { $0.localhost }
            defer { origin.stop() }
            let cli = try CLIHarness()
            let trusted = try await Self.serve(
                ["--origin", origin.baseURL, "--origin-cacert", certificates.caFile],
                errors: cli.directory.path + "/trusted.log")
            let miss = try Self.get("/a", port: trusted.port)
            #expect(miss.hasPrefix("HTTP/1.1 200"), "\(miss)")
            #expect(miss.contains("Cache-Status: httpcache; fwd=uri-miss; fwd-status=200; stored\r\n"), "\(miss)")
            #expect(miss.hasSuffix("\r\n\r\nsecure"), "\(miss)")
            let hit = try Self.get("/a", port: trusted.port)
            #expect(hit.contains("Cache-Status: httpcache; hit"), "\(hit)")
            #expect(hit.hasSuffix("\r\n\r\nsecure"), "\(hit)")
            #expect(origin.requests.count == 1)

            let errors = cli.directory.path + "/untrusted.log"
            let untrusted = try await Self.serve(["--origin", origin.baseURL], errors: errors)
            let refused = try Self.get("/b", port: untrusted.port)
            #expect(refused.hasPrefix("HTTP/1.1 502"), "\(refused)")
            #expect(refused.contains("detail=origin-tls-failed"), "\(refused)")
            let lines = try String(contentsOfFile: errors, encoding: .utf8).split(separator: "\n")
                .filter { $0.contains("unknown authority") }
            #expect(lines.count == 1, "\(lines)")
            #expect(lines.first?.contains("127.0.0.1:\(origin.port)") == true, "\(lines)")
            #expect(lines.first?.contains("trust its CA with --origin-cacert FILE") == true, "\(lines)")
            #expect(origin.requests.count == 1, "nothing sent over the refused connection")
        }
    }

    @Test(
        "serve in front of nginx with TLS: a miss then a hit, nginx's 304 revalidating, 20 concurrent misses collapsed into one request, PURGE (RFC 9111 §4, §4.3)"
    )
    func serveInFrontOfNginx() async throws {
        try await offPool {
            let certificates = try TestCertificates.shared()
            let files = [
                "/fresh/a.txt": Array("from nginx".utf8),
                "/fresh/c.txt": Array(repeating: UInt8(ascii: "c"), count: 50_000),
                "/revalidate/b.txt": Array("checked".utf8),
            ]
            guard let nginx = try NginxOrigin.start(tls: certificates.localhost, files: files) else { return }
            defer { nginx.stop() }
            let cli = try CLIHarness()
            let proxy = try await Self.serve(
                ["--origin", nginx.url(""), "--origin-cacert", certificates.caFile],
                errors: cli.directory.path + "/serve.log")
            // Requests to `path` once nginx has logged `total` (it logs after the response's end).
            func count(_ path: String, of total: Int) -> Int {
                nginx.requests(atLeast: total).filter { $0.contains("GET \(path) ") }.count
            }

            let miss = try Self.get("/fresh/a.txt", port: proxy.port)
            #expect(miss.hasPrefix("HTTP/1.1 200") && miss.hasSuffix("\r\n\r\nfrom nginx"), "\(miss)")
            #expect(miss.contains("fwd=uri-miss"), "\(miss)")
            let hit = try Self.get("/fresh/a.txt", port: proxy.port)
            #expect(hit.contains("Cache-Status: httpcache; hit") && hit.hasSuffix("\r\n\r\nfrom nginx"), "\(hit)")
            #expect(count("/fresh/a.txt", of: 1) == 1, "\(nginx.requests)")

            _ = try Self.get("/revalidate/b.txt", port: proxy.port)
            let revalidated = try Self.get("/revalidate/b.txt", port: proxy.port)
            #expect(revalidated.contains("fwd=stale; fwd-status=304"), "\(revalidated)")
            #expect(revalidated.hasSuffix("\r\n\r\nchecked"), "\(revalidated)")
            #expect(nginx.requests(atLeast: 3).last?.contains("\" 304 ") == true, "\(nginx.requests)")

            let answers = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 20) { _ in
                let answer = (try? Self.get("/fresh/c.txt", port: proxy.port)) ?? "no answer"
                answers.withLock { $0.append(answer) }
            }
            let whole = String(repeating: "c", count: 50_000)
            #expect(
                answers.withLock { $0.allSatisfy { $0.hasPrefix("HTTP/1.1 200") && $0.hasSuffix("\r\n\r\n" + whole) } })
            #expect(count("/fresh/c.txt", of: 4) == 1, "\(nginx.requests)")

            #expect(try Self.get("/fresh/a.txt", port: proxy.port, method: "PURGE").hasPrefix("HTTP/1.1 200"))
            let afterPurge = try Self.get("/fresh/a.txt", port: proxy.port)
            #expect(afterPurge.contains("fwd=uri-miss"), "\(afterPurge)")
            #expect(count("/fresh/a.txt", of: 5) == 2, "\(nginx.requests)")
        }
    }

    @Test(
        "serve --origin-cacert with a file that cannot be used is a usage error naming the file",
        arguments: ["missing", "not PEM"])
    func serveWithAnUnusableCAFile(file: String) async throws {
        try await offPool {
            let cli = try CLIHarness()
            var path = "/nonexistent/ca.pem"
            if file == "not PEM" {
                path = cli.directory.path + "/not-a-certificate.pem"
                _ = FileManager.default.createFile(atPath: path, contents: Data("not a certificate\n".utf8))
            }
            let result = try await cli.run(
                ["serve", "--origin", "https://127.0.0.1:9", "--origin-cacert", path, "--listen", "127.0.0.1:0"])
            #expect(result.status == 2, "\(result.stderr)")
            #expect(result.stderrLines.count == 1, "\(result.stderr)")
            #expect(result.stderr.contains("--origin-cacert") && result.stderr.contains(path), "\(result.stderr)")
        }
    }
}
#endif
