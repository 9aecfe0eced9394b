extension Vault {
    /// True while a process of this machine refreshes the grant of record
    /// `id` (holds its refresh lock, between taking the sync lease and
    /// storing the new tokens).
    package func refreshInProgress(record id: [UInt8]) -> Bool {
        GrantLock.isHeld(directory: location.directory, record: id)
    }
}
