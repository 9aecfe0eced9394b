internal import FoundationEssentials
internal import Glibc
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

    /// The engine for refresh-time store requests: each bounded, and tried
    /// once more after a failure, so that one lost answer (a reset after
    /// the store applied a write) is not taken for the store away; an
    /// absent store costs two `storeBound`s at most per request.
    private func engine(_ vault: Vault) -> SyncEngine {
        SyncEngine(vault: vault, transport: transport, storeTimeout: storeBound, storeAttempts: 2)
    }

    /// Seconds `finish` keeps sending new tokens to a store that other
    /// machines keep busy: the lease this refresh was made under must end
    /// with them, before other machines take it over (docs/sync.md, "Leases").
    static let publishBound: Double = 15

    /// Takes the grant's lease at the sync store before a refresh, or learns the grant was refreshed elsewhere.
    public func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision {
        let engine = engine(vault)
        guard engine.isConfigured else { return .proceed }
        // Two machines refreshing a grant whose refresh token does not
        // rotate both succeed (Google's do not rotate): no need to wait
        // for the store. Unknown (never refreshed here) counts as rotating.
        if grant.refreshTokenRotates == false { return .proceed }
        do {
            let arrived = try engine.leaseForRefresh(
                need.name, minimumValidity: need.force || need.target != nil ? nil : need.minimumValidity,
                timeout: storeBound)
            return arrived.map(RefreshDecision.fresh) ?? .proceed
        } catch {
            // Another machine's lease, still active, or other machines
            // writing all the while: wait, never refresh beside them.
            // Anything else means the store cannot be used now (away,
            // failing, serving what it should not): refresh here, and let
            // the next sync sort the store out. Keys this process does not
            // hold are not the store's trouble: never a reason to go alone.
            if error.code == .busy || error.code == .notFound || error.code == .locked { throw error }
            return .proceedAlone
        }
    }

    /// Pushes the refreshed grant to the store, and judges a refusal against what the store holds.
    public func finish(_ need: RefreshNeed, refused: Bool, alone: Bool, in vault: Vault) -> RefusalVerdict {
        let engine = engine(vault)
        guard engine.isConfigured else { return .dead }
        // Send the new tokens now, unless the store was just found away (the
        // next sync sends them); a failure leaves them for the next sync.
        let pulled = alone ? false : publish(engine)
        guard refused else { return .dead }
        if !pulled, (try? engine.sync()) == nil {
            // The store is away: another machine may have spent the refresh
            // token; only the store can tell.
            return grantRotates(need, vault) ? .undecided : .dead
        }
        if !need.force, let fresh = try? vault.load(need.name), vault.usable(fresh, need.minimumValidity) {
            // Another machine had already spent the refresh token: its
            // result arrived with this pull.
            return .arrived(fresh)
        }
        return .dead
    }

    /// Syncs, again while the store works but did not take the sync (other
    /// machines' writes kept it busy, or it answered other requests while
    /// an answer was lost): the lease must end with the new tokens. For up
    /// to `publishBound` seconds; false when the sync did not go through.
    private func publish(_ engine: SyncEngine) -> Bool {
        let pacing = engine.vault.pacing
        let deadline = pacing.monotonic() + SyncRefreshCoordinator.publishBound
        guard let keys = try? engine.syncKeys(), let state = try? engine.loadSyncState(keys),
            let store = try? engine.store(for: state)
        else { return false }
        while true {
            let answered = store.answerCount
            do {
                _ = try engine.sync(through: store, keys: keys)
                return true
            } catch {
                let working = error.code == .busy || (error.code == .transient && store.answerCount > answered)
                guard working, pacing.monotonic() < deadline else { return false }
                pacing.pause(upTo: 0.3)
            }
        }
    }

    private func grantRotates(_ need: RefreshNeed, _ vault: Vault) -> Bool {
        (try? vault.load(need.name))?.refreshTokenRotates != false
    }
}
