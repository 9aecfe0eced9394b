internal import CPlatform
internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultSync

/// `vault agent`'s timeouts, as options.
struct AgentTimeouts: OptionGroup {
    @Option("idle-timeout", value: "DURATION", help: "lock after this long unused (default 15m; 0: never)")
    var idle: Interval?
    @Option("timeout", value: "DURATION", help: "lock this long after unlocking (default 8h; 0: never)")
    var hard: Interval?
    @Option(
        "refresh-before", value: "DURATION",
        help: "refresh recently used grants this long before they expire (default 5m)")
    var refreshBefore: Interval?
    @Option(
        "confirm-command", value: "COMMAND",
        help: "ask the person with this command (exit 0: yes) when the policy says confirm")
    var confirmCommand: String?
    @Option("confirm-timeout", value: "DURATION", help: "refuse a confirmation not given in time (default 30s)")
    var confirmTimeout: Interval?
    @Option(
        "keepalive-lead", value: "DURATION",
        help: "keep alive grants this close to dying of inactivity (default: a quarter of the limit, at most 7d)")
    var keepAliveLead: Interval?
    @Option(
        "keepalive-every", value: "DURATION",
        help: "look for grants to keep alive at least this often, sooner by their deadlines (default 1h; 0: never)")
    var keepAliveEvery: Interval?
    @Option(
        "notify-command", value: "COMMAND",
        help: "run this command when a grant dies, is about to, or is authorized again")
    var notifyCommand: String?

    /// This group's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    /// The options given on the command line (`--idle-timeout`, ...), in
    /// their declared order: what a running agent does not take on.
    var given: [String] {
        let set: [(String, Bool)] = [
            ("idle-timeout", idle != nil), ("timeout", hard != nil), ("refresh-before", refreshBefore != nil),
            ("confirm-command", confirmCommand != nil), ("confirm-timeout", confirmTimeout != nil),
            ("keepalive-lead", keepAliveLead != nil), ("keepalive-every", keepAliveEvery != nil),
            ("notify-command", notifyCommand != nil),
        ]
        return set.filter(\.1).map { "--" + $0.0 }
    }

    var declarations: [any OptionDeclaration] {
        [
            $idle, $hard, $refreshBefore, $confirmCommand, $confirmTimeout, $keepAliveLead, $keepAliveEvery,
            $notifyCommand,
        ]
    }
}

/// The agent's timeouts, from `vault agent`'s options or the environment.
struct AgentSettings {
    var idle: TimeInterval = 15 * 60
    var hard: TimeInterval = 8 * 3600
    var refreshBefore: TimeInterval = 5 * 60
    /// How the agent asks the person about a request its policy says to confirm.
    var confirmCommand: String?
    var confirmTimeout: TimeInterval = 30
    /// The keep-alive lead time (nil: each grant's default).
    var keepAliveLead: TimeInterval?
    /// How often the agent looks for grants to keep alive (0: never).
    var keepAliveEvery: TimeInterval = 3600
    /// What the agent runs when a grant dies, is about to, or is authorized again.
    var notifyCommand: String?
    var notifyLead: TimeInterval = NotifySettings.defaultLead
    /// Seconds per request to the sync store when the agent syncs.
    var storeTimeout = SyncEngine.defaultStoreTimeout

