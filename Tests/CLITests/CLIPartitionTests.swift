import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

/// `get --partition`, `ls --partition` and `purge --partition`, run as processes.
@Suite(.timeLimit(.minutes(10)))
struct CLIPartitionTests {
    @Test("get --partition: a response stored in one partition is not served in another or in none (RFC 9111 §2)")
    func getKeepsPartitionsApart() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.origin.route("/me") { request in
                LoopbackOrigin.Response(
                    headers: [("Cache-Control", "max-age=86400")], body: request.header("X-Who") ?? "")
            }
            for (partition, who) in [("alice", "alice"), ("bob", "bob"), (nil, "none"), ("alice", "again")] {
                let run = try await cli.run(
                    ["get", "-H", "X-Who: \(who)", cli.url("/me")] + (partition.map { ["--partition", $0] } ?? []))
                #expect(run.status == 0, "\(run.stderr)")
                #expect(run.stdout == (who == "again" ? "alice" : who))
            }
            #expect(cli.origin.count("/me") == 3)
            let bad = try await cli.run(["get", "--partition", "a\tb", cli.url("/me")])
            #expect(bad.status == 2)
            #expect(bad.stderr.contains("--partition: a partition name cannot hold control characters"))
            #expect(cli.origin.count("/me") == 3)
        }
    }

    @Test(
        "ls marks partitioned entries; ls --partition lists one partition; purge --partition removes it and its files")
    func listAndPurge() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let body = String(repeating: "x", count: 40_000)  // stored in a body file
            for path in ["/1", "/2"] { cli.serve(path, [("Cache-Control", "max-age=86400")], body: body) }
            for partition in ["alice", "bob", nil] {
                for path in ["/1", "/2"] {
                    let run = try await cli.run(
                        ["get", cli.url(path)] + (partition.map { ["--partition", $0] } ?? []))
                    #expect(run.status == 0, "\(run.stderr)")
                }
            }
            let text = try await cli.run(["ls"]).stdout
            let lines = text.split(separator: "\n")
            #expect(lines.first?.contains("PARTITION") == true)
            // The column before the URL names the partition, "-" for none.
            let partitions = lines.dropFirst().dropLast().map { $0.split(separator: " ").dropLast().last ?? "" }
            #expect(partitions.sorted() == ["-", "-", "alice", "alice", "bob", "bob"])

            let alice = try await cli.run(["ls", "--partition", "alice", "--json"]).jsonArray()
            #expect(alice.count == 2)
            #expect(alice.allSatisfy { $0["partition"] as? String == "alice" })
            let all = try await cli.run(["ls", "--json"]).jsonArray()
            #expect(all.filter { $0["partition"] is NSNull }.count == 2)

            let bodies = cli.cacheDirectory + "/bodies"
            #expect(try FileManager.default.contentsOfDirectory(atPath: bodies).count == 6)
            let one = try await cli.run(["purge", "--partition", "bob", cli.url("/1")])
            #expect(one.stdout == "removed 1 stored response for \(cli.url("/1")) in partition bob\n")
            let purged = try await cli.run(["purge", "--partition", "alice"])
            #expect(purged.stdout == "removed 2 stored responses in partition alice\n")
            #expect(try FileManager.default.contentsOfDirectory(atPath: bodies).count == 3)
            let left = try await cli.run(["ls", "--json"]).jsonArray()
            #expect(left.map { $0["partition"] as? String }.sorted { ($0 ?? "") < ($1 ?? "") } == [nil, nil, "bob"])
            let empty = try await cli.run(["ls", "--partition", "alice"])
            #expect(empty.stdout.hasPrefix("nothing stored in partition alice"))
            #expect(try await cli.run(["purge", "--partition", "alice", "--all"]).status == 2)
            #expect(try await cli.run(["purge", "--partition", ""]).status == 2)
        }
    }
}
