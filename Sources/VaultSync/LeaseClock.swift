internal import FoundationEssentials
internal import Glibc
internal import VaultCore

/// When this machine first saw each lease in the store's root, kept in the
/// vault file (meta key `lease-seen`) so that every process on this machine
/// shares one observation. A lease is active until it has been seen for its
/// duration; how long the holder's clock says it has held it plays no part.
///
/// The row is authenticated (`LeaseObservations.sealed`): an earlier "first
/// seen" would end another machine's lease early and let this one refresh
/// beside it. A row that fails its check (changed, or moved from another
/// vault) is dropped, and every lease is then observed afresh: that can
/// only make this machine wait longer, never refresh sooner.
struct LeaseObservations {
    static let metaKey = "lease-seen"

    struct Key: Hashable {
        var record: [UInt8]
        var device: [UInt8]
        var id: UInt32
    }

    private(set) var firstSeen: [Key: Double] = [:]
    let bootID: [UInt8]

    /// Entry: record 16, device 16, id u32, first seen (f64 bits, u64).
    init(decoding blob: [UInt8]?, bootID: [UInt8]) {
        self.bootID = bootID
        // Another boot, or unreadable: observe afresh.
        guard let entries = BootRow.entries(blob, bootID: bootID) else { return }
        var r = ByteReader(entries, what: "the lease observations")
        while r.remaining >= 16 + 16 + 4 + 8 {
            guard let record = try? r.read(16), let device = try? r.read(16), let id = try? r.u32(),
                let bits = try? r.u64()
            else { return }
            firstSeen[Key(record: record, device: device, id: id)] = Double(bitPattern: bits)
        }
    }

    var encoded: [UInt8] {
        var w = BootRow.writer(bootID: bootID)
        for (key, seen) in firstSeen.sorted(by: { $0.key.record.lexicographicallyPrecedes($1.key.record) }) {
            w.append(key.record)
            w.append(key.device)
            w.append(key.id)
            w.append(seen.bitPattern)
        }
        return w.bytes
    }

    /// Notes the leases of `root` first seen at `now`, forgets the ones no
    /// longer there, and returns the leases still active.
    mutating func observe(_ leases: [SyncRoot.Lease], now: Double) -> [SyncRoot.Lease] {
        var next: [Key: Double] = [:]
        var active: [SyncRoot.Lease] = []
        for lease in leases {
            let key = Key(record: lease.record, device: lease.device, id: lease.id)
            let seen = firstSeen[key] ?? now
            next[key] = seen
            if now - seen < lease.observedSeconds { active.append(lease) }
        }
        firstSeen = next
        return active
    }
}

extension LeaseObservations {
    static let label = Array("vault.lease-seen.v1".utf8) + [0]

    /// The stored row: the observations, then their MAC (`BootRow`).
    func sealed(keys: SyncKeys, vaultID: [UInt8]) throws(VaultError) -> [UInt8] {
        try BootRow.sealed(encoded, label: LeaseObservations.label, keys: keys, vaultID: vaultID)
    }

    /// The observations of a stored row; none when it is absent or fails
    /// its check (then leases are observed afresh).
    init(unsealing row: [UInt8]?, keys: SyncKeys, vaultID: [UInt8], bootID: [UInt8]) throws(VaultError) {
        self.init(
            decoding: try BootRow.unsealed(row, label: LeaseObservations.label, keys: keys, vaultID: vaultID),
            bootID: bootID)
    }
}

/// The rows this machine keeps of leases (`lease-seen`, `lease-held`):
/// the id of the boot that wrote it (its clock's readings mean nothing in
/// another), the entries, then a MAC: BLAKE2b-256 keyed with the
/// object-name key over the row's label, the vault id and the rest. A row
/// of another boot, or one that fails its check, holds nothing.
enum BootRow {
    /// The entries of `blob` when boot `bootID` wrote it; nil otherwise.
    static func entries(_ blob: [UInt8]?, bootID: [UInt8]) -> [UInt8]? {
        guard let blob, blob.count >= 2, !bootID.isEmpty else { return nil }
        let idLength = Int(blob[0])
        guard idLength == bootID.count, blob.count >= 1 + idLength, Array(blob[1..<(1 + idLength)]) == bootID
        else { return nil }
        return Array(blob[(1 + idLength)...])
    }

    /// A writer with the start of a row of boot `bootID`: its entries follow.
    static func writer(bootID: [UInt8]) -> ByteWriter {
        var w = ByteWriter()
        w.append(UInt8(bootID.count))
        w.append(bootID)
        return w
    }

    /// `blob`, then its MAC.
    static func sealed(_ blob: [UInt8], label: [UInt8], keys: SyncKeys, vaultID: [UInt8]) throws(VaultError)
        -> [UInt8]
    {
        blob + (try Secure.hash(label + vaultID + blob, key: keys.nameKey))
    }

    /// The blob of a stored row, or nil when it is absent or fails its check.
    static func unsealed(_ row: [UInt8]?, label: [UInt8], keys: SyncKeys, vaultID: [UInt8]) throws(VaultError)
        -> [UInt8]?
    {
        guard let row, row.count > 32 else { return nil }
        let blob = Array(row.dropLast(32))
        let mac = try Secure.hash(label + vaultID + blob, key: keys.nameKey)
        return same(mac, Array(row.suffix(32))) ? blob : nil
    }

    /// Equal, in time that does not depend on where they differ.
    static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

extension SyncEngine {
    /// The active leases of `root` by this machine's observation, with the
    /// observation stored for the other processes of this machine.
    func activeLeases(_ root: SyncRoot, keys: SyncKeys) throws(VaultError) -> [SyncRoot.Lease] {
        var active: [SyncRoot.Lease] = []
        try vault.update { (_: inout StateManifest) throws(VaultError) in
            active = try observeLeases(root, keys: keys)
        }
        return active
    }

