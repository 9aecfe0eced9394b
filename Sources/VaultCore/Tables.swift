internal import VaultStorage

/// The vault file's tables (docs/format.md, "SQLite schema") as the core
/// reads and writes them: every SQL statement of the core, each call
/// throwing `VaultError`. A `StorageError` from the core's own queries
/// becomes a `VaultError` here (through `StorageError.vaultError`) and
/// nowhere else, so callers use plain `try`.
struct Tables {
    let database: Database

    // MARK: Connections

    /// A new vault file at `path` with the schema and the write-ahead log.
    static func create(at path: String) throws(VaultError) -> Database {
        do {
            let database = try Database(path: path, mode: .readWrite)
            try database.execute("PRAGMA journal_mode = WAL")
            try database.execute(Schema.connectionPragmas)
            try Schema.migrations.apply(to: database)
            return database
        } catch {
            throw error.vaultError
        }
    }

    /// A connection to the existing vault file at `path`; `notAVault` when
    /// SQLite finds no database there.
    static func open(at path: String, notAVault: VaultError) throws(VaultError) -> Database {
        do {
            // Long enough to wait out another process's refresh, which holds
            // the write lock for at most one token request (20 s).
            let database = try Database(path: path, mode: .readWrite, busyTimeoutMilliseconds: 45_000)
            try database.execute(Schema.connectionPragmas)
            // Reads the header through SQLite's own descriptor.
            try database.checkHeader()
            return database
        } catch {
            if error.isNotADatabase { throw notAVault }
            throw error.vaultError
        }
    }

    /// Runs `body` in a transaction of `kind`; its own errors pass through.
    func transaction<R>(_ kind: TransactionKind, _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        do {
            return try database.transaction(kind, body)
        } catch {
            switch error {
            case .storage(let e): throw e.vaultError
            case .body(let e): throw e
            }
        }
    }

    /// SQLite's `data_version`, which changes when another connection commits.
    func dataVersion() throws(VaultError) -> Int64 {
        do { return try database.dataVersion() } catch { throw error.vaultError }
    }

    func changeMark() throws(VaultError) -> ChangeMark {
        do { return try database.changeMark() } catch { throw error.vaultError }
    }

    /// The schema version (`user_version`); 0 in a file that is not a vault.
    func schemaVersion() throws(VaultError) -> Int {
        do { return try database.userVersion() } catch { throw error.vaultError }
    }

    // MARK: meta

    /// The value stored under `key` in `meta`, if any.
    func meta(_ key: String) throws(VaultError) -> [UInt8]? {
        do {
            let s = try database.prepare("SELECT value FROM meta WHERE key = ?")
            try s.bind(.text(key))
            return try s.step() ? s.blob(at: 0) : nil
        } catch {
            throw error.vaultError
        }
    }

