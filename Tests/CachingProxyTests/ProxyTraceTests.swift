#if os(Linux)
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `HTTPCACHE_TRACE=1` in a real `httpcache serve`: each request's transitions on its standard
/// error, written by the same exchange driver as the app's cache.
@Suite(.timeLimit(.minutes(5)))
struct ProxyTraceTests {
    @Test("httpcache serve with HTTPCACHE_TRACE=1 writes a miss's and a hit's transitions to stderr")
    func serveTracesTransitions() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            origin.route("/a") { _ in LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=600")], body: "body")
            }
            let proxy = try ServeProcess(
                ["--origin", origin.baseURL], memoryOnly: true, environment: ["HTTPCACHE_TRACE": "1"])
            defer { proxy.terminate() }
            let client = try TestClient()
            let url = origin.url("/a").absoluteString

            let miss = try client.send("GET", proxy.baseURL + "/a")
            #expect(miss.text == "body")
            let hit = try client.send("GET", proxy.baseURL + "/a")
            #expect(hit.isHit, "\(hit.cacheStatus ?? "no Cache-Status")")
            #expect(origin.count("/a") == 1)

            // Each line is written before the response it leads to is sent.
            let trace = proxy.standardError.split(separator: "\n").filter { $0.hasPrefix("trace ") }
            #expect(
                trace == [
                    "trace 1 GET \(url)",
                    "trace 1 idle start → readCandidates",
                    "trace 1 lookingUp candidatesRead(0) → join",
                    "trace 1 joining joinedAsLeader → forward(uri-miss)",
                    "trace 1 forwarding originResponded(200) → relay(200, store)",
                    "trace 2 GET \(url)",
                    "trace 2 idle start → readCandidates",
                    "trace 2 lookingUp candidatesRead(1) → serveStored(hit)",
                ], "\(proxy.standardError)")
        }
    }
}
#endif
