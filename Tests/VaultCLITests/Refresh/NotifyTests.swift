import Foundation
import Testing
import VaultTestSupport

/// `VAULT_NOTIFY_COMMAND`: a script that appends the notice it was given
/// (its `VAULT_NOTIFY_*` variables, and the names of any other `VAULT_`
/// variables that reached it) to a file, against the scriptable provider.
@Suite("notify command: a grant that dies, is about to, or is authorized again")
struct NotifyTests {
    static let day = 86400

    /// One notice as the script wrote it.
    typealias Notice = [String: String]

    /// A scene whose vault runs the recording script.
    static func scene(_ persona: String = "microsoft", providerFields: [String: Any] = [:]) throws -> ProviderScene {
        let scene = try ProviderScene(persona, providerFields: providerFields)
        let script = scene.home.path + "/notify.sh"
        scene.home.write(
            script,
            """
            #!/bin/sh
            {
              for v in EVENT GRANT PROVIDER ACCOUNT REASON DETAIL MARKUP DEADLINE DEADLINE_EPOCH; do
                eval "value=\\${VAULT_NOTIFY_$v-unset}"
                printf '%s=%s\\n' "$v" "$value"
              done
              env | grep '^VAULT_' | grep -v '^VAULT_NOTIFY_' | sed 's/=.*//; s/^/LEAKED=/'
              printf '%s\\n' '--'
            } >> "$NOTIFY_LOG"
            """)
        chmod(script, 0o700)
        scene.home.extra["VAULT_NOTIFY_COMMAND"] = script
        scene.home.extra["NOTIFY_LOG"] = scene.home.path + "/notices"
        return scene
    }

