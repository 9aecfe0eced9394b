internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultSync

/// `vault list`.
struct ListCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "list",
        abstract: "List the stored grants with their state.",
        usage: "list [{json}]",
        discussion: """
            One grant a line: name, provider, account, state and expiry; when its refresh token
            dies and by which rule (the provider's refresh_token_expires_in, else the provider's
            documented lifetime or inactivity limit: 'vault providers --json'), and when it was
            last refreshed and last used on this machine (the audit log). The state is fresh (access token valid for more
            than a minute), refreshable (a refresh token can renew it: a token with a minute or
            less left is renewed before use), expiring (a minute or less left and nothing can
            renew it: no longer handed out), expired, or dead (the provider refused it; add it
            again). A record that fails its integrity checks is reported on stderr and the exit
            status is 1; the others are still listed.
            """,
        examples: ["vault list", "vault list --json | jq -r '.[].name'"]
    )

    func run(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals()
        let vault = try ctx.opener.openVault()
        let now = ctx.time.now()
        let lifetimes = GrantLifetimes(location: try ctx.opener.location())
        // Grants in a sync conflict are marked (none when this vault does
        // not sync, or an older agent cannot tell).
        let conflicted = Set(
            vault.isThroughAgent
                ? ((try? ctx.agents.client(for: try ctx.opener.location())?.conflictNames()) ?? [])
                : ((try? ctx.network.syncEngine(vault).conflictNames()) ?? []))
        // Tokens are never needed to list: they are not even read into
        // memory. Each grant is summed up, or its row made, as it is read.
        let problems: [VaultError]
        if ctx.output.json {
            let summaries: [GrantSummary]
            (summaries, problems) = try vault.list(secrets: false) { g in
                var summary = lifetimes.summary(g.name, g.grant, now: now)
                if conflicted.contains(g.name) { summary.conflict = true }
                return summary
            }
            try ctx.output.printJSON(summaries)
        } else {
            let rows: [ListRow]
            (rows, problems) = try vault.list(secrets: false) { g in
                ListRow(g, lifetimes: lifetimes, conflicted: conflicted.contains(g.name), now: now)
            }
            if !rows.isEmpty {
                // When refresh tokens die, and the last refresh and use that
                // move an inactivity limit, when anything is known of it.
                let refreshColumn = rows.contains { $0.hasDeadline }
                var table = [
                    ["NAME", "PROVIDER", "ACCOUNT", "STATE", "EXPIRES"]
                        + (refreshColumn ? ["REFRESH EXPIRES", "REFRESHED", "USED"] : [])
                ]
                table.reserveCapacity(rows.count + 1)
                for row in rows { table.append(refreshColumn ? row.cells : Array(row.cells.prefix(5))) }
                // One write for the whole table.
                var text = Format.tableText(table)
                Console.writeAll(&text, fd: 1)
            } else if problems.isEmpty {
                ctx.output.info(
                    "the vault holds no grants; add one with 'vault add PROVIDER' or 'vault import NAME'")
            }
            // Notes for a person reading the table: JSON marks a conflict
            // with `conflict`, and its stderr carries only the errors below.
            try printNotes(ctx, unknownProviders: Set(rows.compactMap(\.unknownProvider)), conflicted: conflicted)
        }
        for problem in problems { ctx.output.error(problem.reason) }
        return problems.isEmpty ? .ok : .failure
    }

    /// The text listing's notes on stderr: providers this machine has no
    /// file of, and grants in a sync conflict.
    private func printNotes(_ ctx: Context, unknownProviders: Set<String>, conflicted: Set<String>) throws {
        let location = try ctx.opener.location()
        for provider in unknownProviders.sorted() {
            ctx.output.info(
                Console.escaped(
                    "no provider file for '\(provider)' on this machine ("
                        + GrantLifetimes.providerFile(provider, configDirectory: location.configDirectory)
                        + "): its grants refresh, but how long their refresh tokens live is not known here; "
                        + "provider files do not sync: copy one that another machine has"))
        }
        if !conflicted.isEmpty {
            ctx.output.warn(
                "changed on two machines at once: \(conflicted.sorted().joined(separator: ", ")); see 'vault conflicts'"
            )
        }
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}

/// One grant's line of `vault list`: its eight cells, the last three
/// shown only when some grant's refresh token has a known deadline.
struct ListRow {
    let cells: [String]
    let hasDeadline: Bool
    /// The grant's provider, when this machine has no file or preset of it.
    let unknownProvider: String?

    init(_ g: NamedGrant, lifetimes: GrantLifetimes, conflicted: Bool, now: Date) {
        unknownProvider = lifetimes.providerUnknown(g.grant) ? g.grant.provider : nil
        // Built by appending: a long list makes tens of thousands of cells.
        func when(_ date: Date?) -> String {
            guard let date else { return "-" }
            var text = Format.timestamp(date)
            text += " ("
            text += Format.relative(date, now: now)
            text += ")"
            return text
        }
        let deadline = lifetimes.deadline(g.grant)
        var state = GrantSummary.state(of: g.grant, at: now)
        if conflicted { state += " (conflict)" }
        var dies = "-"
        if let deadline {
            dies = when(deadline.date)
            dies += ", "
            dies += GrantLifetimes.ruleText(deadline)
        }
        cells = [
            g.name, g.grant.provider, g.grant.account ?? "-", state, when(g.grant.expiresAt), dies,
            // As 'vault show' says it: a grant never refreshed (a refresh
            // that failed is none) reads "-", not when it was stored.
            g.grant.refreshedAt.map { Format.relative($0, now: now) } ?? "-",
            lifetimes.lastUse[g.name].map { Format.relative($0, now: now) } ?? "-",
        ]
        hasDeadline = deadline != nil
    }
}
