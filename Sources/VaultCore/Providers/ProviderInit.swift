public import FoundationEssentials

extension Provider {
    /// Describes a provider in code (an app that knows its provider need
    /// not write a provider file). Endpoints must be https, or http to a
    /// loopback address; flows must have their endpoints. For OpenID Connect
    /// issuers, `Discovery.provider` fills the endpoints instead.
    public init(
        name: String, issuer: String? = nil, authorizationEndpoint: String? = nil, tokenEndpoint: String?,
        deviceAuthorizationEndpoint: String? = nil, revocationEndpoint: String? = nil,
        userinfoEndpoint: String? = nil, scopes: [String] = [], clientID: String?, clientSecret: String? = nil,
        authorizationParams: [String: String] = [:], flows: [Flow] = [.browser, .device, .paste],
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
    /// one sent with the authorization request, checked in the ID token.
    public func exchange(
        code: String, codeVerifier: String, redirectURI: String, provider: Provider, scopes: [String] = [],
        nonce: String? = nil
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
            ], what: "exchanging the authorization code")
        return try grant(from: response, request: request, nonce: nonce)
    }
}
