public import FoundationEssentials
import VaultCrypto
public import VaultHTTP

/// How a fresh token was obtained.
public struct FreshGrant: Sendable {
    /// The grant with a usable access token.
    public let grant: Grant
    /// True when this call refreshed it (false: it was fresh, or another
    /// process or machine had just refreshed it).
    public let refreshed: Bool
    /// Why a grant that should have been refreshed was not, when it is
    /// handed out with the access token it had (the sync store away,
    /// another machine holding the right to refresh it): the reason of the
    /// error that kept it from the refresh. Nil otherwise.
    package var notRefreshedBecause: String? = nil

    /// Creates a result.
    public init(grant: Grant, refreshed: Bool) {
        self.grant = grant
        self.refreshed = refreshed
    }

    /// A grant handed out unrefreshed for `reason`.
    package init(grant: Grant, notRefreshedBecause reason: String) {
        self.init(grant: grant, refreshed: false)
        notRefreshedBecause = reason
    }
}

/// The result of a userinfo probe.
public enum GrantCheck: Sendable, Equatable {
    /// The provider accepted the access token; the account it names, if any.
    case live(account: String?)
}

/// What `revokeAndRemove` did at the provider.
public enum Revocation: Sendable, Equatable {
    /// The provider confirmed the revocation (RFC 7009).
    case revoked(tokenType: String)
    /// The provider has no revocation endpoint; the grant was only removed here.
    case unsupported
}

/// Token freshness: GTMAppAuth's `performActionWithFreshTokens`, its
/// userinfo probe, and revocation, over one open vault.
///
/// This is the entry point for anything that needs a usable access token.
/// A refresh holds a lock of that grant's own across the token request and
/// no other: reads, writes and refreshes of other grants go on meanwhile.
/// The vault's write lock is taken only for two short transactions, one
/// before the request (is the vault writable?) and one after it (store the
/// new tokens), so a stalled provider never stalls anything but its grant.
public struct TokenRefresher {
    /// The vault whose grants this refreshes.
    public let vault: Vault
    /// How requests reach the provider.
    public let transport: any HTTPTransport
    /// Coordination beyond this machine (sync, or an agent).
    public let coordinator: any RefreshCoordinator
    /// Parameters and headers added to the refresh requests this makes
    /// (an app's own, never kept in the vault).
    public var refreshExtras: TokenRequestExtras = .none
    /// Told when a refresh marks a grant dead (the person's notify command,
    /// above the core). Only the process that marks it tells, once.
    package var observer: (any GrantNoticeObserver)?

    /// Seconds a token request may take.
    public static let requestTimeout: Double = 20
    /// Seconds to wait for another process's refresh of the same grant.
    public static let lockWait: Double = 60
    /// Seconds an access token must still have to be handed out when it
    /// should have been refreshed but cannot be now (the sync store away,
    /// or another machine holding the grant).
    public static let lastResortValidity: Double = 5

    /// Creates a refresher; `coordinator` defaults to the vault's own.
    public init(vault: Vault, transport: any HTTPTransport, coordinator: (any RefreshCoordinator)? = nil) {
        self.vault = vault
        self.transport = transport
        self.coordinator = coordinator ?? vault.refreshCoordinator
    }

    /// A grant whose access token has more than `minimumValidity` seconds
    /// left, refreshed first when needed. One refresh at a time per grant
    /// across processes (and, through the coordinator, machines): a caller
    /// that waited for another's refresh gets its result. A rotated refresh
    /// token is stored before the new access token is returned, so an old
    /// refresh token is never sent again. A refusal marks the grant dead
    /// (kept) and throws `.dead`; a transient failure changes nothing.
    public func freshGrant(
        _ name: String, minimumValidity: TimeInterval = Grant.freshnessMargin, forceRefresh: Bool = false
    ) throws(VaultError) -> FreshGrant {
        try freshGrant(name, minimumValidity: minimumValidity, forceRefresh: forceRefresh, alsoReady: { _ in true })
    }

    /// A grant whose ID token, as well as its access token, has more than
    /// `minimumValidity` seconds left (clusters that take ID tokens for
    /// kubectl), refreshed first when either has less, by the rules of
    /// `freshGrant`. A provider that sends no ID token with a refresh
    /// leaves the old one: the caller checks `Grant.idTokenExpiry`.
    package func freshGrantWithIDToken(_ name: String, minimumValidity: TimeInterval) throws(VaultError)
        -> FreshGrant
    {
        let vault = self.vault
        return try freshGrant(name, minimumValidity: minimumValidity, forceRefresh: false) { g in
            g.idTokenExpiry.map { $0.timeIntervalSince(vault.time.now()) > minimumValidity } ?? false
        }
    }

