internal import CSQLite
internal import Glibc

/// One SQLite connection, owned by this object and closed on `deinit`.
///
/// Not thread-safe: use one `Database` per thread, as SQLite's multi-thread
/// mode requires.
public final class Database {
    let handle: OpaquePointer
    /// The file, named in errors such as a full disk.
    public let path: String
    /// Prepared statements not in use, by their SQL: preparing costs more
    /// than the lookups and reads of a fresh token.
    private var idle: [String: OpaquePointer] = [:]

    /// How the file is opened.
    public enum Mode: Sendable {
        /// The file must exist.
        case readWrite
        /// The file may be created.
        case readWriteCreate
    }

    /// Opens the database at `path`. `busyTimeoutMilliseconds` bounds how
    /// long a statement waits for another process's lock.
    public init(path: String, mode: Mode, busyTimeoutMilliseconds: Int32 = 10_000) throws(StorageError) {
        var loadError: UnsafePointer<CChar>?
        guard vault_sqlite_load(&loadError) == 0 else {
            throw StorageError(.sqlite, loadError.map { String(cString: $0) } ?? "cannot load libsqlite3", path: path)
        }
        var flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        if mode == .readWriteCreate { flags |= SQLITE_OPEN_CREATE }
        // Refuse to follow a symbolic link at the vault's own path.
        flags |= SQLITE_OPEN_NOFOLLOW
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            let system = db.map { sqlite3_system_errno($0) } ?? 0
            sqlite3_close_v2(db)
            throw Database.error(rc, message, systemErrno: system, path: path)
        }
        handle = db
        self.path = path
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
        sqlite3_extended_result_codes(db, 1)
    }

    deinit {
        for statement in idle.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// True while a transaction is open on this connection.
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// Runs one or more statements that take no parameters and return no rows.
    public func execute(_ sql: String) throws(StorageError) {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        if rc != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_free(message)
            throw Database.error(rc, text, systemErrno: sqlite3_system_errno(handle), path: path)
        }
    }

    /// Prepares a statement, or hands out the one prepared for the same
    /// SQL before (reset, bindings cleared) when no one is using it.
    public func prepare(_ sql: String) throws(StorageError) -> Statement {
        if let statement = idle.removeValue(forKey: sql) {
            return Statement(database: self, sql: sql, handle: statement)
        }
        return try Statement(database: self, sql: sql)
    }

    /// SQLite's `data_version`: it changes when another connection (of this
    /// process or another) commits a change, never for this one's own.
    public func dataVersion() throws(StorageError) -> Int64 {
        let statement = try prepare("PRAGMA data_version")
        guard try statement.step() else { throw StorageError(.sqlite, "no data_version") }
        return statement.int64(at: 0)
    }

    /// What changes whenever the file's content may have changed: SQLite's
    /// `data_version` (commits of other connections) with the rows this
    /// connection changed since it opened (its own writes, committed or
    /// rolled back). Read first in a transaction, it also starts the read
    /// that the transaction's statements see.
    public func changeMark() throws(StorageError) -> ChangeMark {
        ChangeMark(dataVersion: try dataVersion(), ownChanges: Int64(sqlite3_total_changes(handle)))
    }

    /// Makes SQLite read the file's header (and schema) now, so a file that
    /// is not a database fails here with `isNotADatabase` rather than later.
    /// Nothing is written.
    public func checkHeader() throws(StorageError) {
        let statement = try prepare("PRAGMA schema_version")
        _ = try statement.step()
    }

    /// How many times SQLite compiled again the statements this connection
    /// keeps for reuse. A statement whose plan depends on a bound value
    /// (a parameter compared with the condition of a partial index, or a
    /// `LIKE` pattern) is compiled again each time it is bound anew; the
    /// statements of a read should never be, and a test holds them to it.
    package var reprepareCount: Int {
        idle.values.reduce(0) { $0 + Int(sqlite3_stmt_status($1, SQLITE_STMTSTATUS_REPREPARE, 0)) }
    }

    /// Takes a statement back from `Statement.deinit` for reuse.
    func recycle(_ statement: OpaquePointer, sql: String) {
        sqlite3_reset(statement)
        sqlite3_clear_bindings(statement)
        if idle.count < 32, idle[sql] == nil {
            idle[sql] = statement
        } else {
            sqlite3_finalize(statement)
        }
    }

    /// Runs `body` inside a transaction: committed when it returns, rolled
    /// back when it throws. `.immediate` takes the write lock at once, so
    /// concurrent writers queue on the busy timeout instead of failing late.
    public func transaction<R, E: Error>(
        _ kind: TransactionKind = .deferred, _ body: () throws(E) -> R
    ) throws(TransactionError<E>) -> R {
        do {
            try control(kind == .immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED")
        } catch {
            throw .storage(error)
        }
        let result: R
        do {
            result = try body()
        } catch {
            try? control("ROLLBACK")
            throw .body(error)
        }
        do {
            try control("COMMIT")
        } catch {
            try? control("ROLLBACK")
            throw .storage(error)
        }
        return result
    }

    /// Runs a transaction statement through the statement cache, so a
    /// connection that serves many requests (the agent's) does not parse
    /// it again each time, as `sqlite3_exec` would.
    private func control(_ sql: String) throws(StorageError) {
        try prepare(sql).run()
    }

    /// The rowid of the last row this connection inserted.
    public func lastInsertRowID() throws(StorageError) -> Int64 { sqlite3_last_insert_rowid(handle) }

    /// The value of `PRAGMA user_version`, used as the schema version.
    public func userVersion() throws(StorageError) -> Int {
        let statement = try prepare("PRAGMA user_version")
        guard try statement.step() else { return 0 }
        return Int(statement.int64(at: 0))
    }

    /// Maps an SQLite result code to a typed error. A full disk shows as
    /// SQLITE_FULL, or as an I/O error whose system errno is ENOSPC (a
    /// write to the WAL or a sync that found no space).
    static func error(_ rc: Int32, _ message: String, systemErrno: Int32, path: String) -> StorageError {
        let primary = rc & 0xff
        let code: StorageError.Code
        switch primary {
        case SQLITE_FULL: code = .full
        case SQLITE_IOERR where systemErrno == ENOSPC || systemErrno == EDQUOT: code = .full
        case SQLITE_BUSY, SQLITE_LOCKED: code = .busy
        case SQLITE_CORRUPT, SQLITE_NOTADB: code = .corrupt
        case SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_READONLY, SQLITE_AUTH: code = .io
        case SQLITE_CONSTRAINT: code = .constraint
        default: code = .sqlite
        }
        return StorageError(code, resultCode: primary, message.lowercased(), path: path)
    }

    /// Turns a result code into a thrown error unless it is `accepted` or
    /// `alsoAccepted`. (Two codes rather than a set: a `Set` here is
    /// instantiated at run time, a conformance lookup every process pays.)
    @discardableResult
    func check(_ rc: Int32, accepting accepted: Int32 = SQLITE_OK, or alsoAccepted: Int32? = nil)
        throws(StorageError) -> Int32
    {
        guard rc == accepted || rc == alsoAccepted else {
            throw Database.error(
                rc, String(cString: sqlite3_errmsg(handle)), systemErrno: sqlite3_system_errno(handle), path: path)
        }
        return rc
    }
}

extension StorageError {
    /// True when SQLite found the file is not a database at all (a foreign
    /// or overwritten file), as opposed to a database that is damaged.
    public var isNotADatabase: Bool { resultCode == SQLITE_NOTADB }
}

/// How a transaction starts.
public enum TransactionKind: Sendable {
    /// Takes locks as statements need them (readers).
    case deferred
    /// Takes the write lock at once (writers).
    case immediate
}

/// A failure inside `Database.transaction`: either storage itself, or the body.
public enum TransactionError<E: Error>: Error {
    /// Beginning or committing failed.
    case storage(StorageError)
    /// The body threw; the transaction was rolled back.
    case body(E)
}

/// Two equal marks of one connection (`Database.changeMark`) mean that
/// nothing was written to the file between them.
public struct ChangeMark: Equatable, Sendable {
    let dataVersion: Int64
    let ownChanges: Int64
}
