import Foundation
import Glibc
import Testing
import VaultKit
import VaultTestSupport

/// A home whose commands can reach an agent: a private XDG_RUNTIME_DIR.
/// Whatever agent it started is killed when the test ends.
final class AgentHome {
    let home = Home()
    var runtime: String { home.path + "/run" }

    init() {
        mkdir(runtime, 0o700)
        home.extra["XDG_RUNTIME_DIR"] = runtime
    }

    deinit {
        if let pid = try? agentPID() { kill(pid, SIGKILL) }
    }

    var paths: AgentPaths {
        AgentPaths.resolve(
            environment: ["XDG_RUNTIME_DIR": runtime],
            location: VaultLocation(directory: home.path + "/vault", configDirectory: home.path + "/config"))!
    }

    /// The pid `vault agent --status` reports, or nil when none runs.
    func agentPID() throws -> pid_t? {
        let r = try home.run("agent", "--status")
        guard let range = r.stderr.range(of: #"pid (\d+)"#, options: .regularExpression) else { return nil }
        return pid_t(r.stderr[range].dropFirst(4))
    }

    /// A passphrase vault with one grant; the import starts the agent.
    /// The passphrase is then withheld, so only the agent can open it.
    func startWithGrant() throws -> pid_t {
        try home.initPassphraseVault("agent passphrase")
        let r = try home.run("import", "g", stdin: Home.tokenJSON("token-one"))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("the agent keeps this vault unlocked"), "\(r.stderr)")
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        return try #require(try waitForAgent())
    }

    func waitForAgent() throws -> pid_t? {
        for _ in 0..<100 {
            if let pid = try agentPID() { return pid }
            usleep(50_000)
        }
        return nil
    }

    static func gone(_ pid: pid_t, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if kill(pid, 0) != 0 && errno == ESRCH { return true }
            // A zombie counts as gone: it holds no keys.
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                stat.split(separator: " ").dropFirst(2).first == "Z"
            {
                return true
            }
            usleep(50_000)
        }
        return false
    }

    /// Runs the raw protocol client, as another user when `uid` is given.
    func rawClient(_ request: String, uid: Int? = nil, socket: String? = nil) throws -> String {
        let script = try String(
            contentsOfFile: FixtureServer.root.path + "/Tools/testservers/agent_client.py", encoding: .utf8)
        var words = ["/usr/bin/python3", "-", socket ?? paths.socket] + request.split(separator: " ").map(String.init)
        if let uid { words = ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + words }
        let r = try VaultProcess.start(
            Array(words.dropFirst()), environment: ["PATH": "/usr/bin:/bin"], stdin: script, executable: words[0]
        ).wait(timeout: 30)
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) + r.stderr
    }
}

@Suite("the unlock agent")
struct AgentTests {
    @Test("a passphrase unlock starts the agent; every command then works without the passphrase")
    func startsOnDemandAndServes() throws {
        let a = AgentHome()
        let pid = try a.startWithGrant()
        let home = a.home
        #expect(try home.run("token", "g").stdout == "token-one\n")
        #expect(try home.run("token", "g", "--json").stdout.contains(#""access_token" : "token-one""#))
        #expect(try home.run("import", "h", stdin: Home.tokenJSON("token-two")).status == 0)
        #expect(try home.run("rename", "h", "h2").status == 0)
        #expect(try home.run("show", "h2", "--reveal").stdout.contains("token-two"))
        #expect(try home.listedNames().names == ["g", "h2"])
        #expect(try home.run("remove", "h2").status == 0)
        #expect(try home.run("env", "g").stdout.contains("token-one"))
        // Keyslot changes need the master key, which the agent never hands out.
        let passwd = try home.run("passwd", "--new-passphrase-file", home.path + "/passphrase")
        #expect(passwd.status == 77, "\(passwd.stderr)")

        // The agent got neither the passphrase nor its file name.
        let environ = try String(contentsOfFile: "/proc/\(pid)/environ", encoding: .isoLatin1)
        #expect(!environ.contains("VAULT_PASSPHRASE"))
        let argv = try String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .isoLatin1)
        #expect(argv.split(separator: "\0").prefix(3) == ["vault", "agent", "--key-on-stdin"])

