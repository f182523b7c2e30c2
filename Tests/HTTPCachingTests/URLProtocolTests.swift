import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import OfflinePages
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A plain URLSession with `CachingURLProtocol` installed. The protocol serves one cache per
/// process, so these tests run one at a time.
@Suite("A plain URLSession with CachingURLProtocol", .serialized)
struct URLProtocolTests {
    func session(_ h: Harness) -> URLSession {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.useHTTPCache(h.cache)
        return URLSession(configuration: configuration)
    }

    func fetch(_ session: URLSession, _ request: URLRequest) async throws -> (String, HTTPURLResponse) {
        let (data, response) = try await session.data(for: request)
        return (String(decoding: data, as: UTF8.self), try #require(response as? HTTPURLResponse))
    }

    /// A request's `HTTPCache-Partition` field names its partition through the protocol too,
    /// and is taken out before the request is sent.
    @Test("a URLRequest's partition through CachingURLProtocol: kept apart, never sent (RFC 9111 §2)")
    func partitionThroughTheProtocol() async throws {
        let h = try Harness()
        h.origin.route("/p") { request in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: request.header("X-Who") ?? "")
        }
        let session = session(h)
        for (partition, who) in [("A", "A"), ("B", "B"), ("A", "again")] {
            var request = h.request("/p", headers: ["X-Who": who])
            request.httpCachePartition = partition
            #expect(try await fetch(session, request).0 == (who == "again" ? "A" : who))
        }
        #expect(try await fetch(session, h.request("/p", headers: ["X-Who": "none"])).0 == "none")
        let sent = h.origin.requests.filter { $0.path == "/p" }
        #expect(sent.count == 3)
        #expect(sent.allSatisfy { $0.header("HTTPCache-Partition") == nil })
    }

    /// Miss then hit; the session sees Cache-Status; the inner request is never intercepted
    /// again (the origin gets exactly one request).
    @Test func missThenHit() async throws {
        let h = try Harness()
        h.serve("/p", [("Cache-Control", "max-age=60")], body: "through URLSession")
        let session = session(h)
        let (first, firstResponse) = try await fetch(session, h.request("/p"))
        let (second, secondResponse) = try await fetch(session, h.request("/p"))
        #expect(first == "through URLSession" && second == first)
        #expect(firstResponse.value(forHTTPHeaderField: "Cache-Status")?.contains("fwd=uri-miss") == true)
        #expect(secondResponse.value(forHTTPHeaderField: "Cache-Status")?.contains("hit") == true)
        #expect(secondResponse.value(forHTTPHeaderField: "Age") != nil)
        #expect(h.origin.count("/p") == 1)
    }

    /// Hits answered inside startLoading carry the current Age each time (RFC 9111 §5.1),
    /// however the response object is reused between them.
    @Test("Age through URLSession advances with the clock (RFC 9111 §5.1)")
    func ageAdvancesThroughURLSession() async throws {
        let h = try Harness()
        h.serve("/aged", [("Cache-Control", "max-age=600")], body: "aged")
        let session = session(h)
        _ = try await fetch(session, h.request("/aged"))
        for (advance, age) in [(0, "0"), (0, "0"), (7, "7"), (0, "7"), (60, "67")] {
            h.clock.advance(by: Double(advance))
            let (body, response) = try await fetch(session, h.request("/aged"))
            #expect(body == "aged")
            #expect(response.value(forHTTPHeaderField: "Age") == age)
            #expect(response.value(forHTTPHeaderField: "Cache-Status") == "HTTPCache; hit; ttl=\(600 - Int(age)!)")
        }
        #expect(h.origin.count("/aged") == 1)
    }

    /// A 304 reaches the app as the stored 200 body, never empty.
    @Test("Revalidation through URLSession (RFC 9111 §4.3.4)")
    func revalidation() async throws {
        let h = try Harness()
        h.serveValidated("/r", [("Cache-Control", "max-age=60")], body: "kept body")
        let session = session(h)
        _ = try await fetch(session, h.request("/r"))
        h.clock.advance(by: 120)
        let (body, response) = try await fetch(session, h.request("/r"))
        #expect(response.statusCode == 200 && body == "kept body")
        #expect(response.value(forHTTPHeaderField: "Cache-Status")?.contains("fwd-status=304") == true)
        #expect(h.origin.requests(to: "/r").last?.header("If-None-Match") == "\"v1\"")
    }

