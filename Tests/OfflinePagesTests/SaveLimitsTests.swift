import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Synchronization
import Testing

@testable import OfflinePages

/// A cache in a fresh directory in front of an origin of its own, whose store keeps bodies of
/// at most `maximumEntrySize` bytes.
private struct LimitsHarness {
    let origin: LoopbackOrigin
    let directory = TemporaryDirectory("offline-pages-limits-test")
    let cache: HTTPCache

    init(maximumEntrySize: Int64? = nil) throws {
        origin = try LoopbackOrigin()
        var configuration = HTTPCache.Configuration()
        configuration.directory = directory.path
        configuration.maximumEntrySize = maximumEntrySize
        configuration.log = { _ in }
        cache = try HTTPCache(configuration: configuration, transport: LoopbackFence())
    }

    /// Saves `path` and returns the pack, with the bytes received as the last progress step says.
    func save(_ path: String) async throws -> (pack: OfflinePack, bytes: Int64) {
        let save = cache.savePage(origin.url(path))
        var bytes: Int64 = 0
        for await step in save.progress { bytes = step.bytes }
        return (try await save.pack, bytes)
    }

    func paths(_ pack: OfflinePack) -> Set<String> {
        Set(pack.resources.map { $0.url.replacingOccurrences(of: origin.baseURL, with: "") })
    }

    func problem(_ pack: OfflinePack, _ path: String) -> OfflinePack.Problem? {
        pack.problems.first { $0.url == origin.url(path).absoluteString }
    }
}

@Suite("A save is bounded whatever the origin sends")
struct SaveLimitsTests {
    static let mebibyte = 1 << 20

