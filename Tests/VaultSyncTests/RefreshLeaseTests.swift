import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// A machine's refresh lease at the store ends with the push of what the
/// refresh stored, and not before (docs/sync.md, "Leases"): another
/// machine that took the lease while the refresh was under way would
/// present the refresh token just spent.
@Suite("a refresh lease ends with the refresh")
struct RefreshLeaseTests {
    static let kinds: [StoreKind] = StoreKind.available

    /// The record id of grant `name` in `engine`'s vault.
    func record(_ engine: SyncEngine, _ name: String) throws -> [UInt8] {
        try engine.vault.loadWithRow(name).0.id
    }

    /// Machines a and b, synced, holding grant "shared" (tokens "t1"), and its record id.
    func twoMachines(_ kind: StoreKind) throws -> (SyncBench, SyncEngine, SyncEngine, [UInt8]) {
        let bench = try SyncBench(kind)
        let a = try bench.machine()
        try a.vault.save(TestKeys.grant(token: "t1"), as: "shared")
        try bench.sync(a)
        let b = try bench.machine(joining: a)
        try bench.sync(b)
        return (bench, a, b, try record(a, "shared"))
    }

    /// What `engine` finds when it tries to take the lease on `id`, after a sync.
    func tryLease(_ engine: SyncEngine, _ id: [UInt8], bench: SyncBench) throws -> SyncEngine.LeaseOutcome {
        try bench.sync(engine)
        return try engine.takeLease(id, store: bench.store, keys: try engine.syncKeys())
    }

    @Test("another process's push of the record keeps the lease while the refresh is under way", arguments: kinds)
    func pushDuringRefresh(kind: StoreKind) throws {
        let (bench, a, b, id) = try twoMachines(kind)

        // A refresh on machine a: the grant's lock, then the store's lease.
        let lock = try GrantLock.acquire(directory: a.vault.location.directory, record: id, wait: 1)
        #expect(try tryLease(a, id, bench: bench) == .taken)
        #expect(a.vault.refreshInProgress(record: id))

        // Meanwhile another process of machine a changes the record and
        // syncs: the record is pushed, still with the refresh token that
        // the refresh is spending.
        try a.vault.rename("shared", to: "renamed")
        try bench.sync(a)
        #expect(try tryLease(b, id, bench: bench) == .held, "machine b must not refresh beside machine a")

        // The refresh stores the new tokens, lets go of the lock and pushes them: that ends the lease.
        _ = try a.vault.storeRefreshed(
            id: id, spentRefreshToken: "1//refresh-t1", TestKeys.grant(token: "t2"))
        lock.release()
        try bench.sync(a)
        #expect(try tryLease(b, id, bench: bench) == .taken)
        #expect(try b.vault.load("renamed").refreshToken == "1//refresh-t2")
    }

    @Test(
        "the refresh's own sync ends its lease though another process of its machine already sent the tokens",
        arguments: kinds)
    func sentByAnother(kind: StoreKind) throws {
        let (bench, a, b, id) = try twoMachines(kind)
        let lock = try GrantLock.acquire(directory: a.vault.location.directory, record: id, wait: 1)
        #expect(try tryLease(a, id, bench: bench) == .taken)
        _ = try a.vault.storeRefreshed(id: id, spentRefreshToken: "1//refresh-t1", TestKeys.grant(token: "t2"))
        // Another process of machine a syncs first: the tokens go, the lease stays.
        try bench.sync(a)
        #expect(try tryLease(b, id, bench: bench) == .held)
        // The refresh lets go of the lock; its own sync has nothing left to send, and still ends the lease.
        lock.release()
        try bench.sync(a)
        #expect(try tryLease(b, id, bench: bench) == .taken)
        #expect(try b.vault.load("shared").refreshToken == "1//refresh-t2")
    }

