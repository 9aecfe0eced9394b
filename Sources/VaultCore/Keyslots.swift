public import VaultCrypto
package import VaultStorage

/// The keyslots of an open vault: each wraps the master key for one way of
/// unlocking (passphrase, key file, Secret Service). Changing one rewrites
/// that slot only, never the grants.
public struct Keyslots {
    /// The vault whose keyslots these are.
    public let vault: Vault

    /// Replaces the passphrase slot(s) with one for `newPassphrase`. Grants
    /// are not touched; the change is one transaction, so an interruption
    /// leaves exactly the old or the new passphrase working.
    public func changePassphrase(to newPassphrase: KeySource, kdf: KDFParameters = .default) throws(VaultError) {
        guard case .passphrase = newPassphrase else {
            throw VaultError(.invalidInput, "a passphrase slot needs a passphrase")
        }
        let slot = try Keyslot(
            wrapping: try vault.requireMasterKey(), for: newPassphrase, kdf: kdf, vaultID: vault.header.vaultID)
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            try removeSlots(of: .passphrase)
            try vault.putSlot(nil, slot)
        }
    }

    /// Adds a key-file slot for `secret` (see `Keyfile`).
    public func addKeyfile(_ secret: SecureBytes) throws(VaultError) {
        try add(.keyfile(secret))
    }

    /// Adds a slot that `source` opens; returns its number. A vault has at
    /// most one passphrase slot (`changePassphrase` replaces it).
    @discardableResult
    public func add(_ source: KeySource, kdf: KDFParameters = .default) throws(VaultError) -> Int64 {
        let slot = try Keyslot(
            wrapping: try vault.requireMasterKey(), for: source, kdf: kdf, vaultID: vault.header.vaultID)
        var number: Int64 = 0
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            if slot.kind == .passphrase,
                try Keyslots.slots(in: vault.database).contains(where: { $0.kind == .passphrase })
            {
                throw VaultError(
                    .alreadyExists, "this vault already has a passphrase", remedy: .changePassphrase)
            }
            try vault.putSlot(nil, slot)
            number = try storage { () throws(StorageError) in try vault.database.lastInsertRowID() }
        }
        return number
    }

    /// Removes slot `number`. The last slot that opens the vault is never
    /// removed: nothing could open it afterwards.
    public func remove(_ number: Int64) throws(VaultError) {
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            let slots = try Keyslots.slots(in: vault.database)
            guard slots.contains(where: { $0.number == number }) else {
                throw VaultError(.notFound, "no keyslot \(number)", remedy: .listKeyslots)
            }
            guard slots.contains(where: { $0.number != number && $0.kind != nil }) else {
                throw VaultError(.invalidInput, "keyslot \(number) is the last one; nothing else would open the vault")
            }
            try storage { () throws(StorageError) in
                try vault.database.prepare("DELETE FROM keyslots WHERE slot = ?").run(.integer(number))
            }
        }
    }

    /// The vault's keyslots.
    public func list() throws(VaultError) -> [KeyslotInfo] {
        try vault.read { (_: StateManifest) throws(VaultError) in try Keyslots.slots(in: vault.database) }
    }

    package static func slots(in database: Database) throws(VaultError) -> [KeyslotInfo] {
        try storage { () throws(StorageError) in
            let s = try database.prepare("SELECT slot, value FROM keyslots ORDER BY slot")
            var out: [KeyslotInfo] = []
            while try s.step() {
                let slot = try? Keyslot(decoding: s.blob(at: 1), what: "keyslot")
                out.append(KeyslotInfo(number: s.int64(at: 0), slot: slot))
            }
            return out
        }
    }

    private func removeSlots(of kind: Keyslot.Kind) throws(VaultError) {
        try storage { () throws(StorageError) in
            let s = try vault.database.prepare("SELECT slot, value FROM keyslots")
            var doomed: [Int64] = []
            while try s.step() {
                if let slot = try? Keyslot(decoding: s.blob(at: 1), what: "keyslot"), slot.kind == kind {
                    doomed.append(s.int64(at: 0))
                }
            }
            let d = try vault.database.prepare("DELETE FROM keyslots WHERE slot = ?")
            for n in doomed { try d.run(.integer(n)) }
        }
    }
}

extension Vault {
    /// This vault's keyslots.
    public var keyslots: Keyslots { Keyslots(vault: self) }
}