        let status = try home.run("agent", "--status")
        #expect(status.status == 0 && status.stderr.contains("holds this vault unlocked"), "\(status.stderr)")
        #expect(try home.run("lock").stderr == "vault: locked\n")
        #expect(AgentHome.gone(pid, within: 5))
        #expect(!FileManager.default.fileExists(atPath: a.paths.socket))
        let after = try home.run("token", "g")
        #expect(after.status == 77 && after.stderr.contains("the vault is locked"), "\(after.stderr)")
        #expect(try home.run("agent", "--status").status == 77)
    }

    @Test("options given to 'vault agent' while one holds the vault are not applied, and it says so")
    func optionsNotApplied() throws {
        let a = AgentHome()
        let pid = try a.startWithGrant()
        let home = a.home
        let plain = try home.run("agent")
        #expect(
            plain.status == 0 && plain.stderr == "vault: the agent (pid \(pid)) already holds this vault unlocked\n")
        let r = try home.run("agent", "--keepalive-every", "1m", "--idle-timeout", "1h")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(
            r.stderr == "vault: the agent (pid \(pid)) already holds this vault unlocked\n"
                + "vault: warning: --idle-timeout, --keepalive-every not applied: the running agent (pid \(pid)) "
                + "keeps the settings it was started with; to apply them, run 'vault lock', then this command again\n")
        _ = try home.run("lock")
    }

    @Test("a local policy says it binds only the agent; a deny refusal does not suggest asking")
    func localPolicy() throws {
        let a = AgentHome()
        _ = try a.startWithGrant()
        let home = a.home
        let set = try home.run("policy", "g", "--local", "deny")
        #expect(set.status == 0)
        #expect(
            set.stderr == "vault: 'g': local deny, forwarded confirm\n"
                + "vault: local rules bind the agent only: a command that opens the vault itself (with VAULT_KEYFILE, "
                + "a passphrase file, command or prompt) hands out the token without asking\n")
        let refused = try home.run("token", "g")
        #expect(refused.status == 1 && refused.stdout.isEmpty, "\(refused.stderr)")
        #expect(refused.stderr.contains("the agent's policy refuses 'g' to local requests"), "\(refused.stderr)")
        #expect(refused.stderr.contains("vault: hint: 'vault policy NAME'"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("confirm-command"), "\(refused.stderr)")
        let allow = try home.run("policy", "g", "--local", "allow")
        #expect(allow.stderr == "vault: 'g': local allow, forwarded confirm\n")
        _ = try home.run("lock")
    }

    @Test("a token from the agent loads neither libsodium nor SQLite; opening the vault loads both")
    func tokenLoadsNoCrypto() throws {
        let a = AgentHome()
        _ = try a.startWithGrant()
        // glibc's loader names every library it maps, dlopen included.
        func loaded(_ home: Home, _ args: String...) throws -> String {
            let r = try VaultProcess.run(args, environment: home.environment.merging(["LD_DEBUG": "files"]) { $1 })
            #expect(r.status == 0)
            return r.stderr
        }
        let token = try loaded(a.home, "token", "g")
        #expect(token.contains("libc.so"), "\(token)")
        #expect(!token.contains("libsodium") && !token.contains("libsqlite3"), "\(token)")
        // Positive control: without an agent the same command opens the
        // vault file and decrypts the record.
        let alone = Home()
        try alone.initKeyfileVault()
        #expect(try alone.run("import", "g", stdin: Home.tokenJSON("token-one")).status == 0)
        let direct = try loaded(alone, "token", "g")
        #expect(direct.contains("libsodium.so") && direct.contains("libsqlite3.so"), "\(direct)")
    }

    @Test("clients that connect and say nothing never hold up a token, and the threads they took end with them")
    func silentClients() throws {
        let a = AgentHome()
        let pid = try a.startWithGrant()
        func threads() -> Int {
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? -1
        }
        #expect(try a.home.run("token", "g").stdout == "token-one\n")
        let idle = threads()
        // More silent connections than the agent keeps threads waiting:
        // each takes a serving thread, and another starts in its place.
        var silent: [Int32] = []
        defer { for fd in silent { close(fd) } }
        for _ in 0..<6 {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { raw in
                for (i, byte) in a.paths.socket.utf8.enumerated() { raw[i] = byte }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            #expect(connected == 0)
            silent.append(fd)
        }
        let start = Date()
        for _ in 0..<5 { #expect(try a.home.run("token", "g").stdout == "token-one\n") }
        #expect(Date().timeIntervalSince(start) < 5)
        let busy = threads()
        #expect(busy >= idle + 6, "\(idle) threads idle, \(busy) with six silent clients")
        // Once they hang up, the threads they held end (at most two stay
        // waiting), within the agent's one-second checks.
        for fd in silent { close(fd) }
        silent = []
        let deadline = Date().addingTimeInterval(10)
        while threads() > idle, Date() < deadline { usleep(100_000) }
        #expect(threads() <= idle, "\(idle) threads idle, \(threads()) after the silent clients left")
        #expect(try a.home.run("token", "g").stdout == "token-one\n")
    }

    @Test("a vault replaced at the same path is not served by the old vault's agent")
    func replacedVault() throws {
        let a = AgentHome()
        let pid = try a.startWithGrant()
        try FileManager.default.removeItem(atPath: a.home.path + "/vault")
        try a.home.initKeyfileVault()
        try a.home.run("import", "g", stdin: Home.tokenJSON("new-vault-token"))
        #expect(try a.home.run("token", "g").stdout == "new-vault-token\n")
        #expect(AgentHome.gone(pid, within: 5), "the old agent locked and exited")
    }

    @Test("the agent locks after its idle timeout and after its hard timeout")
    func timeouts() throws {
        let idle = AgentHome()
        idle.home.extra["VAULT_AGENT_IDLE_TIMEOUT"] = "2s"
        let idlePID = try idle.startWithGrant()
        #expect(try idle.home.run("token", "g").status == 0)
        #expect(AgentHome.gone(idlePID, within: 8))
        #expect(try idle.home.run("token", "g").status == 77)

        let hard = AgentHome()
        hard.home.extra["VAULT_AGENT_TIMEOUT"] = "3"
        let hardPID = try hard.startWithGrant()
        // Constant use does not extend the hard limit.
        let deadline = Date().addingTimeInterval(10)
        var lastOK = Date()
        while Date() < deadline, try hard.home.run("token", "g").status == 0 {
            lastOK = Date()
            usleep(200_000)
        }
        #expect(AgentHome.gone(hardPID, within: 3))
        #expect(lastOK < deadline, "still unlocked after 10 s of a 3 s limit")
    }

    @Test("SIGHUP and SIGTERM lock the agent; a foreground agent stays up locked and takes the key back")
    func signalsAndForeground() throws {
        let a = AgentHome()
        let pid = try a.startWithGrant()
        kill(pid, SIGHUP)
        #expect(AgentHome.gone(pid, within: 5))
        #expect(try a.home.run("token", "g").status == 77)

        // Foreground, with no way to ask for a passphrase: starts locked.
        let agent = try a.home.start("agent", "--foreground", "--idle-timeout", "1h")
        let fgPID = try #require(try a.waitForAgent())
        #expect(fgPID == agent.pid)
        #expect(try a.home.run("token", "g").status == 77)
        // A command that unlocks hands the key over.
        var withPassphrase = a.home.environment
        withPassphrase["VAULT_PASSPHRASE_FILE"] = a.home.path + "/passphrase"
        #expect(try VaultProcess.run(["list"], environment: withPassphrase).status == 0)
        #expect(try a.home.run("token", "g").stdout == "token-one\n")
        #expect(try a.home.run("lock").status == 0)
        #expect(!AgentHome.gone(fgPID, within: 1))
        let locked = try a.home.run("agent", "--status")
        #expect(locked.status == 77 && locked.stderr.contains("is locked"), "\(locked.stderr)")
        #expect(try a.home.run("token", "g").status == 77)
        // SIGHUP only locks a foreground agent; SIGTERM ends it.
        #expect(try VaultProcess.run(["list"], environment: withPassphrase).status == 0)
        kill(fgPID, SIGHUP)
        #expect(!AgentHome.gone(fgPID, within: 1.5))
        #expect(try a.home.run("token", "g").status == 77)
        agent.signal(SIGTERM)
        let log = agent.wait(timeout: 10)
        #expect(log.status == 0, "\(log.stderr)")
        for line in ["waiting locked", "unlocked", "locked: lock requested", "locked: SIGHUP", "stopped"] {
            #expect(log.stderr.contains("agent: \(line)"), "\(log.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: a.paths.socket))
    }

    @Test("the agent refuses another uid, oversized and malformed messages, and keeps serving")
    func refusesBadClients() throws {
        let a = AgentHome()
        _ = try a.startWithGrant()
        // Positive control: the same client as our uid gets an answer.
        #expect(try a.rawClient("hello") == "answer 0")
        #expect(try a.rawClient("oversized") == "closed")
        #expect(try a.rawClient("garbage") == "answer 1 vault.unsupported")
        // Open the path to everyone, so only SO_PEERCRED stands in the way.
        for dir in [a.home.path, a.runtime, a.paths.directory] { chmod(dir, 0o755) }
        chmod(a.paths.socket, 0o666)
        #expect(try a.rawClient("hello", uid: 65534) == "closed")
        // Our own client will not use an agent directory open to others.
        let open = try a.home.run("token", "g")
        #expect(open.status == 77 && open.stderr.contains("is open to other users"), "\(open.stderr)")
        chmod(a.paths.directory, 0o700)
        #expect(try a.home.run("token", "g").stdout == "token-one\n")
    }

    @Test("a client refuses a symlinked socket or agent directory and unlocks by itself")
    func refusesSymlinks() throws {
        let a = AgentHome()
        _ = try a.startWithGrant()

        let b = AgentHome()
        try b.home.initPassphraseVault("other passphrase")
        b.home.extra["VAULT_PASSPHRASE_FILE"] = nil
        // A link named like b's socket, to a's agent.
        try FileManager.default.createDirectory(atPath: b.paths.directory, withIntermediateDirectories: false)
        chmod(b.paths.directory, 0o700)
        symlink(a.paths.socket, b.paths.socket)
        let linked = try b.home.run("token", "g")
        #expect(linked.status == 77, "\(linked.stderr)")
        #expect(linked.stderr.contains("not a socket (symbolic links are refused)"), "\(linked.stderr)")

        // The whole directory a link to a's.
        unlink(b.paths.socket)
        rmdir(b.paths.directory)
        symlink(a.paths.directory, b.paths.directory)
        let dir = try b.home.run("list")
        #expect(dir.status == 77, "\(dir.stderr)")
        #expect(dir.stderr.contains("not a directory (symbolic links are refused)"), "\(dir.stderr)")
    }

    @Test("the agent and the CLI are not dumpable (checked as an unprivileged user)")
    func notDumpable() throws {
        let dir = TemporaryDirectory()
        let home = dir.path + "/home"
        let run = dir.path + "/run"
        let binary = dir.path + "/vault"
        try FileManager.default.copyItem(atPath: VaultProcess.binary, toPath: binary)
        for d in [home, run] { mkdir(d, 0o700) }
        _ = FileManager.default.createFile(
            atPath: home + "/pw", contents: Data("pw\n".utf8), attributes: [.posixPermissions: 0o600])
        for p in [dir.path, home, run, home + "/pw", binary] { chown(p, 65534, 65534) }
        chmod(dir.path, 0o755)
        var env = VaultProcess.environment(home: home)
        env["XDG_RUNTIME_DIR"] = run
        env["VAULT_PASSPHRASE_FILE"] = home + "/pw"
        func asNobody(_ args: [String], _ env: [String: String]) throws -> RunningProcess {
            try VaultProcess.start(
                ["--reuid=65534", "--regid=65534", "--clear-groups", binary] + args, environment: env,
                executable: "/usr/bin/setpriv")
        }
        func owner(_ pid: pid_t) -> uid_t? {
            var st = stat()
            return stat("/proc/\(pid)/status", &st) == 0 ? st.st_uid : nil
        }
        #expect(try asNobody(["init", "--kdf-memory", "64", "--kdf-passes", "2"], env).wait().status == 0)
        let imported = try VaultProcess.start(
            ["--reuid=65534", "--regid=65534", "--clear-groups", binary, "import", "g"], environment: env,
            stdin: Home.tokenJSON("t"), executable: "/usr/bin/setpriv"
        ).wait()
        #expect(imported.status == 0, "\(imported.stderr)")

        // Positive control: an ordinary process of that user owns its /proc files.
        let control = try VaultProcess.start(
            ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sleep", "2"], environment: env,
            executable: "/usr/bin/setpriv")
        usleep(300_000)
        #expect(owner(control.pid) == 65534)
        control.signal(SIGKILL)
        _ = control.wait()

        // The CLI, while its passphrase command runs.
        var slow = env
        slow["VAULT_PASSPHRASE_FILE"] = nil
        slow["VAULT_AGENT"] = "off"
        slow["VAULT_PASSPHRASE_COMMAND"] = "sleep 2; cat \(home)/pw"
        let cli = try asNobody(["show", "g"], slow)
        usleep(500_000)
        #expect(owner(cli.pid) == 0, "a dumpable process's /proc files belong to its user")
        #expect(cli.wait().status == 0)

        // The agent the import started.
        let status = try asNobody(["agent", "--status"], env).wait()
        let range = try #require(
            status.stderr.range(of: #"pid (\d+)"#, options: .regularExpression), "\(status.stderr)")
        let agentPID = try #require(pid_t(status.stderr[range].dropFirst(4)))
        defer { kill(agentPID, SIGKILL) }
        #expect(owner(agentPID) == 0)
        let procStatus = try String(contentsOfFile: "/proc/\(agentPID)/status", encoding: .utf8)
        #expect(procStatus.contains("Uid:\t65534"), "the agent runs as the unprivileged user")
    }
}
