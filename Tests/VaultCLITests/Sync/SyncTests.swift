import Foundation
import Glibc
import Testing
import VaultHTTP
import VaultTestSupport

/// Machines (vault homes) syncing through a real Apache WebDAV store, and
/// through a fault-injecting proxy in front of it.
@Suite("sync through a WebDAV store")
final class SyncTests {
    let dir = TemporaryDirectory()
    let store: WebDAVStore
    /// Apache's collection, without the proxy.
    var davURL: String { store.directURL }
    /// The collection's files, as Apache keeps them.
    var storeDir: String { store.files }
    let a = Home()
    let b = Home()

    init() throws {
        store = try WebDAVStore(in: dir.path, proxied: true)
        try a.initKeyfileVault()
        for home in [a, b] {
            home.extra["VAULT_AGENT"] = "off"
            home.write(home.path + "/store-password", "store password\n")
        }
        // Both machines hold the same key file, as a server pair would.
        b.extra["VAULT_KEYFILE"] = a.path + "/key"
    }

    var proxied: String { store.url }

    func control(_ path: String) throws {
        try store.control(path)
    }

    func connect(_ home: Home, url: String? = nil) throws {
        let r = try home.run(
            "remote", "set", url ?? proxied, "--user", "vault", "--password-file", home.path + "/store-password")
        #expect(r.status == 0, "\(r.stderr)")
    }

    func join(_ home: Home, url: String? = nil) throws -> ProcessResult {
        try home.run("join", url ?? proxied, "--user", "vault", "--password-file", home.path + "/store-password")
    }

    func token(_ home: Home, _ name: String) throws -> String {
        try home.run("token", name).stdout.trimmingCharacters(in: .newlines)
    }

    @discardableResult
    func sync(_ home: Home, expect status: Int32 = 0) throws -> ProcessResult {
        let r = try home.run("sync")
        #expect(r.status == status, "\(r.stderr)")
        return r
    }

