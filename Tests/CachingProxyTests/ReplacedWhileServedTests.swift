#if os(Linux)
import CacheSystem
import CacheStorage
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// A stored response being served while a newer one replaces it, through a real `httpcache
/// serve`: every client gets one whole version, byte for byte as the origin sent it, never a cut
/// body and never a 502 of its own making.
@Suite("httpcache serve: a stored response replaced while it is being served")
struct ReplacedWhileServedTests {
    /// An origin whose every response to `path` is a new version `n` (1, 2, …): `ETag: "vN"` and
    /// a body of `size` bytes generated from seed N, so any body can be checked against its ETag.
    final class VersionedOrigin: @unchecked Sendable {
        let origin: LoopbackOrigin
        /// Responses so far, and per request number (1-based) a gate: a `304` for v1 is sent once
        /// it is signalled, instead of a new 200.
        private let state = Locked((versions: 0, notModifiedAfter: [Int: DispatchSemaphore]()))

        func answerNotModified(request number: Int, after gate: DispatchSemaphore) {
            state.withLock { $0.notModifiedAfter[number] = gate }
        }

        init(path: String, size: Int64, cacheControl: String) throws {
            origin = try LoopbackOrigin()
            origin.route(path) { [self] _ in
                let (number, gate) = state.withLock { state -> (Int, DispatchSemaphore?) in
                    state.versions += 1
                    return (state.versions, state.notModifiedAfter[state.versions])
                }
                if let gate {
                    _ = gate.wait(timeout: .now() + 20)
                    return LoopbackOrigin.Response(
                        status: 304, headers: [("Cache-Control", cacheControl), ("ETag", "\"v1\"")])
                }
                return LoopbackOrigin.Response(
                    headers: [("Cache-Control", cacheControl), ("ETag", "\"v\(number)\"")], generatedLength: size,
                    seed: UInt64(number))
            }
        }

        deinit { origin.stop() }

        /// Whether `body` is exactly version `etag`'s body.
        static func isWhole(_ body: [UInt8], etag: String?, size: Int64) -> Bool {
            guard let etag, let seed = UInt64(etag.trimmingCharacters(in: CharacterSet(charactersIn: "\"v"))) else {
                return false
            }
            return body.count == Int(size) && body == LoopbackOrigin.GeneratedBody.bytes(seed: seed, count: Int(size))
        }
    }

    @Test(
        "a client reading a stored response while a no-cache request stores a new version gets the old one whole",
        // 40 MiB streamed from disk (beyond the memory tier's largest entry); 6 MiB sent whole
        // from the memory tier's own array.
        arguments: [(["--memory", "16M"], 40 << 20), ([], 40 << 20), ([], 6 << 20)] as [([String], Int64)])
    func slowReaderKeepsItsVersion(memory: [String], size: Int64) async throws {
        try await offPool {
            let versioned = try VersionedOrigin(path: "/big", size: size, cacheControl: "max-age=600")
            let proxy = try ServeProcess(["--origin", versioned.origin.baseURL] + memory)
            defer { proxy.terminate() }
            let request = "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"

            let first = try RawHTTPClient(port: proxy.port, timeout: 30)
            defer { first.close() }
            try first.send(request)
            let stored = try first.readResponse()
            #expect(VersionedOrigin.isWhole(stored.body, etag: stored.field("ETag"), size: size))

            // A hit, read slowly: its head and 1 MiB, then nothing while the entry is replaced.
            let slow = try RawHTTPClient(port: proxy.port, timeout: 30, receiveBuffer: 64 << 10)
            defer { slow.close() }
            try slow.send(request)
            let head = try slow.readHead()
            #expect(head.field("Cache-Status")?.contains("hit") == true)
            #expect(head.field("ETag") == "\"v1\"")
            var body = try slow.receive(count: 1 << 20)

            let reload = try RawHTTPClient(port: proxy.port, timeout: 30)
            defer { reload.close() }
            try reload.send("GET /big HTTP/1.1\r\nHost: a\r\nCache-Control: no-cache\r\n\r\n")
            let newer = try reload.readResponse()
            #expect(newer.field("ETag") == "\"v2\"")
            #expect(VersionedOrigin.isWhole(newer.body, etag: newer.field("ETag"), size: size))

            body += try slow.receive(count: Int(size) - body.count)
            #expect(VersionedOrigin.isWhole(body, etag: "\"v1\"", size: size), "the slow reader's body is v1, whole")

            // And the store now answers with v2: asked on a new connection, since `first` has
            // been idle all along, and on a busy machine 40 MiB each way can outlast the proxy's
            // 60 s keep-alive (it closed `first`, as RFC 9112 §9.3 lets it).
            let last = try RawHTTPClient(port: proxy.port, timeout: 30)
            defer { last.close() }
            try last.send(request)
            let after = try last.readResponse()
            #expect(after.field("ETag") == "\"v2\"")
            #expect(after.field("Cache-Status")?.contains("hit") == true)
            #expect(VersionedOrigin.isWhole(after.body, etag: after.field("ETag"), size: size))
        }
    }

