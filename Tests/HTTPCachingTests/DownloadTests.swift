import CacheSemantics
import CacheStorage
import CacheSystem
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `HTTPCache.download(_:to:)` against a loopback origin that cuts, stalls and changes files.
@Suite(.timeLimit(.minutes(10)))
struct DownloadTests {
    static let length: Int64 = 1 << 20
    static let cut = 100 * 1024

    /// A cache in memory, an origin and a directory for the downloaded files.
    final class Setup: Sendable {
        let harness: Harness
        let files = TemporaryDirectory("download-test")
        let attempts = Locked(0)

        /// - Parameter storing: Whether the cache may store responses; when not, the origin sees
        ///   exactly the requests the download makes (a storing cache completes an incomplete
        ///   stored response with a `Range` request of its own).
        init(storing: Bool = true, _ configure: @escaping (inout HTTPCache.Configuration) -> Void = { _ in }) throws {
            harness = try Harness(memoryOnly: true) { configuration in
                if !storing { configuration.willStore = { _ in .doNotStore } }
                configure(&configuration)
            }
        }

        var origin: LoopbackOrigin { harness.origin }
        var cache: HTTPCache { harness.cache }
        func destination(_ name: String = "file.bin") -> URL { URL(fileURLWithPath: files.path + "/" + name) }
        func request(_ path: String) -> URLRequest { URLRequest(url: origin.url(path)) }

        /// Routes `path` to `resource`, cutting the body after ``DownloadTests/cut`` bytes on
        /// the first `cuts` requests.
        func serve(_ path: String, _ resource: LoopbackOrigin.GeneratedResource, cuts: Int) {
            attempts.withLock { $0 = 0 }
            origin.route(path) { [attempts] request in
                let attempt = attempts.withLock { count -> Int in
                    count += 1
                    return count
                }
                return resource.response(to: request, cutAfterBodyBytes: attempt <= cuts ? DownloadTests.cut : nil)
            }
        }

        /// The index of the first byte of the file at `url` that differs from the resource.
        func mismatch(_ url: URL, _ resource: LoopbackOrigin.GeneratedResource) throws -> Int64? {
            try LoopbackOrigin.GeneratedBody.firstMismatch(
                inFileAt: url.path, seed: resource.seed, length: resource.length)
        }
    }

    /// Collects every progress value a download publishes.
    static func collect(_ download: Download) -> Task<[DownloadProgress], Never> {
        Task {
            var values: [DownloadProgress] = []
            for await value in download.progress { values.append(value) }
            return values
        }
    }

    static func exists(_ url: URL) -> Bool { FileManager.default.fileExists(atPath: url.path) }

