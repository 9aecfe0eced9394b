internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// `vault refresh`.
struct RefreshCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "refresh",
        abstract: "Refresh a grant's access token now.",
        usage: "refresh NAME [{json}]",
        arguments: [("NAME", "the grant")],
        examples: ["vault refresh work"]
    )

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let vault = try ctx.opener.openVault()
        let fresh = try ctx.network.refresher(vault).freshGrant(name, forceRefresh: true)
        let now = ctx.time.now()
        if ctx.output.json {
            try ctx.output.printJSON(GrantSummary(name: name, grant: fresh.grant, now: now))
        } else {
            let until = fresh.grant.expiresAt.map { " until \(Format.timestamp($0))" } ?? ""
            ctx.output.info("refreshed '\(name)'; the access token is valid\(until)")
        }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
