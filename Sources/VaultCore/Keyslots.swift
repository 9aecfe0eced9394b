public import VaultCrypto
package import VaultStorage

/// The keyslots of an open vault: each wraps the master key for one way of
/// unlocking (passphrase, key file, Secret Service). Changing one rewrites
/// that slot only, never the grants.
///
/// Every change is one write transaction that first checks the slots are
/// still the ones this vault handle saw when it was unlocked (or, for a
/// vault it created, before the change's own key derivation): of two
/// concurrent changes the later is refused with `busy` and changes nothing,
/// so no change is reported that another one silently undid.
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
        let seen = try seenSlots()
        let slot = try Keyslot(
            wrapping: try vault.requireMasterKey(), for: newPassphrase, kdf: kdf, vaultID: vault.header.vaultID)
        try change(from: seen) { () throws(VaultError) in
            try removeSlots(of: .passphrase)
            try vault.putSlot(nil, slot)
        }
    }

    /// Adds a key-file slot for `secret` (see `Keyfile`).
    public func addKeyfile(_ secret: SecureBytes) throws(VaultError) {
        try add(.keyfile(secret))
    }

    /// Adds a slot that `source` opens; returns its number. A vault has at
    /// most one passphrase slot (`changePassphrase` replaces it). For a
    /// Secret Service slot, `addSecretService` also stores its key.
    @discardableResult
    public func add(_ source: KeySource, kdf: KDFParameters = .default) throws(VaultError) -> Int64 {
        let seen = try seenSlots()
        let slot = try Keyslot(
            wrapping: try vault.requireMasterKey(), for: source, kdf: kdf, vaultID: vault.header.vaultID)
        return try insert(slot, seen: seen)
    }

    /// Adds a Secret Service slot: a new random key kept in the keyring as
    /// an item of this slot's own, and a slot it opens. Returns its number.
    @discardableResult
    public func addSecretService() throws(VaultError) -> Int64 {
        let seen = try seenSlots()
        let secret = try Keyfile.generate()
        let slot = try Keyslot(
            wrapping: try vault.requireMasterKey(), for: .secretService(secret), kdf: .default,
            vaultID: vault.header.vaultID)
        let id = slot.secretServiceID ?? []
        try SecretService.store(secret, vaultID: vault.vaultID, slotID: id)
        do {
            return try insert(slot, seen: seen)
        } catch {
            _ = try? SecretService.clear(vaultID: vault.vaultID, slotID: id)
            throw error
        }
    }

    /// Removes slot `number`, and a Secret Service slot's key from the
    /// keyring when `keyring` is true. The last slot that opens the vault is
    /// never removed: passphrase and key-file slots count when intact; a
    /// Secret Service slot counts only when `keyring` is true and its key is
    /// in the keyring and opens it. Returns the error, if any, from deleting
    /// the key from the keyring after the slot itself is gone.
    @discardableResult
    public func remove(_ number: Int64, keyring: Bool = false) throws(VaultError) -> VaultError? {
        let seen = try seenSlots()
        // Counted against stale slots, the answer below would be wrong.
        guard try vault.read({ (_: StateManifest) throws(VaultError) in try Keyslots.raw(in: vault.database) }) == seen
        else { throw Keyslots.changedMeanwhile }
        guard let doomed = seen[number] else {
            throw VaultError(.notFound, "no keyslot \(number)", remedy: .listKeyslots)
        }
        let masterKey = try vault.requireMasterKey()
        var opening = 0
        var unverified = 0
        for (n, blob) in seen where n != number {
            guard let slot = try? Keyslot(decoding: blob, what: "keyslot") else { continue }
            if let id = slot.secretServiceID {
                guard keyring, opensFromKeyring(slot, id: id, masterKey: masterKey) else {
                    unverified += 1
                    continue
                }
            }
            opening += 1
        }
        guard opening > 0 else {
            throw VaultError(
                .invalidInput,
                unverified > 0
                    ? "keyslot \(number) is the last one; nothing else would open the vault (a Secret Service slot counts only while its key is in the keyring)"
                    : "keyslot \(number) is the last one; nothing else would open the vault")
        }
        try change(from: seen) { () throws(VaultError) in
            try vault.tables.deleteKeyslots([number])
        }
        guard keyring, let id = (try? Keyslot(decoding: doomed, what: "keyslot"))?.secretServiceID else { return nil }
        do throws(VaultError) {
            if try !SecretService.clear(vaultID: vault.vaultID, slotID: id) {
                // An item stored before slots had their own: removed only
                // when no other Secret Service slot might still need it.
                let others = seen.filter { $0.key != number }.values.contains {
                    (try? Keyslot(decoding: $0, what: "keyslot"))?.secretServiceID != nil
                }
                if !others { try SecretService.clear(vaultID: vault.vaultID, slotID: nil) }
            }
            return nil
        } catch {
            return error
        }
    }

    /// The stored bytes of the passphrase slots, sorted: what a sync
    /// compares with the passphrase slots another machine published.
    package func passphraseSlots() throws(VaultError) -> [[UInt8]] {
        let all = try vault.read { (_: StateManifest) throws(VaultError) in
            Array(try Keyslots.raw(in: vault.database).values)
        }
        return Keyslots.passphraseSlots(among: all)
    }

    /// The passphrase slots among stored slots' bytes, sorted.
    package static func passphraseSlots(among slots: [[UInt8]]) -> [[UInt8]] {
        slots.filter { (try? Keyslot(decoding: $0, what: "keyslot"))?.kind == .passphrase }
            .sorted { $0.lexicographicallyPrecedes($1) }
    }

    /// Replaces the passphrase slots with `slots`, the stored bytes of
    /// passphrase slots another machine of the vault published (their
    /// bytes vouched for by the vault's own key, docs/sync.md "A new
    /// passphrase on every machine"): the passphrase set there opens this
    /// machine's vault too, and the one it replaced no longer does. Needs
    /// no key: a slot cannot be checked without its passphrase, which only
    /// the person has. Other slots (key files, the Secret Service) stay.
    package func adoptPassphraseSlots(_ slots: [[UInt8]]) throws(VaultError) {
        guard !slots.isEmpty else { throw VaultError(.invalidInput, "no passphrase slot to take") }
        for blob in slots {
            guard (try Keyslot(decoding: blob, what: "a published keyslot")).kind == .passphrase else {
                throw VaultError(.damaged, "a published passphrase slot is of another kind")
            }
        }
        // Noted with the slots, so that the passphrase they replaced is
        // told why it no longer opens the vault (`PassphraseSlotsNote`).
        let note = try PassphraseSlotsNote(.taken, at: vault.time.now(), slots: slots)
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            try removeSlots(of: .passphrase)
            for blob in slots { _ = try vault.tables.putKeyslot(nil, blob) }
            try vault.putMeta(PassphraseSlotsNote.Kind.taken.metaKey, note.encoded)
        }
        vault.seenSlots = nil
    }

    /// Notes that a sync published this vault's passphrase slots, set
    /// here, for the other machines (`PassphraseSlotsNote`): the sync command
    /// says so, also when an agent made the sync.
    package func notePassphrasePublished() throws(VaultError) {
        let slots = try passphraseSlots()
        guard !slots.isEmpty else { return }
        let note = try PassphraseSlotsNote(.published, at: vault.time.now(), slots: slots)
        try vault.putMeta(PassphraseSlotsNote.Kind.published.metaKey, note.encoded)
    }

    /// The vault's keyslots.
    public func list() throws(VaultError) -> [KeyslotInfo] {
        try vault.read { (_: StateManifest) throws(VaultError) in try Keyslots.slots(in: vault.database) }
    }

    package static func slots(in database: Database) throws(VaultError) -> [KeyslotInfo] {
        try raw(in: database).sorted { $0.key < $1.key }.map { number, blob in
            KeyslotInfo(number: number, slot: try? Keyslot(decoding: blob, what: "keyslot"))
        }
    }

    static func raw(in database: Database) throws(VaultError) -> [Int64: [UInt8]] {
        byNumber(try Tables(database: database).keyslots())
    }

    private static func byNumber(_ stored: [StoredKeyslot]) -> [Int64: [UInt8]] {
        Dictionary(stored.map { ($0.number, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    /// The slots this handle saw; read now (before any key derivation)
    /// when it has not looked yet.
    private func seenSlots() throws(VaultError) -> [Int64: [UInt8]] {
        if let seen = vault.seenSlots { return Keyslots.byNumber(seen) }
        let seen = try vault.read { (_: StateManifest) throws(VaultError) in
            try Tables(database: vault.database).keyslots()
        }
        vault.seenSlots = seen
        return Keyslots.byNumber(seen)
    }

    /// Runs `body` in one write transaction, only if the slots are still
    /// `seen`; remembers the slots it leaves.
    private func change(from seen: [Int64: [UInt8]], _ body: () throws(VaultError) -> Void) throws(VaultError) {
        var after: [StoredKeyslot] = []
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            guard try Keyslots.raw(in: vault.database) == seen else { throw Keyslots.changedMeanwhile }
            try body()
            after = try Tables(database: vault.database).keyslots()
        }
        vault.seenSlots = after
    }

    private static let changedMeanwhile = VaultError(
        .busy,
        "the keyslots changed since this vault was unlocked (another passphrase or keyslot change); nothing was changed"
    )

    private func insert(_ slot: Keyslot, seen: [Int64: [UInt8]]) throws(VaultError) -> Int64 {
        var number: Int64 = 0
        try change(from: seen) { () throws(VaultError) in
            if slot.kind == .passphrase,
                try Keyslots.slots(in: vault.database).contains(where: { $0.kind == .passphrase })
            {
                throw VaultError(
                    .alreadyExists, "this vault already has a passphrase", remedy: .changePassphrase)
            }
            number = try vault.putSlot(nil, slot)
        }
        return number
    }

    /// True when the keyring holds this slot's key (its own item, or an
    /// item stored before slots had their own) and it opens the vault.
    private func opensFromKeyring(_ slot: Keyslot, id: [UInt8], masterKey: SecureBytes) -> Bool {
        for slotID in [id, nil] as [[UInt8]?] {
            guard let secret = try? SecretService.lookup(vaultID: vault.vaultID, slotID: slotID) else { continue }
            if let mk = try? slot.unwrap(with: .secretService(secret), vaultID: vault.header.vaultID),
                mk.constantTimeEquals(masterKey)
            {
                return true
            }
        }
        return false
    }

    private func removeSlots(of kind: Keyslot.Kind) throws(VaultError) {
        let doomed = try Keyslots.raw(in: vault.database).filter {
            (try? Keyslot(decoding: $0.value, what: "keyslot"))?.kind == kind
        }
        try vault.tables.deleteKeyslots(doomed.keys)
    }
}
