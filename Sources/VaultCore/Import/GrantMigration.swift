public import FoundationEssentials
public import VaultCrypto

/// The fields of a GTMAppAuth or AppAuth saved authorization
/// (`GTMAuthSession` / `OIDAuthState`), for moving it into a grant store.
/// An app reads them from its archive where it can (on Apple platforms,
/// with `NSKeyedUnarchiver`) and fills this in; VaultKit reads no archive.
///
/// Where each field comes from:
/// - `accessToken`, `accessTokenExpirationDate`, `tokenType`, `idToken`:
///   `authState.lastTokenResponse`'s properties of those names;
/// - `refreshToken`: `authState.refreshToken`;
/// - `scope`: `authState.scope` (space-separated);
/// - `issuer`, `authorizationEndpoint`, `tokenEndpoint`: the
///   `OIDServiceConfiguration` of `authState.lastAuthorizationResponse.request`
///   (`issuer`, `authorizationEndpoint`, `tokenEndpoint`);
/// - `userinfoEndpoint`, `revocationEndpoint`: that configuration's
///   `discoveryDocument` (`userinfoEndpoint`, `revocation_endpoint`), if any;
/// - `clientID`, `clientSecret`, `redirectURL`: that request's `clientID`,
///   `clientSecret`, `redirectURL`;
/// - `userEmail`: GTMAppAuth's `userEmail` (the grant's account).
public struct AppAuthState: Sendable {
    /// The access token.
    public var accessToken: String?
    /// When the access token expires.
    public var accessTokenExpirationDate: Date?
    /// The token type (`Bearer`).
    public var tokenType: String?
    /// The OpenID Connect ID token.
    public var idToken: String?
    /// The refresh token.
    public var refreshToken: String?
    /// The granted scopes, space-separated.
    public var scope: String?
    /// The issuer, for OpenID Connect providers.
    public var issuer: String?
    /// The authorization endpoint.
    public var authorizationEndpoint: String?
    /// The token endpoint.
    public var tokenEndpoint: String?
    /// The userinfo endpoint, from the discovery document.
    public var userinfoEndpoint: String?
    /// The revocation endpoint, from the discovery document.
    public var revocationEndpoint: String?
    /// The client id the tokens were issued to.
    public var clientID: String?
    /// That client's secret, if it has one.
    public var clientSecret: String?
    /// The redirect URI of the authorization.
    public var redirectURL: String?
    /// GTMAppAuth's `userEmail`.
    public var userEmail: String?

    /// Creates the fields; set those the archive holds.
    public init(
        accessToken: String? = nil, accessTokenExpirationDate: Date? = nil, tokenType: String? = nil,
        idToken: String? = nil, refreshToken: String? = nil, scope: String? = nil, issuer: String? = nil,
        authorizationEndpoint: String? = nil, tokenEndpoint: String? = nil, userinfoEndpoint: String? = nil,
        revocationEndpoint: String? = nil, clientID: String? = nil, clientSecret: String? = nil,
        redirectURL: String? = nil, userEmail: String? = nil
    ) {
        self.accessToken = accessToken
        self.accessTokenExpirationDate = accessTokenExpirationDate
        self.tokenType = tokenType
        self.idToken = idToken
        self.refreshToken = refreshToken
        self.scope = scope
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.userinfoEndpoint = userinfoEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.redirectURL = redirectURL
        self.userEmail = userEmail
    }

    /// The provider the archive describes: its endpoints and its client,
    /// together, named `name`.
    public func provider(named name: String) throws(VaultError) -> Provider {
        guard authorizationEndpoint != nil, tokenEndpoint != nil, let clientID, !clientID.isEmpty else {
            throw VaultError(
                .invalidInput, "the AppAuth state needs its authorization and token endpoints and its client id")
        }
        return try Provider(
            name: name, issuer: issuer, authorizationEndpoint: authorizationEndpoint, tokenEndpoint: tokenEndpoint,
            revocationEndpoint: revocationEndpoint, userinfoEndpoint: userinfoEndpoint,
            scopes: scope.map { $0.split(separator: " ").map(String.init) } ?? [], clientID: clientID,
            clientSecret: clientSecret, redirectURI: redirectURL, publicClient: clientSecret == nil)
    }

