internal import VaultCore
internal import VaultCrypto

/// What a machine remembers about its sync store, kept in the vault file
/// (meta key `sync`), encrypted under the sync key and bound to the vault:
/// the store and its credentials, this device's id, the rollback
/// high-water mark, what was last merged, and the conflicts kept.
struct SyncState {
    static let label = "vault.syncstate.v1"
    /// Version 2 adds who made each side of a conflict and the objects
    /// waiting to be collected; version 3 what the keyslots were when last
    /// reconciled with the store's (docs/sync.md, "A new passphrase on
    /// every machine"); version 4 the hash of each of those passphrase
    /// slots, so that a passphrase seen among others counts as replaced.
    /// Versions 1 to 3 are still read.
    static let version: UInt16 = 4
    /// Most passphrase slots whose hashes are noted one by one.
    static let maxPassphraseSlots = 16

    /// What a record was when last in step with the store.
    struct Base: Equatable {
        /// `localVersion` of a record the store lost: send it again as it
        /// was, with the same vector.
        static let resend = UInt64.max

        var localVersion: UInt64
        var versions: VersionVector.Vector

        static func == (a: Base, b: Base) -> Bool {
            a.localVersion == b.localVersion
                && a.versions.elementsEqual(b.versions) { $0.device == $1.device && $0.counter == $1.counter }
        }
    }

    /// A losing side of concurrent edits, kept until someone picks. It
    /// travels with the record through the store (a sibling, docs/sync.md),
    /// so every machine that holds the grant knows of it.
    struct Conflict {
        var id: [UInt8]
        var versions: VersionVector.Vector
        var payload: [UInt8]
        /// The device that made this side, and the one that made the value
        /// it lost to (zeros: not known, a conflict kept by version 1).
        var device: [UInt8] = Array(repeating: 0, count: 16)
        var valueDevice: [UInt8] = Array(repeating: 0, count: 16)

        init(
            id: [UInt8], versions: VersionVector.Vector, payload: [UInt8],
            device: [UInt8] = Array(repeating: 0, count: 16), valueDevice: [UInt8] = Array(repeating: 0, count: 16)
        ) {
            self.id = id
            self.versions = versions
            self.payload = payload
            self.device = device
            self.valueDevice = valueDevice
        }

        /// The side `sibling` of record `id`.
        init(id: [UInt8], _ sibling: SyncSibling) {
            self.init(
                id: id, versions: sibling.versions, payload: sibling.payload, device: sibling.device,
                valueDevice: sibling.valueDevice)
        }

        /// This side as it travels with its record.
        var sibling: SyncSibling {
            SyncSibling(
                versions: versions, deleted: payload.withUnsafeBytes { Payload.read($0, secrets: false) }?.grant == nil,
                payload: payload, device: device, valueDevice: valueDevice)
        }
    }

    /// A bucket object no longer named, waiting to be deleted (on a store
    /// that ignores preconditions, docs/sync.md "Collecting old objects").
    struct Garbage: Equatable {
        /// The object name's 16 bytes.
        var name: [UInt8]
        /// When, in seconds since 1970 by this machine's clock.
        var since: Int64
    }

    var url: String
    var user: String?
    var password: [UInt8]
    var device: [UInt8]
    /// 0 unknown, 1 the store honours If-Match/If-None-Match, 2 it ignores them.
    var preconditions: UInt8 = 0
    /// The newest root accepted: epoch (0: none yet), its hash and its parent.
    var markEpoch: UInt64 = 0
    var markHash: [UInt8] = Array(repeating: 0, count: 32)
    var markParent: [UInt8] = Array(repeating: 0, count: 32)
    /// BLAKE2b-32 of this machine's `vault-keys` object when it was last
    /// uploaded, or its keyslots last reconciled with the store's (zeros:
    /// never): a different one means a keyslot changed here since.
    var keysHash: [UInt8] = Array(repeating: 0, count: 32)
    /// The root's keys pin last reconciled (zeros: none).
    var pinHash: [UInt8] = Array(repeating: 0, count: 32)
    /// BLAKE2b-32 of this machine's passphrase slots at that time (zeros:
    /// not known yet): a different one means a new passphrase here.
    var passphraseHash: [UInt8] = Array(repeating: 0, count: 32)
    /// BLAKE2b-32 of each of those slots alone, at most 16 (none: not
    /// known, as version 3 kept them; a single slot's is `passphraseHash`).
    var passphraseSlots: [[UInt8]] = []
    /// The passphrases (hashes of their slots) the pinned ones replaced,
    /// newest first, at most 16: carried on when this machine pins its own.
    var replaced: [[UInt8]] = []
    /// The hash of each bucket object as last merged (zeros: none).
    var bucketHashes: [[UInt8]] = Array(repeating: Array(repeating: 0, count: 32), count: 256)
    var bases: [[UInt8]: Base] = [:]
    var conflicts: [Conflict] = []
    var garbage: [Garbage] = []

