internal import FoundationEssentials
public import VaultCore
public import VaultHTTP

/// Where an app keeps its grants: GTMAppAuth's `AuthSessionStore`. A store
/// saves, retrieves and removes; `TokenSession` does the refreshing, one
/// refresh at a time per grant in the session, and saves what it got.
///
/// `VaultGrantStore` keeps grants encrypted in a vault file, and refreshes
/// them itself (`RefreshingGrantStore`), one refresh at a time per grant
/// across processes and synced machines; apps' tests use
/// `InMemoryGrantStore`; an app's own store implements the four methods.
public protocol GrantStore: Sendable {
    /// Saves `grant` under `name`, replacing any grant of that name.
    func save(_ grant: Grant, as name: String) async throws(VaultError)
    /// The grant stored under `name`; `notFound` when there is none.
    func retrieve(_ name: String) async throws(VaultError) -> Grant
    /// Removes the grant stored under `name`; `notFound` when there is none.
    func remove(_ name: String) async throws(VaultError)
    /// The names of the stored grants, sorted.
    func names() async throws(VaultError) -> [String]
    /// The stored grant when its access token has more than
    /// `minimumValidity` seconds left, else nil; never a network request.
    func usableGrant(_ name: String, minimumValidity: Double) async throws(VaultError) -> Grant?
}

/// A store that refreshes its grants itself, to coordinate refreshes beyond
/// one session: `VaultGrantStore` holds a lock of the grant's own across
/// processes, and the sync store's lease across machines. `TokenSession`
/// asks such a store rather than refreshing itself.
public protocol RefreshingGrantStore: GrantStore {
    /// A grant with more than `minimumValidity` seconds of access token
    /// left, refreshed through `transport` first when needed, one refresh
    /// at a time per grant. The rotated refresh token is saved before the
    /// grant is returned; a refusal marks the grant dead (saved, kept).
    func freshGrant(
        _ name: String, minimumValidity: Double, forceRefresh: Bool, transport: any HTTPTransport & Sendable
    ) async throws(VaultError) -> FreshGrant
    /// `freshGrant(_:minimumValidity:forceRefresh:transport:)` whose refresh
    /// request, if one is made, carries `extras`.
    func freshGrant(
        _ name: String, minimumValidity: Double, forceRefresh: Bool, transport: any HTTPTransport & Sendable,
        extras: TokenRequestExtras
    ) async throws(VaultError) -> FreshGrant
}

extension RefreshingGrantStore {
    /// For stores written before extras existed: without extras, their own
    /// refresh; with extras, `invalidInput` (the store cannot send them).
    public func freshGrant(
        _ name: String, minimumValidity: Double, forceRefresh: Bool, transport: any HTTPTransport & Sendable,
        extras: TokenRequestExtras
    ) async throws(VaultError) -> FreshGrant {
        guard extras.isEmpty else {
            throw VaultError(.invalidInput, "this grant store cannot add parameters or headers to its refreshes")
        }
        return try await freshGrant(
            name, minimumValidity: minimumValidity, forceRefresh: forceRefresh, transport: transport)
    }
}

extension GrantStore {
    /// The stored grant when its access token has more than
    /// `minimumValidity` seconds left, else nil; never a request. Stores may
    /// answer this from memory while nothing has changed.
    public func usableGrant(_ name: String, minimumValidity: Double) async throws(VaultError) -> Grant? {
        let grant = try await retrieve(name)
        return grant.isUsable(minimumValidity: minimumValidity, at: Date()) ? grant : nil
    }

    /// GTMAppAuth's `canAuthorize`: the grant has a usable access token or a
    /// refresh token, and was not refused; false when `name` holds no grant.
    public func canAuthorize(_ name: String) async throws(VaultError) -> Bool {
        do {
            return try await retrieve(name).canAuthorize(at: Date())
        } catch {
            guard error.code == .notFound else { throw error }
            return false
        }
    }
}

/// A store in memory, for apps' tests: the same rules as a vault file
/// (names, not-found errors), no file; the session refreshes its grants.
public actor InMemoryGrantStore: GrantStore {
    private var grants: [String: Grant]

    /// Creates a store holding `grants`.
    public init(_ grants: [String: Grant] = [:]) { self.grants = grants }

    /// Saves `grant` under `name`, replacing any grant of that name.
    public func save(_ grant: Grant, as name: String) throws(VaultError) {
        try GrantName.validate(name)
        grants[name] = grant
    }

    /// The grant stored under `name`; `notFound` when there is none.
    public func retrieve(_ name: String) throws(VaultError) -> Grant {
        guard let grant = grants[name] else { throw VaultError(.notFound, "grant '\(name)' not found") }
        return grant
    }

    /// Removes the grant stored under `name`; `notFound` when there is none.
    public func remove(_ name: String) throws(VaultError) {
        guard grants.removeValue(forKey: name) != nil else {
            throw VaultError(.notFound, "grant '\(name)' not found")
        }
    }

    /// The names of the stored grants, sorted.
    public func names() -> [String] { grants.keys.sorted() }
}

extension Result where Failure == VaultError {
    init(catching body: () async throws(VaultError) -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