    @Test(
        "Cut three times mid-body: one call resumes with Range and If-Range and the file is identical",
        arguments: [false, true])
    func resumesAfterCutsWithinOneCall(storing: Bool) async throws {
        let setup = try Setup(storing: storing)
        let resource = LoopbackOrigin.GeneratedResource(length: Self.length, seed: 11, etag: "\"v1\"")
        setup.serve("/file", resource, cuts: 3)
        let destination = setup.destination()
        let download = setup.cache.download(setup.request("/file"), to: destination)
        let progress = Self.collect(download)
        let result = try await download.result()

        #expect(result.totalBytes == Self.length)
        #expect(result.resumptions == 3)
        #expect(result.restarts == 0)
        #expect(result.attempts == 4)
        #expect(result.statusCode == 206)
        #expect(result.fields["Content-Range"] == "bytes \(3 * Self.cut)-\(Self.length - 1)/\(Self.length)")
        #expect(try setup.mismatch(destination, resource) == nil)
        #expect(!Self.exists(download.partialFileURL))
        #expect(!Self.exists(Download.recordFileURL(for: destination)))

        let requests = setup.origin.requests(to: "/file")
        #expect(requests.map { $0.header("Range") } == [nil, "bytes=102400-", "bytes=204800-", "bytes=307200-"])
        #expect(requests.map { $0.header("If-Range") } == [nil, "\"v1\"", "\"v1\"", "\"v1\""])

        let values = await progress.value
        #expect(values.count > 4)
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.receivedBytes <= $1.receivedBytes })
        #expect(values.last?.receivedBytes == Self.length)
        #expect(values.last?.expectedBytes == Self.length)
        #expect(values.last?.fractionCompleted == 1)
        #expect(values.contains { $0.bytesPerSecond > 0 })
    }

    @Test("An ETag that changes mid-way: the origin's 200 to the If-Range restarts from zero")
    func changedETagRestartsFromZero() async throws {
        let setup = try Setup()
        let old = LoopbackOrigin.GeneratedResource(length: Self.length, seed: 1, etag: "\"v1\"")
        let new = LoopbackOrigin.GeneratedResource(length: Self.length + 5, seed: 2, etag: "\"v2\"")
        let served = Locked(0)
        setup.origin.route("/file") { [served] request in
            let number = served.withLock { count -> Int in
                count += 1
                return count
            }
            // The file changes while the first response is being cut off.
            return number == 1
                ? old.response(to: request, cutAfterBodyBytes: DownloadTests.cut) : new.response(to: request)
        }
        let destination = setup.destination()
        let result = try await setup.cache.download(setup.request("/file"), to: destination).result()

        #expect(result.restarts == 1)
        #expect(result.resumptions == 0)
        #expect(result.statusCode == 200)
        #expect(result.totalBytes == Self.length + 5)
        #expect(try setup.mismatch(destination, new) == nil)
        let requests = setup.origin.requests(to: "/file")
        #expect(requests.count == 2)
        #expect(requests.last?.header("Range") == "bytes=102400-")
        #expect(requests.last?.header("If-Range") == "\"v1\"")
    }

    @Test("No validator: a resumption cannot be safe, so the download restarts from zero")
    func noValidatorRestartsFromZero() async throws {
        let setup = try Setup()
        let resource = LoopbackOrigin.GeneratedResource(length: Self.length, seed: 3)
        setup.serve("/file", resource, cuts: 1)
        let destination = setup.destination()
        let result = try await setup.cache.download(setup.request("/file"), to: destination).result()
        #expect(result.restarts == 1)
        #expect(result.resumptions == 0)
        #expect(try setup.mismatch(destination, resource) == nil)
        let requests = setup.origin.requests(to: "/file")
        #expect(requests.count == 2)
        #expect(requests.allSatisfy { $0.header("Range") == nil && $0.header("If-Range") == nil })
    }

    /// RFC 9110 §13.1.5: a weak ETag is never sent, and a date only when there is no entity tag
    /// and it is strong (at least a second before `Date`).
    @Test(
        "The If-Range validator",
        arguments: [
            (etag: "W/\"weak\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", sent: nil),
            (etag: nil, lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", sent: "Sun, 06 Nov 1994 08:49:37 GMT"),
            (etag: "\"strong\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT", sent: "\"strong\""),
            (etag: nil, lastModified: "now", sent: nil),
        ] as [(etag: String?, lastModified: String, sent: String?)])
    func validatorChoice(etag: String?, lastModified: String, sent: String?) async throws {
        let setup = try Setup()
        // "now": the same second as Date, so the date is a weak validator.
        let date = HTTPDate.format(Timestamp(secondsSince1970: Date().timeIntervalSince1970.rounded(.down)))
        let modified = lastModified == "now" ? date : lastModified
        let resource = LoopbackOrigin.GeneratedResource(
            length: Self.length, seed: 4, etag: etag, lastModified: modified, headers: [("Date", date)])
        setup.serve("/file", resource, cuts: 1)
        let destination = setup.destination()
        let result = try await setup.cache.download(setup.request("/file"), to: destination).result()
        #expect(try setup.mismatch(destination, resource) == nil)
        let retry = try #require(setup.origin.requests(to: "/file").last)
        #expect(retry.header("If-Range") == sent)
        #expect(retry.header("Range") == (sent == nil ? nil : "bytes=102400-"))
        #expect(result.restarts == (sent == nil ? 1 : 0))
    }

    @Test("Cancelled mid-body, then started again: the new call resumes from the partial file")
    func cancelledDownloadResumesInANewCall() async throws {
        let setup = try Setup()
        let resource = LoopbackOrigin.GeneratedResource(length: Self.length, seed: 5, etag: "\"c\"")
        let pauseAt = 300 * 1024
        setup.origin.route("/file") { request in resource.response(to: request, pauseAfterBodyBytes: pauseAt) }
        let destination = setup.destination()
        let first = setup.cache.download(setup.request("/file"), to: destination)
        for await value in first.progress where value.receivedBytes >= Int64(pauseAt) {
            first.cancel()
        }
        await #expect(throws: CancellationError.self) { try await first.result() }
        let partial = try FileManager.default.attributesOfItem(atPath: first.partialFileURL.path)
        #expect((partial[.size] as? NSNumber)?.int64Value == Int64(pauseAt))
        #expect(Self.exists(Download.recordFileURL(for: destination)))
        #expect(!Self.exists(destination))

        setup.origin.route("/file") { request in resource.response(to: request) }
        let second = setup.cache.download(setup.request("/file"), to: destination)
        let progress = Self.collect(second)
        let result = try await second.result()
        #expect(result.resumptions == 1)
        #expect(result.attempts == 1)
        #expect(try setup.mismatch(destination, resource) == nil)
        let last = try #require(setup.origin.requests(to: "/file").last)
        #expect(last.header("Range") == "bytes=\(pauseAt)-")
        #expect(last.header("If-Range") == "\"c\"")
        let values = await progress.value
        #expect(values.first?.receivedBytes == Int64(pauseAt))
        #expect(zip(values, values.dropFirst()).allSatisfy { $0.receivedBytes <= $1.receivedBytes })
        #expect(values.last?.receivedBytes == Self.length)
    }

    @Test("A partial file that is already complete: the origin's 416 finishes it")
    func completePartialFinishesOn416() async throws {
        let setup = try Setup()
        let resource = LoopbackOrigin.GeneratedResource(length: 4096, seed: 6, etag: "\"x\"")
        setup.origin.route("/file") { request in resource.response(to: request) }
        let destination = setup.destination()
        // What a process killed after the last byte, before the rename, leaves.
        try Data(resource.bytes).write(to: Download.partialFileURL(for: destination))
        try Data(
            #"{"version":1,"url":"\#(setup.origin.url("/file").absoluteString)","etag":"\"x\"","validator":"\"x\""}"#
                .utf8
        )
        .write(to: Download.recordFileURL(for: destination))
        let result = try await setup.cache.download(setup.request("/file"), to: destination).result()
        #expect(result.statusCode == 416)
        #expect(result.resumptions == 1)
        #expect(result.totalBytes == 4096)
        #expect(try setup.mismatch(destination, resource) == nil)
        #expect(setup.origin.requests(to: "/file").map { $0.header("Range") } == ["bytes=4096-"])
    }

    @Test(
        "A 206 that does not start where asked is never spliced: the download restarts from zero",
        arguments: [false, true])
    func inconsistentPartialResponseRestarts(storing: Bool) async throws {
        let setup = try Setup(storing: storing)
        let resource = LoopbackOrigin.GeneratedResource(length: Self.length, seed: 7, etag: "\"r\"")
        let served = Locked(0)
        setup.origin.route("/file") { [served] request in
            let number = served.withLock { count -> Int in
                count += 1
                return count
            }
            if number == 1 { return resource.response(to: request, cutAfterBodyBytes: DownloadTests.cut) }
            if number == 2 {
                // Asked for bytes=102400-, answers from byte 1000: a broken server or proxy.
                var shifted = request
                shifted.headers = [("Range", "bytes=1000-")]
                return resource.response(to: shifted)
            }
            return resource.response(to: request)
        }
        let destination = setup.destination()
        let result = try await setup.cache.download(setup.request("/file"), to: destination).result()
        #expect(result.restarts == 1)
        #expect(result.attempts == 3)
        #expect(result.statusCode == 200)
        #expect(try setup.mismatch(destination, resource) == nil)
        // The restart asks for the whole file; a storing cache kept the first 102,400 bytes the
        // network cut off (RFC 9111 §3.3) and asks the origin for the rest itself.
        let requests = setup.origin.requests(to: "/file")
        #expect(requests.map { $0.header("Range") } == [nil, "bytes=102400-", storing ? "bytes=102400-" : nil])
        #expect(requests.map { $0.header("If-Range") } == [nil, "\"r\"", storing ? "\"r\"" : nil])
    }

    @Test("A partial file recorded for another URL is not resumed")
    func partialForAnotherURLStartsOver() async throws {
        let setup = try Setup()
        let resource = LoopbackOrigin.GeneratedResource(length: 8192, seed: 8, etag: "\"u\"")
        setup.origin.route("/file") { request in resource.response(to: request) }
        let destination = setup.destination()
        try Data(repeating: 0xAA, count: 5000).write(to: Download.partialFileURL(for: destination))
        try Data(#"{"version":1,"url":"http://127.0.0.1:1/other","etag":"\"u\"","validator":"\"u\""}"#.utf8)
            .write(to: Download.recordFileURL(for: destination))
        let result = try await setup.cache.download(setup.request("/file"), to: destination).result()
        #expect(result.statusCode == 200)
        #expect(try setup.mismatch(destination, resource) == nil)
        #expect(setup.origin.requests(to: "/file").map { $0.header("Range") } == [nil])
    }

    @Test("An origin that always cuts before the first byte: the download gives up after the retries")
    func givesUpAfterRetries() async throws {
        let setup = try Setup()
        let resource = LoopbackOrigin.GeneratedResource(length: 4096, seed: 9, etag: "\"g\"")
        setup.origin.route("/file") { request in resource.response(to: request, cutAfterBodyBytes: 0) }
        let destination = setup.destination()
        let download = setup.cache.download(setup.request("/file"), to: destination, retries: 2)
        let error = await #expect(throws: DownloadError.self) { try await download.result() }
        #expect(error?.kind == .interrupted)
        #expect(error?.message.contains("3 attempts in a row added no byte") == true)
        #expect(setup.origin.count("/file") == 3)
        #expect(!Self.exists(destination))
        // Nothing arrived: no empty partial file or record is left behind.
        #expect(!Self.exists(download.partialFileURL))
        #expect(!Self.exists(Download.recordFileURL(for: destination)))
    }

    @Test("An error status is not written to the file")
    func errorStatusIsAnError() async throws {
        let setup = try Setup()
        let destination = setup.destination()
        let error = await #expect(throws: DownloadError.self) {
            try await setup.cache.download(setup.request("/missing"), to: destination).result()
        }
        #expect(error?.kind == .unexpectedStatus)
        #expect(error?.statusCode == 404)
        #expect(error?.message.contains("answered 404") == true)
        #expect(!Self.exists(destination))
        #expect(!Self.exists(Download.partialFileURL(for: destination)))
    }

    @Test("Requests a download cannot make are refused before anything is sent")
    func invalidRequestsAreRefused() async throws {
        let setup = try Setup()
        var ranged = setup.request("/file")
        ranged.setValue("bytes=0-10", forHTTPHeaderField: "Range")
        var post = setup.request("/file")
        post.httpMethod = "POST"
        let cases: [(URLRequest, URL, String)] = [
            (ranged, setup.destination(), "its own Range field"),
            (post, setup.destination(), "not POST"),
            (setup.request("/file"), URL(string: "http://127.0.0.1/x")!, "not a file URL"),
            (URLRequest(url: URL(fileURLWithPath: "/etc/hostname")), setup.destination(), "only http and https"),
        ]
        for (request, destination, text) in cases {
            let error = await #expect(throws: DownloadError.self) {
                try await setup.cache.download(request, to: destination).result()
            }
            #expect(error?.kind == .invalidRequest)
            #expect(error?.message.contains(text) == true, "\(error?.message ?? "")")
        }
        #expect(setup.origin.count("/file") == 0)
    }

    @Test("A missing directory is a clear error")
    func missingDirectory() async throws {
        let setup = try Setup()
        let destination = URL(fileURLWithPath: setup.files.path + "/no/such/dir/file")
        let error = await #expect(throws: DownloadError.self) {
            try await setup.cache.download(setup.request("/file"), to: destination).result()
        }
        #expect(error?.kind == .file)
        #expect(error?.message.contains("check that the directory exists") == true)
    }

    @Test("A fresh stored response answers the download from the cache")
    func freshStoredResponseIsAHit() async throws {
        let setup = try Setup()
        let resource = LoopbackOrigin.GeneratedResource(
            length: 64 * 1024, seed: 10, etag: "\"h\"", headers: [("Cache-Control", "max-age=600")])
        setup.origin.route("/file") { request in resource.response(to: request) }
        let first = try await setup.cache.download(setup.request("/file"), to: setup.destination("a")).result()
        #expect(first.outcome == .miss)
        let second = try await setup.cache.download(setup.request("/file"), to: setup.destination("b")).result()
        #expect(second.outcome == .hit)
        #expect(second.totalBytes == 64 * 1024)
        #expect(try setup.mismatch(setup.destination("b"), resource) == nil)
        #expect(setup.origin.count("/file") == 1)
    }

    @Test("A resumption the cache can answer from a complete stored response gets its 206 without the origin")
    func resumptionAnsweredFromTheCache() async throws {
        let setup = try Setup()
        let resource = LoopbackOrigin.GeneratedResource(
            length: 64 * 1024, seed: 13, etag: "\"s\"", headers: [("Cache-Control", "max-age=600")])
        setup.origin.route("/file") { request in resource.response(to: request) }
        _ = try await setup.cache.download(setup.request("/file"), to: setup.destination("a")).result()
        let destination = setup.destination("b")
        try Data(resource.bytes.prefix(1000)).write(to: Download.partialFileURL(for: destination))
        let record =
            #"{"version":1,"url":"\#(setup.origin.url("/file").absoluteString)","etag":"\"s\"","validator":"\"s\""}"#
        try Data(record.utf8).write(to: Download.recordFileURL(for: destination))
        let result = try await setup.cache.download(setup.request("/file"), to: destination).result()
        #expect(result.statusCode == 206)
        #expect(result.outcome == .hit)
        #expect(result.resumptions == 1)
        #expect(result.transferredBytes == 64 * 1024 - 1000)
        #expect(try setup.mismatch(destination, resource) == nil)
        #expect(setup.origin.count("/file") == 1)
    }

    @Test("A stored response shorter than its Content-Length is not trusted: the download reloads it")
    func truncatedStoredResponseIsReloaded() async throws {
        // The hook stores a Content-Length larger than the body: what a damaged entry looks like.
        let setup = try Setup { configuration in
            configuration.willStore = { candidate in
                let fields = candidate.fields.filter { $0.name.lowercased() != "content-length" }
                return StoreChoice(.store, fields: fields + [("Content-Length", "999999")])
            }
        }
        let resource = LoopbackOrigin.GeneratedResource(
            length: 64 * 1024, seed: 14, etag: "\"t\"", headers: [("Cache-Control", "max-age=600")])
        setup.origin.route("/file") { request in resource.response(to: request) }
        _ = try await setup.cache.download(setup.request("/file"), to: setup.destination("a")).result()
        let result = try await setup.cache.download(setup.request("/file"), to: setup.destination("b")).result()
        // The cache itself finds the stored Content-Length at odds with the stored body: it drops
        // the entry and fetches the whole, before the download ever sees the damaged response.
        #expect(result.attempts == 1)
        #expect(result.outcome == .miss)
        #expect(result.totalBytes == 64 * 1024)
        #expect(try setup.mismatch(setup.destination("b"), resource) == nil)
        #expect(setup.origin.count("/file") == 2)
        #expect(setup.origin.requests(to: "/file").allSatisfy { $0.header("Range") == nil })
    }

    @Test("A cancelled download leaves nothing truncated behind: a new download of the URL gets all of it")
    func cancelledDownloadLeavesNoTruncatedEntry() async throws {
        let setup = try Setup()
        let resource = LoopbackOrigin.GeneratedResource(
            length: Self.length, seed: 15, etag: "\"k\"", headers: [("Cache-Control", "max-age=600")])
        setup.origin.route("/file") { request in resource.response(to: request, pauseAfterBodyBytes: 200_000) }
        let first = setup.cache.download(setup.request("/file"), to: setup.destination("a"))
        for await value in first.progress where value.receivedBytes >= 200_000 { first.cancel() }
        await #expect(throws: CancellationError.self) { try await first.result() }
        setup.origin.route("/file") { request in resource.response(to: request) }
        let result = try await setup.cache.download(setup.request("/file"), to: setup.destination("b")).result()
        #expect(result.totalBytes == Self.length)
        #expect(try setup.mismatch(setup.destination("b"), resource) == nil)
    }

    @Test("Two downloads to one destination at once: the second is refused as busy")
    func concurrentDownloadsToOneDestination() async throws {
        let setup = try Setup()
        let resource = LoopbackOrigin.GeneratedResource(length: Self.length, seed: 12, etag: "\"b\"")
        setup.origin.route("/file") { request in resource.response(to: request, pauseAfterBodyBytes: 1000) }
        let destination = setup.destination()
        let first = setup.cache.download(setup.request("/file"), to: destination)
        for await value in first.progress where value.receivedBytes >= 1000 { break }
        let error = await #expect(throws: DownloadError.self) {
            try await setup.cache.download(setup.request("/file"), to: destination).result()
        }
        #expect(error?.kind == .busy)
        first.cancel()
        _ = try? await first.result()
    }
}