    init(url: String, user: String?, password: [UInt8], device: [UInt8]) {
        self.url = url
        self.user = user
        self.password = password
        self.device = device
    }

    var honoursPreconditions: Bool { preconditions != 2 }

    func encoded(keys: SyncKeys, vaultID: [UInt8]) throws(VaultError) -> [UInt8] {
        var w = ByteWriter()
        w.append(SyncState.version)
        func bytes(_ b: [UInt8]) {
            w.append(UInt32(b.count))
            w.append(b)
        }
        bytes(Array(url.utf8))
        bytes(user.map { Array($0.utf8) } ?? [])
        w.append(UInt8(user == nil ? 0 : 1))
        bytes(password)
        w.append(device)
        w.append(preconditions)
        w.append(markEpoch)
        w.append(markHash)
        w.append(markParent)
        w.append(keysHash)
        for h in bucketHashes { w.append(h) }
        w.append(UInt32(bases.count))
        for (id, base) in bases.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            w.append(id)
            w.append(base.localVersion)
            w.append(UInt16(base.versions.count))
            for v in base.versions {
                w.append(v.device)
                w.append(v.counter)
            }
        }
        w.append(UInt32(conflicts.count))
        for c in conflicts {
            w.append(c.id)
            w.append(UInt16(c.versions.count))
            for v in c.versions {
                w.append(v.device)
                w.append(v.counter)
            }
            bytes(c.payload)
            w.append(c.device)
            w.append(c.valueDevice)
        }
        w.append(UInt32(garbage.count))
        for g in garbage {
            w.append(g.name)
            w.append(UInt64(bitPattern: g.since))
        }
        w.append(pinHash)
        w.append(passphraseHash)
        w.append(UInt8(replaced.count))
        for h in replaced { w.append(h) }
        let slots = passphraseSlots.prefix(SyncState.maxPassphraseSlots)
        w.append(UInt8(slots.count))
        for h in slots { w.append(h) }
        var plain = w.bytes
        defer { secureZero(&plain) }
        let sealed = try Secure.copy(plain)
        let (nonce, ciphertext) = try keys.seal(sealed, associatedData: Array(SyncState.label.utf8) + vaultID)
        return nonce + ciphertext
    }

    init(decoding blob: [UInt8], keys: SyncKeys, vaultID: [UInt8]) throws(VaultError) {
        let what = "the sync settings"
        guard blob.count > AEAD.nonceLength else { throw VaultError(.damaged, "\(what) are truncated") }
        let plain = try keys.open(
            Array(blob[AEAD.nonceLength...]), nonce: Array(blob[..<AEAD.nonceLength]),
            associatedData: Array(SyncState.label.utf8) + vaultID, what: what)
        var raw = plain.unsafeCopyToArray()
        defer { secureZero(&raw) }
        var r = ByteReader(raw, what: what)
        let version = try r.u16()
        guard (1...SyncState.version).contains(version) else {
            throw VaultError(.unsupported, "\(what) have an unknown version")
        }
        func bytes() throws(VaultError) -> [UInt8] { try r.read(Int(try r.u32())) }
        func vector() throws(VaultError) -> VersionVector.Vector {
            var v: VersionVector.Vector = []
            for _ in 0..<Int(try r.u16()) { v.append((try r.read(16), try r.u64())) }
            return v
        }
        url = String(decoding: try bytes(), as: UTF8.self)
        let userBytes = try bytes()
        user = try r.u8() == 1 ? String(decoding: userBytes, as: UTF8.self) : nil
        password = try bytes()
        device = try r.read(16)
        preconditions = try r.u8()
        markEpoch = try r.u64()
        markHash = try r.read(32)
        markParent = try r.read(32)
        keysHash = try r.read(32)
        bucketHashes = []
        for _ in 0..<256 { bucketHashes.append(try r.read(32)) }
        for _ in 0..<Int(try r.u32()) {
            let id = try r.read(16)
            let localVersion = try r.u64()
            bases[id] = Base(localVersion: localVersion, versions: try vector())
        }
        for _ in 0..<Int(try r.u32()) {
            let id = try r.read(16)
            let versions = try vector()
            var conflict = Conflict(id: id, versions: versions, payload: try bytes())
            if version >= 2 {
                conflict.device = try r.read(16)
                conflict.valueDevice = try r.read(16)
            }
            conflicts.append(conflict)
        }
        if version >= 2 {
            for _ in 0..<Int(try r.u32()) {
                garbage.append(Garbage(name: try r.read(16), since: Int64(bitPattern: try r.u64())))
            }
        }
        if version >= 3 {
            pinHash = try r.read(32)
            passphraseHash = try r.read(32)
            for _ in 0..<Int(try r.u8()) { replaced.append(try r.read(32)) }
        }
        if version >= 4 {
            let count = Int(try r.u8())
            guard count <= SyncState.maxPassphraseSlots else {
                throw VaultError(.damaged, "\(what) note too many slots")
            }
            for _ in 0..<count { passphraseSlots.append(try r.read(32)) }
        }
        try r.finish()
    }
}
