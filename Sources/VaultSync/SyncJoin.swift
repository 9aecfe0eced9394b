internal import FoundationEssentials
public import VaultCore
public import VaultCrypto
public import VaultHTTP

extension SyncEngine {
    /// Creates this machine's vault from a store another machine syncs to:
    /// reads `vault-keys`, unlocks one of its keyslots with `key` (the
    /// vault's passphrase or key file), creates the local file with the same
    /// identity and key, and syncs.
    public static func join(
        at location: VaultLocation, url: String, user: String?, password: SecureBytes?, key: KeySource,
        transport: any HTTPTransport, time: any TimeSource = SystemTime()
    ) throws(VaultError) -> (Vault, SyncReport) {
        try join(
            at: location, url: url, user: user, password: password, key: key, transport: transport, time: time,
            pacing: .system, trace: nil)
    }

    /// `join` with the new vault's handle waiting through `pacing` and
    /// telling `trace` what it merges (a simulation's machine).
    package static func join(
        at location: VaultLocation, url: String, user: String?, password: SecureBytes?, key: KeySource,
        transport: any HTTPTransport, time: any TimeSource, pacing: Pacing,
        trace: (@Sendable (SyncTraceEvent) -> Void)?
    ) throws(VaultError) -> (Vault, SyncReport) {
        if Vault.exists(at: location) {
            throw VaultError(.alreadyExists, "a vault already exists at \(location.databasePath)")
        }
        let probe = SyncState(url: url, user: user, password: password?.unsafeCopyToArray() ?? [], device: [])
        let store = try SyncEngine.store(
            for: probe, transport: transport, timeout: SyncEngine.defaultStoreTimeout, pacing: pacing)
        try store.checkUsable()
        guard let object = try store.get(SyncEngine.keysName) else { throw noVault(at: url) }
        let (header, slots) = try parseKeysObject(object.bytes)
        var masterKey: SecureBytes?
        var tried = 0
        for blob in slots {
            guard let slot = try? Keyslot(decoding: blob, what: "a keyslot of the store"), slot.accepts(key) else {
                continue
            }
            tried += 1
            if let mk = try slot.unwrap(with: key, vaultID: header.vaultID) {
                masterKey = mk
                break
            }
        }
        guard let masterKey else {
            let passphrase: Bool
            if case .passphrase = key { passphrase = true } else { passphrase = false }
            let reason =
                tried == 0
                ? (passphrase
                    ? "the store's vault has no passphrase; it opens with a key file"
                    : "the store's vault has no keyslot of that kind")
                : (passphrase
                    ? "wrong passphrase for the store's vault" : "the key file does not open the store's vault")
            throw VaultError(.wrongKey, reason, remedy: .joinWithOtherKey(passphrase: passphrase))
        }
        let vault = try Vault.create(at: location, header: header, masterKey: masterKey, slots: slots, time: time)
        vault.pacing = pacing
        vault.syncTrace = trace
        do {
            let engine = SyncEngine(vault: vault, transport: transport)
            try engine.setRemote(url: url, user: user, password: password)
            try engine.noteJoinedKeyslots()
            return (vault, try engine.sync())
        } catch {
            // Leave no half-joined vault behind: the store still has it all.
            for suffix in ["", "-wal", "-shm"] { FileSystem.remove(location.databasePath + suffix) }
            throw error
        }
    }

    /// What a join says of a store address that holds no vault.
    static func noVault(at url: String) -> VaultError {
        VaultError(
            .notFound,
            "the store has no vault at \(SyncEngine.displayName(url)) (no \(SyncEngine.keysName) there): the "
                + "address may be mistyped, or no machine has synced the vault there yet",
            remedy: .publishFromAnotherMachine)
    }

    /// Refuses keyslots that could leave a joined vault nothing opens: none
    /// at all, a damaged one, or none that a passphrase or key file opens
    /// (a Secret Service slot's key stays in the other machine's keyring).
    /// A slot cannot be opened without its passphrase or key file, which a
    /// pairing join does not have: what it can check is done here.
    package static func checkJoinSlots(_ slots: [[UInt8]]) throws(VaultError) {
        guard !slots.isEmpty else {
            throw VaultError(.damaged, "the vault's keys carry no keyslot: the joined vault would not open")
        }
        var usable = 0
        for blob in slots {
            let slot: Keyslot
            do { slot = try Keyslot(decoding: blob, what: "a keyslot of the store") } catch {
                throw VaultError(.damaged, "the vault's keys carry a damaged keyslot: \(error.reason)")
            }
            if slot.isPortable { usable += 1 }
        }
        guard usable > 0 else {
            throw VaultError(
                .damaged, "the vault's keys carry no passphrase or key file slot: the joined vault would not open")
        }
    }

