import Foundation
import Glibc
import Testing
import VaultTestSupport

/// What the store's faults and concurrent edits must never cost: an
/// acknowledged write, or a refresh token spent twice (docs/sync.md,
/// "Versions and merge" and "A sync").
@Suite("sync: nothing lost, nothing spent twice")
struct SyncLineageTests {
    @Test("the store applies writes and loses their answers: every write of a sync that exited 0 arrives")
    func lostAcknowledgements() throws {
        let m = try DavMachines(count: 2)
        let (a, b) = (m.homes[0], m.homes[1])
        try a.run("import", "from-a", stdin: Home.tokenJSON("a-0"))
        try a.run("import", "moved", stdin: Home.tokenJSON("m"))
        try m.connectAll()
        #expect(try b.run("import", "from-b", stdin: Home.tokenJSON("b-0")).status == 0)
        #expect(try b.run("sync").status == 0)

        // Every third PUT or DELETE is applied by the store, and its answer lost.
        try m.control("lostack/3")
        var name = "moved"
        for round in 1...8 {
            #expect(try a.run("import", "from-a", "--replace", stdin: Home.tokenJSON("a-\(round)")).status == 0)
            #expect(try b.run("import", "from-b", "--replace", stdin: Home.tokenJSON("b-\(round)")).status == 0)
            #expect(try b.run("rename", name, "moved-\(round)").status == 0)
            name = "moved-\(round)"
            // Both at once, so one reads the store while the other's
            // answers are being lost.
            let (runA, runB) = (try a.start("sync"), try b.start("sync"))
            let (sa, sb) = (runA.wait(), runB.wait())
            // A sync may give up (75) after its tries; it never fails otherwise.
            #expect([0, 75].contains(sa.status) && [0, 75].contains(sb.status), "\(sa.stderr)\(sb.stderr)")
        }
        let lost = try m.control("lostack/0")["lost"] as? Int ?? 0
        #expect(lost >= 4, "the proxy lost \(lost) answers")
        for _ in 0..<2 {
            #expect(try a.run("sync").status == 0)
            #expect(try b.run("sync").status == 0)
        }
        for home in [a, b] {
            #expect(try m.token(home, "from-a") == "a-8")
            #expect(try m.token(home, "from-b") == "b-8")
            #expect(try home.listedNames().names == ["from-a", "from-b", "moved-8"])
        }
    }