    @Test("two machines: join with the key file, then adds, changes, renames and removes travel both ways")
    func twoMachines() throws {
        try a.run("import", "work", stdin: Home.tokenJSON("a-1"))
        try a.run("import", "home", stdin: Home.tokenJSON("a-2"))
        try connect(a)
        let first = try sync(a)
        #expect(first.stderr.contains("0 received, 2 sent"), "\(first.stderr)")

        let joined = try join(b)
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(try b.listedNames().names == ["work", "home"])
        #expect(try token(b, "work") == "a-1")

        try b.run("import", "work", "--replace", stdin: Home.tokenJSON("b-1"))
        try b.run("rename", "home", "house")
        try b.run("import", "new", stdin: Home.tokenJSON("b-3"))
        try sync(b)
        let back = try sync(a)
        #expect(back.stderr.contains("3 received"), "\(back.stderr)")
        #expect(try a.listedNames().names == ["work", "house", "new"])
        #expect(try token(a, "work") == "b-1")

        try a.run("remove", "new")
        try sync(a)
        try sync(b)
        #expect(try b.listedNames().names == ["work", "house"])
        // Nothing more to do: a sync with no change sends nothing.
        let idle = try sync(b)
        #expect(idle.stderr.contains("0 received, 0 sent"), "\(idle.stderr)")

        // The store holds no names, providers, accounts or tokens.
        for name in try FileManager.default.contentsOfDirectory(atPath: storeDir) {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: storeDir + "/" + name))
            let text = String(decoding: bytes, as: UTF8.self)
            for secret in ["work", "house", "b-1", "a-2", "test", "r-b-1"] {
                #expect(!text.contains(secret), "\(name) contains \(secret)")
            }
        }
    }

    /// A passphrase vault with the grant 'work' (token `token`), its store
    /// set, and the agent started by the import.
    func agentMachine(token: String) throws -> AgentHome {
        let agent = AgentHome()
        let home = agent.home
        try home.initPassphraseVault("agent sync passphrase")
        home.write(home.path + "/store-password", "store password\n")
        try home.run("import", "work", stdin: Home.tokenJSON(token))
        try connect(home)
        return agent
    }

    @Test("with the agent holding the vault, sync needs no passphrase")
    func throughAgent() throws {
        let agent = try agentMachine(token: "w")
        let home = agent.home
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        let r = try sync(home)
        #expect(r.stderr.contains("1 sent"), "\(r.stderr)")
        #expect(try home.run("lock").status == 0)
        let again = try home.run("sync")
        #expect(again.status == 77, "locked again: the passphrase is needed \(again.stderr)")
    }

    @Test("with the agent holding the vault, list marks a grant in conflict")
    func conflictThroughAgent() throws {
        let agent = try agentMachine(token: "base")
        let home = agent.home
        try sync(home)
        let other = Home()
        other.extra = ["VAULT_AGENT": "off", "VAULT_PASSPHRASE_FILE": home.path + "/passphrase"]
        other.write(other.path + "/store-password", "store password\n")
        #expect(try join(other).status == 0)
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        try changeOnBoth(home, other) { try sync($0) }
        let listed = try home.run("list")
        #expect(listed.status == 0 && listed.stdout.contains("(conflict)"), "\(listed.stdout)\(listed.stderr)")
    }

    @Test("join on a fresh home with the passphrase, and with a one-time pairing code")
    func joinWays() throws {
        let p = Home()
        p.extra["VAULT_AGENT"] = "off"
        try p.initPassphraseVault("a strong vault passphrase")
        p.write(p.path + "/store-password", "store password\n")
        try p.run("import", "work", stdin: Home.tokenJSON("w"))
        try connect(p)
        try sync(p)

        // With the passphrase.
        let q = Home()
        q.extra = ["VAULT_AGENT": "off"]
        q.write(q.path + "/store-password", "store password\n")
        q.write(q.path + "/wrong", "not it\n")
        q.extra["VAULT_PASSPHRASE_FILE"] = q.path + "/wrong"
        let wrong = try join(q)
        #expect(
            wrong.status == 77 && wrong.stderr.contains("wrong passphrase for the store's vault")
                && wrong.stderr.contains("'vault pair'") && !wrong.stderr.contains("vault passwd"),
            "\(wrong.stderr)")
        // Without a terminal or a passphrase source, the hint fits a machine
        // that has no vault yet.
        q.extra["VAULT_PASSPHRASE_FILE"] = nil
        let none = try join(q)
        #expect(
            none.status == 77 && none.stderr.contains("joining needs the passphrase of the store's vault")
                && none.stderr.contains("--pairing-code-file") && !none.stderr.contains("the vault is locked"),
            "\(none.stderr)")
        #expect(!FileManager.default.fileExists(atPath: q.vaultFile), "nothing is left behind")
        q.write(q.path + "/right", "a strong vault passphrase\n")
        q.extra["VAULT_PASSPHRASE_FILE"] = q.path + "/right"
        let joined = try join(q)
        #expect(joined.status == 0, "\(joined.stderr)")
        #expect(try token(q, "work") == "w")

        // With a pairing code: no passphrase on the new machine at join.
        let code = try p.run("pair")
        #expect(code.status == 0, "\(code.stderr)")
        let r = Home()
        r.extra = ["VAULT_AGENT": "off"]
        r.write(r.path + "/store-password", "store password\n")
        r.write(r.path + "/code", code.stdout)
        let paired = try r.run(
            "join", proxied, "--user", "vault", "--password-file", r.path + "/store-password", "--pairing-code-file",
            r.path + "/code")
        #expect(paired.status == 0, "\(paired.stderr)")
        // It opens later with the vault's passphrase, like the others.
        r.extra["VAULT_PASSPHRASE_FILE"] = q.path + "/right"
        #expect(try token(r, "work") == "w")
        // The code works once.
        let s = Home()
        s.write(s.path + "/store-password", "store password\n")
        s.write(s.path + "/code", code.stdout)
        let again = try s.run(
            "join", proxied, "--user", "vault", "--password-file", s.path + "/store-password", "--pairing-code-file",
            s.path + "/code")
        #expect(again.status == 1 && again.stderr.contains("no pairing offer"), "\(again.stderr)")
        // A new passphrase reaches the store on the next sync: later
        // machines join with it.
        p.write(p.path + "/renewed", "a renewed vault passphrase\n")
        #expect(
            try p.run("passwd", "--new-passphrase-file", p.path + "/renewed", "--kdf-memory", "64", "--kdf-passes", "2")
                .status == 0)
        p.extra["VAULT_PASSPHRASE_FILE"] = p.path + "/renewed"
        try sync(p)
        let t = Home()
        t.extra = ["VAULT_AGENT": "off", "VAULT_PASSPHRASE_FILE": p.path + "/renewed"]
        t.write(t.path + "/store-password", "store password\n")
        let renewed = try join(t)
        #expect(renewed.status == 0, "\(renewed.stderr)")
        // Pairing codes and offers never show in the store in the clear.
        for name in try FileManager.default.contentsOfDirectory(atPath: storeDir) {
            let text = String(
                decoding: try Data(contentsOf: URL(fileURLWithPath: storeDir + "/" + name)), as: UTF8.self)
            #expect(!text.contains(code.stdout.trimmingCharacters(in: .newlines)))
        }
    }

    @Test("a pairing join opens with the vault's passphrase even when the store's keys carry no keyslot")
    func pairingJoinIgnoresEmptyStoreKeys() throws {
        let p = Home()
        p.extra["VAULT_AGENT"] = "off"
        try p.initPassphraseVault("a strong vault passphrase")
        p.write(p.path + "/store-password", "store password\n")
        try p.run("import", "work", stdin: Home.tokenJSON("w"))
        try connect(p)
        try sync(p)
        let code = try p.run("pair")
        #expect(code.status == 0, "\(code.stderr)")
        // The store serves the right header with zero keyslots.
        let keysPath = storeDir + "/vault-keys"
        let keys = [UInt8](try Data(contentsOf: URL(fileURLWithPath: keysPath)))
        let headerLength = keys[10..<14].reduce(0) { $0 << 8 | Int($1) }
        try Data(keys[..<(14 + headerLength)] + [0, 0]).write(to: URL(fileURLWithPath: keysPath))
        let r = Home()
        r.extra = ["VAULT_AGENT": "off"]
        r.write(r.path + "/store-password", "store password\n")
        r.write(r.path + "/code", code.stdout)
        let paired = try r.run(
            "join", proxied, "--user", "vault", "--password-file", r.path + "/store-password", "--pairing-code-file",
            r.path + "/code")
        #expect(paired.status == 0, "\(paired.stderr)")
        r.extra["VAULT_PASSPHRASE_FILE"] = p.path + "/passphrase"
        let opened = try r.run("token", "work")
        #expect(opened.status == 0 && opened.stdout == "w\n", "\(opened.stderr)")
    }

    /// a holds 'work', syncs it, and b joins.
    func shareWork() throws {
        try a.run("import", "work", stdin: Home.tokenJSON("base"))
        try connect(a)
        try sync(a)
        #expect(try join(b).status == 0)
    }

    @Test("concurrent changes to one grant keep both sides, and the machines agree on the value")
    func concurrentEdits() throws {
        try shareWork()
        try a.run("import", "work", "--replace", stdin: Home.tokenJSON("from-a"))
        try b.run("import", "work", "--replace", stdin: Home.tokenJSON("from-b"))
        try sync(a)
        let r = try sync(b)
        #expect(r.stderr.contains("'work' was changed on two machines at once"), "\(r.stderr)")
        try sync(a)
        let (ta, tb) = (try token(a, "work"), try token(b, "work"))
        #expect(ta == tb && ["from-a", "from-b"].contains(ta), "a: \(ta), b: \(tb)")

        // The other side is kept on b, and picking it makes it the value everywhere.
        let listed = try b.run("conflicts")
        #expect(listed.stdout.contains("work"), "\(listed.stdout)\(listed.stderr)")
        let loser = ta == "from-a" ? "from-b" : "from-a"
        #expect(try b.run("conflicts", "resolve", "work", "--keep", "other").status == 0)
        #expect(try token(b, "work") == loser)
        try sync(b)
        try sync(a)
        #expect(try token(a, "work") == loser)
        #expect(try b.run("conflicts").stderr.contains("no conflicts"))
        #expect(try a.run("conflicts", "resolve", "work", "--keep", "current").status == 1)
    }

    @Test("sides that differ in scopes show them: which side holds the mail scope is seen before picking")
    func conflictScopes() throws {
        try shareWork()
        let scoped = { (token: String, scope: String) in
            #"{"access_token":"\#(token)","refresh_token":"r-\#(token)","expires_in":3600,"provider":"test","scope":"\#(scope)"}"#
        }
        try a.run("import", "work", "--replace", stdin: scoped("from-a", "openid email"))
        try b.run("import", "work", "--replace", stdin: scoped("from-b", "openid email mail"))
        try sync(a)
        try sync(b)
        let listed = try b.run("conflicts")
        let lines = listed.stdout.split(separator: "\n")
        #expect(lines.first?.contains("SCOPES") == true, "\(listed.stdout)")
        #expect(lines.contains { $0.contains("openid email mail") }, "\(listed.stdout)")
        #expect(lines.contains { $0.contains("openid email ") && !$0.contains("email mail") }, "\(listed.stdout)")
        let json = try b.run("conflicts", "--json")
        let rows = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        let sides = rows?.first?["sides"] as? [[String: Any]] ?? []
        let scopes = Set(sides.compactMap { $0["scopes"] as? [String] })
        #expect(scopes == [["openid", "email"], ["openid", "email", "mail"]], "\(sides)")
        // Sides that agree on the scopes need no column.
        #expect(try b.run("conflicts", "resolve", "work", "--keep", "current").status == 0)
        try b.run("import", "work", "--replace", stdin: Home.tokenJSON("b-2"))
        try a.run("import", "work", "--replace", stdin: Home.tokenJSON("a-2"))
        try sync(b)
        try sync(a)
        let same = try a.run("conflicts")
        #expect(same.stdout.contains("TOKENS") && !same.stdout.contains("SCOPES"), "\(same.stdout)\(same.stderr)")
    }

    @Test("a store that serves old, changed, cut, foreign or HTML data is refused and nothing local changes")
    func refusals() throws {
        try a.run("import", "work", stdin: Home.tokenJSON("one"))
        try connect(a)
        try sync(a)
        try a.run("import", "work", "--replace", stdin: Home.tokenJSON("two"))
        try sync(a)
        let before = a.snapshot()
        let cases: [(String, String)] = [
            ("mode/old", "a rollback"),
            ("mode/flip", "failed authentication"),
            ("mode/truncate", "failed authentication"),
            ("mode/html", "HTML page"),
        ]
        for (mode, message) in cases {
            try control(mode)
            let r = try a.run("sync")
            try control("mode/pass")
            #expect(r.status != 0 && r.stderr.contains(message), "\(mode): \(r.stderr)")
            #expect(a.snapshot() == before, "\(mode) changed local data")
        }
        // A store that accepts the connection and never answers.
        try control("mode/stall")
        a.extra["VAULT_STORE_TIMEOUT"] = "1"
        let started = Date()
        let stalled = try a.run("sync")
        a.extra["VAULT_STORE_TIMEOUT"] = nil
        try control("mode/pass")
        #expect(stalled.status == 75, "\(stalled.stderr)")
        #expect(Date().timeIntervalSince(started) < 30, "a stalled store must not hang vault")
        #expect(a.snapshot() == before)
        try control("mode/412")
        try a.run("import", "other", stdin: Home.tokenJSON("x"))
        let busy = try a.run("sync")
        try control("mode/pass")
        #expect(busy.status == 75 && busy.stderr.contains("kept changing"), "\(busy.stderr)")
        try control("mode/500")
        let down = try a.run("sync")
        try control("mode/pass")
        #expect(down.status == 75, "\(down.stderr)")
        try sync(a)

        // Another vault's root in this store.
        let c = Home()
        try c.initKeyfileVault()
        c.extra["VAULT_AGENT"] = "off"
        c.write(c.path + "/store-password", "store password\n")
        try c.run("import", "x", stdin: Home.tokenJSON("c"))
        let otherStore = storeDir + "/other"
        try FileManager.default.createDirectory(atPath: otherStore, withIntermediateDirectories: true)
        chown(otherStore, getpwnam("www-data").pointee.pw_uid, getpwnam("www-data").pointee.pw_gid)
        try connect(c, url: davURL + "other/")
        try sync(c)
        let root = storeDir + "/vault-root"
        let mine = try Data(contentsOf: URL(fileURLWithPath: root))
        try FileManager.default.removeItem(atPath: root)
        try FileManager.default.copyItem(atPath: otherStore + "/vault-root", toPath: root)
        let before2 = a.snapshot()
        let foreign = try a.run("sync")
        #expect(foreign.status != 0 && foreign.stderr.contains("belongs to another vault"), "\(foreign.stderr)")
        #expect(a.snapshot() == before2)
        try mine.write(to: URL(fileURLWithPath: root))
        try sync(a)
    }

    @Test("a store that shows another history of the same vault (a fork) is refused")
    func fork() throws {
        try a.run("import", "work", stdin: Home.tokenJSON("one"))
        try connect(a)
        try sync(a)
        try a.run("import", "more", stdin: Home.tokenJSON("two"))
        try sync(a)
        // Another machine of the same vault builds its own history elsewhere.
        #expect(try join(b).status == 0)
        let elsewhere = storeDir + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        chown(elsewhere, getpwnam("www-data").pointee.pw_uid, getpwnam("www-data").pointee.pw_gid)
        try connect(b, url: davURL + "elsewhere/")
        for i in 0..<3 {
            try b.run("import", "b\(i)", stdin: Home.tokenJSON("b\(i)"))
            try sync(b)
        }
        // The store now serves that history to a.
        for name in try FileManager.default.contentsOfDirectory(atPath: elsewhere) {
            let target = storeDir + "/" + name
            try? FileManager.default.removeItem(atPath: target)
            try FileManager.default.copyItem(atPath: elsewhere + "/" + name, toPath: target)
        }
        let before = a.snapshot()
        let r = try a.run("sync")
        #expect(r.status == 1 && r.stderr.contains("a fork"), "\(r.stderr)")
        #expect(a.snapshot() == before)
    }

    @Test("a mistyped folder: join names the address and the typo; remote set warns it leaves the store in step")
    func mistypedFolder() throws {
        try a.run("import", "work", stdin: Home.tokenJSON("w"))
        try connect(a)
        try sync(a)
        // Apache itself, not the proxy: it makes the new folder with MKCOL.
        let typo = davURL + "typo/"

        let joined = try join(b, url: typo)
        #expect(joined.status == 1, "\(joined.stderr)")
        #expect(
            joined.stderr.contains(
                "the store has no vault at \(typo) (no vault-keys there): the address may be mistyped"),
            "\(joined.stderr)")
        #expect(joined.stderr.contains("hint: check the address for a mistyped bucket or folder"), "\(joined.stderr)")
        #expect(!FileManager.default.fileExists(atPath: b.vaultFile))
        // With a pairing code the same typo is said the same way: the
        // folder holds no vault, whatever the code.
        let code = try a.run("pair")
        try #require(code.status == 0, "\(code.stderr)")
        b.write(b.path + "/code", code.stdout)
        let paired = try b.run(
            "join", typo, "--user", "vault", "--password-file", b.path + "/store-password", "--pairing-code-file",
            b.path + "/code")
        #expect(paired.status == 1, "\(paired.stderr)")
        #expect(
            paired.stderr.contains(
                "the store has no vault at \(typo) (no vault-keys there): the address may be mistyped"),
            "\(paired.stderr)")
        #expect(!paired.stderr.contains("no pairing offer"), "\(paired.stderr)")
        #expect(!FileManager.default.fileExists(atPath: b.vaultFile))
        // The code was not spent: at the right address it joins.
        let right = try b.run(
            "join", proxied, "--user", "vault", "--password-file", b.path + "/store-password", "--pairing-code-file",
            b.path + "/code")
        #expect(right.status == 0, "\(right.stderr)")

        // a was in step with the store: setting a new folder keeps working, and says so.
        let moved = try a.run(
            "remote", "set", typo, "--user", "vault", "--password-file", a.path + "/store-password")
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(
            moved.stderr.contains(
                "warning: this vault was in step with \(proxied) until now, and \(typo) holds no vault yet"),
            "\(moved.stderr)")
    }

    @Test("a store URL that carries a user or password is refused before anything is stored")
    func userInfoInURL() throws {
        let url = proxied.replacingOccurrences(of: "http://", with: "http://vault:secret-in-url@")
        let before = a.snapshot()
        for args in [["remote", "set", url], ["join", url]] {
            let r = try VaultProcess.run(args, environment: a.environment)
            #expect(r.status == 64 && r.stderr.contains("--password-file"), "\(r.stderr)")
            #expect(!r.stderr.contains("secret-in-url"))
        }
        #expect(a.snapshot() == before)
    }

    /// a and b on a store that ignores If-Match, both holding grant `work`.
    func pairWithoutPreconditions() throws {
        try control("mode/nocas")
        try a.run("import", "work", stdin: Home.tokenJSON("w"))
        try connect(a)
        try sync(a)
        #expect(try join(b).status == 0)
    }

    @Test("a store that ignores If-Match loses an update; the next sync finds and repairs it")
    func lostUpdate() throws {
        try pairWithoutPreconditions()
        defer { try? control("mode/pass") }
        // a writes; then b's write, made on the root from before a's, lands
        // over it (b looked at the root just before a's write landed): the
        // store ignores b's If-Match. As the store then holds it, b's sync
        // starts from the root b read.
        let root = storeDir + "/vault-root"
        let read = try Data(contentsOf: URL(fileURLWithPath: root))
        try a.run("import", "from-a", stdin: Home.tokenJSON("a"))
        try sync(a)
        try read.write(to: URL(fileURLWithPath: root))
        try b.run("import", "from-b", stdin: Home.tokenJSON("b"))
        try sync(b)
        #expect(try !b.listedNames().names.contains("from-a"))
        // a finds its update lost, sends it again, and says who must sync.
        let repaired = try sync(a)
        #expect(
            repaired.stderr.contains(
                "had lost an update from this machine; sent again: run 'vault sync' on the other machines to receive it"
            ),
            "\(repaired.stderr)")
        try sync(b)
        try sync(a)
        #expect(try a.listedNames().names == ["work", "from-a", "from-b"])
        #expect(try b.listedNames().names == ["work", "from-a", "from-b"])
    }

    @Test("on a store that ignores If-Match, a slow writer's older root is a lost update, repaired, not a rollback")
    func slowWriterWithoutPreconditions() throws {
        try pairWithoutPreconditions()
        defer { try? control("mode/pass") }
        // A writer that read this root and writes only after a has moved
        // on twice puts back a root of a lower epoch than a accepted.
        let root = storeDir + "/vault-root"
        let old = try Data(contentsOf: URL(fileURLWithPath: root))
        for name in ["from-a1", "from-a2"] {
            try a.run("import", name, stdin: Home.tokenJSON(name))
            try sync(a)
        }
        try old.write(to: URL(fileURLWithPath: root))
        let repaired = try sync(a)
        #expect(repaired.stderr.contains("had lost an update"), "\(repaired.stderr)")
        try sync(b)
        #expect(try b.listedNames().names == ["work", "from-a1", "from-a2"])
        #expect(try token(b, "from-a2") == "from-a2")
    }

    @Test("SIGKILL at random moments during sync, then sync again: the machines converge and nothing is lost")
    func killDuringSync() throws {
        try a.run("import", "seed", stdin: Home.tokenJSON("s"))
        try connect(a)
        try sync(a)
        #expect(try join(b).status == 0)
        // The delay adapts: it shrinks after a sync that finished and grows
        // after one that was killed, so kills land inside syncs.
        var window = 100_000.0
        var killed = 0
        var rng = SystemRandomNumberGenerator()
        for i in 0..<25 {
            try a.run("import", "k\(i)", stdin: Home.tokenJSON("t\(i)"))
            if i % 3 == 0 { try b.run("import", "b\(i)", stdin: Home.tokenJSON("u\(i)")) }
            let p = try a.start("sync")
            let q = try b.start("sync")
            usleep(UInt32(Double.random(in: 0...window, using: &rng)))
            p.signal(SIGKILL)
            let status = p.wait().status
            _ = q.wait()
            if status == 128 + SIGKILL {
                killed += 1
                window *= 1.25
            } else {
                window = max(5_000, window * 0.8)
            }
            let listed = try a.run("list", "--json")
            #expect(listed.status == 0 && listed.stderr.isEmpty, "\(listed.stderr)")
        }
        for _ in 0..<3 {
            try sync(a)
            try sync(b)
        }
        let expected = Set(["seed"] + (0..<25).map { "k\($0)" } + stride(from: 0, to: 25, by: 3).map { "b\($0)" })
        #expect(try a.listedNames().names == expected)
        #expect(try b.listedNames().names == expected)
        #expect(killed >= 3, "only \(killed) syncs were interrupted")
        print("sync kill loop: 25 runs, \(killed) killed")
    }

    /// A small seeded generator, so a failing run can be repeated.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Name -> token of every grant a machine holds.
    func contents(_ home: Home) throws -> [String: String] {
        var out: [String: String] = [:]
        for name in try home.listedNames().names { out[name] = try token(home, name) }
        return out
    }

    func randomRun(url: String, seed: UInt64, operations: Int) throws {
        let machines = [a, b, Home()]
        let c = machines[2]
        c.extra = ["VAULT_AGENT": "off", "VAULT_KEYFILE": a.path + "/key"]
        c.write(c.path + "/store-password", "store password\n")
        try connect(a, url: url)
        try sync(a)
        #expect(try join(b, url: url).status == 0)
        #expect(try join(c, url: url).status == 0)
        var rng = SplitMix(state: seed)
        var touched = Set<String>()  // renamed or removed somewhere
        var added: [String] = []
        var serial = 0
        for _ in 0..<operations {
            let m = Int.random(in: 0..<3, using: &rng)
            let home = machines[m]
            let names = Array(try home.listedNames().names).sorted()
            serial += 1
            switch Int.random(in: 0..<10, using: &rng) {
            case 0...2:
                let name = "m\(m)-n\(serial)"
                #expect(try home.run("import", name, stdin: Home.tokenJSON("t\(serial)")).status == 0)
                added.append(name)
            case 3...4 where !names.isEmpty:
                let name = names.randomElement(using: &rng)!
                _ = try home.run("import", name, "--replace", stdin: Home.tokenJSON("t\(serial)"))
            case 5 where !names.isEmpty:
                let name = names.randomElement(using: &rng)!
                touched.insert(name)
                _ = try home.run("rename", name, "m\(m)-r\(serial)")
                touched.insert("m\(m)-r\(serial)")
            case 6 where !names.isEmpty:
                let name = names.randomElement(using: &rng)!
                touched.insert(name)
                _ = try home.run("remove", name)
            case 7:
                // All three at once.
                let running = try machines.map { try $0.start("sync") }
                for p in running {
                    let r = p.wait(timeout: 120)
                    #expect(r.status == 0 || r.status == 75, "\(r.stderr)")
                }
            default:
                let r = try home.run("sync")
                #expect(r.status == 0 || r.status == 75, "\(r.stderr)")
            }
        }
        // Quiesce: sync every machine in turn until nothing moves.
        var rounds = 0
        while rounds < 8 {
            rounds += 1
            var moved = false
            for home in machines {
                let r = try home.run("sync", "--json")
                #expect(r.status == 0, "\(r.stderr)")
                let doc = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
                if (doc?["pulled"] as? Int ?? 1) > 0 || (doc?["pushed"] as? Int ?? 1) > 0 { moved = true }
            }
            if !moved { break }
        }
        let final = try machines.map { try contents($0) }
        #expect(final[0] == final[1] && final[1] == final[2], "the machines did not converge (seed \(seed))")
        for name in added where !touched.contains(name) {
            #expect(
                final[0][name] != nil, "'\(name)' was added and never renamed or removed, but is gone (seed \(seed))")
        }
        print("sync property run: seed \(seed), \(operations) operations, \(final[0].count) grants, \(rounds) rounds")
    }

    @Test("three machines, random changes and syncs, some at once: they converge and lose nothing (Apache)")
    func randomAgainstApache() throws {
        try randomRun(url: davURL, seed: 20_261_202, operations: 300)
    }

    @Test("the same through a store that ignores If-Match: lost updates are repaired")
    func randomWithoutPreconditions() throws {
        try control("mode/nocas")
        defer { try? control("mode/pass") }
        try randomRun(url: proxied, seed: 7_041_969, operations: 300)
    }
}

