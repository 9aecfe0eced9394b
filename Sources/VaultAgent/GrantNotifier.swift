package import FoundationEssentials
package import VaultCore

/// Runs the person's notify command for a grant notice (a desktop
/// notification, a mail, a webhook): `sh -c COMMAND`, the notice in its
/// environment (`VAULT_NOTIFY_*`) and never on its command line, so no
/// value from a provider or a grant name can become shell syntax. It runs
/// in a session of its own and is killed with its process group after
/// `timeout` seconds. Each (grant, event, deadline) is told once, through
/// the vault's `NoticeLedger`. Used by the agent and by the command line.
package struct GrantNotifier: GrantNoticeObserver {
    /// Seconds the command may run.
    package static let timeout: TimeInterval = 5

    /// The command, for `sh -c`.
    package let command: String
    /// What the command inherits, vault's own variables left out.
    let environment: [String: String]
    let ledger: NoticeLedger
    let configDirectory: String
    /// Run each command on a thread of its own rather than wait for it
    /// (the agent: a notice never holds up a token).
    let background: Bool
    let now: @Sendable () -> Date
    let log: @Sendable (String) -> Void

    /// A notifier for the vault at `location`; `environment` is the
    /// process's, from which vault's own variables are removed.
    package init(
        command: String, environment: [String: String], location: VaultLocation, background: Bool,
        now: @escaping @Sendable () -> Date, log: @escaping @Sendable (String) -> Void
    ) {
        self.command = command
        self.environment = Subprocess.withoutVaultVariables(environment)
        ledger = NoticeLedger(directory: location.directory)
        configDirectory = location.configDirectory
        self.background = background
        self.now = now
        self.log = log
    }

    /// Tells the command about `notice`, unless it was told before.
    package func notice(_ notice: GrantNotice) {
        var notice = notice
        if notice.deadline == nil {
            // The grant as it was before it died still has the deadline it died by.
            var alive = notice.grant
            alive.dead = false
            let policy = ProviderCatalog.load(configDirectory: configDirectory).providers[alive.provider]?
                .refreshTokenPolicy
            notice.deadline = alive.refreshTokenDeadline(policy: policy)?.date
        }
        guard ledger.claim(notice, now: now()) else { return }
        let run: @Sendable () -> Void = { [self, notice] in
            let variables = environment.merging(GrantNotifier.variables(notice)) { $1 }
            guard let pid = Subprocess.startShell(["sh", "-c", command], environment: variables) else {
                log("the notify command could not be started")
                return
            }
            switch Subprocess.wait(pid, until: Monotonic.seconds() + GrantNotifier.timeout) {
            case .exited(0): break
            case .exited(let status): log("the notify command exited with status \(status)")
            case .signalled: log("the notify command was ended by a signal")
            case .killed: log("the notify command ran longer than \(Int(GrantNotifier.timeout))s and was stopped")
            case .vanished: log("the notify command could not be waited for")
            }
        }
        if background { startThread(run) } else { run() }
    }

    /// The notice as the command sees it: each value as it is, for the
    /// command to quote (a value ends at a NUL, which no environment holds),
    /// and `VAULT_NOTIFY_MARKUP`, a line in vault's words with every value
    /// from outside escaped for the markup of a notification body.
    package static func variables(_ notice: GrantNotice) -> [String: String] {
        let who = notice.grant.account.flatMap { $0.isEmpty ? nil : $0 } ?? notice.grant.provider
        let line =
            "\(notice.name) \(notice.event.rawValue): \(who): \(notice.reason)"
            + (notice.detail.isEmpty ? "" : " (\(notice.detail))")
            + "; refresh token until \(notice.deadline?.utcText ?? "unknown")"
        let env = [
            "VAULT_NOTIFY_DETAIL": notice.detail,
            "VAULT_NOTIFY_MARKUP": markupEscaped(line),
            "VAULT_NOTIFY_EVENT": notice.event.rawValue,
            "VAULT_NOTIFY_GRANT": notice.name,
            "VAULT_NOTIFY_PROVIDER": notice.grant.provider,
            "VAULT_NOTIFY_ACCOUNT": notice.grant.account ?? "",
            "VAULT_NOTIFY_REASON": notice.reason,
            "VAULT_NOTIFY_DEADLINE": notice.deadline?.utcText ?? "",
            "VAULT_NOTIFY_DEADLINE_EPOCH": notice.deadline.map { String($0.epochSeconds) } ?? "",
        ]
        return env.mapValues { String($0.unicodeScalars.prefix { $0 != "\0" }) }
    }

    /// `text` as the body of a desktop notification shows it, not as
    /// markup: `&`, `<`, `>`, and both quotes as entities, and control
    /// characters (a line break included) as spaces.
    package static func markupEscaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if let entity = markupEntities[scalar] {
                out += entity
            } else {
                out.unicodeScalars.append(scalar.properties.generalCategory == .control ? " " : scalar)
            }
        }
        return out
    }

    /// The characters markup reads, as entities.
    static let markupEntities: [Unicode.Scalar: String] = [
        "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;",
    ]
}
