public import FoundationEssentials

/// What a caller of `TokenRefresher.freshGrant` asked for.
public struct RefreshNeed: Sendable, Equatable {
    /// The grant's name.
    public let name: String
    /// Seconds the access token must still have left.
    public let minimumValidity: TimeInterval
    /// Refresh even when the access token is fresh.
    public let force: Bool

    /// Creates a need.
    public init(name: String, minimumValidity: TimeInterval = Grant.freshnessMargin, force: Bool = false) {
        self.name = name
        self.minimumValidity = minimumValidity
        self.force = force
    }
}

/// What a coordinator decides before this machine sends a token request.
public enum RefreshDecision: Sendable {
    /// Send the token request here.
    case proceed
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
/// cannot reach what it coordinates with should let the refresh go on here
/// (availability first) rather than stand between a caller and a token.
public protocol RefreshCoordinator {
    /// Called before this machine's lock for the grant is taken. A
    /// coordinator that refreshes in another process does it here and
    /// returns the result; nil lets the core refresh here.
    func refreshElsewhere(_ need: RefreshNeed, in vault: Vault) throws(VaultError) -> FreshGrant?

    /// Called holding this machine's lock for the grant, once it is known
    /// to need a token request.
    func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision

    /// Called after the new tokens are stored (`refused` false), or when the
    /// provider refused the grant (`refused` true; the grant is not yet
    /// marked). For a refusal it may return a grant that arrived fresh from
    /// elsewhere, which explains the refusal (a refresh token another
    /// machine had already spent); the grant is then not marked dead.
    func finish(_ need: RefreshNeed, refused: Bool, in vault: Vault) -> Grant?
}

extension RefreshCoordinator {
    /// By default the core refreshes in this process.
    public func refreshElsewhere(_ need: RefreshNeed, in vault: Vault) throws(VaultError) -> FreshGrant? { nil }
    /// By default a grant that needs a refresh is refreshed here.
    public func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision {
        .proceed
    }
    /// By default there is nothing to publish.
    public func finish(_ need: RefreshNeed, refused: Bool, in vault: Vault) -> Grant? { nil }
}

/// No coordination beyond this machine: a grant that lives in one vault.
public struct LocalRefreshCoordinator: RefreshCoordinator {
    /// Creates the local coordinator.
    public init() {}
}