/// A passphrase changed on one machine of a synced vault reaches the others
/// at their next sync: after it, the old passphrase opens nothing anywhere
/// (docs/sync.md, "A new passphrase on every machine").
@Suite("a new passphrase on every machine")
final class PassphraseSyncTests {
    let dir = TemporaryDirectory()
    let store: WebDAVStore
    let a = Home()
    let b = Home()

    init() throws {
        store = try WebDAVStore(in: dir.path)
        for home in [a, b] {
            home.extra["VAULT_AGENT"] = "off"
            home.write(home.path + "/store-password", "store password\n")
            home.write(home.path + "/old", "the old vault passphrase\n")
            home.write(home.path + "/new", "the new vault passphrase\n")
            home.write(home.path + "/other", "another new passphrase\n")
            home.write(home.path + "/third", "a third new passphrase\n")
        }
        try a.initPassphraseVault("the old vault passphrase")
        try a.run("import", "work", stdin: Home.tokenJSON("w"))
        let set = try a.run(
            "remote", "set", store.url, "--user", "vault", "--password-file", a.path + "/store-password")
        #expect(set.status == 0, "\(set.stderr)")
        #expect(try a.run("sync").status == 0)
        b.extra["VAULT_PASSPHRASE_FILE"] = b.path + "/old"
        let joined = try b.run(
            "join", store.url, "--user", "vault", "--password-file", b.path + "/store-password")
        #expect(joined.status == 0, "\(joined.stderr)")
    }

