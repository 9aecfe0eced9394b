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
        // Tokens are never needed to list: they are not even read into memory.
        let listing = try vault.list(secrets: false)
        let now = ctx.time.now()
        let lifetimes = GrantLifetimes(location: try ctx.opener.location())
        // Grants in a sync conflict are marked (none when this vault does
        // not sync, or an older agent cannot tell).
        let conflicted = Set(
            vault.isThroughAgent
                ? ((try? ctx.agents.client(for: try ctx.opener.location())?.conflictNames()) ?? [])
                : ((try? ctx.network.syncEngine(vault).conflictNames()) ?? []))
        if ctx.output.json {
            try ctx.output.printJSON(
                listing.grants.map {
                    var summary = lifetimes.summary($0.name, $0.grant, now: now)
                    if conflicted.contains($0.name) { summary.conflict = true }
                    return summary
                })
        } else if !listing.grants.isEmpty {
            // When refresh tokens die, and the last refresh and use that
            // move an inactivity limit, when anything is known of it.
            let deadlines = listing.grants.map { lifetimes.deadline($0.grant) }
            let refreshColumn = deadlines.contains { $0 != nil }
            var rows = [
                ["NAME", "PROVIDER", "ACCOUNT", "STATE", "EXPIRES"]
                    + (refreshColumn ? ["REFRESH EXPIRES", "REFRESHED", "USED"] : [])
            ]
            rows.reserveCapacity(listing.grants.count + 1)
            func when(_ date: Date?) -> String {
                date.map { "\(Format.timestamp($0)) (\(Format.relative($0, now: now)))" } ?? "-"
            }
            let grants = listing.grants
            func row(_ i: Int) -> [String] {
                let g = grants[i]
                let dies = deadlines[i].map { "\(when($0.date)), \(GrantLifetimes.ruleText($0))" } ?? "-"
                let state =
                    GrantSummary.state(of: g.grant, at: now) + (conflicted.contains(g.name) ? " (conflict)" : "")
                let columns = [g.name, g.grant.provider, g.grant.account ?? "-", state, when(g.grant.expiresAt)]
                guard refreshColumn else { return columns }
                return columns + [
                    dies, Format.relative(g.grant.refreshedAt ?? g.grant.createdAt, now: now),
                    lifetimes.lastUse[g.name].map { Format.relative($0, now: now) } ?? "-",
                ]
            }
            // Each grant's row alone, in parts at once on a long list.
            for part in inParts(grants.count, minimumPart: 512, { $0.map(row) }) { rows += part }
            // One write for the whole table.
            Console.write(Format.table(rows).joined(separator: "\n") + "\n", to: 1)
        } else if listing.problems.isEmpty {
            ctx.output.info("the vault holds no grants; add one with 'vault add PROVIDER' or 'vault import NAME'")
        }
        if !ctx.output.json && !conflicted.isEmpty {
            ctx.output.warn(
                "changed on two machines at once: \(conflicted.sorted().joined(separator: ", ")); see 'vault conflicts'"
            )
        }
        for problem in listing.problems { ctx.output.error(problem.reason) }
        return listing.problems.isEmpty ? .ok : .failure
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
