internal import FoundationEssentials
internal import Synchronization
internal import VaultAgent
public import VaultCore
public import VaultHTTP
internal import VaultSync

/// A `GrantStore` over a vault file: grants encrypted at rest, shared with
/// the `vault` command line and every other process of the user.
///
/// This is the entry point for apps. Every operation runs on one of
/// VaultKit's own threads with a SQLite connection of its own, never on
/// Swift's cooperative pool; a refresh holds only that grant's lock, so one
/// slow provider delays only its own grant (a thread waiting for another's
/// refresh of a grant leaves its place to other work), and one refresh at a
/// time per grant holds across tasks, processes and (when the vault syncs)
/// machines.
public final class VaultGrantStore: RefreshingGrantStore {
    /// Where the vault lives.
    public let location: VaultLocation
    private let makeHandle: @Sendable () throws(VaultError) -> Vault
    private let state: Mutex<State>

    /// What the operations share, under one lock.
    private struct State {
        /// Connections no thread is using.
        var idle: [Handoff<Vault>]
        /// Fresh grants last read, with the vault's change counter from
        /// before the read: served again while no connection has changed
        /// the file.
        var recent: [String: (grant: Grant, version: Int64)] = [:]
        /// Reads of grants under way, by name, with the change counter
        /// from before each began: callers that saw the same counter share
        /// the read.
        var reading: [String: (version: Int64, read: Task<Result<Grant, VaultError>, Never>)] = [:]
        /// The connection whose change counter is watched.
        let watcher: Vault
    }

    private init(
        location: VaultLocation, first: Handoff<Vault>,
        makeHandle: @escaping @Sendable () throws(VaultError) -> Vault
    ) throws(VaultError) {
        self.location = location
        self.makeHandle = makeHandle
        state = Mutex(State(idle: [first], watcher: try makeHandle()))
    }

    /// Opens the vault at `location` with `key` (a passphrase costs one
    /// Argon2id, off the cooperative pool).
    public static func open(at location: VaultLocation, key: KeySource) async throws(VaultError) -> VaultGrantStore {
        let key = Handoff(key)
        return try await blocking { () throws(VaultError) in
            let vault = Handoff(waitingApart(try Vault.open(at: location, key: key.value)))
            return try VaultGrantStore(
                location: location, first: vault, makeHandle: { () throws(VaultError) in try vault.value.sibling() })
        }
    }

    /// Creates a new vault at `location` unlocked by `key`.
    public static func create(at location: VaultLocation, key: KeySource, kdf: KDFParameters = .default)
        async throws(VaultError) -> VaultGrantStore
    {
        let key = Handoff(key)
        return try await blocking { () throws(VaultError) in
            let vault = Handoff(waitingApart(try Vault.create(at: location, key: key.value, kdf: kdf)))
            return try VaultGrantStore(
                location: location, first: vault, makeHandle: { () throws(VaultError) in try vault.value.sibling() })
        }
    }

    /// Opens the vault through the user's running agent (`vault agent`),
    /// which holds it unlocked and never hands out its key; `locked` when
    /// no agent holds this vault.
    public static func openThroughAgent(at location: VaultLocation, environment: [String: String])
        async throws(VaultError) -> VaultGrantStore
    {
        try await blocking { () throws(VaultError) in
            guard let paths = AgentPaths.resolve(environment: environment, location: location) else {
                throw VaultError(.locked, "no agent runtime directory (XDG_RUNTIME_DIR) for this vault")
            }
            let connect: @Sendable () throws(VaultError) -> Vault = { () throws(VaultError) in
                let client = try AgentClient.connect(paths)
                guard let vault = try Vault.open(at: location, agent: client) else {
                    throw VaultError(.locked, "the agent does not hold this vault unlocked")
                }
                return waitingApart(vault)
            }
            return try VaultGrantStore(location: location, first: Handoff(try connect()), makeHandle: connect)
        }
    }

    // MARK: GrantStore

    /// Saves `grant` under `name` in the vault, replacing any grant of that name.
    public func save(_ grant: Grant, as name: String) async throws(VaultError) {
        try await withHandle { (vault: Vault) throws(VaultError) in _ = try vault.save(grant, as: name) }
    }

    /// Loads and decrypts the grant stored under `name`; `notFound` when there is none.
    public func retrieve(_ name: String) async throws(VaultError) -> Grant {
        try await withHandle { (vault: Vault) throws(VaultError) in try vault.load(name) }
    }

    /// Removes the grant stored under `name`; `notFound` when there is none.
    public func remove(_ name: String) async throws(VaultError) {
        try await withHandle { (vault: Vault) throws(VaultError) in try vault.remove(name) }
    }

    /// The names of the grants in the vault, sorted.
    public func names() async throws(VaultError) -> [String] {
        try await withHandle { (vault: Vault) throws(VaultError) in
            try vault.list(secrets: false).grants.map(\.name).sorted()
        }
    }

    /// A grant with more than `minimumValidity` seconds left, refreshed under the grant's lock when needed.
    public func freshGrant(
        _ name: String, minimumValidity: Double, forceRefresh: Bool, transport: any HTTPTransport & Sendable
    ) async throws(VaultError) -> FreshGrant {
        try await freshGrant(
            name, minimumValidity: minimumValidity, forceRefresh: forceRefresh, transport: transport, extras: .none)
    }

