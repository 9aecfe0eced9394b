import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// A grant whose refresh token rotates at a provider that may revoke the
/// grant on reuse is refreshed under a standing lease: its holder keeps it
/// after the refresh, may refresh alone while the store is away, and hands
/// it over when another machine asks (docs/sync.md, "Refresh rights while
/// the store is away").
@Suite("standing leases: one machine at a time holds a grant's refreshes")
struct StandingLeaseTests {
    static let kinds: [StoreKind] = [.memory, .memoryIgnoringPreconditions]

    /// A boot clock this test moves, shared by a machine's processes.
    final class BootClock: @unchecked Sendable {
        var seconds = 1000.0
        let id = Array("test-boot".utf8)
    }

    func moving(_ engine: SyncEngine, _ clock: BootClock) {
        engine.vault.pacing.boot = { BootReading(bootID: clock.id, seconds: clock.seconds) }
    }

    /// Machine a takes the standing lease on "shared" as a refresh does,
    /// stores new tokens and syncs; machine b is in sync with it.
    func holder(_ kind: StoreKind) throws -> (SyncBench, SyncEngine, SyncEngine, [UInt8]) {
        let (bench, a, b, id) = try RefreshLeaseTests().twoMachines(kind)
        let lock = try GrantLock.acquire(directory: a.vault.location.directory, record: id, wait: 1)
        try bench.sync(a)
        #expect(try a.takeLease(id, store: bench.store, keys: try a.syncKeys(), standing: true) == .taken)
        _ = try a.vault.storeRefreshed(
            id: id, spentRefreshToken: "1//refresh-t1", TestKeys.grant(token: "t2", now: a.vault.time.now()))
        lock.release()
        try bench.sync(a)
        try bench.sync(b)
        return (bench, a, b, id)
    }

    @Test("the lease stays with its holder after the refresh, and another machine's try asks for it", arguments: kinds)
    func staysAndIsAskedFor(kind: StoreKind) throws {
        let (bench, a, b, id) = try holder(kind)
        #expect(try a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout))
        #expect(try b.vault.load("shared").refreshToken == "1//refresh-t2", "the tokens went with the sync")

        // b cannot take it: it names the holder and leaves its request.
        let device = try a.loadSyncState(try a.syncKeys()).device
        #expect(try RefreshLeaseTests().tryLease(b, id, bench: bench) == .standing(device, asked: true, quiet: true))
        #expect(try RefreshLeaseTests().tryLease(b, id, bench: bench) == .standing(device, asked: false, quiet: true))
        let wants = try #require(try bench.root(a)).root.leases.filter(\.isWant)
        #expect(wants.count == 1 && wants[0].record == id)

        // The holder's next sync hands it over: it holds nothing from then on.
        try bench.sync(a)
        #expect(try !a.holdsStandingLease(on: "shared", request: 0))
        #expect(try RefreshLeaseTests().tryLease(b, id, bench: bench) == .taken)
    }

    @Test("a refresh's lease by another machine, asked for, ends the try with the holder named", arguments: kinds)
    func refreshWaitsForTheHolder(kind: StoreKind) throws {
        let (bench, a, b, _) = try holder(kind)
        let keys = try b.syncKeys()
        do {
            _ = try b.leaseForRefresh(
                "shared", minimumValidity: nil, through: bench.store, keys: keys, standing: true)
            Issue.record("b took the lease beside its holder")
        } catch {
            let holder = try a.loadSyncState(try a.syncKeys()).device
            #expect(error.code == .busy)
            #expect(error.reason.contains("machine \(Array(holder.prefix(4)).hex) holds the right to refresh 'shared'"))
        }
    }

