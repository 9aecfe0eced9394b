package import VaultCore
package import VaultCrypto

/// The keys of the sync objects (docs/sync.md, "Keys"), derived from the
/// master key; only a vault unlocked in this process has them.
package final class SyncKeys {
    let sealKey: SecureBytes
    let nameKey: SecureBytes

    package init(masterKey: SecureBytes) throws(VaultError) {
        sealKey = try Secure.subkey(of: masterKey, id: 1, context: "vaultsyn")
        nameKey = try Secure.subkey(of: masterKey, id: 1, context: "vaultobj")
    }

    func seal(_ plain: SecureBytes, associatedData ad: [UInt8]) throws(VaultError) -> (
        nonce: [UInt8], ciphertext: [UInt8]
    ) {
        try Secure.seal(plain, key: sealKey, associatedData: ad)
    }

    /// Opens, or throws `tampered` naming `what`.
    func open(_ ciphertext: [UInt8], nonce: [UInt8], associatedData ad: [UInt8], what: String) throws(VaultError)
        -> SecureBytes
    {
        do {
            return try AEAD.open(ciphertext, key: sealKey, nonce: nonce, associatedData: ad)
        } catch {
            throw VaultError(.tampered, "\(what) failed authentication (changed, or from another vault)")
        }
    }
}

/// What every sync object starts with: magic, version, vault id and key
/// epoch, checked in that order so a foreign object is named as such.
enum SyncPrologue {
    static func write(_ w: inout ByteWriter, magic: String, version: UInt16, vaultID: [UInt8], keyEpoch: UInt32) {
        w.append(magic)
        w.append(version)
        w.append(vaultID)
        w.append(keyEpoch)
    }

    static func read(
        _ r: inout ByteReader, magic: String, kind: String, version: UInt16, vaultID: [UInt8], keyEpoch: UInt32,
        what: String
    ) throws(VaultError) {
        _ = try read(
            &r, magic: magic, kind: kind, versions: version...version, vaultID: vaultID, keyEpoch: keyEpoch,
            what: what)
    }

    /// Reads the header of an object whose version is one of `versions`,
    /// and returns the version.
    static func read(
        _ r: inout ByteReader, magic: String, kind: String, versions: ClosedRange<UInt16>, vaultID: [UInt8],
        keyEpoch: UInt32, what: String
    ) throws(VaultError) -> UInt16 {
        do { try r.expect(magic) } catch {
            throw VaultError(.damaged, "\(what) is not a vault sync \(kind) (wrong magic number)")
        }
        let v = try r.u16()
        guard versions.contains(v) else { throw VaultError(.unsupported, "\(what) has version \(v)") }
        guard try r.read(16) == vaultID else { throw VaultError(.tampered, "\(what) belongs to another vault") }
        let e = try r.u32()
        guard e == keyEpoch else { throw VaultError(.unsupported, "\(what) uses key epoch \(e)") }
        return v
    }

    /// Opens what follows the header: nonce, then ciphertext with AD =
    /// label and the header bytes.
    static func open(
        _ bytes: [UInt8], reader r: inout ByteReader, label: String, keys: SyncKeys, what: String
    ) throws(VaultError) -> SecureBytes {
        let headerLength = r.offset
        let nonce = try r.read(AEAD.nonceLength)
        let ciphertext = try r.read(r.remaining)
        return try keys.open(
            ciphertext, nonce: nonce, associatedData: Array(label.utf8) + Array(bytes[..<headerLength]), what: what)
    }
}

