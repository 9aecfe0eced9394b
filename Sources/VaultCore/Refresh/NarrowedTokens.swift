public import FoundationEssentials
package import VaultHTTP

/// A narrowed access token and the grant it was obtained with.
public struct FreshDerivedToken: Sendable {
    /// The token for the target asked for.
    public let token: DerivedToken
    /// The grant as stored (its refresh token possibly rotated by the request).
    public let grant: Grant
    /// True when this call asked the provider (false: it was cached).
    public let requested: Bool

    /// Creates a result.
    public init(token: DerivedToken, grant: Grant, requested: Bool) {
        self.token = token
        self.grant = grant
        self.requested = requested
    }

    /// The grant as a program sees it when handed this token.
    public var narrowedGrant: Grant { grant.narrowed(to: token) }
}

extension TokenRefresher {
    /// RFC 8693's URN for an access token, the only token type vault asks for and accepts.
    public static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"
    /// RFC 8693's grant type.
    static let tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"

    /// An access token of grant `name` narrowed to `target`, with more than
    /// `minimumValidity` seconds left: the one cached in the grant when
    /// there is one, else a new one from the provider, cached.
    ///
    /// A refresh target (`exchange` false) is asked for with a refresh-token
    /// grant that names the resource (RFC 8707), the audience and the
    /// scopes. It spends the refresh token like any refresh: one at a time
    /// across processes and machines, under the same lock and lease, and a
    /// rotated refresh token is stored before the token is returned (some
    /// providers tie it to the resource asked for). An exchange target
    /// posts the grant's fresh access token to the token endpoint (RFC
    /// 8693) and checks that an access token came back; nothing is spent.
    /// The provider's refusal of the target (`invalid_target`,
    /// `unauthorized_client`) changes nothing in the vault.
    public func derivedToken(
        _ name: String, for target: TokenTarget, minimumValidity: TimeInterval = Grant.freshnessMargin,
        forceRequest: Bool = false
    ) throws(VaultError) -> FreshDerivedToken {
        var result = try derivedOnce(name, target, minimumValidity, forceRequest)
        // Another machine's refresh arrived instead (sync): ask again with its refresh token.
        if result == nil { result = try derivedOnce(name, target, minimumValidity, forceRequest) }
        guard let result else {
            throw VaultError(
                .transient, "the tokens of '\(name)' changed on another machine while its narrowed token was asked for",
                remedy: .tryAgainShortly)
        }
        return result
    }

    private func derivedOnce(_ name: String, _ target: TokenTarget, _ minimum: TimeInterval, _ force: Bool)
        throws(VaultError) -> FreshDerivedToken?
    {
        let now = vault.time.now
        let need = RefreshNeed(name: name, minimumValidity: minimum, force: force, target: target)
        if target.exchange { return try exchanged(need) }
        let vault = self.vault
        var made: DerivedToken?
        let step = RefreshStep(
            ready: { g in !force && g.derivedToken(for: target, minimumValidity: minimum, at: now()) != nil },
            request: { (g: Grant, n: String) throws(VaultError) -> Grant in
                let (next, token) = try self.narrowedRefresh(g, name: n, target: target)
                made = token
                return next
            },
            store: { (id: [UInt8], spent: Grant, next: Grant) throws(VaultError) -> Grant in
                try vault.storeDerived(id: id, spentRefreshToken: spent.refreshToken, next)
            })
        let fresh = try refreshing(need, step)
        if let made { return FreshDerivedToken(token: made, grant: fresh.grant, requested: true) }
        guard let cached = fresh.grant.derivedToken(for: target, minimumValidity: minimum, at: now()) else {
            return nil
        }
        return FreshDerivedToken(token: cached, grant: fresh.grant, requested: fresh.refreshed)
    }

    /// One refresh-token request naming `target`: the grant to store (the
    /// refresh token as the answer leaves it, the new token cached) and the token.
    func narrowedRefresh(_ g: Grant, name: String, target: TokenTarget) throws(VaultError) -> (Grant, DerivedToken) {
        try TokenRefresher.narrowedRefresh(
            g, name: name, target: target, transport: transport, now: vault.time.now(), extras: narrowedExtras)
    }

    /// One refresh-token request for `g` naming `target`, made with
    /// `transport`; nothing is stored. For stores other than a vault file (see VaultKit).
    package static func narrowedRefresh(
        _ g: Grant, name: String, target: TokenTarget, transport: any HTTPTransport, now: Date,
        extras: TokenRequestExtras = .none
    ) throws(VaultError) -> (Grant, DerivedToken) {
        guard g.kind == .oauth2 else {
            throw VaultError(.unsupported, "grant '\(name)' has no refresh token to ask for a narrowed token with")
        }
        guard let refreshToken = g.refreshToken else {
            throw VaultError(
                .unsupported, "grant '\(name)' has no refresh token to ask for a narrowed token with",
                remedy: .authorizeAgain(provider: g.provider, grant: name))
        }
        let (client, endpoint) = try TokenRefresher.tokenClient(g, name: name, transport: transport)
        let what = "asking for a narrowed token of '\(name)'"
        let form = [("grant_type", "refresh_token"), ("refresh_token", refreshToken)] + TokenRefresher.form(target)
        let response = try client.tokenResponse(
            endpoint, form: form, what: what, timeout: Self.requestTimeout, extras: narrowed(extras))
        let token = try TokenRefresher.derived(response, target: target, now: now, what: what)
        var next = g
        next.takeRefreshToken(of: response, now: now)
        next.refreshedAt = now
        next.derivedTokens = g.caching(token, now: now)
        return (next, token)
    }

