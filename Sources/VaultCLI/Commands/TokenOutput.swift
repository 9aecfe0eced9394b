internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// What `vault token --json` prints.
struct TokenOutput: Encodable {
    let accessToken: String
    let tokenType: String
    let expiresAt: Int64?
    /// Why the token was not refreshed though it has less validity than
    /// asked, when the refresh made by this process was kept from it; not
    /// printed with the token.
    var notRefreshedBecause: String? = nil

    enum CodingKeys: String, CodingKey {
        case accessToken = "access_token"
        case tokenType = "token_type"
        case expiresAt = "expires_at"
    }
}

extension TokenOutput {
    /// A fresh access token of grant `name` (narrowed to `target`, when
    /// given): through a forwarded agent, this vault's agent, or the vault
    /// itself, as `vault token` gets it (docs/cli.md).
    static func fresh(
        _ name: String, minimumValidity minimum: Double, force: Bool, target: TokenTarget?, ctx: Context,
        opener: VaultOpener? = nil, command: String
    ) throws -> TokenOutput {
        let location = try ctx.opener.location()
        if let target {
            let grant = try Commands.narrowedGrant(
                name, target: target, minimumValidity: minimum, force: force, ctx: ctx)
            return TokenOutput(grant)
        } else if let forwarded = try ctx.agents.forwarded(for: location) {
            // The agent's machine decides when to refresh; a forwarded
            // client cannot make it spend a refresh token.
            if force {
                throw CLIError.usage("--force-refresh needs the vault, not a forwarded agent", command: command)
            }
            return TokenOutput(try forwarded.token(name, minimumValidity: minimum, claims: .ofThisProcess()))
        } else if let handed = try ctx.agents.token(
            name, at: location, minimumValidity: minimum, forceRefresh: force)
        {
            return TokenOutput(
                accessToken: handed.accessToken, tokenType: handed.tokenType, expiresAt: handed.expiresAtSeconds)
        } else {
            let fresh = try Commands.handOutFresh(
                name, from: try (opener ?? ctx.opener).openVault(), minimumValidity: minimum, force: force, ctx: ctx)
            var output = TokenOutput(fresh.grant)
            output.notRefreshedBecause = fresh.notRefreshedBecause
            return output
        }
    }

    /// The access token a grant holds.
    init(_ grant: Grant) {
        self.init(
            accessToken: grant.accessToken ?? "", tokenType: grant.tokenType ?? "Bearer",
            expiresAt: grant.expiresAt?.epochSeconds)
    }
}
