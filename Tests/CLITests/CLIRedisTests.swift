import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `httpcache get/ls/show/purge/stats` with `--redis`: the commands see the shared store.
@Suite("CLI on a shared Redis store")
struct CLIRedisTests {
    @Test(
        "get stores in Redis; ls, show and stats read it there; purge removes it; an unreachable Redis is one clear line"
    )
    func commandsOnRedis() async throws {
        let cli = try CLIHarness()
        cli.serve("/r", [("Cache-Control", "max-age=300")], body: "in redis")
        // A second per Redis command: beside the other suites on two cores, the 50 ms default
        // is sometimes passed, and this test is about the commands, not a slow Redis.
        let redis = [
            "--redis", try await offPool { try RedisServer.shared().url }, "--redis-prefix",
            "cli-\(UInt64.random(in: 0...UInt64.max)):",
            "--redis-timeout", "1000",
        ]
        let get = try await cli.run(["get"] + redis + [cli.url("/r")])
        #expect(get.status == 0 && get.stdout == "in redis")
        // Another process, no local tier: the hit comes from Redis.
        let again = try await cli.run(["get", "-i"] + redis + [cli.url("/r")])
        #expect(again.stdout.contains("; hit"), "\(again.stdout)")
        #expect(cli.origin.count("/r") == 1)
        let listed = try await cli.run(["ls", "--json"] + redis).jsonArray()
        #expect(listed.map { $0["url"] as? String } == [cli.url("/r")])
        #expect(try await cli.run(["show"] + redis + [cli.url("/r")]).stdout.contains("max-age=300"))
        #expect(try await cli.run(["stats", "--json"] + redis).jsonObject()["entries"] as? Int == 1)
        #expect(try await cli.run(["purge"] + redis + [cli.url("/r")]).status == 0)
        #expect(try await cli.run(["ls", "--json"] + redis).jsonArray().isEmpty)

        let down = try await cli.run(["ls", "--redis", "redis://127.0.0.1:1"])
        #expect(down.status != 0)
        #expect(down.stderrLines.count == 1)
        #expect(down.stderr.contains("cannot connect to Redis at 127.0.0.1:1") && down.stderr.contains("start Redis"))
        let usage = try await cli.run(["ls", "--redis", "http://nope"])
        #expect(usage.status != 0 && usage.stderr.contains("redis://[user:password@]host:port"))
    }
}