    /// An RFC 8693 exchange of the grant's fresh access token for one
    /// narrowed to `need.target`, cached in the grant.
    private func exchanged(_ need: RefreshNeed) throws(VaultError) -> FreshDerivedToken? {
        guard let target = need.target else { return nil }
        let name = need.name
        let now = vault.time.now
        let (row, stored) = try vault.loadWithRow(name)
        if stored.dead { throw TokenRefresher.deadError(name, stored) }
        if !need.force, let cached = stored.derivedToken(for: target, minimumValidity: need.minimumValidity, at: now())
        {
            return FreshDerivedToken(token: cached, grant: stored, requested: false)
        }
        if let done = try coordinator.refreshElsewhere(need, in: vault) {
            return done.grant.derivedToken(for: target, minimumValidity: need.minimumValidity, at: now()).map {
                FreshDerivedToken(token: $0, grant: done.grant, requested: true)
            }
        }
        // The subject token: the grant's own access token, refreshed first when needed.
        let subject = try freshGrant(name).grant
        let token = try TokenRefresher.exchanged(
            subject, name: name, target: target, transport: transport, now: now(), extras: narrowedExtras)
        let cached = try vault.cacheDerived(id: row.id, token)
        return FreshDerivedToken(token: token, grant: cached, requested: true)
    }

    /// An RFC 8693 exchange of `subject`'s access token (fresh) for one
    /// narrowed to `target`, made with `transport`; nothing is stored.
    package static func exchanged(
        _ subject: Grant, name: String, target: TokenTarget, transport: any HTTPTransport, now: Date,
        extras: TokenRequestExtras = .none
    ) throws(VaultError) -> DerivedToken {
        guard subject.kind != .oauth1, let access = subject.accessToken, !access.isEmpty else {
            throw VaultError(.unsupported, "grant '\(name)' has no OAuth 2.0 access token to exchange")
        }
        let (client, endpoint) = try TokenRefresher.tokenClient(subject, name: name, transport: transport)
        let what = "exchanging the token of '\(name)'"
        let form =
            [
                ("grant_type", TokenRefresher.tokenExchangeGrant), ("subject_token", access),
                ("subject_token_type", TokenRefresher.accessTokenType),
                ("requested_token_type", TokenRefresher.accessTokenType),
            ] + TokenRefresher.form(target)
        let response = try client.tokenResponse(
            endpoint, form: form, what: what, timeout: Self.requestTimeout, extras: narrowed(extras))
        guard case .string(let issued)? = response.fields["issued_token_type"] else {
            throw VaultError(.badResponse, "\(what): the provider's answer has no issued_token_type (RFC 8693)")
        }
        guard issued == TokenRefresher.accessTokenType else {
            throw VaultError(
                .badResponse,
                "\(what): the provider issued a token of type '\(ProviderText.sanitized(issued, limit: 80))', "
                    + "not an access token")
        }
        return try TokenRefresher.derived(response, target: target, now: now, what: what)
    }

    /// The target's parameters of a token request: `resource` (RFC 8707),
    /// `audience` and `scope`.
    static func form(_ target: TokenTarget) -> [(String, String)] {
        var form: [(String, String)] = []
        if let resource = target.resource { form.append(("resource", resource)) }
        if let audience = target.audience { form.append(("audience", audience)) }
        if !target.scopes.isEmpty { form.append(("scope", target.scopes.joined(separator: " "))) }
        return form
    }

    /// The app's extras for a narrowed request, without any resource or
    /// audience of their own: the target names those.
    var narrowedExtras: TokenRequestExtras { refreshExtras }

    /// `extras` without a resource or audience of their own.
    static func narrowed(_ extras: TokenRequestExtras) -> TokenRequestExtras {
        let parameters = extras.parameters.filter { !["resource", "audience"].contains($0.key.lowercased()) }
        return (try? TokenRequestExtras(parameters: parameters, headers: extras.headers)) ?? .none
    }

    /// The token endpoint and client a grant keeps.
    static func tokenClient(_ g: Grant, name: String, transport: any HTTPTransport) throws(VaultError)
        -> (TokenEndpoint, String)
    {
        guard let config = g.providerConfiguration, let endpoint = config.tokenEndpoint, config.clientID != nil else {
            let missing = g.providerConfiguration?.tokenEndpoint == nil ? "no token endpoint" : "no client id"
            throw VaultError(
                .invalidInput, "grant '\(name)' cannot ask for a narrowed token: it keeps \(missing)",
                remedy: .authorizeAgain(provider: g.provider, grant: name))
        }
        // A DPoP-bound grant proves its key at the token endpoint for these requests too.
        return (TokenEndpoint(transport: transport, client: OAuthClient(grant: g, config)), endpoint)
    }

    /// The derived token a token response carries for `target`.
    static func derived(_ response: TokenResponse, target: TokenTarget, now: Date, what: String) throws(VaultError)
        -> DerivedToken
    {
        guard let access = response.accessToken else {
            throw VaultError(.badResponse, "\(what): the provider's answer has no access_token")
        }
        return DerivedToken(
            target: target, accessToken: access, tokenType: response.tokenType,
            expiresAt: response.accessTokenExpiry(now: now),
            scopes: response.scope ?? target.scopes, issuedAt: now)
    }
}
