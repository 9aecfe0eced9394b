internal import VaultCore
internal import VaultCrypto

// Keyslots between machines (docs/sync.md, "A new passphrase on every
// machine"): `vault-keys` carries a machine's keyslots for machines that
// join later; once a passphrase changes, the root pins the `vault-keys`
// object by hash, and every other machine takes its passphrase slots, so
// the old passphrase opens nothing anywhere.
extension SyncEngine {
    /// After a sync: takes the passphrase another machine published (the
    /// root's pin moved), and publishes this machine's keyslots when they
    /// changed here (a new passphrase, an added key file), pinning them
    /// when a passphrase changed or the root pins keys already. Costs no
    /// request when nothing changed on either side.
    func reconcileKeys(store: any SyncStore, keys: SyncKeys, root: SyncRoot?, report: inout SyncReport)
        throws(VaultError)
    {
        let zeros = [UInt8](repeating: 0, count: 32)
        var state = try loadSyncState(keys)
        let ownBefore = try vault.keyslots.passphraseSlots()
        let passphraseHash = try SyncEngine.hash(ownBefore)
        // A new passphrase here since the last reconciliation (unknown the
        // first time: then it is only noted).
        let newHere = state.passphraseHash != zeros && passphraseHash != state.passphraseHash
        var changed = false
        if let pin = root?.keysPin, pin != state.pinHash {
            // Another machine published keys. The object must be the one
            // the root (sealed with the vault's key) vouches for; one being
            // replaced meanwhile is taken at a later sync.
            guard let object = try store.get(SyncEngine.keysName), try SyncRoot.hash(object.bytes) == pin else {
                return
            }
            let (header, slots) = try SyncEngine.parseKeysObject(object.bytes)
            guard header.vaultID == vault.header.vaultID else {
                throw VaultError(.tampered, "the store's vault keys belong to another vault")
            }
            let published = Keyslots.passphraseSlots(among: slots)
            if !published.isEmpty && published != ownBefore {
                // Both machines set a new passphrase before either synced:
                // both open the vault, everywhere, until one is chosen.
                var taken = published
                if newHere { taken += ownBefore.filter { !published.contains($0) } }
                try vault.keyslots.adoptPassphraseSlots(taken)
                report.passphraseTaken = true
                changed = true
            }
            state.pinHash = pin
            if !newHere {
                state.keysHash = try SyncRoot.hash(try keysObject())
                state.passphraseHash = try SyncEngine.hash(try vault.keyslots.passphraseSlots())
            }
        }
        let object = try keysObject()
        let objectHash = try SyncRoot.hash(object)
        if objectHash != state.keysHash {
            _ = try store.put(SyncEngine.keysName, object)
            if newHere || root?.keysPin != nil {
                // The root vouches for the new slots; when another writer
                // got in first, the next sync pins them.
                guard try pinKeys(objectHash, store: store, keys: keys) else { return }
                state = try loadSyncState(keys)
                state.pinHash = objectHash
            }
            state.keysHash = objectHash
            state.passphraseHash = try SyncEngine.hash(try vault.keyslots.passphraseSlots())
            changed = true
        } else if state.passphraseHash == zeros {
            state.passphraseHash = passphraseHash
            changed = true
        }
        report.passphrases = try vault.keyslots.passphraseSlots().count
        guard changed else { return }
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.keysHash = state.keysHash
            s.pinHash = state.pinHash
            s.passphraseHash = state.passphraseHash
            try saveSyncState(s, keys)
        }
    }

    /// Writes a root that pins the keys object `hash`, in place of the
    /// root this machine last accepted (compare-and-swap, then read back
    /// twice like a lease). False when the root moved on meanwhile.
    func pinKeys(_ hash: [UInt8], store: any SyncStore, keys: SyncKeys) throws(VaultError) -> Bool {
        let state = try loadSyncState(keys)
        guard let (object, root) = try fetchRoot(store, keys) else { return false }
        let rootHash = try SyncRoot.hash(object.bytes)
        guard rootHash == state.markHash else { return false }
        var next = root
        next.ancestry = Array(([(root.epoch, rootHash)] + root.ancestry).prefix(SyncRoot.maxAncestry))
        next.epoch += 1
        next.writer = state.device
        next.parent = rootHash
        next.devices = next.devices.filter { $0.id != state.device } + [(state.device, next.epoch)]
        next.keysPin = hash
        let bytes = try next.encoded(with: keys)
        let newHash = try SyncRoot.hash(bytes)
        _ = try store.put(
            SyncEngine.rootName, bytes, precondition: object.etag.map(WritePrecondition.matches) ?? .none)
        for pause in [0, SyncEngine.leaseSettle] {
            vault.pacing.sleep(pause)
            guard let check = try store.get(SyncEngine.rootName), try SyncRoot.hash(check.bytes) == newHash else {
                return false
            }
        }
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.markEpoch = next.epoch
            s.markHash = newHash
            s.markParent = next.parent
            try saveSyncState(s, keys)
        }
        return true
    }

    /// BLAKE2b-32 of slots' bytes, each with its length.
    static func hash(_ slots: [[UInt8]]) throws(VaultError) -> [UInt8] {
        var w = ByteWriter()
        for slot in slots {
            w.append(UInt32(slot.count))
            w.append(slot)
        }
        return try Secure.hash(Array("vault.passphrase-slots.v1".utf8) + w.bytes, length: 32)
    }
}