    @Test("the holder renews its lease once half of it has gone, and lets go of it when its time is up")
    func renewsAndLapses() throws {
        let (bench, a, _, id) = try holder(.memory)
        let clock = BootClock()
        // The lease was taken on the real boot clock: take it again on the test's.
        moving(a, clock)
        #expect(try a.takeLease(id, store: bench.store, keys: try a.syncKeys(), standing: true) == .taken)
        #expect(try #require(try bench.root(a)).root.leases.first { $0.record == id }?.isQuiet == false)
        // Its tokens are fresh: the next sync makes it quiet.
        try bench.sync(a)
        let first = try #require(try bench.root(a)).root.leases.first { $0.record == id }!
        #expect(first.isQuiet)

        // A sync before half of it has gone keeps the same lease.
        clock.seconds += Double(SyncEngine.standingSeconds) / 2 - 10
        try a.vault.save(TestKeys.grant(token: "other"), as: "other")
        try bench.sync(a)
        #expect(try #require(try bench.root(a)).root.leases.first { $0.record == id }?.id == first.id)

        // After half of it: a sync with nothing else to send renews it.
        clock.seconds += 20
        try bench.sync(a)
        let after = try #require(try bench.root(a)).root
        let renewed = try #require(after.leases.first { $0.record == id })
        #expect(renewed.id != first.id && !renewed.isWant)
        #expect(try a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout))

        // Silent for its whole duration: the holder no longer holds it, and
        // its next sync lets go of it in the store too.
        clock.seconds += Double(SyncEngine.standingSeconds)
        #expect(try !a.holdsStandingLease(on: "shared", request: 0))
        try bench.sync(a)
        #expect(try #require(try bench.root(a)).root.leases.allSatisfy { $0.record != id })
    }

    @Test("a lease taken to refresh lets its holder refresh alone, and turns quiet once the new tokens are sent")
    func quietOnceSent() throws {
        let (bench, a, _, id) = try RefreshLeaseTests().twoMachines(.memory)
        try bench.sync(a)
        let lock = try GrantLock.acquire(directory: a.vault.location.directory, record: id, wait: 1)
        #expect(try a.takeLease(id, store: bench.store, keys: try a.syncKeys(), standing: true) == .taken)
        #expect(try #require(try bench.root(a)).root.leases.first { $0.record == id }?.isQuiet == false)
        // Under it, the holder may refresh alone (the store away mid-refresh).
        #expect(try a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout, alone: true))
        _ = try a.vault.storeRefreshed(
            id: id, spentRefreshToken: "1//refresh-t1", TestKeys.grant(token: "t2", now: a.vault.time.now()))
        lock.release()
        try bench.sync(a)
        // Sent, with an hour of validity: quiet, and no refresh alone under it.
        #expect(try #require(try bench.root(a)).root.leases.first { $0.record == id }?.isQuiet == true)
        #expect(try a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout))
        #expect(try !a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout, alone: true))
    }

    @Test("another machine takes a quiet lease over once it lapses, one taken to refresh only after hours")
    func takeover() throws {
        // Quiet: the holder sent its new tokens, then went silent.
        let (bench, _, b, id) = try holder(.memory)
        let clock = BootClock()
        moving(b, clock)
        #expect(try RefreshLeaseTests().tryLease(b, id, bench: bench) != .taken)
        clock.seconds += Double(SyncEngine.standingSeconds) + 1
        #expect(try RefreshLeaseTests().tryLease(b, id, bench: bench) == .taken)

        // Not quiet: the holder took the lease to refresh and went silent
        // (it may have spent the refresh token with the store away).
        let (bench2, a2, b2, id2) = try RefreshLeaseTests().twoMachines(.memory)
        try bench2.sync(a2)
        #expect(try a2.takeLease(id2, store: bench2.store, keys: try a2.syncKeys(), standing: true) == .taken)
        let clock2 = BootClock()
        moving(b2, clock2)
        let device = try a2.loadSyncState(try a2.syncKeys()).device
        let asked = try RefreshLeaseTests().tryLease(b2, id2, bench: bench2)
        #expect(asked == .standing(device, asked: true, quiet: false))
        clock2.seconds += Double(SyncEngine.standingSeconds) + 1
        let again = try RefreshLeaseTests().tryLease(b2, id2, bench: bench2)
        #expect(again == .standing(device, asked: false, quiet: false), "lapsed after the lease's own duration")
        clock2.seconds += SyncEngine.takeoverSeconds
        #expect(try RefreshLeaseTests().tryLease(b2, id2, bench: bench2) == .taken)
    }