    /// `options`: `vault agent`'s, which come before the environment.
    init(environment: [String: String], options: AgentTimeouts?) throws {
        // An option's value was parsed when it was bound; a variable's is parsed here.
        func pick(_ option: Interval?, _ variable: String, _ current: TimeInterval) throws -> TimeInterval {
            if let option { return option.seconds }
            guard let text = environment[variable] else { return current }
            guard let interval = Interval(argument: text) else {
                throw CLIError.usage("\(variable) \(Interval.requirement)", command: "agent")
            }
            return interval.seconds
        }
        idle = try pick(options?.idle, "VAULT_AGENT_IDLE_TIMEOUT", idle)
        hard = try pick(options?.hard, "VAULT_AGENT_TIMEOUT", hard)
        refreshBefore = try pick(options?.refreshBefore, "VAULT_AGENT_REFRESH_BEFORE", refreshBefore)
        confirmTimeout = try pick(options?.confirmTimeout, "VAULT_CONFIRM_TIMEOUT", confirmTimeout)
        keepAliveEvery = try pick(options?.keepAliveEvery, "VAULT_KEEPALIVE_EVERY", keepAliveEvery)
        if options?.keepAliveLead != nil || environment["VAULT_KEEPALIVE_LEAD"] != nil {
            let lead = try pick(options?.keepAliveLead, "VAULT_KEEPALIVE_LEAD", 0)
            guard lead > 0 else {
                throw CLIError.usage("the keep-alive lead must be a duration above 0, such as 7d", command: "agent")
            }
            keepAliveLead = lead
        }
        // A forwarded client waits 150 s for its answer: the question and a
        // refresh after a yes must fit.
        guard confirmTimeout > 0, confirmTimeout <= 120 else {
            throw CLIError.usage("the confirmation timeout must be from 1s to 2m", command: "agent")
        }
        confirmCommand = (options?.confirmCommand ?? environment["VAULT_CONFIRM_COMMAND"]).flatMap {
            $0.isEmpty ? nil : $0
        }
        let notify = try NotifySettings(environment: environment, command: "agent")
        storeTimeout = try Network(environment: environment, command: "agent").storeTimeout()
        notifyCommand = options?.notifyCommand.flatMap { $0.isEmpty ? nil : $0 } ?? notify.command
        notifyLead = notify.lead
    }

    var serverOptions: AgentServer.Options {
        var o = AgentServer.Options()
        o.idleTimeout = idle
        o.hardTimeout = hard
        o.refreshBefore = refreshBefore
        o.confirmCommand = confirmCommand
        o.confirmTimeout = confirmTimeout
        o.keepAliveLead = keepAliveLead
        o.keepAliveInterval = keepAliveEvery
        o.notifyCommand = notifyCommand
        o.notifyLead = notifyLead
        o.storeTimeout = storeTimeout
        return o
    }

    /// `15m idle, 8h at most`.
    var summary: String {
        let i = idle > 0 ? "locks after \(Duration.text(idle)) idle" : "no idle timeout"
        let h = hard > 0 ? "\(Duration.text(hard)) at most" : "no time limit"
        return "\(i), \(h)"
    }

    /// The options that pass these settings to a new agent process.
    var arguments: [String] {
        [
            "--idle-timeout", "\(Int(idle))", "--timeout", "\(Int(hard))", "--refresh-before",
            "\(Int(refreshBefore))", "--confirm-timeout", "\(Int(confirmTimeout))", "--keepalive-every",
            "\(Int(keepAliveEvery))",
        ] + (keepAliveLead.map { ["--keepalive-lead", "\(Int($0))"] } ?? [])
            + (confirmCommand.map { ["--confirm-command", $0] } ?? [])
            + (notifyCommand.map { ["--notify-command", $0] } ?? [])
    }
}

/// Durations on the command line: `90`, `90s`, `15m`, `8h`, `1d`; `0` for none.
enum Duration {
    static func parse(_ text: String) -> TimeInterval? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var unit = 1.0
        if let last = text.last, let u = units[last] {
            unit = u
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = Int(digits), n >= 0, n <= 10_000_000 else {
            return nil
        }
        return Double(n) * unit
    }

    /// `14m`, `7h59m`: a time left, rounded to the minute above a minute.
    static func left(_ seconds: Int) -> String {
        if seconds < 60 { return "\(seconds)s" }
        let minutes = (seconds + 30) / 60
        return minutes < 60 ? "\(minutes)m" : "\(minutes / 60)h\(minutes % 60 == 0 ? "" : "\(minutes % 60)m")"
    }

    static func text(_ seconds: TimeInterval) -> String {
        let s = Int(seconds)
        if s % 86400 == 0 && s >= 86400 { return "\(s / 86400)d" }
        if s % 3600 == 0 && s >= 3600 { return "\(s / 3600)h" }
        if s % 60 == 0 && s >= 60 { return "\(s / 60)m" }
        return "\(s)s"
    }
}