/// The mutable root object (`vault-root`): which bucket objects hold the
/// records, the recent ancestry, the writers, and the refresh leases.
package struct SyncRoot: Equatable {
    static let magic = "vault-sr"
    /// Version 2: leases carry an id and a duration instead of an expiry
    /// by the holder's clock. Version 3 adds the keys pin, and is written
    /// only once a root has one (a passphrase changed), so that releases
    /// that know version 2 keep syncing until then. Versions 1 and 2 are
    /// still read.
    static let version: UInt16 = 3
    static let label = "vault.root.v1"
    static let maxAncestry = 32
    static let maxDevices = 1024
    static let maxLeases = 4096
    /// Longest lease a root may carry.
    static let maxLeaseSeconds: UInt32 = 600

    struct BucketRef: Equatable {
        /// The object name's 16 bytes (`b-` and their hex is the name).
        var name: [UInt8]
        /// BLAKE2b-32 of the bucket object's bytes.
        var hash: [UInt8]

        var objectName: String { "b-" + name.hex }
    }

    /// A refresh lease. It names no time on any clock: an observer judges
    /// it by how long it has itself seen the same lease id (docs/sync.md).
    struct Lease: Equatable {
        var record: [UInt8]
        var device: [UInt8]
        /// Random, new for every lease taken.
        var id: UInt32
        /// How long the holder may use it, from before it was written.
        var seconds: UInt32

        /// Version 1 leases held an expiry (u64 epoch seconds by the
        /// holder's clock) and lasted 60 s; the expiry serves as their id.
        static let version1Seconds: UInt32 = 60
    }

    var vaultID: [UInt8]
    var keyEpoch: UInt32
    var epoch: UInt64
    var writer: [UInt8]
    var parent: [UInt8]
    /// 256 slots, nil for an empty bucket.
    var buckets: [BucketRef?] = Array(repeating: nil, count: 256)
    /// Up to 32 (epoch, hash) pairs of the roots before this one, newest first.
    var ancestry: [(epoch: UInt64, hash: [UInt8])] = []
    /// Devices that have written, with the epoch of their last write.
    var devices: [(id: [UInt8], epoch: UInt64)] = []
    var leases: [Lease] = []
    /// BLAKE2b-32 of the `vault-keys` object this root vouches for: set
    /// by the machine that changed a passphrase, so that the others take
    /// the new slot knowing it is the vault's (docs/sync.md, "A new
    /// passphrase on every machine"); nil until a passphrase changes.
    var keysPin: [UInt8]?

    /// The version this root is written as.
    var writtenVersion: UInt16 { keysPin == nil ? 2 : 3 }

    package static func == (a: SyncRoot, b: SyncRoot) -> Bool {
        a.headerFields == b.headerFields && a.buckets == b.buckets
            && a.ancestry.elementsEqual(b.ancestry) { $0.epoch == $1.epoch && $0.hash == $1.hash }
            && a.devices.elementsEqual(b.devices) { $0.id == $1.id && $0.epoch == $1.epoch } && a.leases == b.leases
            && a.keysPin == b.keysPin
    }

    /// magic .. parent: public, authenticated as associated data.
    var headerFields: [UInt8] {
        var w = ByteWriter()
        SyncPrologue.write(&w, magic: SyncRoot.magic, version: writtenVersion, vaultID: vaultID, keyEpoch: keyEpoch)
        w.append(epoch)
        w.append(writer)
        w.append(parent)
        return w.bytes
    }

    var body: [UInt8] {
        var w = ByteWriter()
        let present = buckets.enumerated().compactMap { i, b in b.map { (i, $0) } }
        w.append(UInt16(present.count))
        for (i, b) in present {
            w.append(UInt8(i))
            w.append(b.name)
            w.append(b.hash)
        }
        w.append(UInt8(ancestry.count))
        for a in ancestry {
            w.append(a.epoch)
            w.append(a.hash)
        }
        w.append(UInt16(devices.count))
        for d in devices {
            w.append(d.id)
            w.append(d.epoch)
        }
        w.append(UInt16(leases.count))
        for l in leases {
            w.append(l.record)
            w.append(l.device)
            w.append(l.id)
            w.append(l.seconds)
        }
        if let keysPin { w.append(keysPin) }
        return w.bytes
    }

    /// The object's bytes.
    func encoded(with keys: SyncKeys) throws(VaultError) -> [UInt8] {
        let header = headerFields
        let plain = try Secure.copy(body)
        let (nonce, ciphertext) = try keys.seal(plain, associatedData: Array(SyncRoot.label.utf8) + header)
        return header + nonce + ciphertext
    }

    /// The vault id in a root's public header, read without a key; nil
    /// when the bytes are not a root.
    static func vaultID(ofRoot bytes: [UInt8]) -> [UInt8]? {
        let magic = Array(SyncRoot.magic.utf8)
        guard bytes.count >= magic.count + 2 + 16, Array(bytes.prefix(magic.count)) == magic else { return nil }
        return Array(bytes[(magic.count + 2)..<(magic.count + 18)])
    }

    /// Parses and authenticates a root of the vault `vaultID`.
    package init(decoding bytes: [UInt8], keys: SyncKeys, vaultID: [UInt8], keyEpoch: UInt32) throws(VaultError) {
        let what = "the store's root"
        var r = ByteReader(bytes, what: what)
        let version = try SyncPrologue.read(
            &r, magic: SyncRoot.magic, kind: "root", versions: 1...SyncRoot.version, vaultID: vaultID,
            keyEpoch: keyEpoch, what: what)
        self.vaultID = vaultID
        self.keyEpoch = keyEpoch
        epoch = try r.u64()
        writer = try r.read(16)
        parent = try r.read(32)
        let plain = try SyncPrologue.open(bytes, reader: &r, label: SyncRoot.label, keys: keys, what: what)
        try parseBody(plain.unsafeCopyToArray(), version: version)
    }

    package init(vaultID: [UInt8], keyEpoch: UInt32, epoch: UInt64, writer: [UInt8], parent: [UInt8]) {
        self.vaultID = vaultID
        self.keyEpoch = keyEpoch
        self.epoch = epoch
        self.writer = writer
        self.parent = parent
    }

    /// Parses the decrypted body strictly.
    package mutating func parseBody(_ body: [UInt8], version: UInt16 = SyncRoot.version) throws(VaultError) {
        var r = ByteReader(body, what: "the store's root")
        let count = Int(try r.u16())
        guard count <= 256 else { throw VaultError(.damaged, "the store's root lists too many buckets") }
        var previous = -1
        for _ in 0..<count {
            let index = Int(try r.u8())
            guard index > previous else { throw VaultError(.damaged, "the store's root lists buckets out of order") }
            previous = index
            buckets[index] = BucketRef(name: try r.read(16), hash: try r.read(32))
        }
        let ancestors = Int(try r.u8())
        guard ancestors <= SyncRoot.maxAncestry else {
            throw VaultError(.damaged, "the store's root has too long an ancestry")
        }
        for _ in 0..<ancestors { ancestry.append((try r.u64(), try r.read(32))) }
        let deviceCount = Int(try r.u16())
        guard deviceCount <= SyncRoot.maxDevices else {
            throw VaultError(.damaged, "the store's root lists too many devices")
        }
        for _ in 0..<deviceCount { devices.append((try r.read(16), try r.u64())) }
        let leaseCount = Int(try r.u16())
        guard leaseCount <= SyncRoot.maxLeases else {
            throw VaultError(.damaged, "the store's root has too many leases")
        }
        for _ in 0..<leaseCount {
            let record = try r.read(16)
            let device = try r.read(16)
            if version == 1 {
                let expires = try r.u64()
                leases.append(
                    Lease(
                        record: record, device: device, id: UInt32(truncatingIfNeeded: expires),
                        seconds: Lease.version1Seconds))
            } else {
                let id = try r.u32()
                let seconds = try r.u32()
                guard seconds > 0, seconds <= SyncRoot.maxLeaseSeconds else {
                    throw VaultError(.damaged, "the store's root has a lease of \(seconds) s")
                }
                leases.append(Lease(record: record, device: device, id: id, seconds: seconds))
            }
        }
        if version >= 3 { keysPin = try r.read(32) }
        try r.finish()
    }

    /// BLAKE2b-32 of an object's bytes: how roots and buckets are pinned.
    static func hash(_ bytes: [UInt8]) throws(VaultError) -> [UInt8] {
        try Secure.hash(bytes, length: 32)
    }
}