    @Test("a standing lease the store's root no longer carries is not held")
    func droppedFromTheRoot() throws {
        let (bench, a, _, _) = try holder(.memoryIgnoringPreconditions)
        #expect(try a.holdsStandingLease(on: "shared", request: 0))
        // Another machine's root write, built on an older root, replaced it.
        var root = try #require(try bench.root(a)).root
        root.leases = []
        _ = try a.activeLeases(root, keys: try a.syncKeys())
        #expect(try !a.holdsStandingLease(on: "shared", request: 0))
    }

    /// Machine a holds a standing lease taken to refresh (not quiet), its
    /// new tokens stored but not yet sent.
    func refreshedNotSent() throws -> (SyncBench, SyncEngine, [UInt8]) {
        let (bench, a, _, id) = try RefreshLeaseTests().twoMachines(.memory)
        try bench.sync(a)
        let lock = try GrantLock.acquire(directory: a.vault.location.directory, record: id, wait: 1)
        #expect(try a.takeLease(id, store: bench.store, keys: try a.syncKeys(), standing: true) == .taken)
        _ = try a.vault.storeRefreshed(
            id: id, spentRefreshToken: "1//refresh-t1", TestKeys.grant(token: "t2", now: a.vault.time.now()))
        lock.release()
        #expect(try a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout, alone: true))
        return (bench, a, id)
    }

    @Test("a renewal that turns the lease quiet is noted so before the write: a lost read-back leaves no refresh alone")
    func quietBeforeTheWrite() throws {
        let (bench, a, id) = try refreshedNotSent()
        // The root with the new tokens and the lease renewed quiet lands;
        // the answer to its read-back is lost.
        let store = InterposingStore(bench.store)
        store.afterReadBack = { throw VaultError(.transient, "the read-back was lost") }
        #expect(throws: VaultError.self) { try bench.sync(a, through: store) }
        #expect(try #require(try bench.root(a)).root.leases.first { $0.record == id }?.isQuiet == true)
        // The others may take a quiet lease ten minutes after it: this
        // machine no longer refreshes alone under it.
        #expect(try !a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout, alone: true))
        try bench.sync(a)
        #expect(try !a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout, alone: true))
    }

    @Test("a renewal holds the grant's refresh lock from before its root is written until it is read back")
    func renewalHoldsTheLock() throws {
        let (bench, a, id) = try refreshedNotSent()
        // A process of a that would refresh alone meanwhile waits, and then
        // finds the lease quiet.
        let store = InterposingStore(bench.store)
        var lockFree: Bool?
        store.afterRootWrite = {
            let lock = GrantLock.take(directory: a.vault.location.directory, record: id)
            lockFree = lock != nil
            lock?.release()
        }
        try bench.sync(a, through: store)
        #expect(lockFree == false)
        #expect(try #require(try bench.root(a)).root.leases.first { $0.record == id }?.isQuiet == true)
        #expect(GrantLock.take(directory: a.vault.location.directory, record: id) != nil)
        #expect(try a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout))
        #expect(try !a.holdsStandingLease(on: "shared", request: TokenRefresher.requestTimeout, alone: true))
    }

    @Test("a standing lease is let go of once its grant no longer needs one: removed, dead, or not rotating")
    func noLongerNeeded() throws {
        for change in ["removed", "dead", "not rotating"] {
            let (bench, a, _, id) = try holder(.memory)
            #expect(try #require(try bench.root(a)).root.leases.contains { $0.record == id && !$0.isWant })
            switch change {
            case "removed":
                try a.vault.remove("shared")
            case "dead":
                _ = try a.vault.markDead(id: id, spentRefreshToken: "1//refresh-t2", reason: "invalid_grant")
            default:
                var grant = try a.vault.load("shared")
                grant.refreshTokenRotates = false
                try a.vault.save(grant, as: "shared")
            }
            try bench.sync(a)
            #expect(
                try #require(try bench.root(a)).root.leases.allSatisfy { $0.record != id },
                "\(change): the lease stays in the store")
            #expect(try !a.holdsStandingLease(on: "shared", request: 0), "\(change): still held")
        }
    }
}
