import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `--encryption-key-file`, `$HTTPCACHE_ENCRYPTION_KEY_FILE` and `httpcache rekey` (issue 32),
/// run as processes on a cache filled by `get` from a loopback origin.
@Suite(.timeLimit(.minutes(10)))
struct CLIEncryptionTests {
    /// Writes a key file of `bytes` (mode 0600) in the harness's directory.
    private func keyFile(_ cli: CLIHarness, _ name: String, _ bytes: [UInt8]) -> String {
        let path = cli.directory.path + "/" + name
        #expect(
            FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600]))
        return path
    }

    /// Every file under `directory` that holds `needle`.
    private func grep(_ needle: String, under directory: String) -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: directory)
        var found: [String] = []
        while let name = enumerator?.nextObject() as? String {
            let path = directory + "/" + name
            if let contents = FileManager.default.contents(atPath: path), contents.range(of: Data(needle.utf8)) != nil {
                found.append(name)
            }
        }
        return found
    }

    @Test func anEncryptedCacheHoldsNoURLOrBodyAndOpensOnlyWithItsKey() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let body = String(repeating: "PRIVATE-ACCOUNT-PAGE ", count: 10_000)
            cli.serveValidated("/account/statement", cacheControl: "max-age=86400", etag: "\"s\"", body: body)
            cli.serve("/small/token", [("Cache-Control", "max-age=86400")], body: "SMALL-TOKEN-BODY")
            let key = keyFile(cli, "key", Array((String(repeating: "ab", count: 32) + "\n").utf8))
            for path in ["/account/statement", "/small/token"] {
                let fetched = try await cli.run(["get", cli.url(path), "--encryption-key-file", key, "-o", "/dev/null"])
                #expect(fetched.status == 0, "\(fetched.stderr)")
            }
            let hit = try await CLIProcess.run(
                ["get", "--cache-dir", cli.cacheDirectory, cli.url("/account/statement")],
                environment: ["HTTPCACHE_ENCRYPTION_KEY_FILE": key], in: cli.directory.path)
            #expect(hit.status == 0 && hit.stdout == body, "\(hit.stderr)")
            #expect(cli.origin.requests(to: "/account/statement").count == 1)
            for needle in [
                "/account/statement", "/small/token", "PRIVATE-ACCOUNT-PAGE", "SMALL-TOKEN-BODY", "127.0.0.1",
            ] {
                #expect(
                    grep(needle, under: cli.cacheDirectory).isEmpty,
                    "\(needle) in \(grep(needle, under: cli.cacheDirectory))")
            }

            let withoutKey = try await cli.run(["ls"])
            #expect(withoutKey.status == 1)
            #expect(withoutKey.stderr.contains("is encrypted and no key was given"), "\(withoutKey.stderr)")
            #expect(withoutKey.stderr.contains("--encryption-key-file"))
            let wrongKey = try await cli.run([
                "ls", "--encryption-key-file", keyFile(cli, "other", Array(repeating: 1, count: 32)),
            ])
            #expect(wrongKey.status == 1 && wrongKey.stderr.contains("does not open the cache"), "\(wrongKey.stderr)")
            let listed = try await cli.run(["ls", "--encryption-key-file", key])
            #expect(listed.status == 0 && listed.stdout.contains(cli.url("/small/token")), "\(listed.stderr)")
            let purged = try await cli.run(["purge", "--prefix", cli.url("/small/"), "--encryption-key-file", key])
            #expect(purged.status == 0, "\(purged.stderr)")
            let left = try await cli.run(["ls", "--encryption-key-file", key, "--json"]).jsonArray()
            #expect(left.compactMap { $0["url"] as? String } == [cli.url("/account/statement")])
        }
    }

    @Test func rekeyMovesTheCacheToANewKeyAndBackIntoTheClear() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/page", [("Cache-Control", "max-age=86400")], body: "page body")
            let fetched = try await cli.run(["get", cli.url("/page"), "-o", "/dev/null"])
            #expect(fetched.status == 0, "\(fetched.stderr)")
            let first = keyFile(cli, "first", Array(repeating: 0x11, count: 32))
            let second = keyFile(cli, "second", Array(repeating: 0x22, count: 32))

            let encrypted = try await cli.run(["rekey", "--new-key-file", first])
            #expect(encrypted.status == 0 && encrypted.stdout.hasPrefix("rekeyed 1 entries"), "\(encrypted.stderr)")
            #expect(try await cli.run(["ls"]).status == 1)
            let rekeyed = try await cli.run(["rekey", "--encryption-key-file", first, "--new-key-file", second])
            #expect(rekeyed.status == 0, "\(rekeyed.stderr)")
            let old = try await cli.run(["show", cli.url("/page"), "--encryption-key-file", first])
            #expect(old.status == 1 && old.stderr.contains("before it was rekeyed: give its new key"), "\(old.stderr)")
            let shown = try await cli.run(["show", cli.url("/page"), "--encryption-key-file", second])
            #expect(shown.status == 0 && shown.stdout.contains(cli.url("/page")), "\(shown.stderr)")
            let decrypted = try await cli.run(["rekey", "--decrypt", "--encryption-key-file", second])
            #expect(decrypted.status == 0 && decrypted.stdout.contains("in the clear"), "\(decrypted.stderr)")
            let plain = try await cli.run(["get", cli.url("/page")])
            #expect(plain.status == 0 && plain.stdout == "page body")
            #expect(cli.origin.requests(to: "/page").count == 1)
        }
    }

    @Test func aKeyFileThatHoldsNoKeyIsRefusedAndOneOthersCanReadIsWarnedAbout() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let short = keyFile(cli, "short", Array(repeating: 3, count: 31))
            let refused = try await cli.run(["ls", "--encryption-key-file", short])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("holds 31 bytes, not a key"), "\(refused.stderr)")
            let open = keyFile(cli, "open", Array(repeating: 3, count: 32))
            #expect(chmod(open, 0o644) == 0)
            let warned = try await cli.run(["ls", "--encryption-key-file", open])
            #expect(warned.status == 0, "\(warned.stderr)")
            #expect(warned.stderr.contains("may be read by group or others"), "\(warned.stderr)")
            let missing = try await cli.run(["rekey"])
            #expect(missing.status == 2 && missing.stderr.contains("--new-key-file FILE or --decrypt"))
        }
    }
}
