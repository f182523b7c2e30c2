internal import CSQLiteHTTPCache
import CacheSemantics
import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one entry: small bodies in memory, larger ones to a locked temporary file.
final class DiskWriter: EntryWriter {
    private let store: DiskStore
    private var head: EntryHead
    private var id = EntryID.random()
    private var buffer: [UInt8] = []
    private var checksums = BlockChecksums()
    private var fd: Int32 = -1
    private var closed = false

    init(store: DiskStore, head: EntryHead) {
        self.store = store
        self.head = head
    }

    deinit { if !closed { abort() } }

    private var temporaryPath: String { store.bodiesDirectory + "/" + id.rawValue + ".tmp" }
    private var finalPath: String { store.bodiesDirectory + "/" + id.rawValue }

    func append(_ chunk: [UInt8]) throws(StorageError) {
        guard !closed else { throw StorageError(.writerClosed, "append after commit or abort") }
        guard checksums.totalBytes + Int64(chunk.count) <= store.configuration.maximumEntrySize else {
            abort()
            throw StorageError(
                .tooLarge,
                "not stored: the body exceeds the maximum entry size of \(store.configuration.maximumEntrySize) "
                    + "bytes; raise the disk capacity or maximumEntrySize")
        }
        checksums.add(chunk)
        do {
            if fd < 0 {
                buffer += chunk
                if buffer.count > store.configuration.inlineBodyLimit {
                    fd = try createTemporaryFile()
                    try FileIO.writeAll(fd, buffer, path: temporaryPath)
                    buffer = []
                }
            } else {
                try FileIO.writeAll(fd, chunk, path: temporaryPath)
            }
        } catch {
            abort()
            throw error
        }
    }

    /// Creates and locks `bodies/<id>.tmp`. A sweep (of this or another process) may remove
    /// the file between its creation and the lock; then another identity is tried.
    private func createTemporaryFile() throws(StorageError) -> Int32 {
        for _ in 0..<8 {
            if let locked = try FileIO.createLocked(temporaryPath) { return locked }
            id = EntryID.random()
        }
        throw StorageError(
            .writeFailed,
            "cannot keep a temporary body file in \(store.bodiesDirectory): something keeps removing it")
    }

    func commit() throws(StorageError) -> StoredEntry {
        guard !closed else { throw StorageError(.writerClosed, "commit after commit or abort") }
        closed = true
        let sums = checksums.finished()
        guard fd >= 0 else {
            return try store.commit(head, id: id, size: checksums.totalBytes, checksums: sums, inline: buffer)
        }
        // The lock is held until the index commit is done, so a sweep never takes the file: the
        // store closes the descriptor then.
        let locked = fd
        fd = -1
        if store.configuration.durability == .powerLossSafe { fsync(locked) }
        guard rename(temporaryPath, finalPath) == 0 else {
            let reason = errnoText()
            unlink(temporaryPath)
            close(locked)
            throw StorageError(.writeFailed, "cannot rename \(temporaryPath): \(reason)")
        }
        if store.configuration.durability == .powerLossSafe { FileIO.syncDirectory(store.bodiesDirectory) }
        do {
            return try store.commit(
                head, id: id, size: checksums.totalBytes, checksums: sums, inline: nil, lockedFile: locked)
        } catch {
            unlink(finalPath)
            throw error
        }
    }

    func commitIncomplete(facts: [UInt8]) throws(StorageError) -> StoredEntry {
        head.isComplete = false
        head.facts = facts
        return try commit()
    }

    func abort() {
        closed = true
        buffer = []
        if fd >= 0 {
            unlink(temporaryPath)
            close(fd)
            fd = -1
        }
    }
}
