internal import CPlatform
internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultSync

/// `vault agent`.
struct AgentCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "agent",
        abstract: "Keep the vault unlocked for a while in a per-user agent.",
        usage:
            "agent [{foreground}] [{idle-timeout}] [{timeout}] [{refresh-before}] [{confirm-command}] [{confirm-timeout}] "
            + "[{keepalive-lead}] [{keepalive-every}] [{notify-command}] [{status}]",
        discussion: """
            The agent holds the vault's keys in locked, guarded memory and answers the
            commands of the same user over a Unix socket in $XDG_RUNTIME_DIR/vault; it never
            hands out the master key. Every command that unlocks with a passphrase starts one
            (VAULT_AGENT=off disables it). It locks after the idle timeout, after the hard
            timeout, on 'vault lock', SIGHUP or SIGTERM. While unlocked it refreshes the grants
            used since unlocking before they expire, so 'vault token' rarely waits for the
            network, and it refreshes the grants whose refresh token would die of inactivity
            within the lead time (--keepalive-lead; see 'vault keepalive'), waking by their
            deadlines and at least every --keepalive-every. With --foreground it logs to
            stderr, and when no passphrase can be asked it starts locked and takes the key from
            the first command that unlocks.
            --status exits 0 when an agent holds the vault unlocked, 77 otherwise.
            Timeouts also come from VAULT_AGENT_IDLE_TIMEOUT and VAULT_AGENT_TIMEOUT, the
            keep-alive settings from VAULT_KEEPALIVE_LEAD and VAULT_KEEPALIVE_EVERY.
            Forwarding: its second socket, forward-ID.sock, can be forwarded to another machine
            with ssh -R; there 'vault token', env, exec, header, xoauth2 and git-credential get
            access tokens from it (VAULT_AGENT_SOCK names the forwarded socket), and nothing
            else: no refresh token, no listing, no change. Forwarded requests are confirmed
            (through --confirm-command or VAULT_CONFIRM_COMMAND, or on the terminal of a
            foreground agent) unless 'vault policy' says otherwise; 'vault log' lists every
            token handed out. --notify-command (or VAULT_NOTIFY_COMMAND) is run when a grant
            dies, is about to, or is authorized again (docs/agent.md, "Notifications").
            """,
        examples: [
            "vault agent --idle-timeout 1h", "vault agent --status",
            #"vault agent --confirm-command 'zenity --question --no-markup --default-cancel --text "$VAULT_CONFIRM_SUMMARY"'"#,
            "vault lock",
        ]
    )

    @Flag("foreground", help: "serve in this process (for a systemd user unit)")
    var foreground: Bool
    let timeouts = AgentTimeouts()
    @Flag("status", help: "say whether an agent holds this vault unlocked")
    var status: Bool
    @Flag("key-on-stdin", help: "", hidden: true)
    var keyOnStdin: Bool

    func run(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals()
        let settings = try AgentSettings(environment: ctx.environment, options: timeouts)
        let location = try ctx.opener.location()
        guard let paths = AgentPaths.resolve(environment: ctx.environment, location: location) else {
            throw CLIError(
                "XDG_RUNTIME_DIR is not set: the agent needs a private runtime directory",
                hint: "log in through a session manager, or set XDG_RUNTIME_DIR to a private 0700 directory")
        }
        if ctx.output.json && foreground {
            throw CLIError.usage("--json is not used with --foreground", command: "agent")
        }
        if keyOnStdin {
            return try AgentHost(context: ctx, location: location, paths: paths, settings: settings).serveHandedKey()
        }
        guard Vault.exists(at: location) else {
            throw CLIError("no vault at \(location.databasePath)", hint: "run 'vault init' to create one")
        }
        let running: AgentStatus?
        do throws(VaultError) {
            running = try AgentClient.connect(paths).status(location: location)
        } catch {
            if error.code == .notFound {
                running = nil
            } else if status {
                // --status answers 0 or 77 only: an agent that cannot be used
                // (its directory refused, say) holds nothing unlocked for us.
                ctx.output.error(error.reason, hint: error.remedy.map(Remedies.hint))
                if ctx.output.json { try ctx.output.printJSON(AgentOutput(nil)) }
                return .locked
            } else {
                throw error
            }
        }
        if status { return try tellStatus(running, ctx, paths: paths) }
        if foreground {
            if let running { throw CLIError("an agent is already running for this vault (pid \(running.pid))") }
            return try AgentHost(context: ctx, location: location, paths: paths, settings: settings).serveInForeground()
        }
        if let running, running.unlocked {
            try ctx.output.report(
                "the agent (pid \(running.pid)) already holds this vault unlocked", json: AgentOutput(running))
            warnNotApplied(running, ctx)
            return .ok
        }
        let vault = try ctx.opener.openVaultDirectly()
        if let running {
            let client = try AgentClient.connect(paths)
            try client.load(vault)
            let now = try? AgentClient.connect(paths, timeout: 5).status(location: location)
            try ctx.output.report("unlocked the running agent", json: AgentOutput(now))
            warnNotApplied(running, ctx)
            return .ok
        }
        return try launch(vault, ctx, location: location, paths: paths, settings: settings)
    }

    /// A running agent keeps the settings it was started with: says which
    /// options given here it did not take, and how to apply them.
    private func warnNotApplied(_ running: AgentStatus, _ ctx: Context) {
        let given = timeouts.given
        guard !given.isEmpty else { return }
        ctx.output.warn(
            "\(given.joined(separator: ", ")) not applied: the running agent (pid \(running.pid)) keeps the "
                + "settings it was started with; to apply \(given.count == 1 ? "it" : "them"), run 'vault lock', "
                + "then this command again")
    }

    /// `--status`: whether `running`, the agent at `paths` (nil: none),
    /// holds this vault unlocked, and until when.
    private func tellStatus(_ running: AgentStatus?, _ ctx: Context, paths: AgentPaths) throws -> ExitCode {
        if ctx.output.json {
            try ctx.output.printJSON(AgentOutput(running))
            return running?.unlocked == true ? .ok : .locked
        }
        guard let running else {
            ctx.output.info("no agent is running for this vault")
            return .locked
        }
        guard running.unlocked else {
            ctx.output.info("the agent (pid \(running.pid)) is locked")
            return .locked
        }
        var limits: [String] = []
        if running.idleSecondsLeft > 0 { limits.append("\(Duration.left(running.idleSecondsLeft)) idle") }
        if running.hardSecondsLeft > 0 { limits.append("\(Duration.left(running.hardSecondsLeft)) at most") }
        ctx.output.info(
            "the agent (pid \(running.pid)) holds this vault unlocked"
                + (limits.isEmpty ? "" : "; it locks in \(limits.joined(separator: " or "))"))
        ctx.output.info("forwarding socket (for ssh -R): \(paths.forwardSocket)")
        return .ok
    }

    /// Starts an agent in the background with `vault` unlocked, and waits
    /// until it answers, so that the next command finds it.
    private func launch(
        _ vault: Vault, _ ctx: Context, location: VaultLocation, paths: AgentPaths, settings: AgentSettings
    ) throws -> ExitCode {
        let pid = try AgentLauncher.start(vault, paths: paths, settings: settings, environment: ctx.environment)
        for _ in 0..<100 {
            if let s = try? AgentClient.connect(paths, timeout: 5).status(location: location), s.unlocked {
                try ctx.output.report("agent started (pid \(pid)); it \(settings.summary)", json: AgentOutput(s))
                return .ok
            }
            usleep(50_000)
        }
        throw CLIError("the agent did not start", hint: "run 'vault agent --foreground' to see why")
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$foreground] + timeouts.declarations + [$status, $keyOnStdin] }
}