    /// The request's cachePolicy is honoured through URLSession, and the origin being down
    /// gives the stored response.
    @Test func policyAndOffline() async throws {
        let h = try Harness()
        h.serve("/o", [("Cache-Control", "max-age=60")], body: "cached")
        let session = session(h)
        _ = try await fetch(session, h.request("/o"))
        _ = try await fetch(session, h.request("/o", policy: .reloadIgnoringLocalCacheData))
        #expect(h.origin.count("/o") == 2)
        h.origin.stop()
        h.clock.advance(by: 600)
        let (body, response) = try await fetch(session, h.request("/o"))
        #expect(body == "cached")
        #expect(response.value(forHTTPHeaderField: "Cache-Status")?.contains("disconnected") == true)
    }

    /// A page saved with `savePage` reads offline through any URLSession client: every
    /// resource of the pack, the same bytes as online, `Cache-Status` saying it was saved.
    @Test func savedPageOffline() async throws {
        let h = try Harness()
        let site = try SampleSite(manyImages: 0)
        let pack = try await h.cache.savePage(site.article).pack
        let session = session(h)
        var online: [String: Data] = [:]
        for resource in pack.resources {
            online[resource.url] = try await session.data(from: try #require(URL(string: resource.url))).0
        }
        site.origin.stop()
        for resource in pack.resources {
            let (data, response) = try await session.data(from: try #require(URL(string: resource.url)))
            let http = try #require(response as? HTTPURLResponse)
            #expect(http.statusCode == 200 && data == online[resource.url], "\(resource.url)")
            #expect(
                http.value(forHTTPHeaderField: "Cache-Status")?.contains("detail=saved-offline") == true,
                "\(resource.url)")
        }
    }

    /// Apple documents `returnCacheDataDontLoad` with nothing stored as a load that fails; an
    /// app that checks only for an error must not take the cache's 504 for content. Through
    /// URLSession it is `URLError(.resourceUnavailable)`, Apple's code for it;
    /// `HTTPCache.data(for:)` keeps its documented 504 (RFC 9111 §5.2.1.7's answer).
    @Test func returnCacheDataDontLoadWithNothingStoredFailsWithResourceUnavailable() async throws {
        let h = try Harness()
        h.serve("/stored", [("Cache-Control", "max-age=60")], body: "stored")
        let session = session(h)
        _ = try await fetch(session, h.request("/stored"))
        let (body, _) = try await fetch(session, h.request("/stored", policy: .returnCacheDataDontLoad))
        #expect(body == "stored")

        let error = await #expect(throws: URLError.self) {
            try await session.data(for: h.request("/never", policy: .returnCacheDataDontLoad))
        }
        #expect(error?.code == .resourceUnavailable)
        #expect(error?.failingURL == h.origin.url("/never"))
        #if canImport(FoundationNetworking)
        // Download tasks are not answered from the cache on Linux (see CachingURLProtocol); with
        // this policy they fail the same way rather than use the network.
        let download = await #expect(throws: URLError.self) {
            try await session.download(for: h.request("/stored", policy: .returnCacheDataDontLoad))
        }
        #expect(download?.code == .resourceUnavailable)
        #endif
        #expect(h.origin.count("/never") == 0 && h.origin.count("/stored") == 1)
        #expect(try await h.get("/never", policy: .returnCacheDataDontLoad).statusCode == 504)
    }

    /// The URLSession APIs an app loads a body with.
    enum API: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case asyncData = "data(for:)"
        case asyncDataFromURL = "data(from:)"
        case completionHandler = "dataTask(with:completionHandler:)"
        case delegate = "dataTask(with:) and a delegate"
        case asyncDownload = "download(for:)"
        case downloadCompletionHandler = "downloadTask(with:completionHandler:)"
        case downloadDelegate = "downloadTask(with:) and a delegate"

        var testDescription: String { rawValue }
        var isDownload: Bool { [.asyncDownload, .downloadCompletionHandler, .downloadDelegate].contains(self) }
    }

    /// Loads `request` through `api` on a new session of `h`'s cache: the body, the response
    /// and how many pieces a delegate got the body in.
    func load(_ api: API, _ request: URLRequest, _ h: Harness) async throws -> (Data, HTTPURLResponse, pieces: Int) {
        let delegate = CollectingDelegate()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.useHTTPCache(h.cache)
        let session = URLSession(
            configuration: configuration, delegate: [.delegate, .downloadDelegate].contains(api) ? delegate : nil,
            delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let body: Data
        let response: URLResponse?
        switch api {
        case .asyncData: (body, response) = try await session.data(for: request)
        case .asyncDataFromURL: (body, response) = try await session.data(from: try #require(request.url))
        case .asyncDownload:
            let (file, answer) = try await session.download(for: request)
            defer { try? FileManager.default.removeItem(at: file) }  // the caller's to remove
            (body, response) = (try Data(contentsOf: file), answer)
        case .completionHandler:
            (body, response) = try await withCheckedThrowingContinuation { continuation in
                session.dataTask(with: request) { data, response, error in
                    if let error {
                        continuation.resume(throwing: error)
                    } else {
                        continuation.resume(returning: (data ?? Data(), response))
                    }
                }.resume()
            }
        case .downloadCompletionHandler:
            (body, response) = try await withCheckedThrowingContinuation { continuation in
                session.downloadTask(with: request) { file, response, error in
                    // Apple's Foundation removes the file when the handler returns;
                    // swift-corelibs-foundation leaves it in the temporary directory.
                    defer { if let file { try? FileManager.default.removeItem(at: file) } }
                    if let file, let data = try? Data(contentsOf: file) {
                        continuation.resume(returning: (data, response))
                    } else {
                        continuation.resume(throwing: error ?? CocoaError(.fileReadNoSuchFile))
                    }
                }.resume()
            }
        case .delegate, .downloadDelegate:
            let task = api == .delegate ? session.dataTask(with: request) : session.downloadTask(with: request)
            task.resume()
            try await delegate.finished()
            (body, response) = (delegate.body, task.response)
        }
        return (body, try #require(response as? HTTPURLResponse), delegate.pieces)
    }

    /// swift-corelibs-foundation keeps only the last `didLoad` of a custom protocol for tasks
    /// with a completion handler (the async data APIs are built on them) and gives a download
    /// task a file only when its own HTTP protocol loads it. Every API gets the whole body, on
    /// a miss and on a hit, and the delegate gets it in pieces as they come.
    @Test(arguments: API.allCases, [1, 70_000, 5_000_000])
    func everyAPIGetsTheWholeBodyOnAMissAndOnAHit(api: API, size: Int) async throws {
        let h = try Harness()
        h.origin.route("/body") { _ in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=600")], generatedLength: Int64(size), seed: 7)
        }
        let expected = Data(LoopbackOrigin.GeneratedBody.bytes(seed: 7, count: size))
        for attempt in ["miss", "hit"] {
            let (body, response, pieces) = try await load(api, h.request("/body"), h)
            #expect(response.statusCode == 200, "\(attempt)")
            // Compared outside #expect, which would diff megabytes on a failure.
            let whole = body == expected
            #expect(whole, "\(attempt): \(body.count) of \(size) bytes, or other bytes")
            if api == .delegate && size > 1_000_000 {
                #expect(pieces > 1, "\(attempt): the delegate got the body in one piece, not as it came")
            }
            if !api.isDownload {
                let status = response.value(forHTTPHeaderField: "Cache-Status") ?? ""
                #expect(status.contains(attempt == "miss" ? "fwd=uri-miss" : "; hit"), "\(attempt): \(status)")
            }
        }
        #if canImport(FoundationNetworking)
        // Download tasks go to the origin each time on Linux (see CachingURLProtocol).
        #expect(h.origin.count("/body") == (api.isDownload ? 2 : 1))
        #else
        #expect(h.origin.count("/body") == 1)
        #endif
    }

    /// A POST body sent through URLSession reaches the origin.
    @Test func postBodyPassesThrough() async throws {
        let h = try Harness()
        h.origin.route("/echo") { request in LoopbackOrigin.Response(body: request.body) }
        let (body, _) = try await fetch(session(h), h.request("/echo", method: "POST", body: Data("ping".utf8)))
        #expect(body == "ping")
    }

    /// A body given as a stream reaches the origin whole, as plain URLSession sends it (the
    /// protocol read it, then cleared the stream, which on swift-corelibs-foundation cleared
    /// the body it had just read too: the POST went out empty).
    @Test func postBodyStreamPassesThrough() async throws {
        let h = try Harness()
        h.origin.route("/echo") { request in LoopbackOrigin.Response(body: request.body) }
        var request = h.request("/echo", method: "POST")
        request.httpBodyStream = InputStream(data: Data("stream-bytes".utf8))
        let (body, _) = try await fetch(session(h), request)
        #expect(body == "stream-bytes")
        #expect(h.origin.requests(to: "/echo").first?.header("Content-Length") == "12")
    }

    /// Upload tasks send their body (swift-corelibs-foundation gives it to its own protocol
    /// only: sent by the cache, the upload went out empty and the app was told it succeeded),
    /// and what is stored for their URL is invalidated (RFC 9111 §4.4).
    @Test func uploadTasksSendTheirBodyAndInvalidate() async throws {
        let h = try Harness()
        let version = Locked(0)
        h.origin.route("/doc") { request in
            if request.method == "GET" {
                return LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=600")], body: "v\(version.withLock { $0 })")
            }
            version.withLock { $0 += 1 }
            return LoopbackOrigin.Response(body: request.body)
        }
        let session = session(h)
        #expect(try await fetch(session, h.request("/doc")).0 == "v0")
        let (echo, response) = try await session.upload(
            for: h.request("/doc", method: "PUT"), from: Data("new-document".utf8))
        #expect(String(decoding: echo, as: UTF8.self) == "new-document")
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let sent: Data = try await withCheckedThrowingContinuation { continuation in
            session.uploadTask(with: h.request("/doc", method: "POST"), from: Data("second".utf8)) { data, _, error in
                if let error {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume(returning: data ?? Data())
                }
            }.resume()
        }
        #expect(String(decoding: sent, as: UTF8.self) == "second")
        #expect(
            h.origin.requests(to: "/doc").filter { $0.method != "GET" }.map(\.body) == [
                Array("new-document".utf8), Array("second".utf8),
            ])
        // The stored v0 was invalidated by the PUT: the GET goes to the origin again.
        #expect(try await fetch(session, h.request("/doc")).0 == "v2")
    }
}

/// Collects what a session's delegate is told about one task.
/// Its state is behind a lock it owns.
final class CollectingDelegate: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    private struct State {
        var body = Data()
        var pieces = 0
        var outcome: Result<Void, any Error>?
        var waiting: CheckedContinuation<Void, any Error>?
    }

    private let state = Locked(State())

    var body: Data { state.withLock { $0.body } }
    var pieces: Int { state.withLock { $0.pieces } }

    /// Returns when the task has completed; throws its error.
    func finished() async throws {
        try await withCheckedThrowingContinuation { continuation in
            let outcome = state.withLock { state in
                if state.outcome == nil { state.waiting = continuation }
                return state.outcome
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        state.withLock {
            $0.body.append(data)
            $0.pieces += 1
        }
    }

    func urlSession(
        _ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL
    ) {
        let data = (try? Data(contentsOf: location)) ?? Data()
        try? FileManager.default.removeItem(at: location)  // corelibs-foundation leaves it behind
        state.withLock {
            $0.body = data
            $0.pieces = 1
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let outcome: Result<Void, any Error> = error.map { .failure($0) } ?? .success(())
        let waiting = state.withLock { state in
            state.outcome = outcome
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume(with: outcome)
    }
}
