internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// What `vault providers --json` prints: never the client secret itself.
struct ProviderSummary: Encodable {
    let name: String
    let displayName: String?
    let source: String
    /// The flows whose endpoints are known without the network.
    let flows: [String]
    /// The flows that wait for the issuer's discovery document at 'vault
    /// add' (it may name no endpoint for them); nil when none do.
    let flowsFromDiscovery: [String]?
    let issuer, authorizationEndpoint, tokenEndpoint, deviceAuthorizationEndpoint: String?
    let revocationEndpoint, userinfoEndpoint, clientID, redirectURI: String?
    let scopes, gitHosts: [String]
    let hasClientSecret: Bool
    /// Where clients can register themselves (RFC 7591), when known without the network.
    let registrationEndpoint: String?
    /// Dynamic registration: `yes` (an endpoint is known), `discovery` (the
    /// issuer's discovery document says, at 'vault add'), or `no`.
    let dynamicRegistration: String
    /// True until a client id is configured: `vault add` then says how to register one.
    let needsClient: Bool
    let notes: String?
    /// The refresh-token policy as a provider file writes it.
    let refreshTokenPolicy: [String: JSONValue]?
    /// Pushed authorization requests (RFC 9126): where, and whether the provider takes no other.
    let pushedAuthorizationRequestEndpoint: String?
    let requirePushedAuthorizationRequests: Bool
    /// The provider names itself (`iss`) in every authorization answer (RFC 9207).
    let authorizationResponseIssParameterSupported: Bool
    /// DPoP (RFC 9449): the algorithms the provider lists, and whether it binds every grant.
    let dpopSigningAlgValuesSupported: [String]?
    let dpopBoundAccessTokens: Bool
    /// The grant types the provider lists, and so whether it offers RFC 8693
    /// token exchange (`vault token --exchange`); nil when it lists none.
    let grantTypesSupported: [String]?
    let tokenExchange: Bool?

    init(_ p: Provider) {
        name = p.name
        displayName = p.displayName
        source = p.source
        let (known, discovered) = ProviderSummary.flows(p)
        flows = known
        flowsFromDiscovery = discovered.isEmpty ? nil : discovered
        issuer = p.issuer
        authorizationEndpoint = p.authorizationEndpoint
        tokenEndpoint = p.tokenEndpoint
        deviceAuthorizationEndpoint = p.deviceAuthorizationEndpoint
        revocationEndpoint = p.revocationEndpoint
        userinfoEndpoint = p.userinfoEndpoint
        clientID = p.clientID
        redirectURI = p.redirectURI
        scopes = p.scopes
        gitHosts = p.gitHosts
        hasClientSecret = p.clientSecret != nil
        registrationEndpoint = p.registrationEndpoint
        dynamicRegistration =
            p.registrationEndpoint != nil ? "yes" : (p.issuer != nil && p.tokenEndpoint == nil ? "discovery" : "no")
        needsClient = p.clientID == nil
        notes = p.notes
        pushedAuthorizationRequestEndpoint = p.pushedAuthorizationRequestEndpoint
        requirePushedAuthorizationRequests = p.requirePushedAuthorizationRequests
        authorizationResponseIssParameterSupported = p.authorizationResponseIssParameterSupported
        dpopSigningAlgValuesSupported = p.dpopSigningAlgValuesSupported
        dpopBoundAccessTokens = p.dpopBoundAccessTokens
        grantTypesSupported = p.grantTypesSupported
        tokenExchange = p.grantTypesSupported.map { $0.contains("urn:ietf:params:oauth:grant-type:token-exchange") }
        refreshTokenPolicy = p.refreshTokenPolicy.map { policy in
            var o: [String: JSONValue] = [:]
            if let v = policy.lifetime { o["lifetime"] = .string(RefreshTokenPolicy.text(v)) }
            if let v = policy.inactivity { o["inactivity"] = .string(RefreshTokenPolicy.text(v)) }
            if let v = policy.rotates { o["rotates"] = .bool(v) }
            if let v = policy.reuse { o["reuse"] = .string(v.rawValue) }
            if let v = policy.source { o["source"] = .string(v) }
            if let v = policy.notes { o["notes"] = .string(v) }
            return o
        }
    }

    /// `90d unused`, `365d`, `-`: the refresh-token limits in a few words.
    static func limits(_ p: Provider) -> String {
        guard let policy = p.refreshTokenPolicy, policy.hasLimit else { return "-" }
        let parts =
            (policy.lifetime.map { ["\(RefreshTokenPolicy.text($0)) after authorization"] } ?? [])
            + (policy.inactivity.map { ["\(RefreshTokenPolicy.text($0)) unused"] } ?? [])
        return parts.joined(separator: ", ")
    }

