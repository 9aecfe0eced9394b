import Foundation
import Testing
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// Two machines writing to the store at once (docs/sync.md, "Stores that
/// ignore preconditions"): where the store ignores If-Match, a round never
/// overwrites a root written since it read one, finds its own write
/// replaced a moment after it read it back, and says so in its report; the
/// syncs the report asks for bring a resolved conflict to the other
/// machine. Where the store honours If-Match, the same moments are refused
/// by the store and the report says nothing.
@Suite("a sync round beside another machine's write")
struct ConcurrentWriterTests {
    /// A store of `kind` and two machines of one vault with a conflict on
    /// 'work', and what each does next: `b` adds 'other', `a` resolves the
    /// conflict; with the store's double that lets one sync land inside
    /// the other.
    func conflictBeingResolved(_ kind: StoreKind) throws -> (
        bench: SyncBench, a: SyncEngine, b: SyncEngine, store: InterposingStore
    ) {
        let bench = try SyncBench(kind)
        let a = try bench.machine()
        try a.vault.save(TestKeys.grant(token: "base"), as: "work")
        try bench.sync(a)
        let b = try bench.machine(joining: a)
        try bench.sync(b)
        try a.vault.save(TestKeys.grant(token: "from-a"), as: "work")
        try b.vault.save(TestKeys.grant(token: "from-b"), as: "work")
        for machine in [a, b, a] { try bench.sync(machine) }
        try #require(try a.conflictNames() == ["work"] && b.conflictNames() == ["work"])
        try b.vault.save(TestKeys.grant(token: "b2"), as: "other")
        try a.resolveConflict("work", keepOther: false)
        return (bench, a, b, InterposingStore(bench.store))
    }

    /// After the syncs the reports asked for, both machines hold the same
    /// grants, 'other' included, and neither lists the conflict.
    func settled(_ bench: SyncBench, _ a: SyncEngine, _ b: SyncEngine) throws {
        for machine in [a, b] {
            #expect(try machine.conflictNames().isEmpty, "the resolution did not reach every machine")
            #expect(try bench.names(machine) == ["other", "work"])
        }
        #expect(try a.vault.load("work").accessToken == b.vault.load("work").accessToken)
    }

    @Test(
        "a root written after the round read one is not overwritten: read again, and the report says so",
        arguments: SyncRoundTests.kinds)
    func rootMovedBeforeWrite(kind: StoreKind) throws {
        let (bench, a, b, store) = try conflictBeingResolved(kind)
        // b's round has read the root when a's sync lands.
        store.beforeBucketWrite = { _ = try bench.sync(a) }
        let report = try bench.sync(b, through: store)
        // b took a's resolution in, rather than writing over it.
        #expect(try b.conflictNames().isEmpty)
        #expect(report.rootMoved == (kind == .memoryIgnoringPreconditions))
        #expect(!report.repaired)
        // What the report asks for: the other machine syncs, then this one.
        try bench.sync(a)
        try bench.sync(b)
        try settled(bench, a, b)
    }

    @Test(
        "a root replaced right after it was read back is found a moment later and sent again; the report says who must sync",
        arguments: SyncRoundTests.kinds)
    func rootReplacedAfterReadBack(kind: StoreKind) throws {
        let (bench, a, b, store) = try conflictBeingResolved(kind)
        // b read the root, and looked again, before a's write landed; b's
        // write lands after a read its own back.
        let before = try bench.store.get(SyncEngine.rootName)
        store.afterReadBack = { _ = try bench.sync(b, through: StaleRootStore(bench.store, serving: before)) }
        let report = try bench.sync(a, through: store)
        if kind == .memoryIgnoringPreconditions {
            #expect(report.rootMoved && report.repaired, "\(report)")
            // What the report asks for: the other machines sync.
            try bench.sync(b)
        } else {
            // The store refused b's write; b read a's root and merged it.
            #expect(!report.rootMoved && !report.repaired)
            #expect(try b.conflictNames().isEmpty)
        }
        try bench.sync(a)
        try settled(bench, a, b)
    }

    @Test(
        "a round whose root another writer built on lets go of the bucket its root replaced, deleted after the grace",
        arguments: SyncRoundTests.kinds)
    func replacedByLostRound(kind: StoreKind) throws {
        let bench = try SyncBench(kind)
        let a = try bench.machine()
        try a.vault.save(TestKeys.grant(token: "a1"), as: "work")
        try bench.sync(a)
        let b = try bench.machine(joining: a)
        try bench.sync(b)
        let first = try #require(try bench.root(a)).root.buckets.compactMap { $0?.objectName }
        try #require(first.count == 1)
        try a.vault.save(TestKeys.grant(token: "a2"), as: "work")
        // b reads a's new root and writes one on it before a reads it back.
        let store = InterposingStore(bench.store)
        store.afterRootWrite = {
            try b.vault.save(TestKeys.grant(token: "b1"), as: "other")
            try bench.sync(b)
        }
        try bench.sync(a, through: store)
        #expect(try bench.store.get(first[0]) != nil, "kept while a root read before may name it")
        bench.clock.advance(Double(SyncEngine.garbageGrace) + 10)
        try bench.sync(a)
        #expect(try bench.store.get(first[0]) == nil, "the bucket a's root replaced was never deleted")
        let named = Set(try #require(try bench.root(a)).root.buckets.compactMap { $0?.objectName })
        if let memory = bench.store as? MemoryStore {
            // a let go of all it knew of; what b let go, b deletes.
            try bench.sync(b)
            let buckets = Set(memory.objects.keys.filter { $0.hasPrefix("b-") })
            #expect(buckets == named, "left behind: \(buckets.subtracting(named))")
        }
    }
}
