import Foundation
import Testing
import VaultTestSupport

@testable import VaultCore
@testable import VaultSync

/// A sync's report names each grant with a new conflict once
/// (`vault sync` warns once a grant), however many rounds the sync took.
@Suite("each conflict reported once")
struct ConflictReportTests {
    @Test(
        "a conflict that gains a side while the round is overtaken is named once",
        arguments: SyncRoundTests.kinds)
    func gainsASide(kind: StoreKind) throws {
        let bench = try SyncBench(kind)
        let a = try bench.machine()
        try a.vault.save(TestKeys.grant(token: "base"), as: "work")
        try bench.sync(a)
        let b = try bench.machine(joining: a)
        let c = try bench.machine(joining: a)
        let d = try bench.machine(joining: a)
        for machine in [b, c, d] { try bench.sync(machine) }
        // a and c change 'work' at once: c's sync keeps both sides.
        try a.vault.save(TestKeys.grant(token: "from-a"), as: "work")
        try c.vault.save(TestKeys.grant(token: "from-c"), as: "work")
        try bench.sync(a)
        try bench.sync(c)
        // d changed it too, and its sync lands while b's round, which took
        // the conflict in, writes: b's next round takes d's side as well.
        try d.vault.save(TestKeys.grant(token: "from-d"), as: "work")
        try b.vault.save(TestKeys.grant(token: "b1"), as: "other")
        let store = InterposingStore(bench.store)
        store.beforeBucketWrite = { _ = try bench.sync(d) }
        let report = try bench.sync(b, through: store)
        #expect(report.conflicts == ["work"], "\(report.conflicts)")
        #expect(try b.conflictNames() == ["work"])
    }
}
