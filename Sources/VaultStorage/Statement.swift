internal import CSQLite

/// A prepared statement, handed back to its `Database` for reuse on
/// `deinit` (reset, bindings cleared). Keeps its `Database` alive.
public final class Statement {
    private let database: Database
    private let handle: OpaquePointer
    private let sql: String

    init(database: Database, sql: String) throws(StorageError) {
        self.database = database
        self.sql = sql
        var statement: OpaquePointer?
        try database.check(sqlite3_prepare_v2(database.handle, sql, -1, &statement, nil))
        guard let statement else { throw StorageError(.sqlite, "empty statement") }
        handle = statement
    }

    init(database: Database, sql: String, handle: OpaquePointer) {
        self.database = database
        self.sql = sql
        self.handle = handle
    }

    deinit {
        database.recycle(handle, sql: sql)
    }

    /// Binds a value to the 1-based parameter `index`. Blobs and text are
    /// copied by SQLite.
    public func bind(_ value: StorageValue, at index: Int32) throws(StorageError) {
        let rc: Int32
        switch value {
        case .null: rc = sqlite3_bind_null(handle, index)
        case .integer(let v): rc = sqlite3_bind_int64(handle, index, v)
        case .text(let s):
            let utf8 = Array(s.utf8)
            rc = s.withCString { vault_sqlite3_bind_text_copy(handle, index, $0, Int32(utf8.count)) }
        case .blob(let bytes):
            rc = bytes.withUnsafeBytes { p in
                // A zero-length blob must still bind as a blob, not NULL.
                vault_sqlite3_bind_blob_copy(
                    handle, index, p.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(p.count))
            }
        }
        try database.check(rc)
    }

    /// Binds values to parameters 1, 2, 3, ...
    public func bind(_ values: StorageValue...) throws(StorageError) {
        for (i, v) in values.enumerated() { try bind(v, at: Int32(i + 1)) }
    }

    /// Advances; true when a row is available.
    @discardableResult
    public func step() throws(StorageError) -> Bool {
        let rc = try database.check(sqlite3_step(handle), accepting: SQLITE_ROW, or: SQLITE_DONE)
        return rc == SQLITE_ROW
    }

    /// Resets for another execution and clears bindings.
    public func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// Runs to completion, for statements that return no rows.
    public func run(_ values: StorageValue...) throws(StorageError) {
        reset()
        for (i, v) in values.enumerated() { try bind(v, at: Int32(i + 1)) }
        while try step() {}
    }

    /// True when the column holds NULL.
    public func isNull(at column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }

    /// An integer column.
    public func int64(at column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    /// A blob column (empty for NULL).
    public func blob(at column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let p = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: count))
    }

    /// A text column (empty for NULL).
    public func text(at column: Int32) -> String {
        guard let p = sqlite3_column_text(handle, column) else { return "" }
        return String(cString: p)
    }

    /// Rows changed by the last completed statement on this connection.
    public var changes: Int { Int(sqlite3_changes(database.handle)) }
}

/// A value bound to a statement parameter.
public enum StorageValue: Sendable {
    /// SQL NULL.
    case null
    /// A 64-bit integer.
    case integer(Int64)
    /// UTF-8 text.
    case text(String)
    /// Bytes.
    case blob([UInt8])
}