    private func freshGrant(
        _ name: String, minimumValidity: TimeInterval, forceRefresh: Bool, alsoReady: @escaping (Grant) -> Bool
    ) throws(VaultError) -> FreshGrant {
        let need = RefreshNeed(name: name, minimumValidity: minimumValidity, force: forceRefresh)
        let vault = self.vault
        let step = RefreshStep(
            ready: { g in !forceRefresh && vault.usable(g, minimumValidity) && alsoReady(g) },
            request: { (g: Grant, n: String) throws(VaultError) -> Grant in try self.refreshed(g, name: n) },
            store: { (id: [UInt8], spent: Grant, next: Grant) throws(VaultError) -> Grant in
                try vault.storeRefreshed(id: id, spentRefreshToken: spent.refreshToken, next)
            },
            learnsAccount: true)
        return try refreshing(need, step)
    }

    /// What one refresh of a grant does, apart from the locking and the
    /// coordination all refreshes share: when the stored grant needs no
    /// request, the request, and how its outcome is stored.
    struct RefreshStep {
        /// True when the grant needs no token request.
        let ready: (Grant) -> Bool
        /// The token request: the grant as it is to be stored after it.
        let request: (Grant, String) throws(VaultError) -> Grant
        /// Stores the outcome in record `id`, whose grant was `spent`; the grant as stored.
        let store: ([UInt8], Grant, Grant) throws(VaultError) -> Grant
        /// Learn the account from the provider after the refresh, when the grant has none.
        var learnsAccount = false
    }

    /// One refresh of `need.name` at a time across processes and, through
    /// the coordinator, machines; the rules of `freshGrant` for any token
    /// request that spends the grant's refresh token.
    func refreshing(_ need: RefreshNeed, _ step: RefreshStep) throws(VaultError) -> FreshGrant {
        let name = need.name
        let (row, grant) = try vault.loadWithRow(name)
        if step.ready(grant) { return FreshGrant(grant: grant, refreshed: false) }
        if grant.dead { throw TokenRefresher.deadError(name, grant) }
        if let done = try coordinator.refreshElsewhere(need, in: vault) { return done }

        let lock = try GrantLock.acquire(
            directory: vault.location.directory, record: row.id, wait: Self.lockWait, pacing: vault.pacing)
        defer { lock.release() }
        // Another process may have refreshed while this one waited.
        var (current, currentName) = try vault.loadRecord(id: row.id, expecting: name)
        if current.dead { throw TokenRefresher.deadError(currentName, current) }
        if step.ready(current) { return FreshGrant(grant: current, refreshed: false) }
        var alone = false
        let decision: RefreshDecision
        do {
            decision = try coordinator.prepare(need, grant: current, in: vault)
        } catch {
            return try unrefreshed(current, id: row.id, name: currentName, need, step, unprepared: error)
        }
        switch decision {
        case .fresh(let arrived): return FreshGrant(grant: arrived, refreshed: false)
        case .proceedAlone: alone = true
        case .proceed: break
        }
        (current, currentName) = try vault.loadRecord(id: row.id, expecting: currentName)
        if current.dead { throw TokenRefresher.deadError(currentName, current) }

        // A rotated refresh token must be stored once spent: make sure the
        // vault takes writes before spending it.
        try vault.checkWritable()
        // Waiting for that may have taken the right to refresh alone away.
        if alone, !coordinator.mayStillRefreshAlone(need, grant: current, in: vault) {
            let reason =
                "the sync store cannot be reached, and this machine's right to refresh '\(currentName)' alone ran "
                + "out before the token request was sent: it is refreshed once the store answers"
            if !need.force, need.target == nil, vault.usable(current, TokenRefresher.lastResortValidity) {
                return FreshGrant(grant: current, notRefreshedBecause: reason)
            }
            throw VaultError(.transient, reason, remedy: .tryAgainInAMinute)
        }
        let next: Grant
        do {
            next = try step.request(current, currentName)
        } catch {
            // Only a refusal kills a grant; an expired grant without a
            // refresh token stays "expired", and transient errors change nothing.
            guard error.code == .refused else { throw error }
            return try refused(current, id: row.id, name: currentName, need, alone: alone, refusal: error)
        }
        var stored = try step.store(row.id, current, next)
        // Stored: processes waiting for this grant take the new token now,
        // not after the network calls below; and any sync of this machine
        // from now on ends the lease (docs/sync.md, "Refresh of a synced grant").
        lock.release()
        // Before the coordinator sends the new tokens on, so the account goes with them.
        if step.learnsAccount && stored.account == nil && stored.refreshToken == next.refreshToken {
            stored = learningAccount(of: stored, id: row.id, named: next.account)
        }
        _ = coordinator.finish(need, refused: false, alone: alone, in: vault)
        return FreshGrant(grant: stored, refreshed: true)
    }