    @Test("200 concurrent clients on 20 URLs whose versions change: every body is one version, whole, none a 502")
    func concurrentReplacements() async throws {
        try await offPool {
            let origin = try LoopbackOrigin()
            defer { origin.stop() }
            let versions = Locked<[Int: Int]>([:])
            // One URL in five is above the proxy's 1 MiB limit for bodies answered at once and larger
            // than what socket buffers hold, so both ways of serving a stored body (at once, and
            // streamed from a worker while the client reads) are raced.
            let size: @Sendable (Int) -> Int64 = { index in index.isMultiple(of: 5) ? 3 << 20 : 200_000 }
            origin.route("/item") { request in
                let index = Int(request.target.split(separator: "=").last ?? "") ?? 0
                let version = versions.withLock { versions -> Int in
                    versions[index, default: 0] += 1
                    return versions[index]!
                }
                let seed = UInt64(index * 1000 + version)
                return LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=600"), ("ETag", "\"v\(seed)\"")], generatedLength: size(index),
                    seed: seed)
            }
            let proxy = try ServeProcess(["--origin", origin.baseURL, "--memory", "4M"])
            defer { proxy.terminate() }
            let port = proxy.port
            // Each client sends 4 requests on one connection, reading with a small receive buffer so
            // that responses stream for a while; every other request is a reload that stores anew.
            let failures = try await withThrowingTaskGroup(of: [String].self) { group in
                for clientNumber in 0..<200 {
                    group.addTask {
                        try await offPool {
                            let client = try RawHTTPClient(port: port, timeout: 60, receiveBuffer: 16 << 10)
                            defer { client.close() }
                            var failures: [String] = []
                            for round in 0..<4 {
                                let index = (clientNumber * 7 + round * 3) % 20
                                // Clients 20 apart ask for the same URLs in the same rounds, one reloading while
                                // the other reads.
                                let reload =
                                    (clientNumber / 20 + round).isMultiple(of: 2) ? "Cache-Control: no-cache\r\n" : ""
                                try client.send("GET /item?i=\(index) HTTP/1.1\r\nHost: a\r\n\(reload)\r\n")
                                var response: RawHTTPClient.Response
                                do {
                                    response = try client.readHead()
                                    // Readers pause after the head, while other clients' reloads
                                    // replace the entry they are reading.
                                    if reload.isEmpty { Thread.sleep(forTimeInterval: 0.05) }
                                    try client.readBody(into: &response)
                                } catch {
                                    failures.append("client \(clientNumber), /item?i=\(index): \(error)")
                                    break
                                }
                                let etag = response.field("ETag") ?? "?"
                                if response.status != 200 {
                                    failures.append(
                                        "client \(clientNumber): status \(response.status) \(response.bodyText)")
                                } else if !VersionedOrigin.isWhole(response.body, etag: etag, size: size(index)) {
                                    failures.append(
                                        "client \(clientNumber): \(response.body.count) bytes, not \(etag) whole")
                                }
                            }
                            return failures
                        }
                    }
                }
                var failures: [String] = []
                for try await some in group { failures += some }
                return failures
            }
            #expect(failures.isEmpty, "\(failures.count) failures: \(failures.prefix(5))")
        }
    }

    @Test(
        "a 304 that arrives after another request stored a newer 200 is answered, never left without a response (RFC 9111 §4.3.4)"
    )
    func notModifiedAfterReplacement() async throws {
        try await offPool {
            let size: Int64 = 2 << 20
            let versioned = try VersionedOrigin(path: "/r", size: size, cacheControl: "max-age=600")
            // Request 2 (a revalidation asked for with max-age=0) is answered `304 ETag "v1"` only
            // once request 3, a reload sent meanwhile, has stored v3. Neither waits for the other in
            // the proxy: requests that ask for validation are not collapsed.
            let v3Stored = DispatchSemaphore(value: 0)
            versioned.answerNotModified(request: 2, after: v3Stored)
            let proxy = try ServeProcess(["--origin", versioned.origin.baseURL])
            defer { proxy.terminate() }
            let port = proxy.port
            // The choreography runs on threads of its own: the cooperative pool may be busy.
            let answer = try await offPool { () -> RawHTTPClient.Response in
                let first = try RawHTTPClient(port: port, timeout: 30)
                defer { first.close() }
                try first.send("GET /r HTTP/1.1\r\nHost: a\r\n\r\n")
                #expect(try first.readResponse().field("ETag") == "\"v1\"")

                let validating = try RawHTTPClient(port: port, timeout: 30)
                defer { validating.close() }
                try validating.send("GET /r HTTP/1.1\r\nHost: a\r\nCache-Control: max-age=0\r\n\r\n")
                while versioned.origin.count("/r") < 2 { Thread.sleep(forTimeInterval: 0.01) }
                let reload = try RawHTTPClient(port: port, timeout: 30)
                defer { reload.close() }
                try reload.send("GET /r HTTP/1.1\r\nHost: a\r\nCache-Control: no-cache\r\n\r\n")
                let newer = try reload.readResponse()
                #expect(newer.field("ETag") == "\"v3\"")
                // The client has v3's last byte before the proxy has stored it (the store finishes
                // behind the response): the 304 is let go once a cache-only request is answered v3.
                let probe = try RawHTTPClient(port: port, timeout: 30)
                defer { probe.close() }
                let deadline = Date().addingTimeInterval(20)
                var stored = false
                while !stored && Date() < deadline {
                    try probe.send("HEAD /r HTTP/1.1\r\nHost: a\r\nCache-Control: only-if-cached\r\n\r\n")
                    stored = try probe.readResponse(method: "HEAD").field("ETag") == "\"v3\""
                    if !stored { Thread.sleep(forTimeInterval: 0.01) }
                }
                #expect(stored, "v3 was never answered from the cache")
                v3Stored.signal()
                return try validating.readResponse()
            }
            #expect(answer.status == 200)
            // v1 is no longer stored and the 304 does not select v3: the request is sent again.
            #expect(VersionedOrigin.isWhole(answer.body, etag: answer.field("ETag"), size: size))
            #expect(answer.field("ETag") != "\"v1\"")
        }
    }
}
#endif