/// One record as carried in a bucket: its identity, version vector,
/// tombstone flag and payload (the same JSON as in the local file).
package struct SyncRecord: Equatable {
    var id: [UInt8]
    /// Device id -> counter, sorted by device id.
    var versions: [(device: [UInt8], counter: UInt64)]
    var deleted: Bool
    var payload: [UInt8]
    /// The losing sides of a conflict on this record, until someone picks
    /// (bucket version 2).
    var siblings: [SyncSibling] = []

    package static func == (a: SyncRecord, b: SyncRecord) -> Bool {
        a.id == b.id && a.deleted == b.deleted && a.payload == b.payload
            && a.versions.elementsEqual(b.versions) { $0.device == $1.device && $0.counter == $1.counter }
            && a.siblings == b.siblings
    }
}

/// A side of concurrent edits that lost, carried with its record.
package struct SyncSibling: Equatable {
    var versions: [(device: [UInt8], counter: UInt64)]
    var deleted: Bool
    var payload: [UInt8]
    /// The device that made this side, and the one that made the value.
    var device: [UInt8]
    var valueDevice: [UInt8]

    package static func == (a: SyncSibling, b: SyncSibling) -> Bool {
        a.deleted == b.deleted && a.payload == b.payload && a.device == b.device && a.valueDevice == b.valueDevice
            && a.versions.elementsEqual(b.versions) { $0.device == $1.device && $0.counter == $1.counter }
    }
}

