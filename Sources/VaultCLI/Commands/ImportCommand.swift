internal import VaultAgent
internal import VaultCore
internal import VaultSync

extension Commands {
    static let importCommand = Command(
        name: "import",
        abstract: "Store a grant given as JSON on stdin.",
        usage: "import NAME [--replace]",
        arguments: [("NAME", "the name to store the grant under")],
        options: [OptionSpec(name: "replace", valueName: nil, help: "overwrite a grant of the same name")],
        discussion: """
            Standard input holds one JSON object: the fields of an OAuth token response
            (access_token, refresh_token, token_type, expires_in or expires_at in seconds since
            the epoch, refresh_token_expires_in, scope, id_token), plus "provider" and optionally
            "account", "token_secret" (OAuth 1.0a) and "provider_config" (endpoints and client,
            for refresh). Other fields are kept as the token response ('vault show --json').
            Tokens must be printable ASCII and expiry times sensible, as in a refresh.
            """,
        examples: [
            #"vault import work < token.json"#,
            #"printf '%s' "$RESPONSE" | vault import github --replace"#,
        ]
    ) { (ctx: Context) throws(CLIError) -> ExitCode in
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let input = try ctx.readStandardInput(limit: TokenResponse.maximumSize)
        guard input.count > 0 else {
            throw CLIError("standard input is empty", hint: "pipe the token JSON into 'vault import \(name)'")
        }
        let now = ctx.time.now()
        let grant = try vault { () throws(VaultError) in try TokenResponse(json: input).importedGrant(now: now) }
        let store = try ctx.openVault()
        _ = try vault { () throws(VaultError) in
            try store.save(grant, as: name, mode: ctx.arguments.flag("replace") ? .replace : .insertOnly)
        }
        if ctx.json {
            try ctx.printJSON(GrantSummary(name: name, grant: grant, now: now))
        } else {
            ctx.console.info("imported '\(name)' (\(grant.provider)\(grant.account.map { ", " + $0 } ?? ""))")
        }
        return .ok
    }
}
