extension Vault {
    /// The keyslots' stored bytes in slot order: what a sync store's
    /// `vault-keys` object carries, so that another machine joins with the
    /// vault's passphrase or key file (docs/sync.md, "Objects").
    package func storedKeyslots() throws(VaultError) -> [[UInt8]] {
        do {
            let statement = try database.prepare("SELECT value FROM keyslots ORDER BY slot")
            var slots: [[UInt8]] = []
            while try statement.step() { slots.append(statement.blob(at: 0)) }
            return slots
        } catch {
            throw error.vaultError
        }
    }
}