    /// The provider's flows whose endpoints its file names, and those whose
    /// endpoint only its issuer's discovery document can give.
    static func flows(_ p: Provider) -> (known: [String], discovered: [String]) {
        let fromDiscovery = p.flows.filter { flow in
            guard p.issuer != nil else { return false }
            switch flow {
            case .browser, .paste: return p.authorizationEndpoint == nil
            case .device: return p.deviceAuthorizationEndpoint == nil
            default: return false
            }
        }
        return (
            p.flows.filter { !fromDiscovery.contains($0) }.map(\.rawValue), fromDiscovery.map(\.rawValue)
        )
    }

    enum CodingKeys: String, CodingKey {
        case name, source, flows, issuer, scopes, notes
        case flowsFromDiscovery = "flows_from_discovery"
        case displayName = "display_name"
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case deviceAuthorizationEndpoint = "device_authorization_endpoint"
        case revocationEndpoint = "revocation_endpoint"
        case userinfoEndpoint = "userinfo_endpoint"
        case clientID = "client_id"
        case redirectURI = "redirect_uri"
        case gitHosts = "git_hosts"
        case hasClientSecret = "has_client_secret"
        case registrationEndpoint = "registration_endpoint"
        case dynamicRegistration = "dynamic_registration"
        case needsClient = "needs_client"
        case refreshTokenPolicy = "refresh_token_policy"
        case pushedAuthorizationRequestEndpoint = "pushed_authorization_request_endpoint"
        case requirePushedAuthorizationRequests = "require_pushed_authorization_requests"
        case authorizationResponseIssParameterSupported = "authorization_response_iss_parameter_supported"
        case dpopSigningAlgValuesSupported = "dpop_signing_alg_values_supported"
        case dpopBoundAccessTokens = "dpop_bound_access_tokens"
        case grantTypesSupported = "grant_types_supported"
        case tokenExchange = "token_exchange"
    }
}

/// `vault providers`.
struct ProvidersCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "providers",
        abstract: "List the OAuth providers vault knows.",
        usage: "providers [{json}]",
        discussion: """
            Presets ship with vault (Google, Microsoft, GitHub, GitLab, LinkedIn, Flickr, Trello,
            Twitter). A JSON file in $XDG_CONFIG_HOME/vault/providers/ adds a provider, or
            overrides the fields of a preset of the same name (for example just "client_id"). See
            docs/providers.md for the fields.
            CLIENT is "needed" until a client id is configured: vault ships none, and 'vault add'
            then says where to register an application and how to give vault its client.
            A flow marked '?' is offered only if the issuer's discovery document names its endpoint
            when 'vault add' asks (--json: flows_from_discovery).
            REFRESH TOKENS DIE is the provider's documented refresh-token policy (--json adds where
            the provider says so); a provider file's "refresh_token_policy" states its own.
            --json also says whether the provider takes pushed authorization requests (RFC 9126)
            and names itself in its authorization answers (RFC 9207), as far as its file says:
            for a provider found by discovery, its issuer says so when a grant is authorized.
            """,
        examples: ["vault providers", "vault providers --json"]
    )

    func run(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals()
        let catalog = ProviderCatalog.load(configDirectory: try ctx.opener.location().configDirectory)
        if ctx.output.json {
            try ctx.output.printJSON(catalog.sorted.map(ProviderSummary.init))
        } else {
            var rows = [["NAME", "FLOWS", "CLIENT", "ENDPOINT", "REFRESH TOKENS DIE", "SOURCE"]]
            for p in catalog.sorted {
                let endpoint = p.issuer ?? p.authorizationEndpoint ?? p.tokenEndpoint ?? "-"
                let host = URLPolicy.schemeAndHost(endpoint).map(\.1) ?? endpoint
                let (known, discovered) = ProviderSummary.flows(p)
                rows.append([
                    p.name, (known + discovered.map { $0 + "?" }).joined(separator: ","),
                    p.clientID == nil ? "needed" : "set", host, ProviderSummary.limits(p), p.source,
                ])
            }
            for line in Format.table(rows) { ctx.output.out(line) }
        }
        for problem in catalog.problems { ctx.output.error(problem.reason) }
        return catalog.problems.isEmpty ? .ok : .failure
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
