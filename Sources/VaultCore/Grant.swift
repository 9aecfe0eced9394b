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
        /// OAuth 2.0 client credentials (RFC 6749 section 4.4): the client
        /// acts for itself, authenticated by its secret or private key
        /// (`private_key_jwt`); tokens are minted, never refreshed.
        case clientCredentials = "client_credentials"
        /// A service account (RFC 7523 section 2.1 JWT bearer, Google's
        /// format): tokens are minted with an assertion signed by the
        /// account's private key.
        case serviceAccount = "service_account"

        /// True for grants a machine holds for itself: a new access token
        /// is minted from the credentials in the provider configuration
        /// whenever needed, with no refresh token and no person involved.
        public var mintsTokens: Bool { self == .clientCredentials || self == .serviceAccount }
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
    /// The key the grant's tokens are bound to (RFC 9449 DPoP); nil for
    /// bearer tokens. It travels with the tokens: refreshed, synced and
    /// removed with them.
    public var dpopKey: DPoPKey?
    /// Access tokens narrowed to a resource, an audience or fewer scopes
    /// (RFC 8707, RFC 8693), newest first: part of the grant's tokens.
    public var derivedTokens: [DerivedToken] = []

    /// Creates a grant.
    public init(
        provider: String, kind: Kind = .oauth2, account: String? = nil, accessToken: String? = nil,
        refreshToken: String? = nil, tokenType: String? = nil, expiresAt: Date? = nil, scopes: [String] = [],
        idToken: String? = nil, tokenSecret: String? = nil, providerConfiguration: ProviderConfiguration? = nil,
        createdAt: Date, refreshedAt: Date? = nil, dead: Bool = false, deadReason: String? = nil,
        refreshTokenRotates: Bool? = nil, refreshTokenExpiresAt: Date? = nil, tokenResponse: [String: JSONValue]? = nil,
        dpopKey: DPoPKey? = nil, derivedTokens: [DerivedToken] = []
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
        self.dpopKey = dpopKey
        self.derivedTokens = derivedTokens
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
        // Machine grants mint a new token from their own credentials.
        if kind.mintsTokens { return .refreshable }
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
        if kind.mintsTokens { return providerConfiguration?.tokenEndpoint != nil }
        if hasRefreshRoute, refreshTokenExpiresAt.map({ $0 > now }) ?? true { return true }
        guard accessToken != nil || tokenSecret != nil else { return false }
        return expiresAt.map { $0 > now } ?? true
    }
}

extension Grant {
    /// What the provider refuses when it refuses this grant
    /// (`invalid_grant`), in the words of its kind: a person's grant its
    /// refresh token, a machine grant the credentials it keeps. The one
    /// wording of doctor, check and the token commands.
    package var refusedCredential: String {
        switch kind {
        case .oauth2: return "the grant's refresh token"
        case .oauth1: return "the grant's token"
        case .clientCredentials: return "the client's credentials"
        case .serviceAccount:
            guard let subject = providerConfiguration?.subject else { return "the service account's key" }
            return "the service account's key, or its right to act for \(subject)"
        }
    }

    /// The provider's refusal of this grant, `code` its error code (the
    /// grant's `deadReason`), and what likely caused it: `the provider
    /// refused the service account's key (invalid_grant): it was deleted or
    /// disabled`.
    package func refusal(_ code: String?) -> String {
        let why: String
        switch kind {
        case .oauth2: why = "it was revoked or expired"
        case .oauth1: why = "it was revoked"
        case .clientCredentials: why = "the client was disabled or deleted, or its secret or key replaced"
        case .serviceAccount:
            why =
                providerConfiguration?.subject == nil
                ? "the key was deleted or disabled" : "the key was deleted or disabled, or the delegation withdrawn"
        }
        return "the provider refused \(refusedCredential)\(code.map { " (\($0))" } ?? ""): \(why)"
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
    /// `client_secret_basic` (when absent), `client_secret_post`, or
    /// `private_key_jwt` (RFC 7523 section 2.2, with `clientPrivateKey`).
    public var tokenEndpointAuthMethod: String?
    /// Machine grants: the PEM (PKCS#8) RSA private key that signs
    /// assertions, a service account's or a `private_key_jwt` client's;
    /// kept encrypted with the grant like the client secret.
    public var clientPrivateKey: String?
    /// Machine grants: the private key's id (`kid`), when the provider gave one.
    public var clientKeyID: String?
    /// Service accounts: the user the assertion acts for (`sub`, Google
    /// Workspace domain-wide delegation); nil for the account itself.
    public var subject: String?
    /// Machine grants: the scopes each new token is asked for.
    public var scopes: [String]?
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
    /// Where the endpoints and client came from, as one unit
    /// (docs/threat-model.md, "Where secrets go"): `preset`, `provider file`,
    /// `discovery` (from an issuer the user named) or `imported file` (the
    /// endpoints an imported token file named, with its own client or
    /// none); nil for grants stored before it was kept.
    public var endpointsSource: String?
    /// `endpointsSource` of endpoints an imported token file named.
    package static let importedEndpoints = "imported file"
    /// Dynamic registration (RFC 7591): the registration endpoint vault
    /// registered this grant's client at; nil for a client registered by a person.
    package var registrationEndpoint: String?
    /// RFC 7592: where the registered client is read and deleted.
    package var registrationClientURI: String?
    /// RFC 7592: the bearer token that manages the registered client; a
    /// secret, kept encrypted with the grant like the client secret.
    package var registrationAccessToken: String?

    /// Forgets a client registration: what an imported file says of one is
    /// not vault's record of a client it registered (it would choose where
    /// `remove --revoke` sends its token).
    package mutating func dropRegistration() {
        registrationEndpoint = nil
        registrationClientURI = nil
        registrationAccessToken = nil
    }

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
        authorizationParams: [String: String]? = nil, accountClaim: String? = nil, endpointsSource: String? = nil
    ) {
        self.name = name
        self.endpointsSource = endpointsSource
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
        case clientPrivateKey = "client_private_key"
        case clientKeyID = "client_key_id"
        case subject, scopes
        case errorAliases = "error_aliases"
        case errorsWithHTTP200 = "errors_with_http_200"
        case empty400IsInvalidGrant = "empty_400_is_invalid_grant"
        case redirectURI = "redirect_uri"
        case authorizationParams = "authorization_params"
        case accountClaim = "account_claim"
        case endpointsSource = "endpoints_source"
        case registrationEndpoint = "registration_endpoint"
        case registrationClientURI = "registration_client_uri"
        case registrationAccessToken = "registration_access_token"
    }
}

