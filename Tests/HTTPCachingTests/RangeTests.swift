import CacheSemantics
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
        h.serve("/file", [("Cache-Control", "max-age=600"), ("ETag", "\"f1\""), ("Content-Type", "text/plain")], body: Self.body)
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
