internal import FoundationEssentials
public import VaultCore
public import VaultHTTP

/// Refresh coordination for a vault that syncs: before a token request,
/// pull (another machine may have refreshed the grant) and take the
/// store's lease on it, so that a rotating refresh token is spent once
/// across machines; afterwards, push the new tokens at once.
///
/// Availability comes first: when the store cannot be reached within
/// `storeBound` seconds a request, the grant is refreshed here and the
/// next sync pushes it (docs/sync.md, "Leases"). A vault without a store
/// is refreshed as `LocalRefreshCoordinator` would.
public struct SyncRefreshCoordinator: RefreshCoordinator {
    /// How requests reach the store.
    public let transport: any HTTPTransport
    /// Seconds a store request may take before this machine stops waiting
    /// for the store and refreshes on its own.
    public let storeBound: Double

    /// Creates a coordinator; `storeBound` bounds each store request.
    public init(transport: any HTTPTransport, storeBound: Double = 5) {
        self.transport = transport
        self.storeBound = storeBound
    }

    /// Takes the grant's lease at the sync store before a refresh, or learns the grant was refreshed elsewhere.
    public func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision {
        let engine = SyncEngine(vault: vault, transport: transport, storeTimeout: storeBound)
        guard engine.isConfigured else { return .proceed }
        // Two machines refreshing a grant whose refresh token does not
        // rotate both succeed (Google's do not rotate): no need to wait
        // for the store. Unknown (never refreshed here) counts as rotating.
        if grant.refreshTokenRotates == false { return .proceed }
        do {
            let arrived = try engine.leaseForRefresh(
                need.name, minimumValidity: need.force ? nil : need.minimumValidity, timeout: storeBound)
            return arrived.map(RefreshDecision.fresh) ?? .proceed
        } catch {
            // The store is away or failing: refresh here, push later. A
            // lease held by another machine (`busy`) is not unavailability.
            guard error.code == .transient else { throw error }
            return .proceed
        }
    }

    /// Records the refresh (or refusal) at the sync store and gives back the lease.
    public func finish(_ need: RefreshNeed, refused: Bool, in vault: Vault) -> Grant? {
        let engine = SyncEngine(vault: vault, transport: transport, storeTimeout: storeBound)
        guard engine.isConfigured else { return nil }
        // Send the new tokens now; a failure leaves them for the next sync.
        _ = try? engine.sync()
        guard refused, let pulled = try? vault.load(need.name), !need.force,
            vault.usable(pulled, need.minimumValidity)
        else { return nil }
        // Another machine had already spent the refresh token: its result
        // arrived with this pull.
        return pulled
    }
}
