internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// `vault token`.
struct TokenCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "token",
        abstract: "Print a fresh access token, refreshing it first when needed.",
        usage: "token NAME [{min-valid}] [{force-refresh}] [{resource}] [{audience}] [{scope}] [{exchange}] [{json}]",
        arguments: [("NAME", "the grant")],
        discussion: """
            Prints the access token and a newline, nothing else. Concurrent calls share one
            refresh: the first takes that grant's refresh lock and refreshes, the others wait
            and print the new token; other grants are never held up. A rotated refresh token is
            stored before the new access token is printed. Exit status 2 when the provider
            refused the grant (invalid_grant: it is marked dead; 'vault add NAME' authorizes it again);
            75 when the provider cannot be reached or answers 429 or 5xx; 1 for any other
            failure, such as a client the provider does not accept or an answer that is not
            OAuth. Only exit status 2 changes the grant.

            --resource, --audience and --scope ask the provider for a token narrowed to one
            resource (RFC 8707), audience or fewer scopes, with a refresh-token request that names
            them; --exchange gets it by token exchange (RFC 8693) of the grant's access token
            instead. The token is cached in the grant (16 at most) until it expires, so repeated
            calls do not go to the provider; a refresh token the request rotated is stored first.
            A provider that refuses the target (invalid_target, unauthorized_client) exits with
            status 1 and changes nothing.
            """,
        examples: [
            #"curl -H "Authorization: Bearer $(vault token work)" https://api.example.com/"#,
            "vault token github --min-valid 300",
            "vault token work --resource https://api.example.com/",
            "vault token work --exchange --audience billing --scope read",
        ]
    )

    @Option("min-valid", value: "SECONDS", help: "refresh when fewer seconds remain (default 60)", in: 0..<1e7)
    var minValid: Seconds?
    @Flag("force-refresh", help: "refresh even if the token is fresh")
    var forceRefresh: Bool
    let narrowing = TargetOptions()

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    /// The narrowing options name a valid target.
    func validate() throws(ValidationError) { try narrowing.validate() }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let minimum = minValid?.value ?? Grant.freshnessMargin
        let output = try TokenOutput.fresh(
            name, minimumValidity: minimum, force: forceRefresh, target: try narrowing.target(ctx), ctx: ctx,
            command: "token")
        Commands.warnIfShort(
            name, expiresAt: output.expiresAt, minimum: minimum, notRefreshedBecause: output.notRefreshedBecause,
            ctx: ctx)
        let token = output.accessToken
        if ctx.output.json {
            try ctx.output.printJSON(output)
        } else {
            var bytes = Array((token + "\n").utf8)
            Console.writeAll(&bytes, fd: 1)
        }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$minValid, $forceRefresh] + narrowing.declarations }
}
