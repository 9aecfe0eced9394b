public import FoundationEssentials

/// What an OAuth authorization leaves behind, stored under a name.
///
/// Token strings are ordinary Swift strings while in use; at rest they are
/// only ever inside a record's ciphertext.
public struct Grant: Equatable, Sendable {
    /// OAuth protocol of the grant.
    public enum Kind: String, Codable, Sendable {
        /// OAuth 2.0 or OpenID Connect.
        case oauth2
        /// OAuth 1.0a (token and token secret).
        case oauth1
    }

    /// Provider name (a preset or a user provider file).
    public var provider: String
    /// OAuth protocol.
    public var kind: Kind
    /// The e-mail address or subject the grant belongs to.
    public var account: String?
    /// Access token (OAuth 1.0a: the token).
    public var accessToken: String?
    /// Refresh token.
    public var refreshToken: String?
    /// Token type, usually `Bearer`.
    public var tokenType: String?
    /// When the access token expires; `nil` when the provider gave no expiry.
    public var expiresAt: Date?
    /// Scopes granted.
    public var scopes: [String]
    /// OpenID Connect ID token.
    public var idToken: String?
    /// OAuth 1.0a token secret.
    public var tokenSecret: String?
    /// Endpoints and client needed to refresh or revoke the grant.
    public var providerConfiguration: ProviderConfiguration?
    /// When the grant was first stored.
    public var createdAt: Date
    /// When the grant was last refreshed.
    public var refreshedAt: Date?
    /// True once the provider refused the grant: it needs a new authorization.
    public var dead: Bool
    /// The provider's error code that made the grant dead.
    public var deadReason: String?
    /// Whether the provider rotates this grant's refresh token, as learned
    /// from its last refresh answer (nil until one was seen). A grant whose
    /// refresh token does not rotate can be refreshed by two machines
    /// without harm, so it needs no cross-machine lease.
    public var refreshTokenRotates: Bool?
    /// When the refresh token expires, when the provider said so
    /// (`refresh_token_expires_in`: GitHub Apps, Microsoft).
    public var refreshTokenExpiresAt: Date?
    /// The provider's last token response, as sent, without the tokens
    /// that have fields of their own (access, refresh and ID token).
    public var tokenResponse: [String: JSONValue]?

    /// Creates a grant.
    public init(
        provider: String, kind: Kind = .oauth2, account: String? = nil, accessToken: String? = nil,
        refreshToken: String? = nil, tokenType: String? = nil, expiresAt: Date? = nil, scopes: [String] = [],
        idToken: String? = nil, tokenSecret: String? = nil, providerConfiguration: ProviderConfiguration? = nil,
        createdAt: Date, refreshedAt: Date? = nil, dead: Bool = false, deadReason: String? = nil,
        refreshTokenRotates: Bool? = nil, refreshTokenExpiresAt: Date? = nil, tokenResponse: [String: JSONValue]? = nil
    ) {
        self.provider = provider
        self.kind = kind
        self.account = account
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.scopes = scopes
        self.idToken = idToken
        self.tokenSecret = tokenSecret
        self.providerConfiguration = providerConfiguration
        self.createdAt = createdAt
        self.refreshedAt = refreshedAt
        self.dead = dead
        self.deadReason = deadReason
        self.refreshTokenRotates = refreshTokenRotates
        self.refreshTokenExpiresAt = refreshTokenExpiresAt
        self.tokenResponse = tokenResponse
    }

    /// Seconds of validity an access token must still have to count as
    /// fresh (AppAuth's tolerance).
    public static let freshnessMargin: TimeInterval = 60

    /// The grant's state at `now`.
    public func state(at now: Date, margin: TimeInterval = Grant.freshnessMargin) -> GrantState {
        if dead { return .dead }
        if accessToken != nil || tokenSecret != nil {
            guard let expiresAt else { return .fresh }
            if expiresAt.timeIntervalSince(now) > margin { return .fresh }
        }
        // A refresh token the provider said has expired renews nothing.
        if let end = refreshTokenExpiresAt, end <= now { return .expired }
        return hasRefreshRoute ? .refreshable : .expired
    }

    /// True when the grant has a refresh token and keeps what spending it
    /// needs: a token endpoint and a client id. A refresh token without
    /// them renews nothing, so such a grant is never shown as refreshable.
    package var hasRefreshRoute: Bool {
        refreshToken != nil && providerConfiguration?.tokenEndpoint != nil && providerConfiguration?.clientID != nil
    }

    /// True when the grant has an access token with more than
    /// `minimumValidity` seconds left at `now` and was not refused.
    public func isUsable(minimumValidity: TimeInterval = Grant.freshnessMargin, at now: Date) -> Bool {
        guard !dead, accessToken != nil || tokenSecret != nil else { return false }
        guard let expiresAt else { return true }
        return expiresAt.timeIntervalSince(now) > minimumValidity
    }

