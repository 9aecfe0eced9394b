import FoundationEssentials
public import VaultCore
public import VaultHTTP

extension VaultGrantStore {
    /// A token of `name` narrowed to `target` (RFC 8707, RFC 8693): cached
    /// in the grant, else obtained under the grant's lock and the sync
    /// lease (or by the agent, for a vault opened through it), with a
    /// rotated refresh token saved first. See `TokenRefresher.derivedToken`.
    public func derivedToken(
        _ name: String, for target: TokenTarget, minimumValidity: Double = Grant.freshnessMargin,
        forceRequest: Bool = false, transport: any HTTPTransport & Sendable, extras: TokenRequestExtras = .none
    ) async throws(VaultError) -> FreshDerivedToken {
        try await withHandle { (vault: Vault) throws(VaultError) in
            let coordinator: (any RefreshCoordinator)? =
                vault.isThroughAgent
                ? nil : SyncRefreshCoordinator(transport: transport, configDirectory: vault.location.configDirectory)
            var refresher = TokenRefresher(vault: vault, transport: transport, coordinator: coordinator)
            refresher.refreshExtras = extras
            return try refresher.derivedToken(
                name, for: target, minimumValidity: minimumValidity, forceRequest: forceRequest)
        }
    }
}

extension TokenSession {
    /// An access token of grant `name` narrowed to `target`: for one
    /// resource (RFC 8707), audience or fewer scopes by a refresh-token
    /// request that names them, or by an RFC 8693 token exchange of the
    /// grant's access token (`target.exchange`). Cached in the grant until
    /// fewer than `minimumValidity` seconds remain, so repeated calls do not
    /// reach the provider. A refresh token the request rotated is saved
    /// before the token is returned; a refused target changes nothing.
    ///
    /// With a `VaultGrantStore` the vault file's lock, lease and agent
    /// apply as for `freshGrant`; any other store is asked one request at a
    /// time per grant within this session, and saved only over the grant
    /// the request started from.
    public func derivedToken(
        _ name: String, for target: TokenTarget, minimumValidity: Double = Grant.freshnessMargin
    ) async throws(VaultError) -> DerivedToken {
        if Task.isCancelled { throw VaultError.cancelled }
        let stored = try await store.retrieve(name)
        if let cached = stored.derivedToken(for: target, minimumValidity: minimumValidity, at: Date()) {
            return cached
        }
        let extras = refreshExtras[stored.provider] ?? .none
        if let vaultStore = store as? VaultGrantStore {
            return try await vaultStore.derivedToken(
                name, for: target, minimumValidity: minimumValidity, transport: transport, extras: extras
            ).token
        }
        if target.exchange {
            let subject = try await freshGrant(name).grant
            let token = try await blocking { [transport] () throws(VaultError) in
                try TokenRefresher.exchanged(
                    subject, name: name, target: target, transport: transport, now: Date(), extras: extras)
            }
            try await cache(name, token, over: subject.refreshToken)
            return token
        }
        await gates.enter(name)
        let result = await Result(catching: { () async throws(VaultError) -> DerivedToken in
            let grant = try await store.retrieve(name)
            if let cached = grant.derivedToken(for: target, minimumValidity: minimumValidity, at: Date()) {
                return cached
            }
            if grant.dead { throw TokenRefresher.deadError(name, grant) }
            let (next, token) = try await blocking { [transport] () throws(VaultError) in
                try TokenRefresher.narrowedRefresh(
                    grant, name: name, target: target, transport: transport, now: Date(), extras: extras)
            }
            // The rotated refresh token is saved before the token is used.
            if (try? await store.retrieve(name))?.refreshToken == grant.refreshToken {
                try await store.save(next, as: name)
            }
            return token
        })
        await gates.leave(name)
        return try result.get()
    }

    /// Caches `token` in grant `name` while it still holds `refreshToken`.
    private func cache(_ name: String, _ token: DerivedToken, over refreshToken: String?) async throws(VaultError) {
        var grant = try await store.retrieve(name)
        guard grant.refreshToken == refreshToken else { return }
        grant.derivedTokens = grant.caching(token, now: Date())
        try await store.save(grant, as: name)
    }
}
