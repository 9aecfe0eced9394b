internal import VaultCore
internal import VaultCrypto

// Keyslots between machines (docs/sync.md, "A new passphrase on every
// machine"): `vault-keys` carries a machine's keyslots for machines that
// join later; once a passphrase changes, the machine also writes them as
// `k-<hash>`, an object no one overwrites, and the root pins it by hash;
// every other machine takes its passphrase slots, so the old passphrase
// opens nothing anywhere.
extension SyncEngine {
    /// The name of the pinned keys object of hash `pin`.
    static func pinnedKeysName(_ pin: [UInt8]) -> String { "k-" + Array(pin.prefix(16)).hex }

    /// Most passphrases a pinned keys object says it replaced.
    static let maxReplaced = 16

    /// A pinned keys object (`k-...`): magic `vault-pk`, version 1, u32
    /// length and the bytes of a `vault-keys` object, then u8 count and that
    /// many BLAKE2b-32 hashes of the passphrase slots the publishing
    /// machine's passphrase replaced (of each slot alone, and of a set of
    /// several), newest first: a machine that finds its own among them
    /// knows its passphrase was seen and replaced, not raced (docs/sync.md,
    /// "A new passphrase on every machine").
    static func pinnedKeys(_ keysObject: [UInt8], replacing replaced: [[UInt8]]) -> [UInt8] {
        var w = ByteWriter()
        w.append("vault-pk")
        w.append(UInt16(1))
        w.append(UInt32(keysObject.count))
        w.append(keysObject)
        let kept = Array(replaced.prefix(maxReplaced))
        w.append(UInt8(kept.count))
        for h in kept { w.append(h) }
        return w.bytes
    }

