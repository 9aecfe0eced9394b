import Foundation
import Testing
import VaultHTTP
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// The rules of a sync round (docs/sync.md, "A sync"), step by step, in
/// this process: against Apache's WebDAV, and against the in-memory store
/// that honours preconditions or ignores them.
@Suite("a sync round, step by step")
struct SyncRoundTests {
    /// Apache's case runs where Apache is installed (the end-to-end suites
    /// need it too); the in-memory stores run everywhere.
    static let kinds: [StoreKind] = StoreKind.available

    /// The error `body` throws, if any.
    func thrown(_ body: () throws -> Void) -> VaultError? {
        do {
            try body()
            return nil
        } catch {
            return error as? VaultError
        }
    }

    @Test("a root that moved under our write is read back, and the round is tried again", arguments: kinds)
    func rootMovedUnderWrite(kind: StoreKind) throws {
        let bench = try SyncBench(kind)
        let a = try bench.machine()
        let b = try bench.machine(joining: a)
        try b.vault.save(TestKeys.grant(token: "b1"), as: "home")
        try bench.sync(b)
        try a.vault.save(TestKeys.grant(token: "a1"), as: "work")
        // Another machine writes its root right after ours reached the store.
        let store = InterposingStore(bench.store)
        store.afterRootWrite = {
            try b.vault.save(TestKeys.grant(token: "b2"), as: "other")
            try bench.sync(b)
        }
        var round = try bench.round(a, through: store)
        try round.readRoot()
        #expect(try round.fetchChangedBuckets())
        try round.mergeFetched()
        #expect(try round.writeOutgoing())
        let ours = try #require(round.written)
        #expect(try bench.root(a)?.root.epoch == ours.epoch + 1)
        #expect(try !round.readBack(), "the root read back is not ours: the round must be tried again")
        // The mark stays on the root merged, and what the round uploaded is
        // let go (a root written beside ours may name it), not deleted.
        let state = try a.loadSyncState(try a.syncKeys())
        #expect(state.markEpoch == ours.epoch - 1)
        let named = Set(ours.buckets.compactMap { $0?.name })
        #expect(!state.garbage.isEmpty && state.garbage.allSatisfy { named.contains($0.name) })
        for g in state.garbage {
            #expect(try bench.store.get(SyncRoot.BucketRef(name: g.name, hash: []).objectName) != nil)
        }
        // The next round starts from the other machine's root, which
        // descends from ours, and sends what ours carried.
        try bench.sync(a)
        #expect(try bench.names(a) == ["home", "other", "work"])
        try bench.sync(b)
        #expect(try bench.names(b) == ["home", "other", "work"])
    }

    @Test(
        "a bucket the root names but the store lost is refused where the store honours preconditions", arguments: kinds)
    func lostBucket(kind: StoreKind) throws {
        let bench = try SyncBench(kind)
        let a = try bench.machine()
        try a.vault.save(TestKeys.grant(token: "a1"), as: "work")
        try bench.sync(a)
        let root = try #require(try bench.root(a)).root
        for ref in root.buckets.compactMap({ $0 }) { try bench.store.delete(ref.objectName) }
        let b = try bench.machine(joining: a)
        var round = try bench.round(b)
        try round.readRoot()
        if kind == .memoryIgnoringPreconditions {
            // There a slow writer can put back a root naming a collected
            // bucket: its records come again from the machines that have them.
            #expect(try round.fetchChangedBuckets())
            #expect(!round.fetched.isEmpty && round.fetched.values.allSatisfy(\.isEmpty))
        } else {
            let error = thrown { _ = try round.fetchChangedBuckets() }
            #expect(error?.code == .tampered)
            #expect(error?.reason.contains("which the store does not have (deleted or lost)") == true)
            #expect(try bench.names(b).isEmpty)
        }
    }

    @Test(
        "a root older than the one accepted is a rollback where preconditions hold, else a lost update sent again",
        arguments: kinds)
    func olderRoot(kind: StoreKind) throws {
        let bench = try SyncBench(kind)
        let a = try bench.machine()
        try a.vault.save(TestKeys.grant(token: "a1"), as: "work")
        try bench.sync(a)
        let old = try #require(try bench.root(a)).bytes
        try a.vault.save(TestKeys.grant(token: "a2"), as: "home")
        try bench.sync(a)
        _ = try bench.store.put(SyncEngine.rootName, old)
        var round = try bench.round(a)
        if kind == .memoryIgnoringPreconditions {
            try round.readRoot()
            #expect(round.report.repaired)
            #expect(try bench.sync(a).repaired)
            let b = try bench.machine(joining: a)
            try bench.sync(b)
            #expect(try bench.names(b) == ["home", "work"])
        } else {
            let error = thrown { try round.readRoot() }
            #expect(error?.code == .tampered)
            #expect(error?.reason.hasSuffix("a rollback") == true)
        }
    }

    @Test("a store that lost its root after this machine synced is refused", arguments: kinds)
    func emptiedStore(kind: StoreKind) throws {
        let bench = try SyncBench(kind)
        let a = try bench.machine()
        try bench.sync(a)
        try bench.store.delete(SyncEngine.rootName)
        var round = try bench.round(a)
        let error = thrown { try round.readRoot() }
        #expect(error?.code == .tampered)
        #expect(error?.reason.hasSuffix("the store was emptied or rolled back") == true)
    }

    @Test("a bucket a root let go is deleted by a later sync, once the grace has passed", arguments: kinds)
    func collection(kind: StoreKind) throws {
        let bench = try SyncBench(kind)
        let a = try bench.machine()
        try a.vault.save(TestKeys.grant(token: "a1"), as: "work")
        try bench.sync(a)
        let first = try #require(try bench.root(a)).root.buckets.compactMap { $0?.objectName }
        try #require(first.count == 1)
        try a.vault.save(TestKeys.grant(token: "a2"), as: "work")
        #expect(try bench.sync(a).collected == 0)
        #expect(try bench.store.get(first[0]) != nil, "replaced, but kept for a writer that read the old root")
        bench.clock.advance(Double(SyncEngine.garbageGrace) - 10)
        #expect(try bench.sync(a).collected == 0)
        #expect(try bench.store.get(first[0]) != nil)
        bench.clock.advance(20)
        #expect(try bench.sync(a).collected == 1)
        #expect(try bench.store.get(first[0]) == nil)
        #expect(try a.loadSyncState(try a.syncKeys()).garbage.isEmpty)
    }

    @Test(
        "the HTTP store's failures arrive as vault errors: refused credentials, a missing object, a bad name",
        .enabled(if: StoreKind.apacheInstalled, "needs apache2"))
    func httpStoreFailures() throws {
        let bench = try SyncBench(.apache)
        #expect(try bench.store.get("vault-root") == nil)
        let wrong = try ObjectSyncStore(
            url: bench.url, user: "vault", password: Array("wrong".utf8), transport: CurlTransport(), timeout: 30,
            attempts: 1)
        let refused = thrown { _ = try wrong.get("vault-root") }
        #expect(refused?.code == .refused)
        #expect(refused?.remedy == .setStoreCredentials)
        #expect(thrown { _ = try bench.store.get("../vault-root") }?.code == .invalidInput)
        #expect(
            thrown {
                _ = try ObjectSyncStore(
                    url: "http://example.com/store/", user: nil, password: [], transport: CurlTransport(), timeout: 30,
                    attempts: nil)
            }?.code == .invalidInput)
    }
}
