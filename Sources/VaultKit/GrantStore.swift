internal import FoundationEssentials
public import VaultCore
public import VaultHTTP

/// Where an app keeps its grants: GTMAppAuth's `AuthSessionStore`.
///
/// `VaultGrantStore` keeps them encrypted in a vault file; apps' tests use
/// `InMemoryGrantStore`. `TokenSession` hands out fresh tokens from any
/// store; most apps talk to a session rather than to the store directly.
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
    /// A grant with more than `minimumValidity` seconds of access token
    /// left, refreshed through `transport` first when needed, one refresh
    /// at a time per grant. The rotated refresh token is saved before the
    /// grant is returned; a refusal marks the grant dead (saved, kept).
    func freshGrant(
        _ name: String, minimumValidity: Double, forceRefresh: Bool, transport: any HTTPTransport & Sendable
    ) async throws(VaultError) -> FreshGrant
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
/// (names, not-found errors, refresh that saves before it returns), no file.
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

    /// Refreshes in this process only; concurrent callers are made to share
    /// one refresh by `TokenSession`.
    public func freshGrant(
        _ name: String, minimumValidity: Double, forceRefresh: Bool, transport: any HTTPTransport & Sendable
    ) async throws(VaultError) -> FreshGrant {
        let grant = try retrieve(name)
        if !forceRefresh, grant.isUsable(minimumValidity: minimumValidity, at: Date()) {
            return FreshGrant(grant: grant, refreshed: false)
        }
        if grant.dead { throw TokenRefresher.deadError(name, grant) }
        let outcome = await Result(catching: { () async throws(VaultError) in
            try await blocking { () throws(VaultError) in
                try TokenRefresher.refreshed(grant, name: name, transport: transport, now: { Date() })
            }
        })
        // The grant may have changed while the request was out (an actor
        // is reentrant at an await): store only over the grant refreshed.
        switch outcome {
        case .success(let next):
            if grants[name]?.refreshToken == grant.refreshToken { grants[name] = next }
            return FreshGrant(grant: next, refreshed: true)
        case .failure(let error) where error.code == .refused:
            var dead = grant
            dead.dead = true
            dead.deadReason = error.oauthError ?? "refused"
            if grants[name]?.refreshToken == grant.refreshToken { grants[name] = dead }
            throw TokenRefresher.deadError(name, dead, cause: error)
        case .failure(let error):
            throw error
        }
    }
}

extension Result where Failure == VaultError {
    init(catching body: () async throws(VaultError) -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
