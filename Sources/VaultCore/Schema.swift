package import VaultStorage

/// The SQLite schema of docs/format.md, as ordered migrations.
enum Schema {
    static let migrations = Migrations([
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
        CREATE TABLE keyslots (slot INTEGER PRIMARY KEY, value BLOB NOT NULL);
        CREATE TABLE records (
            id BLOB PRIMARY KEY, name_hash BLOB NOT NULL, version INTEGER NOT NULL,
            deleted INTEGER NOT NULL, nonce BLOB NOT NULL, ciphertext BLOB NOT NULL) WITHOUT ROWID;
        CREATE UNIQUE INDEX records_live_name ON records(name_hash) WHERE deleted = 0;
        """
    ])

    /// Per-connection settings: durable commits, erased free pages, and
    /// defensive mode against SQL that edits the schema.
    static let connectionPragmas = """
        PRAGMA synchronous = FULL;
        PRAGMA secure_delete = ON;
        PRAGMA trusted_schema = OFF;
        """
}

extension StorageError {
    /// The storage error as seen by a vault user.
    package var vaultError: VaultError {
        switch code {
        case .busy:
            VaultError(.busy, "the vault is busy (another vault process is writing)", remedy: .tryAgainShortly)
        case .corrupt: VaultError(.damaged, "the vault file is damaged: \(reason)")
        case .io: VaultError(.io, "cannot access the vault file: \(reason)")
        case .full: VaultError(.io, "the disk is full: cannot write \(path ?? "the vault file")")
        case .constraint, .sqlite: VaultError(.internalError, "storage error: \(reason)")
        }
    }
}
