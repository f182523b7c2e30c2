import CacheSemantics
import CacheTestSupport
import Foundation
import Synchronization
import Testing

@testable import CacheStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How this machine can make a directory really read-only or really full for a test.
private enum FaultEnvironment {
    static let sqlite3 = ["/usr/bin/sqlite3", "/bin/sqlite3", "/usr/local/bin/sqlite3"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let mount = ["/usr/bin/mount", "/bin/mount"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static let umount = ["/usr/bin/umount", "/bin/umount"].first { FileManager.default.isExecutableFile(atPath: $0) }

    static func command(_ path: String?, _ arguments: [String]) -> Bool {
        guard let path, let result = try? StoreTestSupport.run(path, arguments) else { return false }
        return result.exited && result.status == 0
    }

    /// Root ignores permission bits, so as root a read-only bind mount is used; it needs
    /// the right to mount, probed once here.
    static let canMount: Bool = {
        guard getuid() == 0 else { return false }
        let directory = StoreTestSupport.makeDirectory("mount-probe")
        defer { StoreTestSupport.removeDirectory(directory) }
        guard command(mount, ["-t", "tmpfs", "-o", "size=64k", "tmpfs", directory]) else { return false }
        return command(umount, [directory])
    }()

    /// Whether a read-only directory can be made: chmod works for other users, a mount for root.
    static let canMakeReadOnly = getuid() != 0 || canMount
}

/// The files in a store's bodies directory.
private func bodyFiles(_ store: DiskStore) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: store.configuration.directory + "/bodies")) ?? []
}

/// Flips one byte of a file in place.
private func flipByte(of path: String, at offset: Int64) throws {
    let handle = try #require(FileHandle(forUpdatingAtPath: path), "cannot open \(path)")
    defer { try? handle.close() }
    try handle.seek(toOffset: UInt64(offset))
    let byte = try #require(try handle.read(upToCount: 1)?.first)
    try handle.seek(toOffset: UInt64(offset))
    try handle.write(contentsOf: [byte ^ 0x5A])
}

/// Waits until a store released in a scope is gone (its background sweep holds it briefly),
/// so its connection is closed and the index checkpointed.
private func waitUntilReleased(_ store: () throws -> DiskStore?) throws {
    weak let released = try store()
    let deadline = Date().addingTimeInterval(10)
    while released != nil && Date() < deadline { usleep(10_000) }
    #expect(released == nil, "the store was not released")
}

extension DiskStoreProcessTests {
    @Suite(.serialized) struct FaultTests {
        // MARK: Flipped bytes

        @Test("A flipped byte in a body file: that block fails and the entry is removed; other blocks read first")
        func flippedFileByte() async throws {
            try await offPool {
                let directory = StoreTestSupport.makeDirectory("flip-file")
                defer { StoreTestSupport.removeDirectory(directory) }
                let store = try DiskStore(.init(directory: directory, inlineBodyLimit: 0, log: { _ in }))
                let size = 200_000  // blocks 0...3, the last one partial
                let ranged = try StoreTestSupport.write(store, key: 1, generation: 1, size: size)
                let whole = try StoreTestSupport.write(store, key: 2, generation: 1, size: size)
                let streamed = try StoreTestSupport.write(store, key: 3, generation: 1, size: size)
                let intact = try StoreTestSupport.write(store, key: 4, generation: 1, size: size)
                let expected = try #require(StoreTestSupport.expectedBody(ranged))
                for entry in [ranged, whole, streamed] {
                    try flipByte(of: directory + "/bodies/" + entry.id.rawValue, at: 70_000)  // block 1
                }

                // Before anything touches block 1, a range inside block 0 still reads: it is verified alone.
                #expect(try store.body(of: ranged.id, range: 10...1_000) == Array(expected[10...1_000]))
                #expect(try store.body(of: ranged.id, range: 140_000...140_100) == Array(expected[140_000...140_100]))
                #expect(try store.variants(of: ranged.head.primaryKey).map(\.id) == [ranged.id])
                // A range that touches block 1 fails and removes the entry.
                let rangeError = #expect(throws: StorageError.self) {
                    try store.body(of: ranged.id, range: 65_000...66_000)
                }
                #expect(rangeError?.kind == .corrupted)
                #expect(rangeError?.message.contains("removed") == true, "\(rangeError?.message ?? "")")
                // Removed: even the intact block is no longer served.
                let afterRemoval = #expect(throws: StorageError.self) {
                    try store.body(of: ranged.id, range: 10...1_000)
                }
                #expect(afterRemoval?.kind == .notFound)