    @Test("a store that deletes the bucket its root names is refused as damaged, never merged around")
    func missingBucket() throws {
        let m = try DavMachines(count: 2)
        let (a, b) = (m.homes[0], m.homes[1])
        try a.run("import", "first", stdin: Home.tokenJSON("f"))
        try m.connectAll()
        let before = Set(try m.buckets())
        try a.run("import", "second", stdin: Home.tokenJSON("s"))
        #expect(try a.run("sync").status == 0)
        let written = Set(try m.buckets()).subtracting(before)
        try #require(!written.isEmpty)
        for name in written { unlink(m.store.files + "/" + name) }
        let listed = try b.listedNames().names

        let r = try b.run("sync")
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("which the store does not have (deleted or lost)"), "\(r.stderr)")
        #expect(try b.listedNames().names == listed, "local data is untouched")
        #expect(try b.run("sync").status == 1, "and stays refused")
    }

    @Test("a rename racing a refresh keeps both, and the spent refresh token never comes back")
    func renameRacesRefresh() throws {
        let provider = try CountedProvider()
        let m = try DavMachines(count: 2)
        let (a, b) = (m.homes[0], m.homes[1])
        try provider.importGrant("g", into: a)
        try m.connectAll()
        #expect(try b.listedNames().names == ["g"])

        // A refreshes (spends the first refresh token) and syncs.
        #expect(try a.run("refresh", "g").status == 0)
        #expect(try a.run("sync").status == 0)
        // B, not yet synced, renames the grant four times.
        for (old, new) in [("g", "g1"), ("g1", "g2"), ("g2", "g3"), ("g3", "g4")] {
            #expect(try b.run("rename", old, new).status == 0)
        }
        let sb = try b.run("sync")
        #expect(sb.status == 0, "\(sb.stderr)")
        #expect(!sb.stderr.contains("conflict"), "a refresh and a rename change different fields: \(sb.stderr)")
        #expect(try a.run("sync").status == 0)
        let refreshes = try provider.refreshes()
        // Both machines hold the new name with the second refresh token:
        // each refreshes with it, in turn, and the provider accepts. A holds
        // the grant since its refresh: B asks, and A hands it over at its
        // next sync.
        for home in [a, b] { #expect(try home.listedNames().names == ["g4"]) }
        #expect(try a.run("refresh", "g4").status == 0)
        #expect(try a.run("sync").status == 0)
        #expect(try b.run("refresh", "g4").status == 75, "B does not refresh beside the holder")
        #expect(try a.run("sync").status == 0)
        let r = try b.run("refresh", "g4")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try b.run("sync").status == 0)
        #expect(try provider.refreshes() == refreshes + 2)
        #expect(try a.run("conflicts").stdout.isEmpty)
    }

    @Test("grants renamed and new ones under their old names arrive in one sync under the names they were given")
    func renamedAndReplacedInOneSync() throws {
        let m = try DavMachines(count: 2)
        let (a, b) = (m.homes[0], m.homes[1])
        // Eight pairs: each new record lands in a bucket before or after
        // the renamed one's, by its random id; both orders are met.
        let names = (0..<8).map { "g\($0)" }
        for name in names { try a.run("import", name, stdin: Home.tokenJSON("old-" + name)) }
        try m.connectAll()
        for name in names {
            #expect(try a.run("rename", name, name + "-moved").status == 0)
            #expect(try a.run("import", name, stdin: Home.tokenJSON("new-" + name)).status == 0)
        }
        #expect(try a.run("sync").status == 0)
        let r = try b.run("sync")
        #expect(r.status == 0 && !r.stderr.contains("kept both"), "\(r.stderr)")
        let expected = Set(names + names.map { $0 + "-moved" })
        #expect(try b.listedNames().names == expected)
        for name in names {
            #expect(try m.token(b, name) == "new-" + name)
            #expect(try m.token(b, name + "-moved") == "old-" + name)
        }
        #expect(try a.run("sync").status == 0)
        #expect(try a.listedNames().names == expected, "the arrival was not renamed back on the first machine")
    }

    @Test("a lease write whose answer is lost is the store's word, not the store away: no refresh token twice")
    func leaseWithLostAnswers() throws {
        let provider = try CountedProvider()
        let m = try DavMachines(count: 2)
        let (a, b) = (m.homes[0], m.homes[1])
        try provider.importGrant("g", into: a)
        try m.connectAll()
        // Learn that the grant rotates: only such grants take the lease.
        #expect(try a.run("refresh", "g").status == 0)
        #expect(try a.run("sync").status == 0)
        #expect(try b.run("sync").status == 0)
        let before = try provider.refreshes()

        // A holds the grant since its refresh: B asks for it, and has it
        // once A has synced (docs/sync.md, "Refresh rights while the store
        // is away").
        #expect(try b.run("refresh", "g").status == 75)
        #expect(try a.run("sync").status == 0)

        // Every second write is applied and its answer lost.
        try m.control("lostack/2")
        let first = try b.run("refresh", "g")
        #expect(first.status == 0, "\(first.stderr)")
        try m.control("lostack/0")
        #expect(try a.run("refresh", "g").status == 75, "A does not refresh beside the holder")
        #expect(try b.run("sync").status == 0)
        let second = try a.run("refresh", "g")
        #expect(second.status == 0, "the second machine spent the token the first one left it: \(second.stderr)")
        #expect(try provider.refreshes() == before + 2)
        for home in [a, b] { #expect(try home.run("sync").status == 0) }
        #expect(try a.run("refresh", "g").status == 0)
    }

    @Test("a rename made before the store loses the record's bucket is sent as a change, never under the old vector")
    func renameAcrossALostBucket() throws {
        let m = try DavMachines(count: 3)
        let (a, b, c) = (m.homes[0], m.homes[1], m.homes[2])
        try m.control("mode/nocas")  // a store that ignores If-Match, known as such
        defer { _ = try? m.control("mode/pass") }
        try a.run("import", "work", stdin: Home.tokenJSON("w"))
        try m.connectAll()
        #expect(try b.run("import", "r", stdin: Home.tokenJSON("r")).status == 0)
        #expect(try b.run("sync").status == 0)
        #expect(try c.run("sync").status == 0)
        #expect(try c.listedNames().names == ["work", "r"])
        // b renames; then a, reading the root from before b's write, writes
        // over it: the store drops the bucket that held b's record.
        #expect(try b.run("rename", "r", "r2").status == 0)
        #expect(try a.run("import", "x", stdin: Home.tokenJSON("x")).status == 0)
        try m.control("oldonce")
        #expect(try a.run("sync").status == 0)
        // b finds its record missing and sends it again, renamed.
        let repaired = try b.run("sync")
        #expect(repaired.status == 0, "\(repaired.stderr)")
        for home in [c, a, b, c] { #expect(try home.run("sync").status == 0) }
        for home in [a, b, c] { #expect(try home.listedNames().names == ["work", "r2", "x"]) }
    }

    @Test("the agent locked mid-sync leaves the vault and the store as if the sync had not started, or finished")
    func lockMidSync() throws {
        let m = try DavMachines(count: 2)
        let (a, b) = (m.homes[0], m.homes[1])
        try m.connectAll()
        a.allowAgent()
        let started = try a.start("agent")
        #expect(started.wait().status == 0)
        #expect(try a.run("agent", "--status").status == 0)
        let names = (0..<6).map { "n\($0)" }
        for name in names { #expect(try a.run("import", name, stdin: Home.tokenJSON(name)).status == 0) }
        // A slow store: the sync is under way when the lock arrives.
        try m.control("delay/700")
        let sync = try a.start("sync")
        usleep(2_000_000)
        #expect(try a.run("lock").status == 0)
        let interrupted = sync.wait()
        print("lock mid-sync: sync exited \(interrupted.status): \(interrupted.stderr)")
        #expect([0, 75, 77].contains(interrupted.status), "\(interrupted.stderr)")
        try m.control("delay/0")

        a.extra["VAULT_AGENT"] = "off"
        #expect(try a.listedNames().names == Set(names))
        for home in [a, b, a, b] {
            let r = try home.run("sync")
            #expect(r.status == 0, "\(r.stderr)")
        }
        #expect(try b.listedNames().names == Set(names))
        #expect(try m.token(b, "n5") == "n5")
        #expect(try LongLivedProcessTests.integrity(a.vaultFile) == "ok")
    }
}