/// An immutable bucket object (`b-...`): the records whose id starts with
/// its index byte.
package struct SyncBucket: Equatable {
    static let magic = "vault-sb"
    /// Version 2 carries the siblings of records in conflict; a bucket
    /// without any is still written as version 1, which older releases read.
    static let version: UInt16 = 2
    static let maxSiblings = 16
    static let label = "vault.bucket.v1"
    static let padBlock = 1024
    static let maxRecords = 1 << 16
    static let maxPayload = 1 << 20

    var vaultID: [UInt8]
    var keyEpoch: UInt32
    var index: UInt8
    var records: [SyncRecord]

    /// 2 when a record has siblings, else 1.
    var writtenVersion: UInt16 { records.contains { !$0.siblings.isEmpty } ? 2 : 1 }

    var headerFields: [UInt8] {
        var w = ByteWriter()
        SyncPrologue.write(
            &w, magic: SyncBucket.magic, version: writtenVersion, vaultID: vaultID, keyEpoch: keyEpoch)
        w.append(index)
        return w.bytes
    }

    var body: [UInt8] {
        var w = ByteWriter()
        let version = writtenVersion
        func vector(_ versions: [(device: [UInt8], counter: UInt64)]) {
            w.append(UInt16(versions.count))
            for v in versions {
                w.append(v.device)
                w.append(v.counter)
            }
        }
        w.append(UInt32(records.count))
        for record in records {
            w.append(record.id)
            vector(record.versions)
            w.append(UInt8(record.deleted ? 1 : 0))
            w.append(UInt32(record.payload.count))
            w.append(record.payload)
            guard version >= 2 else { continue }
            w.append(UInt16(record.siblings.count))
            for s in record.siblings {
                vector(s.versions)
                w.append(UInt8(s.deleted ? 1 : 0))
                w.append(s.device)
                w.append(s.valueDevice)
                w.append(UInt32(s.payload.count))
                w.append(s.payload)
            }
        }
        return w.bytes
    }

    /// The object's bytes and its name (keyed hash of its content).
    func encoded(with keys: SyncKeys) throws(VaultError) -> (name: [UInt8], bytes: [UInt8]) {
        let header = headerFields
        var raw = body
        defer { secureZero(&raw) }
        let padded = try Secure.pad(try Secure.copy(raw), blockSize: SyncBucket.padBlock)
        let (nonce, ciphertext) = try keys.seal(padded, associatedData: Array(SyncBucket.label.utf8) + header)
        let bytes = header + nonce + ciphertext
        let name = try Secure.hash(Array(SyncBucket.label.utf8) + [index] + ciphertext, key: keys.nameKey, length: 16)
        return (name, bytes)
    }

    init(vaultID: [UInt8], keyEpoch: UInt32, index: UInt8, records: [SyncRecord]) {
        self.vaultID = vaultID
        self.keyEpoch = keyEpoch
        self.index = index
        self.records = records
    }

    /// Parses and authenticates the bucket expected at `index`.
    init(decoding bytes: [UInt8], keys: SyncKeys, vaultID: [UInt8], keyEpoch: UInt32, index expected: UInt8)
        throws(VaultError)
    {
        let what = "bucket \(expected) of the store"
        var r = ByteReader(bytes, what: what)
        let version = try SyncPrologue.read(
            &r, magic: SyncBucket.magic, kind: "bucket", versions: 1...SyncBucket.version, vaultID: vaultID,
            keyEpoch: keyEpoch, what: what)
        let index = try r.u8()
        guard index == expected else { throw VaultError(.tampered, "\(what) is bucket \(index) moved") }
        self.vaultID = vaultID
        self.keyEpoch = keyEpoch
        self.index = index
        let padded = try SyncPrologue.open(bytes, reader: &r, label: SyncBucket.label, keys: keys, what: what)
        let plain = try Secure.unpad(padded, blockSize: SyncBucket.padBlock)
        var raw = plain.unsafeCopyToArray()
        defer { secureZero(&raw) }
        records = try SyncBucket.parseBody(raw, index: index, what: what, version: version)
    }

    /// Parses a decrypted body strictly: ids in order and in this bucket,
    /// vectors sorted by device with positive counters.
    package static func parseBody(_ body: [UInt8], index: UInt8, what: String, version: UInt16 = 1)
        throws(VaultError) -> [SyncRecord]
    {
        var r = ByteReader(body, what: what)
        func vector() throws(VaultError) -> [(device: [UInt8], counter: UInt64)] {
            let vectorCount = Int(try r.u16())
            guard vectorCount >= 1, vectorCount <= SyncRoot.maxDevices else {
                throw VaultError(.damaged, "\(what) has a malformed version vector")
            }
            var versions: [(device: [UInt8], counter: UInt64)] = []
            for _ in 0..<vectorCount {
                let device = try r.read(16)
                let counter = try r.u64()
                guard counter > 0, versions.last.map({ $0.device.lexicographicallyPrecedes(device) }) ?? true else {
                    throw VaultError(.damaged, "\(what) has a malformed version vector")
                }
                versions.append((device, counter))
            }
            return versions
        }
        func flag() throws(VaultError) -> Bool {
            let deleted = try r.u8()
            guard deleted <= 1 else { throw VaultError(.damaged, "\(what) has a malformed record") }
            return deleted == 1
        }
        func payload() throws(VaultError) -> [UInt8] {
            let length = Int(try r.u32())
            guard length <= SyncBucket.maxPayload else { throw VaultError(.damaged, "\(what) has an oversized record") }
            return try r.read(length)
        }
        let count = Int(try r.u32())
        guard count <= SyncBucket.maxRecords else { throw VaultError(.damaged, "\(what) has too many records") }
        var records: [SyncRecord] = []
        var previous: [UInt8]? = nil
        for _ in 0..<count {
            let id = try r.read(16)
            guard id[0] == index else { throw VaultError(.tampered, "\(what) holds a record of another bucket") }
            if let previous, !previous.lexicographicallyPrecedes(id) {
                throw VaultError(.damaged, "\(what) has records out of order")
            }
            previous = id
            var record = SyncRecord(id: id, versions: try vector(), deleted: try flag(), payload: try payload())
            if version >= 2 {
                let count = Int(try r.u16())
                guard count <= SyncBucket.maxSiblings else { throw VaultError(.damaged, "\(what) has too many sides") }
                for _ in 0..<count {
                    let versions = try vector()
                    let deleted = try flag()
                    let device = try r.read(16)
                    let valueDevice = try r.read(16)
                    record.siblings.append(
                        SyncSibling(
                            versions: versions, deleted: deleted, payload: try payload(), device: device,
                            valueDevice: valueDevice))
                }
            }
            records.append(record)
        }
        try r.finish()
        return records
    }
}
