internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore

/// `vault log`.
struct LogCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "log",
        abstract: "Show the audit log: every token handed out, to whom, and what was refused.",
        usage: "log [NAME] [{limit}] [{json}]",
        arguments: [("NAME", "only this grant's entries")],
        discussion: """
            One line per token request: when, the grant ("(ID token)" after it when its ID
            token was asked for, as 'kube-credential --id-token' does), local or forwarded, the process that
            asked (its uid, pid and program, as the kernel says; for a forwarded request that is
            ssh, with the server it was started for ("to HOST"), followed by what the other
            machine says of itself, unchecked, and for a DPoP
            proof the agent signed, the request it is for), and the outcome: allowed,
            confirmed, denied, not-confirmed, not-asked (refused without asking the person:
            too many questions, or too soon after a refusal) or failed (with the error).
            What another machine can repeat at will (its refusals, tokens handed out to it
            without a question) and refusals made without asking are counted: a line ending in
            "× N" stands for N requests like it since the last line of that kind, the last of
            them at its time (docs/agent.md, "The audit log"). It records no token. The agent
            and the commands that hand out tokens themselves append to it, beside the vault:
            tokens handed out to this machine or after a question to audit.log, to another
            machine without a question to audit-forwarded.log, refusals and failures to
            audit-refused.log, so that nothing another machine repeats pushes the first out;
            each starts over, keeping the one before as NAME.1, when it passes 1 MiB.
            """,
        examples: ["vault log", "vault log work --limit 20", "vault log --json"]
    )

    @Option("limit", value: "N", help: "show only the last N entries")
    var limit: Count?

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    /// What `vault log --json` prints for one entry.
    struct Row: Encodable {
        let time: String
        let grant: String
        let origin: String
        let uid: Int?
        let pid: Int?
        let executable: String?
        /// For a forwarded request, the destination its ssh was started with.
        let destination: String?
        let claimed: RequesterClaims?
        let outcome: String
        let reason: String?
        /// The request a DPoP proof was signed for (`vault header --url`).
        let request: String?
        /// How many requests like this one the line stands for, when counted.
        let repeated: Int?
        /// `id` when the grant's ID token was asked for, not its access token.
        let token: String?
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let args = ctx.arguments.positionals
        guard args.count <= 1 else { throw CLIError.usage("unexpected argument '\(args[1])'", command: "log") }
        let name = try args.first.map { try ctx.grantName($0) }
        let count = limit?.value
        let location = try ctx.opener.location()
        let (all, unreadable) = try AuditLog(directory: location.directory).read()
        var entries = all.filter { name == nil || $0.grant == name }
        if let count { entries = Array(entries.suffix(count)) }
        if unreadable > 0 { ctx.output.warn("\(unreadable) lines of the audit log could not be read") }
        let rows = entries.map { e in
            Row(
                time: Format.timestamp(Date(timeIntervalSince1970: TimeInterval(e.time))), grant: e.grant,
                origin: e.origin.rawValue, uid: e.uid, pid: e.pid, executable: e.executable,
                destination: e.destination, claimed: e.claimed,
                outcome: e.outcome.rawValue, reason: e.reason, request: e.request, repeated: e.repeated,
                token: e.token)
        }
        if ctx.output.json {
            try ctx.output.printJSON(rows)
            return .ok
        }
        guard !rows.isEmpty else {
            ctx.output.info(name.map { "no entries for '\($0)'" } ?? "the audit log is empty")
            return .ok
        }
        let table =
            [["TIME", "GRANT", "ORIGIN", "OUTCOME", "ASKED BY"]]
            + rows.map { row in
                var who = "uid \(row.uid.map(String.init) ?? "?") pid \(row.pid.map(String.init) ?? "?")"
                if let exe = row.executable { who += " \(exe)" }
                if let destination = row.destination { who += " to \(destination)" }
                // What the agent checked comes before what the other machine
                // claims, so a claimed program cannot pose as the request.
                if let request = row.request { who += "; proof for \(request)" }
                if let claimed = row.claimed {
                    who += "; says: \(claimed.host) uid \(claimed.uid) pid \(claimed.pid)"
                    if !claimed.command.isEmpty { who += " \(claimed.command)" }
                }
                // The log keeps an error's code; a person reads its words.
                let reason = row.reason.map { VaultError.Code(rawValue: $0).words }
                var outcome = reason.map { "\(row.outcome) (\($0))" } ?? row.outcome
                if let repeated = row.repeated { outcome += " × \(repeated)" }
                let grant = row.token == "id" ? "\(row.grant) (ID token)" : row.grant
                return [row.time, grant, row.origin, outcome, who]
            }
        for line in Format.table(table) { ctx.output.out(line) }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$limit] }
}