/// The generated bodies and range answers of `LoopbackOrigin` the download tests rely on, over
/// a real URLSession.
@Suite("LoopbackOrigin generated resources", .timeLimit(.minutes(10)))
struct GeneratedResourceTests {
    static let resource = LoopbackOrigin.GeneratedResource(
        length: 300_000, seed: 42, etag: "\"g1\"", lastModified: "Sun, 06 Nov 1994 08:49:37 GMT")

    /// Sends a GET for `/r` with `headers` and returns the status, fields and body.
    static func fetch(
        _ origin: LoopbackOrigin, _ headers: [String: String] = [:]
    ) async throws -> (status: Int, fields: [AnyHashable: Any], body: [UInt8]) {
        var request = URLRequest(url: origin.url("/r"))
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let response = try await URLSessionTransport().send(request)
        var body: [UInt8] = []
        for try await chunk in response.body { body += chunk }
        return (response.response.statusCode, response.response.allHeaderFields, body)
    }

    static func origin(chunked: Bool = false) throws -> LoopbackOrigin {
        let origin = try LoopbackOrigin()
        origin.route("/r") { request in
            var response = resource.response(to: request)
            response.chunked = chunked
            return response
        }
        return origin
    }

    @Test("byte(at:), fill and bytes agree at any offset, and differ between seeds")
    func generatorIsConsistent() {
        let whole = LoopbackOrigin.GeneratedBody.bytes(seed: 9, count: 1000)
        for start in [0, 1, 7, 8, 13, 500] {
            let part = LoopbackOrigin.GeneratedBody.bytes(seed: 9, from: Int64(start), count: 300)
            #expect(part == Array(whole[start..<start + 300]), "from \(start)")
        }
        #expect((0..<1000).allSatisfy { LoopbackOrigin.GeneratedBody.byte(at: Int64($0), seed: 9) == whole[$0] })
        #expect(LoopbackOrigin.GeneratedBody.bytes(seed: 10, count: 1000) != whole)
        #expect(Set(whole).count > 200)  // not a short repeating pattern
        #expect(LoopbackOrigin.GeneratedBody(seed: 9, offset: 100, length: 50).bytes == Array(whole[100..<150]))
    }

