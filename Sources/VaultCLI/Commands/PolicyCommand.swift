internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore

/// `vault policy`.
struct PolicyCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "policy",
        abstract: "Say which token requests the agent answers, asks about, or refuses.",
        usage: "policy [NAME] [{local:choices}] [{forwarded:choices}] [{reset}] [{json}]",
        arguments: [("NAME", "a grant (without it: the defaults for every grant)")],
        discussion: """
            Each grant has a rule for requests from this machine (local) and for requests from
            machines this agent is forwarded to over SSH (forwarded): allow hands the token out,
            confirm asks the person first (through the agent's --confirm-command, or on the
            terminal of 'vault agent --foreground'; no answer in time is a refusal), deny
            refuses. Without a policy, local requests are allowed and forwarded ones confirmed.
            Without options it prints the rules. The rules apply to the tokens the agent hands
            out ('vault token', env, exec, header, xoauth2, git-credential); a process of your
            own user on this machine can still read the vault as you can, so for local requests
            the rules guard against mistakes, not against your own programs. A command that
            unlocks the vault itself (VAULT_KEYFILE, a passphrase) does not ask the agent, and
            local rules do not bind it.
            """,
        examples: [
            "vault policy work --forwarded allow", "vault policy --forwarded deny",
            "vault policy bank --local confirm", "vault policy work --reset",
        ]
    )

    @Option("local", value: "RULE", help: "{choices} requests from this machine")
    var local: AgentPolicy.Rule?
    @Option("forwarded", value: "RULE", help: "{choices} requests through a forwarded agent")
    var forwarded: AgentPolicy.Rule?
    @Flag("reset", help: "forget the rules of NAME (or the defaults)")
    var reset: Bool

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    /// What `vault policy --json` prints: the rule in force for each origin.
    struct Row: Encodable {
        let grant: String?
        let local: String
        let forwarded: String
    }

    /// `--reset` forgets rules: it sets none.
    func validate() throws(ValidationError) {
        if reset && (local != nil || forwarded != nil) {
            throw ValidationError("--reset is not used with --local or --forwarded")
        }
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let args = ctx.arguments.positionals
        guard args.count <= 1 else {
            throw CLIError.usage("unexpected argument '\(args[1])'", command: "policy")
        }
        let name = try args.first.map { try ctx.grantName($0) }
        let configDirectory = try ctx.opener.location().configDirectory
        var policy = try AgentPolicy.load(configDirectory: configDirectory)
        let newLocal = local
        let newForwarded = forwarded
        guard reset || newLocal != nil || newForwarded != nil else {
            return try show(policy, only: name, ctx: ctx)
        }
        var rules = name.map { policy.grants[$0] ?? AgentPolicy.Rules() } ?? policy.defaults
        if reset {
            rules = AgentPolicy.Rules()
        } else {
            if let newLocal { rules.local = newLocal }
            if let newForwarded { rules.forwarded = newForwarded }
        }
        if let name { policy.grants[name] = rules } else { policy.defaults = rules }
        try policy.save(configDirectory: configDirectory)
        let row = Row(
            grant: name, local: policy.rule(for: name ?? "", origin: .local).rawValue,
            forwarded: policy.rule(for: name ?? "", origin: .forwarded).rawValue)
        let subject = name.map { "'\($0)'" } ?? "every grant without rules of its own"
        try ctx.output.report("\(subject): local \(row.local), forwarded \(row.forwarded)", json: row)
        if let newLocal, newLocal != .allow {
            ctx.output.info(
                "local rules bind the agent only: a command that opens the vault itself (with VAULT_KEYFILE, "
                    + "a passphrase file, command or prompt) hands out the token without asking")
        }
        return .ok
    }

    private func show(_ policy: AgentPolicy, only name: String?, ctx: Context) throws -> ExitCode {
        func row(_ grant: String?) -> Row {
            Row(
                grant: grant, local: policy.rule(for: grant ?? "", origin: .local).rawValue,
                forwarded: policy.rule(for: grant ?? "", origin: .forwarded).rawValue)
        }
        // The defaults are what a grant without rules gets: ask for them
        // under a name no grant has.
        let defaults = Row(
            grant: nil, local: (policy.defaults.local ?? AgentPolicy.builtIn.local!).rawValue,
            forwarded: (policy.defaults.forwarded ?? AgentPolicy.builtIn.forwarded!).rawValue)
        let rows = name.map { [row($0)] } ?? [defaults] + policy.grants.keys.sorted().map { row($0) }
        if ctx.output.json {
            try ctx.output.printJSON(rows)
            return .ok
        }
        let table = [["GRANT", "LOCAL", "FORWARDED"]] + rows.map { [$0.grant ?? "(default)", $0.local, $0.forwarded] }
        for line in Format.table(table) { ctx.output.out(line) }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$local, $forwarded, $reset] }
}
