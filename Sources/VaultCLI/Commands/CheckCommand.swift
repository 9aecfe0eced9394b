internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// `vault check`.
struct CheckCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "check",
        abstract: "Ask the provider whether a grant still works (userinfo probe).",
        usage: "check NAME [{json}]",
        arguments: [("NAME", "the grant")],
        discussion: """
            Calls the provider's userinfo endpoint with a fresh token, as GTMAppAuth's validity
            check does; a machine grant (client credentials, service account), which acts for no
            person, is checked by a token request with its credentials instead. Exit status 0:
            live. 2: the provider refused the grant (it is marked dead and kept; 'vault add NAME'
            authorizes it again). 75: the provider could not be reached or answered 5xx; nothing
            changes.
            """,
        examples: ["vault check work && echo still good"]
    )

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let vault = try ctx.opener.openVault()
        let result = try ctx.network.refresher(vault).check(name)
        switch result {
        case .live(let account):
            if ctx.output.json {
                try ctx.output.printJSON(["name": name, "state": "live", "account": account ?? ""])
            } else {
                ctx.output.info("'\(name)' is live\(account.map { " (\($0))" } ?? "")")
            }
        }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
