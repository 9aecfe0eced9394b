public import FoundationEssentials

/// What a caller of `TokenRefresher.freshGrant` asked for.
public struct RefreshNeed: Sendable, Equatable {
    /// The grant's name.
    public let name: String
    /// Seconds the access token must still have left.
    public let minimumValidity: TimeInterval
    /// Refresh even when the access token is fresh.
    public let force: Bool
    /// A narrowed token for this target rather than the grant's own access
    /// token (`TokenRefresher.derivedToken`); nil for the grant's own.
    public let target: TokenTarget?

    /// Creates a need.
    public init(
        name: String, minimumValidity: TimeInterval = Grant.freshnessMargin, force: Bool = false,
        target: TokenTarget? = nil
    ) {
        self.name = name
        self.minimumValidity = minimumValidity
        self.force = force
        self.target = target
    }
}

/// What a coordinator decides before this machine sends a token request.
public enum RefreshDecision: Sendable {
    /// Send the token request here, coordinated.
    case proceed
    /// Send the token request here although it could not be coordinated
    /// (the sync store is away), as only this machine may refresh the
    /// grant then. `finish` is then told.
    case proceedAlone
    /// No request is needed: this grant, already stored, arrived fresh
    /// from elsewhere (another machine refreshed it).
    case fresh(Grant)
}

/// Coordinates the refresh of one grant beyond this machine.
///
/// Most apps need none of this and use `LocalRefreshCoordinator`, the
/// default. The core already makes refreshes single-flight on one machine:
/// `TokenRefresher` holds a lock of that grant's own (never one that other
/// grants need) around the token request. A coordinator adds what the core
/// does not know about: other machines that hold the same grant (the sync
/// module supplies one that pulls first and takes the store's lease), or
/// another process that refreshes on this one's behalf (the agent client).
///
/// Every method must return within a bounded time: a coordinator that
/// cannot reach what it coordinates with lets the refresh go on here when
/// no other machine can be refreshing the grant, and otherwise throws a
/// transient error; the core then hands out an access token that is still
/// valid, if the grant has one.
public protocol RefreshCoordinator {
    /// Called before this machine's lock for the grant is taken. A
    /// coordinator that refreshes in another process does it here and
    /// returns the result; nil lets the core refresh here.
    func refreshElsewhere(_ need: RefreshNeed, in vault: Vault) throws(VaultError) -> FreshGrant?

    /// Called holding this machine's lock for the grant, once it is known
    /// to need a token request.
    func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision

    /// Called holding the lock, right before the token request, when
    /// `prepare` decided `proceedAlone`: whether it may still be sent. The
    /// right to refresh alone can run out while the process waits (for
    /// the vault file to take writes, say); false sends nothing, and the
    /// refresh is tried again later.
    func mayStillRefreshAlone(_ need: RefreshNeed, grant: Grant, in vault: Vault) -> Bool

    /// Called after the new tokens are stored and this machine's lock for
    /// the grant is let go (`refused` false), or, holding the lock, when the
    /// provider refused the grant (`refused` true; the grant is not yet
    /// marked). `alone` says `prepare` decided `proceedAlone`. For a refusal
    /// the verdict says what it means; after a refresh it is ignored.
    func finish(_ need: RefreshNeed, refused: Bool, alone: Bool, in vault: Vault) -> RefusalVerdict
}

/// What a refusal of a refresh means, as the coordinator sees it.
public enum RefusalVerdict: Sendable {
    /// The grant is dead: mark it (kept) and say so.
    case dead
    /// Another machine had already spent the refresh token, and its result
    /// has arrived: this grant, already stored, is fresh.
    case arrived(Grant)
    /// It cannot be told now (another machine may have refreshed while the
    /// store was away): the grant is left as it is and the refusal reported
    /// as transient.
    case undecided
}

extension RefreshCoordinator {
    /// By default the core refreshes in this process.
    public func refreshElsewhere(_ need: RefreshNeed, in vault: Vault) throws(VaultError) -> FreshGrant? { nil }
    /// By default a grant that needs a refresh is refreshed here.
    public func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision {
        .proceed
    }
    /// By default a decision to refresh alone stands.
    public func mayStillRefreshAlone(_ need: RefreshNeed, grant: Grant, in vault: Vault) -> Bool { true }
    /// By default there is nothing to publish, and a refusal is final.
    public func finish(_ need: RefreshNeed, refused: Bool, alone: Bool, in vault: Vault) -> RefusalVerdict { .dead }
}

/// No coordination beyond this machine: a grant that lives in one vault.
public struct LocalRefreshCoordinator: RefreshCoordinator {
    /// Creates the local coordinator.
    public init() {}
}