    func passwd(_ home: Home, to file: String) throws {
        let r = try home.run(
            "passwd", "--new-passphrase-file", home.path + "/" + file, "--kdf-memory", "64", "--kdf-passes", "2")
        #expect(r.status == 0, "\(r.stderr)")
        home.extra["VAULT_PASSPHRASE_FILE"] = home.path + "/" + file
    }

    /// The token of `work` on `home` opened with the passphrase in `file`.
    func opens(_ home: Home, with file: String) throws -> Bool {
        home.extra["VAULT_PASSPHRASE_FILE"] = home.path + "/" + file
        return try home.run("token", "work").stdout == "w\n"
    }

    @Test("a sync through the agent says too that a passphrase set on another machine opens the vault now")
    func reachesThroughTheAgent() throws {
        b.allowAgent()
        #expect(try b.start("agent").wait().status == 0)
        defer { _ = try? b.run("lock") }
        try passwd(a, to: "new")
        #expect(try a.run("sync").status == 0)
        let synced = try b.run("sync")
        #expect(synced.status == 0 && synced.stderr.contains("was changed on another machine"), "\(synced.stderr)")
        let again = try b.run("sync", "--json")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
        #expect(doc["passphrase_taken"] as? Bool == false && doc["passphrases"] as? Int == 1, "\(again.stdout)")
        #expect(try b.run("lock").status == 0)
        b.extra["VAULT_AGENT"] = "off"
        #expect(try opens(b, with: "new"))
        #expect(try !opens(b, with: "old"), "the old passphrase opens nothing")
    }

