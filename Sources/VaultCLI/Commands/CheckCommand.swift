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
            person, is checked by a token request with its credentials instead. A stored token the
            provider refuses before its expiry (revoked) is refreshed once and tried again, and
            the output says so. Exit status 0:
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
        let outcome = try ctx.network.refresher(vault).checking(name)
        switch outcome.check {
        case .live(let account):
            if ctx.output.json {
                try ctx.output.printJSON(
                    CheckReport(
                        name: name, state: "live", account: account ?? "",
                        storedTokenRefused: outcome.replacedRefusedToken))
            } else {
                // A token revoked before its expiry was replaced: say so, it is news.
                let replaced =
                    outcome.replacedRefusedToken
                    ? "the provider no longer accepted the stored access token (the userinfo endpoint answered "
                        + "HTTP 401); refreshed it: " : ""
                ctx.output.info("\(replaced)'\(name)' is live\(account.map { " (\($0))" } ?? "")")
            }
        }
        return .ok
    }

    /// What `vault check --json` prints.
    struct CheckReport: Encodable {
        let name: String
        let state: String
        let account: String
        /// True when the provider refused the stored access token before
        /// its expiry and the check refreshed it.
        let storedTokenRefused: Bool

        enum CodingKeys: String, CodingKey {
            case name, state, account
            case storedTokenRefused = "stored_token_refused"
        }
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
