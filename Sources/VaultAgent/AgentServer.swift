internal import CPlatform
public import FoundationEssentials
internal import Glibc
import Synchronization
public import VaultCore
public import VaultCrypto
public import VaultHTTP
internal import VaultSync

/// The unlock agent of one vault: holds its keys in secure memory and
/// answers clients of the same uid over a Unix socket (docs/agent.md).
///
/// The main thread accepts connections, watches signals and enforces the
/// timeouts; each connection is served on a thread of its own, with its own
/// SQLite connection, so a refresh waiting on a slow provider delays only
/// the client that asked for that grant. Refreshes of one grant are
/// single-flight through the core's per-grant lock, which threads share
/// with every other process.
///
/// Its parts: `AgentListener` (the socket, signals and admitted clients),
/// `ClientConnection` (frames and their timeouts), `AgentResponder` (one
/// request), `KeyState` (the keys and their lifetime) and
/// `BackgroundRefresher`.
public final class AgentServer: Sendable {
    /// How long the agent keeps the keys and what it does in the background.
    public struct Options: Sendable {
        /// Lock after this long without a request (0: never).
        public var idleTimeout: TimeInterval = 15 * 60
        /// Lock this long after unlocking, whatever the use (0: never).
        public var hardTimeout: TimeInterval = 8 * 3600
        /// Refresh a recently used grant when less than this is left.
        public var refreshBefore: TimeInterval = 5 * 60
        /// Exit when locked (an agent started on demand); otherwise stay and
        /// wait for a client to load the key again (a systemd service).
        public var exitWhenLocked = true
        /// A command that asks the person whether to hand out a token the
        /// policy says to confirm (`sh -c`, the question in `VAULT_CONFIRM_*`,
        /// exit status 0 for yes).
        public var confirmCommand: String?
        /// Ask on the agent's terminal when there is no confirmation command.
        public var confirmOnTerminal = false
        /// How long a confirmation may take before it counts as no.
        public var confirmTimeout: TimeInterval = 30
        /// Refresh a grant whose refresh token would die of inactivity
        /// within this long; nil: each grant's default, a quarter of its
        /// limit, at most 7 days.
        public var keepAliveLead: TimeInterval?
        /// The longest time between looks for grants to keep alive (0:
        /// never); sooner when a grant's deadline, less its lead, comes
        /// first.
        public var keepAliveInterval: TimeInterval = 3600
        /// A command told when a grant dies, is about to, or is authorized
        /// again (`sh -c`, the notice in `VAULT_NOTIFY_*`; docs/agent.md).
        public var notifyCommand: String?
        /// How long before a refresh token dies, for good, to say so.
        public var notifyLead: TimeInterval = 7 * 86400
        /// Seconds per request to the sync store when the agent syncs.
        package var storeTimeout: Double = SyncEngine.defaultStoreTimeout

        /// The defaults: 15 minutes idle, 8 hours at most.
        public init() {}
    }

    /// How long a stopping agent lets the requests under way finish: a
    /// token request's timeout, and time to store what it brought.
    package static let drainTimeout = TokenRefresher.requestTimeout + 10
    /// How long a new agent waits for a stopping one to exit and let go
    /// of the vault: its drain, and a second of polling either side.
    package static let handoverTimeout = drainTimeout + 5

    let keys: KeyState
    let listener: AgentListener
    let responder: AgentResponder
    let refresher: BackgroundRefresher
    let keepAlive: KeepAliveRefresher
    /// When the main thread last did its between-requests work.
    private let lastMaintenance = Mutex(Date(timeIntervalSince1970: 0))

    private var environment: AgentEnvironment { keys.environment }

    /// Creates an agent for the vault at `location`; `listen` and `run` start it.
    public init(
        location: VaultLocation, paths: AgentPaths, options: Options, transport: any HTTPTransport,
        time: any TimeSource = SystemTime(), log: @escaping (String) -> Void
    ) {
        let environment = AgentEnvironment(
            location: location, paths: paths, options: options, transport: transport, time: time, log: log)
        keys = KeyState(environment: environment)
        listener = AgentListener(environment: environment)
        responder = AgentResponder(keys: keys, listener: listener)
        refresher = BackgroundRefresher(keys: keys)
        keepAlive = KeepAliveRefresher(keys: keys)
    }

    // MARK: Starting