/// Starts a detached agent process and hands it the master key through a
/// pipe: never through argv, the environment or a file.
enum AgentLauncher {
    /// Variables the agent must not inherit: it never needs a passphrase.
    static let withheld = [
        "VAULT_PASSPHRASE", "VAULT_PASSPHRASE_FILE", "VAULT_PASSPHRASE_COMMAND", "VAULT_KEYFILE",
        "VAULT_NEW_PASSPHRASE", "VAULT_NEW_PASSPHRASE_FILE", "VAULT_NEW_PASSPHRASE_COMMAND",
    ]

    static func start(_ vault: Vault, paths: AgentPaths, settings: AgentSettings, environment: [String: String])
        throws -> pid_t
    {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0, fcntl(fds[1], F_SETFD, FD_CLOEXEC) == 0 else {
            throw CLIError("cannot create a pipe: \(errnoText())")
        }
        defer { close(fds[1]) }
        // The agent writes "ready" on its stdout once it listens and holds
        // the key; nothing claims it runs before that.
        var ready: [Int32] = [0, 0]
        guard pipe(&ready) == 0, fcntl(ready[0], F_SETFD, FD_CLOEXEC) == 0 else {
            close(fds[0])
            throw CLIError("cannot create a pipe: \(errnoText())")
        }
        defer { close(ready[0]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[0], 0)
        posix_spawn_file_actions_adddup2(&actions, ready[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        vault_spawn_close_from(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own session (closing the terminal does not kill it), and the
        // signals this command blocks back at their defaults.
        let detached = vault_spawn_detached(&attributes)
        guard detached == 0 else {
            close(fds[0])
            close(ready[1])
            throw CLIError("cannot start the agent: \(String(cString: strerror(detached)))")
        }
        let words = ["vault", "agent", "--key-on-stdin"] + settings.arguments
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let env = environment.filter { !withheld.contains($0.key) }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { env.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, argv, env)
        close(fds[0])
        close(ready[1])
        guard rc == 0 else { throw CLIError("cannot start the agent: \(String(cString: strerror(rc)))") }
        try vault.writeMasterKey(to: fds[1])
        close(fds[1])
        fds[1] = -1
        switch confirmation(ready[0]) {
        case AgentLauncher.ready: return pid
        case AgentLauncher.busy:
            // The agent that served the vault before is still finishing its
            // requests (it was locked during a refresh, say).
            let error = VaultError(
                .busy, "the previous agent of this vault is still finishing its requests",
                remedy: .tryAgainInAMinute)
            throw CLIError(
                "the agent did not start: \(error.reason)", hint: error.remedy.map(Remedies.hint),
                exitCode: .transient)
        default: break
        }
        // It exited without serving: another command's agent may hold the
        // vault already; otherwise say why none can.
        let client: AgentClient
        let status: AgentStatus
        do throws(VaultError) {
            client = try AgentClient.connect(paths, timeout: 5)
            status = try client.status(location: vault.location)
            // Another command's agent that has not been handed its key yet:
            // this one is as good.
            if !status.unlocked { try client.load(vault) }
        } catch {
            throw CLIError("the agent did not start: \(error.reason)", hint: error.remedy.map(Remedies.hint))
        }
        return pid_t(truncatingIfNeeded: status.pid)
    }

    /// What the agent says on its stdout once it serves.
    static let ready = "ready"
    /// What it says when the agent before it did not exit in time.
    static let busy = "busy"

    /// Waits (boundedly: a stuck agent must not hold up the command) for
    /// the agent's word: `ready`, `busy`, or nothing when it exits. The
    /// agent may first wait for one that is stopping (`handoverTimeout`).
    private static func confirmation(_ fd: Int32) -> String? {
        let deadline = MonotonicClock.now() + AgentServer.handoverTimeout + 20
        var received: [UInt8] = []
        while received.count < 16 && received.last != UInt8(ascii: "\n") {
            let left = deadline - MonotonicClock.now()
            guard left > 0 else { return nil }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let n = poll(&p, 1, Int32(left * 1000) + 1)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            var buffer = [UInt8](repeating: 0, count: 16 - received.count)
            let got = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return nil }
            received += buffer.prefix(got)
        }
        guard received.last == UInt8(ascii: "\n") else { return nil }
        return String(decoding: received.dropLast(), as: UTF8.self)
    }

    /// Called by the agent: tells the command that started it that it
    /// serves (`ready`) or cannot yet (`busy`), then lets go of the pipe.
    static func signal(_ word: String) {
        Console.write(word + "\n", to: 1)
        let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
        if null >= 0 {
            dup2(null, 1)
            close(null)
        }
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}

/// What `vault agent --json` and `vault lock --json` print.
struct AgentOutput: Encodable {
    let running: Bool
    let unlocked: Bool
    let pid: Int?
    /// Seconds until the idle and the hard timeout lock it (nil: none).
    let idleSecondsLeft: Int?
    let hardSecondsLeft: Int?

    init(_ status: AgentStatus?) {
        running = status != nil
        unlocked = status?.unlocked ?? false
        pid = status?.pid
        idleSecondsLeft = status.flatMap { $0.idleSecondsLeft > 0 ? $0.idleSecondsLeft : nil }
        hardSecondsLeft = status.flatMap { $0.hardSecondsLeft > 0 ? $0.hardSecondsLeft : nil }
    }

    /// An agent that was just told to lock (it may exit right after).
    init(lockedAgent: Void) {
        (running, unlocked, pid, idleSecondsLeft, hardSecondsLeft) = (true, false, nil, nil, nil)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(running, forKey: .running)
        try c.encode(unlocked, forKey: .unlocked)
        try c.encode(pid, forKey: .pid)
        try c.encode(idleSecondsLeft, forKey: .idleSecondsLeft)
        try c.encode(hardSecondsLeft, forKey: .hardSecondsLeft)
    }

    enum CodingKeys: String, CodingKey {
        case running, unlocked, pid
        case idleSecondsLeft = "idle_seconds_left"
        case hardSecondsLeft = "hard_seconds_left"
    }
}

/// This process as the agent: it listens on the vault's socket and
/// serves until it locks (`vault agent`).
struct AgentHost {
    let context: Context
    let location: VaultLocation
    let paths: AgentPaths
    let settings: AgentSettings

    /// The process a command started on demand: the key arrives on stdin.
    func serveHandedKey() throws -> ExitCode {
        let handed = try StandardInput.read(limit: 48)
        guard handed.count == 48 else { throw CLIError("the agent expects a vault id and a key on stdin") }
        var raw = handed.unsafeCopyToArray()
        let vaultID = Array(raw[..<16])
        let key = try Secure.copy(raw[16...])
        secureZero(&raw)
        let server = AgentServer(
            location: location, paths: paths, options: settings.serverOptions, transport: context.network.transport,
            time: context.time,
            log: { _ in })
        do {
            try server.listen()
        } catch {
            // Another command started one first: it serves the vault.
            if error.code == .alreadyExists { return .ok }
            // The one before did not stop in time; the starter says so.
            if error.code == .busy { AgentLauncher.signal(AgentLauncher.busy) }
            throw error
        }
        try server.unlock(vaultID: vaultID, masterKey: key)
        AgentLauncher.signal(AgentLauncher.ready)
        server.run()
        return .ok
    }

    /// `vault agent --foreground`: unlocks now if a key can be had without
    /// waiting, else starts locked; logs to stderr; stays when locked.
    func serveInForeground() throws -> ExitCode {
        var options = settings.serverOptions
        options.exitWhenLocked = false
        // With a person at the terminal and no command to ask through,
        // confirmations are asked here.
        options.confirmOnTerminal = isatty(0) == 1
        let console = context.output.console
        let server = AgentServer(
            location: location, paths: paths, options: options, transport: context.network.transport,
            time: context.time,
            log: { console.info("agent: \($0)") })
        try server.listen()
        if context.opener.unlockSources.available {
            let vault = try context.opener.openVaultDirectly()
            try server.unlock(vault)
        } else {
            console.info("agent: waiting locked; the first command that unlocks the vault hands it the key")
        }
        console.info("agent: listening on \(paths.socket) (\(settings.summary))")
        console.info("agent: forward to other machines with ssh -R REMOTE_PATH:\(paths.forwardSocket)")
        server.run()
        return .ok
    }
}
