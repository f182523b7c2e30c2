internal import CSQLiteHTTPCache

/// A SQLite connection; not thread-safe by itself (DiskStore serializes its use).
final class SQLiteConnection {
    private(set) var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    let path: String

    /// Opens (creating) the database at `path`, which must not be a symbolic link.
    init(path: String) throws(StorageError) {
        self.path = path
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
        let code = sqlite3_open_v2(path, &db, flags, nil)
        handle = db
        guard code == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            handle = nil
            throw StorageError(.index, "cannot open the cache index \(path): \(message) (SQLite \(code))")
        }
        sqlite3_extended_result_codes(db, 1)
    }

    deinit { close() }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    var lastError: String { handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed" }

    func error(_ code: Int32, _ what: String) -> StorageError {
        let kind = Self.kind(of: code)
        return StorageError(
            kind, "\(what) failed in the cache index \(path): \(lastError) (SQLite \(code))\(Self.advice(kind))")
    }

    /// Failures of the disk itself are write failures, a lock held too long is `busy`;
    /// everything else is the index's.
    static func kind(of code: Int32) -> StorageError.Kind {
        switch code & 0xFF {
        case SQLITE_FULL, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_PERM: .writeFailed
        case SQLITE_BUSY, SQLITE_LOCKED, SQLITE_PROTOCOL: .busy
        default: .index
        }
    }

    /// What to do about a write failure or a busy index, appended to its message.
    static func advice(_ kind: StorageError.Kind) -> String {
        switch kind {
        case .writeFailed:
            "; check that the cache directory is writable and its disk has free space; nothing was changed"
        case .busy:
            "; another process kept the cache index locked; try again, or raise the busy timeout"
        default:
            ""
        }
    }

    /// Resets every cached statement that was stepped but not run to completion. A
    /// statement left on a row keeps its read transaction (and snapshot) open: later reads
    /// on this connection would see stale data, `BEGIN IMMEDIATE` would fail with
    /// `SQLITE_BUSY_SNAPSHOT` once another process has written, and checkpoints stall.
    func resetStatements() {
        for statement in statements.values where sqlite3_stmt_busy(statement) != 0 { sqlite3_reset(statement) }
    }

    /// Runs SQL without results (several statements allowed).
    func execute(_ sql: String) throws(StorageError) {
        resetStatements()
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        if code != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? lastError
            sqlite3_free(message)
            let kind = Self.kind(of: code)
            throw StorageError(kind, "\(text) (SQLite \(code)) in \(path)\(Self.advice(kind))")
        }
    }

    /// A cached prepared statement for `sql`, reset and with bindings cleared.
    func statement(_ sql: String) throws(StorageError) -> Statement {
        resetStatements()
        if let cached = statements[sql] {
            sqlite3_reset(cached)
            sqlite3_clear_bindings(cached)
            return Statement(handle: cached, connection: self)
        }
        var prepared: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
        guard code == SQLITE_OK, let prepared else { throw error(code, "preparing a statement") }
        statements[sql] = prepared
        return Statement(handle: prepared, connection: self)
    }

    /// Runs `body` in an immediate transaction, committing on success.
    func transaction<T>(_ body: () throws(StorageError) -> T) throws(StorageError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    var changes: Int { Int(sqlite3_changes(handle)) }
}

/// A prepared statement with typed bind and column access.
struct Statement {
    let handle: OpaquePointer
    let connection: SQLiteConnection

    /// Binds all of `value`'s UTF-8 bytes (a length of -1 would stop at a U+0000).
    func bind(_ index: Int32, _ value: String) {
        var value = value
        value.withUTF8 { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                sqlite3_bind_text(handle, index, "", 0, csqlite_transient())
                return
            }
            base.withMemoryRebound(to: CChar.self, capacity: bytes.count) { text in
                _ = sqlite3_bind_text64(
                    handle, index, text, UInt64(bytes.count), csqlite_transient(), UInt8(SQLITE_UTF8))
            }
        }
    }

    func bind(_ index: Int32, _ value: Int64) { sqlite3_bind_int64(handle, index, value) }
    func bind(_ index: Int32, _ value: Double) { sqlite3_bind_double(handle, index, value) }

    func bind(_ index: Int32, _ value: [UInt8]?) {
        guard let value else {
            sqlite3_bind_null(handle, index)
            return
        }
        value.withUnsafeBytes { bytes in
            // A zero-length blob must not be bound as NULL.
            _ = sqlite3_bind_blob64(
                handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(bytes.count),
                csqlite_transient())
        }
    }

    /// Steps once: `true` when a row is available.
    func step() throws(StorageError) -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default: throw connection.error(code, "a statement")
        }
    }

    /// Ends the statement's read, so the connection holds no snapshot while idle.
    func reset() { sqlite3_reset(handle) }

    /// Steps until done.
    func run() throws(StorageError) {
        while try step() {}
    }

    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func double(_ column: Int32) -> Double { sqlite3_column_double(handle, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    /// All of the column's text, whatever bytes it holds.
    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(handle, column) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    func blob(_ column: Int32) -> [UInt8]? {
        if isNull(column) { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let pointer = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