                let wholeError = #expect(throws: StorageError.self) { try store.body(of: whole.id) }
                #expect(wholeError?.kind == .corrupted)
                let streamError = #expect(throws: StorageError.self) {
                    try store.streamBody(of: streamed.id) { _ in true }
                }
                #expect(streamError?.kind == .corrupted)

                for entry in [ranged, whole, streamed] {
                    #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
                    #expect(!bodyFiles(store).contains(entry.id.rawValue), "body file of \(entry.id) left behind")
                }
                #expect(try store.body(of: intact.id) == StoreTestSupport.expectedBody(intact))
                #expect(store.totals().entries == 1)
                #expect(bodyFiles(store) == [intact.id.rawValue])
            }
        }

        @Test(
            "A body file cut short or grown fails as it is opened, before a byte is read (a hit would send its head, then stop): the entry is removed"
        )
        func resizedBodyFileFailsAtOpen() async throws {
            try await offPool {
                let directory = StoreTestSupport.makeDirectory("resized-file")
                defer { StoreTestSupport.removeDirectory(directory) }
                let store = try DiskStore(.init(directory: directory, inlineBodyLimit: 0, log: { _ in }))
                let cut = try StoreTestSupport.write(store, key: 1, generation: 1, size: 200_000)
                let grown = try StoreTestSupport.write(store, key: 2, generation: 1, size: 200_000)
                let intact = try StoreTestSupport.write(store, key: 3, generation: 1, size: 200_000)
                #expect(truncate(directory + "/bodies/" + cut.id.rawValue, 131_072) == 0)  // whole blocks 0 and 1 left
                let handle = try #require(FileHandle(forWritingAtPath: directory + "/bodies/" + grown.id.rawValue))
                try handle.seekToEnd()
                try handle.write(contentsOf: Data(count: 10))
                try handle.close()
                for (entry, size) in [(cut, 131_072), (grown, 200_010)] {
                    let error = #expect(throws: StorageError.self) { _ = try store.openBody(of: entry.id) }
                    #expect(error?.kind == .corrupted)
                    #expect(error?.message.contains("\(size) bytes where 200000") == true, "\(error?.message ?? "")")
                    #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
                }
                #expect(try store.body(of: intact.id) == StoreTestSupport.expectedBody(intact))
            }
        }

        @Test(
            "A flipped byte in an inline body (edited with the sqlite3 tool): miss and the row removed",
            .enabled(if: FaultEnvironment.sqlite3 != nil, "the sqlite3 command-line tool is not installed"))
        func flippedInlineByte() async throws {
            try await offPool {
                let sqlite3 = try #require(FaultEnvironment.sqlite3)
                let directory = StoreTestSupport.makeDirectory("flip-inline")
                defer { StoreTestSupport.removeDirectory(directory) }
                let store = try DiskStore(.init(directory: directory, inlineBodyLimit: 16 * 1024, log: { _ in }))
                let entry = try StoreTestSupport.write(store, key: 7, generation: 1, size: 5_000)
                let other = try StoreTestSupport.write(store, key: 8, generation: 1, size: 5_000)
                #expect(bodyFiles(store).isEmpty, "5,000 bytes should be inline")
                let body = try #require(StoreTestSupport.expectedBody(entry))
                let flipped = String(body[100] ^ 0x5A, radix: 16)
                let hex = flipped.count == 1 ? "0" + flipped : flipped
                let sql =
                    "UPDATE inline_bodies SET body = CAST(substr(body, 1, 100) || X'\(hex)' || substr(body, 102) AS BLOB) "
                    + "WHERE id = '\(entry.id.rawValue)'; SELECT changes();"
                let edit = try StoreTestSupport.run(sqlite3, [directory + "/index.sqlite", sql])
                #expect(
                    edit.status == 0 && edit.output.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "\(edit)")

                let error = #expect(throws: StorageError.self) { try store.body(of: entry.id) }
                #expect(error?.kind == .corrupted)
                #expect(try store.variants(of: entry.head.primaryKey).isEmpty)
                #expect(try store.body(of: other.id) == StoreTestSupport.expectedBody(other))
                #expect(store.totals().entries == 1)
            }
        }

        // MARK: Unusable index

        /// Stores two entries, releases the store, damages the index with `damage`, reopens.
        private func reopenAfterDamaging(_ name: String, _ damage: (String) throws -> Void) throws {
            let directory = StoreTestSupport.makeDirectory(name)
            defer { StoreTestSupport.removeDirectory(directory) }
            try waitUntilReleased {
                let store = try DiskStore(.init(directory: directory, log: { _ in }))
                try StoreTestSupport.write(store, key: 1, generation: 1, size: 1_000)
                try StoreTestSupport.write(store, key: 2, generation: 1, size: 100_000)
                #expect(store.totals().entries == 2)
                return store
            }
            let index = directory + "/index.sqlite"
            // Left for the next process, holding the latest copy of the index's first page.
            #expect(FileManager.default.fileExists(atPath: index + "-wal"), "the WAL should outlive the store")
            try damage(index)

            let log = StoreTestSupport.Log()
            let store = try DiskStore(.init(directory: directory, log: log.sink))
            #expect(try store.entries().isEmpty)
            #expect(store.totals() == StoreTotals())
            let moved = log.all.filter { $0.contains("moved it to") && $0.contains("index.sqlite.unusable-") }
            #expect(moved.count == 1, "log: \(log.all)")
            let files = try FileManager.default.contentsOfDirectory(atPath: directory)
            // The WAL and its index go with it: a new index never replays the old one's frames.
            for suffix in ["", "-wal", "-shm"] {
                #expect(
                    files.contains { $0.hasPrefix("index.sqlite.unusable-") && $0.hasSuffix(suffix) },
                    "files: \(files)")
            }
            // The new index works, and the orphaned body file of the lost entry is swept.
            let entry = try StoreTestSupport.write(store, key: 3, generation: 1, size: 70_000)
            #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
            store.sweep()
            #expect(bodyFiles(store) == [entry.id.rawValue])
        }

        @Test("An index truncated to 1,000 bytes is moved aside and an empty store opens")
        func truncatedIndex() async throws {
            try await offPool {
                try reopenAfterDamaging("truncated") { index in
                    #expect(truncate(index, 1_000) == 0)
                }
            }
        }

        @Test("An index overwritten with garbage is moved aside and an empty store opens")
        func garbageIndex() async throws {
            try await offPool {
                try reopenAfterDamaging("garbage") { index in
                    var random = SystemRandomNumberGenerator()
                    let garbage = (0..<16_384).map { _ in UInt8.random(in: 0...255, using: &random) }
                    try Data(garbage).write(to: URL(fileURLWithPath: index))
                }
            }
        }

        /// Stores 200 entries of 2,000 bytes (bodies in the index) in `directory`, releases the
        /// store, copies the WAL into the index, and overwrites the index's second half with
        /// garbage: pages of rows, not the first pages (the schema, the totals row), which opening
        /// reads. Returns what was stored.
        private func storeAndDamageRows(_ directory: String) throws -> [StoredEntry] {
            var stored: [StoredEntry] = []
            try waitUntilReleased {
                let store = try DiskStore(.init(directory: directory, log: { _ in }))
                stored = try (0..<200).map { key throws(StorageError) in
                    try StoreTestSupport.write(store, key: key, generation: 1, size: 2_000)
                }
                return store
            }
            let index = directory + "/index.sqlite"
            try SQLiteConnection(path: index, creating: false).execute("PRAGMA wal_checkpoint(TRUNCATE)")
            let size = StoreTestSupport.fileSize(index)
            try #require(size >= 64 * 4096, "the index holds too few pages to damage its rows alone")
            let handle = try #require(FileHandle(forUpdatingAtPath: index))
            defer { try? handle.close() }
            var random = SystemRandomNumberGenerator()
            try handle.seek(toOffset: UInt64(size / 2 / 4096 * 4096))
            try handle.write(
                contentsOf: Data(
                    (0..<(size - size / 2 / 4096 * 4096)).map { _ in UInt8.random(in: 0...255, using: &random) }))
            return stored
        }

        @Test(
            "An index damaged in its middle, found by a query after it opened: moved aside, the query answered from an empty index, and the store goes on"
        )
        func indexDamagedBehindItsOpen() async throws {
            try await offPool {
                let directory = StoreTestSupport.makeDirectory("damaged-rows")
                defer { StoreTestSupport.removeDirectory(directory) }
                let stored = try storeAndDamageRows(directory)
                let log = StoreTestSupport.Log()
                let store = try DiskStore(.init(directory: directory, log: log.sink))
                try #require(
                    !log.all.contains { $0.contains("moved it to") }, "opening found the damage: \(log.all)")

                // Was: "database disk image is malformed" from every listing, lookup and purge.
                #expect(try store.entries().isEmpty)
                let moved = log.all.filter { $0.contains("moved it to") && $0.contains("it is damaged") }
                #expect(moved.count == 1, "log: \(log.all)")
                let files = try FileManager.default.contentsOfDirectory(atPath: directory)
                #expect(files.contains { $0.hasPrefix("index.sqlite.unusable-") }, "files: \(files)")
                #expect(try store.variants(of: stored[150].head.primaryKey).isEmpty)
                let entry = try StoreTestSupport.write(store, key: 1_000, generation: 1, size: 70_000)
                #expect(try store.body(of: entry.id) == StoreTestSupport.expectedBody(entry))
                #expect(store.totals().entries == 1)
                try store.removeAll()
                #expect(store.totals() == StoreTotals())
                #expect(log.all.filter { $0.contains("moved it to") }.count == 1, "log: \(log.all)")
            }
        }

        @Test(
            "Two stores on one index damaged in its middle: the first to find it moves it aside, the other reads the new one rather than moving that aside too"
        )
        func damagedIndexReplacedOnce() async throws {
            try await offPool {
                let directory = StoreTestSupport.makeDirectory("damaged-shared")
                defer { StoreTestSupport.removeDirectory(directory) }
                let stored = try storeAndDamageRows(directory)
                let log = StoreTestSupport.Log()
                let first = try DiskStore(.init(directory: directory, log: log.sink))
                let second = try DiskStore(.init(directory: directory, log: log.sink))
                #expect(try first.variants(of: stored[199].head.primaryKey).isEmpty)
                let entry = try StoreTestSupport.write(first, key: 1_000, generation: 1, size: 2_000)
                // The second still reads the old file, finds it damaged, and finds the new one in its place.
                #expect(try second.entries().map(\.id) == [entry.id])
                #expect(log.all.filter { $0.contains("moved it to") }.count == 1, "log: \(log.all)")
                #expect(
                    log.all.contains { $0.contains("another process has replaced it") }, "log: \(log.all)")
                _ = try second.remove(primaryKey: entry.head.primaryKey)
                #expect(try first.entries().isEmpty)
            }
        }

        @Test(
            "The index's WAL and shared memory deleted while a store writes behind: it reopens the index at its next batch, so another process sees what it stores then and does not sweep its body files"
        )
        func deletedWriteAheadLogReopened() async throws {
            try await offPool {
                let directory = StoreTestSupport.makeDirectory("deleted-wal")
                defer { StoreTestSupport.removeDirectory(directory) }
                let log = StoreTestSupport.Log()
                var configuration = DiskStore.Configuration(directory: directory, log: log.sink)
                configuration.writesBehind = true
                let store = try DiskStore(configuration)
                try StoreTestSupport.write(store, key: 1, generation: 1, size: 70_000)
                try store.flush()
                for file in ["-wal", "-shm"] { #expect(unlink(directory + "/index.sqlite" + file) == 0) }

                let after = try StoreTestSupport.write(store, key: 2, generation: 1, size: 70_000)
                #expect(
                    StoreTestSupport.eventually(within: 20) {
                        log.all.contains {
                            $0.contains("index.sqlite-wal, index.sqlite-shm in")
                                && $0.contains("were deleted or replaced")
                        }
                    }, "log: \(log.all)")
                try store.flush()
                // Another process: it lists what the index holds and sweeps the body files it does not name.
                let verify = try StoreTestSupport.run(StoreTestSupport.stressExecutable(), ["verify", directory])
                #expect(verify.status == 0, "\(verify.errors)")
                // The entry committed into the deleted WAL is lost; the one stored after is not.
                #expect(verify.output.contains("verified 1"), "\(verify.output)")
                #expect(try store.body(of: after.id) == StoreTestSupport.expectedBody(after))
            }
        }

        @Test(
            "An index that cannot be opened again after its files changed: the store fails reads and writes on a stand-in without crashing, tries again at most every 5 s, and recovers once it can"
        )
        func reopenThatFailsIsRetriedLater() async throws {
            try await offPool {
                let directory = StoreTestSupport.makeDirectory("reopen-fails")
                let other = StoreTestSupport.makeDirectory("reopen-fails-other")
                defer {
                    StoreTestSupport.removeDirectory(directory)
                    StoreTestSupport.removeDirectory(other)
                }
                let log = StoreTestSupport.Log()
                var configuration = DiskStore.Configuration(directory: directory, log: log.sink)
                configuration.encryptionKey = EncryptionKey(bytes: Array(repeating: 0xA1, count: 32))
                let store = try DiskStore(configuration)
                let stored = try StoreTestSupport.write(store, key: 1, generation: 1, size: 2_000)
                try waitUntilReleased {
                    var elsewhere = DiskStore.Configuration(directory: other, log: { _ in })
                    elsewhere.encryptionKey = EncryptionKey(bytes: Array(repeating: 0xB2, count: 32))
                    return try DiskStore(elsewhere)
                }
                // Another store's index, sealed with another key, in its place: opening it fails
                // (a key that does not fit says nothing about the index: it is not moved aside).
                let index = directory + "/index.sqlite"
                for file in ["", "-wal", "-shm"] {
                    #expect(rename(index + file, index + ".kept" + file) == 0)
                    _ = rename(other + "/index.sqlite" + file, index + file)
                }
                store.reopenIndexIfItsFilesChanged()
                let failures = { log.all.filter { $0.contains("could not open the cache index again") } }
                #expect(failures().count == 1, "log: \(log.all)")
                #expect((try? store.variants(of: stored.head.primaryKey))?.isEmpty ?? true)
                #expect(throws: StorageError.self) {
                    try StoreTestSupport.write(store, key: 2, generation: 1, size: 2_000)
                }
                // Not tried again (nor logged) before the interval.
                store.reopenIndexIfItsFilesChanged()
                #expect(failures().count == 1, "log: \(log.all)")
                #expect(!log.all.contains { $0.contains("moved it to") }, "log: \(log.all)")

                for file in ["", "-wal", "-shm"] {
                    unlink(index + file)
                    #expect(rename(index + ".kept" + file, index + file) == 0)
                }
                store.reopenRetryAfter.store(0, ordering: .relaxed)
                store.reopenIndexIfItsFilesChanged()
                #expect(try store.variants(of: stored.head.primaryKey).map(\.id) == [stored.id])
                let next = try StoreTestSupport.write(store, key: 3, generation: 1, size: 2_000)
                #expect(try store.body(of: next.id) == StoreTestSupport.expectedBody(next))
            }
        }

        // MARK: Read-only directory

        @Test(
            "A read-only directory: writes fail with advice, reads of stored entries keep working",
            .enabled(
                if: FaultEnvironment.canMakeReadOnly,
                "running as root without the right to mount: root ignores permission bits"))
        func readOnlyDirectory() async throws {
            try await offPool {
                let directory = StoreTestSupport.makeDirectory("read-only")
                defer { StoreTestSupport.removeDirectory(directory) }
                let store = try DiskStore(.init(directory: directory, inlineBodyLimit: 16 * 1024, log: { _ in }))
                let small = try StoreTestSupport.write(store, key: 1, generation: 1, size: 1_000)
                let large = try StoreTestSupport.write(store, key: 2, generation: 1, size: 150_000)

                // Root: a read-only bind mount over the directory. Others: chmod 0500.
                let usesMount = getuid() == 0
                if usesMount {
                    try #require(FaultEnvironment.command(FaultEnvironment.mount, ["--bind", directory, directory]))
                    try #require(
                        FaultEnvironment.command(
                            FaultEnvironment.mount, ["-o", "remount,bind,ro", directory, directory]))
                } else {
                    #expect(chmod(directory + "/bodies", 0o500) == 0 && chmod(directory, 0o500) == 0)
                }
                defer {
                    if usesMount {
                        _ = FaultEnvironment.command(FaultEnvironment.umount, ["-l", directory])
                    } else {
                        _ = chmod(directory, 0o700)
                        _ = chmod(directory + "/bodies", 0o700)
                    }
                }
                // Really read-only for this process?
                let probe = open(directory + "/bodies/probe", O_WRONLY | O_CREAT | O_EXCL, 0o600)
                #expect(probe < 0, "the directory is still writable")
                if probe >= 0 { close(probe) }

                func expectWriteFailure(_ store: some CacheStore, _ size: Int, _ what: String) {
                    let error = #expect(throws: StorageError.self, "\(what)") {
                        try StoreTestSupport.write(store, key: 9, generation: size, size: size)
                    }
                    #expect(error?.kind == .writeFailed, "\(what): \(error.map { "\($0.kind): \($0.message)" } ?? "")")
                    #expect(error?.message.contains("writable") == true, "\(what): \(error?.message ?? "")")
                }

                // The open store: a body file cannot be created; reads are unaffected.
                expectWriteFailure(store, 100_000, "large write through the open store")
                #expect(try store.body(of: small.id) == StoreTestSupport.expectedBody(small))
                #expect(try store.body(of: large.id) == StoreTestSupport.expectedBody(large))
                #expect(try store.body(of: large.id, range: 100_000...100_099).count == 100)

                // A store opened on the read-only directory (while the first keeps the WAL open):
                // it opens, reads work, every kind of write fails with advice.
                let log = StoreTestSupport.Log()
                let readOnly = try DiskStore(.init(directory: directory, inlineBodyLimit: 16 * 1024, log: log.sink))
                #expect(try readOnly.entries().count == 2)
                #expect(try readOnly.body(of: small.id) == StoreTestSupport.expectedBody(small))
                #expect(try readOnly.body(of: large.id) == StoreTestSupport.expectedBody(large))
                expectWriteFailure(readOnly, 1_000, "inline write through a store opened read-only")
                expectWriteFailure(readOnly, 100_000, "large write through a store opened read-only")
                let removal = #expect(throws: StorageError.self) { try readOnly.remove(small.id) }
                #expect(removal?.kind == .writeFailed, "\(removal?.message ?? "")")
                #expect(try readOnly.body(of: small.id) == StoreTestSupport.expectedBody(small))
                #expect(!log.all.contains { $0.contains("moved it to") }, "a read-only index must not be moved aside")
                #expect(!bodyFiles(store).contains { $0.hasSuffix(".tmp") })
            }
        }

        // MARK: Full disk

        @Test("A file size limit (RLIMIT_FSIZE): a large write fails cleanly, reads and later writes work")
        func fileSizeLimit() async {
            // An exit test: the limit is set in a child process, so it cannot reach tests that
            // run in parallel in this one (nor the processes they start).
            await #expect(processExitsWith: .success) {
                func check(_ condition: Bool, _ message: String) {
                    if !condition {
                        FileHandle.standardError.write(Data("fileSizeLimit: \(message)\n".utf8))
                        exit(1)
                    }
                }
                let directory = StoreTestSupport.makeDirectory("fsize")
                defer { StoreTestSupport.removeDirectory(directory) }
                do {
                    let store = try DiskStore(.init(directory: directory, inlineBodyLimit: 16 * 1024, log: { _ in }))
                    let small = try StoreTestSupport.write(store, key: 1, generation: 1, size: 1_000)
                    let large = try StoreTestSupport.write(store, key: 2, generation: 1, size: 300_000)
                    // Ignore SIGXFSZ so that write() fails with EFBIG instead of killing us.
                    signal(SIGXFSZ, SIG_IGN)
                    var saved = rlimit()
                    check(getrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved) == 0, "getrlimit")
                    var limited = saved
                    limited.rlim_cur = rlim_t(min(UInt64(1 << 20), UInt64(saved.rlim_max)))
                    check(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limited) == 0, "setrlimit")
                    do {
                        _ = try StoreTestSupport.write(store, key: 3, generation: 1, size: 3 << 20)
                        check(false, "a 3 MiB write succeeded under a 1 MiB file size limit")
                    } catch let error as StorageError {
                        check(error.kind == .writeFailed, "kind \(error.kind)")
                        check(error.message.contains("file size limit"), "message: \(error.message)")
                    }
                    check(!bodyFiles(store).contains { $0.hasSuffix(".tmp") }, "files: \(bodyFiles(store))")
                    check(try store.variants(of: StressBodies.primaryKey(key: 3)).isEmpty, "failed entry visible")
                    check(try store.body(of: small.id) == StoreTestSupport.expectedBody(small), "small entry")
                    check(try store.body(of: large.id) == StoreTestSupport.expectedBody(large), "large entry")
                    // The limit lifted, the same store writes the same entry.
                    check(setrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved) == 0, "restoring the limit")
                    let stored = try StoreTestSupport.write(store, key: 3, generation: 1, size: 3 << 20)
                    check(try store.body(of: stored.id) == StoreTestSupport.expectedBody(stored), "rewritten entry")
                    check(store.totals().entries == 3, "totals \(store.totals())")
                } catch {
                    check(false, "unexpected error \(error)")
                }
            }
        }

        @Test(
            "A full disk (a 2 MiB tmpfs): writes fail with advice, reads keep working, space freed writes work",
            .enabled(if: FaultEnvironment.canMount, "mounting a tmpfs needs root and the right to mount"))
        func fullDisk() async throws {
            try await offPool {
                let directory = StoreTestSupport.makeDirectory("full")
                defer { StoreTestSupport.removeDirectory(directory) }
                try #require(
                    FaultEnvironment.command(
                        FaultEnvironment.mount, ["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", directory]))
                defer { _ = FaultEnvironment.command(FaultEnvironment.umount, ["-l", directory]) }
                let store = try DiskStore(.init(directory: directory, inlineBodyLimit: 16 * 1024, log: { _ in }))
                let small = try StoreTestSupport.write(store, key: 1, generation: 1, size: 1_000)
                let large = try StoreTestSupport.write(store, key: 2, generation: 1, size: 300_000)

                // Larger than the disk: the body file runs out of space.
                let tooLarge = #expect(throws: StorageError.self) {
                    try StoreTestSupport.write(store, key: 3, generation: 1, size: 4 << 20)
                }
                #expect(tooLarge?.kind == .writeFailed)
                #expect(tooLarge?.message.contains("the disk is full") == true, "\(tooLarge?.message ?? "")")
                #expect(!bodyFiles(store).contains { $0.hasSuffix(".tmp") }, "files: \(bodyFiles(store))")

                // Fill what is left, then every write fails, and reads keep working. Filled again
                // before each write: space the store's background work (its sweep, a checkpoint)
                // gives back meanwhile would otherwise let a write through on a disk no longer full.
                let filler = directory + "/filler"
                let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
                try #require(fd >= 0)
                let chunk = [UInt8](repeating: 0xAB, count: 4_096)
                func fillUp() {
                    for size in [4_096, 512, 1] {
                        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, size) }) > 0 {}
                    }
                }
                var failures: [StorageError] = []
                for (index, size) in [100_000, 20_000, 5_000, 100].enumerated() {
                    fillUp()
                    do {
                        try StoreTestSupport.write(store, key: 10 + index, generation: 1, size: size)
                    } catch let error as StorageError {
                        failures.append(error)
                    }
                }
                close(fd)
                #expect(failures.count >= 2, "writes on a full disk should fail")
                for failure in failures {
                    #expect(failure.kind == .writeFailed, "\(failure.kind): \(failure.message)")
                    #expect(
                        failure.message.contains("disk is full") || failure.message.contains("free space"),
                        "\(failure.message)")
                }
                #expect(try store.body(of: small.id) == StoreTestSupport.expectedBody(small))
                #expect(try store.body(of: large.id) == StoreTestSupport.expectedBody(large))
                #expect(!bodyFiles(store).contains { $0.hasSuffix(".tmp") })

                // Space freed: the store writes again.
                #expect(unlink(filler) == 0)
                let stored = try StoreTestSupport.write(store, key: 20, generation: 1, size: 200_000)
                #expect(try store.body(of: stored.id) == StoreTestSupport.expectedBody(stored))
            }
        }
    }
}
