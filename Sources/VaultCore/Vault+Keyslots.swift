extension Vault {
    /// This vault's keyslots.
    public var keyslots: Keyslots { Keyslots(vault: self) }
}