    /// `activeLeases` inside a write transaction of the caller's (a sync's
    /// merge notes the leases of every root it takes, so that what this
    /// machine knows of them is as recent as its last sync).
    func observeLeases(_ root: SyncRoot, keys: SyncKeys) throws(VaultError) -> [SyncRoot.Lease] {
        let clock = vault.pacing.boot()
        let vaultID = vault.header.vaultID
        var seen = try LeaseObservations(
            unsealing: try vault.getMeta(LeaseObservations.metaKey), keys: keys, vaultID: vaultID,
            bootID: clock.bootID)
        let active = seen.observe(root.leases, now: clock.seconds)
        try vault.putMeta(LeaseObservations.metaKey, try seen.sealed(keys: keys, vaultID: vaultID))
        // A standing lease this machine noted as held but that the store's
        // root no longer carries (another machine's write replaced it, on a
        // store that ignores preconditions) is not held: letting go can only
        // keep this machine from refreshing alone, never let it.
        let held = try heldLeases(keys)
        if !held.held.isEmpty {
            let me = try loadSyncState(keys).device
            let gone = held.held.filter { record, h in
                !root.leases.contains { $0.record == record && $0.device == me && HeldLeases.same(h.id, $0.id) }
            }.map(\.key)
            if !gone.isEmpty { try updateHeldLeases(keys) { h in for record in gone { h.set(record, nil) } } }
        }
        return active
    }
}

/// The standing leases this machine holds (docs/sync.md, "Refresh rights
/// while the store is away"): for each record, the lease id written and
/// when, on this machine's boot clock, from before the write. Kept in the
/// vault file (meta key `lease-held`) so that every process of the machine
/// knows whether it may refresh the grant while the store cannot be
/// reached. Sealed like `lease-seen`; a row that fails its check, or was
/// written in another boot, holds nothing: that can only keep this machine
/// from refreshing alone, never let it.
struct HeldLeases {
    static let metaKey = "lease-held"
    static let label = Array("vault.lease-held.v1".utf8) + [0]

    struct Held: Equatable {
        var id: UInt32
        /// Boot-clock seconds from before the root carrying the lease was written.
        var since: Double
        var seconds: UInt32
    }

    private(set) var held: [[UInt8]: Held] = [:]
    let bootID: [UInt8]

    /// Entry: record 16, id u32, since (f64 bits, u64), seconds u32.
    init(decoding blob: [UInt8]?, bootID: [UInt8]) {
        self.bootID = bootID
        guard let entries = BootRow.entries(blob, bootID: bootID) else { return }
        var r = ByteReader(entries, what: "the held leases")
        while r.remaining >= 16 + 4 + 8 + 4 {
            guard let record = try? r.read(16), let id = try? r.u32(), let bits = try? r.u64(),
                let seconds = try? r.u32()
            else { return }
            held[record] = Held(id: id, since: Double(bitPattern: bits), seconds: seconds)
        }
    }

    var encoded: [UInt8] {
        var w = BootRow.writer(bootID: bootID)
        for (record, h) in held.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            w.append(record)
            w.append(h.id)
            w.append(h.since.bitPattern)
            w.append(h.seconds)
        }
        return w.bytes
    }

    mutating func set(_ record: [UInt8], _ h: Held?) { held[record] = h }

    /// Notes the lease on `record` as quiet before a root that renews it
    /// quiet is written: this machine no longer refreshes alone under it,
    /// whether the write lands or not. It is still the same lease (`same`).
    mutating func promiseQuiet(_ record: [UInt8]) { held[record]?.id |= SyncEngine.quietFlag }

    /// Whether a noted id and a root's lease id are the same lease: equal
    /// but for the quiet flag, which this machine may set in its note first.
    static func same(_ noted: UInt32, _ lease: UInt32) -> Bool {
        noted | SyncEngine.quietFlag == lease | SyncEngine.quietFlag
    }

    /// Whether the lease on `record` is still this machine's at boot-clock
    /// time `now`, with `request` seconds to spare: it must end, with a
    /// margin, before any other machine can have seen the lease for its
    /// whole duration.
    func lets(_ record: [UInt8], now: Double, request: Double) -> Bool {
        guard let h = held[record] else { return false }
        return now - h.since + request + SyncEngine.leaseMargin < Double(h.seconds)
    }

    /// Whether this machine may start a token request of up to `request`
    /// seconds for `record` while the store is away: under a lease that is
    /// still its own and not quiet (a quiet one promised the others that
    /// it would not).
    func letsRefreshAlone(_ record: [UInt8], now: Double, request: Double) -> Bool {
        guard let h = held[record], h.id & SyncEngine.quietFlag == 0 else { return false }
        return lets(record, now: now, request: request)
    }
}

extension SyncEngine {
    /// This machine's standing leases, as every process of it shares them.
    func heldLeases(_ keys: SyncKeys) throws(VaultError) -> HeldLeases {
        let blob = try BootRow.unsealed(
            try vault.getMeta(HeldLeases.metaKey), label: HeldLeases.label, keys: keys, vaultID: vault.header.vaultID)
        return HeldLeases(decoding: blob, bootID: vault.pacing.boot().bootID)
    }

    /// Changes this machine's standing leases; call inside a write transaction.
    func updateHeldLeases(_ keys: SyncKeys, _ change: (inout HeldLeases) -> Void) throws(VaultError) {
        var leases = try heldLeases(keys)
        change(&leases)
        try vault.putMeta(
            HeldLeases.metaKey,
            try BootRow.sealed(leases.encoded, label: HeldLeases.label, keys: keys, vaultID: vault.header.vaultID))
    }
}