    /// The tokens as a token response, checked as one.
    func tokenResponse() throws(VaultError) -> TokenResponse {
        var object: [String: JSONValue] = [:]
        if let accessToken { object["access_token"] = .string(accessToken) }
        if let refreshToken { object["refresh_token"] = .string(refreshToken) }
        if let tokenType { object["token_type"] = .string(tokenType) }
        if let idToken { object["id_token"] = .string(idToken) }
        if let scope { object["scope"] = .string(scope) }
        if let expiry = accessTokenExpirationDate { object["expires_at"] = .number(Double(expiry.epochSeconds)) }
        var data: Data
        do { data = try JSONEncoder().encode(JSONValue.object(object)) } catch {
            throw VaultError(.invalidInput, "the AppAuth state cannot be read as tokens")
        }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        return try TokenResponse(json: try Secure.copy(data))
    }
}

extension Grant {
    /// A grant from a token response an app already holds (the JSON the
    /// token endpoint answered), issued through `provider`: the provider's
    /// endpoints and client are kept with it, so that it refreshes and is
    /// revoked as if VaultKit had authorized it. `account` names it, else
    /// the ID token's email or subject (unverified: a label only). Save it
    /// with `store.save(grant, as:)`.
    public init(tokenResponse json: SecureBytes, provider: Provider, account: String? = nil, now: Date = Date())
        throws(VaultError)
    {
        try self.init(migrating: try TokenResponse(json: json), provider: provider, account: account, now: now)
    }

    /// A grant from a GTMAppAuth or AppAuth saved authorization, with the
    /// archive's own endpoints and client (they travel together), under
    /// the provider name `providerName`.
    public init(appAuth state: AppAuthState, providerName: String, now: Date = Date()) throws(VaultError) {
        try self.init(
            migrating: try state.tokenResponse(), provider: try state.provider(named: providerName),
            account: state.userEmail, now: now)
    }

    /// A grant from a GTMAppAuth or AppAuth saved authorization whose
    /// endpoints and client are taken from `provider` instead of the
    /// archive (none of the archive's configuration is kept). The archive's
    /// client id, when it has one, must be the provider's: tokens refresh
    /// only with the client they were issued to.
    public init(appAuth state: AppAuthState, provider: Provider, now: Date = Date()) throws(VaultError) {
        if let archived = state.clientID, archived != provider.clientID {
            throw VaultError(
                .invalidInput, "the AppAuth state's client is not the client of provider '\(provider.name)'")
        }
        try self.init(migrating: try state.tokenResponse(), provider: provider, account: state.userEmail, now: now)
    }

    /// The grant `response` gives through `provider`, refreshable when it
    /// has a refresh token.
    init(migrating response: TokenResponse, provider: Provider, account: String?, now: Date) throws(VaultError) {
        guard response.accessToken != nil || response.refreshToken != nil else {
            throw VaultError(.invalidInput, "the tokens have neither an access token nor a refresh token")
        }
        // A DPoP-bound token (RFC 9449) is of no use without its key, which
        // neither a token response nor an archive carries: migrated, it
        // would be sent as a bearer token and refreshed without a proof.
        if response.tokenType?.lowercased() == "dpop" {
            throw VaultError(
                .invalidInput, "the tokens are bound to a DPoP key that does not come with them: authorize again")
        }
        if response.refreshToken != nil, provider.tokenEndpoint == nil || provider.clientID == nil {
            throw VaultError(
                .invalidInput,
                "provider '\(provider.name)' needs a token endpoint and a client id to refresh the migrated grant")
        }
        self = response.grant(
            provider: provider.name, account: account ?? response.idToken.flatMap(IDTokenClaims.unverifiedAccount),
            now: now)
        providerConfiguration = provider.storedConfiguration
    }
}
