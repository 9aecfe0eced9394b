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
