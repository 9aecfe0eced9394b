import Foundation
import Testing
import VaultTestSupport

/// A WebDAV server the sync runs against: Apache (webdav.py), or rclone,
/// nginx or WsgiDAV (davstores.py). Each runs on 127.0.0.1 with its files
/// in a temporary directory, and stops with the test.
enum DavServer: String, CaseIterable, Sendable {
    case apache, rclone, nginx, wsgidav

    /// True when this server can run here (Tools/setup installs all four).
    var available: Bool {
        switch self {
        case .apache: return FileManager.default.isExecutableFile(atPath: "/usr/sbin/apache2")
        default: return DavServer.checked[self] ?? false
        }
    }

    static let checked: [DavServer: Bool] = Dictionary(
        uniqueKeysWithValues: [DavServer.rclone, .nginx, .wsgidav].map { kind in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            p.arguments = [
                FixtureServer.root.appendingPathComponent("Tools/testservers/davstores.py").path,
                kind.rawValue, "--check",
            ]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            let ran = (try? p.run()) != nil
            if ran { p.waitUntilExit() }
            return (kind, ran && p.terminationStatus == 0)
        })
}

/// Changes 'work' on machines `a` (to "from-a") and `b` (to "from-b")
/// between syncs, then syncs a, b and a: a reports the conflict.
func changeOnBoth(_ a: Home, _ b: Home, sync: (Home) throws -> ProcessResult) throws {
    try a.run("import", "work", "--replace", stdin: Home.tokenJSON("from-a"))
    try b.run("import", "work", "--replace", stdin: Home.tokenJSON("from-b"))
    _ = try sync(a)
    _ = try sync(b)
    let seen = try sync(a)
    #expect(seen.stderr.contains("'work' was changed on two machines at once"), "\(seen.stderr)")
}

/// Two machines syncing through one running DavServer: the scenarios of
/// SyncTests that every store must pass.
final class DavScenario {
    let dir = TemporaryDirectory()
    let server: FixtureServer
    /// The collection's URL and the directory that holds its files.
    let url: String
    let filesRoot: String
    let a = Home()
    let b = Home()

    init(_ kind: DavServer) throws {
        let file = dir.path + "/password"
        _ = FileManager.default.createFile(
            atPath: file, contents: Data("store password\n".utf8), attributes: [.posixPermissions: 0o600])
        if kind == .apache {
            server = try FixtureServer(script: "webdav.py", arguments: [dir.path + "/dav", file])
        } else {
            server = try FixtureServer(script: "davstores.py", arguments: [kind.rawValue, dir.path + "/dav", file])
        }
        let settings = try JSONSerialization.jsonObject(with: Data(server.firstLine.utf8)) as! [String: Any]
        url = settings["url"] as! String
        filesRoot = kind == .apache ? dir.path + "/dav/www/store/" : settings["files"] as! String
        try a.initKeyfileVault()
        for home in [a, b] {
            home.extra["VAULT_AGENT"] = "off"
            home.write(home.path + "/store-password", "store password\n")
        }
        b.extra["VAULT_KEYFILE"] = a.path + "/key"
    }