    /// The notices the script recorded, oldest first.
    static func notices(_ scene: ProviderScene) -> [Notice] {
        guard let text = try? String(contentsOfFile: scene.home.path + "/notices", encoding: .utf8) else { return [] }
        return text.components(separatedBy: "--\n").filter { !$0.isEmpty }.map { block in
            var notice: Notice = [:]
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                guard let eq = line.firstIndex(of: "=") else { continue }
                let key = String(line[..<eq])
                notice[key] = (notice[key].map { $0 + "," } ?? "") + line[line.index(after: eq)...]
            }
            return notice
        }
    }

    @Test("a refresh the provider refuses: one 'died' notice with the grant's fields, not repeated")
    func died() throws {
        let scene = try Self.scene()
        #expect(try scene.add().status == 0)
        #expect(Self.notices(scene).isEmpty)
        try scene.script(["token": [["error": "invalid_grant", "when": "refresh_token"]]])
        let r = try scene.home.run("refresh", "work")
        #expect(r.status == 2, "\(r.stderr)")
        let notices = Self.notices(scene)
        #expect(notices.count == 1, "\(notices)")
        let n = try #require(notices.first)
        #expect(n["EVENT"] == "died" && n["GRANT"] == "work" && n["PROVIDER"] == "microsoft")
        #expect(n["ACCOUNT"] == "ada@example.com" && n["REASON"] == "invalid_grant")
        // Microsoft's 90 days unused, from the authorization: the deadline it had.
        let created = try #require(try scene.shown()?["created_at"] as? Int)
        #expect(n["DEADLINE_EPOCH"] == String(created + 90 * Self.day))
        #expect(n["DEADLINE"]?.hasSuffix("Z") == true && n["DEADLINE"]?.count == 20)
        // Neither the key file's path nor the command's own variable reached it.
        #expect(n["LEAKED"] == nil, "\(n)")
        // A dead grant is not refreshed again, and nothing is told twice.
        #expect(try scene.home.run("refresh", "work").status == 2)
        #expect(try scene.home.run("token", "work").status == 2)
        #expect(Self.notices(scene).count == 1)
        let ledger = scene.home.path + "/vault/notified.json"
        let mode = try FileManager.default.attributesOfItem(atPath: ledger)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try !String(contentsOfFile: ledger, encoding: .utf8).contains("work"))
    }

    @Test("vault add NAME again: a 'reauthorized' notice; the grant's next death is told again")
    func reauthorized() throws {
        let scene = try Self.scene()
        #expect(try scene.add().status == 0)
        try scene.script(["token": [["error": "invalid_grant", "when": "refresh_token"]]])
        #expect(try scene.home.run("refresh", "work").status == 2)
        let again = try scene.home.run("add", "work", "--timeout", "60")
        #expect(again.status == 0, "\(again.stderr)")
        var notices = Self.notices(scene)
        #expect(notices.map { $0["EVENT"] } == ["died", "reauthorized"], "\(notices)")
        let n = try #require(notices.last)
        #expect(n["GRANT"] == "work" && n["REASON"] == "authorized again" && n["ACCOUNT"] == "ada@example.com")
        let shown = try #require(try scene.shown())
        #expect(n["DEADLINE_EPOCH"] == String(try #require(shown["refresh_token_deadline_at"] as? Int)))
        // Forgotten on re-authorization: the same death is news again.
        try scene.script(["token": [["error": "invalid_grant", "when": "refresh_token"]]])
        #expect(try scene.home.run("refresh", "work").status == 2)
        notices = Self.notices(scene)
        #expect(notices.map { $0["EVENT"] } == ["died", "reauthorized", "died"], "\(notices)")
    }

    @Test(
        "a lifetime within VAULT_NOTIFY_LEAD: keepalive tells 'expiring' once; not before the lead",
        .enabled(if: FakeTime.installed, "needs libfaketime (Debian's faketime package)"))
    func expiring() throws {
        let scene = try Self.scene("google", providerFields: ["refresh_token_policy": ["lifetime": "7d"]])
        scene.home.extra["VAULT_NOTIFY_LEAD"] = "2d"
        #expect(try scene.add().status == 0)
        let created = try #require(try scene.shown()?["created_at"] as? Int)
        let early = try KeepaliveTests.run(scene, days: 1, "keepalive")
        #expect(early.status == 0, "\(early.stderr)")
        #expect(Self.notices(scene).isEmpty)
        for _ in 0..<2 {
            let near = try KeepaliveTests.run(scene, days: 6, "keepalive")
            #expect(near.status == 0, "\(near.stderr)")
        }
        let notices = Self.notices(scene)
        #expect(notices.count == 1, "\(notices)")
        let n = try #require(notices.first)
        #expect(n["EVENT"] == "expiring" && n["GRANT"] == "work" && n["PROVIDER"] == "google")
        #expect(n["REASON"] == "lifetime" && n["DEADLINE_EPOCH"] == String(created + 7 * Self.day))
        // Keep-alive sent nothing: a refresh does not move a lifetime.
        #expect(try scene.log("token", grantType: "refresh_token").isEmpty)
        scene.home.extra["VAULT_NOTIFY_LEAD"] = "soon"
        let bad = try scene.home.run("keepalive")
        #expect(bad.status == 64 && bad.stderr.contains("VAULT_NOTIFY_LEAD needs a duration"), "\(bad.stderr)")
    }

    /// A link a provider put in its error, as a notification server would
    /// render it.
    static let link = #"<a href="https://evil.example/login">Sign in to vault again</a> & more"#

    @Test("a provider's markup is never the reason, and reaches docs/agent.md's desktop notification as text")
    func markup() throws {
        // The reason is vault's words (here the error code); the provider's
        // text is the detail, escaped in the markup line.
        let scene = try Self.scene()
        #expect(try scene.add().status == 0)
        try scene.script(["token": [["error": "invalid_grant", "description": Self.link, "when": "refresh_token"]]])
        #expect(try scene.home.run("refresh", "work").status == 2)
        let n = try #require(Self.notices(scene).first)
        #expect(n["REASON"] == "invalid_grant" && n["DETAIL"]?.contains(Self.link) == true, "\(n)")
        #expect(n["MARKUP"]?.contains("&lt;a href=&quot;https://evil.example/login&quot;&gt;") == true, "\(n)")
        #expect(n["MARKUP"]?.contains("<") == false && n["MARKUP"]?.contains("&amp; more") == true, "\(n)")

        // The documented command, with a notify-send that records what it was given.
        let docs = try String(contentsOfFile: FixtureServer.root.path + "/docs/agent.md", encoding: .utf8)
        let line = try #require(
            docs.split(separator: "\n").first { $0.hasPrefix("export VAULT_NOTIFY_COMMAND='notify-send") })
        let command = String(line.drop { $0 != "'" }.dropFirst().dropLast())
        let desktop = try Self.scene()
        #expect(try desktop.add().status == 0)
        let bin = desktop.home.path + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        desktop.home.write(
            bin + "/notify-send", "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > \"$NOTIFY_ARGS\"\n")
        chmod(bin + "/notify-send", 0o700)
        desktop.home.extra["VAULT_NOTIFY_COMMAND"] = command
        desktop.home.extra["PATH"] = bin + ":/usr/bin:/bin"
        desktop.home.extra["NOTIFY_ARGS"] = desktop.home.path + "/args"
        try desktop.script(["token": [["error": "invalid_grant", "description": Self.link, "when": "refresh_token"]]])
        #expect(try desktop.home.run("refresh", "work").status == 2)
        let args = try String(contentsOfFile: desktop.home.path + "/args", encoding: .utf8).split(separator: "\n")
        #expect(args.count == 2, "\(args)")
        #expect(args.first == "vault: a grant died", "\(args)")
        let body = String(args.last ?? "")
        #expect(body.hasPrefix("work died: ada@example.com: invalid_grant"), "\(body)")
        #expect(body.contains("Sign in to vault again") && !body.contains("<"), "\(body)")
    }

    @Test(
        "a keep-alive refresh that fails: 'expiring' says so in vault's words, the provider's text apart and escaped",
        .enabled(if: FakeTime.installed, "needs libfaketime (Debian's faketime package)"))
    func keepaliveFailure() throws {
        let scene = try Self.scene()
        #expect(try scene.add().status == 0)
        try scene.script([
            "token": [
                ["error": "temporarily_unavailable", "description": Self.link, "status": 400, "when": "refresh_token"]
            ]
        ])
        let r = try KeepaliveTests.run(scene, days: 85, "keepalive")
        let n = try #require(Self.notices(scene).first, "\(r.stderr)")
        #expect(n["EVENT"] == "expiring" && n["REASON"] == "keep-alive could not refresh it", "\(n)")
        #expect(n["DETAIL"]?.contains("Sign in to vault again") == true, "\(n)")
        #expect(n["MARKUP"]?.contains("<") == false && n["MARKUP"]?.contains("&lt;a href=") == true, "\(n)")
    }

    @Test("an account full of shell syntax reaches the command verbatim and runs nothing")
    func metacharacters() throws {
        let scene = try Self.scene()
        let marker = scene.home.path + "/ran"
        let account = "a'$(touch \(marker)1)\"`touch \(marker)2`;touch \(marker)3 & $HOME\\n|x"
        let minted = try #require(
            try scene.post("/__mint", ["scope": "openid email offline_access"]) as? [String: Any])
        var imported = minted
        imported["provider"] = "microsoft"
        imported["account"] = account
        let json = String(decoding: try JSONSerialization.data(withJSONObject: imported), as: UTF8.self)
        let r = try scene.home.run("import", "work", stdin: json)
        #expect(r.status == 0, "\(r.stderr)")
        try scene.script(["token": [["error": "invalid_grant", "when": "refresh_token"]]])
        #expect(try scene.home.run("refresh", "work").status == 2)
        let n = try #require(Self.notices(scene).first)
        #expect(n["ACCOUNT"] == account, "\(n)")
        for i in 1...3 { #expect(!FileManager.default.fileExists(atPath: "\(marker)\(i)")) }
    }

    @Test(
        "a notify command that hangs is stopped, with what it started, and holds the command up a few seconds at most")
    func hangs() throws {
        let scene = try Self.scene()
        #expect(try scene.add().status == 0)
        let pidFile = scene.home.path + "/sleeper"
        scene.home.extra["VAULT_NOTIFY_COMMAND"] = "sleep 120 & echo $! > \(pidFile); wait"
        try scene.script(["token": [["error": "invalid_grant", "when": "refresh_token"]]])
        let started = Date()
        let r = try scene.home.run("refresh", "work")
        let took = Date().timeIntervalSince(started)
        #expect(r.status == 2, "\(r.stderr)")
        #expect(took < 9, "took \(took) s")
        #expect(r.stderr.contains("vault: warning: the notify command ran longer than 5s and was stopped"))
        let pid = try #require(
            Int32(
                try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(
                    in: .whitespacesAndNewlines)))
        var gone = false
        for _ in 0..<100 where !gone {
            gone = kill(pid, 0) != 0
            if !gone { usleep(20_000) }
        }
        #expect(gone, "the command's child \(pid) still runs")
        // The grant's next token is not held up either: it is dead, said at once.
        let t0 = Date()
        #expect(try scene.home.run("token", "work").status == 2)
        #expect(Date().timeIntervalSince(t0) < 3)
    }
}