    /// `freshGrant(_:minimumValidity:forceRefresh:transport:)` whose refresh
    /// request, if one is made, carries `extras`.
    public func freshGrant(
        _ name: String, minimumValidity: Double, forceRefresh: Bool, transport: any HTTPTransport & Sendable,
        extras: TokenRequestExtras
    ) async throws(VaultError) -> FreshGrant {
        let version = state.withLock { try? $0.watcher.changeCounter() }
        if !forceRefresh, let hit = remembered(name, minimumValidity: minimumValidity, version: version) {
            return FreshGrant(grant: hit, refreshed: false)
        }
        let fresh = try await withHandle { (vault: Vault) throws(VaultError) in
            // A vault opened through the agent keeps the agent's coordinator;
            // one opened here coordinates through its sync store, if any.
            let coordinator: (any RefreshCoordinator)? =
                vault.isThroughAgent
                ? nil : SyncRefreshCoordinator(transport: transport, configDirectory: vault.location.configDirectory)
            var refresher = TokenRefresher(vault: vault, transport: transport, coordinator: coordinator)
            refresher.refreshExtras = extras
            return try refresher.freshGrant(name, minimumValidity: minimumValidity, forceRefresh: forceRefresh)
        }
        // Kept with the counter from before the read: a change made since
        // (even the refresh just stored) makes the next call read again.
        if let version { state.withLock { $0.recent[name] = (fresh.grant, version) } }
        return fresh
    }

    /// Served from memory while no connection has changed the vault file
    /// since the grant was read (no transaction, no decryption, no thread
    /// hop); otherwise read, and remembered.
    public func usableGrant(_ name: String, minimumValidity: Double) async throws(VaultError) -> Grant? {
        let version = state.withLock { try? $0.watcher.changeCounter() }
        if let hit = remembered(name, minimumValidity: minimumValidity, version: version) { return hit }
        let grant = try await read(name, version: version)
        if let version { state.withLock { $0.recent[name] = (grant, version) } }
        return grant.isUsable(minimumValidity: minimumValidity, at: Date()) ? grant : nil
    }

    /// The grant under `name`, read once for every caller that asks while
    /// the change counter is `version`: a thousand tasks asking for one
    /// expired grant at once cost one read, not a thousand.
    private func read(_ name: String, version: Int64?) async throws(VaultError) -> Grant {
        guard let version else { return try await retrieve(name) }
        let (read, mine) = state.withLock { s in
            if let shared = s.reading[name], shared.version == version { return (shared.read, false) }
            let read = Task { await Result { () async throws(VaultError) in try await self.retrieve(name) } }
            s.reading[name] = (version, read)
            return (read, true)
        }
        let result = await read.value
        if mine { state.withLock { if $0.reading[name]?.read == read { $0.reading[name] = nil } } }
        return try result.get()
    }

    /// A grant read before, fresh enough, while the file is unchanged.
    private func remembered(_ name: String, minimumValidity: Double, version: Int64?) -> Grant? {
        guard let version, let hit = state.withLock({ $0.recent[name] }), hit.version == version,
            hit.grant.isUsable(minimumValidity: minimumValidity, at: Date())
        else { return nil }
        return hit.grant
    }

    /// Revokes the grant at the provider (RFC 7009), then removes it.
    public func revokeAndRemove(_ name: String, transport: any HTTPTransport & Sendable) async throws(VaultError)
        -> Revocation
    {
        try await withHandle { (vault: Vault) throws(VaultError) in
            try TokenRefresher(vault: vault, transport: transport).revokeAndRemove(name)
        }
    }

    // MARK: Handles

    /// `vault`, whose pauses (waiting for the lock of a grant another
    /// thread or process is refreshing, for another machine's lease, for a
    /// sync store to settle) leave the thread's place in VaultKit's threads
    /// to other work meanwhile: waits for a refresh never fill them. Its
    /// siblings pause the same way.
    private static func waitingApart(_ vault: Vault) -> Vault {
        let sleep = vault.pacing.sleep
        vault.pacing.sleep = { seconds in WorkerThreads.shared.waiting { sleep(seconds) } }
        return vault
    }

    /// Runs `body` on one of VaultKit's threads with a vault handle no other
    /// thread uses meanwhile.
    func withHandle<R: Sendable>(_ body: @escaping @Sendable (Vault) throws(VaultError) -> R)
        async throws(VaultError) -> R
    {
        try await blocking { [self] () throws(VaultError) in
            let vault = try checkOut()
            defer { checkIn(vault) }
            return try body(vault.value)
        }
    }

    private func checkOut() throws(VaultError) -> Handoff<Vault> {
        if let vault = state.withLock({ $0.idle.popLast() }) { return vault }
        return Handoff(try makeHandle())
    }

    private func checkIn(_ vault: Handoff<Vault>) {
        state.withLock {
            // As many idle connections as VaultKit's threads use at once
            // are enough; the rest are closed.
            if $0.idle.count < WorkerThreads.shared.limit { $0.idle.append(vault) }
        }
    }
}