    /// The objects in the store folder `folder` (below the collection).
    func objects(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: filesRoot + folder).sorted()
    }

    func connect(_ home: Home, _ folder: String) throws -> ProcessResult {
        try home.run("remote", "set", url + folder, "--user", "vault", "--password-file", home.path + "/store-password")
    }

    func join(_ home: Home, _ folder: String) throws -> ProcessResult {
        try home.run("join", url + folder, "--user", "vault", "--password-file", home.path + "/store-password")
    }

    @discardableResult
    func sync(_ home: Home) throws -> ProcessResult {
        let r = try home.run("sync")
        #expect(r.status == 0, "\(r.stderr)")
        return r
    }

    func token(_ home: Home, _ name: String) throws -> String {
        try home.run("token", name).stdout.trimmingCharacters(in: .newlines)
    }

    /// `remote set` on a folder two levels below the collection creates it;
    /// then adds, changes and removes travel between two machines.
    func twoMachinesInNewFolder(ignoresIfMatch: Bool) throws {
        try a.run("import", "work", stdin: Home.tokenJSON("a-1"))
        try a.run("import", "home", stdin: Home.tokenJSON("a-2"))
        let set = try connect(a, "new/vault/")
        #expect(set.status == 0, "\(set.stderr)")
        #expect(set.stderr.contains("created the folder \(url)new/vault/"), "\(set.stderr)")
        // The store's quirk is told once, when found, not at every sync.
        #expect(set.stderr.contains("this store ignores If-Match") == ignoresIfMatch, "\(set.stderr)")
        let first = try sync(a)
        #expect(!first.stderr.contains("If-Match"), "\(first.stderr)")
        // A wrong store password: the hint is for joining, not for a vault
        // this machine does not have.
        b.write(b.path + "/wrong-password", "not the password\n")
        let refused = try b.run(
            "join", url + "new/vault/", "--user", "vault", "--password-file", b.path + "/wrong-password")
        #expect(
            refused.status == 1 && refused.stderr.contains("check the store's user (--user)")
                && !refused.stderr.contains("remote set"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: b.vaultFile))
        let joined = try join(b, "new/vault/")
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(try b.listedNames().names == ["work", "home"])
        try b.run("import", "work", "--replace", stdin: Home.tokenJSON("b-1"))
        try b.run("remove", "home")
        try sync(b)
        try sync(a)
        #expect(try a.listedNames().names == ["work"])
        #expect(try token(a, "work") == "b-1")
        // Setting it again on the folder that now exists creates nothing.
        let again = try connect(a, "new/vault/")
        #expect(again.status == 0 && !again.stderr.contains("created"), "\(again.stderr)")
    }

    /// Concurrent edits: after syncs, both machines list the conflict and
    /// mark the grant; resolving it on the machine whose side lost ends it
    /// on both.
    func conflictsTravel() throws {
        try a.run("import", "work", stdin: Home.tokenJSON("base"))
        #expect(try connect(a, "").status == 0)
        try sync(a)
        #expect(try join(b, "").status == 0)
        try changeOnBoth(a, b, sync: sync)
        let value = try token(a, "work")
        #expect(try token(b, "work") == value)
        for home in [a, b] {
            let listed = try home.run("conflicts", "--json")
            let rows = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]]
            #expect(rows?.count == 1 && rows?.first?["name"] as? String == "work", "\(listed.stdout)\(listed.stderr)")
            let sides = rows?.first?["sides"] as? [[String: Any]] ?? []
            let prints = Set(sides.compactMap { $0["fingerprint"] as? String })
            #expect(prints.count == 2 && prints.allSatisfy { $0.count == 8 }, "two different fingerprints: \(sides)")
            #expect(Set(sides.compactMap { $0["machine"] as? String }).count == 2, "two machines: \(sides)")
            #expect(sides.filter { $0["this_machine"] as? Bool == true }.count == 1, "\(sides)")
            // `vault remote` names this machine as the table does.
            let mine = sides.first { $0["this_machine"] as? Bool == true }?["machine"] as? String ?? "?"
            #expect(try home.run("remote").stderr.contains("this machine is \(mine) in 'vault conflicts'"))
            let list = try home.run("list")
            #expect(list.stdout.contains("(conflict)"), "\(list.stdout)")
            let json = try home.run("list", "--json")
            #expect(json.stdout.contains("\"conflict\" : true"), "\(json.stdout)")
            // The tokens themselves are never shown.
            #expect(!listed.stdout.contains("from-") && !list.stdout.contains("from-"))
        }
        // Resolved on the machine whose change lost, sent, and gone everywhere.
        let loserHome = value == "from-a" ? b : a
        let loser = value == "from-a" ? "from-b" : "from-a"
        #expect(try loserHome.run("conflicts", "resolve", "work", "--keep", "other").status == 0)
        try sync(loserHome)
        try sync(loserHome === a ? b : a)
        for home in [a, b] {
            #expect(try token(home, "work") == loser)
            #expect(try home.run("conflicts").stderr.contains("no conflicts"))
            #expect(try !home.run("list").stdout.contains("(conflict)"))
        }
    }

    /// Syncs the machines as the warnings of `results` (syncs that just
    /// ran) ask, and of the syncs that follows, until none asks for more.
    func syncAsAsked(_ results: [(Home, ProcessResult)]) throws {
        var queue: [Home] = []
        func follow(_ home: Home, _ r: ProcessResult) {
            let other = home === a ? b : a
            if r.stderr.contains("run 'vault sync' on the other machines, then here again") {
                queue += [other, home]
            } else if r.stderr.contains("run 'vault sync' on the other machines") {
                queue.append(other)
            }
        }
        for (home, r) in results { follow(home, r) }
        var steps = 0
        while let home = queue.first {
            queue.removeFirst()
            steps += 1
            try #require(steps <= 12, "the syncs keep asking for more")
            follow(home, try sync(home))
        }
    }

    /// `runs` times: a conflict, resolved on one machine while the other
    /// changes another grant, and both sync at the same moment. After the
    /// syncs their warnings ask for, the store holds both changes: a third
    /// machine that only reads sees the resolution and the new grant.
    func resolutionBesideConcurrentSync(runs: Int) throws {
        let c = Home()
        c.extra = b.extra
        c.write(c.path + "/store-password", "store password\n")
        try a.run("import", "work", stdin: Home.tokenJSON("base"))
        #expect(try connect(a, "").status == 0)
        try sync(a)
        #expect(try join(b, "").status == 0)
        #expect(try join(c, "").status == 0)
        var asked = 0
        for run in 1...runs {
            try a.run("import", "work", "--replace", stdin: Home.tokenJSON("a-\(run)"))
            try b.run("import", "work", "--replace", stdin: Home.tokenJSON("b-\(run)"))
            for home in [a, b] { try sync(home) }
            #expect(try sync(a).stderr.contains("'work' was changed on two machines at once"), "run \(run)")
            let (x, y) = run % 2 == 0 ? (a, b) : (b, a)
            let kept = try token(x, "work") == "a-\(run)" ? "b-\(run)" : "a-\(run)"
            #expect(try x.run("conflicts", "resolve", "work", "--keep", "other").status == 0)
            try y.run("import", "other-\(run)", stdin: Home.tokenJSON("o-\(run)"))
            let started = [(x, try x.start("sync")), (y, try y.start("sync"))]
            let results = started.map { ($0.0, $0.1.wait()) }
            for (_, r) in results { #expect(r.status == 0, "\(r.stderr)") }
            if results.contains(where: { $0.1.stderr.contains("run 'vault sync' on the other machines") }) {
                asked += 1
            }
            try syncAsAsked(results)
            try sync(c)
            #expect(try c.run("conflicts").stderr.contains("no conflicts"), "run \(run): the resolution was lost")
            #expect(try c.listedNames().names.contains("other-\(run)"), "run \(run): the new grant was lost")
            #expect(try token(c, "work") == kept, "run \(run)")
            // Each machine then has what the other sent.
            try syncAsAsked([(x, try sync(x)), (y, try sync(y))])
            for home in [a, b] { #expect(try home.run("conflicts").stderr.contains("no conflicts"), "run \(run)") }
        }
        print("\(runs) resolutions beside a concurrent sync; \(asked) asked for more syncs")
    }

    /// After `runs` of the above, a sync of each writing machine an hour
    /// later (libfaketime) deletes what it let go, rounds overtaken by the
    /// other machine's included: the store keeps the root, the keys, and at
    /// most one bucket object per grant.
    func collectsAfterConcurrentSyncs(runs: Int) throws {
        try resolutionBesideConcurrentSync(runs: runs)
        let before = try objects("").filter { $0.hasPrefix("b-") }.count
        for home in [a, b, a] {
            let later = try VaultProcess.start(
                ["-f", "+1h", VaultProcess.binary, "sync"], environment: home.environment, executable: FakeTime.wrapper
            ).wait()
            #expect(later.status == 0, "\(later.stderr)")
        }
        let grants = try a.listedNames().names.count
        let buckets = try objects("").filter { $0.hasPrefix("b-") }.count
        #expect(buckets <= grants, "\(before) bucket objects, \(buckets) an hour later, for \(grants) grants")
        print("\(before) bucket objects after the concurrent syncs, \(buckets) an hour later, for \(grants) grants")
    }

    /// Eight changes and syncs, then a sync an hour later (libfaketime): the
    /// bucket objects no root names are deleted, whatever the store does
    /// with If-Match. Returns the object counts before and after.
    func collectsOldObjects() throws -> (before: Int, after: Int) {
        try a.run("import", "work", stdin: Home.tokenJSON("t0"))
        #expect(try connect(a, "gc/").status == 0)
        try sync(a)
        for i in 1...8 {
            try a.run("import", "work", "--replace", stdin: Home.tokenJSON("t\(i)"))
            try sync(a)
        }
        let before = try objects("gc/").count
        let later = try VaultProcess.start(
            ["-f", "+1h", VaultProcess.binary, "sync"], environment: a.environment, executable: FakeTime.wrapper
        ).wait()
        #expect(later.status == 0, "\(later.stderr)")
        if before > 3 { #expect(later.stderr.contains("\(before - 3) old objects deleted"), "\(later.stderr)") }
        let after = try objects("gc/")
        // The root, the keys and the one bucket in use.
        #expect(after.count == 3, "\(after)")
        return (before, after.count)
    }
}

/// The sync scenarios against each WebDAV server; a server that is not
/// installed skips its tests (Tools/setup installs them).
@Suite("sync through Apache's WebDAV", .enabled(if: DavServer.apache.available, "needs apache2"))
struct ApacheStoreTests {
    @Test("remote set creates the folder; two machines add, change and remove")
    func twoMachines() throws { try DavScenario(.apache).twoMachinesInNewFolder(ignoresIfMatch: false) }
    @Test("a conflict is known on both machines until resolved on either")
    func conflicts() throws { try DavScenario(.apache).conflictsTravel() }
    @Test(
        "Apache: objects a root let go are kept a while (another writer's root may name them), then deleted",
        .enabled(if: FakeTime.installed, "needs libfaketime"))
    func collects() throws { #expect(try DavScenario(.apache).collectsOldObjects().before == 11) }
}

@Suite("sync through rclone serve webdav", .enabled(if: DavServer.rclone.available, "needs Debian's rclone"))
struct RcloneStoreTests {
    @Test("remote set creates the folder (rclone answers PUT there 404); two machines add, change and remove")
    func twoMachines() throws { try DavScenario(.rclone).twoMachinesInNewFolder(ignoresIfMatch: true) }
    @Test("a conflict is known on both machines until resolved on either")
    func conflicts() throws { try DavScenario(.rclone).conflictsTravel() }
    @Test(
        "a conflict resolved while the other machine syncs at once: after the syncs vault sync asks for, none is lost")
    func resolutionBesideConcurrentSync() throws {
        try DavScenario(.rclone).resolutionBesideConcurrentSync(runs: 6)
    }
    @Test(
        "after concurrent syncs, each machine deletes the objects it let go once their grace has passed",
        .enabled(if: FakeTime.installed, "needs libfaketime"))
    func collectsAfterConcurrentSyncs() throws { try DavScenario(.rclone).collectsAfterConcurrentSyncs(runs: 3) }
    @Test(
        "rclone ignores If-Match: old objects are collected once unreferenced for a while",
        .enabled(if: FakeTime.installed, "needs libfaketime"))
    func collects() throws {
        let (before, after) = try DavScenario(.rclone).collectsOldObjects()
        print("rclone: \(before) objects after 9 syncs, \(after) after a sync an hour later")
    }
}

@Suite(
    "sync through nginx's WebDAV module",
    .enabled(if: DavServer.nginx.available, "needs nginx-light and libnginx-mod-http-dav-ext"))
struct NginxStoreTests {
    @Test("remote set creates the folder (nginx answers PUT there 500); two machines add, change and remove")
    func twoMachines() throws { try DavScenario(.nginx).twoMachinesInNewFolder(ignoresIfMatch: true) }
    @Test("a conflict is known on both machines until resolved on either")
    func conflicts() throws { try DavScenario(.nginx).conflictsTravel() }
    @Test(
        "nginx ignores If-Match on PUT: old objects are collected",
        .enabled(if: FakeTime.installed, "needs libfaketime")
    )
    func collects() throws { _ = try DavScenario(.nginx).collectsOldObjects() }
}

@Suite("sync through WsgiDAV", .enabled(if: DavServer.wsgidav.available, "needs PyPI's wsgidav and cheroot"))
struct WsgiDAVStoreTests {
    @Test("remote set creates the folder (WsgiDAV answers PUT there 409); two machines add, change and remove")
    func twoMachines() throws { try DavScenario(.wsgidav).twoMachinesInNewFolder(ignoresIfMatch: false) }
    @Test("a conflict is known on both machines until resolved on either")
    func conflicts() throws { try DavScenario(.wsgidav).conflictsTravel() }
    @Test(
        "WsgiDAV: objects a root let go are kept a while, then deleted",
        .enabled(if: FakeTime.installed, "needs libfaketime")
    )
    func collects() throws { #expect(try DavScenario(.wsgidav).collectsOldObjects().before == 11) }
}
