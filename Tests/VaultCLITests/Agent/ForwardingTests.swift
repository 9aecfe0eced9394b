import Foundation
import Glibc
import Testing
import VaultHTTP
import VaultKit
import VaultTestSupport

/// A laptop and a server: the laptop's agent holds a grant from the real
/// provider (expired, so the first token request refreshes it), and a
/// private OpenSSH server on 127.0.0.1 plays the machine reached by SSH,
/// where `vault` finds no vault and uses the socket `ssh -R` forwards.
final class ForwardingScene {
    let laptop = AgentHome()
    let provider: CountedProvider
    let sshd: FixtureServer
    /// The ssh client's configuration for `test-server`.
    let sshConfig: String
    /// The server side's own directory: its VAULT_HOME, config and the forwarded socket.
    let server: String

    init(confirmCommand: String? = nil) throws {
        provider = try CountedProvider()
        if let confirmCommand {
            laptop.home.extra["VAULT_CONFIRM_COMMAND"] = confirmCommand
            laptop.home.extra["VAULT_CONFIRM_TIMEOUT"] = "3s"
        }
        try laptop.home.initPassphraseVault("agent passphrase")
        try provider.importGrant("work", into: laptop.home)
        laptop.home.extra["VAULT_PASSPHRASE_FILE"] = nil
        _ = try #require(try laptop.waitForAgent())
        sshd = try FixtureServer(script: "sshd.py", arguments: ["serve", laptop.home.path + "/sshd"])
        let info = try #require(
            try JSONSerialization.jsonObject(with: Data(sshd.firstLine.utf8)) as? [String: Any])
        sshConfig = try #require(info["config"] as? String)
        server = laptop.home.path + "/server"
        mkdir(server, 0o700)
    }

    /// Where the forwarded socket appears on the server.
    var remoteSocket: String { server + "/agent.sock" }

    /// Starts `ssh -R REMOTE:SOCKET test-server vault ARGS` (or another
    /// `program`) with the server side's environment: no vault,
    /// VAULT_AGENT_SOCK naming the forwarded socket.
    func startOnServer(_ args: [String], forwarding socket: String, program: String = VaultProcess.binary) throws
        -> RunningProcess
    {
        let quoted = args.map { "'" + $0.replacing("'", with: "'\\''") + "'" }.joined(separator: " ")
        let command =
            "env -i PATH=/usr/bin:/bin HOME=\(server) VAULT_HOME=\(server)/vault XDG_CONFIG_HOME=\(server)/config "
            + "VAULT_AGENT_SOCK=\(remoteSocket) \(program) \(quoted)"
        return try VaultProcess.start(
            ["-F", sshConfig, "-R", "\(remoteSocket):\(socket)", "test-server", command],
            environment: ["PATH": "/usr/bin:/bin", "HOME": laptop.home.path], executable: "/usr/bin/ssh")
    }

    func onServer(_ args: String..., forwarding socket: String? = nil) throws -> ProcessResult {
        try startOnServer(args, forwarding: socket ?? laptop.paths.forwardSocket).wait(timeout: 60)
    }

    /// The laptop's audit log, as `vault log --json` prints it.
    func log() throws -> [[String: Any]] {
        let r = try laptop.home.run("log", "--json")
        try #require(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
    }

    /// The grant's refresh token, as the laptop holds it.
    func refreshToken() throws -> String {
        let r = try laptop.home.run("show", "work", "--json", "--reveal")
        try #require(r.status == 0, "\(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        return try #require(doc["refresh_token"] as? String)
    }
}

@Suite("Agent forwarding over SSH", .serialized)
struct ForwardingTests {
    /// A new private directory holding `confirm.sh`, a confirmation command
    /// made of `script`, in which `SCRATCH` stands for the directory.
    static func confirmScript(_ script: String) -> String {
        let scratch = NSTemporaryDirectory() + "vault-confirm-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(scratch, 0o700)
        let text = script.replacing("SCRATCH", with: scratch)
        _ = FileManager.default.createFile(atPath: scratch + "/confirm.sh", contents: Data(text.utf8))
        return scratch
    }

    static func hex(_ text: String) -> String { Data(text.utf8).map { String(format: "%02x", $0) }.joined() }

