import Foundation
import Testing
import VaultCrypto

@testable import VaultSync

/// The observations of other machines' leases kept in the vault file
/// (docs/format.md, `lease-seen`): a changed row is dropped, so tampering
/// can only make this machine wait longer, never refresh beside a lease.
@Suite("lease observations in the vault file")
struct LeaseObservationTests {
    let keys: SyncKeys
    let vaultID = [UInt8](repeating: 7, count: 16)
    let boot = Array("0123456789abcdef0123456789abcdef0123".utf8)
    let lease = SyncRoot.Lease(
        record: [UInt8](repeating: 1, count: 16), device: [UInt8](repeating: 2, count: 16), id: 42, seconds: 45)

    init() throws { keys = try SyncKeys(masterKey: try SecureBytes(randomCount: 32)) }

    func stored(seenAt: Double) throws -> [UInt8] {
        var seen = LeaseObservations(decoding: nil, bootID: boot)
        _ = seen.observe([lease], now: seenAt)
        return try seen.sealed(keys: keys, vaultID: vaultID)
    }

    func active(_ row: [UInt8], at now: Double, vaultID: [UInt8]? = nil) throws -> Bool {
        var seen = try LeaseObservations(unsealing: row, keys: keys, vaultID: vaultID ?? self.vaultID, bootID: boot)
        return !seen.observe([lease], now: now).isEmpty
    }

    @Test("a lease seen 30 s ago is active, 50 s ago it is over")
    func honest() throws {
        let row = try stored(seenAt: 100)
        #expect(try active(row, at: 130))
        #expect(try !active(row, at: 150))
    }

    @Test("an earlier first sighting written into the row is dropped: the lease counts from now")
    func tampered() throws {
        var row = try stored(seenAt: 100)
        // The f64 of the first sighting sits just before the 32-byte MAC.
        let at = row.count - 32 - 8
        row.replaceSubrange(at..<(at + 8), with: withUnsafeBytes(of: (0.0).bitPattern.bigEndian) { Array($0) })
        #expect(try active(row, at: 150), "the forged sighting would have ended the lease")
        var flipped = try stored(seenAt: 100)
        flipped[flipped.count - 1] ^= 1
        #expect(try active(flipped, at: 150))
        // Another vault's row is not this vault's.
        #expect(try active(try stored(seenAt: 100), at: 150, vaultID: [UInt8](repeating: 8, count: 16)))
    }
}
