internal import FoundationEssentials
internal import VaultCore

/// `vault keepalive`.
struct KeepaliveCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "keepalive",
        abstract: "Refresh grants that would otherwise die of inactivity.",
        usage: "keepalive [{within}] [{json}]",
        discussion: """
            Refreshes each grant whose refresh token would die of inactivity (or, rotating,
            reach the end the provider gave it) within the lead time: --within, else
            VAULT_KEEPALIVE_LEAD, else a quarter of the limit, at most 7 days. A refresh goes through the same path as 'vault refresh',
            under the grant's lock and the sync store's lease. Grants whose refresh token dies at
            a fixed time (a lifetime) are not refreshed: nothing but a new authorization moves
            that. Meant for a systemd user timer or cron, with VAULT_KEYFILE or a running agent
            (docs/agent.md, "Keep-alive"). Exit status: 0 when every due grant was refreshed (or
            none was due); 2 when the provider refused one (it is marked dead); 75 when one
            could not be refreshed for now (network, 5xx); 1 for other failures. A grant whose
            refresh token dies within VAULT_NOTIFY_LEAD (default 7d) at a date no refresh moves
            is named with that date, and what saves it ('vault add NAME'); that alone does not
            change the exit status. With
            VAULT_NOTIFY_COMMAND set, a grant whose refresh token dies within VAULT_NOTIFY_LEAD
            (default 7d) and that no refresh saves is told to that command, once.
            """,
        examples: ["vault keepalive", "vault keepalive --within 14d --json"]
    )

    @Option("within", value: "DURATION", help: "refresh grants whose deadline is this close (default: per grant)")
    var within: String?

    /// One line of `--json`.
    struct Report: Encodable {
        let name: String
        let provider: String
        let account: String?
        /// `refreshed`, `died`, `failed`, or `expiring` (not refreshed: no
        /// refresh moves its deadline, which is within the notify lead).
        let result: String
        let rule: String
        let deadlineAt: Int64
        let newDeadlineAt: Int64?
        let reason: String?

        enum CodingKeys: String, CodingKey {
            case name, provider, account, result, rule, reason
            case deadlineAt = "deadline_at"
            case newDeadlineAt = "new_deadline_at"
        }
    }

    func run(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals()
        let lead = try leadTime(ctx)
        let notify = try NotifySettings(environment: ctx.environment, command: "keepalive")
        let vault = try ctx.opener.openVault()
        let lifetimes = GrantLifetimes(location: try ctx.opener.location())
        let listing = try vault.list(secrets: false)
        let keepAlive = KeepAlive(policy: lifetimes.policy, lead: lead)
        let refresher = ctx.network.refresher(vault)
        let grants = listing.grants.map { ($0.name, $0.grant) }
        let now = ctx.time.now()
        let outcomes = keepAlive.due(grants, now: now).map {
            keepAlive.refresh($0.name, grant: $0.grant, deadline: $0.deadline, with: refresher)
        }
        let unsaved = keepAlive.beyondSaving(grants, now: now, lead: notify.lead)
        if let notifier = refresher.observer {
            let notices = keepAlive.expiring(
                grants, outcomes: outcomes, now: now, notifyLead: notify.lead, in: vault)
            notices.forEach(notifier.notice)
        }
        var reports: [Report] = []
        var status = ExitCode.ok
        for o in outcomes { reports.append(report(o, ctx, status: &status)) }
        // Said, not refreshed: no refresh moves these deadlines.
        for u in unsaved { reports.append(reportUnsaved(u, ctx, now: now)) }
        if ctx.output.json {
            try ctx.output.printJSON(reports)
        } else if outcomes.isEmpty {
            ctx.output.info("no grant is close to dying of inactivity")
        }
        for problem in listing.problems { ctx.output.error(problem.reason) }
        if status == .ok && !listing.problems.isEmpty { status = .failure }
        return status
    }

    /// How long before a deadline to refresh: `--within`, else
    /// VAULT_KEEPALIVE_LEAD, else nil (each deadline's default).
    private func leadTime(_ ctx: Context) throws -> TimeInterval? {
        guard let text = within ?? ctx.environment["VAULT_KEEPALIVE_LEAD"] else { return nil }
        guard let seconds = Duration.parse(text), seconds > 0 else {
            let source = within != nil ? "--within" : "VAULT_KEEPALIVE_LEAD"
            throw CLIError.usage("\(source) needs a duration such as 7d, 12h or 30m", command: "keepalive")
        }
        return seconds
    }

    /// The report of a grant that was due, told on the terminal unless
    /// `--json`; `status` worsened by a failure.
    private func report(_ o: KeepAlive.Outcome, _ ctx: Context, status: inout ExitCode) -> Report {
        var newDeadline: Int64?
        var reason: String?
        let result: String
        switch o.result {
        case .refreshed(let next):
            result = "refreshed"
            newDeadline = next?.date.epochSeconds
            if !ctx.output.json {
                let until = next.map { ": its refresh token now lives until \(Format.timestamp($0.date))" } ?? ""
                ctx.output.info("refreshed '\(o.name)'\(until)")
            }
        case .died(let error):
            result = "died"
            reason = error.oauthError ?? error.reason
            status = .dead
            if !ctx.output.json { ctx.output.error(error.reason) }
        case .failed(let error):
            result = "failed"
            reason = error.reason
            if status != .dead { status = error.code == .transient && status != .failure ? .transient : .failure }
            if !ctx.output.json { ctx.output.error("'\(o.name)' was not refreshed: \(error.reason)") }
        }
        return Report(
            name: o.name, provider: o.grant.provider, account: o.grant.account, result: result,
            rule: o.deadline.rule.rawValue, deadlineAt: o.deadline.date.epochSeconds,
            newDeadlineAt: newDeadline, reason: reason)
    }

    /// The report of a grant whose refresh token dies soon at a deadline no
    /// refresh moves, warned of on the terminal unless `--json`.
    private func reportUnsaved(
        _ u: (name: String, grant: Grant, deadline: RefreshTokenDeadline), _ ctx: Context, now: Date
    ) -> Report {
        let report = Report(
            name: u.name, provider: u.grant.provider, account: u.grant.account, result: "expiring",
            rule: u.deadline.rule.rawValue, deadlineAt: u.deadline.date.epochSeconds, newDeadlineAt: nil,
            reason: "no refresh moves this deadline")
        guard !ctx.output.json else { return report }
        let date = Format.timestamp(u.deadline.date)
        let when = "\(date) (\(Format.relative(u.deadline.date, now: now)))"
        let rule = GrantLifetimes.ruleText(u.deadline)
        let (dies, before) =
            u.deadline.date > now ? ("dies at \(when)", "before \(date) ") : ("died at \(when)", "")
        ctx.output.warn(
            "'\(u.name)' cannot be kept alive: its refresh token \(dies), \(rule), and no refresh moves that; "
                + "run 'vault add \(u.name)' \(before)to authorize it again")
        return report
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$within] }
}
