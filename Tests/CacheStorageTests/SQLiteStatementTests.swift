import CacheTestSupport
import Testing

@testable import CacheStorage

/// The index's statements as GRDB keeps them: parameters bound and columns read by name, and
/// every failure (a bind too) an error that carries the SQL it came from.
@Suite struct SQLiteStatementTests {
    private func connection(_ directory: TemporaryDirectory) throws -> SQLiteConnection {
        let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: true)
        try connection.execute("CREATE TABLE t (key TEXT UNIQUE, size INTEGER)")
        return connection
    }

    @Test func parametersAreBoundAndColumnsReadByName() throws {
        let directory = TemporaryDirectory()
        let connection = try connection(directory)
        defer { connection.close() }
        let insert = try connection.statement("INSERT INTO t (size, key) VALUES (:size, :key)")
        try insert.bind("a", to: ":key")
        try insert.bind(Int64(42), to: ":size")
        try insert.run()
        let select = try connection.statement("SELECT size, key FROM t WHERE key = :key")
        try select.bind("a", to: ":key")
        let (key, size) = (try select.column("key"), try select.column("size"))
        #expect(try select.step())
        #expect(select.text(key) == "a" && select.int(size) == 42)
    }

    @Test("SQLite's memory statistics stay on in a process where it is in use already: the setting is refused, said so")
    func memoryStatisticsAreRefusedOnceInUse() throws {
        let directory = TemporaryDirectory()
        let connection = try connection(directory)
        defer { connection.close() }
        #expect(!DiskStore.stopSQLiteMemoryStatistics())
    }

    @Test func aParameterTheSQLDoesNotHaveIsAnErrorNamingIt() throws {
        let directory = TemporaryDirectory()
        let connection = try connection(directory)
        defer { connection.close() }
        let sql = "SELECT size FROM t WHERE key = :key"
        let select = try connection.statement(sql)
        let error = #expect(throws: StorageError.self) { try select.bind("a", to: ":id") }
        #expect(error?.message.contains(":id") == true && error?.message.contains(sql) == true)
    }

    @Test func aColumnTheSQLDoesNotProduceIsAnErrorNamingIt() throws {
        let directory = TemporaryDirectory()
        let connection = try connection(directory)
        defer { connection.close() }
        let sql = "SELECT size FROM t"
        let select = try connection.statement(sql)
        let error = #expect(throws: StorageError.self) { try select.column("key") }
        #expect(error?.message.contains("key") == true && error?.message.contains(sql) == true)
    }

    @Test func aFailedBindIsAnErrorWithItsSQL() throws {
        let directory = TemporaryDirectory()
        let connection = try connection(directory)
        defer { connection.close() }
        // SQLite refuses a bind while the statement is on a row (SQLITE_MISUSE).
        let sql = "SELECT :value UNION ALL SELECT 2"
        let select = try connection.statement(sql)
        try select.bind(Int64(1), to: ":value")
        #expect(try select.step())
        let error = #expect(throws: StorageError.self) { try select.bind(Int64(3), to: ":value") }
        #expect(error?.message.contains(sql) == true, "\(error?.message ?? "")")
        select.reset()
    }

    @Test func aBlobBoundWithoutACopyIsStoredWholeAndUnboundAfterwards() throws {
        let directory = TemporaryDirectory()
        let connection = try SQLiteConnection(path: directory.path + "/index.sqlite", creating: true)
        defer { connection.close() }
        try connection.execute("CREATE TABLE b (key TEXT UNIQUE, body BLOB)")
        let sql = "INSERT INTO b (key, body) VALUES (:key, :body)"
        for (key, size) in [("empty", 0), ("small", 100), ("pages", 16_384)] {
            var body = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ size) }
            let insert = try connection.statement(sql)
            try insert.bind(key, to: ":key")
            try insert.run(binding: body, to: ":body")
            // What is stored is SQLite's copy: a change to the array afterwards is not.
            if !body.isEmpty { body[0] ^= 0xFF }
            let select = try connection.statement("SELECT body, body IS NULL AS missing FROM b WHERE key = :key")
            try select.bind(key, to: ":key")
            #expect(try select.step())
            #expect(select.int(try select.column("missing")) == 0)  // an empty blob is not NULL
            let stored = select.blob(try select.column("body"))
            if !body.isEmpty { body[0] ^= 0xFF }
            #expect(stored == body)
        }
        // The statement kept no pointer to the last array: run again, its parameter is NULL.
        let again = try connection.statement(sql)
        try again.bind("unbound", to: ":key")
        try again.run()
        let select = try connection.statement("SELECT body IS NULL AS missing FROM b WHERE key = 'unbound'")
        #expect(try select.step())
        #expect(select.int(try select.column("missing")) == 1)
        // A failure while it runs is an error with the SQL, as any other.
        let duplicate = try connection.statement(sql)
        try duplicate.bind("small", to: ":key")
        let error = #expect(throws: StorageError.self) { try duplicate.run(binding: [1, 2, 3], to: ":body") }
        #expect(error?.message.contains(sql) == true, "\(error?.message ?? "")")
    }

    @Test func aFailedStepIsAnErrorWithItsSQL() throws {
        let directory = TemporaryDirectory()
        let connection = try connection(directory)
        defer { connection.close() }
        let sql = "INSERT INTO t (key, size) VALUES (:key, 1)"
        for attempt in 0..<2 {
            let insert = try connection.statement(sql)
            try insert.bind("same", to: ":key")
            if attempt == 0 {
                try insert.run()
            } else {
                let error = #expect(throws: StorageError.self) { try insert.run() }
                #expect(error?.message.contains(sql) == true, "\(error?.message ?? "")")
            }
        }
    }

    /// A statement left on a row holds a read transaction open; taking any statement (or running
    /// SQL) first resets every such one: those stepped to a row or to an error, however often,
    /// and none that ran to its end is touched.
    @Test func statementsLeftOnARowAreResetBeforeTheNextOne() throws {
        let directory = TemporaryDirectory()
        let connection = try connection(directory)
        defer { connection.close() }
        try connection.execute("INSERT INTO t (key, size) VALUES ('a', 1), ('b', 2), ('c', 3)")
        let first = try connection.statement("SELECT key FROM t ORDER BY key")
        #expect(try first.step() && first.step())
        let second = try connection.statement("SELECT size FROM t ORDER BY size")
        #expect(!first.isBusy)
        #expect(try second.step())
        #expect(second.isBusy)
        try connection.execute("UPDATE t SET size = size + 1")
        #expect(!second.isBusy)
        // Taken again, a statement starts from its first row.
        let again = try connection.statement("SELECT key FROM t ORDER BY key")
        let key = try again.column("key")
        #expect(try again.step())
        #expect(again.text(key) == "a")
        _ = try connection.statement("SELECT 1")
        #expect(!again.isBusy)
    }

    /// Statements are cached by their SQL: two texts of one length that differ only in the
    /// middle (the cache hashes the ends) are two statements.
    @Test func statementsDifferingOnlyInTheMiddleAreNotConfused() throws {
        let directory = TemporaryDirectory()
        let connection = try connection(directory)
        defer { connection.close() }
        let padding = String(repeating: " ", count: 40)
        for letter in ["x", "y", "x"] {
            let select = try connection.statement("SELECT \(padding)'\(letter)' AS letter\(padding) FROM t LIMIT 1")
            try connection.execute("INSERT INTO t (key, size) SELECT 'only', 0 WHERE NOT EXISTS (SELECT 1 FROM t)")
            let column = try select.column("letter")
            #expect(try select.step())
            #expect(select.text(column) == letter)
        }
    }
}