/// A stored property of a grant, reached through two plain functions. (Not
/// a key path: key paths are built at run time, which every process that
/// reads a grant paid in start-up time.)
struct GrantProperty<Value> {
    let get: (Grant) -> Value
    let set: (inout Grant, Value) -> Void

    init(_ get: @escaping (Grant) -> Value, set: @escaping (inout Grant, Value) -> Void) {
        self.get = get
        self.set = set
    }
}

extension Grant {
    subscript<Value>(_ property: GrantProperty<Value>) -> Value {
        get { property.get(self) }
        set { property.set(&self, newValue) }
    }
}

/// One stored field of a grant: its key in the record's JSON and the
/// property it fills.
struct GrantField {
    /// The kinds of value a grant stores, each with the property it is in.
    enum Value {
        /// A string that must be present.
        case text(GrantProperty<String>)
        /// A string or nothing; a secret one is not kept when a listing
        /// reads records without secrets.
        case optionalText(GrantProperty<String?>, secret: Bool)
        /// A list of strings, stored even when empty.
        case texts(GrantProperty<[String]>)
        /// Whole seconds since the epoch, required.
        case date(GrantProperty<Date>)
        /// Whole seconds since the epoch, or nothing.
        case optionalDate(GrantProperty<Date?>)
        /// A boolean stored even when false; absent reads as false.
        case flag(GrantProperty<Bool>)
        /// A boolean or nothing.
        case optionalFlag(GrantProperty<Bool?>)
        /// The protocol; absent reads as OAuth 2.0.
        case kind
        /// The endpoints and client.
        case providerConfiguration
        /// A JSON object kept as sent; not read by a listing.
        case object(GrantProperty<[String: JSONValue]?>)
        /// The DPoP key; its private key is a secret.
        case dpopKey
        /// The cached narrowed tokens, stored only when there are some;
        /// not read by a listing.
        case derivedTokens
    }

    let key: String
    let value: Value
    /// The key's UTF-8 bytes, for the payload reader.
    let bytes: [UInt8]

    init(_ key: String, _ value: Value) {
        self.key = key
        self.value = value
        bytes = Array(key.utf8)
    }
}

extension Grant {
    /// Every field a grant stores, in the one place they are listed: the
    /// Codable form and the payload reader (PayloadCodec.swift) both go by
    /// it, matching fields by key, never by position.
    nonisolated(unsafe) static let storedFields: [GrantField] = [
        GrantField("provider", .text(.init({ $0.provider }, set: { $0.provider = $1 }))),
        GrantField("kind", .kind),
        GrantField("account", .optionalText(.init({ $0.account }, set: { $0.account = $1 }), secret: false)),
        GrantField(
            "access_token", .optionalText(.init({ $0.accessToken }, set: { $0.accessToken = $1 }), secret: true)),
        GrantField(
            "refresh_token", .optionalText(.init({ $0.refreshToken }, set: { $0.refreshToken = $1 }), secret: true)),
        GrantField("token_type", .optionalText(.init({ $0.tokenType }, set: { $0.tokenType = $1 }), secret: false)),
        GrantField("expires_at", .optionalDate(.init({ $0.expiresAt }, set: { $0.expiresAt = $1 }))),
        GrantField("scopes", .texts(.init({ $0.scopes }, set: { $0.scopes = $1 }))),
        GrantField("id_token", .optionalText(.init({ $0.idToken }, set: { $0.idToken = $1 }), secret: true)),
        GrantField(
            "token_secret", .optionalText(.init({ $0.tokenSecret }, set: { $0.tokenSecret = $1 }), secret: true)),
        GrantField("provider_config", .providerConfiguration),
        GrantField("created_at", .date(.init({ $0.createdAt }, set: { $0.createdAt = $1 }))),
        GrantField("refreshed_at", .optionalDate(.init({ $0.refreshedAt }, set: { $0.refreshedAt = $1 }))),
        GrantField("dead", .flag(.init({ $0.dead }, set: { $0.dead = $1 }))),
        GrantField("dead_reason", .optionalText(.init({ $0.deadReason }, set: { $0.deadReason = $1 }), secret: false)),
        GrantField(
            "refresh_token_rotates",
            .optionalFlag(.init({ $0.refreshTokenRotates }, set: { $0.refreshTokenRotates = $1 }))),
        GrantField(
            "refresh_token_expires_at",
            .optionalDate(.init({ $0.refreshTokenExpiresAt }, set: { $0.refreshTokenExpiresAt = $1 }))),
        GrantField("token_response", .object(.init({ $0.tokenResponse }, set: { $0.tokenResponse = $1 }))),
        GrantField("dpop_key", .dpopKey),
        GrantField("derived_tokens", .derivedTokens),
    ]