    /// What `refreshing` hands out when the coordinator would not let it
    /// refresh `current` (record `id`, named `name`) now: another machine
    /// holds the grant, or the store keeps this one from refreshing it.
    /// An access token that is still valid is worth more than the error,
    /// which is thrown otherwise. The sync of `prepare` may have brought a
    /// newer grant first.
    private func unrefreshed(
        _ current: Grant, id: [UInt8], name: String, _ need: RefreshNeed, _ step: RefreshStep,
        unprepared error: VaultError
    ) throws(VaultError) -> FreshGrant {
        guard !need.force, need.target == nil, error.code == .busy || error.code == .transient else { throw error }
        var current = current
        if let (merged, _) = try? vault.loadRecord(id: id, expecting: name), !merged.dead {
            current = merged
        }
        if step.ready(current) { return FreshGrant(grant: current, refreshed: false) }
        if vault.usable(current, TokenRefresher.lastResortValidity) {
            return FreshGrant(grant: current, notRefreshedBecause: error.reason)
        }
        throw error
    }

    /// What follows the provider's refusal to refresh `current` (record
    /// `id`, named `name`): the grant another machine refreshed meanwhile,
    /// when the coordinator has it; a transient error while it cannot yet
    /// tell; otherwise the grant marked dead (its observer told once) and
    /// `.dead` thrown.
    private func refused(
        _ current: Grant, id: [UInt8], name: String, _ need: RefreshNeed, alone: Bool, refusal error: VaultError
    ) throws(VaultError) -> FreshGrant {
        switch coordinator.finish(need, refused: true, alone: alone, in: vault) {
        case .arrived(let arrived):
            return FreshGrant(grant: arrived, refreshed: false)
        case .undecided:
            throw VaultError(
                .transient,
                "the provider refused to refresh '\(name)', perhaps because another machine refreshed it "
                    + "while the sync store was away; the grant is kept as it is until the store answers",
                oauthError: error.oauthError)
        case .dead:
            break
        }
        let reason = error.oauthError ?? "refused"
        let marked = try vault.markDead(id: id, spentRefreshToken: current.refreshToken, reason: reason)
        if marked != nil {
            observer?.notice(
                GrantNotice(
                    event: .died, name: name, record: id, grant: current,
                    reason: GrantNotice.errorCode(reason) ?? "refused", detail: error.reason))
        }
        throw TokenRefresher.deadError(name, marked ?? current, cause: error)
    }

    /// `g`, just refreshed and stored without an account (as other tools'
    /// files leave it), with the account the provider names: `fromIDToken`,
    /// the one a checked ID token in the answer named, else the userinfo
    /// endpoint's answer to the new access token, at the endpoint that
    /// travels with the grant's token endpoint (no secret goes anywhere
    /// new). Stored as an edit of the metadata of its own, so the refresh
    /// stays a change of tokens only (docs/sync.md). Best effort: the new
    /// tokens are stored already, and a failure here keeps `g` as it is.
    func learningAccount(of g: Grant, id: [UInt8], named fromIDToken: String?) -> Grant {
        guard g.kind == .oauth2 else { return g }
        var account = fromIDToken
        if account == nil, let config = g.providerConfiguration, let endpoint = config.userinfoEndpoint,
            g.accessToken != nil
        {
            account = try? UserInfo.account(
                endpoint: endpoint, grant: g, claim: config.accountClaim, transport: transport)
        }
        guard let account, !account.isEmpty else { return g }
        return (try? vault.fillAccount(id: id, account, holding: g.refreshToken)) ?? g
    }

    /// GTMAppAuth's validity check: calls the userinfo endpoint with a fresh
    /// token. A 401 to a stored token leads to one refresh and a retry; a
    /// 401 to the token the provider has just issued says the check failed
    /// (`badResponse`) and keeps the grant: a userinfo endpoint that refuses
    /// the provider's own fresh token is misconfigured, and only the token
    /// endpoint's refusal kills a grant. Network errors and 5xx are
    /// transient. Nothing changes but the refresh. A machine grant (client
    /// credentials, service account) acts for no person, so no userinfo
    /// endpoint speaks for it: it is checked by what proves it works, one
    /// token request with its credentials, as its refresh; a refusal marks
    /// it dead as a refused refresh does.
    public func check(_ name: String) throws(VaultError) -> GrantCheck {
        try checking(name).check
    }

