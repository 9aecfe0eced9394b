internal import VaultCrypto
internal import VaultStorage

extension Vault {
    /// This vault's keyslots.
    public var keyslots: Keyslots { Keyslots(vault: self) }
}