    @Test("passwd, then a sync through the agent, which holds the vault: the sync says it published the passphrase")
    func publishedThroughTheAgent() throws {
        a.allowAgent()
        #expect(try a.start("agent").wait().status == 0)
        defer { _ = try? a.run("lock") }
        try passwd(a, to: "new")
        let synced = try a.run("sync")
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(synced.stderr.contains("vault: published the passphrase set here to the store"), "\(synced.stderr)")
        let quiet = try a.run("sync")
        #expect(quiet.status == 0 && !quiet.stderr.contains("published"), "\(quiet.stderr)")
    }

    @Test("passwd on one machine, a sync on each: the other opens with the new passphrase, not the old")
    func reachesEveryMachine() throws {
        try passwd(a, to: "new")
        #expect(try a.run("sync").status == 0)
        let synced = try b.run("sync")
        #expect(synced.status == 0 && synced.stderr.contains("was changed on another machine"), "\(synced.stderr)")
        #expect(try opens(b, with: "new"))
        #expect(try !opens(b, with: "old"), "the old passphrase opens nothing")
        #expect(try !opens(a, with: "old"))
        // Nothing more to do at the next syncs.
        b.extra["VAULT_PASSPHRASE_FILE"] = b.path + "/new"
        let again = try b.run("sync", "--json")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
        #expect(doc["passphrase_taken"] as? Bool == false && doc["passphrases"] as? Int == 1, "\(again.stdout)")
        // A machine joining later uses the new one.
        let c = Home()
        c.extra = ["VAULT_AGENT": "off"]
        c.write(c.path + "/store-password", "store password\n")
        c.write(c.path + "/new", "the new vault passphrase\n")
        c.extra["VAULT_PASSPHRASE_FILE"] = c.path + "/new"
        #expect(
            try c.run("join", store.url, "--user", "vault", "--password-file", c.path + "/store-password").status == 0)
    }

    @Test(
        "passwd, then sync: the sync says it published the passphrase; the old one on the machine that took it says it was changed there, when, and to update VAULT_PASSPHRASE_FILE"
    )
    func oldPassphraseTold() throws {
        try passwd(a, to: "new")
        let published = try a.run("sync")
        #expect(published.status == 0, "\(published.stderr)")
        #expect(
            published.stderr.contains(
                "vault: published the passphrase set here to the store (its keyslot; the passphrase itself never leaves this machine): each other machine takes it at its next 'vault sync', and from then on opens only with it"
            ), "\(published.stderr)")
        let quiet = try a.run("sync")
        #expect(quiet.status == 0 && !quiet.stderr.contains("published"), "\(quiet.stderr)")
        let taken = try b.run("sync")
        #expect(taken.status == 0 && !taken.stderr.contains("published"), "\(taken.stderr)")
        b.extra["VAULT_PASSPHRASE_FILE"] = b.path + "/old"
        let r = try b.run("list")
        #expect(r.status == 77, "\(r.stderr)")
        #expect(r.stderr.contains("vault: error: wrong passphrase (from VAULT_PASSPHRASE_FILE)\n"), "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: hint: the vault's passphrase was changed on another machine ('vault passwd' there), and this machine took it at its sync of 20"
            ), "\(r.stderr)")
        #expect(
            r.stderr.contains(": the passphrase set there opens this vault now, the one from before does not\n"),
            "\(r.stderr)")
        #expect(
            r.stderr.contains("vault: hint: write the new passphrase into the file VAULT_PASSPHRASE_FILE names"),
            "\(r.stderr)")
        #expect(!r.stderr.contains("old vault passphrase") && !r.stderr.contains("new vault passphrase"))
        // The machine that set it took nothing: its old passphrase is only wrong.
        a.extra["VAULT_PASSPHRASE_FILE"] = a.path + "/old"
        let here = try a.run("list")
        #expect(here.status == 77 && !here.stderr.contains("another machine"), "\(here.stderr)")
        // A passphrase set here since ends the note.
        b.extra["VAULT_PASSPHRASE_FILE"] = b.path + "/new"
        try passwd(b, to: "third")
        b.extra["VAULT_PASSPHRASE_FILE"] = b.path + "/old"
        let after = try b.run("list")
        #expect(after.status == 77 && !after.stderr.contains("another machine"), "\(after.stderr)")
    }

    @Test("two machines change the passphrase before either syncs: both open every machine, and sync says so")
    func bothChanged() throws {
        try passwd(a, to: "new")
        try passwd(b, to: "other")
        #expect(try a.run("sync").status == 0)
        let bSync = try b.run("sync")
        #expect(bSync.status == 0 && bSync.stderr.contains("2 passphrases open this vault"), "\(bSync.stderr)")
        #expect(bSync.stderr.contains("beside the one set here"), "\(bSync.stderr)")
        let aSync = try a.run("sync")
        #expect(aSync.status == 0 && aSync.stderr.contains("2 passphrases open this vault"), "\(aSync.stderr)")
        for home in [a, b] {
            #expect(try opens(home, with: "new") && opens(home, with: "other") && !opens(home, with: "old"))
        }
        // One passwd, synced, leaves one.
        a.extra["VAULT_PASSPHRASE_FILE"] = a.path + "/new"
        try passwd(a, to: "new")
        #expect(try a.run("sync").status == 0)
        b.extra["VAULT_PASSPHRASE_FILE"] = b.path + "/other"
        #expect(try b.run("sync").status == 0)
        #expect(try opens(b, with: "new") && !opens(b, with: "other"))
    }

    @Test("a passphrase changed twice, the first synced, races another machine's: the first opens nothing")
    func changedTwiceAgainstARival() throws {
        try passwd(b, to: "other")
        #expect(try b.run("sync").status == 0)
        try passwd(b, to: "third")
        try passwd(a, to: "new")
        for home in [a, b, a, b] { #expect(try home.run("sync").status == 0) }
        for home in [a, b] {
            #expect(try opens(home, with: "new") && opens(home, with: "third"))
            #expect(try !opens(home, with: "other") && !opens(home, with: "old"))
        }
    }
}

