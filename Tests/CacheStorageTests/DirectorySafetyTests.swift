import CacheSemantics
import Foundation
import Testing

@testable import CacheStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `path` with its links and `//` resolved.
private func resolved(_ path: String) -> String {
    guard let pointer = realpath(path, nil) else { return path }
    defer { free(pointer) }
    return String(cString: pointer)
}

/// A cache directory another user could change is refused before anything in it is opened,
/// as OpenSSH's `StrictModes` refuses such a `~/.ssh`; and no file of the store is ever opened,
/// swept or chmod-ed through a link. Each test plants what another user would (links to a
/// file and a directory outside the cache) and checks that nothing outside was written or
/// deleted.
@Suite struct DirectorySafetyTests {
    /// The user tests plant files as: `nobody`.
    static let otherUser: uid_t = 65534
    static let isRoot = geteuid() == 0
    static let needsRoot = "needs root, to create files owned by another user (uid 65534)"

    /// A scratch directory (0700, this user's) with, outside the cache directory, a file whose
    /// bytes must not change and a directory holding files named like body files that must not
    /// be removed.
    final class Scratch {
        /// Resolved, as the store names it in its messages.
        let path = resolved(StoreTestSupport.makeDirectory("safety"))
        var victim: String { path + "/victim" }
        var elsewhere: String { path + "/elsewhere" }
        static let victimBytes = Data("precious bytes: not a cache's".utf8)
        /// Names the sweep would remove from `bodies/` (an orphan and a temporary file).
        static let bodyNames = [EntryID().rawValue, EntryID().rawValue + ".tmp"]

        init() throws {
            try Self.victimBytes.write(to: URL(fileURLWithPath: victim))
            chmod(victim, 0o644)
            try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
            for name in Self.bodyNames {
                try Data("keep".utf8).write(to: URL(fileURLWithPath: elsewhere + "/" + name))
            }
        }

        deinit { StoreTestSupport.removeDirectory(path) }

        /// A directory `name` in the scratch directory with `mode`.
        func directory(_ name: String, mode: mode_t = 0o700) throws -> String {
            let directory = path + "/" + name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            chmod(directory, mode)
            return directory
        }

        /// What another user would plant in `directory`: `index.changes` linked to the victim
        /// and `bodies` linked to the other directory.
        func plantLinks(in directory: String) throws {
            try FileManager.default.createSymbolicLink(
                atPath: directory + "/index.changes", withDestinationPath: victim)
            try FileManager.default.createSymbolicLink(atPath: directory + "/bodies", withDestinationPath: elsewhere)
        }

        /// Nothing outside the cache directory was written, re-moded or deleted.
        func expectUntouched(sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(
                FileManager.default.contents(atPath: victim) == Self.victimBytes, "the victim file was written",
                sourceLocation: sourceLocation)
            var status = stat()
            #expect(stat(victim, &status) == 0 && status.st_mode & 0o777 == 0o644, sourceLocation: sourceLocation)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: elsewhere)) ?? []
            #expect(Set(names) == Set(Self.bodyNames), "files were removed elsewhere", sourceLocation: sourceLocation)
        }
    }

    /// Opens a store in `directory` and expects it refused as unsafe, with `fix` in the message.
    /// A store that does open (the defect) is used as a run would be: an entry written and
    /// swept, so that whatever it would do through the links is done before the checks.
    @discardableResult
    func expectRefused(
        _ directory: String, fix: String, sourceLocation: SourceLocation = #_sourceLocation
    ) -> StorageError? {
        do {
            let store = try DiskStore(DiskStore.Configuration(directory: directory, log: { _ in }))
            Issue.record("the store opened in \(directory)", sourceLocation: sourceLocation)
            let writer = try? store.makeWriter(
                for: EntryHead(primaryKey: "k", url: "http://a/", status: 200, fields: [:], facts: []))
            try? writer?.append([UInt8](repeating: 1, count: 100_000))
            _ = try? writer?.commit()
            store.sweep()
            return nil
        } catch {
            #expect(error.kind == .unsafeDirectory, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(fix), "\(error)", sourceLocation: sourceLocation)
            #expect(!error.message.contains("\n"), sourceLocation: sourceLocation)
            return error
        }
    }

    @Test(.enabled(if: isRoot, Comment(rawValue: needsRoot)))
    func directoryOwnedByAnotherUserIsRefused() throws {
        let scratch = try Scratch()
        let cache = try scratch.directory("cache", mode: 0o755)
        try scratch.plantLinks(in: cache)
        for name in ["", "/index.changes", "/bodies"] { lchown(cache + name, Self.otherUser, Self.otherUser) }
        expectRefused(cache, fix: "chown \(geteuid()) ")
        scratch.expectUntouched()
        #expect(!FileManager.default.fileExists(atPath: cache + "/index.sqlite"))
    }

