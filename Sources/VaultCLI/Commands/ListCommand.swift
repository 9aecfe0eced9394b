internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultSync

/// What `list` and `show` print about a grant: never a secret unless asked.
struct GrantSummary: Encodable {
    let name: String
    let provider: String
    let kind: String
    let account: String?
    let state: String
    let expiresAt: Int64?
    let expires: String?
    let scopes: [String]
    let tokenType: String?
    let hasAccessToken: Bool
    let hasRefreshToken: Bool
    let hasIDToken: Bool
    let createdAt: Int64
    let refreshedAt: Int64?
    let deadReason: String?
    let refreshTokenExpiresAt: Int64?
    let refreshTokenExpires: String?
    /// The provider's last token response (`show` only): token-like values
    /// redacted unless revealed.
    var tokenResponse: JSONValue? = nil
    var accessToken: String? = nil
    var refreshToken: String? = nil
    var idToken: String? = nil
    var tokenSecret: String? = nil
    /// `list`: true when the grant is in a sync conflict ('vault conflicts').
    var conflict: Bool? = nil
    /// `show`: where the endpoints and client came from ("preset", "provider
    /// file", "discovery", "imported file"; "unknown" for older grants).
    var endpointsSource: String? = nil
    /// `show`: the client vault registered itself (RFC 7591), if it did;
    /// its registration access token only when revealed.
    var clientRegistration: [String: JSONValue]? = nil
    /// `show`: the narrowed tokens cached with the grant (RFC 8707, RFC
    /// 8693): what each is for and until when; the tokens with --reveal only.
    var narrowedTokens: [JSONValue]? = nil
    /// When the refresh token dies (`GrantLifetimes`), by which rule, and
    /// whether a refresh moves it; nil when nothing is known.
    var refreshTokenDeadlineAt: Int64? = nil
    var refreshTokenDeadline: String? = nil
    var refreshTokenDeadlineRule: String? = nil
    var refreshTokenDeadlineRenewable: Bool? = nil
    /// Where the provider documents its refresh-token policy.
    var refreshTokenPolicySource: String? = nil
    /// `show`: how authorizing the grant again sends the request (RFC 9126):
    /// `pushed`, `pushed (required)`, `in the address`, or `as its issuer says`.
    var pushedAuthorizationRequests: String? = nil
    /// `show`: how the answer's `iss` is checked (RFC 9207): `required`,
    /// `compared when present`, `not checked (no issuer)`, or `as its issuer says`.
    var authorizationResponseIss: String? = nil
    /// DPoP (RFC 9449): the algorithm and thumbprint of the key the
    /// grant's tokens are bound to; nil for bearer tokens.
    let dpopAlg: String?
    let dpopJkt: String?
    /// When a token of the grant was last handed out on this machine (audit log).
    var lastUsedAt: Int64? = nil
    var lastUsed: String? = nil

    init(name: String, grant: Grant, now: Date) {
        self.name = name
        provider = grant.provider
        kind = grant.kind.rawValue
        account = grant.account
        state = GrantSummary.state(of: grant, at: now)
        expiresAt = grant.expiresAt?.epochSeconds
        expires = grant.expiresAt.map(Format.timestamp)
        scopes = grant.scopes
        tokenType = grant.tokenType
        hasAccessToken = grant.accessToken != nil
        hasRefreshToken = grant.refreshToken != nil
        hasIDToken = grant.idToken != nil
        createdAt = grant.createdAt.epochSeconds
        refreshedAt = grant.refreshedAt?.epochSeconds
        deadReason = grant.deadReason
        refreshTokenExpiresAt = grant.refreshTokenExpiresAt?.epochSeconds
        refreshTokenExpires = grant.refreshTokenExpiresAt.map(Format.timestamp)
        dpopAlg = grant.dpopKey?.algorithm
        dpopJkt = grant.dpopKey?.thumbprint
    }