    @Test("a forwarded vault token refreshes on the laptop; only the access token crosses the socket")
    func forwardedToken() throws {
        let scene = try ForwardingScene()
        #expect(try scene.laptop.home.run("policy", "work", "--forwarded", "allow").status == 0)
        let spent = try scene.refreshToken()
        // The wire between ssh and the agent, recorded in memory.
        let recorder = try FixtureServer(
            script: "socket_recorder.py",
            arguments: [scene.laptop.home.path + "/recorded.sock", scene.laptop.paths.forwardSocket])
        let r = try scene.onServer("token", "work", forwarding: scene.laptop.home.path + "/recorded.sock")
        #expect(r.status == 0, "\(r.stderr)")
        let token = r.stdout.trimmingCharacters(in: .newlines)
        #expect(!token.isEmpty)
        #expect(try scene.provider.refreshes() == 1)
        let kept = try scene.refreshToken()
        #expect(kept != spent, "the provider rotates refresh tokens")
        #expect(try Int(recorder.ask("count " + Self.hex(token)))! >= 1, "the access token crossed")
        #expect(try recorder.ask("count " + Self.hex(spent)) == "0", "the spent refresh token never crossed")
        #expect(try recorder.ask("count " + Self.hex(kept)) == "0", "the new refresh token never crossed")
        #expect(try scene.provider.refreshes() == 1)

        // The other token commands work the same way there.
        let env = try scene.onServer("env", "work", "--format", "json")
        #expect(env.status == 0, "\(env.stderr)")
        #expect(env.stdout.contains(token))
        #expect(env.stdout.contains("WORK_ACCOUNT"))
        let sasl = try scene.onServer("xoauth2", "work")
        #expect(sasl.status == 0 && sasl.stdout.contains("auth=Bearer \(token)"), "\(sasl.stderr)")
        let header = try scene.onServer("header", "work")
        #expect(header.stdout == "Authorization: Bearer \(token)\n", "\(header.stderr)")
        // Nothing else: no listing, no secrets, no change, no vault made there.
        for args in [["list"], ["show", "work"], ["remove", "work"], ["sync"], ["refresh", "work"]] {
            let refused = try scene.startOnServer(args, forwarding: scene.laptop.paths.forwardSocket).wait(timeout: 60)
            #expect(refused.status != 0, "\(args) \(refused.stdout)")
        }
        #expect(try scene.onServer("token", "work", "--force-refresh").status == 64)
        // Asking for more validity than any token has does not make every request a refresh.
        let greedy = try scene.onServer("token", "work", "--min-valid", "9000000")
        #expect(greedy.status == 0 && greedy.stdout == r.stdout, "\(greedy.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scene.server + "/vault/vault.db"))
        #expect(try scene.refreshToken() == kept)
        #expect(try scene.provider.refreshes() == 1)

        // The audit log names every request and never a token. Forwarded
        // requests are counted per server: the recorder's at once, ssh's
        // first at once, and the three after it in a line the agent writes
        // within ten seconds.
        func forwarded() throws -> [[String: Any]] { try scene.log().filter { $0["origin"] as? String == "forwarded" } }
        #expect(try eventually(within: 20) { try forwarded().reduce(0) { $0 + (($1["repeated"] as? Int) ?? 1) } == 5 })
        let entries = try forwarded()
        #expect(entries.count == 3 && entries.last?["repeated"] as? Int == 3, "\(entries)")
        #expect(entries.dropFirst().allSatisfy { $0["destination"] as? String == "test-server" }, "\(entries)")
        var buffer = [CChar](repeating: 0, count: 256)
        gethostname(&buffer, 255)
        let host = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        for (i, e) in entries.enumerated() {
            #expect(e["grant"] as? String == "work")
            #expect(e["outcome"] as? String == "allowed")
            // The kernel names the process at this end: the recorder for
            // the first request, then ssh itself.
            let program = i == 0 ? "python3" : "/ssh"
            #expect((e["executable"] as? String)?.contains(program) == true, "\(e)")
            let claimed = try #require(e["claimed"] as? [String: Any])
            #expect(claimed["host"] as? String == host, "\(claimed)")
            #expect((claimed["command"] as? String)?.isEmpty == false, "\(claimed)")
        }
        for file in ["audit.log", "audit-forwarded.log", "audit-refused.log"] {
            let raw = (try? String(contentsOfFile: scene.laptop.home.path + "/vault/" + file, encoding: .utf8)) ?? ""
            #expect(!raw.contains(token) && !raw.contains(kept) && !raw.contains(spent), "\(file)")
        }
    }

