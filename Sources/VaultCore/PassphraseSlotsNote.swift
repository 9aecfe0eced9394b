package import FoundationEssentials

/// What a sync did with the vault's passphrase slots, kept in the vault
/// file beside them (docs/format.md) and read without unlocking:
/// `taken`, that this machine took a passphrase another machine set
/// ('vault passwd' there), so that the one from before can be told why it
/// no longer opens the vault; `published`, that this machine published the
/// passphrase set here for the others, so that the sync that did it says
/// so, through the agent too. It holds no secret and nothing derived from
/// a passphrase: when, how many passphrases, and a hash of the passphrase
/// slots (public bytes), so that it counts only while those slots are
/// still the vault's (a 'vault passwd' here ends a `taken` note).
/// Unauthenticated, as nothing is unlocked when it is read: whoever can
/// write the vault file can change what those messages say, and nothing
/// else.
package struct PassphraseSlotsNote: Equatable {
    /// Which of the two notes.
    package enum Kind {
        case taken, published

        var metaKey: String { self == .taken ? "passphrase-taken" : "passphrase-published" }
        var magic: String { self == .taken ? "vault-pt" : "vault-pp" }
    }

    let kind: Kind

    /// When the slots were taken, by this machine's clock.
    package let at: Date
    /// How many passphrases open the vault since: two after both machines
    /// set one at once (docs/sync.md, "A new passphrase on every machine").
    package let passphrases: Int
    let slotsHash: [UInt8]

    /// The note of `slots` (stored bytes of passphrase slots) taken or
    /// published at `at`.
    init(_ kind: Kind, at: Date, slots: [[UInt8]]) throws(VaultError) {
        self.kind = kind
        self.at = at
        passphrases = slots.count
        slotsHash = try PassphraseSlotsNote.hash(slots)
    }

    /// Magic `vault-pt` (taken) or `vault-pp` (published), version 1 (u16), seconds since 1970 (u64), the
    /// number of passphrase slots (u8), BLAKE2b-32 of the slots.
    var encoded: [UInt8] {
        var w = ByteWriter()
        w.append(kind.magic)
        w.append(UInt16(1))
        w.append(UInt64(max(0, at.epochSeconds)))
        w.append(UInt8(min(passphrases, 255)))
        w.append(slotsHash)
        return w.bytes
    }

    /// The note a row holds; nil for one this release cannot read.
    init?(_ kind: Kind, decoding blob: [UInt8]) {
        var r = ByteReader(blob, what: "the note of a passphrase")
        guard (try? r.expect(kind.magic)) != nil, (try? r.u16()) == 1, let seconds = try? r.u64(),
            seconds <= UInt64(Int64.max), let count = try? r.u8(), let hash = try? r.read(32),
            (try? r.finish()) != nil
        else { return nil }
        self.kind = kind
        at = Date(epochSeconds: Int64(seconds))
        passphrases = Int(count)
        slotsHash = hash
    }

    /// BLAKE2b-32 of the slots in sorted order, each with its length.
    static func hash(_ slots: [[UInt8]]) throws(VaultError) -> [UInt8] {
        var w = ByteWriter()
        w.append("vault.passphrase-slots-note.v1")
        w.append(UInt8(0))
        for slot in slots.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            w.append(UInt32(slot.count))
            w.append(slot)
        }
        return try Secure.hash(w.bytes, length: 32)
    }
}

extension Vault {
    /// Read without unlocking: the note of `kind` when this vault's
    /// passphrase slots are still those it names; else nil. For the
    /// message of a passphrase that did not open the vault (`taken`), and
    /// of a sync that published the one set here (`published`).
    package static func passphraseNote(_ kind: PassphraseSlotsNote.Kind, at location: VaultLocation)
        -> PassphraseSlotsNote?
    {
        guard let locked = try? LockedVault(location: location),
            let row = try? Tables(database: locked.database).meta(kind.metaKey),
            let note = PassphraseSlotsNote(kind, decoding: row)
        else { return nil }
        let slots = Keyslots.passphraseSlots(among: locked.rawSlots.map(\.value))
        guard !slots.isEmpty, (try? PassphraseSlotsNote.hash(slots)) == note.slotsHash else { return nil }
        return note
    }
}
