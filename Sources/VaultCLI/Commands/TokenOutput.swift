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
            try ctx.opener.checkUnusedKeyfile(at: location)
            return TokenOutput(
                accessToken: handed.accessToken, tokenType: Self.standardType(handed.tokenType),
                expiresAt: handed.expiresAtSeconds)
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
            accessToken: grant.accessToken ?? "", tokenType: Self.standardType(grant.tokenType),
            expiresAt: grant.expiresAt?.epochSeconds)
    }

    /// The token type as programs are handed it (`token --json`, `env`,
    /// `exec`): `Bearer` (RFC 6750) and `DPoP` (RFC 9449) spelled as their
    /// RFCs write them, whatever case the provider used (the type is
    /// case-insensitive, RFC 6749 section 5.1), so a script compares one
    /// string; another type as the provider sent it; none is `Bearer`.
    static func standardType(_ type: String?) -> String {
        guard let type else { return "Bearer" }
        switch type.lowercased() {
        case "bearer": return "Bearer"
        case "dpop": return "DPoP"
        default: return type
        }
    }
}