    @Test(arguments: [0o770 as mode_t, 0o707, 0o1777])
    func directoryWritableByGroupOrOthersIsRefused(mode: mode_t) throws {
        let scratch = try Scratch()
        let cache = try scratch.directory("cache", mode: mode)
        try scratch.plantLinks(in: cache)
        expectRefused(cache, fix: "chmod go-w \(cache)")
        scratch.expectUntouched()
    }

    @Test func bodiesLinkedToAnotherDirectoryIsRefused() throws {
        let scratch = try Scratch()
        let cache = try scratch.directory("cache")
        try FileManager.default.createSymbolicLink(atPath: cache + "/bodies", withDestinationPath: scratch.elsewhere)
        expectRefused(cache, fix: "rm \(cache)/bodies")
        scratch.expectUntouched()
    }

    /// Every file the store keeps at the top of its directory, linked to a file outside.
    @Test(arguments: ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "index.lock", "index.changes"])
    func storeFileLinkedOutsideIsRefused(name: String) throws {
        let scratch = try Scratch()
        let cache = try scratch.directory("cache")
        try FileManager.default.createSymbolicLink(atPath: cache + "/" + name, withDestinationPath: scratch.victim)
        expectRefused(cache, fix: "rm \(cache)/\(name)")
        scratch.expectUntouched()
    }

    @Test func sweepNeverListsADirectoryThatReplacedBodies() throws {
        let scratch = try Scratch()
        let cache = try scratch.directory("cache")
        let log = StoreTestSupport.Log()
        let store = try DiskStore(DiskStore.Configuration(directory: cache, log: log.sink))
        store.sweep()
        // Done by this user (only they can write the directory): the sweep still stays inside.
        try FileManager.default.moveItem(atPath: cache + "/bodies", toPath: cache + "/bodies-moved")
        try FileManager.default.createSymbolicLink(atPath: cache + "/bodies", withDestinationPath: scratch.elsewhere)
        #expect(store.sweep() == 0)
        scratch.expectUntouched()
        #expect(log.all.contains { $0.contains("is not a directory") }, "\(log.all)")
    }

    @Test(.enabled(if: isRoot, Comment(rawValue: needsRoot)))
    func parentOwnedByAnotherUserIsRefused() throws {
        let scratch = try Scratch()
        let theirs = try scratch.directory("theirs", mode: 0o755)
        let cache = try scratch.directory("theirs/cache")
        chown(theirs, Self.otherUser, Self.otherUser)
        expectRefused(cache, fix: "use a directory elsewhere")
    }

    /// Nothing is created under a parent others may write (they could replace what is made).
    @Test func parentWritableByOthersIsRefusedBeforeAnythingIsCreated() throws {
        let scratch = try Scratch()
        let open = try scratch.directory("open", mode: 0o777)
        let error = expectRefused(open + "/new/cache", fix: "chmod go-w \(open)")
        #expect(error?.message.contains("without the sticky bit") == true)
        #expect(!FileManager.default.fileExists(atPath: open + "/new"))
    }

    /// `/tmp` is fine as a place for a cache directory: only its owner can rename an entry of a
    /// sticky directory.
    @Test func cacheDirectoryInAStickyDirectoryIsAccepted() throws {
        let scratch = try Scratch()
        let sticky = try scratch.directory("sticky", mode: 0o1777)
        let store = try DiskStore(DiskStore.Configuration(directory: sticky + "/a/cache", log: { _ in }))
        var status = stat()
        #expect(stat(sticky + "/a/cache", &status) == 0 && status.st_mode & 0o777 == 0o700)
        #expect(stat(sticky + "/a", &status) == 0 && status.st_mode & 0o777 == 0o700)
        try StoreTestSupport.write(store, key: 1, generation: 1, size: 50_000)
        #expect(store.totals().entries == 1)
    }

    /// A link of the user's own (`~/.cache` on another disk) is followed once, when the store
    /// opens, and the store uses the directory it resolved to.
    @Test func linkOfTheUsersOwnIsFollowedOnce() throws {
        let scratch = try Scratch()
        let real = try scratch.directory("real")
        let link = scratch.path + "/link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        let store = try DiskStore(DiskStore.Configuration(directory: link + "/cache", log: { _ in }))
        #expect(store.configuration.directory == real + "/cache")
        try StoreTestSupport.write(store, key: 1, generation: 1, size: 50_000)
        #expect(FileManager.default.fileExists(atPath: real + "/cache/index.sqlite"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: real + "/cache/bodies").count == 1)
    }

    @Test(.enabled(if: isRoot, Comment(rawValue: needsRoot)))
    func linkOwnedByAnotherUserIsRefused() throws {
        let scratch = try Scratch()
        let sticky = try scratch.directory("sticky", mode: 0o1777)
        let real = try scratch.directory("real")
        try FileManager.default.createSymbolicLink(atPath: sticky + "/cache", withDestinationPath: real)
        lchown(sticky + "/cache", Self.otherUser, Self.otherUser)
        expectRefused(sticky + "/cache", fix: "the link \(sticky)/cache")
        #expect(try FileManager.default.contentsOfDirectory(atPath: real).isEmpty)
    }
}