    @Test("a push after the refresh process ended ends the lease it left", arguments: kinds)
    func pushAfterRefresh(kind: StoreKind) throws {
        let (bench, a, b, id) = try twoMachines(kind)

        // A refresh that stored its tokens and ended before it could push them.
        let lock = try GrantLock.acquire(directory: a.vault.location.directory, record: id, wait: 1)
        #expect(try tryLease(a, id, bench: bench) == .taken)
        _ = try a.vault.storeRefreshed(
            id: id, spentRefreshToken: "1//refresh-t1", TestKeys.grant(token: "t2"))
        lock.release()
        #expect(!a.vault.refreshInProgress(record: id))
        #expect(try tryLease(b, id, bench: bench) == .held)

        // Machine a's next sync, by any process, sends them and ends the lease.
        try bench.sync(a)
        #expect(try tryLease(b, id, bench: bench) == .taken)
        #expect(try b.vault.load("shared").refreshToken == "1//refresh-t2")
    }
}

/// Taking the lease when answers are lost: a store that answers other
/// requests is working, and the machine keeps trying for the lease rather
/// than refresh on its own beside a machine that may hold it; only a store
/// that answers nothing lets it refresh alone (docs/sync.md, "Availability
/// first").
@Suite("taking a refresh lease while answers are lost")
struct LostAnswerLeaseTests {
    @Test("answers lost twice in a row, more than a request's tries: the lease is still taken", arguments: [2, 3, 5])
    func lostAnswers(lost: Int) throws {
        let (bench, a, b, id) = try RefreshLeaseTests().twoMachines(.memory)
        let store = LosingStore(bench.store)
        // Another change of a's, so the lease's sync writes a root first.
        try a.vault.save(TestKeys.grant(token: "other"), as: "other")
        store.lose = lost
        let arrived = try a.leaseForRefresh(
            "shared", minimumValidity: nil, through: store, keys: try a.syncKeys())
        #expect(arrived == nil, "the lease is taken")
        #expect(try RefreshLeaseTests().tryLease(b, id, bench: bench) == .held)
    }

    @Test("a store that answers nothing: the lease is not waited for")
    func partition() throws {
        let (bench, a, _, _) = try RefreshLeaseTests().twoMachines(.memory)
        let store = LosingStore(bench.store)
        store.away = true
        let started = Date()
        #expect(throws: VaultError.self) {
            try a.leaseForRefresh("shared", minimumValidity: nil, through: store, keys: try a.syncKeys())
        }
        #expect(Date().timeIntervalSince(started) < 5)
    }
}

/// Keys that do the record operations but withhold the master key, as a
/// vault opened through the agent does.
final class WithheldMasterKey: VaultKeys {
    let keys: any VaultKeys
    init(_ keys: any VaultKeys) { self.keys = keys }
    func nameHash(_ name: String) throws(VaultError) -> [UInt8] { try keys.nameHash(name) }
    func seal(_ payload: Payload, id: [UInt8], version: UInt64, deleted: Bool, nameHash: [UInt8])
        throws(VaultError) -> StoredRecord
    {
        try keys.seal(payload, id: id, version: version, deleted: deleted, nameHash: nameHash)
    }
    func open(_ records: [StoredRecord], secrets: Bool) throws(VaultError) -> [Result<Payload, VaultError>] {
        try keys.open(records, secrets: secrets)
    }
    func stateMAC(_ body: [UInt8]) throws(VaultError) -> [UInt8] { try keys.stateMAC(body) }
    var masterKey: SecureBytes? { nil }
}

@Suite("a refresh without the keys sync needs")
struct LeaseWithoutKeysTests {
    @Test(
        "a process that cannot take the sync lease for want of keys does not refresh alone",
        .enabled(if: StoreKind.apacheInstalled))
    func noKeysNoLoneRefresh() throws {
        let bench = try SyncBench(.apache)
        let a = try bench.machine()
        try a.vault.save(TestKeys.grant(token: "t1"), as: "shared")
        try bench.sync(a)
        let locked = try LockedVault(location: a.vault.location)
        let withheld = Vault(
            location: a.vault.location, database: locked.database, header: locked.header,
            keys: WithheldMasterKey(a.vault.keys), time: a.vault.time)
        let coordinator = SyncRefreshCoordinator(transport: CurlTransport())
        let grant = try withheld.load("shared")
        // The store is there and answers: not having the keys is no outage.
        #expect(throws: VaultError.self) {
            let decision = try coordinator.prepare(RefreshNeed(name: "shared", force: true), grant: grant, in: withheld)
            Issue.record("prepare decided \(decision) without the keys to take the lease")
        }
    }
}
