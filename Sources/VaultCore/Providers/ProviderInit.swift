import FoundationEssentials

extension Provider {
    /// Describes a provider in code (an app that knows its provider need
    /// not write a provider file). Endpoints must be https, or http to a
    /// loopback address; flows must have their endpoints, and default to
    /// those the endpoints allow (never client credentials). For OpenID
    /// Connect issuers, `Discovery.provider` fills the endpoints instead.
    public init(
        name: String, issuer: String? = nil, authorizationEndpoint: String? = nil, tokenEndpoint: String?,
        deviceAuthorizationEndpoint: String? = nil, revocationEndpoint: String? = nil,
        userinfoEndpoint: String? = nil, scopes: [String] = [], clientID: String?, clientSecret: String? = nil,
        authorizationParams: [String: String] = [:], flows: [Flow]? = nil,
        redirectURI: String? = nil, tokenEndpointAuthMethod: String = "client_secret_basic",
        publicClient: Bool = false
    ) throws(VaultError) {
        var file = ProviderFile()
        file.name = name
        file.issuer = issuer
        file.authorization_endpoint = authorizationEndpoint
        file.token_endpoint = tokenEndpoint
        file.device_authorization_endpoint = deviceAuthorizationEndpoint
        file.revocation_endpoint = revocationEndpoint
        file.userinfo_endpoint = userinfoEndpoint
        file.scopes = scopes
        file.client_id = clientID
        file.client_secret = clientSecret
        file.authorization_params = authorizationParams
        file.flows = flows
        file.redirect_uri = redirectURI
        file.token_endpoint_auth_method = tokenEndpointAuthMethod
        file.public_client = publicClient
        try self.init(file: file, source: "the app")
    }
}

extension Authorizer {
    /// Exchanges an authorization code the app obtained itself (its own
    /// browser step, with PKCE) for a grant; stores nothing. `nonce` is the
    /// one sent with the authorization request, checked in the ID token;
    /// `extras` are added to the token request.
    public func exchange(
        code: String, codeVerifier: String, redirectURI: String, provider: Provider, scopes: [String] = [],
        nonce: String? = nil, extras: TokenRequestExtras = .none
    ) throws(VaultError) -> Grant {
        guard let tokenEndpoint = provider.tokenEndpoint, provider.clientID != nil else {
            throw VaultError(.invalidInput, "provider '\(provider.name)' needs a token endpoint and a client id")
        }
        let request = AuthorizationRequest(provider: provider, flow: .browser, scopes: scopes)
        let endpoint = TokenEndpoint(transport: transport, client: OAuthClient(provider))
        let response = try endpoint.tokenResponse(
            tokenEndpoint,
            form: [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                ("code_verifier", codeVerifier),
            ], what: "exchanging the authorization code", extras: extras)
        return try grant(from: response, request: request, nonce: nonce)
    }
}

extension Provider {
    /// The provider a stored grant was authorized with, for authorizing it
    /// again (`vault add NAME`, as `gh auth refresh` does): the grant's own
    /// endpoints and client, completed by `base` (the configured provider of
    /// that name, when there is one) with what a grant does not keep: the
    /// default scopes, the flows, OAuth 1.0a's request token endpoint.
    /// Without `base`, the flows are those the stored endpoints allow.
    package init(storedIn grant: Grant, name: String, base: Provider?) throws(VaultError) {
        let c = grant.providerConfiguration ?? ProviderConfiguration()
        guard var p = base?.resolved() else {
            var f = ProviderFile()
            f.name = grant.provider
            f.protocol = grant.kind.rawValue
            f.issuer = c.issuer
            f.authorization_endpoint = c.authorizationEndpoint
            f.token_endpoint = c.tokenEndpoint
            f.device_authorization_endpoint = c.deviceAuthorizationEndpoint
            f.revocation_endpoint = c.revocationEndpoint
            f.userinfo_endpoint = c.userinfoEndpoint
            f.client_id = c.clientID
            f.client_secret = c.clientSecret
            f.token_endpoint_auth_method = c.tokenEndpointAuthMethod
            f.signature_method = c.signatureMethod
            f.redirect_uri = c.redirectURI
            f.authorization_params = c.authorizationParams
            f.account_claim = c.accountClaim
            f.error_aliases = c.errorAliases
            f.errors_with_http_200 = c.errorsWithHTTP200
            f.empty_400_is_invalid_grant = c.empty400IsInvalidGrant
            f.scopes = grant.scopes
            let flows = Flow.forPeople(
                authorizationEndpoint: c.authorizationEndpoint != nil,
                deviceEndpoint: c.deviceAuthorizationEndpoint != nil && grant.kind == .oauth2)
            guard !flows.isEmpty, c.tokenEndpoint != nil else {
                throw VaultError(
                    .invalidInput,
                    "grant '\(name)' does not keep where to authorize it, and vault knows no provider "
                        + "'\(grant.provider)'")
            }
            f.flows = flows
            try self.init(file: f, source: "grant '\(name)'")
            storedSource = c.endpointsSource
            registeredClient = RegisteredClient(c)
            return
        }
        // Codes, verifiers and client secrets go only where the configured
        // provider says: endpoints the grant keeps from elsewhere (an
        // imported file) are refused rather than combined with them.
        // A provider known by its issuer alone has its endpoints from
        // discovery: the grant's, found there when it was added, stand.
        let discovered = base!.issuer != nil && c.issuer == base!.issuer && c.endpointsSource != "imported file"
        if let differ = c.endpoints(notOf: base!).first(where: { !(discovered && $0.provider == nil) }) {
            throw VaultError(
                .invalidInput,
                "grant '\(name)' keeps \(differ.field) \(differ.own), but provider '\(grant.provider)' has "
                    + (differ.provider ?? "none")
                    + ": a grant is authorized again only at its provider's own endpoints",
                remedy: .addFromProvider(provider: grant.provider, grant: name))
        }
        // The grant's own values win: they are what its client was registered with.
        p.issuer = c.issuer ?? p.issuer
        p.authorizationEndpoint = c.authorizationEndpoint ?? p.authorizationEndpoint
        p.tokenEndpoint = c.tokenEndpoint ?? p.tokenEndpoint
        p.deviceAuthorizationEndpoint = c.deviceAuthorizationEndpoint ?? p.deviceAuthorizationEndpoint
        p.revocationEndpoint = c.revocationEndpoint ?? p.revocationEndpoint
        p.userinfoEndpoint = c.userinfoEndpoint ?? p.userinfoEndpoint
        if let id = c.clientID {
            // A secret belongs to its client: never the file's with the grant's id.
            p.clientID = id
            p.clientSecret = c.clientSecret
            // A client vault registered stays the grant's, with what deletes it.
            p.registeredClient = RegisteredClient(c)
        }
        if let method = c.tokenEndpointAuthMethod { p.tokenEndpointAuthMethod = method }
        if let method = c.signatureMethod.flatMap(OAuth1SignatureMethod.init(rawValue:)) { p.signatureMethod = method }
        p.redirectURI = c.redirectURI ?? p.redirectURI
        p.authorizationParams = c.authorizationParams ?? p.authorizationParams
        p.accountClaim = c.accountClaim ?? p.accountClaim
        if c.errorAliases != nil || c.errorsWithHTTP200 != nil || c.empty400IsInvalidGrant != nil {
            p.errorQuirks = c.errorQuirks
        }
        if !grant.scopes.isEmpty { p.scopes = grant.scopes }
        try p.validate()
        self = p
    }
}