    /// `kind` as stored: a DPoP-bound OAuth 2.0 grant is `oauth2_dpop`, so
    /// a release that cannot sign proofs refuses it rather than spend its
    /// tokens as bearer tokens (and get it refused).
    var storedKind: String { kind == .oauth2 && dpopKey != nil ? Grant.dpopKind : kind.rawValue }

    /// The stored `kind` of a DPoP-bound OAuth 2.0 grant.
    static let dpopKind = "oauth2_dpop"
}

extension Grant: Codable {
    /// A stored field's key.
    private struct FieldKey: CodingKey {
        let stringValue: String
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
        var intValue: Int? { nil }
    }

    /// Decodes a grant from its stored fields (`storedFields`).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FieldKey.self)
        self.init(provider: "", createdAt: Date(epochSeconds: 0))
        var bound = false
        for field in Grant.storedFields {
            let key = FieldKey(stringValue: field.key)
            switch field.value {
            case .text(let path): self[path] = try c.decode(String.self, forKey: key)
            case .optionalText(let path, _): self[path] = try c.decodeIfPresent(String.self, forKey: key)
            case .texts(let path): self[path] = try c.decodeIfPresent([String].self, forKey: key) ?? []
            case .date(let path): self[path] = Date(epochSeconds: try c.decode(Int64.self, forKey: key))
            case .optionalDate(let path):
                self[path] = try c.decodeIfPresent(Int64.self, forKey: key).map(Date.init(epochSeconds:))
            case .flag(let path): self[path] = try c.decodeIfPresent(Bool.self, forKey: key) ?? false
            case .optionalFlag(let path): self[path] = try c.decodeIfPresent(Bool.self, forKey: key)
            case .kind:
                let raw = try c.decodeIfPresent(String.self, forKey: key)
                bound = raw == Grant.dpopKind
                guard let k = bound ? .oauth2 : raw.map({ Kind(rawValue: $0) }) ?? .oauth2 else {
                    throw DecodingError.dataCorruptedError(forKey: key, in: c, debugDescription: "unknown kind")
                }
                kind = k
            case .providerConfiguration:
                providerConfiguration = try c.decodeIfPresent(ProviderConfiguration.self, forKey: key)
            case .object(let path):
                self[path] = try c.decodeIfPresent([String: JSONValue].self, forKey: key)
            case .dpopKey:
                dpopKey = try c.decodeIfPresent(DPoPKey.Stored.self, forKey: key)?.key
            case .derivedTokens:
                derivedTokens = try c.decodeIfPresent([DerivedToken].self, forKey: key) ?? []
            }
        }
        guard bound == (dpopKey != nil) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: [], debugDescription: "a DPoP key without kind oauth2_dpop, or the reverse"))
        }
    }

    /// Encodes the grant's stored fields (`storedFields`).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FieldKey.self)
        for field in Grant.storedFields {
            let key = FieldKey(stringValue: field.key)
            switch field.value {
            case .text(let path): try c.encode(self[path], forKey: key)
            case .optionalText(let path, _): try c.encodeIfPresent(self[path], forKey: key)
            case .texts(let path): try c.encode(self[path], forKey: key)
            case .date(let path): try c.encode(self[path].epochSeconds, forKey: key)
            case .optionalDate(let path): try c.encodeIfPresent(self[path]?.epochSeconds, forKey: key)
            case .flag(let path): try c.encode(self[path], forKey: key)
            case .optionalFlag(let path): try c.encodeIfPresent(self[path], forKey: key)
            case .kind: try c.encode(storedKind, forKey: key)
            case .providerConfiguration: try c.encodeIfPresent(providerConfiguration, forKey: key)
            case .object(let path): try c.encodeIfPresent(self[path], forKey: key)
            case .dpopKey: try c.encodeIfPresent(dpopKey.map(DPoPKey.Stored.init), forKey: key)
            case .derivedTokens: if !derivedTokens.isEmpty { try c.encode(derivedTokens, forKey: key) }
            }
        }
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
