import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

@Suite("sync objects: root and bucket formats, version vectors")
struct SyncObjectTests {
    let keys: SyncKeys
    let vaultID = [UInt8](repeating: 0xa1, count: 16)
    let device = [UInt8](repeating: 0x01, count: 16)
    let other = [UInt8](repeating: 0x02, count: 16)

    init() throws {
        keys = try SyncKeys(masterKey: SecureBytes(copying: [UInt8](repeating: 7, count: 32)))
    }

    func sampleRoot() -> SyncRoot {
        var root = SyncRoot(
            vaultID: vaultID, keyEpoch: 1, epoch: 5, writer: device, parent: [UInt8](repeating: 9, count: 32))
        root.buckets[3] = .init(name: [UInt8](repeating: 3, count: 16), hash: [UInt8](repeating: 4, count: 32))
        root.buckets[255] = .init(name: [UInt8](repeating: 5, count: 16), hash: [UInt8](repeating: 6, count: 32))
        root.ancestry = [(4, [UInt8](repeating: 8, count: 32))]
        root.devices = [(device, 5), (other, 2)]
        root.leases = [.init(record: [UInt8](repeating: 3, count: 16), device: other, id: 0x1234_5678, seconds: 45)]
        return root
    }

    func sampleBucket() -> SyncBucket {
        let record = SyncRecord(
            id: [3] + [UInt8](repeating: 0, count: 15), versions: [(device, 2), (other, 1)], deleted: false,
            payload: Array(#"{"name":"work"}"#.utf8))
        let tomb = SyncRecord(
            id: [3] + [UInt8](repeating: 9, count: 15), versions: [(other, 4)], deleted: true,
            payload: Array(#"{"name":"gone"}"#.utf8))
        return SyncBucket(vaultID: vaultID, keyEpoch: 1, index: 3, records: [record, tomb])
    }

    @Test("a root and a bucket read back as written")
    func roundTrip() throws {
        let root = sampleRoot()
        let bytes = try root.encoded(with: keys)
        #expect(try SyncRoot(decoding: bytes, keys: keys, vaultID: vaultID, keyEpoch: 1) == root)
        let bucket = sampleBucket()
        let (name, raw) = try bucket.encoded(with: keys)
        #expect(name.count == 16)
        #expect(try SyncBucket(decoding: raw, keys: keys, vaultID: vaultID, keyEpoch: 1, index: 3) == bucket)
        // The plaintext is padded: a bucket's size says little about its records.
        let small = SyncBucket(vaultID: vaultID, keyEpoch: 1, index: 3, records: [])
        #expect(try small.encoded(with: keys).bytes.count == raw.count)
    }

    @Test("a bucket with a conflict's sibling is version 2 and reads back; one without stays version 1")
    func siblings() throws {
        var bucket = sampleBucket()
        let plain = try bucket.encoded(with: keys).bytes
        #expect(Array(plain[8..<10]) == [0, 1], "no sibling: version 1, which older releases read")
        bucket.records[0].siblings = [
            SyncSibling(
                versions: [(device, 1), (other, 2)], deleted: false, payload: Array(#"{"name":"work"}"#.utf8),
                device: other, valueDevice: device)
        ]
        let raw = try bucket.encoded(with: keys).bytes
        #expect(Array(raw[8..<10]) == [0, 2])
        let read = try SyncBucket(decoding: raw, keys: keys, vaultID: vaultID, keyEpoch: 1, index: 3)
        #expect(read == bucket && read.records[0].siblings.count == 1)
        // A version 1 body read as version 2 is cut short: the versions
        // are not interchangeable.
        #expect(throws: VaultError.self) {
            try SyncBucket.parseBody(sampleBucket().body, index: 3, what: "bucket", version: 2)
        }
    }

    @Test("every changed byte of a root or a bucket is refused")
    func tamper() throws {
        let root = try sampleRoot().encoded(with: keys)
        for i in 0..<root.count {
            var t = root
            t[i] ^= 0x01
            #expect(throws: VaultError.self) { try SyncRoot(decoding: t, keys: keys, vaultID: vaultID, keyEpoch: 1) }
        }
        let (_, bucket) = try sampleBucket().encoded(with: keys)
        for i in stride(from: 0, to: bucket.count, by: 7) {
            var t = bucket
            t[i] ^= 0x80
            #expect(throws: VaultError.self) {
                try SyncBucket(decoding: t, keys: keys, vaultID: vaultID, keyEpoch: 1, index: 3)
            }
        }
        for n in [0, 8, 40, root.count - 1] {
            #expect(throws: VaultError.self) {
                try SyncRoot(decoding: Array(root.prefix(n)), keys: keys, vaultID: vaultID, keyEpoch: 1)
            }
        }
    }

    @Test("another vault's objects, a moved bucket and an HTML page are named as such")
    func foreign() throws {
        let root = try sampleRoot().encoded(with: keys)
        let otherVault = [UInt8](repeating: 0xb2, count: 16)
        #expect { try SyncRoot(decoding: root, keys: keys, vaultID: otherVault, keyEpoch: 1) } throws: {
            ($0 as? VaultError)?.reason == "the store's root belongs to another vault"
        }
        // Same vault id, other keys: authentication fails.
        let stranger = try SyncKeys(masterKey: SecureBytes(copying: [UInt8](repeating: 8, count: 32)))
        #expect { try SyncRoot(decoding: root, keys: stranger, vaultID: vaultID, keyEpoch: 1) } throws: {
            ($0 as? VaultError)?.code == .tampered
        }
        let (_, bucket) = try sampleBucket().encoded(with: keys)
        #expect { try SyncBucket(decoding: bucket, keys: keys, vaultID: vaultID, keyEpoch: 1, index: 4) } throws: {
            ($0 as? VaultError)?.code == .tampered
        }
        #expect {
            try SyncRoot(decoding: Array("<!DOCTYPE html><html>".utf8), keys: keys, vaultID: vaultID, keyEpoch: 1)
        } throws: { ($0 as? VaultError)?.reason.contains("not a vault sync root") == true }
    }

    @Test("version vectors order, merge and break ties the same way everywhere")
    func vectors() {
        let a: VersionVector.Vector = [(device, 2)]
        let b: VersionVector.Vector = [(device, 2), (other, 1)]
        #expect(VersionVector.compare(a, a) == .equal)
        #expect(VersionVector.compare(b, a) == .newer)
        #expect(VersionVector.compare(a, b) == .older)
        let c: VersionVector.Vector = [(device, 3)]
        #expect(VersionVector.compare(b, c) == .concurrent)
        #expect(VersionVector.merged(b, c).map(\.counter) == [3, 1])
        // A device's counter is the record's local version, or one more
        // than it had where that is not more.
        #expect(VersionVector.bumped(a, by: other, at: 5).map(\.counter) == [2, 5])
        #expect(VersionVector.bumped(b, by: other, at: 1).map(\.counter) == [2, 2])

        let local = SyncRecord(id: [1], versions: b, deleted: false, payload: [1])
        let remote = SyncRecord(id: [1], versions: c, deleted: false, payload: [2])
        #expect(SyncRecord.merge(local: local, remote: local) == .keepLocal)
        #expect(
            SyncRecord.merge(local: SyncRecord(id: [1], versions: a, deleted: false, payload: [0]), remote: local)
                == .takeRemote)
        // Concurrent: both machines pick the same winner, and keep the loser.
        let here = SyncRecord.merge(local: local, remote: remote)
        let there = SyncRecord.merge(local: remote, remote: local)
        guard case .conflict(let w1, let l1) = here, case .conflict(let w2, let l2) = there else {
            Issue.record("not a conflict")
            return
        }
        #expect(w1 == w2 && l1 == l2 && w1 != l1)
    }

    @Test("a lease is judged by how long this machine has watched it, never by a clock in the store")
    func leaseObservation() {
        let boot = Array("5b6c1d5e-0000-4000-8000-000000000001".utf8)
        let record = [UInt8](repeating: 3, count: 16)
        let lease = SyncRoot.Lease(record: record, device: other, id: 7, seconds: 45)
        var seen = LeaseObservations(decoding: nil, bootID: boot)
        // First seen now: active for its whole duration from now, whatever
        // the holder's clock said when it wrote it.
        #expect(seen.observe([lease], now: 1000) == [lease])
        #expect(seen.observe([lease], now: 1044) == [lease])
        // Another process of this machine reads the stored observation.
        var later = LeaseObservations(decoding: seen.encoded, bootID: boot)
        #expect(later.observe([lease], now: 1045.5).isEmpty)
        // A new lease id is a new lease, watched afresh.
        var renewed = lease
        renewed.id = 8
        #expect(later.observe([renewed], now: 1046) == [renewed])
        // After a reboot the old observations mean nothing.
        var rebooted = LeaseObservations(
            decoding: later.encoded, bootID: Array("5b6c1d5e-0000-4000-8000-000000000002".utf8))
        #expect(rebooted.observe([renewed], now: 5) == [renewed])
        #expect(rebooted.observe([renewed], now: 49) == [renewed])
        #expect(rebooted.observe([renewed], now: 50).isEmpty)
    }

    @Test("a version 1 root is still read; its leases last 60 s from when they are first seen")
    func versionOneRoot() throws {
        var w = ByteWriter()
        w.append(UInt16(0))  // no buckets
        w.append(UInt8(0))  // no ancestry
        w.append(UInt16(0))  // no devices
        w.append(UInt16(1))
        w.append([UInt8](repeating: 3, count: 16))
        w.append(other)
        w.append(UInt64(1_800_000_123))
        var root = SyncRoot(
            vaultID: vaultID, keyEpoch: 1, epoch: 1, writer: device, parent: [UInt8](repeating: 0, count: 32))
        try root.parseBody(w.bytes, version: 1)
        #expect(root.leases.count == 1 && root.leases[0].seconds == 60)
        // The same body is not a version 2 body.
        var strict = SyncRoot(
            vaultID: vaultID, keyEpoch: 1, epoch: 1, writer: device, parent: [UInt8](repeating: 0, count: 32))
        #expect(throws: VaultError.self) { try strict.parseBody(w.bytes, version: 2) }
    }

    @Test("a pairing join refuses keyslots that would leave a vault nothing opens")
    func joinSlots() throws {
        let mk = try SecureBytes(randomCount: 32)
        let keyfile = try Keyslot(
            wrapping: mk, for: .keyfile(try SecureBytes(randomCount: 32)), kdf: .default, vaultID: vaultID
        ).encoded()
        let keyring = try Keyslot(
            wrapping: mk, for: .secretService(try SecureBytes(randomCount: 32)), kdf: .default, vaultID: vaultID
        ).encoded()
        var damaged = keyfile
        damaged[20] ^= 1
        for refused in [[], [keyring], [keyfile, damaged]] {
            #expect(throws: VaultError.self) { try SyncEngine.checkJoinSlots(refused) }
        }
        try SyncEngine.checkJoinSlots([keyring, keyfile])
    }
}
