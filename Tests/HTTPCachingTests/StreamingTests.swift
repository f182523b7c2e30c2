import CacheSemantics
import CacheTestSupport
import Foundation
import HTTPCaching
import LoopbackOrigin
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Streaming bodies (HTTPCache.bytes(for:))")
struct StreamingTests {
    static let large = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }

    /// A large body streams from the origin while it is stored, then streams from the store
    /// in verified blocks; both are byte-identical.
    @Test func largeBodyStreamsAndIsStored() async throws {
        let h = try Harness()
        h.origin.route("/big") { _ in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: Self.large)
        }
        let (missHead, missBody) = try await h.cache.bytes(for: h.request("/big"))
        #expect(missHead.outcome == .miss)
        var chunks = 0
        var received = Data()
        for try await chunk in missBody {
            chunks += 1
            received.append(chunk)
        }
        #expect(received == Data(Self.large))
        let (hitHead, hitBody) = try await h.cache.bytes(for: h.request("/big"))
        #expect(hitHead.outcome == .hit && hitHead.expectedLength == Int64(Self.large.count))
        var hitChunks = 0
        var stored = Data()
        for try await chunk in hitBody {
            hitChunks += 1
            stored.append(chunk)
        }
        #expect(stored == Data(Self.large))
        #expect(hitChunks > 1)
        #expect(h.origin.count("/big") == 1)
    }

    /// A body cut off by the origin is an error for the caller and is never stored.
    @Test("A truncated body is not stored (RFC 9111 §3.3)")
    func truncatedBodyNotStored() async throws {
        let h = try Harness()
        h.origin.route("/cut") { _ in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=60")], body: Self.large, cutAfterBodyBytes: 100_000)
        }
        await #expect(throws: (any Error).self) { _ = try await h.cache.data(for: h.request("/cut")) }
        #expect(try h.cache.entries().isEmpty)
    }

    /// A body the caller stops reading is not stored.
    @Test func abandonedBodyNotStored() async throws {
        let h = try Harness()
        h.origin.route("/half") { _ in
            LoopbackOrigin.Response(headers: [("Cache-Control", "max-age=60")], body: Self.large)
        }
        do {
            let (_, body) = try await h.cache.bytes(for: h.request("/half"))
            for try await _ in body { break }
        }
        #expect(try h.cache.entries().isEmpty)
    }
}

@Suite("Damaged stores")
struct DamagedStoreTests {
    /// A body file damaged on disk is never served: the entry is dropped and the response
    /// fetched again.
    @Test(arguments: [false, true])
    func corruptedBodyIsRefetched(streaming: Bool) async throws {
        let h = try Harness()
        let body = String(repeating: "0123456789", count: 10_000)
        h.serve("/damaged", [("Cache-Control", "max-age=600")], body: body)
        _ = try await h.get("/damaged")
        let bodies = h.directory.path + "/bodies"
        let files = try FileManager.default.contentsOfDirectory(atPath: bodies).filter { !$0.hasSuffix(".tmp") }
        #expect(files.count == 1)
        let handle = try #require(FileHandle(forUpdatingAtPath: bodies + "/" + files[0]))
        handle.seek(toFileOffset: 5_000)
        handle.write(Data("XXXX".utf8))
        handle.closeFile()
        // A new cache on the directory: its memory tier does not hold the body.
        let other = try Harness(directory: h.directory, clock: h.clock)
        let request = URLRequest(url: h.origin.url("/damaged"))
        if streaming {
            let (head, stream) = try await other.cache.bytes(for: request)
            #expect(head.outcome == .miss)
            #expect(String(decoding: try await stream.collect(), as: UTF8.self) == body)
        } else {
            let result = try await other.cache.data(for: request)
            #expect(result.outcome == .miss)
            #expect(result.text == body)
        }
        #expect(h.origin.count("/damaged") == 2)
    }
}

@Suite("Bodies that end early are never stored as complete")
struct TruncationTests {
    /// A reader cancelled mid-body: URLSession's stream then ends without an error, which
    /// must not commit the part as a complete entry.
    @Test func cancelledReaderStoresNothingComplete() async throws {
        let h = try Harness()
        h.origin.route("/paused") { _ in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600")], generatedLength: 1_048_576, seed: 7,
                pauseAfterBodyBytes: 300_000)
        }
        let reader = Task {
            let (_, body) = try await h.cache.bytes(for: h.request("/paused"))
            var count = 0
            for try await chunk in body { count += chunk.count }
            return count
        }
        try await Task.sleep(for: .milliseconds(300))
        reader.cancel()
        _ = try? await reader.value
        let offline = try await h.get("/paused", policy: .returnCacheDataDontLoad)
        #expect(offline.statusCode == 504)
        #expect(try h.cache.entries().allSatisfy { !$0.isComplete || $0.bodySize == 1_048_576 })
    }
}
