import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// A machine that joins with the keys the store published, then finds the
/// root pinning other keys (docs/sync.md, "A new passphrase on every
/// machine"): keys published after those it joined with are taken, keys
/// older than them wait for their publisher's pin.
@Suite("passphrases of a machine that joined")
struct JoinedPassphraseTests {
    /// A machine joining as `vault join` does: with the keyslots of the
    /// store's `vault-keys`, noted as the store's.
    func join(_ bench: SyncBench, like first: SyncEngine) throws -> SyncEngine {
        let object = try #require(try bench.store.get(SyncEngine.keysName))
        let (_, slots) = try SyncEngine.parseKeysObject(object.bytes)
        let engine = try bench.machine(joining: first)
        try engine.vault.keyslots.adoptPassphraseSlots(Keyslots.passphraseSlots(among: slots))
        try engine.noteJoinedKeyslots()
        return engine
    }

    @Test("keys that replaced one side of the pair a machine joined with are taken there")
    func pairSideReplaced() throws {
        let bench = try SyncBench(.memory)
        let a = try bench.machine()
        try bench.sync(a)
        let b = try bench.machine(joining: a)
        try bench.sync(b)
        // Two new passphrases at once: B, syncing second, publishes both.
        try a.vault.keyslots.changePassphrase(to: try TestKeys.passphrase("a first"), kdf: .minimum)
        try b.vault.keyslots.changePassphrase(to: try TestKeys.passphrase("b"), kdf: .minimum)
        try bench.sync(a)
        try bench.sync(b)
        let pair = try b.vault.keyslots.passphraseSlots()
        #expect(pair.count == 2)
        // C joins with the pair; before its first sync, A takes the pair
        // and replaces its own side with a newer passphrase.
        let c = try join(bench, like: a)
        try a.vault.keyslots.changePassphrase(to: try TestKeys.passphrase("a second"), kdf: .minimum)
        try bench.sync(a)
        let latest = try a.vault.keyslots.passphraseSlots()
        #expect(latest.count == 2 && latest != pair)
        try bench.sync(c)
        try bench.sync(b)
        #expect(try c.vault.keyslots.passphraseSlots() == latest)
        #expect(try b.vault.keyslots.passphraseSlots() == latest)
    }

    @Test("a machine that joined ahead of the root's pin keeps its keys until their pin lands")
    func joinedAhead() throws {
        let bench = try SyncBench(.memory)
        let a = try bench.machine()
        try a.vault.keyslots.changePassphrase(to: try TestKeys.passphrase("first"), kdf: .minimum)
        try bench.sync(a)
        try a.vault.keyslots.changePassphrase(to: try TestKeys.passphrase("second"), kdf: .minimum)
        try bench.sync(a)
        let second = try a.vault.keyslots.passphraseSlots()
        // The store's `vault-keys` holds the third passphrase, whose pin
        // has not landed: the root still pins the second.
        try a.vault.keyslots.changePassphrase(to: try TestKeys.passphrase("third"), kdf: .minimum)
        let third = try a.vault.keyslots.passphraseSlots()
        _ = try bench.store.put(SyncEngine.keysName, try a.keysObject(), precondition: .none)
        let c = try join(bench, like: a)
        #expect(try bench.root(a)?.root.keysPin != nil)
        try bench.sync(c)
        #expect(try c.vault.keyslots.passphraseSlots() == third)
        #expect(try c.vault.keyslots.passphraseSlots() != second)
        try bench.sync(a)
        try bench.sync(c)
        #expect(try c.vault.keyslots.passphraseSlots() == third)
    }
}
