import CacheExchange
import CacheSemantics
import CacheSystem
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// RFC 9530 digests checked as bodies are stored, against a loopback origin; the digests are
/// made by python3's hashlib, not by the code under test.
@Suite(.timeLimit(.minutes(5)))
struct DigestTests {
    static let body = Array("a body whose digest the origin states".utf8)

    /// Routes `path` to ``body`` with `headers` (a lifetime added), counting the requests.
    static func serve(_ harness: Harness, _ path: String, _ headers: [(String, String)], chunked: Bool = false) {
        harness.origin.route(path) { _ in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600")] + headers, body: Self.body, chunked: chunked)
        }
    }

    /// The `sha-256` members of `first` and of `second`.
    static func sha256(_ first: [UInt8], _ second: String) async throws -> (String, String) {
        (
            try await CodedBodies.digestMember("sha-256", first),
            try await CodedBodies.digestMember("sha-256", Array(second.utf8))
        )
    }

    static func requests(_ harness: Harness, _ path: String) -> Int {
        harness.origin.requests.filter { $0.path == path }.count
    }

    /// What the stored entry of `path` says of its digests (`explain` and `show` print it).
    static func storedNote(_ harness: Harness, _ path: String) throws -> String? {
        try #require(try harness.cache.entries(for: harness.origin.url(path)).first?.facts).integrity
    }

    @Test(
        "RFC 9530 §2, §3: a body matching its Content-Digest or Repr-Digest is stored and served from the store",
        arguments: [("Content-Digest", "sha-256"), ("Repr-Digest", "sha-512"), ("Content-Digest", "sha-512")])
    func matchingDigestIsStored(field: String, algorithm: String) async throws {
        let harness = try Harness()
        Self.serve(harness, "/d", [(field, try await CodedBodies.digestMember(algorithm, Self.body))])
        let first = try await harness.get("/d")
        let second = try await harness.get("/d")
        #expect(first.data == Data(Self.body) && second.data == Data(Self.body))
        #expect(second.outcome == .hit)
        #expect(Self.requests(harness, "/d") == 1)
        #expect(try Self.storedNote(harness, "/d") == "\(algorithm) verified when stored (\(field))")
    }

    @Test("RFC 9530 §2: a chunked body is checked as it streams")
    func chunkedBodyIsChecked() async throws {
        let harness = try Harness()
        let member = try await CodedBodies.digestMember("sha-256", Self.body)
        Self.serve(harness, "/good", [("Content-Digest", member)], chunked: true)
        _ = try await harness.get("/good")
        #expect(try await harness.get("/good").outcome == .hit)
        let other = try await CodedBodies.digestMember("sha-256", Self.body + [0])
        Self.serve(harness, "/bad", [("Content-Digest", other)], chunked: true)
        await #expect(throws: DigestMismatch.self) { try await harness.get("/bad") }
    }

