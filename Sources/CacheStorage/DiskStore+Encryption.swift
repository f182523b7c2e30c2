internal import CSQLiteHTTPCache
import CacheSemantics
import CacheSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// Encryption at rest: which key a store was made with, and changing it (rekey).
//
// An encrypted store's index keeps, in a `meta` table, `key_check`: an HMAC of a fixed label
// under the key (``EncryptionKey/checkValue``), never the key. While a rekey runs it also keeps
// `rekey_to`, the check value of the key being switched to (empty: to no key), and after one
// `previous_key_check`, so that the wrong one of the two keys is named as such.
extension DiskStore {
    static let metaSchema = """
        CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;
        """

    /// The `meta` value `name`, `nil` when there is none (or no `meta` table: a store in the
    /// clear made before there was one).
    static func meta(_ name: String, _ connection: SQLiteConnection) throws(StorageError) -> [UInt8]? {
        let table = try connection.statement("SELECT count(*) AS found FROM sqlite_master WHERE name = 'meta'")
        let found = try table.column("found")
        defer { table.reset() }
        guard try table.step(), table.int(found) > 0 else { return nil }
        let query = try connection.statement("SELECT value FROM meta WHERE name = :name")
        let value = try query.column("value")
        try query.bind(name, to: ":name")
        defer { query.reset() }
        return try query.step() ? query.blob(value) ?? [] : nil
    }

    /// Sets (or, with `nil`, removes) the `meta` value `name`, creating the table when missing.
    static func setMeta(_ name: String, _ value: [UInt8]?, _ connection: SQLiteConnection) throws(StorageError) {
        try connection.execute(metaSchema)
        let statement = try connection.statement(
            value == nil
                ? "DELETE FROM meta WHERE name = :name"
                : "INSERT OR REPLACE INTO meta (name, value) VALUES (:name, :value)"
        )
        try statement.bind(name, to: ":name")
        if let value { try statement.bind(value, to: ":value") }
        try statement.run()
    }

    /// Throws ``StorageError/Kind/encryption`` unless the store behind `connection` was made
    /// with the key of `configuration` (or, both, without one), saying which key it wants.
    static func checkKey(_ configuration: Configuration, _ connection: SQLiteConnection) throws(StorageError) {
        let directory = configuration.directory
        let stored = try meta("key_check", connection)
        let given = configuration.encryptionKey?.checkValue
        if stored == given { return }
        let rekeyTo = try meta("rekey_to", connection)
        let previous = try meta("previous_key_check", connection)
        let message: String
        switch (stored, given) {
        case (nil, _?) where rekeyTo == given:
            message =
                "the cache in \(directory) was being encrypted with this key when that was interrupted: it still "
                + "opens without a key; open it without one and run the rekey again"
        case (nil, _):
            message =
                "the cache in \(directory) was made without encryption, and a key was given: remove the directory "
                + "to start an empty encrypted cache, or encrypt this one with `httpcache rekey --new-key-file FILE`"
        case (_?, nil) where rekeyTo == []:
            message =
                "the cache in \(directory) was being decrypted when that was interrupted: it is still encrypted; give "
                + "its key and run the rekey again"
        case (_?, nil):
            message = "the cache in \(directory) is encrypted and no key was given: give the key it was made with"
        case (_?, _?) where rekeyTo == given:
            message =
                "the key given is the new key of a rekey of the cache in \(directory) that was interrupted before it "
                + "switched: the cache still opens with its old key; give that one and run the rekey again"
        case (_?, _?) where previous == given:
            message =
                "the key given is the one the cache in \(directory) had before it was rekeyed: give its new key"
        case (_?, _?):
            message =
                "the key given does not open the cache in \(directory) (it was encrypted with another key): give the "
                + "key it was made with, or remove the directory to start an empty cache"
        }
        throw StorageError(.encryption, message)
    }

    /// What ``rekey(_:to:)`` did.
    public struct RekeyResult: Sendable, Hashable {
        /// Entries re-encrypted under the new key.
        public var entries: Int
        /// Entries dropped because their head or body no longer authenticated (or was corrupt):
        /// they would have been misses under the old key too.
        public var dropped: Int
    }