    /// Stores `value` under `key` in `meta`, replacing what was there.
    func setMeta(_ key: String, _ value: [UInt8]) throws(VaultError) {
        do {
            try database.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)").run(.text(key), .blob(value))
        } catch {
            throw error.vaultError
        }
    }

    // MARK: keyslots

    /// The keyslots' stored bytes with their numbers, in slot order.
    func keyslots() throws(VaultError) -> [StoredKeyslot] {
        do {
            let s = try database.prepare("SELECT slot, value FROM keyslots ORDER BY slot")
            var slots: [StoredKeyslot] = []
            while try s.step() { slots.append(StoredKeyslot(number: s.int64(at: 0), value: s.blob(at: 1))) }
            return slots
        } catch {
            throw error.vaultError
        }
    }

    /// Stores keyslot `number` (a new number when nil); returns its number.
    @discardableResult
    func putKeyslot(_ number: Int64?, _ value: [UInt8]) throws(VaultError) -> Int64 {
        do {
            try database.prepare("INSERT OR REPLACE INTO keyslots (slot, value) VALUES (?, ?)")
                .run(number.map { .integer($0) } ?? .null, .blob(value))
            return try database.lastInsertRowID()
        } catch {
            throw error.vaultError
        }
    }

    /// Removes the keyslots numbered `numbers`.
    func deleteKeyslots(_ numbers: some Sequence<Int64>) throws(VaultError) {
        do {
            let d = try database.prepare("DELETE FROM keyslots WHERE slot = ?")
            for n in numbers { try d.run(.integer(n)) }
        } catch {
            throw error.vaultError
        }
    }

    // MARK: records

    private static let recordColumns = "id, name_hash, version, deleted, nonce, ciphertext"
    /// The unique partial index `records_live_name` allows one live row per
    /// name: no ORDER BY, which would make SQLite sort through a temporary
    /// b-tree (a pager of its own, made and freed at every use).
    static let newestLive =
        "SELECT \(recordColumns) FROM records WHERE name_hash = ? AND deleted = 0"
    private static let newestTombstone =
        "SELECT \(recordColumns) FROM records WHERE name_hash = ? AND deleted = 1 ORDER BY version DESC LIMIT 1"

    /// The newest row stored under `nameHash`, live or tombstone.
    ///
    /// `deleted` is written into the SQL rather than bound: compared with a
    /// bound value, the condition of the partial index `records_live_name`
    /// makes SQLite compile the statement again at every use.
    func record(nameHash: [UInt8], deleted: Bool) throws(VaultError) -> StoredRecord? {
        do {
            let s = try database.prepare(deleted ? Tables.newestTombstone : Tables.newestLive)
            try s.bind(.blob(nameHash))
            return try s.step() ? Tables.record(s) : nil
        } catch {
            throw error.vaultError
        }
    }

    /// The row of record `id`, if any.
    func record(id: [UInt8]) throws(VaultError) -> StoredRecord? {
        do {
            let s = try database.prepare("SELECT \(Tables.recordColumns) FROM records WHERE id = ?")
            try s.bind(.blob(id))
            return try s.step() ? Tables.record(s) : nil
        } catch {
            throw error.vaultError
        }
    }

    /// Every row, by id.
    func records() throws(VaultError) -> [StoredRecord] {
        do {
            let s = try database.prepare("SELECT \(Tables.recordColumns) FROM records ORDER BY id")
            var rows: [StoredRecord] = []
            while try s.step() { rows.append(Tables.record(s)) }
            return rows
        } catch {
            throw error.vaultError
        }
    }

    /// Every record in id order, handed to `body` `count` at a time: a
    /// long list is never held whole.
    func records(inBatchesOf count: Int, _ body: ([StoredRecord]) throws(VaultError) -> Void) throws(VaultError) {
        let s: Statement
        do {
            s = try database.prepare("SELECT \(Tables.recordColumns) FROM records ORDER BY id")
        } catch {
            throw error.vaultError
        }
        func step() throws(VaultError) -> Bool {
            do {
                return try s.step()
            } catch {
                throw error.vaultError
            }
        }
        var rows: [StoredRecord] = []
        while try step() {
            if rows.isEmpty { rows.reserveCapacity(count) }
            rows.append(Tables.record(s))
            if rows.count == count {
                try body(rows)
                rows = []
            }
        }
        if !rows.isEmpty { try body(rows) }
    }

    /// The ids of every record, live or not.
    func recordIDs() throws(VaultError) -> Set<[UInt8]> {
        do {
            let s = try database.prepare("SELECT id FROM records")
            var ids: Set<[UInt8]> = []
            while try s.step() { ids.insert(s.blob(at: 0)) }
            return ids
        } catch {
            throw error.vaultError
        }
    }

    /// Stores `r`, replacing the row of its id.
    func putRecord(_ r: StoredRecord) throws(VaultError) {
        do {
            try database.prepare(
                "INSERT OR REPLACE INTO records (\(Tables.recordColumns)) VALUES (?, ?, ?, ?, ?, ?)"
            ).run(
                .blob(r.id), .blob(r.nameHash), .integer(Int64(bitPattern: r.version)), .integer(r.deleted ? 1 : 0),
                .blob(r.nonce), .blob(r.ciphertext))
        } catch {
            throw error.vaultError
        }
    }

    private static func record(_ s: Statement) -> StoredRecord {
        StoredRecord(
            id: s.blob(at: 0), nameHash: s.blob(at: 1), version: UInt64(bitPattern: s.int64(at: 2)),
            deleted: s.int64(at: 3) != 0, nonce: s.blob(at: 4), ciphertext: s.blob(at: 5))
    }
}

/// One row of the keyslots table: its number and stored bytes.
struct StoredKeyslot: Equatable {
    let number: Int64
    let value: [UInt8]
}