    @Test("RFC 9530 §2: a gzip body the transport decodes is not checked against the digest of the coded bytes")
    func decodedBodyIsNotCheckedAgainstCodedDigest() async throws {
        let harness = try Harness()
        let coded = try await CodedBodies.python("gzip.compress(data)", Self.body)
        let member = try await CodedBodies.digestMember("sha-256", coded)
        harness.origin.route("/z") { _ in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600"), ("Content-Encoding", "gzip"), ("Content-Digest", member)],
                body: coded)
        }
        #expect(try await harness.get("/z").data == Data(Self.body))
        #expect(try await harness.get("/z").outcome == .hit)
        #expect(
            try Self.storedNote(harness, "/z")
                == "not checked: the body was stored decoded (gzip), and the digests describe the coded bytes")
    }

    @Test("RFC 9530 §2: a body that does not match its Content-Digest is not stored, and the call throws")
    func mismatchIsNotStoredAndThrows() async throws {
        let harness = try Harness()
        let wrong = try await CodedBodies.digestMember("sha-256", Array("another body".utf8))
        Self.serve(harness, "/d", [("Content-Digest", wrong)])
        let error = await #expect(throws: DigestMismatch.self) { try await harness.get("/d") }
        #expect(error?.url == harness.origin.url("/d").absoluteString)
        #expect(error?.field == "Content-Digest" && error?.algorithm == "sha-256")
        #expect(error.map { wrong.contains($0.expected) } == true)
        #expect(try harness.cache.entries(for: harness.origin.url("/d")).isEmpty)
        // Nothing stored: the next request goes to the origin again.
        await #expect(throws: DigestMismatch.self) { try await harness.get("/d") }
        #expect(Self.requests(harness, "/d") == 2)
    }

    @Test("RFC 9530 §3: a mismatch leaves the response stored earlier in place")
    func mismatchKeepsTheStoredResponse() async throws {
        let harness = try Harness()
        let (good, bad) = try await Self.sha256(Self.body, "another body")
        let digest = Locked(good)
        harness.origin.route("/d") { _ in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600"), ("Repr-Digest", digest.withLock { $0 })], body: Self.body)
        }
        _ = try await harness.get("/d")
        digest.withLock { $0 = bad }
        await #expect(throws: DigestMismatch.self) {
            try await harness.get("/d", policy: .reloadIgnoringLocalCacheData)
        }
        let served = try await harness.get("/d")
        #expect(served.outcome == .hit && served.data == Data(Self.body))
    }

    @Test(
        "RFC 9530 §2, §3: malformed digest fields and unknown algorithms are ignored, with the reason kept",
        arguments: [
            ("Content-Digest", "sha-256=:not base64!:", "content-digest ignored: not a structured dictionary"),
            ("Content-Digest", "sha-256=:AAAA:", "content-digest sha-256 ignored: 3 bytes, not the 32 of sha-256"),
            ("Repr-Digest", "sha-256=:QUJD=:", "repr-digest sha-256 ignored: bad base64"),
            ("Repr-Digest", "sha-256=\"text\"", "repr-digest sha-256 ignored: its value is not a byte sequence"),
        ])
    func malformedFieldsAreIgnored(field: String, value: String, note: String) async throws {
        let harness = try Harness()
        Self.serve(harness, "/d", [(field, value), ("Content-Digest", "md5=:AAAA:, unixsum=:AA==:")])
        _ = try await harness.get("/d")
        #expect(try await harness.get("/d").outcome == .hit)
        #expect(try Self.storedNote(harness, "/d")?.contains(note) == true)
    }

    @Test("RFC 9530 §3: a 206's Repr-Digest covers the whole representation, so a part is not rejected")
    func partialContentIsNotRejected() async throws {
        let harness = try Harness()
        var made = LoopbackOrigin.GeneratedResource(length: 4096, seed: 3, etag: "\"r1\"")
        let whole = try await CodedBodies.digestMember("sha-256", made.bytes)
        made.headers = [("Cache-Control", "max-age=600"), ("Repr-Digest", whole)]
        let resource = made
        harness.origin.route("/r") { resource.response(to: $0) }
        let part = try await harness.get("/r", headers: ["Range": "bytes=0-99"])
        #expect(part.response.statusCode == 206 && part.data.count == 100)
        let note = try #require(try harness.cache.entries(for: harness.origin.url("/r")).first?.facts?.integrity)
        #expect(note.contains("repr-digest not checked"))
    }

    @Test("RFC 9111 §4.3.4, RFC 9530 §3: a 304 whose Repr-Digest differs does not freshen the stored body")
    func notModifiedWithAnotherReprDigestIsNotUsed() async throws {
        let harness = try Harness()
        let (first, second) = try await Self.sha256(Self.body, "the new body")
        let digest = Locked(first)
        harness.origin.route("/v") { request in
            let current = digest.withLock { $0 }
            let body = current == first ? Self.body : Array("the new body".utf8)
            let fields = [("Cache-Control", "max-age=0"), ("ETag", "\"same\""), ("Repr-Digest", current)]
            if request.header("If-None-Match") == "\"same\"" {
                return LoopbackOrigin.Response(status: 304, headers: fields)
            }
            return LoopbackOrigin.Response(headers: fields, body: body)
        }
        _ = try await harness.get("/v")
        digest.withLock { $0 = second }
        let answer = try await harness.get("/v")
        #expect(answer.text == "the new body")
        let sent = harness.origin.requests.filter { $0.path == "/v" }
        #expect(sent.count == 3)
        #expect(sent.last?.header("If-None-Match") == nil)
    }
}