    /// The state `list` and `show` name, here and with --json: the
    /// library's, except that an access token inside its last minute with
    /// nothing to renew it reads `expiring` until it runs out, rather than
    /// `expired` beside an expiry still to come. A token with a minute or
    /// less left is renewed before use (`refreshable`), or, when nothing
    /// can renew it, no longer handed out.
    static func state(of grant: Grant, at now: Date) -> String {
        let state = grant.state(at: now)
        if state == .expired, grant.accessToken != nil || grant.tokenSecret != nil,
            let end = grant.expiresAt, end > now
        {
            return "expiring"
        }
        return state.rawValue
    }

    enum CodingKeys: String, CodingKey {
        case name, provider, kind, account, state, expires, scopes
        case expiresAt = "expires_at"
        case tokenType = "token_type"
        case hasAccessToken = "has_access_token"
        case hasRefreshToken = "has_refresh_token"
        case hasIDToken = "has_id_token"
        case createdAt = "created_at"
        case refreshedAt = "refreshed_at"
        case deadReason = "dead_reason"
        case refreshTokenExpiresAt = "refresh_token_expires_at"
        case refreshTokenExpires = "refresh_token_expires"
        case tokenResponse = "token_response"
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case idToken = "id_token"
        case tokenSecret = "token_secret"
        case conflict
        case endpointsSource = "endpoints_source"
        case clientRegistration = "client_registration"
        case narrowedTokens = "narrowed_tokens"
        case refreshTokenDeadlineAt = "refresh_token_deadline_at"
        case refreshTokenDeadline = "refresh_token_deadline"
        case refreshTokenDeadlineRule = "refresh_token_deadline_rule"
        case refreshTokenDeadlineRenewable = "refresh_token_deadline_renewable"
        case refreshTokenPolicySource = "refresh_token_policy_source"
        case pushedAuthorizationRequests = "pushed_authorization_requests"
        case authorizationResponseIss = "authorization_response_iss"
        case lastUsedAt = "last_used_at"
        case lastUsed = "last_used"
        case dpopAlg = "dpop_alg"
        case dpopJkt = "dpop_jkt"
    }
}

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
            for (g, deadline) in zip(listing.grants, deadlines) {
                let dies = deadline.map { "\(when($0.date)), \(GrantLifetimes.ruleText($0))" } ?? "-"
                rows.append(
                    [
                        g.name, g.grant.provider, g.grant.account ?? "-",
                        GrantSummary.state(of: g.grant, at: now) + (conflicted.contains(g.name) ? " (conflict)" : ""),
                        when(g.grant.expiresAt),
                    ]
                        + (refreshColumn
                            ? [
                                dies, Format.relative(g.grant.refreshedAt ?? g.grant.createdAt, now: now),
                                lifetimes.lastUse[g.name].map { Format.relative($0, now: now) } ?? "-",
                            ] : []))
            }
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

extension GrantSummary {
    /// What authorizing `grant` again (`vault add NAME`) does about pushed
    /// requests and `iss`, from its configured provider: the grant keeps
    /// neither, and a grant found by discovery asks its issuer again.
    mutating func addAuthorizationFeatures(_ grant: Grant, provider: Provider?) {
        let config = grant.providerConfiguration
        guard config?.authorizationEndpoint != nil || provider?.authorizationEndpoint != nil || provider?.issuer != nil
        else { return }
        if config?.endpointsSource == "discovery" || (provider != nil && provider!.tokenEndpoint == nil) {
            let said = provider.map { $0.pushedAuthorizationRequestEndpoint != nil } ?? false
            pushedAuthorizationRequests = said ? "pushed" : "as its issuer says"
            authorizationResponseIss =
                provider?.authorizationResponseIssParameterSupported == true ? "required" : "as its issuer says"
            return
        }
        let p = provider
        pushedAuthorizationRequests =
            p?.pushedAuthorizationRequestEndpoint == nil
            ? "in the address" : (p!.requirePushedAuthorizationRequests ? "pushed (required)" : "pushed")
        authorizationResponseIss =
            p?.authorizationResponseIssParameterSupported == true
            ? "required"
            : (grant.providerConfiguration?.issuer ?? p?.issuer) == nil
                ? "not checked (no issuer)" : "compared when present"
    }
}

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
        if ctx.output.json {
            try ctx.output.printJSON(s)
            return .ok
        }
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
        for line in Format.table(rows) { ctx.output.out(line) }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$reveal] }
}
