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
}
