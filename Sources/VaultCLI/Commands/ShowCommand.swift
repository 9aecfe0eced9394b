internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultSync

/// `vault show`.
struct ShowCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "show",
        abstract: "Show a grant's details; secrets only with --reveal.",
        usage: "show NAME [{reveal}] [{json}]",
        arguments: [("NAME", "the grant to show")],
        discussion: """
            Shows the grant's provider, account, state, expiry, when its refresh token dies and by
            which rule (and where the provider documents it), scopes and dates, and when a token
            of it was last handed out on this machine. --json adds the provider's last token
            response as it was sent (token_response), its token-like values redacted unless
            --reveal is given.
            """,
        examples: ["vault show work", "vault show work --json --reveal"]
    )

    @Flag("reveal", help: "include the tokens themselves")
    var reveal: Bool

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let vault = try ctx.opener.openVault()
        let grant = try vault.load(name)
        let now = ctx.time.now()
        let lifetimes = GrantLifetimes(location: try ctx.opener.location())
        let s = summary(name, grant, lifetimes: lifetimes, now: now)
        if ctx.output.json {
            try ctx.output.printJSON(s)
            return .ok
        }
        for line in Format.table(rows(name, grant, s, lifetimes: lifetimes, now: now)) { ctx.output.out(line) }
        return .ok
    }

    /// What `--json` prints, and the rows are made from: secrets only with `--reveal`.
    private func summary(_ name: String, _ grant: Grant, lifetimes: GrantLifetimes, now: Date) -> GrantSummary {
        var s = lifetimes.summary(name, grant, now: now)
        let reveal = reveal
        let response = grant.tokenResponse.map { JSONValue.object($0) }
        s.tokenResponse = reveal ? response : response?.redacted()
        if let config = grant.providerConfiguration, config.namesEndpoints {
            s.endpointsSource = config.endpointsSource ?? "unknown"
        }
        if grant.kind == .oauth2 {
            s.addAuthorizationFeatures(grant, provider: lifetimes.catalog.providers[grant.provider])
        }
        let registered = grant.providerConfiguration.flatMap(RegisteredClient.init)
        if let registered {
            var o: [String: JSONValue] = [
                "registration_endpoint": .string(registered.endpoint),
                "deletable": .bool(registered.clientURI != nil),
            ]
            if let uri = registered.clientURI { o["registration_client_uri"] = .string(uri) }
            if reveal, let token = registered.accessToken { o["registration_access_token"] = .string(token) }
            s.clientRegistration = o
        }
        if !grant.derivedTokens.isEmpty {
            s.narrowedTokens = grant.derivedTokens.map { token in
                let t = token.target
                var o: [String: JSONValue] = [
                    "scopes": .array(t.scopes.map(JSONValue.string)), "exchange": .bool(t.exchange),
                    "usable_until": .number(Double(token.usableUntil.epochSeconds)),
                ]
                if let resource = t.resource { o["resource"] = .string(resource) }
                if let audience = t.audience { o["audience"] = .string(audience) }
                if reveal { o["access_token"] = .string(token.accessToken) }
                return .object(o)
            }
        }
        if reveal {
            s.accessToken = grant.accessToken
            s.refreshToken = grant.refreshToken
            s.idToken = grant.idToken
            s.tokenSecret = grant.tokenSecret
        }
        return s
    }

    /// The lines of the text form, label and value.
    private func rows(_ name: String, _ grant: Grant, _ s: GrantSummary, lifetimes: GrantLifetimes, now: Date)
        -> [[String]]
    {
        let registered = grant.providerConfiguration.flatMap(RegisteredClient.init)
        func present(_ has: Bool) -> String { has ? (reveal ? "" : "present (use --reveal to show)") : "none" }
        var rows: [[String]] = [
            ["name:", s.name], ["provider:", s.provider], ["account:", s.account ?? "-"], ["state:", s.state],
            ["expires:", grant.expiresAt.map { "\(Format.timestamp($0)) (\(Format.relative($0, now: now)))" } ?? "-"],
            ["scopes:", s.scopes.isEmpty ? "-" : s.scopes.joined(separator: " ")],
            ["token type:", s.tokenType ?? "-"],
        ]
        rows.append(["access token:", s.accessToken ?? present(s.hasAccessToken)])
        if let alg = s.dpopAlg, let jkt = s.dpopJkt {
            rows.append(["bound to:", "a DPoP key kept in the vault (\(alg), thumbprint \(jkt))"])
        }
        rows.append(["refresh token:", s.refreshToken ?? present(s.hasRefreshToken)])
        if let deadline = lifetimes.deadline(grant) {
            let end = deadline.date
            rows.append([
                "refresh until:",
                "\(Format.timestamp(end)) (\(Format.relative(end, now: now))), \(GrantLifetimes.ruleText(deadline))"
                    + (deadline.renewable ? "; a refresh before then moves it ('vault keepalive')" : ""),
            ])
        } else if grant.refreshToken != nil && grant.kind == .oauth2 && !grant.dead {
            rows.append(["refresh until:", "unknown (the provider documents no limit vault knows of)"])
        }
        if let source = s.refreshTokenPolicySource { rows.append(["policy from:", source]) }
        rows.append(["id token:", s.idToken ?? present(s.hasIDToken)])
        if grant.kind == .oauth1 { rows.append(["token secret:", s.tokenSecret ?? present(true)]) }
        if grant.kind.mintsTokens, let config = grant.providerConfiguration {
            // The machine's own credentials are never printed, --reveal or not.
            let serviceAccount = grant.kind == .serviceAccount
            rows.append(["kind:", serviceAccount ? "service account (RFC 7523)" : "client credentials"])
            let credential = config.clientPrivateKey != nil ? "private key" : "client secret"
            rows.append([credential + ":", "kept in the vault, never shown"])
            if !serviceAccount {
                rows.append(["client authentication:", config.tokenEndpointAuthMethod ?? "client_secret_basic"])
            }
            if let kid = config.clientKeyID { rows.append(["key id:", kid]) }
            if let subject = config.subject { rows.append(["acting for:", subject]) }
        }
        if let endpoint = grant.providerConfiguration?.tokenEndpoint { rows.append(["token endpoint:", endpoint]) }
        if let source = s.endpointsSource { rows.append(["endpoints from:", source]) }
        // Only what differs from a plain authorization gets a line of its own.
        if let par = s.pushedAuthorizationRequests, par != "in the address" {
            rows.append(["authorization request:", par])
        }
        if let iss = s.authorizationResponseIss, iss != "compared when present" && iss != "not checked (no issuer)" {
            rows.append(["answer's issuer (iss):", iss])
        }
        if let registered {
            let deletion =
                registered.clientURI != nil
                ? "'vault remove \(name) --revoke' deletes it" : "the provider offers no way to delete it"
            rows.append(["client:", "registered by vault at \(registered.endpoint) (RFC 7591); \(deletion)"])
            if reveal, let token = registered.accessToken { rows.append(["registration token:", token]) }
        }
        for token in grant.derivedTokens {
            let how = token.target.exchange ? "token exchange" : "refresh"
            rows.append([
                "narrowed token:",
                "\(token.target.description) (\(how)), usable until \(Format.timestamp(token.usableUntil))"
                    + (reveal ? ": \(token.accessToken)" : ""),
            ])
        }
        rows.append(["created:", Format.timestamp(grant.createdAt)])
        rows.append(["refreshed:", grant.refreshedAt.map(Format.timestamp) ?? "-"])
        rows.append(["last used:", s.lastUsed.map { "\($0) (on this machine)" } ?? "-"])
        if grant.dead { rows.append(["dead because:", grant.deadReason ?? "refused by the provider"]) }
        return rows
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$reveal] }
}
