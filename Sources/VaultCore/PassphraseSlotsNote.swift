package import FoundationEssentials

/// That this machine took a passphrase another machine of the vault set
/// ('vault passwd' there) and published, at a sync: kept in the vault file
/// beside the keyslots (meta key `passphrase-taken`, docs/format.md) and
/// read before unlocking, so that a passphrase that no longer opens the
/// vault can be told why. It holds no secret and nothing derived from a
/// passphrase: when, how many passphrases open the vault since, and a hash
/// of the passphrase slots (public bytes) so that it is told only while
/// those slots are still the vault's (a 'vault passwd' here ends it).
/// Unauthenticated, as nothing is unlocked when it is read: whoever can
/// write the vault file can change what a wrong passphrase's message says,
/// and nothing else.
package struct TakenPassphrase: Equatable {
    static let metaKey = "passphrase-taken"
    static let magic = "vault-pt"

    /// When the slots were taken, by this machine's clock.
    package let at: Date
    /// How many passphrases open the vault since: two after both machines
    /// set one at once (docs/sync.md, "A new passphrase on every machine").
    package let passphrases: Int
    let slotsHash: [UInt8]

    /// The note of `slots` (stored bytes of passphrase slots) taken at `at`.
    init(at: Date, slots: [[UInt8]]) throws(VaultError) {
        self.at = at
        passphrases = slots.count
        slotsHash = try TakenPassphrase.hash(slots)
    }

    /// Magic `vault-pt`, version 1 (u16), seconds since 1970 (u64), the
    /// number of passphrase slots (u8), BLAKE2b-32 of the slots.
    var encoded: [UInt8] {
        var w = ByteWriter()
        w.append(TakenPassphrase.magic)
        w.append(UInt16(1))
        w.append(UInt64(max(0, at.epochSeconds)))
        w.append(UInt8(min(passphrases, 255)))
        w.append(slotsHash)
        return w.bytes
    }

    /// The note a row holds; nil for one this release cannot read.
    init?(decoding blob: [UInt8]) {
        var r = ByteReader(blob, what: "the note of a taken passphrase")
        guard (try? r.expect(TakenPassphrase.magic)) != nil, (try? r.u16()) == 1, let seconds = try? r.u64(),
            seconds <= UInt64(Int64.max), let count = try? r.u8(), let hash = try? r.read(32),
            (try? r.finish()) != nil
        else { return nil }
        at = Date(epochSeconds: Int64(seconds))
        passphrases = Int(count)
        slotsHash = hash
    }

    /// BLAKE2b-32 of the slots in sorted order, each with its length.
    static func hash(_ slots: [[UInt8]]) throws(VaultError) -> [UInt8] {
        var w = ByteWriter()
        w.append("vault.passphrase-taken.v1")
        w.append(UInt8(0))
        for slot in slots.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            w.append(UInt32(slot.count))
            w.append(slot)
        }
        return try Secure.hash(w.bytes, length: 32)
    }
}

extension Vault {
    /// Read before unlocking: when this vault's passphrase slots are still
    /// those a sync took from another machine, the note of it; else nil.
    /// For the message of a passphrase that did not open the vault.
    package static func takenPassphrase(at location: VaultLocation) -> TakenPassphrase? {
        guard let locked = try? LockedVault(location: location),
            let row = try? Tables(database: locked.database).meta(TakenPassphrase.metaKey),
            let note = TakenPassphrase(decoding: row)
        else { return nil }
        let slots = Keyslots.passphraseSlots(among: locked.rawSlots.map(\.value))
        guard !slots.isEmpty, (try? TakenPassphrase.hash(slots)) == note.slotsHash else { return nil }
        return note
    }
}