    /// Takes the agent lock and binds the socket. `alreadyExists` when
    /// another agent serves this vault. An agent that is stopping (locked,
    /// it no longer listens but lets its last requests finish) is waited
    /// for, up to `handoverTimeout`; then `busy`.
    public func listen() throws(VaultError) {
        guard vault_refuse_core_dumps() == 0 else {
            throw VaultError(.io, "cannot make the agent non-dumpable: \(FileSystem.errnoText())")
        }
        // Every heap block is zeroed as it is freed from here on: the tokens
        // a request decoded and sent leave no copy once it is answered, so
        // none outlives `vault lock` (the keys themselves are in secure memory).
        vault_wipe_freed_memory()
        try listener.bind()
    }

    /// Unlocks with a master key handed over by a client; the key must open
    /// this vault's state.
    public func unlock(vaultID: [UInt8], masterKey: SecureBytes) throws(VaultError) {
        try keys.unlock(vaultID: vaultID, masterKey: masterKey)
    }

    /// Unlocks with the key of a vault unlocked in this process.
    public func unlock(_ store: Vault) throws(VaultError) {
        try unlock(vaultID: store.header.vaultID, masterKey: try store.requireMasterKey())
    }

    // MARK: The loop

    /// Serves until told to stop (SIGTERM, SIGINT, or locking when
    /// `exitWhenLocked`), then removes the socket.
    public func run() {
        if !keys.isUnlocked && environment.options.exitWhenLocked { keys.stop() }
        let responder = responder
        let keys = keys
        listener.startServing(isStopping: { keys.isStopping }) {
            ClientConnection(fd: $0, peer: $1, responder: responder).serve()
        }
        while !keys.isStopping {
            guard let signalsPending = listener.waitForSignals() else {
                environment.log("poll failed: \(FileSystem.errnoText())")
                break
            }
            if signalsPending { handleSignals() }
            maintain()
            responder.writeCounts()
        }
        keys.lock("stopping")
        listener.removeSocket()
        // A refresh under way may have spent a rotating refresh token: let
        // it store the new one before the process ends.
        let deadline = Monotonic.seconds() + AgentServer.drainTimeout
        while responder.isBusy || refresher.isBusy || keepAlive.isBusy, Monotonic.seconds() < deadline {
            usleep(20_000)
        }
        responder.writeCounts(all: true)
        environment.log("stopped")
    }

    private func handleSignals() {
        for signal in listener.pendingSignals() {
            switch signal {
            case SIGHUP:
                keys.lock("SIGHUP")
            default:
                keys.lock(signal == SIGTERM ? "SIGTERM" : "SIGINT")
                keys.stop()
            }
        }
    }

    /// Between requests, at most once a second: the identity of the socket,
    /// the timeouts and the vault file, background refresh, and keep-alive
    /// of grants that would die of inactivity (planned by their deadlines).
    private func maintain() {
        let now = environment.time.now()
        let due = lastMaintenance.withLock { last -> Bool in
            guard now.timeIntervalSince(last) >= 1 else { return false }
            last = now
            return true
        }
        guard due else { return }
        if listener.socketWasReplaced {
            environment.log("the socket \(environment.paths.socket) was replaced or removed")
            keys.stop()
            return
        }
        guard keys.enforceLifetime(now: now) else { return }
        refresher.start(now: now)
        keepAlive.start(now: now)
    }
}

/// What every part of one agent shares and never changes: the vault, its
/// socket paths and options, and the caller's transport, clock and log.
///
/// Unchecked because `AgentServer.init` takes a transport and a log function
/// that are not `Sendable` (its public signature predates strict
/// concurrency); every serving thread uses them, as the agent always has.
/// The CLI's are safe to share: `CurlTransport` is `Sendable` and the log
/// writes each line with one call.
struct AgentEnvironment: @unchecked Sendable {
    let location: VaultLocation
    let paths: AgentPaths
    let options: AgentServer.Options
    let transport: any HTTPTransport
    let time: any TimeSource
    let log: (String) -> Void

    /// A refresher of `vault`'s grants, handing sync-aware refreshes to the
    /// core's per-grant lock.
    func tokenRefresher(_ vault: Vault) -> TokenRefresher {
        var refresher = TokenRefresher(
            vault: vault, transport: transport,
            coordinator: SyncRefreshCoordinator(transport: transport, configDirectory: location.configDirectory))
        refresher.observer = notifier
        return refresher
    }

    /// The person's notify command, when the options name one; it runs on
    /// a thread of its own, so a notice never holds up a token.
    var notifier: GrantNotifier? {
        guard let command = options.notifyCommand, !command.isEmpty else { return nil }
        return GrantNotifier(
            command: command, environment: Subprocess.inheritedEnvironment(), location: location, background: true,
            now: { [self] in time.now() }, log: { [self] in log($0) })
    }
}