    /// What `check` found, and whether the provider had refused the stored
    /// access token before its expiry (revoked), which the check replaced
    /// with a refresh.
    package struct CheckOutcome {
        /// The check's result.
        package let check: GrantCheck
        /// True when the userinfo endpoint refused the stored access token
        /// and the token refreshed in its place was accepted.
        package let replacedRefusedToken: Bool
    }

    /// `check`, saying what it did on the way.
    package func checking(_ name: String) throws(VaultError) -> CheckOutcome {
        var fresh = try freshGrant(name)
        if fresh.grant.kind.mintsTokens {
            if !fresh.refreshed { fresh = try freshGrant(name, forceRefresh: true) }
            return CheckOutcome(check: .live(account: fresh.grant.account), replacedRefusedToken: false)
        }
        var replaced = false
        guard let endpoint = fresh.grant.providerConfiguration?.userinfoEndpoint else {
            throw VaultError(.invalidInput, "grant '\(name)' has no userinfo endpoint to check it against")
        }
        while true {
            let status = try TokenRefresher.userinfoStatus(endpoint, grant: fresh.grant, transport: transport)
            switch status {
            case 200..<300:
                return CheckOutcome(check: .live(account: fresh.grant.account), replacedRefusedToken: replaced)
            case 401 where !fresh.refreshed:
                // The stored token may have been revoked on its own: refresh once and try again.
                fresh = try freshGrant(name, forceRefresh: true)
                replaced = true
            case 401:
                throw TokenRefresher.probeRefused(name)
            case 500...599, 429:
                throw VaultError(.transient, "the userinfo endpoint answered HTTP \(status)")
            default:
                throw VaultError(.badResponse, "the userinfo endpoint answered HTTP \(status)")
            }
        }
    }

    /// The check's failure when the userinfo endpoint refuses a token the
    /// provider has just issued: the grant is kept.
    package static func probeRefused(_ name: String) -> VaultError {
        VaultError(
            .badResponse,
            "the userinfo endpoint refused a token the provider had just issued for '\(name)' (HTTP 401 after a "
                + "refresh): the check failed, not the grant, which is kept")
    }

    /// Revokes the grant at the provider (RFC 7009: the refresh token, else
    /// the access token), then removes it. A failed revocation keeps the grant.
    public func revokeAndRemove(_ name: String) throws(VaultError) -> Revocation {
        let revocation = try revoke(name)
        try vault.remove(name)
        return revocation
    }

    /// Revokes the grant `name` at the provider (RFC 7009) and keeps it:
    /// for a removal that has more to do at the provider first.
    package func revoke(_ name: String) throws(VaultError) -> Revocation {
        let grant = try vault.load(name)
        guard let config = grant.providerConfiguration, let endpoint = config.revocationEndpoint else {
            return .unsupported
        }
        let (token, hint) =
            grant.refreshToken.map { ($0, "refresh_token") } ?? (grant.accessToken ?? "", "access_token")
        let client = TokenEndpoint(transport: transport, client: OAuthClient(grant: grant, config))
        let what = "revoking '\(name)'"
        func kept(_ e: VaultError) -> VaultError {
            VaultError(
                e.code, e.reason, oauthError: e.oauthError, remedy: .removeWithoutRevoking)
        }
        let status: Int
        let body: SecureBytes
        do {
            (status, body) = try client.post(endpoint, form: [("token", token), ("token_type_hint", hint)], what: what)
        } catch {
            throw kept(error)
        }
        guard status == 200 else {
            let error = TokenEndpoint.classify(status: status, body: body, what: what)
            // Not the network, nor the provider's mood: this client may not
            // revoke here, and asking again changes nothing.
            guard status == 401 || status == 403 else { throw kept(error) }
            let said = error.oauthError.map { ": \($0)" } ?? ""
            throw VaultError(
                error.code == .invalidClient ? .invalidClient : .providerError,
                "\(what): the provider refused this client's revocation request (HTTP \(status)\(said))",
                oauthError: error.oauthError, remedy: .revocationRefused(grant: name))
        }
        return .revoked(tokenType: hint)
    }

    // MARK: Internals