    @Test("an ID token through a forwarded agent: from the laptop's vault under its policy, logged as one")
    func forwardedIDToken() throws {
        let scene = try ForwardingScene()
        let tokens = try ProviderGrants.importConfidential("kube", into: scene.laptop.home, idToken: true)
        let held = try #require(tokens["id_token"] as? String)
        // The default rule asks the person, and this agent has no way to.
        let asked = try scene.onServer("kube-credential", "kube", "--id-token")
        #expect(asked.status == 1 && asked.stdout.isEmpty, "\(asked.stderr)")
        #expect(asked.stderr.contains("was not confirmed"), "\(asked.stderr)")
        // The hint names the fix, where it is made, and nothing of that machine.
        #expect(
            asked.stderr.contains(
                "vault: hint: on the machine that holds the vault, run 'vault policy kube --forwarded allow', or start its agent with 'vault agent --confirm-command CMD' so that it can ask"
            ), "\(asked.stderr)")
        #expect(!asked.stderr.contains("says what its agent answers"), "\(asked.stderr)")
        #expect(!asked.stderr.contains(scene.laptop.home.path), "\(asked.stderr)")
        #expect(try scene.laptop.home.run("policy", "--forwarded", "allow").status == 0)
        let r = try scene.onServer("kube-credential", "kube", "--id-token")
        #expect(r.status == 0, "\(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let status = try #require(doc["status"] as? [String: String])
        #expect(status["token"] == held)
        #expect(status["expirationTimestamp"]?.hasSuffix("Z") == true, "\(status)")
        // A grant authorized without openid has none to give.
        let none = try scene.onServer("kube-credential", "work", "--id-token")
        #expect(none.status == 1 && none.stdout.isEmpty, "\(none.stderr)")
        #expect(none.stderr.contains("'work' holds no ID token"), "\(none.stderr)")
        #expect(try scene.provider.refreshes() == 0, "no refresh for a grant without an ID token")
        // The log says an ID token went, and never holds it.
        let entries = try scene.log().filter {
            $0["origin"] as? String == "forwarded" && $0["grant"] as? String == "kube"
        }
        #expect(
            entries.contains { $0["outcome"] as? String == "allowed" && $0["token"] as? String == "id" }, "\(entries)")
        #expect(entries.allSatisfy { $0["token"] as? String == "id" }, "\(entries)")
        for file in ["audit.log", "audit-forwarded.log", "audit-refused.log"] {
            let raw = (try? String(contentsOfFile: scene.laptop.home.path + "/vault/" + file, encoding: .utf8)) ?? ""
            #expect(!raw.contains(held), "\(file)")
        }
    }

    @Test("a forwarded peer may ask for tokens and nothing else, on either socket")
    func forwardedPeerIsLimited() throws {
        let scene = try ForwardingScene()
        #expect(try scene.laptop.home.run("policy", "--forwarded", "deny").status == 0)
        // The forwarding socket refuses every other operation, locally too.
        for op in ["hello", "lock", "sync", "conflicts", "open", "name-hash", "token"] {
            let answer = try scene.laptop.rawClient(op, socket: scene.laptop.paths.forwardSocket)
            #expect(answer == "answer 1 vault.denied", "\(op): \(answer)")
        }
        #expect(try scene.laptop.home.run("agent", "--status").status == 0, "the agent is still unlocked")
        // The agent's own socket, forwarded by mistake: the peer is ssh, so
        // the request is a forwarded one, and the policy denies it.
        let main = try scene.onServer("token", "work", forwarding: scene.laptop.paths.socket)
        #expect(main.status == 1)
        #expect(main.stderr.contains("the agent's policy refuses 'work' to forwarded requests"), "\(main.stderr)")
        let denied = try scene.onServer("token", "work")
        #expect(denied.status == 1 && denied.stdout.isEmpty, "\(denied.stderr)")
        // Which grants exist is not the other machine's to learn.
        let probe = try scene.onServer("token", "no-such-grant")
        #expect(probe.stderr.contains("refuses 'no-such-grant' to forwarded requests"), "\(probe.stderr)")
        #expect(try scene.provider.refreshes() == 0)
        // Refusals of a forwarded peer are counted: one line at once, the
        // rest in a line the agent writes within ten seconds.
        #expect(
            try eventually(within: 20) {
                try scene.log().reduce(0) { $0 + (($1["repeated"] as? Int) ?? 1) } == 3
            })
        #expect(Set(try scene.log().map { $0["outcome"] as? String }) == ["denied"])
        // Local requests are answered as before.
        #expect(try scene.laptop.home.run("token", "work").status == 0)
    }

    @Test("a local request the policy says to confirm, to an agent with no way to ask: the hint names --local allow")
    func localConfirmWithoutAWay() throws {
        let scene = try ForwardingScene()
        #expect(try scene.laptop.home.run("policy", "work", "--local", "confirm").status == 0)
        let r = try scene.laptop.home.run("token", "work")
        #expect(r.status == 1 && r.stdout.isEmpty, "\(r.stderr)")
        #expect(r.stderr.contains("was not confirmed: no way to ask for a confirmation"), "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: hint: run 'vault policy work --local allow', or start the agent with 'vault agent --confirm-command CMD' (or in a terminal) so that it can ask"
            ), "\(r.stderr)")
        // What the hint says works.
        #expect(try scene.laptop.home.run("policy", "work", "--local", "allow").status == 0)
        #expect(try scene.laptop.home.run("token", "work").status == 0)
    }

    @Test(
        "VAULT_AGENT_SOCK naming no socket, or one whose ssh session ended: how to forward it, or to unset the variable"
    )
    func noForwardedSocket() throws {
        let server = Home()
        let socket = server.path + "/agent.sock"
        server.extra["VAULT_AGENT_SOCK"] = socket
        let absent = try server.run("token", "work")
        #expect(absent.status == 1 && absent.stdout.isEmpty, "\(absent.stderr)")
        #expect(absent.stderr.contains("vault: error: no forwarded agent socket at \(socket)\n"), "\(absent.stderr)")
        #expect(
            absent.stderr.contains(
                "vault: hint: forward it from the machine that holds the vault: 'ssh -R \(socket):$XDG_RUNTIME_DIR/vault/forward-ID.sock HOST', or 'RemoteForward \(socket) ${XDG_RUNTIME_DIR}/vault/forward-ID.sock' in its ~/.ssh/config"
            ), "\(absent.stderr)")
        #expect(
            absent.stderr.contains("vault: hint: to use no forwarded agent, unset VAULT_AGENT_SOCK\n"),
            "\(absent.stderr)")

        // A socket left behind by an ssh session that ended: bound, not listening.
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in socket.utf8.enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        close(fd)
        try #require(bound == 0)
        let stale = try server.run("token", "work")
        #expect(stale.status == 1 && stale.stdout.isEmpty, "\(stale.stderr)")
        #expect(stale.stderr.contains("vault: error: no agent answers at \(socket)"), "\(stale.stderr)")
        #expect(
            stale.stderr.contains(
                "vault: hint: the ssh session that forwarded it has ended: remove \(socket) (unless this server's sshd has StreamLocalBindUnlink yes) and forward it from the machine that holds the vault: 'ssh -R"
            ), "\(stale.stderr)")
        #expect(stale.stderr.contains("unset VAULT_AGENT_SOCK"), "\(stale.stderr)")
    }

    @Test("the laptop's agent locked (stopped): a forwarded request says so, exit 77, with where to unlock it")
    func laptopLocked() throws {
        let scene = try ForwardingScene()
        #expect(try scene.laptop.home.run("policy", "--forwarded", "allow").status == 0)
        // Positive control: the same request works while the agent runs.
        let before = try scene.onServer("token", "work")
        #expect(before.status == 0, "\(before.stderr)")
        #expect(try scene.laptop.home.run("lock").status == 0)
        for args in [["token", "work"], ["kube-credential", "work"]] {
            let r = try scene.startOnServer(args, forwarding: scene.laptop.paths.forwardSocket).wait(timeout: 60)
            #expect(r.status == 77 && r.stdout.isEmpty, "\(args): \(r.stderr)")
            #expect(
                r.stderr.contains(
                    "vault: error: the agent on the machine this session came from is locked or not running: the forwarded socket \(scene.remoteSocket) reached no agent"
                ), "\(args): \(r.stderr)")
            #expect(
                r.stderr.contains(
                    "vault: hint: on the machine this session came from, unlock the vault for a while with 'vault agent'"
                ), "\(args): \(r.stderr)")
            #expect(!r.stderr.contains("closed the connection"), "\(args): \(r.stderr)")
        }
    }

    @Test("confirm: the person says yes, says no, or does not answer in time")
    func confirmation() throws {
        // A confirmation command: notes the question, then answers as the test says.
        let scratch = Self.confirmScript(
            """
            printf '%s|%s|%s\\n' "$VAULT_CONFIRM_GRANT" "$VAULT_CONFIRM_ORIGIN" "$VAULT_CONFIRM_SUMMARY" >> SCRATCH/asked
            [ -e SCRATCH/yes ]
            """)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let scene = try ForwardingScene(confirmCommand: "sh \(scratch)/confirm.sh")
        _ = FileManager.default.createFile(atPath: scratch + "/yes", contents: Data())
        let yes = try scene.onServer("token", "work")
        #expect(yes.status == 0, "\(yes.stderr)")
        let asked = try String(contentsOfFile: scratch + "/asked", encoding: .utf8)
        #expect(asked.hasPrefix("work|forwarded|token of 'work' for a forwarded request from pid "), "\(asked)")
        // Which server asks, as the laptop's own ssh process says.
        #expect(asked.contains(", through ssh to test-server"), "\(asked)")
        #expect(asked.contains("the other machine says: host "))
        try FileManager.default.removeItem(atPath: scratch + "/yes")
        let no = try scene.onServer("token", "work")
        #expect(no.status == 1 && no.stdout.isEmpty)
        #expect(no.stderr.contains("was not confirmed: the person refused"), "\(no.stderr)")
        // Asked again at once: refused without asking the person (two
        // questions a minute from other machines at most).
        _ = FileManager.default.createFile(atPath: scratch + "/yes", contents: Data())
        let again = try scene.onServer("token", "work")
        #expect(again.status == 1 && again.stdout.isEmpty)
        #expect(
            again.stderr.contains("was not confirmed: too many questions from other machines in the last minute"),
            "\(again.stderr)")
        // This agent can ask: the hint is to wait, or to allow the grant.
        #expect(
            again.stderr.contains(
                "vault: hint: wait a minute and try again, or, on the machine that holds the vault, run 'vault policy work --forwarded allow' so that it is not asked"
            ), "\(again.stderr)")
        #expect(!again.stderr.contains("--confirm-command"), "\(again.stderr)")
        let questions = try String(contentsOfFile: scratch + "/asked", encoding: .utf8).split(separator: "\n")
        #expect(questions.count == 2, "\(questions)")
        // Local requests need no confirmation by default.
        #expect(try scene.laptop.home.run("token", "work").status == 0)
        // Tokens handed out and refusals are kept apart; within a second,
        // the log cannot tell which came first.
        let entries = try scene.log()
        let outcomes = entries.compactMap { $0["outcome"] as? String }
        #expect(outcomes.sorted() == ["allowed", "confirmed", "not-asked", "not-confirmed"], "\(outcomes)")
        let confirmed = entries.first { $0["outcome"] as? String == "confirmed" }
        #expect(confirmed?["destination"] as? String == "test-server", "\(confirmed ?? [:])")
    }

    @Test("confirm: no answer in time is a no, and a yes that comes after the agent locked hands nothing out")
    func confirmationUnanswered() throws {
        let scratch = Self.confirmScript("sleep 30\n")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let scene = try ForwardingScene(confirmCommand: "sh \(scratch)/confirm.sh")
        _ = try scene.provider.importGrant("mail", into: scene.laptop.home)
        let started = Date()
        let late = try scene.onServer("token", "work")
        #expect(late.status == 1)
        #expect(late.stderr.contains("no answer in time"), "\(late.stderr)")
        #expect(Date().timeIntervalSince(started) < 20)

        // Locked while the person is asked (about another grant: this one
        // pauses after the unanswered question).
        _ = FileManager.default.createFile(atPath: scratch + "/confirm.sh", contents: Data("sleep 2\nexit 0\n".utf8))
        let pending = try scene.startOnServer(["token", "mail"], forwarding: scene.laptop.paths.forwardSocket)
        usleep(1_000_000)
        #expect(try scene.laptop.home.run("lock").status == 0)
        let afterLock = pending.wait(timeout: 60)
        #expect(afterLock.status != 0 && afterLock.stdout.isEmpty, "\(afterLock.stdout) \(afterLock.stderr)")
        let entries = try scene.log()
        let outcomes = entries.map { $0["outcome"] as? String }
        #expect(outcomes.first == "not-confirmed", "\(outcomes)")
        #expect(!outcomes.contains("confirmed") && !outcomes.contains("allowed"), "\(outcomes)")
        // The line says why it was not confirmed.
        #expect(entries.first?["reason"] as? String == "no answer in time", "\(entries)")
    }

    @Test("a forwarded peer cannot wear the person down, nor flush the log of what it took")
    func promptBombing() throws {
        // The person says no to everything, and each question is counted.
        let scratch = Self.confirmScript("printf '%s\\n' \"$VAULT_CONFIRM_GRANT\" >> SCRATCH/asked\nexit 1\n")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let scene = try ForwardingScene(confirmCommand: "sh \(scratch)/confirm.sh")
        // What the other machine took before it started asking.
        #expect(try scene.laptop.home.run("policy", "work", "--forwarded", "allow").status == 0)
        #expect(try scene.onServer("token", "work").status == 0)
        #expect(try scene.laptop.home.run("policy", "work", "--forwarded", "confirm").status == 0)

        // 400 requests for five grants, each on the connection before it
        // until the agent closes it, from the forwarding socket.
        let flood = try scene.laptop.rawClient("flood 400", socket: scene.laptop.paths.forwardSocket)
        let lines = flood.split(separator: "\n").map { $0.split(separator: " ") }
        let closed = try #require(lines.first.flatMap { $0.count == 4 ? Int($0[3]) : nil }, "\(flood)")
        let denied = lines.first { $0.first == "vault.denied" }.flatMap { Int($0[1]) } ?? 0
        #expect(denied + closed == 400 && !lines.contains { $0.first == "ok" }, "\(flood)")
        #expect(closed > 0, "a connection refused again and again is closed: \(flood)")
        // Two questions a minute reach the person from other machines.
        let asked = try String(contentsOfFile: scratch + "/asked", encoding: .utf8).split(separator: "\n")
        #expect(asked.count == 2, "\(asked)")

        // Counts are written when the agent stops, at the latest.
        let pid = try #require(try scene.laptop.agentPID())
        kill(pid, SIGTERM)
        for _ in 0..<100 where kill(pid, 0) == 0 { usleep(50_000) }
        scene.laptop.home.extra["VAULT_AGENT"] = "off"
        let log = try scene.log()
        #expect(log.first?["outcome"] as? String == "allowed", "\(log.first ?? [:])")
        let notAsked = log.filter { $0["outcome"] as? String == "not-asked" }
        // A counted line stands for `repeated` refusals, another for one.
        let refusedWithoutAsking = notAsked.reduce(0) { $0 + (($1["repeated"] as? Int) ?? 1) }
        #expect(refusedWithoutAsking == denied - 2, "\(notAsked)")
        #expect(log.count < 40, "refusals are counted, not written one by one: \(log.count) lines")
    }

    @Test("a forwarded connection that drops mid-refresh loses nothing and spends nothing twice")
    func droppedConnection() throws {
        let scene = try ForwardingScene()
        #expect(try scene.laptop.home.run("policy", "work", "--forwarded", "allow").status == 0)
        try scene.provider.control("/__hold")
        let ssh = try scene.startOnServer(["token", "work"], forwarding: scene.laptop.paths.forwardSocket)
        #expect(try eventually { try scene.provider.refreshes() == 1 }, "the refresh reached the provider")
        kill(ssh.pid, SIGKILL)
        _ = ssh.wait(timeout: 10)
        try scene.provider.control("/__release")
        // The laptop stored what the provider answered: the next request
        // gets that token without a second refresh.
        #expect(try eventually { try scene.log().contains { $0["outcome"] as? String == "allowed" } })
        let local = try scene.laptop.home.run("token", "work")
        #expect(local.status == 0, "\(local.stderr)")
        let again = try scene.onServer("token", "work")
        #expect(again.status == 0 && again.stdout == local.stdout, "\(again.stderr)")
        #expect(try scene.provider.refreshes() == 1)
        #expect(try scene.laptop.home.run("check", "work").status == 0)
    }

    /// A DPoP-bound grant is used where its key is: the laptop's agent
    /// signs each proof (operation 13), for a command on the laptop that
    /// has no passphrase and for one on the server through the forwarded
    /// socket. Only the access token and proofs cross; the resource takes
    /// them; jwcrypto checks every proof the provider saw.
    @Test("a DPoP-bound grant: the laptop's agent signs proofs for the laptop and for the server")
    func forwardedDPoP() throws {
        // No passphrase here: the agent holds the vault.
        let (scene, dpop) = try ForwardingScene.withBoundDPoPGrant()
        let home = scene.laptop.home
        let url = dpop.base + "/userinfo"

        // On the laptop, signed by the agent: no passphrase is asked for.
        let first = try home.run("header", "bound", "--url", url)
        #expect(first.status == 0, "\(first.stderr)")
        let nonce = try #require(try CurlAnswer.get(url, headers: first.stdout).dpopNonce)
        let local = try home.run("header", "bound", "--url", url, "--dpop-nonce", nonce)
        let acceptedHere = try CurlAnswer.get(url, headers: local.stdout).status == 200
        #expect(acceptedHere)

        // On the server, through the forwarded socket, recorded on the way.
        let recorder = try FixtureServer(
            script: "socket_recorder.py",
            arguments: [home.path + "/recorded.sock", scene.laptop.paths.forwardSocket])
        let remote = try scene.onServer(
            "header", "bound", "--url", url, "--dpop-nonce", nonce, forwarding: home.path + "/recorded.sock")
        #expect(remote.status == 0, "\(remote.stderr)")
        let acceptedThere = try CurlAnswer.get(url, headers: remote.stdout).status == 200
        #expect(acceptedThere)
        let r = try home.run("show", "bound", "--json", "--reveal")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let refresh = try #require(doc["refresh_token"] as? String)
        let access = try #require(doc["access_token"] as? String)
        let crossed = try Int(recorder.ask("count " + Self.hex(access))) ?? 0
        #expect(crossed >= 1, "the access token crossed, with its proof")
        #expect(try recorder.ask("count " + Self.hex(refresh)) == "0", "the refresh token never crossed")
        // The bare token is still not handed to the server.
        let bare = try scene.onServer("token", "bound")
        #expect(bare.status != 0 && bare.stdout.isEmpty)
        #expect(bare.stderr.contains("'vault header bound --url URL'"), "\(bare.stderr)")

        let seen = try CurlTransport().send(HTTPRequest(method: "GET", url: dpop.base + "/__proofs"))
        let proofs = try #require(
            try JSONSerialization.jsonObject(with: seen.body.withUnsafeBytes { Data($0) }) as? [[String: Any]])
        let failures = proofs.filter { ($0["ok"] as? Bool) != true }.compactMap { $0["why"] as? String }
        #expect(Set(failures) == ["use_dpop_nonce"], "\(failures)")
        let resource = proofs.filter { $0["endpoint"] as? String == "userinfo" && ($0["ok"] as? Bool) == true }
        // add's account lookup, the laptop's second header and the server's.
        #expect(resource.count == 3)
        let forwarded = try scene.log().filter {
            $0["grant"] as? String == "bound" && $0["origin"] as? String == "forwarded"
        }
        // The proof, naming its request; then the bare token, refused.
        #expect(forwarded.map { $0["request"] as? String } == ["GET " + url, nil], "\(forwarded)")
        #expect(forwarded.map { $0["outcome"] as? String } == ["allowed", "failed"], "\(forwarded)")
    }
}
