import Foundation
import Glibc
import Testing
import VaultTestSupport

@Suite("the vault process")
struct ProcessTests {
    @Test("a wrong passphrase exits 77 and writes nothing")
    func wrongPassphraseWritesNothing() throws {
        let home = Home()
        try home.initPassphraseVault("the right one")
        try home.run("import", "g", stdin: Home.tokenJSON("t"))
        let before = home.snapshot()
        home.write(home.path + "/wrong", "the wrong one\n")
        home.extra["VAULT_PASSPHRASE_FILE"] = home.path + "/wrong"
        for args in [["list"], ["show", "g"], ["remove", "g"], ["rename", "g", "h"]] {
            let r = try VaultProcess.run(args, environment: home.environment, stdin: nil)
            #expect(r.status == 77, "\(args)")
            #expect(r.stderr == "vault: error: wrong passphrase (from VAULT_PASSPHRASE_FILE)\n")
        }
        let r = try home.run("import", "h", stdin: Home.tokenJSON("t"))
        #expect(r.status == 77)
        #expect(home.snapshot() == before)
    }

    @Test("an empty or truncated vault file gives a clear error and is not overwritten")
    func damagedFiles() throws {
        let home = Home()
        try home.initKeyfileVault()
        for i in 0..<5 { try home.run("import", "g\(i)", stdin: Home.tokenJSON("t\(i)")) }
        let full = FileManager.default.contents(atPath: home.vaultFile)!
        for (label, bytes) in [("empty", Data()), ("truncated", full.prefix(3000)), ("header only", full.prefix(100))] {
            home.write(home.vaultFile, "")
            _ = FileManager.default.createFile(
                atPath: home.vaultFile, contents: bytes, attributes: [.posixPermissions: 0o600])
            for args in [["list"], ["import", "new"], ["init"]] {
                let r = try VaultProcess.run(args, environment: home.environment, stdin: Home.tokenJSON("x"))
                #expect(r.status == 1, "\(label) \(args): \(r.stderr)")
                #expect(r.stderr.hasPrefix("vault: error: "), "\(label) \(args)")
                #expect(!r.stderr.contains("Fatal error"), "\(label) \(args)")
            }
            #expect(FileManager.default.contents(atPath: home.vaultFile) == bytes, "\(label)")
        }
        home.write(home.vaultFile, "")
        #expect(try home.run("list").stderr.contains("is empty"))
    }

