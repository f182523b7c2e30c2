import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `httpcache` run on a cache directory another user controls (the store's checks, in
/// `DirectorySafetyTests`, reached through the CLI and `serve`): it refuses in one line saying
/// how to fix it, and writes or deletes nothing through the links planted there.
@Suite struct CLIDirectorySafetyTests {
    static let needsRoot = "needs root, to create files owned by another user (uid 65534)"

    /// A cache directory owned by `nobody` with `index.changes` linked to a file of this user's
    /// and `bodies` linked to a directory of this user's, holding a file named like a body.
    struct Planted {
        let cache: String
        let victim: String
        let elsewhere: String
        static let victimBytes = Data("precious bytes: not a cache's".utf8)
        static let bodyName = String(repeating: "ab", count: 16)

        init(in directory: String) throws {
            cache = directory + "/theirs"
            victim = directory + "/victim"
            elsewhere = directory + "/elsewhere"
            try Self.victimBytes.write(to: URL(fileURLWithPath: victim))
            try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
            try Data("keep".utf8).write(to: URL(fileURLWithPath: elsewhere + "/" + Self.bodyName))
            try FileManager.default.createDirectory(atPath: cache, withIntermediateDirectories: false)
            try FileManager.default.createSymbolicLink(atPath: cache + "/index.changes", withDestinationPath: victim)
            try FileManager.default.createSymbolicLink(atPath: cache + "/bodies", withDestinationPath: elsewhere)
            for name in ["", "/index.changes", "/bodies"] { lchown(cache + name, 65534, 65534) }
        }

        func expectUntouched(sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(FileManager.default.contents(atPath: victim) == Self.victimBytes, sourceLocation: sourceLocation)
            #expect(
                FileManager.default.fileExists(atPath: elsewhere + "/" + Self.bodyName), sourceLocation: sourceLocation)
            #expect(!FileManager.default.fileExists(atPath: cache + "/index.sqlite"), sourceLocation: sourceLocation)
        }
    }

    @Test(.enabled(if: geteuid() == 0, Comment(rawValue: needsRoot)))
    func getRefusesADirectoryOwnedByAnotherUser() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/page", [("Cache-Control", "max-age=60")])
            let planted = try Planted(in: cli.directory.path)
            let run = try await CLIProcess.run(
                ["get", cli.url("/page"), "--cache-dir", planted.cache], in: cli.directory.path)
            #expect(run.status == 1)
            #expect(run.stderrLines.count == 1, "\(run.stderr)")
            #expect(run.stderr.hasPrefix("httpcache: could not open the cache in \(planted.cache): refusing"))
            #expect(run.stderr.contains("owned by uid 65534") && run.stderr.contains("chown"), "\(run.stderr)")
            #expect(cli.origin.requests.isEmpty)
            planted.expectUntouched()
        }
    }

    @Test(.enabled(if: geteuid() == 0, Comment(rawValue: needsRoot)))
    func serveRefusesADirectoryOwnedByAnotherUser() async throws {
        try await offPool {
            let cli = try CLIHarness()
            let planted = try Planted(in: cli.directory.path)
            let run = try await CLIProcess.run(
                ["serve", "--origin", cli.url(""), "--listen", "127.0.0.1:0", "--cache-dir", planted.cache],
                in: cli.directory.path, timeout: 20)
            #expect(run.status != 0)
            #expect(run.stderr.contains("owned by uid 65534") && run.stderr.contains("chown"), "\(run.stderr)")
            planted.expectUntouched()
        }
    }
}
