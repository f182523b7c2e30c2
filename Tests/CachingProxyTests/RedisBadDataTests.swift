#if os(Linux)
import CacheSystem
import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// Real `httpcache serve` processes on a real Redis in which what sits under the cache's own
/// keys is not what the cache wrote: a value of 32 MiB, a key of another type, or a user who
/// may read but not write. Each is a miss, with bounded memory, and the next response is
/// stored again; no response claims to be stored when it was not.
@Suite("Redis: bad data under the cache's keys is a miss, removed, and never claimed as stored", .serialized)
struct RedisBadDataTests {
    /// The keys under `prefix` on the shared test Redis, once an entry's hash is among them.
    static func entryKey(_ prefix: String, on server: RedisServer? = nil) throws -> String {
        let server = try server ?? RedisServer.shared()
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let keys = try server.cli(["--scan", "--pattern", prefix + "*"]).split(separator: "\n").map(String.init)
            if let key = keys.first(where: { $0.contains("}e:") }) { return key }
            Thread.sleep(forTimeInterval: 0.02)
        }
        throw NoEntry(description: "no entry under \(prefix) in Redis")
    }

    struct NoEntry: Error, CustomStringConvertible {
        var description: String
    }

    /// An origin for `path` whose responses may be stored for five minutes.
    static func origin(_ path: String, body: String) throws -> LoopbackOrigin {
        let origin = try LoopbackOrigin()
        origin.route(path) { _ in .init(headers: [("Cache-Control", "max-age=300")], body: body) }
        return origin
    }

    @Test(
        "a 32 MiB value in a stored entry's hash: the lookup is a miss without the proxy's memory growing by it, one log line says what to do, and the response is stored again"
    )
    func oversizedValueIsAMissWithBoundedMemory() async throws {
        try await offPool {
            let origin = try Self.origin("/big", body: "the body")
            defer { origin.stop() }
            let prefix = "b\(UInt32.random(in: 0...UInt32.max)):"
            // A Redis of its own: taking 32 MiB holds it for a moment, which would slow down the
            // other suites' commands on the shared one. Two seconds per command: enough to read
            // all of it where the reply is not bounded.
            let redis = try RedisServer()
            let nodes = try SharedTierTests.nodes(
                1, origin: origin, redis: ["--redis", redis.url],
                extra: ["--local-memory", "0", "--redis-timeout", "2000"], prefix: prefix)
            let client = try TestClient()
            #expect(try client.send("GET", nodes[0].baseURL + "/big").text == "the body")
            let key = try Self.entryKey(prefix, on: redis)
            // The record's field (the variant key, empty here) replaced by 32 MiB.
            let huge = [UInt8](repeating: UInt8(ascii: "x"), count: 32 << 20)
            #expect(try redis.command([Array("HSET".utf8), Array(key.utf8), [], huge]) == ":0")
            let pid = nodes[0].process.processIdentifier
            let before = try #require(MeasuredRun.peakResidentKiB(of: pid))
            let started = Date()
            let answer = try client.send("GET", nodes[0].baseURL + "/big")
            #expect(answer.status == 200 && answer.text == "the body" && !answer.isHit)
            #expect(Date().timeIntervalSince(started) < 1.5)
            let after = try #require(MeasuredRun.peakResidentKiB(of: pid))
            // Where it is read whole, it is held twice (the buffer, the value parsed from it).
            #expect(after - before < 16 * 1024, "peak RSS grew by \(after - before) KiB")
            // Stored again: a hit.
            #expect(try client.send("GET", nodes[0].baseURL + "/big").isHit)
            #expect(origin.count("/big") == 2)
            let lines = nodes[0].standardError.split(separator: "\n").filter { $0.contains("larger than") }
            #expect(lines.count == 1, "\(nodes[0].standardError)")
            #expect(nodes[0].process.isRunning)
            withExtendedLifetime(redis) {}
        }
    }

    @Test("a string where a URL's entry hash belongs (WRONGTYPE): a miss, and the response is stored again")
    func wrongTypeEntryKeyIsReplaced() async throws {
        try await offPool {
            let origin = try Self.origin("/typed", body: "typed body")
            defer { origin.stop() }
            let prefix = "w\(UInt32.random(in: 0...UInt32.max)):"
            let nodes = try SharedTierTests.nodes(
                1, origin: origin, redis: ["--redis", try RedisServer.shared().url], extra: ["--local-memory", "0"],
                prefix: prefix)
            let client = try TestClient()
            _ = try client.send("GET", nodes[0].baseURL + "/typed")
            let key = try Self.entryKey(prefix)
            let server = try RedisServer.shared()
            #expect(try server.command("DEL", key) == ":1")
            #expect(try server.command("SET", key, "not a hash") == "+OK")
            let miss = try client.send("GET", nodes[0].baseURL + "/typed")
            #expect(miss.status == 200 && miss.text == "typed body" && !miss.isHit)
            let hit = try client.send("GET", nodes[0].baseURL + "/typed")
            #expect(hit.isHit, "\(hit.cacheStatus ?? "no Cache-Status")")
            #expect(origin.count("/typed") == 2)
            #expect(try server.command("TYPE", key) == "+hash")
        }
    }

    @Test(
        "a Redis that refuses the write (a user denied HSET), no local tier: the response does not claim Cache-Status stored (RFC 9211 §2.5)"
    )
    func refusedWriteIsNotClaimedStored() async throws {
        try await offPool {
            let redis = try RedisServer()
            try redis.cli(["ACL", "SETUSER", "nowrite", "on", ">pw", "~*", "&*", "+@all", "-hset"])
            let origin = try Self.origin("/refused", body: "refused body")
            defer { origin.stop() }
            let node = try ServeProcess(
                [
                    "--origin", origin.baseURL, "--redis", "redis://nowrite:pw@\(redis.address)", "--redis-timeout",
                    "5000", "--local-memory", "0",
                ], memoryOnly: true)
            let client = try TestClient()
            for _ in 0..<2 {
                let answer = try client.send("GET", node.baseURL + "/refused")
                #expect(answer.text == "refused body" && !answer.isHit)
                let status = try #require(answer.cacheStatus)
                #expect(!status.contains("; stored") || status.contains("stored=?0"), "\(status)")
            }
            #expect(origin.count("/refused") == 2)
            withExtendedLifetime(redis) {}
        }
    }
}
#endif