    /// GTMAppAuth's `canAuthorize`: a usable access token or a refresh
    /// token not known to have expired (with the token endpoint and client
    /// to spend it), and not marked dead.
    public func canAuthorize(at now: Date) -> Bool {
        if dead { return false }
        if hasRefreshRoute, refreshTokenExpiresAt.map({ $0 > now }) ?? true { return true }
        guard accessToken != nil || tokenSecret != nil else { return false }
        return expiresAt.map { $0 > now } ?? true
    }
}

/// Where a grant stands, as `vault list` shows it.
public enum GrantState: String, Codable, Sendable {
    /// The access token has more than the freshness margin left.
    case fresh
    /// The access token is (nearly) expired but a refresh token can renew it.
    case refreshable
    /// Expired with no way to renew it.
    case expired
    /// The provider refused the grant.
    case dead
}

/// The parts of a provider that a stored grant needs later: endpoints and
/// client. Field names match provider files (docs/providers.md).
public struct ProviderConfiguration: Codable, Equatable, Sendable {
    /// The provider's name.
    public var name: String?
    /// The OpenID Connect issuer, for ID token checks.
    public var issuer: String?
    /// Where the person authorizes.
    public var authorizationEndpoint: String?
    /// Where codes and refresh tokens are exchanged for tokens.
    public var tokenEndpoint: String?
    /// Where the device flow starts (RFC 8628).
    public var deviceAuthorizationEndpoint: String?
    /// Where tokens are revoked (RFC 7009).
    public var revocationEndpoint: String?
    /// The userinfo endpoint, for the liveness probe.
    public var userinfoEndpoint: String?
    /// The OAuth client id.
    public var clientID: String?
    /// The client secret, for confidential clients; kept encrypted with the grant.
    public var clientSecret: String?
    /// `client_secret_basic` (when absent) or `client_secret_post`.
    public var tokenEndpointAuthMethod: String?
    /// OAuth 1.0a: HMAC-SHA1 (when absent), RSA-SHA1 or PLAINTEXT.
    public var signatureMethod: String?
    /// The provider's own error codes and the standard code each stands for.
    public var errorAliases: [String: String]?
    /// The provider answers errors with HTTP 200 (GitHub).
    public var errorsWithHTTP200: Bool?
    /// The provider answers a spent refresh token with an empty 400 (glewlwyd).
    public var empty400IsInvalidGrant: Bool?
    /// The fixed loopback redirect URI the client was registered with, if any.
    public var redirectURI: String?
    /// Extra query parameters of the authorization request (Google's `access_type`).
    public var authorizationParams: [String: String]?
    /// The userinfo field that names the account.
    public var accountClaim: String?

    /// How the provider's error answers deviate from RFC 6749.
    public var errorQuirks: ErrorQuirks {
        var q = ErrorQuirks()
        q.aliases = errorAliases ?? [:]
        q.errorsWithHTTP200 = errorsWithHTTP200 ?? false
        q.empty400IsInvalidGrant = empty400IsInvalidGrant ?? false
        return q
    }

    /// Creates a configuration.
    public init(
        name: String? = nil, issuer: String? = nil, authorizationEndpoint: String? = nil,
        tokenEndpoint: String? = nil, deviceAuthorizationEndpoint: String? = nil,
        revocationEndpoint: String? = nil, userinfoEndpoint: String? = nil, clientID: String? = nil,
        clientSecret: String? = nil, tokenEndpointAuthMethod: String? = nil, signatureMethod: String? = nil,
        errorQuirks: ErrorQuirks = ErrorQuirks(), redirectURI: String? = nil,
        authorizationParams: [String: String]? = nil, accountClaim: String? = nil
    ) {
        self.name = name
        self.redirectURI = redirectURI
        self.authorizationParams = authorizationParams
        self.accountClaim = accountClaim
        self.issuer = issuer
        self.authorizationEndpoint = authorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.revocationEndpoint = revocationEndpoint
        self.userinfoEndpoint = userinfoEndpoint
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.tokenEndpointAuthMethod = tokenEndpointAuthMethod
        self.signatureMethod = signatureMethod
        // Only what differs from the RFC is stored.
        errorAliases = errorQuirks.aliases.isEmpty ? nil : errorQuirks.aliases
        errorsWithHTTP200 = errorQuirks.errorsWithHTTP200 ? true : nil
        empty400IsInvalidGrant = errorQuirks.empty400IsInvalidGrant ? true : nil
    }

    enum CodingKeys: String, CodingKey {
        case name, issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case deviceAuthorizationEndpoint = "device_authorization_endpoint"
        case revocationEndpoint = "revocation_endpoint"
        case userinfoEndpoint = "userinfo_endpoint"
        case clientID = "client_id"
        case clientSecret = "client_secret"
        case tokenEndpointAuthMethod = "token_endpoint_auth_method"
        case signatureMethod = "signature_method"
        case errorAliases = "error_aliases"
        case errorsWithHTTP200 = "errors_with_http_200"
        case empty400IsInvalidGrant = "empty_400_is_invalid_grant"
        case redirectURI = "redirect_uri"
        case authorizationParams = "authorization_params"
        case accountClaim = "account_claim"
    }
}

