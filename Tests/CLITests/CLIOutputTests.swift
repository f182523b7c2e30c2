import CacheTestSupport
import Foundation
import LoopbackOrigin
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `httpcache get URL -o FILE` on targets other than a new file: a FIFO, a character device
/// (`/dev/null` among them), a symbolic link, an existing file with a mode and owner of its own.
@Suite(.timeLimit(.minutes(10)))
struct CLIOutputTests {
    /// The file type bits (`S_IFMT`) of `path` itself, not of what a link leads to.
    private func fileType(_ path: String) -> mode_t? {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & S_IFMT : nil
    }

    private func fileInfo(_ path: String) -> stat? {
        var info = stat()
        return stat(path, &info) == 0 ? info : nil
    }

    /// Names in `directory` that a transfer left behind (its temporary files).
    private func leftovers(in directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".part") }
    }

    @Test func aFIFOIsWrittenInPlaceAndStaysAFIFO() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/piped", [("Cache-Control", "max-age=60")], body: "through the pipe")
            let fifo = cli.directory.path + "/pipe"
            try #require(mkfifo(fifo, 0o600) == 0)
            // A reader and a spare writer are open first, so the tool's open does not wait for a
            // reader and the bytes wait in the pipe until the test reads them.
            let reader = open(fifo, O_RDONLY | O_NONBLOCK)
            try #require(reader >= 0)
            defer { close(reader) }
            let spare = open(fifo, O_WRONLY)
            try #require(spare >= 0)

            let run = try await cli.run(["get", cli.url("/piped"), "-o", fifo])
            close(spare)
            #expect(run.status == 0, "stderr: \(run.stderr)")
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = read(reader, &buffer, buffer.count)
            #expect(String(decoding: buffer.prefix(max(0, count)), as: UTF8.self) == "through the pipe")
            #expect(fileType(fifo) == S_IFIFO)
            #expect(try leftovers(in: cli.directory.path).isEmpty)
        }
    }

    /// A character device made for the test (the null device's numbers, 1:3) stands for
    /// /dev/null: written in place, it stays a device.
    @Test(.enabled(if: geteuid() == 0, "mknod needs root"))
    func aCharacterDeviceIsWrittenInPlaceAndStaysADevice() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/discarded", [("Cache-Control", "max-age=60")], body: "into the null device")
            let device = cli.directory.path + "/null"
            try #require(mknod(device, S_IFCHR | 0o666, dev_t((1 << 8) | 3)) == 0)

            let run = try await cli.run(["get", cli.url("/discarded"), "-o", device, "--json"])
            #expect(run.status == 0, "stderr: \(run.stderr)")
            #expect(try run.jsonObject()["bodyBytes"] as? Int == "into the null device".utf8.count)
            #expect(fileType(device) == S_IFCHR)
            #expect(fileInfo(device)?.st_rdev == dev_t((1 << 8) | 3))
            #expect(try leftovers(in: cli.directory.path).isEmpty)
        }
    }

    /// The real /dev/null. The tool runs as `nobody`, who can neither create nor rename
    /// anything in /dev: a tool that tried to replace /dev/null would fail here rather than
    /// damage the machine.
    @Test(.enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")))
    func devNullIsWrittenInPlaceAndStaysTheNullDevice() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/discarded", [("Cache-Control", "max-age=60")], body: "into /dev/null")
            let cacheDirectory = cli.directory.path + "/nobody-cache"
            try FileManager.default.createDirectory(atPath: cacheDirectory, withIntermediateDirectories: false)
            try #require(chown(cacheDirectory, 65534, 65534) == 0 && chmod(cli.directory.path, 0o755) == 0)
            let before = try #require(fileInfo("/dev/null"))

            let run = try await CLIProcess.run(
                executable: "/usr/bin/setpriv",
                [
                    "--reuid=65534", "--regid=65534", "--clear-groups", try BuiltExecutable.path("httpcache"), "get",
                    cli.url("/discarded"), "--cache-dir", cacheDirectory, "-o", "/dev/null",
                ], in: cli.directory.path)
            #expect(run.status == 0, "stderr: \(run.stderr)")
            let after = try #require(fileInfo("/dev/null"))
            #expect(after.st_mode == before.st_mode && after.st_rdev == before.st_rdev && after.st_ino == before.st_ino)
            #expect(cli.origin.count("/discarded") == 1)
        }
    }

    @Test func aSymbolicLinkIsWrittenThroughAndStaysALink() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/linked", [("Cache-Control", "max-age=60")], body: "new body")
            let directory = cli.directory.path
            try #require(FileManager.default.createFile(atPath: directory + "/real.txt", contents: Data("old".utf8)))
            try #require(chmod(directory + "/real.txt", 0o640) == 0)
            try FileManager.default.createSymbolicLink(atPath: directory + "/link", withDestinationPath: "real.txt")
            // A link to a file that does not exist yet: the file is created where the link points.
            try FileManager.default.createSymbolicLink(
                atPath: directory + "/dangling", withDestinationPath: "later.txt")

            for link in ["link", "dangling"] {
                let run = try await cli.run(["get", cli.url("/linked"), "-o", directory + "/" + link])
                #expect(run.status == 0, "\(link): \(run.stderr)")
                #expect(fileType(directory + "/" + link) == S_IFLNK, "\(link) is no longer a link")
            }
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: directory + "/link") == "real.txt")
            #expect(FileManager.default.contents(atPath: directory + "/real.txt") == Data("new body".utf8))
            #expect(fileInfo(directory + "/real.txt").map { $0.st_mode & 0o7777 } == 0o640)
            #expect(FileManager.default.contents(atPath: directory + "/later.txt") == Data("new body".utf8))
            #expect(try leftovers(in: directory).isEmpty)
        }
    }

    /// An existing regular file is still replaced only once the body is complete (a cut
    /// transfer leaves it as it was), and the new file keeps the old one's mode and owner.
    @Test func anExistingFileKeepsItsModeAndOwnerAndIsReplacedOnlyWhenComplete() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/complete", [("Cache-Control", "max-age=60")], body: "complete body")
            cli.origin.route("/cut") { _ in
                LoopbackOrigin.Response(body: [UInt8](repeating: 7, count: 100_000), cutAfterBodyBytes: 1_000)
            }
            let file = cli.directory.path + "/kept.txt"
            try #require(FileManager.default.createFile(atPath: file, contents: Data("old".utf8)))
            try #require(chmod(file, 0o604) == 0)
            let owner: (uid_t, gid_t) = geteuid() == 0 ? (65534, 65534) : (getuid(), getgid())
            try #require(chown(file, owner.0, owner.1) == 0)

            let cut = try await cli.run(["get", cli.url("/cut"), "-o", file])
            #expect(cut.status == 1, "stderr: \(cut.stderr)")
            #expect(FileManager.default.contents(atPath: file) == Data("old".utf8))

            let run = try await cli.run(["get", cli.url("/complete"), "-o", file])
            #expect(run.status == 0, "stderr: \(run.stderr)")
            #expect(FileManager.default.contents(atPath: file) == Data("complete body".utf8))
            let info = try #require(fileInfo(file))
            #expect(info.st_mode & 0o7777 == 0o604)
            #expect(info.st_uid == owner.0 && info.st_gid == owner.1)
            #expect(try leftovers(in: cli.directory.path).isEmpty)
        }
    }

    @Test func aDirectoryIsRefusedBeforeAnythingIsFetched() async throws {
        try await offPool {
            let cli = try CLIHarness()
            cli.serve("/page", [("Cache-Control", "max-age=60")])
            let run = try await cli.run(["get", cli.url("/page"), "-o", cli.directory.path])
            #expect(run.status == 1)
            #expect(run.stderr.contains("is a directory"), "\(run.stderr)")
            #expect(cli.origin.count("/page") == 0)
        }
    }
}
