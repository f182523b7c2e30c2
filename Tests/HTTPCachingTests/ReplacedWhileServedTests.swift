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

/// A stored response being read while a newer one replaces it, through `HTTPCache`: the reader
/// gets the version it started on, whole; a `304` whose stored response was replaced meanwhile
/// is still answered.
@Suite("HTTPCache: a stored response replaced while it is being read")
struct ReplacedWhileServedTests {
    static let size: Int64 = 8 << 20

    /// Routes `path` to a new version per request (`ETag: "vN"`, body generated from seed N),
    /// unless `script` says otherwise for that request number.
    static func serveVersions(
        _ h: Harness, _ path: String, script: [Int: @Sendable () -> LoopbackOrigin.Response] = [:]
    ) {
        let count = Locked(0)
        h.origin.route(path) { [clock = h.clock] _ in
            let number = count.withLock { count -> Int in
                count += 1
                return count
            }
            if let scripted = script[number] { return scripted() }
            return LoopbackOrigin.Response(
                headers: [
                    ("Date", HTTPDate.format(Timestamp(secondsSince1970: clock.now()))),
                    ("Cache-Control", "max-age=600"), ("ETag", "\"v\(number)\""),
                ],
                generatedLength: size, seed: UInt64(number))
        }
    }

    static func version(_ number: UInt64) -> Data {
        Data(LoopbackOrigin.GeneratedBody.bytes(seed: number, count: Int(size)))
    }

    @Test(
        "a stored body streamed by bytes(for:) while a reload stores a new version arrives whole, as the old version",
        arguments: [false, true])
    func streamKeepsItsVersion(inMemory: Bool) async throws {
        // 8 MiB bodies: in the memory tier with 64 MiB of memory, on disk only with 4 MiB.
        let h = try Harness { $0.memoryCapacity = inMemory ? 64 << 20 : 4 << 20 }
        Self.serveVersions(h, "/big")
        #expect(try await h.get("/big").data == Self.version(1))

        let (head, body) = try await h.cache.bytes(for: h.request("/big"))
        #expect(head.outcome == .hit)
        var iterator = body.makeAsyncIterator()
        var received = try #require(try await iterator.next())

        let reloaded = try await h.get("/big", policy: .reloadIgnoringLocalCacheData)
        #expect(reloaded.field("ETag") == "\"v2\"")
        #expect(reloaded.data == Self.version(2))

        while let chunk = try await iterator.next() { received.append(chunk) }
        #expect(received.count == Int(Self.size))
        #expect(received == Self.version(1), "the reader that started on v1 gets v1 whole")
        let after = try await h.get("/big")
        #expect(after.outcome == .hit && after.field("ETag") == "\"v2\"")
    }

    @Test(
        "a 304 that arrives after another request stored a newer 200 is answered (RFC 9111 §4.3.4)",
        .timeLimit(.minutes(10)))
    func notModifiedAfterReplacement() async throws {
        let h = try Harness()
        // Request 2 validates v1 and is answered 304 only once request 3, a reload sent
        // meanwhile, has stored v3.
        let v3Stored = DispatchSemaphore(value: 0)
        Self.serveVersions(
            h, "/r",
            script: [
                2: {
                    _ = v3Stored.wait(timeout: .now() + 20)
                    return LoopbackOrigin.Response(
                        status: 304, headers: [("Cache-Control", "max-age=600"), ("ETag", "\"v1\"")])
                }
            ])
        #expect(try await h.get("/r").field("ETag") == "\"v1\"")
        // One second old: older than the max-age=0 the next request accepts (RFC 9111 §5.2.1.1).
        h.clock.advance(by: 1)

        async let validated = h.get("/r", headers: ["Cache-Control": "max-age=0"])
        // Request 2 must be at the origin before the reload is sent.
        while h.origin.count("/r") < 2 { try await Task.sleep(for: .milliseconds(10)) }
        let reloaded = try await h.get("/r", policy: .reloadIgnoringLocalCacheData)
        #expect(reloaded.field("ETag") == "\"v3\"")
        v3Stored.signal()
        let answer = try await validated
        #expect(answer.statusCode == 200)
        let tag = try #require(answer.field("ETag"))
        #expect(tag != "\"v1\"", "v1 is no longer stored and cannot be served as revalidated")
        let seed = try #require(UInt64(tag.trimmingCharacters(in: CharacterSet(charactersIn: "\"v"))))
        #expect(answer.data == Self.version(seed))
    }
}
