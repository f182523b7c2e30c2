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

/// Range requests answered from a complete stored response, without the origin
/// (RFC 9110 §14.2, §13.1.5, §14.6, §15.3.7, §15.5.17).
@Suite("Range requests served from the cache (RFC 9110 §14.2)")
struct CachedRangeTests {
    static let body = (0..<1000).map { String(format: "%03d|", $0 % 1000) }.joined()  // 4,000 bytes

    func harness() async throws -> Harness {
        let h = try Harness()
        h.serve(
            "/file", [("Cache-Control", "max-age=600"), ("ETag", "\"f1\""), ("Content-Type", "text/plain")],
            body: Self.body)
        _ = try await h.get("/file")
        h.origin.clearRecords()
        return h
    }

    @Test("§14.2: one range → 206 with Content-Range, from the store")
    func singleRange() async throws {
        let h = try await harness()
        let result = try await h.get("/file", headers: ["Range": "bytes=100-199"])
        #expect(result.statusCode == 206)
        #expect(result.outcome == .hit)
        #expect(result.field("Content-Range") == "bytes 100-199/4000")
        #expect(result.field("Content-Length") == "100")
        #expect(result.text == String(Self.body.dropFirst(100).prefix(100)))
        let (head, stream) = try await h.cache.bytes(for: h.request("/file", headers: ["Range": "bytes=-4"]))
        #expect(head.statusCode == 206 && head.expectedLength == 4)
        #expect(String(decoding: try await stream.collect(), as: UTF8.self) == "999|")
        #expect(h.origin.count("/file") == 0)
    }

    @Test("§14.6: several ranges → multipart/byteranges")
    func multipleRanges() async throws {
        let h = try await harness()
        let result = try await h.get("/file", headers: ["Range": "bytes=0-3, 8-11"])
        #expect(result.statusCode == 206)
        let type = try #require(result.field("Content-Type"))
        #expect(type.hasPrefix("multipart/byteranges; boundary="))
        let boundary = String(type.dropFirst("multipart/byteranges; boundary=".count))
        let expected =
            "--\(boundary)\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-3/4000\r\n\r\n000|\r\n"
            + "--\(boundary)\r\nContent-Type: text/plain\r\nContent-Range: bytes 8-11/4000\r\n\r\n002|\r\n"
            + "--\(boundary)--\r\n"
        #expect(result.text == expected)
        #expect(h.origin.count("/file") == 0)
    }

    @Test("§15.5.17: an unsatisfiable range → 416 with the length")
    func unsatisfiable() async throws {
        let h = try await harness()
        let result = try await h.get("/file", headers: ["Range": "bytes=4000-"])
        #expect(result.statusCode == 416)
        #expect(result.field("Content-Range") == "bytes */4000")
        #expect(result.data.isEmpty)
        #expect(h.origin.count("/file") == 0)
    }

    @Test("§13.1.5: If-Range that does not match → the whole 200; one that matches → 206")
    func ifRange() async throws {
        let h = try await harness()
        let changed = try await h.get("/file", headers: ["Range": "bytes=0-9", "If-Range": "\"other\""])
        #expect(changed.statusCode == 200 && changed.data.count == 4000)
        let same = try await h.get("/file", headers: ["Range": "bytes=0-9", "If-Range": "\"f1\""])
        #expect(same.statusCode == 206 && same.text == "000|001|00")
        #expect(h.origin.count("/file") == 0)
    }
}

