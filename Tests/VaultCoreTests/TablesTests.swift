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

    @Test("reading grants by name never makes SQLite compile a statement again")
    func noRecompiles() throws {
        let key = KeySource.keyfile(try TestKeys.keyfileSecret())
        let vault = try Vault.create(at: dir.location, key: key, kdf: .minimum)
        for name in ["one", "two", "three"] { try vault.save(TestKeys.grant(token: name), as: name) }
        try vault.remove("three")
        // Live and removed names, each several times: a statement whose plan
        // hangs on a bound value would be compiled again at each new binding.
        for _ in 0..<4 {
            for name in ["one", "two"] { _ = try vault.load(name) }
            #expect(throws: VaultError.self) { try vault.load("three") }
            try vault.save(TestKeys.grant(token: "three"), as: "three")
            try vault.remove("three")
        }
        #expect(vault.database.reprepareCount == 0)

        // The count sees what it guards against: the partial index's
        // condition compared with a bound value.
        let database = vault.database
        for deleted in [0, 1, 0] {
            let s = try database.prepare("SELECT id FROM records WHERE name_hash = ? AND deleted = ?")
            try s.bind(.blob([1]), .integer(Int64(deleted)))
            _ = try s.step()
        }
        #expect(database.reprepareCount > 0)
    }

    @Test("a grant is found through the index of live names, with nothing to sort")
    func liveNamePlan() throws {
        let key = KeySource.keyfile(try TestKeys.keyfileSecret())
        let vault = try Vault.create(at: dir.location, key: key, kdf: .minimum)
        let s = try vault.database.prepare("EXPLAIN QUERY PLAN " + Tables.newestLive)
        try s.bind(.blob([1]))
        var plan: [String] = []
        while try s.step() { plan.append(s.text(at: 3)) }
        #expect(plan.contains { $0.contains("USING INDEX records_live_name") }, "\(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
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
