internal import CSQLiteHTTPCache
import CacheSemantics

/// A SQLite connection; not thread-safe by itself (DiskStore serializes its use).
final class SQLiteConnection {
    private(set) var handle: OpaquePointer?
    private var statements: [StatementKey: Statement] = [:]
    /// The statements stepped to a row (or to an error) since ``resetStatements()`` last ran:
    /// the only ones that can be busy, so that it does not ask every cached statement.
    private var stepped: [Statement] = []
    let path: String
    /// Called when SQLite reports the index damaged (``isDamage(_:)``): `DiskStore` then moves
    /// it aside and starts an empty one (``DiskStore/replaceDamagedIndex()``).
    var foundDamage: (() -> Void)?

    /// Opens the database at `path`, which must not be a symbolic link; when `creating`, an
    /// absent file is made (on first use). A second connection to an index that must already
    /// exist opens without `creating`: if the file was removed meanwhile (the cache directory
    /// deleted under a running store), it fails rather than leaving an empty index behind.
    init(path: String, creating: Bool) throws(StorageError) {
        self.path = path
        var db: OpaquePointer?
        let flags =
            SQLITE_OPEN_READWRITE | (creating ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW
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
        for statement in statements.values { sqlite3_finalize(statement.handle) }
        statements = [:]
        stepped = []
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    var lastError: String { handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed" }

    func error(_ code: Int32, _ what: String) -> StorageError {
        let kind = Self.kind(of: code)
        noteDamage(code)
        return StorageError(
            kind,
            "\(what) failed in the cache index \(path): \(lastError) (SQLite \(code))\(Self.advice(kind, code))")
    }

    /// Whether `code` says the index file is damaged: a page that does not parse
    /// (`SQLITE_CORRUPT`), or a file that is not a database (`SQLITE_NOTADB`), found by a
    /// query rather than when the index was opened.
    static func isDamage(_ code: Int32) -> Bool {
        code & 0xFF == SQLITE_CORRUPT || code & 0xFF == SQLITE_NOTADB
    }

    /// Tells ``foundDamage`` when `code` is damage.
    private func noteDamage(_ code: Int32) {
        if Self.isDamage(code) { foundDamage?() }
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

    /// What to do about a failure of the disk, a busy index or a damaged one, appended to its
    /// message: the advice that fits SQLite's code, not every cause at once.
    static func advice(_ kind: StorageError.Kind, _ code: Int32) -> String {
        if isDamage(code) { return "; the index is damaged: the store moves it aside and starts an empty one" }
        return switch code & 0xFF {
        case SQLITE_FULL: "; the disk holding the cache directory is full: free space, or lower the cache's capacity"
        case SQLITE_READONLY, SQLITE_PERM:
            "; the cache index is not writable by this user: check the owner and mode of the cache directory and "
                + "its files, and that its file system is not mounted read-only"
        case SQLITE_CANTOPEN:
            "; the cache index could not be opened: check that the cache directory exists and is writable by this user"
        case SQLITE_IOERR: "; the disk reported an I/O error: check the disk and the kernel's log"
        default:
            kind == .busy ? "; another process kept the cache index locked; try again, or raise the busy timeout" : ""
        }
    }

    /// `sql` as an error names it: its first words, enough to tell which statement failed, not
    /// the whole text (a listing's query names sixteen columns).
    static func summary(of sql: String) -> String {
        let words = sql.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        return words.count <= 48 ? words : words.prefix(48) + "…"
    }

    /// Resets every cached statement that was stepped but not run to completion. A
    /// statement left on a row keeps its read transaction (and snapshot) open: later reads
    /// on this connection would see stale data, `BEGIN IMMEDIATE` would fail with
    /// `SQLITE_BUSY_SNAPSHOT` once another process has written, and checkpoints stall.
    func resetStatements() {
        for statement in stepped {
            statement.isListedAsStepped = false
            if statement.isBusy { statement.reset() }
        }
        stepped.removeAll(keepingCapacity: true)
    }

    /// Lists `statement` for the next ``resetStatements()``: it was stepped without finishing.
    fileprivate func noteStepped(_ statement: Statement) {
        guard !statement.isListedAsStepped else { return }
        statement.isListedAsStepped = true
        stepped.append(statement)
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
            noteDamage(code)
            throw StorageError(
                kind,
                "\(text) (SQLite \(code)) in \(path), running `\(Self.summary(of: sql))`\(Self.advice(kind, code))")
        }
    }

    /// A cached prepared statement for `sql`, reset and with bindings cleared. Its parameter
    /// and column names are read once, here, when it is first prepared.
    func statement(_ sql: String) throws(StorageError) -> Statement {
        resetStatements()
        let key = StatementKey(sql)
        if let cached = statements[key] {
            sqlite3_reset(cached.handle)
            sqlite3_clear_bindings(cached.handle)
            return cached
        }
        var prepared: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
        guard code == SQLITE_OK, let prepared else { throw error(code, "preparing `\(Self.summary(of: sql))`") }
        let statement = Statement(handle: prepared, sql: sql, connection: self)
        statements[key] = statement
        return statement
    }

    /// Whether a batch (``beginBatch()``) is open: each ``transaction(_:)`` is then a savepoint
    /// in it, made durable and visible to other connections when the batch commits.
    private(set) var isBatching = false

    /// Opens a transaction that the next ``transaction(_:)`` calls join, until ``commitBatch()``.
    func beginBatch() throws(StorageError) {
        try execute("BEGIN IMMEDIATE")
        isBatching = true
    }

    /// Commits the open batch (rolling it back when the commit fails).
    func commitBatch() throws(StorageError) {
        isBatching = false
        do {
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// Runs `body` in an immediate transaction, committing on success; in a savepoint of the
    /// open batch, when there is one.
    func transaction<T>(_ body: () throws(StorageError) -> T) throws(StorageError) -> T {
        let (begin, end, undo) =
            isBatching
            ? ("SAVEPOINT batched", "RELEASE batched", "ROLLBACK TO batched; RELEASE batched")
            : ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK")
        // Prepared once, as the body's statements are: `sqlite3_exec` would parse each again
        // (a savepoint and its release cost a miss 27k instructions that way).
        try statement(begin).run()
        do {
            let result = try body()
            try statement(end).run()
            return result
        } catch {
            try? execute(undo)
            throw error
        }
    }

    var changes: Int { Int(sqlite3_changes(handle)) }

    /// Makes closing this connection leave the WAL (`-wal`, `-shm`) as it is: without this,
    /// closing the last connection to the index checkpoints the WAL (two `fdatasync`s) and
    /// deletes both files, which the next process then creates again, so every short-lived
    /// process would pay for both. `DiskStore` checkpoints a long WAL itself.
    func leavesWriteAheadLogOnClose() throws(StorageError) {
        let code = csqlite_set_checkpoint_on_close(handle, 0)
        guard code == SQLITE_OK else { throw error(code, "turning off the checkpoint on close") }
    }
}

extension DiskStore {
    /// Stops SQLite keeping memory statistics in this process, so that each allocation it
    /// makes no longer takes a process-wide mutex to count itself: 131 turns of that mutex a
    /// miss stored through a caching proxy, 34 a revalidation. The setting is the whole
    /// process's and SQLite takes it only before its first use, so it is for a program whose
    /// SQLite is the cache's alone (the `httpcache` tool calls it first thing): not for a
    /// library or an app in which other code reads `sqlite3_memory_used()` or sets
    /// `sqlite3_soft_heap_limit64()`, which rely on those statistics. Returns whether SQLite
    /// took it.
    @discardableResult
    public static func stopSQLiteMemoryStatistics() -> Bool {
        csqlite_keep_memory_statistics(0) == SQLITE_OK
    }
}

/// A result column of a prepared statement: its index, found once from its name.
struct Column {
    fileprivate let index: Int32
}

/// The result columns one query reads, each found by name once per prepared statement
/// (``Statement/columns(_:)``), so reading a row looks up no name.
protocol ResultColumns {
    /// Finds each column by name in `statement` (``Statement/column(_:)``).
    init(_ statement: Statement) throws(StorageError)
}

/// A prepared statement, cached by its connection: parameters bound by name (`:key`) and
/// columns read by name, both resolved when it is prepared. A failed bind is reported with
/// the SQL, like every other failure of a statement.
final class Statement {
    let handle: OpaquePointer
    /// The SQL text, for errors.
    let sql: String
    unowned let connection: SQLiteConnection
    /// Parameter names (`:key`) by index - 1.
    private let parameters: [String]
    /// Result column names by index.
    private let columnNames: [String]
    /// The ``ResultColumns`` last resolved here (one reader per statement in practice).
    private var resolvedColumns: AnyObject?
    /// The index in ``parameters`` the next bind looks at first: statements bind their
    /// parameters in the order the SQL names them, so a bind finds its name at once.
    private var nextParameter = 0
    /// Whether the connection lists this statement as stepped (``SQLiteConnection/resetStatements()``).
    fileprivate var isListedAsStepped = false

    init(handle: OpaquePointer, sql: String, connection: SQLiteConnection) {
        self.handle = handle
        self.sql = sql
        self.connection = connection
        parameters = (0..<sqlite3_bind_parameter_count(handle)).map { index in
            sqlite3_bind_parameter_name(handle, index + 1).map { String(cString: $0) } ?? "?\(index + 1)"
        }
        columnNames = (0..<sqlite3_column_count(handle)).map { index in
            sqlite3_column_name(handle, index).map { String(cString: $0) } ?? ""
        }
    }

    /// An error about this statement: what failed (with the SQL) and SQLite's message.
    private func failure(_ code: Int32, _ what: String) -> StorageError {
        connection.error(code, "\(what) `\(SQLiteConnection.summary(of: sql))`")
    }

    /// The index of parameter `name` (`:key`).
    private func parameter(_ name: String) throws(StorageError) -> Int32 {
        let guess = nextParameter < parameters.count ? nextParameter : 0
        guard
            let index = guess < parameters.count && parameters[guess] == name
                ? guess : parameters.firstIndex(of: name)
        else {
            throw StorageError(.index, "the SQL has no parameter \(name): \(sql)")
        }
        nextParameter = index + 1
        return Int32(index + 1)
    }

    /// The result of a bind, as an error carrying the SQL when it failed.
    private func check(_ code: Int32, _ name: String) throws(StorageError) {
        guard code == SQLITE_OK else { throw failure(code, "binding \(name) of") }
    }

    /// Binds all of `value`'s UTF-8 bytes (a length of -1 would stop at a U+0000).
    func bind(_ value: String, to name: String) throws(StorageError) {
        let index = try parameter(name)
        let code = ASCII.withUTF8(value) { bytes in
            guard let base = bytes.baseAddress, !bytes.isEmpty else {
                return sqlite3_bind_text(handle, index, "", 0, csqlite_transient())
            }
            return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) { text in
                sqlite3_bind_text64(handle, index, text, UInt64(bytes.count), csqlite_transient(), UInt8(SQLITE_UTF8))
            }
        }
        try check(code, name)
    }

    func bind(_ value: Int64, to name: String) throws(StorageError) {
        try check(sqlite3_bind_int64(handle, try parameter(name), value), name)
    }

    func bind(_ value: Double, to name: String) throws(StorageError) {
        try check(sqlite3_bind_double(handle, try parameter(name), value), name)
    }

    func bind(_ value: Bool, to name: String) throws(StorageError) { try bind(Int64(value ? 1 : 0), to: name) }

    func bind(_ value: [UInt8]?, to name: String) throws(StorageError) {
        let index = try parameter(name)
        guard let value else {
            try check(sqlite3_bind_null(handle, index), name)
            return
        }
        let code = value.withUnsafeBytes { bytes in
            // A zero-length blob must not be bound as NULL.
            sqlite3_bind_blob64(
                handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(bytes.count),
                csqlite_transient())
        }
        try check(code, name)
    }

    /// Binds `value` to `name` without SQLite copying it (`SQLITE_STATIC`), runs the statement
    /// to its end, and unbinds it: SQLite reads the bytes only while this runs. For a body
    /// kept inline, which a transient binding copied once more.
    func run(binding value: [UInt8], to name: String) throws(StorageError) {
        let index = try parameter(name)
        var failure: StorageError?
        value.withUnsafeBytes { bytes in
            // A zero-length blob must not be bound as NULL.
            let code = sqlite3_bind_blob64(
                handle, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64(bytes.count), nil)
            defer {
                sqlite3_reset(handle)
                sqlite3_bind_null(handle, index)
            }
            do throws(StorageError) {
                try check(code, name)
                try run()
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// The result column `name`, found among the columns the SQL produces.
    func column(_ name: String) throws(StorageError) -> Column {
        guard let index = columnNames.firstIndex(of: name) else {
            throw StorageError(.index, "the SQL has no result column \(name): \(sql)")
        }
        return Column(index: Int32(index))
    }

    /// `C`'s columns, resolved by name on first use and kept with the statement.
    func columns<C: ResultColumns>(_: C.Type) throws(StorageError) -> C {
        if let resolved = resolvedColumns as? ResolvedColumns<C> { return resolved.columns }
        let columns = try C(self)
        resolvedColumns = ResolvedColumns(columns)
        return columns
    }

    /// Steps once: `true` when a row is available.
    func step() throws(StorageError) -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW:
            connection.noteStepped(self)
            return true
        case SQLITE_DONE: return false
        default:
            connection.noteStepped(self)
            throw failure(code, "running")
        }
    }

    /// Ends the statement's read, so the connection holds no snapshot while idle.
    func reset() { sqlite3_reset(handle) }

    /// Whether it was stepped and neither run to its end nor reset (`sqlite3_stmt_busy`).
    var isBusy: Bool { sqlite3_stmt_busy(handle) != 0 }

    /// Steps until done.
    func run() throws(StorageError) {
        while try step() {}
    }

    func int(_ column: Column) -> Int64 { sqlite3_column_int64(handle, column.index) }
    func double(_ column: Column) -> Double { sqlite3_column_double(handle, column.index) }
    func bool(_ column: Column) -> Bool { int(column) != 0 }
    func isNull(_ column: Column) -> Bool { sqlite3_column_type(handle, column.index) == SQLITE_NULL }

    /// All of the column's text, whatever bytes it holds.
    func text(_ column: Column) -> String {
        guard let pointer = sqlite3_column_text(handle, column.index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, column.index))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    /// Calls `body` with the column's text as bytes, copying nothing.
    func withText<R>(_ column: Column, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let count = Int(sqlite3_column_bytes(handle, column.index))
        return body(UnsafeRawBufferPointer(start: sqlite3_column_text(handle, column.index), count: count))
    }

    func blob(_ column: Column) -> [UInt8]? {
        if isNull(column) { return nil }
        let count = Int(sqlite3_column_bytes(handle, column.index))
        guard count > 0, let pointer = sqlite3_column_blob(handle, column.index) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}

/// A cached statement's SQL as the cache's key, hashed by its length and its first and last
/// 16 bytes instead of all of it: a statement is looked up several times a miss, and its SQL
/// is hundreds of bytes. Keys with the same hash are told apart by the whole text.
private struct StatementKey: Hashable {
    let sql: String

    init(_ sql: String) { self.sql = sql }

    func hash(into hasher: inout Hasher) {
        ASCII.withUTF8(sql) { bytes in
            hasher.combine(bytes.count)
            hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.prefix(16))))
            hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.suffix(16))))
        }
    }
}

/// A statement's resolved ``ResultColumns``, kept as an object so that finding them again is a
/// class cast. `C` is left unconstrained: the metadata of `ResolvedColumns<C>`, made at run time
/// for the cast, would otherwise have the Swift runtime check `C: ResultColumns`, one scan of
/// every protocol conformance in the binary for each `C` (a CLI hit made two).
private final class ResolvedColumns<C> {
    let columns: C
    init(_ columns: C) { self.columns = columns }
}
