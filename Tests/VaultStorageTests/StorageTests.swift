import Foundation
import Testing

@testable import VaultStorage

@Suite("SQLite wrapper")
final class StorageTests {
    /// A directory of this test's own, removed when the test ends.
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("vault-storage-\(UUID().uuidString)")
    let path: String

    init() throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("test.db").path
    }

    deinit {
        try? FileManager.default.removeItem(at: directory)
    }

    func open(timeout: Int32 = 10_000) throws -> Database {
        let db = try Database(path: path, mode: .readWriteCreate, busyTimeoutMilliseconds: timeout)
        try db.execute("PRAGMA journal_mode = WAL")
        return db
    }

    @Test("values bind and read back, including empty blobs and NULL")
    func roundTrip() throws {
        let db = try open()
        try db.execute("CREATE TABLE t (a, b, c, d)")
        try db.prepare("INSERT INTO t VALUES (?, ?, ?, ?)").run(.integer(-5), .text("héllo"), .blob([]), .null)
        let s = try db.prepare("SELECT a, b, c, d, typeof(c) FROM t")
        #expect(try s.step())
        #expect(s.int64(at: 0) == -5)
        #expect(s.text(at: 1) == "héllo")
        #expect(s.blob(at: 2) == [])
        #expect(s.isNull(at: 3))
        #expect(s.text(at: 4) == "blob")
        #expect(try !s.step())
    }

    @Test("a throwing transaction body rolls back")
    func rollback() throws {
        let db = try open()
        try db.execute("CREATE TABLE t (x)")
        struct Boom: Error {}
        #expect(throws: TransactionError<Boom>.self) {
            try db.transaction(.immediate) { () throws(Boom) in
                try? db.execute("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        let s = try db.prepare("SELECT count(*) FROM t")
        try s.step()
        #expect(s.int64(at: 0) == 0)
    }

    @Test("SQL errors become typed errors")
    func errors() throws {
        let db = try open()
        #expect { try db.execute("SELEKT 1") } throws: { ($0 as? StorageError)?.code == .sqlite }
        try db.execute("CREATE TABLE u (x UNIQUE); INSERT INTO u VALUES (1)")
        #expect { try db.execute("INSERT INTO u VALUES (1)") } throws: { ($0 as? StorageError)?.code == .constraint }
        #expect { try Database(path: "/nonexistent/dir/x.db", mode: .readWrite) } throws: {
            ($0 as? StorageError)?.code == .io
        }
    }

    @Test("a second writer waits, then reports busy after its timeout")
    func busy() throws {
        let a = try open()
        try a.execute("CREATE TABLE t (x)")
        let b = try open(timeout: 50)
        try a.execute("BEGIN IMMEDIATE")
        #expect { try b.execute("BEGIN IMMEDIATE") } throws: { ($0 as? StorageError)?.code == .busy }
        try a.execute("COMMIT")
        try b.execute("BEGIN IMMEDIATE; COMMIT")
    }

    @Test("migrations apply once, in order, and refuse a newer schema")
    func migrations() throws {
        let db = try open()
        let m = Migrations(["CREATE TABLE a (x)", "CREATE TABLE b (x)"])
        try m.apply(to: db)
        try m.apply(to: db)
        #expect(try db.userVersion() == 2)
        #expect { try Migrations(["CREATE TABLE a (x)"]).apply(to: db) } throws: {
            ($0 as? StorageError)?.reason.contains("newer") == true
        }
    }

    @Test("a symbolic link at the database path is refused")
    func noFollow() throws {
        let target = path + ".target"
        _ = try open()
        try FileManager.default.moveItem(atPath: path, toPath: target)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
        #expect(throws: StorageError.self) { try Database(path: path, mode: .readWrite) }
    }
}
