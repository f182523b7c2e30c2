#if os(Linux)
import CacheTestSupport
import CachingProxy
import Foundation
import LoopbackOrigin
import Testing

/// Forward mode, CONNECT tunnels and streaming through a real `httpcache serve` process.
@Suite("httpcache serve: forward proxy, tunnels, streaming")
struct ProxyModesTests {
    @Test(
        "Forward mode caches absolute-form http requests per origin and refuses origin-form and https (RFC 9112 §3.2.2)"
    )
    func forwardMode() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/fw") { _ in
                LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=86400")], body: "forwarded")
            }
            let proxy = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1"])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            let request = "GET \(origin.baseURL)/fw HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n"
            try client.send(request)
            let first = try client.readResponse()
            #expect(first.bodyText == "forwarded")
            #expect(first.field("Cache-Status") == "httpcache; fwd=uri-miss; fwd-status=200; stored")
            try client.send(request)
            let second = try client.readResponse()
            #expect(second.bodyText == "forwarded")
            #expect(second.field("Cache-Status")?.hasPrefix("httpcache; hit") == true)
            #expect(origin.count("/fw") == 1)
            #expect(origin.requests.first?.header("Host") == "127.0.0.1:\(origin.port)")
            try client.send("GET /fw HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            let originForm = try client.readResponse()
            #expect(originForm.status == 400)
            #expect(originForm.bodyText.contains("absolute http URL"))
            // An https URL is the client's to reach through a tunnel: the proxy never fetches it.
            try client.send(
                "GET https://127.0.0.1:\(origin.port)/fw HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            let secure = try client.readResponse()
            #expect(secure.status == 400)
            #expect(secure.bodyText.contains("https goes through CONNECT"))
            #expect(origin.count("/fw") == 1)
        }
    }

    @Test("CONNECT opens a tunnel in forward mode, never cached, and is refused in reverse mode (RFC 9110 §9.3.6)")
    func connectTunnel() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/inside") { _ in
                LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: "through the tunnel")
            }
            let proxy = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1"])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            try client.send("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            let established = try client.readHead()
            #expect(established.status == 200)
            for _ in 0..<2 {
                try client.send("GET /inside HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
                let inside = try client.readResponse()
                #expect(inside.bodyText == "through the tunnel")
                #expect(inside.field("Cache-Status") == nil, "bytes in a tunnel are not the cache's")
            }
            #expect(origin.count("/inside") == 2)

            let reverse = try ProxyHarness()
            let refused = try RawHTTPClient(port: reverse.proxy.port)
            defer { refused.close() }
            try refused.send("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            #expect(try refused.readResponse().status == 405)
        }
    }

    @Test("--allow-destination: a forward proxy reaches only the destinations listed, refusing others with 403 first")
    func allowedDestinations() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/ok") { _ in LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: "ok") }
            let proxy = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1:\(origin.port)"])
            defer { proxy.terminate() }
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            func get(_ url: String, host: String) throws -> RawHTTPClient.Response {
                try client.send("GET \(url) HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                return try client.readResponse()
            }
            #expect(try get("\(origin.baseURL)/ok", host: "127.0.0.1:\(origin.port)").bodyText == "ok")
            let otherPort = try get("http://127.0.0.1:\(origin.port &+ 1)/ok", host: "127.0.0.1")
            #expect(otherPort.status == 403)
            #expect(otherPort.bodyText.contains("--allow-destination"))
            // A name is refused as it is: nothing is looked up (the .invalid TLD never resolves,
            // so a lookup would have given 502).
            let name = try get("http://update.googleapis.invalid/service", host: "update.googleapis.invalid")
            #expect(name.status == 403)
            let tunnel = try RawHTTPClient(port: proxy.port)
            defer { tunnel.close() }
            try tunnel.send("CONNECT 127.0.0.2:443 HTTP/1.1\r\nHost: 127.0.0.2:443\r\n\r\n")
            #expect(try tunnel.readResponse().status == 403)
            #expect(origin.count("/ok") == 1)
            #expect(proxy.standardError.contains("not an allowed destination"))

            let anyPort = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1"])
            defer { anyPort.terminate() }
            let second = try RawHTTPClient(port: anyPort.port)
            defer { second.close() }
            try second.send("CONNECT 127.0.0.1:\(origin.port) HTTP/1.1\r\nHost: 127.0.0.1:\(origin.port)\r\n\r\n")
            #expect(try second.readHead().status == 200)
        }
    }

    @Test(
        "RFC 9110 §7.6.2: OPTIONS and TRACE with Max-Forwards 0 are answered by the proxy (§9.3.7 Allow, §9.3.8 reflection without credentials), with more sent on one lower; other methods ignore it"
    )
    func maxForwards() async throws {
        try await offPool {
            for forward in [false, true] {
                let harness = try ProxyHarness { if forward { $0.mode = .forward } }
                harness.serve("/mf", [("Cache-Control", "no-store")], body: "from the origin")
                let client = try RawHTTPClient(port: harness.proxy.port)
                defer { client.close() }
                let target = forward ? harness.origin.baseURL + "/mf" : "/mf"
                func send(_ method: String, _ maxForwards: String, _ more: String = "") throws -> RawHTTPClient.Response
                {
                    try client.send(
                        "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1:\(harness.origin.port)\r\nMax-Forwards: \(maxForwards)\r\n\(more)\r\n"
                    )
                    return try client.readResponse()
                }
                let options = try send("OPTIONS", "0")
                #expect(options.status == 200)
                #expect(options.field("Allow")?.contains("OPTIONS, TRACE") == true, "\(options)")
                #expect(options.field("Allow")?.contains("CONNECT") == forward, "\(options)")
                let trace = try send("TRACE", "0", "Authorization: Basic c2VjcmV0\r\nCookie: a=b\r\nX-Kept: yes\r\n")
                #expect(trace.status == 200)
                #expect(trace.field("Content-Type") == "message/http")
                #expect(trace.bodyText.hasPrefix("TRACE \(target) HTTP/1.1\r\n"), "\(trace.bodyText)")
                #expect(trace.bodyText.contains("\r\nMax-Forwards: 0\r\nX-Kept: yes\r\n\r\n"), "\(trace.bodyText)")
                #expect(!trace.bodyText.contains("Authorization") && !trace.bodyText.contains("Cookie"))
                #expect(harness.origin.requests.isEmpty, "\(harness.origin.requests.map(\.method))")
                for method in ["OPTIONS", "TRACE", "GET"] {
                    #expect(try send(method, "3").bodyText == "from the origin", "\(method)")
                }
                let received = harness.origin.requests.map { "\($0.method) \($0.header("Max-Forwards") ?? "-")" }
                #expect(received == ["OPTIONS 2", "TRACE 2", "GET 3"], "forward mode: \(forward)")
            }
        }
    }

    @Test(
        "OPTIONS * (asterisk-form, RFC 9112 §3.2.4) is answered by the proxy for itself with Allow (RFC 9110 §9.3.7), in both modes"
    )
    func optionsAsterisk() async throws {
        try await offPool {
            for forward in [false, true] {
                let harness = try ProxyHarness { if forward { $0.mode = .forward } }
                let client = try RawHTTPClient(port: harness.proxy.port)
                defer { client.close() }
                try client.send("OPTIONS * HTTP/1.1\r\nHost: 127.0.0.1:\(harness.origin.port)\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 200, "\(response.bodyText)")
                #expect(response.field("Allow")?.hasPrefix("GET, HEAD") == true, "\(response)")
                #expect(harness.origin.requests.isEmpty)
            }
        }
    }

    @Test("A response an operator pinned (httpcache pin) is served while the origin is down, whatever its directives")
    func pinnedServedOffline() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            origin.route("/kept") { _ in
                LoopbackOrigin.Response(headers: [("Cache-Control", "no-cache"), ("ETag", "\"k\"")], body: "kept")
            }
            origin.route("/other") { _ in
                LoopbackOrigin.Response(headers: [("Cache-Control", "no-cache"), ("ETag", "\"o\"")], body: "other")
            }
            let proxy = try ServeProcess(["--origin", origin.baseURL])
            defer { proxy.terminate() }
            let client = try TestClient()
            _ = try client.send("GET", proxy.baseURL + "/kept", [])
            _ = try client.send("GET", proxy.baseURL + "/other", [])
            let cacheDirectory = try #require(proxy.cacheDirectory)
            let pin = ChildProcess()
            pin.executableURL = URL(fileURLWithPath: try BuiltExecutable.path("httpcache"))
            pin.arguments = ["pin", origin.url("/kept").absoluteString, "--cache-dir", cacheDirectory]
            pin.standardOutput = FileHandle.nullDevice
            try pin.run()
            pin.waitUntilExit()
            #expect(pin.terminationStatus == 0)
            origin.stop()
            let kept = try client.send("GET", proxy.baseURL + "/kept", [])
            #expect(kept.status == 200 && kept.text == "kept")
            #expect(kept["Cache-Status"]?.contains("detail=saved-offline") == true)
            #expect(try client.send("GET", proxy.baseURL + "/other", []).status == 504)
        }
    }

    @Test("A page saved with httpcache save is read offline through the forward proxy, every resource of its pack")
    func savedPageThroughForwardProxy() async throws {
        try await offPool {
            let site = try SampleSite(manyImages: 0)
            let logs = TemporaryDirectory("access-log")
            let accessLog = logs.path + "/access.log"
            let proxy = try ServeProcess(["--forward", "--allow-destination", "127.0.0.1", "--access-log", accessLog])
            defer { proxy.terminate() }
            let cacheDirectory = try #require(proxy.cacheDirectory)
            let executable = try BuiltExecutable.path("httpcache")
            func httpcache(_ arguments: [String]) throws -> (status: Int32, output: Data) {
                let process = ChildProcess()
                process.executableURL = URL(fileURLWithPath: executable)
                process.arguments = arguments + ["--cache-dir", cacheDirectory]
                let output = Pipe()
                process.standardOutput = output
                process.standardError = FileHandle.nullDevice
                try process.run()
                let data = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                return (process.terminationStatus, data)
            }
            let save = try httpcache(["save", site.article.absoluteString, "--name", "article"])
            #expect(save.status == 0, "\(String(decoding: save.output, as: UTF8.self))")
            let shown = try httpcache(["packs", "show", "article", "--json"])
            let object = try #require(try JSONSerialization.jsonObject(with: shown.output) as? [String: Any])
            let urls = try #require(object["items"] as? [[String: Any]]).compactMap { $0["url"] as? String }
            #expect(urls.count == site.articleResources.count)
            site.origin.stop()
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            for url in urls {
                let target = try #require(URL(string: url))
                try client.send("GET \(url) HTTP/1.1\r\nHost: 127.0.0.1:\(target.port ?? 80)\r\n\r\n")
                let response = try client.readResponse()
                let expected = url.hasSuffix("/img/redirect.svg") ? 302 : 200
                #expect(response.status == expected, "\(url)")
                #expect(response.field("Cache-Status")?.contains("detail=saved-offline") == true, "\(url)")
            }
            // The access log has a line per request: every one answered from the pack.
            let lines = try String(contentsOfFile: accessLog, encoding: .utf8).split(separator: "\n")
            #expect(lines.count == urls.count)
            for (line, url) in zip(lines, urls) {
                let words = line.split(separator: " ", maxSplits: 6).map(String.init)
                #expect(words.count == 7 && words[1] == "loopback" && words[2] == "GET" && words[3] == url, "\(line)")
                #expect(words.count == 7 && words[4] == "HTTP/1.1" && ["200", "302"].contains(words[5]), "\(line)")
                #expect(line.hasSuffix("detail=saved-offline\""), "\(line)")
            }
        }
    }

    @Test(
        "The client receives bytes while they are stored; a body the origin never finishes is not stored (RFC 9111 §3.3)"
    )
    func streamingWhileStoring() async throws {
        try await offPool {
            let harness = try ProxyHarness()
            harness.origin.route("/stream") { _ in
                LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=60")], generatedLength: 1 << 20, seed: 7,
                    pauseAfterBodyBytes: 65_536)
            }
            let client = try RawHTTPClient(port: harness.proxy.port, timeout: 10)
            try client.send("GET /stream HTTP/1.1\r\nHost: a\r\n\r\n")
            let head = try client.readHead()
            #expect(head.status == 200)
            #expect(head.field("Content-Length") == "1048576")
            // The origin has sent 64 KiB and stalls: they reach the client before the rest exists.
            let prefix = try client.receive(count: 65_536)
            #expect(prefix == LoopbackOrigin.GeneratedBody.bytes(seed: 7, count: 65_536))
            client.close()
            harness.origin.stop()
            try harness.origin.restart()
            harness.origin.route("/stream") { _ in
                LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: "complete now")
            }
            // The cut response was never committed: the next request goes to the origin.
            let again = try harness.get("/stream")
            #expect(again.text == "complete now")
            #expect(!again.isHit)
        }
    }
}
#endif