    /// The `vault-keys` bytes and the replaced passphrases of a pinned keys object.
    static func parsePinnedKeys(_ bytes: [UInt8]) throws(VaultError) -> (keys: [UInt8], replaced: [[UInt8]]) {
        var r = ByteReader(bytes, what: "the pinned vault keys")
        do { try r.expect("vault-pk") } catch {
            throw VaultError(.damaged, "the pinned vault keys are not a vault keys object")
        }
        guard try r.u16() == 1 else { throw VaultError(.unsupported, "the pinned vault keys have an unknown version") }
        let keys = try r.read(Int(try r.u32()))
        var replaced: [[UInt8]] = []
        let count = Int(try r.u8())
        guard count <= maxReplaced else { throw VaultError(.damaged, "the pinned vault keys replace too many") }
        for _ in 0..<count { replaced.append(try r.read(32)) }
        try r.finish()
        return (keys, replaced)
    }

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
        let own = try PassphraseNote(ownBefore)
        // A new passphrase here since the last reconciliation (unknown the
        // first time: then it is only noted).
        var newHere = state.passphraseHash != zeros && own.hash != state.passphraseHash
        var changed = false
        if let pin = root?.keysPin, pin != state.pinHash {
            guard
                try takePublishedKeys(
                    pin, store: store, keys: keys, own: own, ownBefore: ownBefore, state: &state,
                    newHere: &newHere, report: &report)
            else { return }
            // The pin, at least, is noted: the next sync reads no keys.
            changed = true
        }
        guard
            let published = try publishKeys(
                store: store, keys: keys, root: root, own: own, state: &state, newHere: newHere)
        else { return }
        changed = changed || published
        report.passphrases = try vault.keyslots.passphraseSlots().count
        guard changed else { return }
        try saveKeyslotNotes(state, keys)
    }

    /// Takes the keys another machine published under `pin` (the root's
    /// pin moved): its passphrase, or both sides of a race, and what it
    /// replaced. False when the pinned object is not (yet) the one the root
    /// vouches for: it is taken at a later sync.
    private func takePublishedKeys(
        _ pin: [UInt8], store: any SyncStore, keys: SyncKeys, own: PassphraseNote, ownBefore: [[UInt8]],
        state: inout SyncState, newHere: inout Bool, report: inout SyncReport
    ) throws(VaultError) -> Bool {
        let zeros = [UInt8](repeating: 0, count: 32)
        var changed = false
        guard let pinned = try pinnedPassphrases(pin, store: store) else { return false }
        let (published, replaced) = pinned
        // A passphrase set here that the publisher saw and replaced
        // (its publication's answer was lost here) was no race.
        if newHere && own.isReplaced(in: replaced) { newHere = false }
        let publishedNote = try PassphraseNote(published)
        let publishedHash = publishedNote.hash
        let noted = state.passphraseHash
        let notedNote = PassphraseNote(hash: noted, slots: state.passphraseSlots)
        // This machine joined with keys published after the pinned
        // ones, whose own pin has not landed yet (it never reconciled a
        // pin, and the publisher replaced none of its passphrases): they
        // stay until that pin comes. A pin that replaced any passphrase
        // it joined with (one side of a pair) came after that passphrase
        // or raced it: it is taken as on any machine.
        let joinedAhead =
            !newHere && state.pinHash == zeros && noted != zeros && publishedHash != noted
            && !notedNote.isReplacedInPart(in: replaced) && !ownBefore.allSatisfy { published.contains($0) }
        // Keys this machine's own passphrase replaced: the root still
        // pins them because this machine's pin did not land (its note
        // of it is kept from before it tried), or this machine joined
        // with them before their publisher pinned them, or took them
        // beside its own in a race before its own new passphrase; or
        // keys older than those it joined with. No race: the passphrase
        // here stands (and is published below when it is new here).
        let superseded =
            publishedNote.isReplaced(in: state.replaced)
            || (newHere && publishedNote.isReplaced(in: notedNote.hashes)) || joinedAhead
        // This machine's own passphrases but those the publisher saw
        // and replaced (one side of a pair taken here, replaced there).
        let ownKept = own.kept(ownBefore, without: replaced)
        // The passphrase this machine published (or tried to) is not
        // one the publisher saw, though none is new here: this
        // machine's pin was lost to another machine's, which raced it.
        let unseen =
            !newHere && !superseded && noted != zeros && publishedHash != noted
            && !notedNote.isReplaced(in: replaced)
            && !ownKept.allSatisfy { published.contains($0) }
        if !superseded && !published.isEmpty && published != ownBefore {
            // Both machines set a new passphrase before either synced:
            // both open the vault, everywhere, until one is chosen.
            var taken = published
            if newHere || unseen {
                // Each side without what the other saw and replaced:
                // a passphrase this machine replaced, published beside
                // the rival's, opens nothing any more.
                let replacedHere = state.replaced + (newHere ? notedNote.hashes : [])
                taken = publishedNote.kept(published, without: replacedHere)
                taken += ownKept.filter { !taken.contains($0) }
            }
            try vault.keyslots.adoptPassphraseSlots(taken)
            report.passphraseTaken = true
            changed = true
        }
        try notePin(
            pin, replaced: replaced, noted: notedNote, superseded: superseded, unseen: unseen, taken: changed,
            state: &state, newHere: &newHere)
        if changed { try saveKeyslotNotes(state, keys) }
        return true
    }

    /// The passphrase slots another machine published under `pin`, and
    /// the passphrases it replaced. Nil when the pinned object is not the
    /// one the root (sealed with the vault's key) vouches for: one being
    /// replaced meanwhile is taken at a later sync.
    private func pinnedPassphrases(_ pin: [UInt8], store: any SyncStore) throws(VaultError)
        -> (slots: [[UInt8]], replaced: [[UInt8]])?
    {
        guard let object = try store.get(SyncEngine.pinnedKeysName(pin)), try SyncRoot.hash(object.bytes) == pin
        else { return nil }
        let (keysBytes, replaced) = try SyncEngine.parsePinnedKeys(object.bytes)
        let (header, slots) = try SyncEngine.parseKeysObject(keysBytes)
        guard header.vaultID == vault.header.vaultID else {
            throw VaultError(.tampered, "the store's vault keys belong to another vault")
        }
        return (Keyslots.passphraseSlots(among: slots), replaced)
    }

    /// Notes in `state` that the keys under `pin` were taken (or seen to
    /// be superseded), with what they `replaced`: `noted` is this
    /// machine's note of its passphrase before, `taken` whether both
    /// sides of a race now open the vault here.
    private func notePin(
        _ pin: [UInt8], replaced: [[UInt8]], noted notedNote: PassphraseNote, superseded: Bool, unseen: Bool,
        taken changed: Bool, state: inout SyncState, newHere: inout Bool
    ) throws(VaultError) {
        let zeros = [UInt8](repeating: 0, count: 32)
        let noted = notedNote.hash
        state.pinHash = pin
        // What the publisher knew replaced, beside what this machine
        // knew: a rival's list lacks what this machine replaced itself.
        if !superseded {
            state.replaced = Array(
                (replaced + state.replaced.filter { !replaced.contains($0) }).prefix(SyncEngine.maxReplaced))
        }
        if !newHere && !superseded && !unseen {
            state.keysHash = try SyncRoot.hash(try keysObject())
            state.note(try PassphraseNote(try vault.keyslots.passphraseSlots()))
        } else if changed {
            // Both sides taken: what they replaced, and this machine's
            // own passphrase as replaced by the pair it now publishes
            // (below). Noted at once, with what follows: a passphrase
            // set here after this, or a publication that fails, still
            // knows both sides were seen here.
            if newHere && noted != zeros {
                let hashes = notedNote.hashes
                state.replaced = Array(
                    (hashes + state.replaced.filter { !hashes.contains($0) }).prefix(SyncEngine.maxReplaced))
            }
            state.note(try PassphraseNote(try vault.keyslots.passphraseSlots()))
            newHere = false
        }
    }

    /// Publishes this machine's keyslots when they changed here (or its
    /// pin did not land), pinning them when a passphrase changed or the
    /// root pins keys already; notes them the first time. True when
    /// `state` changed, false when not, nil when another writer's root got
    /// in first (the next sync pins them).
    private func publishKeys(
        store: any SyncStore, keys: SyncKeys, root: SyncRoot?, own: PassphraseNote, state: inout SyncState,
        newHere: Bool
    ) throws(VaultError) -> Bool? {
        let zeros = [UInt8](repeating: 0, count: 32)
        let object = try keysObject()
        let objectHash = try SyncRoot.hash(object)
        // A pin noted here that the root does not hold is sent again: its
        // root write did not land, or a store that ignores preconditions
        // let an older root replace it.
        let pinPending = state.pinHash != zeros && state.pinHash != (root?.keysPin ?? zeros)
        if objectHash != state.keysHash || pinPending {
            // The root vouches for new slots, written where no later upload
            // of `vault-keys` replaces them, with the passphrases they
            // replace; when another writer got in first, the next sync pins
            // them.
            let pinning = newHere || root?.keysPin != nil || pinPending
            var replaced = state.replaced
            if newHere, state.passphraseHash != zeros {
                // Each slot alone, so that a passphrase seen here among
                // others (after a race) counts as replaced wherever it
                // stands alone; and the set, as earlier releases look for it.
                let noted = PassphraseNote(hash: state.passphraseHash, slots: state.passphraseSlots).hashes
                replaced = Array((noted + replaced.filter { !noted.contains($0) }).prefix(SyncEngine.maxReplaced))
            }
            let pinned = SyncEngine.pinnedKeys(object, replacing: replaced)
            let pin = try SyncRoot.hash(pinned)
            if pinning {
                // Noted before anything is sent (the keys themselves count
                // as sent only once pinned): a process killed once its
                // `vault-keys` or pin is in the store then sends the same
                // pin again next time, naming what this passphrase replaced,
                // rather than race itself, and a machine that joined with
                // the slots it sent sees them replaced by the next ones.
                let current = try PassphraseNote(try vault.keyslots.passphraseSlots())
                try vault.update { (_: inout StateManifest) throws(VaultError) in
                    var s = try loadSyncState(keys)
                    s.pinHash = pin
                    s.note(current)
                    s.replaced = replaced
                    try saveSyncState(s, keys)
                }
            }
            _ = try store.put(SyncEngine.keysName, object)
            if pinning {
                _ = try store.put(SyncEngine.pinnedKeysName(pin), pinned, precondition: .absent)
                guard try pinKeys(pin, store: store, keys: keys) else { return nil }
                // A passphrase set here is the others' now: the sync says so.
                if newHere || pinPending { try vault.keyslots.notePassphrasePublished() }
                // The slots the root vouched for before are no longer read.
                if let old = root?.keysPin, old != pin { try? store.delete(SyncEngine.pinnedKeysName(old)) }
                state.pinHash = pin
                state.replaced = replaced
            }
            state.keysHash = objectHash
            state.note(try PassphraseNote(try vault.keyslots.passphraseSlots()))
            return true
        } else if state.passphraseHash == zeros
            || (state.passphraseSlots.isEmpty && !own.slots.isEmpty && own.hash == state.passphraseHash)
        {
            // First noted, or noted by a release that kept no slot hashes.
            state.note(own)
            return true
        }
        return false
    }

    /// Saves what `state` notes of the keyslots.
    private func saveKeyslotNotes(_ state: SyncState, _ keys: SyncKeys) throws(VaultError) {
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.keysHash = state.keysHash
            s.pinHash = state.pinHash
            s.passphraseHash = state.passphraseHash
            s.passphraseSlots = state.passphraseSlots
            s.replaced = state.replaced
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
        let precondition = object.etag.map(WritePrecondition.matches) ?? .none
        // On a store that ignores If-Match, as a lease is written: over a
        // root looked at just before, sent once, read back 1 s later.
        if state.honoursPreconditions {
            _ = try store.put(SyncEngine.rootName, bytes, precondition: precondition)
        } else {
            guard try lookAgain(at: object.bytes, in: store) != nil else { return false }
            do {
                _ = try store.putOnce(SyncEngine.rootName, bytes, precondition: precondition)
            } catch {
                guard error.code == .transient else { throw error }
                return false
            }
        }
        for pause in [0, state.honoursPreconditions ? SyncEngine.leaseSettle : SyncEngine.rootSettle] {
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

    /// Notes the keyslots a joined vault starts with as those of the
    /// store: it has nothing of its own to publish (uploading them would
    /// only race a machine that changed the passphrase meanwhile).
    func noteJoinedKeyslots() throws(VaultError) {
        let keys = try syncKeys()
        let objectHash = try SyncRoot.hash(try keysObject())
        let passphrase = try PassphraseNote(try vault.keyslots.passphraseSlots())
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            var s = try loadSyncState(keys)
            s.keysHash = objectHash
            s.note(passphrase)
            try saveSyncState(s, keys)
        }
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

/// A machine's passphrase slots as sync notes them: BLAKE2b-32 of the set,
/// and of each slot alone (a single slot's is the set's).
struct PassphraseNote {
    var hash: [UInt8]
    /// Empty when not known (noted by a release that kept only the set's).
    var slots: [[UInt8]]

    init(hash: [UInt8], slots: [[UInt8]]) {
        self.hash = hash
        self.slots = slots
    }

    init(_ slots: [[UInt8]]) throws(VaultError) {
        hash = try SyncEngine.hash(slots)
        var each: [[UInt8]] = []
        for slot in slots.prefix(SyncState.maxPassphraseSlots) { each.append(try SyncEngine.hash([slot])) }
        self.slots = each
    }

    /// The hashes a machine that replaces this passphrase names: each slot
    /// alone, then the set when it holds several.
    var hashes: [[UInt8]] { slots.contains(hash) ? slots : slots + [hash] }

    /// `slots` (those this note was made of) but each one `replaced`
    /// names; slots past the ones hashed alone are kept.
    func kept(_ slots: [[UInt8]], without replaced: [[UInt8]]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for (slot, hash) in zip(slots, self.slots) where !replaced.contains(hash) { out.append(slot) }
        return out + slots.dropFirst(self.slots.count)
    }

    /// Whether `replaced` names this passphrase as replaced: the set, or
    /// every slot of it (seen among others and replaced with them).
    func isReplaced(in replaced: [[UInt8]]) -> Bool {
        replaced.contains(hash) || (!slots.isEmpty && slots.allSatisfy { replaced.contains($0) })
    }

    /// Whether `replaced` names this passphrase or any slot of it: its
    /// publisher saw at least one of them (a pair's side it replaced).
    func isReplacedInPart(in replaced: [[UInt8]]) -> Bool {
        hashes.contains { replaced.contains($0) }
    }
}

extension SyncState {
    /// Notes `passphrase` as this machine's passphrase slots.
    mutating func note(_ passphrase: PassphraseNote) {
        passphraseHash = passphrase.hash
        passphraseSlots = passphrase.slots
    }
}