extension Grant: Codable {
    /// The grant's stored field names: the one list that both the Codable
    /// form and the fast payload reader (PayloadCodec.swift) go by.
    enum CodingKeys: String, CodingKey, CaseIterable {
        case provider, kind, account, scopes, dead
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case tokenType = "token_type"
        case expiresAt = "expires_at"
        case idToken = "id_token"
        case tokenSecret = "token_secret"
        case providerConfiguration = "provider_config"
        case createdAt = "created_at"
        case refreshedAt = "refreshed_at"
        case deadReason = "dead_reason"
        case refreshTokenRotates = "refresh_token_rotates"
        case refreshTokenExpiresAt = "refresh_token_expires_at"
        case tokenResponse = "token_response"
    }

    /// Decodes a grant from its stored fields (`CodingKeys`).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        provider = try c.decode(String.self, forKey: .provider)
        kind = try c.decodeIfPresent(Kind.self, forKey: .kind) ?? .oauth2
        account = try c.decodeIfPresent(String.self, forKey: .account)
        accessToken = try c.decodeIfPresent(String.self, forKey: .accessToken)
        refreshToken = try c.decodeIfPresent(String.self, forKey: .refreshToken)
        tokenType = try c.decodeIfPresent(String.self, forKey: .tokenType)
        expiresAt = try c.decodeIfPresent(Int64.self, forKey: .expiresAt).map(Date.init(epochSeconds:))
        scopes = try c.decodeIfPresent([String].self, forKey: .scopes) ?? []
        idToken = try c.decodeIfPresent(String.self, forKey: .idToken)
        tokenSecret = try c.decodeIfPresent(String.self, forKey: .tokenSecret)
        providerConfiguration = try c.decodeIfPresent(ProviderConfiguration.self, forKey: .providerConfiguration)
        createdAt = Date(epochSeconds: try c.decode(Int64.self, forKey: .createdAt))
        refreshedAt = try c.decodeIfPresent(Int64.self, forKey: .refreshedAt).map(Date.init(epochSeconds:))
        dead = try c.decodeIfPresent(Bool.self, forKey: .dead) ?? false
        deadReason = try c.decodeIfPresent(String.self, forKey: .deadReason)
        refreshTokenRotates = try c.decodeIfPresent(Bool.self, forKey: .refreshTokenRotates)
        refreshTokenExpiresAt = try c.decodeIfPresent(Int64.self, forKey: .refreshTokenExpiresAt).map(
            Date.init(epochSeconds:))
        tokenResponse = try c.decodeIfPresent([String: JSONValue].self, forKey: .tokenResponse)
    }

    /// Encodes the grant's stored fields (`CodingKeys`).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(provider, forKey: .provider)
        try c.encode(kind, forKey: .kind)
        try c.encodeIfPresent(account, forKey: .account)
        try c.encodeIfPresent(accessToken, forKey: .accessToken)
        try c.encodeIfPresent(refreshToken, forKey: .refreshToken)
        try c.encodeIfPresent(tokenType, forKey: .tokenType)
        try c.encodeIfPresent(expiresAt?.epochSeconds, forKey: .expiresAt)
        try c.encode(scopes, forKey: .scopes)
        try c.encodeIfPresent(idToken, forKey: .idToken)
        try c.encodeIfPresent(tokenSecret, forKey: .tokenSecret)
        try c.encodeIfPresent(providerConfiguration, forKey: .providerConfiguration)
        try c.encode(createdAt.epochSeconds, forKey: .createdAt)
        try c.encodeIfPresent(refreshedAt?.epochSeconds, forKey: .refreshedAt)
        try c.encode(dead, forKey: .dead)
        try c.encodeIfPresent(deadReason, forKey: .deadReason)
        try c.encodeIfPresent(refreshTokenRotates, forKey: .refreshTokenRotates)
        try c.encodeIfPresent(refreshTokenExpiresAt?.epochSeconds, forKey: .refreshTokenExpiresAt)
        try c.encodeIfPresent(tokenResponse, forKey: .tokenResponse)
    }
}

extension Date {
    /// A date from whole seconds since the epoch.
    public init(epochSeconds: Int64) { self.init(timeIntervalSince1970: TimeInterval(epochSeconds)) }
    /// Whole seconds since the epoch, rounded down.
    public var epochSeconds: Int64 { Int64(timeIntervalSince1970.rounded(.down)) }
}

/// The current time, behind a protocol so tests can set it.
public protocol TimeSource: Sendable {
    /// Now.
    func now() -> Date
}

/// The system's wall clock.
public struct SystemTime: TimeSource {
    /// Creates the system clock.
    public init() {}
    /// The current date.
    public func now() -> Date { Date() }
}
