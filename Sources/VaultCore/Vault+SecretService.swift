internal import CSecret

extension Vault {
    /// The vault's id, which names its Secret Service item.
    public var vaultID: [UInt8] { header.vaultID }

    /// The vault's id and the ids of its Secret Service slots (their keyring
    /// items), read before unlocking.
    package static func secretServiceSlots(at location: VaultLocation) throws(VaultError) -> (
        vaultID: [UInt8], slotIDs: [[UInt8]]
    ) {
        let locked = try LockedVault(location: location)
        let ids = locked.slots.compactMap { $0.keyslot?.secretServiceID }
        return (locked.header.vaultID, ids)
    }

    /// What can be learned about a vault before unlocking it: its id and
    /// the kinds of its keyslots.
    public static func inspect(at location: VaultLocation) throws(VaultError) -> (
        vaultID: [UInt8], slots: [KeyslotInfo.Kind]
    ) {
        let locked = try LockedVault(location: location)
        let kinds = locked.slots.compactMap { $0.keyslot.map { KeyslotInfo(number: 0, slot: $0).kind } }
        return (locked.header.vaultID, kinds.compactMap { $0 })
    }
}