    @Test("SIGKILL at random moments during imports loses no acknowledged grant")
    func crashLoop() throws {
        let home = Home()
        try home.initKeyfileVault()
        var acknowledged: [String] = []
        var killed = 0
        var rng = SystemRandomNumberGenerator()
        let iterations = 150
        // The window adapts to the machine's speed: it grows after a kill and
        // shrinks after an import that finished, so kills keep landing
        // inside imports on a loaded machine as on an idle one.
        var window = 30_000.0
        for i in 0..<iterations {
            let name = "g\(i)"
            let p = try home.start("import", name, stdin: Home.tokenJSON("token-\(i)"))
            usleep(UInt32(Double.random(in: 0...window, using: &rng)))
            p.signal(SIGKILL)
            let r = p.wait()
            if r.status == 0 {
                acknowledged.append(name)
                window = max(1_000, window * 0.8)
            } else {
                #expect(r.status == 128 + SIGKILL, "\(name): \(r.stderr)")
                killed += 1
                window = min(2_000_000, window * 1.25)
            }
        }
        let (names, result) = try home.listedNames()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.isEmpty)
        #expect(Set(acknowledged).isSubset(of: names), "lost: \(Set(acknowledged).subtracting(names).sorted())")
        #expect(killed >= 20, "only \(killed) of \(iterations) imports were interrupted")
        #expect(acknowledged.count >= 10, "only \(acknowledged.count) imports finished")
        print(
            "crash loop: \(iterations) imports, \(killed) killed, \(acknowledged.count) acknowledged, \(names.count) present"
        )
        // The vault still takes writes.
        #expect(try home.run("import", "after", stdin: Home.tokenJSON("x")).status == 0)
    }

    @Test("SIGKILL during passwd leaves exactly one working passphrase, old or new")
    func passwdCrashLoop() throws {
        let home = Home()
        try home.initPassphraseVault("passphrase-A")
        try home.run("import", "g", stdin: Home.tokenJSON("t"))
        home.write(home.path + "/A", "passphrase-A\n")
        home.write(home.path + "/B", "passphrase-B\n")
        func opens(_ file: String) throws -> Bool {
            var env = home.environment
            env["VAULT_PASSPHRASE_FILE"] = home.path + "/" + file
            let r = try VaultProcess.run(["show", "g"], environment: env)
            #expect(r.status == 0 || r.status == 77, "\(r.stderr)")
            return r.status == 0
        }
        // The kill delay follows the machine: it shrinks after a passwd that
        // completed and grows after one that was killed, so about half of
        // the runs are interrupted however fast or loaded the machine is.
        var window = 200_000.0
        var current = "A"
        var rng = SystemRandomNumberGenerator()
        var killed = 0
        var completed = 0
        for _ in 0..<30 {
            let next = current == "A" ? "B" : "A"
            var env = home.environment
            env["VAULT_PASSPHRASE_FILE"] = home.path + "/" + current
            let p = try VaultProcess.start(
                ["passwd", "--new-passphrase-file", home.path + "/" + next, "--kdf-memory", "64", "--kdf-passes", "2"],
                environment: env)
            usleep(UInt32(Double.random(in: 0...(2 * window), using: &rng)))
            p.signal(SIGKILL)
            let status = p.wait().status
            window = status == 0 ? max(5_000, window * 0.8) : window * 1.25
            let (old, new) = (try opens(current), try opens(next))
            #expect(old != new, "after a kill, old opens: \(old), new opens: \(new)")
            if status == 0 {
                completed += 1
                #expect(new, "passwd reported success but the new passphrase does not open the vault")
            } else {
                killed += 1
            }
            if new { current = next }
        }
        #expect(killed >= 3 && completed >= 3, "killed \(killed), completed \(completed)")
        print("passwd crash loop: 30 runs, \(killed) killed, \(completed) completed")
    }

    @Test("concurrent writers all succeed or report busy; nothing is lost")
    func concurrentWriters() throws {
        let home = Home()
        try home.initKeyfileVault()
        try home.run("import", "victim", stdin: Home.tokenJSON("v"))
        var processes: [(String, RunningProcess)] = []
        for i in 0..<24 {
            processes.append(("w\(i)", try home.start("import", "w\(i)", stdin: Home.tokenJSON("t\(i)"))))
            if i % 6 == 0 { processes.append(("rename\(i)", try home.start("rename", "victim", "victim\(i)"))) }
        }
        var succeeded: [String] = []
        for (name, p) in processes {
            let r = p.wait()
            if name.hasPrefix("rename") {
                // Only one rename can find 'victim'; the rest say it is gone.
                #expect(r.status == 0 || r.stderr.contains("not found") || r.status == 75, "\(name): \(r.stderr)")
                continue
            }
            #expect(r.status == 0 || r.status == 75, "\(name): \(r.stderr)")
            if r.status == 75 { #expect(r.stderr.contains("busy")) }
            if r.status == 0 { succeeded.append(name) }
        }
        let (names, result) = try home.listedNames()
        #expect(result.status == 0)
        #expect(Set(succeeded).isSubset(of: names))
        #expect(names.filter { $0.hasPrefix("victim") }.count == 1)
    }

    @Test("files and directories are private under umask 000")
    func umaskZero() throws {
        let home = Home()
        let script = "umask 000; exec \(VaultProcess.binary) \"$@\""
        func run(_ args: [String], stdin: String? = nil) throws -> ProcessResult {
            try VaultProcess.start(
                ["-c", script, "sh"] + args, environment: home.environment, stdin: stdin, executable: "/bin/sh"
            ).wait()
        }
        #expect(try run(["init", "--keyfile", home.path + "/key"]).status == 0)
        home.extra["VAULT_KEYFILE"] = home.path + "/key"
        #expect(try run(["import", "g"], stdin: Home.tokenJSON("t")).status == 0)
        func mode(_ p: String) -> mode_t {
            var st = stat()
            stat(p, &st)
            return st.st_mode & 0o777
        }
        #expect(mode(home.path + "/vault") == 0o700)
        #expect(mode(home.vaultFile) == 0o600)
        #expect(mode(home.path + "/key") == 0o600)
        // No leftovers from the atomic create.
        #expect(try FileManager.default.contentsOfDirectory(atPath: home.path + "/vault") == ["vault.db"])
    }

    @Test("a group-writable vault directory is refused")
    func insecureDirectory() throws {
        let home = Home()
        try home.initKeyfileVault()
        chmod(home.path + "/vault", 0o770)
        let r = try home.run("list")
        #expect(r.status == 1)
        #expect(r.stderr.contains("is writable by group or others"))
    }

    @Test("without a terminal or unlock source, exit 77 at once instead of waiting")
    func noTerminal() throws {
        let home = Home()
        try home.initPassphraseVault("p")
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        let started = Date()
        let r = try home.run("list")
        #expect(r.status == 77)
        #expect(r.stderr.contains("vault: hint: set VAULT_KEYFILE"))
        #expect(Date().timeIntervalSince(started) < 30)
    }

    @Test("the process refuses core dumps")
    func coreDumpsOff() throws {
        let home = Home()
        try home.initPassphraseVault("p")
        // The passphrase command is vault's child: it reads its parent's limits.
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        home.extra["VAULT_PASSPHRASE_COMMAND"] = "grep 'Max core file size' /proc/$PPID/limits >&2; echo p"
        let r = try home.run("list")
        #expect(r.status == 0, "\(r.stderr)")
        let fields = r.stderr.split(separator: " ", omittingEmptySubsequences: true)
        // Soft limit 0; the hard limit stays, so 'vault exec' can give it back.
        #expect(fields.count >= 6 && fields[4] == "0", "\(r.stderr)")
    }

    @Test("no C library vault uses is on the loader's path: each is loaded on first use only")
    func noEagerLibraries() throws {
        let r = try VaultProcess.start(
            [VaultProcess.binary], environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/ldd"
        ).wait()
        #expect(r.status == 0)
        for library in ["libcurl", "libcrypto", "libsecret", "libglib", "libsodium", "libsqlite3"] {
            #expect(!r.stdout.contains(library), "\(r.stdout)")
        }
        #expect(r.stdout.contains("libc.so"))
    }

    @Test("help works for every command, both ways")
    func help() throws {
        let home = Home()
        for command in [
            "init", "add", "import", "list", "show", "token", "refresh", "check", "env", "exec", "header", "sign",
            "xoauth2", "test",
            "git-credential",
            "rename", "remove", "passwd", "keyslot", "agent", "lock", "remote", "sync", "join", "pair", "conflicts",
            "providers", "help",
        ] {
            let a = try home.run("help", command)
            let b = try home.run(command, "--help")
            #expect(a.status == 0 && b.status == 0, "\(command)")
            #expect(a.stdout == b.stdout)
            for heading in ["OVERVIEW: ", "USAGE: vault \(command)", "OPTIONS:", "EXAMPLES:"] {
                #expect(a.stdout.contains(heading), "\(command) lacks \(heading)")
            }
        }
        #expect(try home.run("--help").status == 0)
    }
}
