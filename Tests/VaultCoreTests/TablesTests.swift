import Testing
import VaultStorage
import VaultTestSupport

@testable import VaultCore

/// The one place a storage error becomes a vault error: each code keeps its
/// message and remedy, and a file of a newer schema is refused by name.
@Suite("storage errors as a vault user sees them")
struct TablesTests {
    let dir = TemporaryDirectory()

    @Test(
        "each storage error code maps to one vault error",
        arguments: [
            (
                StorageError(.busy, "database is locked"), VaultError.Code.busy,
                "the vault is busy (another vault process is writing)", .tryAgainShortly
            ),
            (StorageError(.corrupt, "malformed"), .damaged, "the vault file is damaged: malformed", nil),
            (StorageError(.io, "disk I/O error"), .io, "cannot access the vault file: disk I/O error", nil),
            (StorageError(.full, "full", path: "/v/vault.db"), .io, "the disk is full: cannot write /v/vault.db", nil),
            (StorageError(.full, "full"), .io, "the disk is full: cannot write the vault file", nil),
            (StorageError(.constraint, "UNIQUE failed"), .internalError, "storage error: UNIQUE failed", nil),
            (StorageError(.sqlite, "no such table"), .internalError, "storage error: no such table", nil),
        ] as [(StorageError, VaultError.Code, String, VaultError.Remedy?)])
    func mapping(storage: StorageError, code: VaultError.Code, reason: String, remedy: VaultError.Remedy?) {
        let error = storage.vaultError
        #expect(error.code == code)
        #expect(error.reason == reason)
        #expect(error.remedy == remedy)
    }

    @Test("a vault file of a newer schema is refused, naming the schema")
    func newerSchema() throws {
        let key = KeySource.keyfile(try TestKeys.keyfileSecret())
        _ = try Vault.create(at: dir.location, key: key, kdf: .minimum)
        try Database(path: dir.location.databasePath, mode: .readWrite).execute("PRAGMA user_version = 99")
        #expect { try Vault.open(at: dir.location, key: key) } throws: {
            let error = $0 as? VaultError
            return error?.code == .internalError
                && error?.reason == "storage error: schema 99 is newer than this version of vault"
        }
    }
}