/// A resumed download checks the whole file against the representation's `Repr-Digest`.
@Suite(.timeLimit(.minutes(5)))
struct ResumedDigestTests {
    /// A file whose first request is cut after 100 KiB, with `digest` as its `Repr-Digest`, in
    /// front of a cache that stores nothing (the origin sees the download's own requests).
    static func setUp(
        storing: Bool = false, digest: (LoopbackOrigin.GeneratedResource) async throws -> String
    ) async throws -> (DownloadTests.Setup, LoopbackOrigin.GeneratedResource) {
        let setup = try DownloadTests.Setup(storing: storing)
        var resource = LoopbackOrigin.GeneratedResource(length: 512 * 1024, seed: 21, etag: "\"f1\"")
        resource.headers = [("Repr-Digest", try await digest(resource))]
        setup.serve("/file", resource, cuts: 1)
        return (setup, resource)
    }

    @Test("RFC 9111 §3.4, RFC 9530 §3: a stored part completed by a 206 is checked whole against its Repr-Digest")
    func completedPartIsCheckedWhole() async throws {
        let (setup, resource) = try await Self.setUp(storing: true) {
            try await CodedBodies.digestMember("sha-256", $0.bytes)
        }
        let destination = setup.destination()
        _ = try await setup.cache.download(setup.request("/file"), to: destination).result()
        #expect(try setup.mismatch(destination, resource) == nil)
        let stored = try setup.cache.entries(for: setup.origin.url("/file")).filter { $0.bodySize == resource.length }
        #expect(stored.first?.facts?.integrity == "sha-256 verified when stored (Repr-Digest)", "\(stored)")
    }

    @Test("RFC 9530 §3, §4: a resumption sends Want-Repr-Digest and the whole file matches the Repr-Digest")
    func resumedFileMatches() async throws {
        let (setup, resource) = try await Self.setUp { try await CodedBodies.digestMember("sha-256", $0.bytes) }
        let destination = setup.destination()
        let result = try await setup.cache.download(setup.request("/file"), to: destination).result()
        #expect(result.resumptions == 1)
        #expect(try setup.mismatch(destination, resource) == nil)
        let sent = setup.origin.requests(to: "/file")
        #expect(sent.count == 2)
        #expect(sent.first?.header("Want-Repr-Digest") == nil)
        #expect(sent.last?.header("Range") == "bytes=\(DownloadTests.cut)-")
        #expect(sent.last?.header("Want-Repr-Digest") == "sha-256=10, sha-512=3")
    }

    @Test("RFC 9530 §3: a resumed file that does not match its Repr-Digest is discarded and the download fails")
    func resumedFileMismatchIsDiscarded() async throws {
        let (setup, _) = try await Self.setUp { _ in
            try await CodedBodies.digestMember("sha-512", Array("another file".utf8))
        }
        let destination = setup.destination()
        let download = setup.cache.download(setup.request("/file"), to: destination)
        let error = await #expect(throws: DownloadError.self) { try await download.result() }
        #expect(error?.kind == .digestMismatch)
        #expect(error?.message.contains("Repr-Digest (sha-512: expected") == true)
        #expect(error?.message.contains("were discarded") == true)
        #expect(!DownloadTests.exists(destination))
        #expect(!DownloadTests.exists(download.partialFileURL))
    }
}
