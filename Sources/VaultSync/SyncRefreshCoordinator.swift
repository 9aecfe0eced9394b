internal import FoundationEssentials
internal import Glibc
public import VaultCore
public import VaultHTTP

/// Refresh coordination for a vault that syncs: before a token request,
/// pull (another machine may have refreshed the grant) and take the
/// store's lease on it, so that a rotating refresh token is spent once
/// across machines; afterwards, push the new tokens at once.
///
/// When the store cannot be reached within `storeBound` seconds a
/// request, a grant is refreshed here only if this machine holds its
/// standing lease, or if its provider tolerates a reused refresh token
/// (or it does not rotate); the next sync pushes it (docs/sync.md,
/// "Refresh rights while the store is away"). A vault without a store is
/// refreshed as `LocalRefreshCoordinator` would.
public struct SyncRefreshCoordinator: RefreshCoordinator {
    /// How requests reach the store.
    public let transport: any HTTPTransport
    /// Seconds a store request may take before this machine stops waiting
    /// for the store and refreshes on its own.
    public let storeBound: Double

    /// What the provider of a grant does with a refresh token presented
    /// again (its `refresh_token_policy.reuse`); nil when not known, which
    /// counts as `revokes`.
    public let reuse: @Sendable (Grant) -> RefreshTokenReuse?

    /// Creates a coordinator; `storeBound` bounds each store request, and
    /// `reuse` says what each grant's provider does with a reused refresh
    /// token (unknown by default).
    public init(
        transport: any HTTPTransport, storeBound: Double = 5,
        reuse: @escaping @Sendable (Grant) -> RefreshTokenReuse? = { _ in nil }
    ) {
        self.transport = transport
        self.storeBound = storeBound
        self.reuse = reuse
    }

    /// A coordinator that learns what providers do with a reused refresh
    /// token from the presets and the provider files in `configDirectory`,
    /// read only when a grant is to be refreshed.
    public init(transport: any HTTPTransport, configDirectory: String) {
        self.init(transport: transport) { grant in
            ProviderCatalog.load(configDirectory: configDirectory).providers[grant.provider]?.refreshTokenPolicy?.reuse
        }
    }

    /// Whether a refresh of `grant` spends a refresh token that the
    /// provider may revoke the whole grant for, should it come again: one
    /// that rotates (or was never seen to), at a provider not known to
    /// tolerate reuse. Such a grant is refreshed only under a standing
    /// lease (docs/sync.md, "Refresh rights while the store is away").
    public func guarded(_ grant: Grant) -> Bool {
        grant.refreshTokenRotates != false && reuse(grant) != .tolerated
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
        let standing = guarded(grant)
        do {
            let arrived = try engine.leaseForRefresh(
                need.name, minimumValidity: need.force || need.target != nil ? nil : need.minimumValidity,
                timeout: storeBound, standing: standing)
            return arrived.map(RefreshDecision.fresh) ?? .proceed
        } catch {
            // Another machine's lease, still active, or other machines
            // writing all the while: wait, never refresh beside them.
            // Keys this process does not hold are not the store's trouble:
            // never a reason to go alone.
            if error.code == .busy || error.code == .notFound || error.code == .locked { throw error }
            // Anything else means the store cannot be used now (away,
            // failing, serving what it should not). A grant whose provider
            // tolerates reuse is refreshed here, and the next sync sorts
            // the store out; a guarded one only by the holder of its
            // standing lease, while it holds it.
            guard standing else { return .proceedAlone }
            let holder = try? engine.holdsStandingLease(
                on: need.name, request: TokenRefresher.requestTimeout, alone: true)
            if holder == true { return .proceedAlone }
            // This machine holds the right, yet does not refresh alone now:
            // say so, and when it will, rather than point at the others.
            if let mine = try? engine.heldStandingLease(on: need.name) {
                throw holderRefusal(need.name, grant: grant, lease: mine, store: error.reason, now: vault.time.now())
            }
            throw VaultError(
                .transient,
                "the sync store cannot be reached (\(error.reason)), and another machine may hold the right to "
                    + "refresh '\(need.name)': it is refreshed there, or here once the store answers",
                remedy: .tryAgainInAMinute)
        }
    }

    /// Why the holder of the standing lease on a guarded grant does not
    /// refresh it while the store cannot be reached (`store`, the store's
    /// failure): its lease is quiet (it promised the other machines not to
    /// refresh alone under it), or too little of it is left for a token
    /// request (docs/sync.md, "Refresh rights while the store is away").
    func holderRefusal(
        _ name: String, grant: Grant, lease: (quiet: Bool, secondsLeft: Double), store: String, now: Date
    ) -> VaultError {
        let rule = "(docs/sync.md, \"Refresh rights while the store is away\")"
        guard lease.quiet else {
            return VaultError(
                .transient,
                "this machine holds the right to refresh '\(name)', but the sync store cannot be reached (\(store)), "
                    + "and that right ends in \(Int(lease.secondsLeft)) s, too soon for a token request \(rule): "
                    + "it is refreshed here once the store answers again and this machine renews the right",
                remedy: .checkNetwork)
        }
        let valid = grant.expiresAt.map { expiry -> String in
            let left = expiry.timeIntervalSince(now)
            guard left > 0 else { return "its access token has expired" }
            return "its access token is valid for \(Self.duration(left)) more"
        }
        return VaultError(
            .transient,
            "this machine holds the right to refresh '\(name)', but the sync store cannot be reached (\(store)): "
                + "at its last sync its access token was to outlast that right, so this machine promised the other "
                + "machines not to refresh it without the store while the right lasts \(rule); it is refreshed "
                + "here once the store answers"
                + (valid.map { ", and \($0)" } ?? ""),
            remedy: .checkNetwork)
    }

    /// `seconds` in whole minutes, or seconds under two minutes.
    static func duration(_ seconds: Double) -> String {
        seconds < 120 ? "\(Int(seconds)) s" : "\(Int(seconds / 60)) min"
    }

    /// A guarded grant is refreshed alone only while this machine still
    /// holds its standing lease, not quiet, with time for the request: the
    /// lease may have run out, or been renewed quiet by another process of
    /// this machine, since `prepare` decided.
    public func mayStillRefreshAlone(_ need: RefreshNeed, grant: Grant, in vault: Vault) -> Bool {
        guard guarded(grant) else { return true }
        return
            (try? engine(vault).holdsStandingLease(on: need.name, request: TokenRefresher.requestTimeout, alone: true))
            == true
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
