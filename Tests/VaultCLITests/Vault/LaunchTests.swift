import Foundation
import Glibc
import Testing
import VaultTestSupport

/// What vault hands to the programs it starts: the browser and the
/// passphrase command.
@Suite("programs vault starts: the browser and the passphrase command")
struct LaunchTests {
    let home = Home()

    @Test("the browser gets no VAULT_* variable and no descriptor beyond 0-2")
    func browserEnvironment() throws {
        try home.initKeyfileVault()
        let fixture = try FixtureServer(script: "http_fixture.py")
        let dir = home.path + "/config/vault/providers"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let provider: [String: Any] = [
            "name": "bad", "authorization_endpoint": fixture.base + "/authorize",
            "token_endpoint": fixture.base + "/status/200", "client_id": "c", "scopes": ["read"], "flows": ["browser"],
        ]
        _ = FileManager.default.createFile(
            atPath: dir + "/bad.json", contents: try JSONSerialization.data(withJSONObject: provider))
        // The browser records what it got, then delivers a fake code so the
        // flow ends (refused at the token endpoint).
        let dump = home.path + "/browser.json"
        let script = home.path + "/browser"
        home.write(
            script,
            """
            #!/usr/bin/python3
            import json, os, subprocess, sys
            fds = {}
            for fd in os.listdir("/proc/self/fd"):
                try:
                    fds[fd] = os.readlink("/proc/self/fd/" + fd)
                except OSError:
                    pass
            with open("\(dump)", "w") as f:
                json.dump({"env": dict(os.environ), "fds": fds}, f)
            subprocess.run([sys.executable, "\(FixtureServer.root.path)/Tools/testservers/browser.py",
                            "fake-code", "-", sys.argv[1]])
            """)
        chmod(script, 0o700)
        var env = home.environment
        env["BROWSER"] = script
        env["VAULT_PASSPHRASE"] = "canary-passphrase-7f3a"
        // The caller leaves descriptors 7 and 8 open, as shells and
        // supervisors do.
        let r = try VaultProcess.start(
            ["-c", "exec 7<>/dev/null 8</etc/hostname; exec \"$0\" add bad", VaultProcess.binary],
            environment: env, executable: "/bin/sh"
        ).wait(timeout: 60)
        #expect(r.status == 1, "\(r.stderr)")
        let data = try #require(FileManager.default.contents(atPath: dump), "the browser did not run")
        let doc = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let browserEnv = try #require(doc["env"] as? [String: String])
        #expect(browserEnv.keys.filter { $0.hasPrefix("VAULT_") }.isEmpty, "\(browserEnv.keys.sorted())")
        #expect(
            !browserEnv.values.contains { $0.contains("canary-passphrase-7f3a") || $0.contains(home.path + "/key") })
        #expect(browserEnv["HOME"] == home.path && browserEnv["PATH"] != nil)
        let fds = try #require(doc["fds"] as? [String: String])
        let extra = fds.filter { Int($0.key)! > 2 && !$0.value.hasPrefix("/proc/") }
        #expect(extra.isEmpty, "inherited descriptors: \(extra)")
    }

    /// A passphrase vault and the path of a file a command writes its pid to.
    func passphraseVault() throws -> String {
        try home.initPassphraseVault("pw-4a1c")
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        return home.path + "/child.pid"
    }

    func killRecorded(_ pidFile: String) {
        // A child that never wrote its pid has nothing to kill.
        if let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
            let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
        {
            kill(pid, SIGKILL)
        }
    }

    @Test("the passphrase command's output ends when it exits, whatever it left in the background")
    func passphraseCommandBackgroundChild() throws {
        let pidFile = try passphraseVault()
        defer { killRecorded(pidFile) }
        home.extra["VAULT_PASSPHRASE_COMMAND"] = "sleep 1000 2>/dev/null & echo $! > \(pidFile); echo pw-4a1c"
        let r = try home.start("list").wait(timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
    }

    @Test("a passphrase command that never exits is stopped at its time limit")
    func passphraseCommandTimeLimit() throws {
        let pidFile = try passphraseVault()
        defer { killRecorded(pidFile) }
        home.extra["VAULT_PASSPHRASE_COMMAND"] = "echo $$ > \(pidFile); exec sleep 1000"
        home.extra["VAULT_PASSPHRASE_COMMAND_TIMEOUT"] = "1"
        let r = try home.start("list").wait(timeout: 60)
        #expect(r.status == 77, "\(r.stderr)")
        #expect(r.stderr.contains("VAULT_PASSPHRASE_COMMAND did not finish within 1 seconds"), "\(r.stderr)")
    }

    @Test("after Ctrl-Z and fg at the passphrase prompt, echo is off again and the passphrase is not shown")
    func promptAfterStop() throws {
        try home.initPassphraseVault("pw-5b2d")
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        let report = home.path + "/pty.json"
        let r = try VaultProcess.start(
            [
                "\(FixtureServer.root.path)/Tools/testservers/pty_prompt.py", report, "pw-5b2d", VaultProcess.binary,
                "list",
            ],
            environment: home.environment, executable: "/usr/bin/python3"
        ).wait(timeout: 90)
        #expect(r.status == 0, "\(r.stderr)")
        let data = try #require(FileManager.default.contents(atPath: report), "\(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(doc["echo_while_stopped"] as? Bool == true, "\(doc)")
        #expect(doc["echo_off_after_continue"] as? Bool == true, "\(doc)")
        #expect(doc["passphrase_shown"] as? Bool == false, "\(doc)")
        #expect(doc["status"] as? Int == 0, "\(doc)")
    }
}
