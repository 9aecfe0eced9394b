import Foundation
import Glibc
import Testing
import VaultTestSupport

/// Samples every process's command line while it runs, looking for canaries.
final class ArgvSampler: @unchecked Sendable {
    private let canaries: [String]
    private let lock = NSLock()
    private var running = true
    private var hits: [String] = []
    private(set) var samples = 0
    private var thread: Thread?
    private let recordAll: Bool
    private var lines = Set<String>()

    init(canaries: [String], recordAll: Bool = false) {
        self.canaries = canaries
        self.recordAll = recordAll
        let t = Thread { [unowned self] in self.loop() }
        thread = t
        t.start()
    }

    private func loop() {
        while lock.withLock({ running }) {
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            where entry.first?.isNumber == true {
                guard let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline"), !data.isEmpty else {
                    continue
                }
                let text = String(decoding: data, as: UTF8.self)
                if recordAll { lock.withLock { _ = lines.insert(text) } }
                for c in canaries where text.contains(c) {
                    lock.withLock { hits.append("pid \(entry)") }
                }
            }
            lock.withLock { samples += 1 }
        }
    }

    /// Stops sampling; returns the canary hits and every command line seen.
    func stopAndCollect() -> (hits: [String], commandLines: Set<String>) {
        let h = stop()
        return (h, lock.withLock { lines })
    }

    /// Stops sampling and returns the pids where a canary was seen.
    func stop() -> [String] {
        lock.withLock { running = false }
        while thread?.isFinished == false { usleep(1000) }
        return lock.withLock { hits }
    }
}

@Suite("secrets stay out of argv and output")
struct SecretLeakTests {
    @Test("the sampler sees a canary that is in an argv (positive control)")
    func samplerWorks() throws {
        let canary = "canary-control-3e9d"
        let sampler = ArgvSampler(canaries: [canary])
        let p = try VaultProcess.start(["-c", "sleep 0.5", canary], environment: [:], executable: "/bin/sh")
        _ = p.wait()
        #expect(!sampler.stop().isEmpty)
    }

    @Test("passphrases and tokens never reach any argv, stdout, stderr or leftover file")
    func canaries() throws {
        let passphrase = "canary-passphrase-5c81e0"
        let newPassphrase = "canary-new-passphrase-0b2f"
        let token = "canary-access-token-91d4"
        let refresh = "canary-refresh-token-77aa"
        let all = [passphrase, newPassphrase, token, refresh]
        let sampler = ArgvSampler(canaries: all)
        let home = Home()
        var outputs: [ProcessResult] = []
        try home.initPassphraseVault(passphrase)
        let json = #"{"access_token":"\#(token)","refresh_token":"\#(refresh)","expires_in":3600,"provider":"p"}"#
        outputs.append(try home.run("import", "work", stdin: json))
        for args in [
            ["list"], ["list", "--json"], ["show", "work"], ["show", "work", "--json"], ["rename", "work", "w2"],
        ] {
            outputs.append(try VaultProcess.run(args, environment: home.environment))
        }
        // Every unlock path: command, variable, wrong passphrase.
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        home.extra["VAULT_PASSPHRASE_COMMAND"] = "cat \(home.path)/passphrase"
        outputs.append(try home.run("list"))
        home.extra["VAULT_PASSPHRASE_COMMAND"] = nil
        home.extra["VAULT_PASSPHRASE"] = passphrase + "x"
        outputs.append(try home.run("list"))
        home.extra["VAULT_PASSPHRASE"] = passphrase
        home.write(home.path + "/new", newPassphrase + "\n")
        outputs.append(
            try home.run(
                "passwd", "--new-passphrase-file", home.path + "/new", "--kdf-memory", "64", "--kdf-passes", "2"))
        home.extra["VAULT_PASSPHRASE"] = newPassphrase
        outputs.append(try home.run("remove", "w2"))
        let hits = sampler.stop()

        #expect(hits.isEmpty, "canary seen in /proc/*/cmdline of \(hits)")
        #expect(sampler.samples > 10, "the sampler ran \(sampler.samples) times")
        for (i, r) in outputs.enumerated() {
            let leaked = all.contains { r.stdout.contains($0) || r.stderr.contains($0) }
            #expect(!leaked, "output \(i) holds a canary")
        }
        // The vault file holds no canary in the clear; only the passphrase files do.
        for (name, data) in home.snapshot() {
            let text = String(decoding: data, as: UTF8.self)
            let leaked = all.contains { text.contains($0) }
            #expect(!leaked, "vault/\(name) holds a canary in the clear")
        }
        // And show --reveal is the one way to see a token.
        let reveal = try home.run("import", "again", stdin: json)
        #expect(reveal.status == 0)
        #expect(try home.run("show", "again", "--reveal").stdout.contains(token))
    }
}

@Suite("the terminal prompt")
struct TerminalPromptTests {
    /// Drives `vault` in a pseudo-terminal with Python's pty module: waits for
    /// each prompt, types the answer, and returns everything the terminal showed.
    static let driver = """
        import os, pty, sys, time
        answers = sys.argv[2:]
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(sys.argv[1], [sys.argv[1]] + os.environ["VAULT_ARGS"].split())
        seen, buf = b"", b""
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                chunk = os.read(fd, 1024)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
            buf += chunk
            if answers and b": " in buf and b"assphrase" in buf:
                buf = b""
                time.sleep(0.05)
                os.write(fd, answers.pop(0).encode() + b"\\n")
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(seen.decode(errors="replace"))
        sys.exit(os.waitstatus_to_exitcode(status))
        """

    func drive(_ home: Home, _ args: String, answers: [String]) throws -> ProcessResult {
        var env = home.environment
        env["VAULT_ARGS"] = args
        return try VaultProcess.start(
            ["-c", TerminalPromptTests.driver, VaultProcess.binary] + answers, environment: env,
            executable: "/usr/bin/python3"
        ).wait()
    }

    @Test(
        "init asks twice with echo off; a later command asks once and retries a typo",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")))
    func prompt() throws {
        let home = Home()
        let secret = "typed-canary-4411"
        let created = try drive(home, "init --kdf-memory 64 --kdf-passes 2", answers: [secret, secret])
        #expect(created.status == 0, "\(created.stdout)")
        #expect(created.stdout.contains("New passphrase: "))
        #expect(created.stdout.contains("Repeat the new passphrase: "))
        #expect(!created.stdout.contains(secret), "the passphrase was echoed")

        let listed = try drive(home, "list", answers: ["typo", secret])
        #expect(listed.status == 0, "\(listed.stdout)")
        #expect(listed.stdout.contains("vault: error: wrong passphrase"))
        #expect(!listed.stdout.contains(secret) && !listed.stdout.contains("typo"))

        let mismatch = try drive(TestHomes.fresh(), "init --kdf-memory 64 --kdf-passes 2", answers: ["one", "two"])
        #expect(mismatch.status == 1)
        #expect(mismatch.stdout.contains("the passphrases do not match"))
    }
}

enum TestHomes {
    static func fresh() -> Home { Home() }
}