    package static func parseKeysObject(_ bytes: [UInt8]) throws(VaultError) -> (Header, [[UInt8]]) {
        var r = ByteReader(bytes, what: "the store's keys")
        do { try r.expect("vault-sk") } catch {
            throw VaultError(.damaged, "the store's keys object is not a vault's (wrong magic number)")
        }
        guard try r.u16() == 1 else { throw VaultError(.unsupported, "the store's keys object has an unknown version") }
        let header = try Header(decoding: try r.read(Int(try r.u32())))
        let count = Int(try r.u16())
        guard count <= 64 else { throw VaultError(.damaged, "the store's keys object lists too many keyslots") }
        var slots: [[UInt8]] = []
        for _ in 0..<count { slots.append(try r.read(Int(try r.u32()))) }
        try r.finish()
        return (header, slots)
    }
}

extension SyncEngine {
    static let pairingLifetime: UInt64 = 600

    /// The store object name and sealing key of a pairing code.
    static func pairingKeys(_ code: SecureBytes) throws(VaultError) -> (name: String, key: SecureBytes) {
        let name = try Secure.hash(secret: code, personalization: Array("vault.pairname".utf8), length: 16)
        let key = try Secure.hash(secret: code, personalization: Array("vault.pair".utf8), length: 32)
        return ("p-" + name.unsafeCopyToArray().hex, key)
    }

    /// Puts a one-time pairing offer in the store and returns its code: the
    /// master key, the vault header and this machine's high-water mark,
    /// sealed under a key derived from a random 128-bit code, expiring after
    /// ten minutes (docs/sync.md, "Joining").
    public func createPairingOffer() throws(VaultError) -> String {
        let keys = try syncKeys()
        let state = try loadSyncState(keys)
        guard state.markEpoch > 0 else {
            throw VaultError(.invalidInput, "this vault has not synced yet", remedy: .syncFirst)
        }
        let raw = try Secure.randomBytes(16)
        let code = try Secure.copy(raw)
        let (name, key) = try SyncEngine.pairingKeys(code)
        var w = ByteWriter()
        w.append(UInt64(max(0, vault.time.now().epochSeconds)) + SyncEngine.pairingLifetime)
        let headerBlob = try vault.header.encoded()
        w.append(UInt32(headerBlob.count))
        w.append(headerBlob)
        var mk = try vault.requireMasterKey().unsafeCopyToArray()
        w.append(mk)
        secureZero(&mk)
        w.append(state.markEpoch)
        w.append(state.markHash)
        w.append(state.markParent)
        // This machine's own keyslots, which open the vault it runs: the
        // joiner takes them rather than trusting the store's `vault-keys`.
        let slots = try keysObject()
        w.append(UInt32(slots.count))
        w.append(slots)
        var plain = w.bytes
        defer { secureZero(&plain) }
        let offer = try Secure.seal(try Secure.copy(plain), key: key, associatedData: Array("vault.pair.v1".utf8))
        let sealed = offer.nonce + offer.ciphertext
        let store = try store(for: state)
        _ = try store.put(name, sealed, precondition: .absent)
        return Base64.encodeString(raw, .urlSafeUnpadded)
    }

