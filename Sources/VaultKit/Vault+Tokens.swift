public import FoundationEssentials
internal import VaultCrypto
public import VaultHTTP

/// How a fresh token was obtained.
public struct FreshGrant: Sendable {
    /// The grant with a usable access token.
    public let grant: Grant
    /// True when this call refreshed it (false: it was fresh, or another
    /// process had just refreshed it).
    public let refreshed: Bool
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

extension Vault {
    /// Seconds a token request may take while the write lock is held.
    static let refreshTimeout: Double = 20

    /// GTMAppAuth's `performActionWithFreshTokens`: a grant whose access
    /// token has more than `minimumValidity` seconds left, refreshed first
    /// when needed. One refresh at a time per grant across processes: the
    /// write lock is taken, the grant re-read, and refreshed only if still
    /// stale; the new access token and any rotated refresh token are stored
    /// in the same transaction before they are returned, so an old refresh
    /// token is never sent again. A refusal marks the grant dead (kept) and
    /// throws `.dead`; a transient failure changes nothing.
    public func freshGrant(
        _ name: String, minimumValidity: TimeInterval = Grant.freshnessMargin, forceRefresh: Bool = false,
        transport: any HTTPTransport
    ) throws(VaultError) -> FreshGrant {
        if !forceRefresh {
            let grant = try load(name)
            if usable(grant, minimumValidity) { return FreshGrant(grant: grant, refreshed: false) }
            if grant.dead { throw Vault.deadError(name, grant) }
        }
        // Through the agent, the agent refreshes: one refresher per machine,
        // coordinated with the others when the vault syncs.
        if let agent = keys as? AgentKeys {
            _ = try agent.client.token(name, minimumValidity: minimumValidity, forceRefresh: forceRefresh)
            return FreshGrant(grant: try load(name), refreshed: true)
        }
        // A synced grant: pull first (another machine may have refreshed it)
        // and take the store's refresh lease, so that a rotating refresh
        // token is never spent by two machines (docs/sync.md).
        let synced = syncConfigured
        // One coordinated refresh at a time on this machine: the others wait
        // here, then find the token fresh.
        let machineLock = synced ? try FileSystem.lockExclusive(location.directory + "/refresh.lock") : nil
        defer { machineLock.map { FileSystem.unlock($0) } }
        if synced, !forceRefresh {
            let grant = try load(name)
            if usable(grant, minimumValidity) { return FreshGrant(grant: grant, refreshed: false) }
        }
        if synced,
            let pulled = try leaseForRefresh(
                name, minimumValidity: forceRefresh ? nil : minimumValidity, transport: transport)
        {
            return FreshGrant(grant: pulled, refreshed: false)
        }
        defer {
            // Send the new tokens at once; a failure leaves them for the next sync.
            if synced { _ = try? sync(transport: transport) }
        }
        var outcome: Result<FreshGrant, VaultError> = .failure(VaultError(.internalError, "no outcome"))
        var refusedWhileSynced: VaultError?
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, current) = try loadLive(name, state: state)
            if current.dead { throw Vault.deadError(name, current) }
            // Another process may have refreshed while we waited for the lock.
            if !forceRefresh && usable(current, minimumValidity) {
                outcome = .success(FreshGrant(grant: current, refreshed: false))
                return
            }
            var next = current
            do throws(VaultError) {
                next = try refreshed(current, name: name, transport: transport)
                outcome = .success(FreshGrant(grant: next, refreshed: true))
            } catch {
                // Only a refusal kills a grant; an expired grant without a
                // refresh token stays "expired", and transient errors change nothing.
                guard error.code == .refused else { throw error }
                // A synced grant may have been refreshed by another machine
                // that got the lease through a store whose compare-and-swap
                // is not atomic: look there before giving up on it.
                if synced {
                    refusedWhileSynced = error
                    return
                }
                // Keep the grant, marked, so the person can see it and re-add it.
                next.dead = true
                next.deadReason = error.oauthError ?? "refused"
                outcome = .failure(Vault.deadError(name, next, cause: error))
            }
            try rewrite(row, with: next, name: name, state: &state)
        }
        if let refused = refusedWhileSynced {
            _ = try? sync(transport: transport)
            let pulled = try load(name)
            if usable(pulled, minimumValidity) { return FreshGrant(grant: pulled, refreshed: false) }
            try markDead(name, reason: refused.oauthError ?? "refused")
            throw Vault.deadError(name, try load(name), cause: refused)
        }
        return try outcome.get()
    }

    /// GTMAppAuth's validity check: calls the userinfo endpoint with a fresh
    /// token. A 401 after a successful refresh marks the grant dead; network
    /// errors and 5xx are transient and change nothing.
    public func check(_ name: String, transport: any HTTPTransport) throws(VaultError) -> GrantCheck {
        var fresh = try freshGrant(name, transport: transport)
        guard let endpoint = fresh.grant.providerConfiguration?.userinfoEndpoint else {
            throw VaultError(.invalidInput, "grant '\(name)' has no userinfo endpoint to check it against")
        }
        while true {
            let status = try userinfoStatus(endpoint, token: fresh.grant.accessToken ?? "", transport: transport)
            switch status {
            case 200..<300:
                return .live(account: fresh.grant.account)
            case 401 where !fresh.refreshed:
                // The stored token may have been revoked on its own: refresh once and try again.
                fresh = try freshGrant(name, forceRefresh: true, transport: transport)
            case 401:
                try markDead(name, reason: "invalid_token")
                throw VaultError(
                    .dead,
                    "grant '\(name)' is no longer accepted by the provider (userinfo answered 401 after a refresh)",
                    hint: "run 'vault add \(fresh.grant.provider) \(name)' to authorize again")
            case 500...599, 429:
                throw VaultError(.transient, "the userinfo endpoint answered HTTP \(status)")
            default:
                throw VaultError(.badResponse, "the userinfo endpoint answered HTTP \(status)")
            }
        }
    }

    /// Revokes the grant at the provider (RFC 7009: the refresh token, else
    /// the access token), then removes it. A failed revocation keeps the grant.
    public func revokeAndRemove(_ name: String, transport: any HTTPTransport) throws(VaultError) -> Revocation {
        let grant = try load(name)
        guard let config = grant.providerConfiguration, let endpoint = config.revocationEndpoint else {
            try remove(name)
            return .unsupported
        }
        let (token, hint) =
            grant.refreshToken.map { ($0, "refresh_token") } ?? (grant.accessToken ?? "", "access_token")
        let client = TokenEndpoint(transport: transport, client: OAuthClient(config, providerName: grant.provider))
        let what = "revoking '\(name)'"
        func kept(_ e: VaultError) -> VaultError {
            VaultError(
                e.code, e.reason, hint: "the grant was kept; try again, or remove it without --revoke",
                oauthError: e.oauthError)
        }
        let status: Int
        let body: SecureBytes
        do {
            (status, body) = try client.post(endpoint, form: [("token", token), ("token_type_hint", hint)], what: what)
        } catch {
            throw kept(error)
        }
        guard status == 200 else { throw kept(TokenEndpoint.classify(status: status, body: body, what: what)) }
        try remove(name)
        return .revoked(tokenType: hint)
    }

    /// Marks a grant dead (kept, shown by `vault list`).
    public func markDead(_ name: String, reason: String) throws(VaultError) {
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, grant) = try loadLive(name, state: state)
            var next = grant
            next.dead = true
            next.deadReason = reason
            try rewrite(row, with: next, name: name, state: &state)
        }
    }

    // MARK: Internals

    func usable(_ g: Grant, _ minimumValidity: TimeInterval) -> Bool {
        guard !g.dead, g.accessToken != nil || g.tokenSecret != nil else { return false }
        guard let expiry = g.expiresAt else { return true }
        return expiry.timeIntervalSince(time.now()) > minimumValidity
    }

    /// One refresh_token request; the returned grant keeps the old refresh
    /// token only when the provider did not rotate it.
    func refreshed(_ g: Grant, name: String, transport: any HTTPTransport) throws(VaultError) -> Grant {
        guard let refreshToken = g.refreshToken else {
            throw VaultError(
                .dead, "grant '\(name)' has expired and has no refresh token",
                hint: "run 'vault add \(g.provider) \(name)' to authorize again")
        }
        guard let config = g.providerConfiguration, let endpoint = config.tokenEndpoint else {
            throw VaultError(
                .invalidInput, "grant '\(name)' does not say where to refresh it (no token endpoint)",
                hint: "import it with a provider_config, or run 'vault add' again")
        }
        let client = TokenEndpoint(transport: transport, client: OAuthClient(config, providerName: g.provider))
        let response = try client.tokenResponse(
            endpoint, form: [("grant_type", "refresh_token"), ("refresh_token", refreshToken)],
            what: "refreshing '\(name)'", timeout: Vault.refreshTimeout)
        let now = time.now()
        let fresh = response.grant(provider: g.provider, account: g.account, now: now)
        var next = g
        next.accessToken = fresh.accessToken
        next.refreshToken = fresh.refreshToken ?? g.refreshToken
        next.tokenType = fresh.tokenType ?? g.tokenType
        next.expiresAt = fresh.expiresAt
        if !fresh.scopes.isEmpty { next.scopes = fresh.scopes }
        if let idToken = fresh.idToken { next.idToken = idToken }
        next.refreshedAt = now
        return next
    }

    func rewrite(_ row: StoredRecord, with grant: Grant, name: String, state: inout StateManifest) throws(VaultError) {
        let version = row.version + 1
        let payload = Payload(name: name, grant: grant)
        try putRow(
            try keys.seal(payload, id: row.id, version: version, deleted: false, nameHash: row.nameHash))
        state.entries[row.id] = .init(version: version, deleted: false)
    }

    func userinfoStatus(_ endpoint: String, token: String, transport: any HTTPTransport) throws(VaultError) -> Int {
        var request = HTTPRequest(
            method: "GET", url: endpoint,
            headers: [("Authorization", "Bearer \(token)"), ("Accept", "application/json")])
        request.timeout = Vault.refreshTimeout
        do { return try transport.send(request).status } catch { throw error.vaultError("the userinfo request") }
    }

    static func deadError(_ name: String, _ g: Grant, cause: VaultError? = nil) -> VaultError {
        let why = cause.map { ": \($0.reason)" } ?? (g.deadReason.map { " (\($0))" } ?? "")
        return VaultError(
            .dead, "grant '\(name)' needs a new authorization\(why)",
            hint: "run 'vault add \(g.provider) \(name)' to authorize again", oauthError: cause?.oauthError)
    }
}
