import CacheTestSupport
import Foundation
import Testing

@testable import CacheStorage

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// SQLite coordinates processes sharing the index through POSIX advisory locks, and closing
/// any descriptor of a file drops every such lock the process holds on it
/// (<https://www.sqlite.org/howtocorrupt.html#_posix_advisory_locks_canceled_by_a_separate_thread_doing_close_>).
/// The store must never open and close the index or its `-shm` file itself while a connection
/// is open: another process would then take the shared memory for unused, truncate it, and
/// this one would die of a bus error at its next write (seen as `httpcache get` exiting on
/// signal 7 when eight ran at once).
@Suite struct IndexLockTests {
    /// Whether a child process can take a write lock on `length` bytes at `start` of `path`:
    /// it cannot while a connection of this process holds its read lock there.
    private static func childCanLock(_ path: String, start: Int, length: Int) throws -> Bool {
        let script = """
            import fcntl, os, sys
            fd = os.open(sys.argv[1], os.O_RDWR)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, int(sys.argv[3]), int(sys.argv[2]), os.SEEK_SET)
                print("locked")
            except OSError:
                print("refused")
            """
        let result = try StoreTestSupport.run("/usr/bin/python3", ["-c", script, path, "\(start)", "\(length)"])
        try #require(result.exited && result.status == 0, "python3 failed: \(result.errors)")
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines) == "locked"
    }

    @Test("a second store opened on the directory keeps the first one's SQLite locks; the index files are 0600")
    func secondOpenKeepsLocks() async throws {
        try await offPool {
            let directory = StoreTestSupport.makeDirectory("locks")
            defer { StoreTestSupport.removeDirectory(directory) }
            let configuration = DiskStore.Configuration(directory: directory, log: { _ in })
            let first = try DiskStore(configuration)
            try StoreTestSupport.write(first, key: 1, generation: 1, size: 100)
            let shm = directory + "/index.sqlite-shm"
            // SQLite's "dead man switch": byte 128 of the -shm file, read-locked by every
            // process with the shared memory mapped (os_unix.c, UNIX_SHM_DMS).
            #expect(try !Self.childCanLock(shm, start: 128, length: 1))

            let second = try DiskStore(configuration)
            try StoreTestSupport.write(second, key: 2, generation: 1, size: 100)
            #expect(try !Self.childCanLock(shm, start: 128, length: 1))
            #expect(try first.variants(of: StressBodies.primaryKey(key: 2)).count == 1)

            for name in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"] {
                var status = stat()
                #expect(stat(directory + "/" + name, &status) == 0 && status.st_mode & 0o777 == 0o600, "\(name)")
            }
            withExtendedLifetime((first, second)) {}
        }
    }
}