    /// Joins with a pairing code from `createPairingOffer`: the new vault has
    /// the store's keyslots (it opens with the vault's passphrase or key
    /// files) and starts from the offering machine's high-water mark. The
    /// offer is deleted.
    public static func join(
        at location: VaultLocation, url: String, user: String?, password: SecureBytes?, pairingCode text: String,
        transport: any HTTPTransport, time: any TimeSource = SystemTime()
    ) throws(VaultError) -> (Vault, SyncReport) {
        if Vault.exists(at: location) {
            throw VaultError(.alreadyExists, "a vault already exists at \(location.databasePath)")
        }
        let trimmed = String(text.filter { !$0.isWhitespace })
        guard var raw = Base64.decode(Array(trimmed.utf8), .urlSafeUnpadded), raw.count == 16 else {
            throw VaultError(
                .invalidInput, "that is not a pairing code", remedy: .pairOnOtherMachine)
        }
        defer { secureZero(&raw) }
        let code = try Secure.copy(raw)
        let (name, key) = try pairingKeys(code)
        let probe = SyncState(url: url, user: user, password: password?.unsafeCopyToArray() ?? [], device: [])
        let store = try SyncEngine.store(for: probe, transport: transport, timeout: SyncEngine.defaultStoreTimeout)
        try store.checkUsable()
        let offer: PairingOffer
        do throws(VaultError) {
            offer = try pairingOffer(name, key: key, in: store, time: time)
        } catch {
            // No offer in a folder that holds no vault at all: the address
            // is the likelier mistake, not the code.
            if error.code == .notFound, try store.get(SyncEngine.keysName) == nil { throw noVault(at: url) }
            throw error
        }
        let slots = try joinedSlots(offer, in: store)
        try checkJoinSlots(slots)
        let vault = try Vault.create(
            at: location, header: offer.header, masterKey: offer.masterKey, slots: slots, time: time)
        do {
            let engine = SyncEngine(vault: vault, transport: transport)
            try engine.setRemote(url: url, user: user, password: password)
            try engine.noteJoinedKeyslots()
            let syncKeys = try engine.syncKeys()
            try vault.update { (_: inout StateManifest) throws(VaultError) in
                var state = try engine.loadSyncState(syncKeys)
                (state.markEpoch, state.markHash, state.markParent) = offer.mark
                try engine.saveSyncState(state, syncKeys)
            }
            let report = try engine.sync()
            try? store.delete(name)
            return (vault, report)
        } catch {
            for suffix in ["", "-wal", "-shm"] { FileSystem.remove(location.databasePath + suffix) }
            throw error
        }
    }

    /// What a pairing offer hands the joining machine: the vault's header
    /// and key, the offering machine's high-water mark, and (from releases
    /// that send them) the keyslots it had.
    private struct PairingOffer {
        let header: Header
        let masterKey: SecureBytes
        let mark: (epoch: UInt64, hash: [UInt8], parent: [UInt8])
        let offeredKeys: [UInt8]?
    }

    /// The pairing offer `name` in `store`, opened with `key`. An expired
    /// offer is deleted, and refused.
    private static func pairingOffer(_ name: String, key: SecureBytes, in store: any SyncStore, time: any TimeSource)
        throws(VaultError) -> PairingOffer
    {
        guard let offer = try store.get(name),
            offer.bytes.count > AEAD.nonceLength
        else {
            throw VaultError(.notFound, "no pairing offer for that code in the store (used, expired or mistyped)")
        }
        let plain: SecureBytes
        do {
            plain = try AEAD.open(
                Array(offer.bytes[AEAD.nonceLength...]), key: key, nonce: Array(offer.bytes[..<AEAD.nonceLength]),
                associatedData: Array("vault.pair.v1".utf8))
        } catch {
            throw VaultError(.tampered, "the pairing offer failed authentication (changed in the store)")
        }
        var bytes = plain.unsafeCopyToArray()
        defer { secureZero(&bytes) }
        var r = ByteReader(bytes, what: "the pairing offer")
        let expires = try r.u64()
        guard UInt64(max(0, time.now().epochSeconds)) <= expires else {
            try? store.delete(name)
            throw VaultError(.invalidInput, "the pairing code has expired", remedy: .pairAgain)
        }
        let header = try Header(decoding: try r.read(Int(try r.u32())))
        var keyBytes = try r.read(32)
        defer { secureZero(&keyBytes) }
        let masterKey = try Secure.copy(keyBytes)
        let mark = (epoch: try r.u64(), hash: try r.read(32), parent: try r.read(32))
        // Offers made before they carried the keyslots end here.
        let offeredKeys = r.remaining > 0 ? try r.read(Int(try r.u32())) : nil
        try r.finish()
        return PairingOffer(header: header, masterKey: masterKey, mark: mark, offeredKeys: offeredKeys)
    }

    /// The keyslots a vault joined through `offer` starts with: those the
    /// offer carries, else the store's.
    private static func joinedSlots(_ offer: PairingOffer, in store: any SyncStore) throws(VaultError) -> [[UInt8]] {
        let header = offer.header
        guard let keysObject = try store.get(SyncEngine.keysName) else {
            throw VaultError(.notFound, "the store has no vault keys object")
        }
        let (storedHeader, storedSlots) = try parseKeysObject(keysObject.bytes)
        guard storedHeader.vaultID == header.vaultID else {
            throw VaultError(.tampered, "the store's keys belong to another vault than the pairing offer")
        }
        var slots = storedSlots
        if let offeredKeys = offer.offeredKeys {
            let (offeredHeader, offered) = try parseKeysObject(offeredKeys)
            guard offeredHeader.vaultID == header.vaultID else {
                throw VaultError(.tampered, "the pairing offer's keyslots belong to another vault")
            }
            slots = offered
        }
        return slots
    }
}