    /// One refresh_token request; the returned grant keeps the old refresh
    /// token only when the provider did not rotate it.
    func refreshed(_ g: Grant, name: String) throws(VaultError) -> Grant {
        let refreshed = try TokenRefresher.refreshed(
            readingErrorsAsItsProviderFileSays(g), name: name, transport: transport, now: vault.time.now,
            extras: refreshExtras)
        // The grant keeps the configuration it was added with.
        var kept = refreshed
        kept.providerConfiguration?.empty400IsInvalidGrant = g.providerConfiguration?.empty400IsInvalidGrant
        return kept
    }

    /// `g` with `empty_400_is_invalid_grant` from its provider's file when
    /// its own configuration does not say it. Endpoints and client travel
    /// together from one trusted source, fixed when the grant is added; this
    /// flag only says how to read the provider's error answers and sends
    /// nothing anywhere, so a file that says it after the grant was added
    /// counts too: the provider file named after the grant's provider, when
    /// it names the grant's own token endpoint (or, naming only an issuer,
    /// the grant's issuer).
    func readingErrorsAsItsProviderFileSays(_ g: Grant) -> Grant {
        guard var config = g.providerConfiguration, config.empty400IsInvalidGrant != true,
            let endpoint = config.tokenEndpoint
        else { return g }
        let catalog = ProviderCatalog.load(configDirectory: vault.location.configDirectory, only: g.provider)
        guard let provider = catalog.providers[g.provider], provider.errorQuirks.empty400IsInvalidGrant else {
            return g
        }
        let same =
            provider.tokenEndpoint.map { $0 == endpoint }
            ?? (provider.issuer != nil && provider.issuer == config.issuer)
        guard same else { return g }
        config.empty400IsInvalidGrant = true
        var read = g
        read.providerConfiguration = config
        return read
    }

    /// One refresh_token request for `g`, made with `transport`; nothing is
    /// stored. For stores other than a vault file (see VaultKit).
    package static func refreshed(
        _ g: Grant, name: String, transport: any HTTPTransport, now: () -> Date, extras: TokenRequestExtras = .none
    ) throws(VaultError) -> Grant {
        // A machine grant mints a new token from its own credentials.
        if g.kind.mintsTokens { return try MachineGrants.mint(g, name: name, transport: transport, now: now()) }
        guard let refreshToken = g.refreshToken else {
            // A token with less left than the caller needs has not run out yet: say so.
            let when = (g.expiresAt.map { $0 > now() } ?? false) ? "expires too soon to use" : "has expired"
            throw VaultError(
                .dead, "grant '\(name)' \(when) and has no refresh token",
                remedy: .authorizeAgain(provider: g.provider, grant: name))
        }
        guard let config = g.providerConfiguration, let endpoint = config.tokenEndpoint, config.clientID != nil else {
            let missing = g.providerConfiguration?.tokenEndpoint == nil ? "no token endpoint" : "no client id"
            throw VaultError(
                .invalidInput, "grant '\(name)' cannot be refreshed: it keeps \(missing)",
                remedy: .authorizeAgain(provider: g.provider, grant: name))
        }
        let client = TokenEndpoint(transport: transport, client: OAuthClient(grant: g, config))
        let what = "refreshing '\(name)'"
        let response = try client.tokenResponse(
            endpoint, form: [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], what: what,
            timeout: Self.requestTimeout, extras: extras)
        return try g.applying(refresh: response, now: now(), what: what)
    }

    /// The status of a userinfo request with the grant's access token,
    /// with a DPoP proof when the grant is bound to a key.
    package static func userinfoStatus(_ endpoint: String, grant: Grant, transport: any HTTPTransport)
        throws(VaultError) -> Int
    {
        try ProtectedResource.get(
            endpoint, grant: grant, transport: transport, what: "the userinfo request", timeout: Self.requestTimeout
        ).status
    }

    /// The error for a grant that needs a new authorization.
    package static func deadError(_ name: String, _ g: Grant, cause: VaultError? = nil) -> VaultError {
        let why = ": " + (cause?.reason ?? g.refusal(g.deadReason))
        let remedy: VaultError.Remedy =
            g.kind.mintsTokens
            ? .replaceCredentials(provider: g.provider, grant: name, serviceAccount: g.kind == .serviceAccount)
            : .authorizeAgain(provider: g.provider, grant: name)
        let error = VaultError(
            .dead, "grant '\(name)' needs \(g.kind.mintsTokens ? "new credentials" : "a new authorization")\(why)",
            oauthError: cause?.oauthError, remedy: remedy)
        return cause?.httpStatus.map { error.with(httpStatus: $0) } ?? error
    }
}