    @Test("firstMismatch finds a changed byte, a short file and a long file")
    func firstMismatch() throws {
        let directory = TemporaryDirectory("generated-test")
        let path = directory.path + "/f"
        var bytes = LoopbackOrigin.GeneratedBody.bytes(seed: 3, count: 3_000_000)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 3, length: 3_000_000) == nil)
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 4, length: 3_000_000) == 0)
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 3, length: 3_000_001) == 3_000_000)
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 3, length: 2_000_000) == 2_000_000)
        bytes[2_500_123] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: path, seed: 3, length: 3_000_000) == 2_500_123)
        #expect(throws: LoopbackOrigin.GeneratedBody.FileError.self) {
            try LoopbackOrigin.GeneratedBody.firstMismatch(inFileAt: directory.path + "/none", seed: 3, length: 1)
        }
    }

    @Test("The whole resource, with Content-Length or chunked")
    func wholeResource() async throws {
        for chunked in [false, true] {
            let origin = try Self.origin(chunked: chunked)
            let (status, fields, body) = try await Self.fetch(origin)
            #expect(status == 200)
            #expect(body == Self.resource.bytes)
            #expect(fields["Accept-Ranges"] as? String == "bytes")
            #expect(fields["Etag"] as? String ?? fields["ETag"] as? String == "\"g1\"")
            #expect((fields["Content-Length"] as? String) == (chunked ? nil : "300000"))
            origin.stop()
        }
    }

    @Test(
        "Range answers: 206 with Content-Range, 416, and the whole 200 when If-Range does not match",
        arguments: [
            (range: "bytes=1000-", ifRange: nil, status: 206, first: 1000, last: 299_999),
            (range: "bytes=10-19", ifRange: nil, status: 206, first: 10, last: 19),
            (range: "bytes=-5", ifRange: nil, status: 206, first: 299_995, last: 299_999),
            (range: "bytes=299999-400000", ifRange: "\"g1\"", status: 206, first: 299_999, last: 299_999),
            (range: "bytes=5-", ifRange: "Sun, 06 Nov 1994 08:49:37 GMT", status: 206, first: 5, last: 299_999),
            (range: "bytes=5-", ifRange: "\"g0\"", status: 200, first: 0, last: 299_999),
            (range: "bytes=5-", ifRange: "W/\"g1\"", status: 200, first: 0, last: 299_999),
            (range: "bytes=0-1, 5-6", ifRange: nil, status: 200, first: 0, last: 299_999),
            (range: "items=0-1", ifRange: nil, status: 200, first: 0, last: 299_999),
            (range: "bytes=300000-", ifRange: nil, status: 416, first: 0, last: -1),
        ] as [(range: String, ifRange: String?, status: Int, first: Int, last: Int)])
    func rangeAnswers(range: String, ifRange: String?, status: Int, first: Int, last: Int) async throws {
        let origin = try Self.origin()
        var headers = ["Range": range]
        if let ifRange { headers["If-Range"] = ifRange }
        let (received, fields, body) = try await Self.fetch(origin, headers)
        #expect(received == status)
        switch status {
        case 206:
            #expect(fields["Content-Range"] as? String == "bytes \(first)-\(last)/300000")
            #expect(body == Array(Self.resource.bytes[first...last]))
        case 416:
            #expect(fields["Content-Range"] as? String == "bytes */300000")
        default:
            #expect(fields["Content-Range"] == nil)
            #expect(body == Self.resource.bytes)
        }
        origin.stop()
    }

    @Test("pauseAfterBodyBytes sends that much, then nothing until the connection goes away", arguments: [true, false])
    func pauseStallsTheBody(generated: Bool) async throws {
        let origin = try LoopbackOrigin()
        origin.route("/p") { _ in
            if generated { return .init(generatedLength: 100_000, seed: 1, pauseAfterBodyBytes: 30_000) }
            var response = LoopbackOrigin.Response(body: LoopbackOrigin.GeneratedBody.bytes(seed: 1, count: 100_000))
            response.pauseAfterBodyBytes = 30_000
            return response
        }
        let response = try await URLSessionTransport().send(URLRequest(url: origin.url("/p")))
        #expect(response.response.expectedContentLength == 100_000)
        let received = Locked<[UInt8]>([])
        let reader = Task {
            for try await chunk in response.body { received.withLock { $0 += chunk } }
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while received.withLock({ $0.count }) < 30_000, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(received.withLock { $0 } == LoopbackOrigin.GeneratedBody.bytes(seed: 1, count: 30_000))
        origin.stop()  // shuts the stalled connection down: the body ends with an error
        let result = await reader.result
        #expect(throws: (any Error).self) { try result.get() }
    }
}