    /// Re-encrypts the store in `configuration`'s directory, opened with its
    /// ``Configuration/encryptionKey`` (`nil`: a store in the clear), under `newKey` (`nil`:
    /// into the clear), in place and crash-safe.
    ///
    /// Every entry is written again beside the old one (a body file of a new identity, a new
    /// row) inside one index transaction, which also switches the store's key check; the old
    /// body files are removed after it commits. Killed at any moment, the store opens with the
    /// old key (before the commit: the new files are unreferenced and swept at the next open)
    /// or with the new one (after it), and no entry is lost; opening it with the other key says
    /// which to give. Other processes must not use the store meanwhile: opening it waits for the
    /// rekey, and a process that had it open reads nothing of it afterwards.
    public static func rekey(_ configuration: Configuration, to newKey: EncryptionKey?) throws(StorageError)
        -> RekeyResult
    {
        let old = try DiskStore(configuration)
        try old.flushAccess()
        let directory = old.configuration.directory
        // Opening waits for this lock (``openIndex(_:replacing:because:)``): nobody opens the store meanwhile.
        let lock = open(directory + "/index.lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard lock >= 0 else {
            throw StorageError(.writeFailed, "cannot open \(directory)/index.lock: \(errnoText())")
        }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 && errno == EINTR {}
        // No sweep of this process takes the new body files before the rows naming them commit.
        return try old.sweeping.withLock { _ throws(StorageError) in
            let connection = try openConnection(old.configuration)
            defer { connection.close() }
            try connection.transaction { () throws(StorageError) in
                try setMeta("rekey_to", newKey?.checkValue ?? [], connection)
            }
            var rekeying = Rekeying(old: old, sealing: newKey.map(StoreSealing.init), connection: connection)
            try connection.transaction { () throws(StorageError) in
                try rekeying.run()
                try setMeta("key_check", newKey?.checkValue, connection)
                try setMeta("previous_key_check", configuration.encryptionKey?.checkValue, connection)
                try setMeta("rekey_to", nil, connection)
            }
            old.changes?.bump()
            old.unlinkBodies(rekeying.oldFiles)
            return RekeyResult(entries: rekeying.rekeyed, dropped: rekeying.dropped)
        }
    }
}

/// One rekey's work inside its transaction: each row read with the old store's key, written
/// again under a new identity with the new one.
private struct Rekeying {
    let old: DiskStore
    let sealing: StoreSealing?
    let connection: SQLiteConnection
    var oldFiles: [String] = []
    var rekeyed = 0
    var dropped = 0

    /// Re-encrypts every row; the old rows are deleted, their files left to unlink after the commit.
    mutating func run() throws(StorageError) {
        let list = try connection.statement("SELECT id, in_file FROM entries")
        let (idColumn, inFileColumn) = (try list.column("id"), try list.column("in_file"))
        var rows: [(id: String, inFile: Bool)] = []
        while try list.step() { rows.append((list.text(idColumn), list.bool(inFileColumn))) }
        for row in rows {
            if row.inFile { oldFiles.append(row.id) }
            if let id = EntryID(rawValue: row.id), try rekey(id) { rekeyed += 1 } else { dropped += 1 }
            try DiskStore.deleteRow(row.id, connection)
        }
    }

    /// Writes entry `id` again under a new identity; `false` when it cannot be read.
    private func rekey(_ id: EntryID) throws(StorageError) -> Bool {
        let query = try connection.statement(
            "SELECT \(DiskStore.entryColumns) FROM \(DiskStore.entrySource) WHERE entries.id = :id")
        let columns = try query.columns(DiskStore.EntryColumns.self)
        try query.bind(id.rawValue, to: ":id")
        guard try query.step(), let entry = old.entry(from: query, columns) else {
            query.reset()
            return false
        }
        query.reset()
        guard let location = try DiskStore.location(of: id, connection) else { return false }
        let body: any StoredBody
        do {
            body = try old.body(of: id, at: location) { StorageError(.corrupted, $0) }
        } catch {
            return false
        }
        let newID = EntryID()
        let owner = newID.bytes
        var checksums = BlockChecksums()
        var sealer = sealing.map { BlockSealer($0.body, owner: owner) }
        var stored: [UInt8] = []
        var file: Int32 = -1
        let path = old.bodiesDirectory + "/" + newID.rawValue
        defer { if file >= 0 { close(file) } }
        if location.inline == nil { file = try FileIO.createExclusive(path) }
        do {
            var offset: Int64 = 0
            repeat {
                let chunk = try body.read(offset...(offset + Int64(streamChunkSize) - 1))
                offset += Int64(chunk.count)
                let out: [UInt8]
                if sealer != nil { out = sealer!.add(chunk) } else { checksums.add(chunk); out = chunk }
                if file >= 0 { try FileIO.writeAll(file, out, path: path) } else { stored += out }
            } while offset < body.size
            if sealer != nil {
                let last = sealer!.finish()
                if file >= 0 { try FileIO.writeAll(file, last, path: path) } else { stored += last }
            }
        } catch  where error.kind == .corrupted {
            if file >= 0 { unlink(path) }
            return false
        }
        if file >= 0 && old.configuration.durability == .powerLossSafe { fsync(file) }
        let access = try connection.statement(
            "INSERT OR REPLACE INTO access (id, last_access, hits) VALUES (:id, :last_access, :hits)")
        try DiskStore.insertRow(
            connection, id: newID, head: entry.head, size: body.size,
            checksums: sealing == nil ? checksums.finished() : [], inline: file >= 0 ? nil : stored,
            storedAt: entry.storedAt, pinned: entry.isPinned, sealing: sealing,
            inlineChecksums: old.inlineChecksums)
        try access.bind(newID.rawValue, to: ":id")
        try access.bind(entry.lastAccess, to: ":last_access")
        try access.bind(Int64(entry.hits), to: ":hits")
        try access.run()
        return true
    }
}
