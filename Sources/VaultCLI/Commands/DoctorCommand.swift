internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// What `vault doctor --json` prints.
struct DoctorReport: Encodable {
    /// The checks of one grant.
    struct GrantReport: Encodable {
        let name: String
        let provider: String
        let findings: [Finding]
    }

    /// True when no check failed.
    let ok: Bool
    /// Checks of the vault as a whole: agent, unlocking, proxy, sync store.
    let vault: [Finding]
    let grants: [GrantReport]
}

/// `vault doctor`.
struct DoctorCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "doctor",
        abstract: "Say why a grant does not work, and what to do about it.",
        usage: "doctor [NAME] [{mail}] [{json}]",
        arguments: [("NAME", "the grant to check (default: every grant)")],
        discussion: """
            Checks the vault (its agent, unlocking, a proxy in the environment, the sync store and
            its conflicts) and each grant: its stored state (dead, and why; an expired refresh
            token), when its refresh token dies (a date no refresh moves, within VAULT_NOTIFY_LEAD,
            default 7d, fails: only 'vault add NAME' before then saves the grant), a Google app in
            testing (a grant Google refused about 7 days after it was authorized), mail scopes,
            then its token endpoint: one refresh request with the
            grant's client and a made-up refresh token, which spends nothing and tells a name that
            does not resolve, a port that refuses, TLS trouble, a portal or proxy in between (a
            redirect elsewhere, a 407 or 511, a web page with a 2xx; a 4xx page is the endpoint's own),
            this machine's clock against the provider's Date header (over 60 s is reported), and a
            client the provider no longer accepts (invalid_client, a rotated secret). A valid
            access token is shown to the userinfo endpoint; a stale one is refreshed as 'vault
            token' would (the grant needs it anyway). A fresh token is never refreshed. A machine
            grant (client credentials, service account), which has no refresh token to spend, gets
            the token request 'vault check' makes instead: it also tells a key or secret the
            provider no longer takes. The failures come first, each with the check that found it
            and what to do. Exit status 0 when no check failed (warnings included), 1 when one did.
            """,
        examples: ["vault doctor", "vault doctor work", "vault doctor gmail --mail --json"]
    )

    @Flag("mail", help: "check the grant as one for IMAP and SMTP: missing mail scopes fail")
    var mail: Bool

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let given = ctx.arguments.positionals
        guard given.count <= 1 else { throw CLIError.usage("unexpected argument '\(given[1])'", command: "doctor") }
        let only = try given.first.map { try ctx.grantName($0) }
        let notify = try NotifySettings(environment: ctx.environment, command: "doctor")
        let location = try ctx.opener.location()
        guard Vault.exists(at: location) else {
            throw CLIError("no vault at \(location.databasePath)", hint: Remedies.hint(.createVault))
        }
        var vaultFindings: [Finding] = []
        let (agent, agentStatus) = agentFinding(ctx, location)
        vaultFindings.append(agent)
        if let proxy = proxyFinding(ctx.environment) { vaultFindings.append(proxy) }

        let vault: Vault
        do {
            vault = try ctx.opener.openVault()
            vaultFindings.append(
                Finding(
                    "unlock", .ok, vault.isThroughAgent ? "unlocked through the agent" : "unlocked by this command"))
        } catch {
            let reported = CLIError(reporting: error)
            vaultFindings.append(
                Finding(
                    "unlock", .fail, "cannot open the vault: \(reported.message)",
                    remedy: agent.status == .warn
                        ? "run 'vault agent' to unlock the agent (it asks for the passphrase)"
                            + (reported.hint.map { ", or \($0)" } ?? "") : reported.hint))
            return try finish(ctx, DoctorReport(ok: false, vault: vaultFindings, grants: []))
        }
        let (syncFindings, conflicted) = syncChecks(ctx, vault)
        vaultFindings += syncFindings

        let grants: [(name: String, grant: Grant)]
        if let only {
            grants = [(only, try vault.load(only))]
        } else {
            let listing = try vault.list()
            for problem in listing.problems {
                vaultFindings.append(
                    Finding("records", .fail, problem.reason, remedy: problem.remedy.map(Remedies.hint)))
            }
            grants = listing.grants.map { ($0.name, $0.grant) }
        }
        let lifetimes = GrantLifetimes(location: location)
        let refresher = ctx.network.refresher(vault)
        let rights = try refreshRights(
            ctx, vault, grants: grants, storeAnswers: !syncFindings.contains { $0.status == .fail })
        let reports = grants.map { named in
            var doctor = GrantDoctor(
                name: named.name, grant: named.grant, refresher: refresher, environment: ctx.environment,
                now: ctx.time.now(), conflicted: conflicted.contains(named.name), forMail: mail)
            doctor.refreshRight = rights(named.name, named.grant)
            doctor.refreshDeadline = lifetimes.deadline(named.grant)
            if lifetimes.providerUnknown(named.grant) {
                doctor.missingProviderFile = GrantLifetimes.providerFile(
                    named.grant.provider, configDirectory: location.configDirectory)
            }
            doctor.notifyLead = notify.lead
            doctor.keepAliveAgent = agentStatus?.unlocked == true ? agentStatus : nil
            return DoctorReport.GrantReport(name: named.name, provider: named.grant.provider, findings: doctor.run())
        }
        let failed = (vaultFindings + reports.flatMap(\.findings)).contains { $0.status == .fail }
        return try finish(ctx, DoctorReport(ok: !failed, vault: vaultFindings, grants: reports))
    }

    // MARK: The vault's checks

    /// The agent's finding, and its status when one answered.
    func agentFinding(_ ctx: Context, _ location: VaultLocation) -> (Finding, AgentStatus?) {
        guard ctx.agents.paths(for: location) != nil else {
            return (Finding("agent", .skipped, "agents are off (VAULT_AGENT=off, or no XDG_RUNTIME_DIR)"), nil)
        }
        guard let client = ctx.agents.client(for: location) else {
            return (Finding("agent", .ok, "no agent runs; each command unlocks the vault itself"), nil)
        }
        do {
            let status = try client.status(location: location)
            if status.unlocked {
                return (Finding("agent", .ok, "the agent (pid \(status.pid)) holds the vault unlocked"), status)
            }
            return (
                Finding(
                    "agent", .warn,
                    "the agent (pid \(status.pid)) is locked: commands ask for the passphrase, or fail with exit 77 without a way to ask",
                    remedy: "run 'vault agent' to unlock it"), status
            )
        } catch {
            return (Finding("agent", .warn, "the agent did not answer: \(error.reason)"), nil)
        }
    }

    func proxyFinding(_ environment: [String: String]) -> Finding? {
        let names = ["https_proxy", "HTTPS_PROXY", "http_proxy", "all_proxy", "ALL_PROXY"]
        let set = names.compactMap { name in
            environment[name].flatMap { $0.isEmpty ? nil : "\(name)=\(URLPolicy.redacted($0))" }
        }
        guard !set.isEmpty else { return nil }
        let except = environment["no_proxy"] ?? environment["NO_PROXY"]
        return Finding(
            "proxy", .ok,
            "requests go through a proxy: \(set.joined(separator: ", "))" + (except.map { "; no_proxy=\($0)" } ?? ""))
    }

    /// Who may refresh each synced grant whose refresh token a second use
    /// would revoke (docs/sync.md, "Refresh rights while the store is away").
    /// Through the agent, which holds the sync keys, it is asked of the
    /// agent for every such grant at once.
    func refreshRights(_ ctx: Context, _ vault: Vault, grants: [(name: String, grant: Grant)], storeAnswers: Bool)
        throws -> (String, Grant) -> (right: RefreshRight, storeAnswers: Bool)?
    {
        guard let engine = try? ctx.network.syncEngine(vault), engine.isConfigured else { return { _, _ in nil } }
        let coordinator = SyncRefreshCoordinator(
            transport: ctx.network.transport, configDirectory: vault.location.configDirectory)
        let guarded = { (grant: Grant) in
            grant.kind == .oauth2 && grant.refreshToken != nil && !grant.dead && coordinator.guarded(grant)
        }
        if vault.isThroughAgent {
            let names = grants.filter { guarded($0.grant) }.map(\.name)
            guard !names.isEmpty, let agent = ctx.agents.client(for: vault.location),
                let answer = try? agent.storeCheck(probeTimeout: 0, names: names)
            else { return { _, _ in nil } }
            let rights = Dictionary(zip(names, answer.rights), uniquingKeysWith: { first, _ in first })
            return { name, _ in rights[name].flatMap { $0 }.map { ($0, storeAnswers) } }
        }
        return { name, grant in
            guard guarded(grant), let right = try? engine.refreshRight(of: name) else { return nil }
            return (right, storeAnswers)
        }
    }

    /// What a probe of the store at `place` found.
    func storeFinding(place: String, _ probe: Result<Bool, VaultError>) -> Finding {
        switch probe {
        case .success(let synced):
            return Finding(
                "sync-store", .ok,
                "\(place) answers" + (synced ? "" : "; it holds no vault yet ('vault sync' sends this one)"))
        case .failure(let error):
            let remedy =
                error.code == .transient
                ? "check the network and the store's server; grants keep working here, run 'vault sync' later"
                : error.remedy.map(Remedies.hint) ?? Remedies.hint(.checkStore)
            return Finding("sync-store", .fail, "\(place) cannot be read: \(error.reason)", remedy: remedy)
        }
    }

    /// The sync store and its conflicts; also the names in conflict.
    func syncChecks(_ ctx: Context, _ vault: Vault) -> ([Finding], Set<String>) {
        let engine: SyncEngine
        do { engine = try ctx.network.syncEngine(vault) } catch {
            return ([Finding("sync-store", .warn, CLIError(reporting: error).message)], [])
        }
        guard engine.isConfigured else {
            return ([Finding("sync-store", .skipped, "this vault syncs with no store")], [])
        }
        var out: [Finding] = []
        var names: [String] = []
        let timeout: Double
        do { timeout = min(try ctx.network.storeTimeout(), 15) } catch {
            return ([Finding("sync-store", .fail, CLIError(reporting: error).message)], [])
        }
        if vault.isThroughAgent {
            // The agent holds the store's credentials: it probes the store.
            let agent = ctx.agents.client(for: vault.location)
            let seconds = UInt32(max(1, timeout.rounded(.up)))
            if let agent, let answer = try? agent.storeCheck(probeTimeout: seconds, names: []),
                answer.configured, let probe = answer.probe
            {
                out.append(storeFinding(place: answer.place.isEmpty ? "the store" : answer.place, probe))
            } else {
                out.append(
                    Finding(
                        "sync-store", .skipped,
                        "the agent holds the store's credentials and cannot probe the store (an agent of an "
                            + "earlier release); 'vault sync' reaches the store through it"))
            }
            names = (try? agent?.conflictNames()) ?? []
        } else {
            let place = (try? engine.remoteDescription().url) ?? "the store"
            let probe: Result<Bool, VaultError>
            do throws(VaultError) { probe = .success(try engine.probeStore(timeout: timeout)) } catch {
                probe = .failure(error)
            }
            out.append(storeFinding(place: place, probe))
            names = (try? engine.conflictNames()) ?? []
        }
        if names.isEmpty {
            out.append(Finding("conflicts", .ok, "no grant is in a sync conflict"))
        } else {
            out.append(
                Finding(
                    "conflicts", .warn, "in a sync conflict: \(names.joined(separator: ", "))",
                    remedy: Remedies.hint(.listConflicts)))
        }
        return (out, Set(names))
    }

    // MARK: Output

    /// Prints the report (the failures first, then every check) and
    /// returns the exit status.
    func finish(_ ctx: Context, _ report: DoctorReport) throws -> ExitCode {
        if ctx.output.json {
            try ctx.output.printJSON(report)
            return report.ok ? .ok : .failure
        }
        let all = report.vault.map { ("(vault)", $0) } + report.grants.flatMap { g in g.findings.map { (g.name, $0) } }
        let problems = all.filter { $0.1.status == .fail } + all.filter { $0.1.status == .warn }
        for (subject, f) in problems {
            ctx.output.out(Console.escaped("\(f.status.rawValue.uppercased()) \(subject): \(f.check): \(f.detail)"))
            if let remedy = f.remedy { ctx.output.out(Console.escaped("  what to do: \(remedy)")) }
        }
        if !problems.isEmpty { ctx.output.out("") }
        var rows = [["NAME", "CHECK", "STATUS", "DETAIL"]]
        for (subject, f) in all { rows.append([subject, f.check, f.status.rawValue, f.detail]) }
        Format.table(rows).forEach { ctx.output.out($0) }
        let failures = all.filter { $0.1.status == .fail }.count
        ctx.output.info(
            failures == 0
                ? "no problem found"
                    + (problems.isEmpty ? "" : " (\(problems.count) warning\(problems.count == 1 ? "" : "s"))")
                : "\(failures) problem\(failures == 1 ? "" : "s") found")
        return report.ok ? .ok : .failure
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$mail] }
}