/// A body the network cuts off is kept when it can be resumed, and the next request asks the
/// origin only for the rest (RFC 9111 §3.3, §3.4; RFC 9110 §13.1.5, §15.3.7.3).
@Suite("Incomplete responses resumed and combined (RFC 9111 §3.3, §3.4)")
struct ResumedEntryTests {
    static let body = [UInt8]((0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 9) })

    /// Answers the first request with a body cut after 100,000 bytes, then honours Range
    /// with If-Range against `etag` (a 200 with the whole body when it does not match).
    func origin(_ h: Harness, etag: @escaping @Sendable () -> String, body: @escaping @Sendable () -> [UInt8]) {
        let attempts = Locked(0)
        h.origin.route("/large") { request in
            let attempt = attempts.withLock { count -> Int in
                count += 1
                return count
            }
            let headers = [("Cache-Control", "max-age=600"), ("ETag", etag())]
            if attempt == 1 {
                return LoopbackOrigin.Response(headers: headers, body: body(), cutAfterBodyBytes: 100_000)
            }
            if let range = request.header("Range"), request.header("If-Range") == etag(),
                let start = Int(range.dropFirst("bytes=".count).dropLast())
            {
                let all = body()
                return LoopbackOrigin.Response(
                    status: 206, headers: headers + [("Content-Range", "bytes \(start)-\(all.count - 1)/\(all.count)")],
                    body: Array(all[start...]))
            }
            return LoopbackOrigin.Response(headers: headers, body: body())
        }
    }

    @Test("§3.3, §3.4: the cut-off part is kept, the rest asked for with Range and If-Range, and combined")
    func resumeAndCombine() async throws {
        let h = try Harness()
        origin(h, etag: { "\"big\"" }, body: { Self.body })
        await #expect(throws: (any Error).self) { _ = try await h.get("/large") }
        let part = try #require(try h.cache.entries(for: h.origin.url("/large")).first)
        #expect(!part.isComplete)
        #expect(part.bodySize > 0 && part.bodySize <= 100_000)

        let resumed = try await h.get("/large")
        #expect(resumed.statusCode == 200)
        #expect(resumed.data == Data(Self.body))
        #expect(resumed.cacheStatus.forward == .partial && resumed.cacheStatus.forwardStatus == 206)
        let second = try #require(h.origin.requests(to: "/large").last)
        #expect(second.header("Range") == "bytes=\(part.bodySize)-")
        #expect(second.header("If-Range") == "\"big\"")

        let entries = try h.cache.entries(for: h.origin.url("/large"))
        #expect(entries.count == 1 && entries[0].isComplete && entries[0].bodySize == Int64(Self.body.count))
        let hit = try await h.get("/large")
        #expect(hit.outcome == .hit && hit.data == Data(Self.body))
        #expect(h.origin.count("/large") == 2)
    }

    @Test(
        "§3.3, §3.4: a stored 206 of the first bytes answers ranges within it; a request for the whole asks for the rest only and combines"
    )
    func storedPrefixCompleted() async throws {
        let h = try Harness()
        h.origin.route("/ranged") { request in
            let headers = [("Cache-Control", "max-age=600"), ("ETag", "\"r\"")]
            let all = Self.body
            guard let text = request.header("Range"), let range = ByteRangeRequest(text),
                let part = range.satisfiableRanges(length: Int64(all.count)).first
            else { return LoopbackOrigin.Response(headers: headers, body: all) }
            return LoopbackOrigin.Response(
                status: 206,
                headers: headers + [
                    ("Content-Range", ContentRange(range: part, completeLength: Int64(all.count)).fieldValue)
                ],
                body: Array(all[Int(part.lowerBound)...Int(part.upperBound)]))
        }
        let first = try await h.get("/ranged", headers: ["Range": "bytes=0-999"])
        #expect(first.statusCode == 206 && first.data.count == 1000)
        let part = try #require(try h.cache.entries(for: h.origin.url("/ranged")).first)
        #expect(!part.isComplete && part.bodySize == 1000)
        let within = try await h.get("/ranged", headers: ["Range": "bytes=100-199"])
        #expect(within.outcome == .hit && within.statusCode == 206)
        #expect(within.data == Data(Self.body[100..<200]))
        #expect(within.field("Content-Range") == "bytes 100-199/\(Self.body.count)")
        #expect(h.origin.count("/ranged") == 1)

        let whole = try await h.get("/ranged")
        #expect(whole.statusCode == 200 && whole.data == Data(Self.body))
        #expect(h.origin.requests(to: "/ranged").last?.header("Range") == "bytes=1000-")
        let hit = try await h.get("/ranged")
        #expect(hit.outcome == .hit && hit.data == Data(Self.body))
        #expect(h.origin.count("/ranged") == 2)
    }

    @Test("§13.1.5: a changed representation (If-Range false) is fetched whole and replaces the part")
    func changedRepresentationRestarts() async throws {
        let h = try Harness()
        let version = Locked("\"v1\"")
        let changed = [UInt8](repeating: 42, count: 150_000)
        origin(
            h, etag: { version.withLock { $0 } }, body: { version.withLock { $0 } == "\"v1\"" ? Self.body : changed })
        await #expect(throws: (any Error).self) { _ = try await h.get("/large") }
        version.withLock { $0 = "\"v2\"" }
        let fresh = try await h.get("/large")
        #expect(fresh.statusCode == 200 && fresh.data == Data(changed))
        #expect(h.origin.requests(to: "/large").last?.header("If-Range") == "\"v1\"")
        let entries = try h.cache.entries(for: h.origin.url("/large"))
        #expect(entries.count == 1 && entries[0].isComplete && entries[0].bodySize == 150_000)
    }

    @Test("§3.4: a 206 that does not continue the part is never spliced: the part is dropped and the whole fetched")
    func mismatchedPartialNeverSpliced() async throws {
        let h = try Harness()
        let attempts = Locked(0)
        h.origin.route("/odd") { request in
            let attempt = attempts.withLock { count -> Int in
                count += 1
                return count
            }
            let headers = [("Cache-Control", "max-age=600"), ("ETag", "\"odd\"")]
            if attempt == 1 {
                return LoopbackOrigin.Response(headers: headers, body: Self.body, cutAfterBodyBytes: 100_000)
            }
            if request.header("Range") != nil {
                // Starts in the wrong place.
                return LoopbackOrigin.Response(
                    status: 206, headers: headers + [("Content-Range", "bytes 10-299999/300000")],
                    body: Array(Self.body[10...]))
            }
            return LoopbackOrigin.Response(headers: headers, body: Self.body)
        }
        await #expect(throws: (any Error).self) { _ = try await h.get("/odd") }
        let result = try await h.get("/odd")
        #expect(result.statusCode == 200 && result.data == Data(Self.body))
        let sent = h.origin.requests(to: "/odd")
        #expect(sent.count == 3)
        #expect(sent[1].header("Range") != nil && sent[2].header("Range") == nil)
    }

    /// A text that compresses to a few hundred kilobytes: bodies coded with gzip by python3.
    static let text = (0..<60_000).map { "\($0 &* 7_919 % 100_003)," }.joined()

    /// An origin that always sends `text` gzip-coded, with a strong entity tag, and answers a
    /// `Range` with the coded bytes at that offset (as S3 or `gzip_static always` do); its first
    /// answer is cut after half the coded bytes when `cutsFirst`.
    func gzipOrigin(_ h: Harness, path: String, cutsFirst: Bool) async throws -> [UInt8] {
        let coded = try await CodedBodies.python("gzip.compress(data)", Array(Self.text.utf8))
        let answered = Locked(0)
        h.origin.route(path) { request in
            let attempt = answered.withLock { count -> Int in
                count += 1
                return count
            }
            let headers = [("Cache-Control", "max-age=600"), ("ETag", "\"gz\""), ("Content-Encoding", "gzip")]
            if let text = request.header("Range"), let range = ByteRangeRequest(text),
                let part = range.satisfiableRanges(length: Int64(coded.count)).first
            {
                return LoopbackOrigin.Response(
                    status: 206,
                    headers: headers + [
                        ("Content-Range", ContentRange(range: part, completeLength: Int64(coded.count)).fieldValue)
                    ],
                    body: Array(coded[Int(part.lowerBound)...Int(part.upperBound)]))
            }
            return LoopbackOrigin.Response(
                headers: headers, body: coded, cutAfterBodyBytes: cutsFirst && attempt == 1 ? coded.count / 2 : nil)
        }
        return coded
    }

    @Test(
        "§3.3, RFC 9110 §8.4: a body decoded from its content coding and cut off is not kept: a Range would continue the decoded bytes with coded ones"
    )
    func decodedBodyCutOffNotKept() async throws {
        let h = try Harness()
        _ = try await gzipOrigin(h, path: "/gz", cutsFirst: true)
        await #expect(throws: (any Error).self) { _ = try await h.get("/gz") }
        #expect(try h.cache.entries(for: h.origin.url("/gz")).isEmpty)
        let whole = try await h.get("/gz")
        #expect(whole.statusCode == 200 && whole.data == Data(Self.text.utf8))
        #expect(h.origin.requests(to: "/gz").allSatisfy { $0.header("Range") == nil })
        let hit = try await h.get("/gz")
        #expect(hit.outcome == .hit && hit.data == Data(Self.text.utf8))
    }

    @Test(
        "§3.4: a 206 in a content coding is passed on and not stored: joined with the rest it would be a whole response stored and served coded"
    )
    func codedPartNotStored() async throws {
        let h = try Harness()
        let coded = try await gzipOrigin(h, path: "/gzr", cutsFirst: false)
        let part = try await h.get("/gzr", headers: ["Range": "bytes=0-9999"])
        #expect(part.statusCode == 206 && part.data == Data(coded[0..<10_000]))
        #expect(try h.cache.entries(for: h.origin.url("/gzr")).isEmpty)
        let whole = try await h.get("/gzr")
        #expect(whole.statusCode == 200 && whole.data == Data(Self.text.utf8))
        #expect(h.origin.requests(to: "/gzr").last?.header("Range") == nil)
    }

    @Test("§3.3: a cut-off body without a strong validator is not kept")
    func noValidatorNotKept() async throws {
        let h = try Harness()
        h.origin.route("/weak") { _ in
            LoopbackOrigin.Response(
                headers: [("Cache-Control", "max-age=600"), ("ETag", "W/\"weak\"")], body: Self.body,
                cutAfterBodyBytes: 100_000)
        }
        await #expect(throws: (any Error).self) { _ = try await h.get("/weak") }
        #expect(try h.cache.entries().isEmpty)
    }
}