    @Test("A 64 MiB stylesheet and frame the store refuses stop at the read limit; the rest is saved")
    func hugeDocumentsStopEarly() async throws {
        let h = try LimitsHarness(maximumEntrySize: Int64(Self.mebibyte))
        h.origin.route("/page.html") { _ in
            .init(
                headers: [("Content-Type", "text/html")],
                body: #"<link rel="stylesheet" href="/big.css"><iframe src="/big.html"></iframe><img src="/a.svg">"#)
        }
        for (path, type) in [("/big.css", "text/css"), ("/big.html", "text/html")] {
            h.origin.route(path) { _ in
                .init(headers: [("Content-Type", type)], generatedLength: 64 << 20, seed: 7, chunked: true)
            }
        }
        h.origin.route("/a.svg") { _ in .init(headers: [("Content-Type", "image/svg+xml")], body: "<svg/>") }
        let (pack, bytes) = try await h.save("/page.html")
        #expect(h.paths(pack) == ["/page.html", "/a.svg"])
        for path in ["/big.css", "/big.html"] {
            let problem = try #require(h.problem(pack, path))
            #expect(!problem.isFailure && problem.reason.contains("largest body the store keeps"), "\(problem)")
        }
        // Each transfer stopped just past the 16 MiB read limit, far short of its 64 MiB.
        let readLimit = Int64(PageSaver.Limits().readSize)
        #expect(bytes < 2 * (readLimit + Int64(Self.mebibyte)), "\(bytes) bytes received")
    }

    @Test(
        "A resource whose Content-Length (RFC 9110 §8.6) is over the largest body the store keeps is refused from its head, its body not downloaded, and listed saying why"
    )
    func declaredTooLargeIsRefusedFromItsHead() async throws {
        let h = try LimitsHarness(maximumEntrySize: Int64(Self.mebibyte))
        let length: Int64 = 64 << 20
        h.origin.route("/page.html") { _ in
            .init(headers: [("Content-Type", "text/html")], body: #"<img src="/big.png"><img src="/a.svg">"#)
        }
        h.origin.route("/big.png") { _ in
            .init(headers: [("Content-Type", "image/png")], generatedLength: length, seed: 5, chunked: false)
        }
        h.origin.route("/a.svg") { _ in .init(headers: [("Content-Type", "image/svg+xml")], body: "<svg/>") }
        let (pack, bytes) = try await h.save("/page.html")
        #expect(h.paths(pack) == ["/page.html", "/a.svg"])
        let problem = try #require(h.problem(pack, "/big.png"))
        #expect(!problem.isFailure, "\(problem)")
        #expect(problem.reason.contains("Content-Length of \(length) bytes"), "\(problem)")
        #expect(problem.reason.contains("largest body the store keeps"), "\(problem)")
        #expect(problem.reason.contains("to save it"), "\(problem)")
        #expect(bytes < Int64(Self.mebibyte), "\(bytes) bytes received: the body was read")
    }

    @Test(
        "An image with no Content-Length (chunked, RFC 9112 §7.1) stops downloading once past the largest body the store keeps, listed saying why"
    )
    func undeclaredTooLargeStopsAtTheStoreLimit() async throws {
        let h = try LimitsHarness(maximumEntrySize: Int64(Self.mebibyte))
        h.origin.route("/page.html") { _ in
            .init(headers: [("Content-Type", "text/html")], body: #"<img src="/big.png"><img src="/a.svg">"#)
        }
        h.origin.route("/big.png") { _ in
            .init(headers: [("Content-Type", "image/png")], generatedLength: 64 << 20, seed: 6, chunked: true)
        }
        h.origin.route("/a.svg") { _ in .init(headers: [("Content-Type", "image/svg+xml")], body: "<svg/>") }
        let (pack, bytes) = try await h.save("/page.html")
        #expect(h.paths(pack) == ["/page.html", "/a.svg"])
        let problem = try #require(h.problem(pack, "/big.png"))
        #expect(!problem.isFailure && problem.reason.contains("largest body the store keeps"), "\(problem)")
        #expect(problem.reason.contains("to save it"), "\(problem)")
        #expect(bytes < 4 * Int64(Self.mebibyte), "\(bytes) bytes received: the transfer went on")
    }

    @Test("A refresh drops a stylesheet grown past what the store keeps, not holding it whole; the rest stays")
    func refreshStopsAtTheStoreLimit() async throws {
        let h = try LimitsHarness(maximumEntrySize: Int64(Self.mebibyte))
        let grown = Mutex(false)
        h.origin.route("/page.html") { _ in
            .init(headers: [("Content-Type", "text/html")], body: #"<link rel="stylesheet" href="/main.css">"#)
        }
        h.origin.route("/main.css") { _ in
            grown.withLock { $0 }
                ? .init(headers: [("Content-Type", "text/css")], generatedLength: 64 << 20, seed: 3, chunked: true)
                : .init(headers: [("Content-Type", "text/css")], body: "a{}")
        }
        let (saved, _) = try await h.save("/page.html")
        #expect(h.paths(saved) == ["/page.html", "/main.css"])
        grown.withLock { $0 = true }
        let refresh = try await h.cache.refreshPack(named: saved.name)
        #expect(h.paths(refresh.pack) == ["/page.html"])
        let problem = try #require(h.problem(refresh.pack, "/main.css"))
        #expect(!problem.isFailure && problem.reason.contains("largest body the store keeps"), "\(problem)")
    }

    @Test("A stylesheet over the read limit that the store keeps is stored, not read, and listed as such")
    func documentOverReadLimitIsStoredUnread() async throws {
        let h = try LimitsHarness()
        h.origin.route("/page.html") { _ in
            .init(headers: [("Content-Type", "text/html")], body: #"<link rel="stylesheet" href="/big.css">"#)
        }
        let size = PageSaver.Limits().readSize + Self.mebibyte
        // Valid CSS throughout, so a truncated read would find the image it names.
        let css = "b{}" + String(repeating: " ", count: size) + "a{background:url(/late.svg)}"
        h.origin.route("/big.css") { _ in .init(headers: [("Content-Type", "text/css")], body: css) }
        let (pack, _) = try await h.save("/page.html")
        #expect(h.paths(pack) == ["/page.html", "/big.css"])
        let problem = try #require(h.problem(pack, "/big.css"))
        #expect(!problem.isFailure && problem.reason.contains("limit for reading"), "\(problem)")
        #expect(h.origin.count("/late.svg") == 0)
    }

    @Test("An endless @import chain and endless nested frames stop at 8 deep, saying why")
    func endlessChainsStopAtNestingLimit() async throws {
        let h = try LimitsHarness()
        h.origin.route("/page.html") { _ in
            .init(
                headers: [("Content-Type", "text/html")],
                body: #"<link rel="stylesheet" href="/css/1.css"><iframe src="/frame/1"></iframe>"#)
        }
        // Each stylesheet imports a new one, each frame holds a new one: 40 before the chain ends.
        h.origin.setDefault { request in
            let parts = request.path.split(separator: "/")
            guard parts.count == 2, let n = Int(parts[1].prefix { $0.isNumber }), n <= 40 else {
                return .init(status: 404, body: "")
            }
            if parts[0] == "css" {
                return .init(headers: [("Content-Type", "text/css")], body: "@import url(/css/\(n + 1).css);")
            }
            return .init(headers: [("Content-Type", "text/html")], body: "<iframe src=\"/frame/\(n + 1)\"></iframe>")
        }
        let (pack, _) = try await h.save("/page.html")
        let nesting = PageSaver.Limits().nesting
        #expect(nesting == 8)
        let saved = h.paths(pack)
        #expect(saved == Set(["/page.html"] + (1...nesting).flatMap { ["/css/\($0).css", "/frame/\($0)"] }))
        let css = try #require(h.problem(pack, "/css/\(nesting + 1).css"))
        #expect(!css.isFailure && css.reason.contains("nested more than 8 deep in @import"), "\(css)")
        let frame = try #require(h.problem(pack, "/frame/\(nesting + 1)"))
        #expect(!frame.isFailure && frame.reason.contains("nested more than 8 deep in frames"), "\(frame)")
        #expect(h.origin.count("/css/\(nesting + 1).css") == 0 && h.origin.count("/frame/\(nesting + 1)") == 0)
    }

    @Test("A save fetches at most its limit of resources; those left out are listed once, with how many")
    func resourceLimitCutsTheSaveShort() async throws {
        let page = try #require(URL(string: "http://127.0.0.1:9/page.html"))
        let html = (1...20).map { "<img src=\"/\($0).png\">" }.joined()
        var limits = PageSaver.Limits()
        limits.resources = 5
        let fetches = Mutex(0)
        var saver = try PageSaver(page: page, options: SaveOptions(), limits: limits) { job, _ in
            fetches.withLock { $0 += 1 }
            var fetched = PageSaver.Fetched(job: job)
            if job.url == page {
                fetched.document = PageSaver.Document(Array(html.utf8), url: page, contentType: "text/html")
            }
            return fetched
        }
        let pack = try await saver.run { _ in }
        #expect(fetches.withLock { $0 } == 5)
        #expect(pack.problems.count == 1)
        let problem = try #require(pack.problems.first)
        #expect(problem.url == "http://127.0.0.1:9/5.png")
        #expect(problem.reason.contains("limit of 5 resources") && problem.reason.contains("this and 15 more"))
    }
}
