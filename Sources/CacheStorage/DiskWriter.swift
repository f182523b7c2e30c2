internal import CSQLiteHTTPCache
import CacheSemantics
import CacheSystem
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes one entry: small bodies in memory, larger ones to a locked temporary file. In an
/// encrypted store the file gets sealed blocks (``BlockSealer``) and an inline body is sealed
/// at the commit; its identity is then final.
final class DiskWriter: EntryWriter {
    private let store: DiskStore
    private var head: EntryHead
    private var id = EntryID()
    private var buffer = GatheredBytes()
    /// The checksums of a body in a file, in the clear; only the byte count of one in an
    /// encrypted store's file or kept for the index, which the store checksums where it writes
    /// its row (``DiskStore/CommittedBody``).
    private var checksums = BlockChecksums()
    /// Seals the body file's blocks, from its creation on, in an encrypted store.
    private var sealer: BlockSealer?
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
        do {
            if fd < 0 {
                checksums.count(chunk)
                // No copy of a body that comes in one chunk (GatheredBytes).
                buffer.append(chunk)
                if buffer.count > store.configuration.inlineBodyLimit {
                    fd = try createTemporaryFile()
                    if let sealing = store.sealing {
                        sealer = BlockSealer(sealing.body, owner: id.bytes)
                    }
                    // In a file from here on: checksummed as it is written, from its first byte.
                    checksums = BlockChecksums()
                    sum(buffer.bytes)
                    try writeToFile(buffer.bytes)
                    buffer = GatheredBytes()
                }
            } else {
                sum(chunk)
                try writeToFile(chunk)
            }
        } catch {
            abort()
            throw error
        }
    }

    /// Checksums bytes of a body file, or only counts them in an encrypted store (its sealed
    /// blocks authenticate themselves).
    private func sum(_ bytes: [UInt8]) {
        if store.sealing == nil { checksums.add(bytes) } else { checksums.count(bytes) }
    }

    /// Writes body bytes to the temporary file, sealed in an encrypted store.
    private func writeToFile(_ bytes: [UInt8]) throws(StorageError) {
        if sealer != nil {
            let sealed = sealer!.add(bytes)
            if !sealed.isEmpty { try FileIO.writeAll(fd, sealed, path: temporaryPath) }
        } else {
            try FileIO.writeAll(fd, bytes, path: temporaryPath)
        }
    }

    /// Creates and locks `bodies/<id>.tmp`. A sweep (of this or another process) may remove
    /// the file between its creation and the lock; then another identity is tried.
    private func createTemporaryFile() throws(StorageError) -> Int32 {
        for _ in 0..<8 {
            if let locked = try FileIO.createLocked(temporaryPath) { return locked }
            id = EntryID()
        }
        throw StorageError(
            .writeFailed,
            "cannot keep a temporary body file in \(store.bodiesDirectory): something keeps removing it")
    }

    func commit() throws(StorageError) -> StoredEntry {
        guard !closed else { throw StorageError(.writerClosed, "commit after commit or abort") }
        closed = true
        guard fd >= 0 else {
            let inline =
                store.sealing.map { BlockSealer.seal(buffer.bytes, $0.body, owner: id.bytes) } ?? buffer.bytes
            return try store.commit(head, id: id, size: checksums.totalBytes, body: .inline(inline, checksums: nil))
        }
        let sums = store.sealing == nil ? checksums.finished() : []
        if sealer != nil {
            do {
                try FileIO.writeAll(fd, sealer!.finish(), path: temporaryPath)
            } catch {
                abort()
                throw error
            }
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
                head, id: id, size: checksums.totalBytes, body: .file(checksums: sums), lockedFile: locked)
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
        buffer = GatheredBytes()
        if fd >= 0 {
            unlink(temporaryPath)
            close(fd)
            fd = -1
        }
    }
}