/// The racing edits of issue 39, played as two people sharing a vault
/// would, through Apache: every race is a conflict on both machines,
/// whoever syncs first and however the seconds fall.
@Suite("racing edits through a WebDAV store")
final class RacingEditTests {
    let dir = TemporaryDirectory()
    let store: WebDAVStore
    let a = Home()
    let b = Home()

    init() throws {
        store = try WebDAVStore(in: dir.path)
        try a.initKeyfileVault()
        for home in [a, b] {
            home.extra["VAULT_AGENT"] = "off"
            home.write(home.path + "/store-password", "store password\n")
        }
        b.extra["VAULT_KEYFILE"] = a.path + "/key"
        let set = try a.run(
            "remote", "set", store.url, "--user", "vault", "--password-file", a.path + "/store-password")
        try #require(set.status == 0, "\(set.stderr)")
    }

    func sync(_ home: Home) throws -> ProcessResult {
        let r = try home.run("sync")
        #expect(r.status == 0, "\(r.stderr)")
        return r
    }

    func conflicts(_ home: Home) throws -> [[String: Any]] {
        let r = try home.run("conflicts", "--json")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
    }

    @Test("imports with --replace of tokens without a refresh token on both machines: a conflict on both, every time")
    func racingImports() throws {
        try a.run("import", "g", stdin: #"{"access_token":"first","provider":"x"}"#)
        _ = try sync(a)
        let joined = try b.run("join", store.url, "--user", "vault", "--password-file", b.path + "/store-password")
        try #require(joined.status == 0, "\(joined.stderr)")
        for round in 1...5 {
            // Within one second on both machines, as the runs that lost it did.
            try a.run("import", "g", "--replace", stdin: #"{"access_token":"a-\#(round)","provider":"x"}"#)
            try b.run("import", "g", "--replace", stdin: #"{"access_token":"b-\#(round)","provider":"x"}"#)
            _ = try sync(a)
            _ = try sync(b)
            _ = try sync(a)
            for home in [a, b] {
                let listed = try conflicts(home)
                let sides = listed.first?["sides"] as? [[String: Any]] ?? []
                #expect(listed.count == 1 && sides.count == 2, "round \(round): \(listed)")
                // Both imports are there: the value and the kept side hold
                // different tokens.
                #expect(Set(sides.compactMap { $0["fingerprint"] as? String }).count == 2, "round \(round)")
            }
            // Picking A's side ends it on both.
            let current = try a.run("token", "g").stdout == "a-\(round)\n"
            #expect(try a.run("conflicts", "resolve", "g", "--keep", current ? "current" : "other").status == 0)
            _ = try sync(a)
            _ = try sync(b)
            #expect(try a.run("token", "g").stdout == "a-\(round)\n" && b.run("token", "g").stdout == "a-\(round)\n")
            #expect(try conflicts(a).isEmpty && conflicts(b).isEmpty)
        }
    }

    @Test("two renames: both names are shown, and keeping the other side takes its name everywhere")
    func racingRenames() throws {
        try a.run("import", "g", stdin: Home.tokenJSON("t"))
        _ = try sync(a)
        let joined = try b.run("join", store.url, "--user", "vault", "--password-file", b.path + "/store-password")
        try #require(joined.status == 0, "\(joined.stderr)")
        try a.run("rename", "g", "g-by-A")
        try b.run("rename", "g", "g-by-B")
        _ = try sync(a)
        _ = try sync(b)
        _ = try sync(a)
        var value = ""
        for home in [a, b] {
            let listed = try conflicts(home)
            let sides = listed.first?["sides"] as? [[String: Any]] ?? []
            let names = sides.compactMap { $0["name"] as? String }
            #expect(Set(names) == ["g-by-A", "g-by-B"], "\(listed)")
            value = listed.first?["name"] as? String ?? ""
            let table = try home.run("conflicts").stdout
            #expect(table.contains("g-by-A") && table.contains("g-by-B"), "\(table)")
        }
        let other = value == "g-by-A" ? "g-by-B" : "g-by-A"
        let kept = try b.run("conflicts", "resolve", value, "--keep", "other")
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(
            kept.stderr.contains(
                "kept the other side of '\(value)': it is '\(other)' now; 'vault sync' sends the choice"),
            "\(kept.stderr)")
        _ = try sync(b)
        _ = try sync(a)
        for home in [a, b] {
            #expect(try home.listedNames().names == [other], "\(home === a ? "A" : "B")")
            #expect(try conflicts(home).isEmpty)
        }
    }

    @Test("a removal racing a rename: keeping the removal says the grant is removed")
    func keptRemoval() throws {
        try a.run("import", "h", stdin: Home.tokenJSON("t"))
        _ = try sync(a)
        let joined = try b.run("join", store.url, "--user", "vault", "--password-file", b.path + "/store-password")
        try #require(joined.status == 0, "\(joined.stderr)")
        #expect(try a.run("remove", "h").status == 0)
        #expect(try b.run("rename", "h", "h-by-B").status == 0)
        _ = try sync(a)
        _ = try sync(b)
        let listed = try conflicts(b)
        let sides = listed.first?["sides"] as? [[String: Any]] ?? []
        try #require(sides.count == 2, "\(listed)")
        let value = listed.first?["name"] as? String ?? ""
        // The side that is the removal, whichever won the race.
        let removal = try #require(sides.first { $0["removed"] as? Bool == true }?["side"] as? String, "\(sides)")
        let kept = try b.run("conflicts", "resolve", value, "--keep", removal)
        #expect(kept.status == 0, "\(kept.stderr)")
        #expect(
            kept.stderr.contains("kept the \(removal) side of '\(value)': the grant is removed"), "\(kept.stderr)")
        #expect(try b.listedNames().names.isEmpty)
    }
}
