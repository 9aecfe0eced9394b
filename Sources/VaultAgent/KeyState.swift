internal import CPlatform
internal import FoundationEssentials
internal import Glibc
import Synchronization
internal import VaultCore
internal import VaultCrypto

/// The agent's keys and the rules of their lifetime: unlocking, the idle and
/// hard timeouts, the grants asked for since unlocking, and locking, after
/// which the agent holds no reference to the keys (their secure memory is
/// zeroed as the last thread using them lets go). An agent that exits when
/// locked stops with its keys, so whether it is stopping is kept here too.
final class KeyState: Sendable {
    struct State {
        var unlocked: UnlockedKeys?
        var unlockedAt = Date(timeIntervalSince1970: 0)
        var lastUse = Date(timeIntervalSince1970: 0)
        /// The vault file the keys were unlocked for.
        var databaseIdentity: FileIdentity?
        /// Grants asked for since unlocking, and when: the background
        /// refresher keeps their tokens fresh.
        var recent: [String: Date] = [:]
        /// When to try a grant again after its background refresh failed.
        var retryAfter: [String: Date] = [:]
        var stopping = false
    }

    let environment: AgentEnvironment
    private let state = Mutex(State())

    init(environment: AgentEnvironment) { self.environment = environment }

    private var options: AgentServer.Options { environment.options }

    // MARK: Unlocking and locking

    /// Unlocks with a master key handed over by a client; the key must open
    /// the vault's state.
    func unlock(vaultID: [UInt8], masterKey: SecureBytes) throws(VaultError) {
        let location = environment.location
        let opened = try Vault.open(at: location, masterKey: masterKey, vaultID: vaultID, time: environment.time)
        let now = environment.time.now()
        let identity = FileIdentity(path: location.databasePath)
        let keys = UnlockedKeys(header: opened.vault.header, keys: opened.keys)
        state.withLock {
            $0.unlocked = keys
            $0.databaseIdentity = identity
            $0.unlockedAt = now
            $0.lastUse = now
            $0.recent = [:]
            $0.retryAfter = [:]
        }
        environment.log("unlocked")
    }

    /// Drops the keys and what was learnt since unlocking; an agent that
    /// exits when locked starts stopping.
    func lock(_ why: String) {
        let wasUnlocked = state.withLock { state -> Bool in
            guard state.unlocked != nil else { return false }
            state.unlocked = nil
            state.recent = [:]
            state.retryAfter = [:]
            if options.exitWhenLocked { state.stopping = true }
            return true
        }
        if wasUnlocked {
            // Hand the (already zeroed) free pages back to the kernel.
            vault_release_free_memory()
            environment.log("locked: \(why)")
        }
    }

    /// Tells every thread the agent is stopping.
    func stop() { state.withLock { $0.stopping = true } }

    var isUnlocked: Bool { state.withLock { $0.unlocked != nil } }
    var isStopping: Bool { state.withLock { $0.stopping } }

    // MARK: Use

    /// The id of the vault whose keys are held, if any.
    var heldVaultID: [UInt8]? { state.withLock { $0.unlocked?.header.vaultID } }

    /// Whether the keys held are for `vaultID`, and the seconds left before
    /// the idle and the hard timeout (0: locked, or no such timeout).
    func status(for vaultID: [UInt8]) -> (matches: Bool, idleLeft: UInt32, hardLeft: UInt32) {
        let now = environment.time.now()
        return state.withLock { state in
            guard let unlocked = state.unlocked else { return (false, 0, 0) }
            return (
                unlocked.header.vaultID == vaultID,
                KeyState.remaining(options.idleTimeout, since: state.lastUse, now: now),
                KeyState.remaining(options.hardTimeout, since: state.unlockedAt, now: now)
            )
        }
    }

    /// The keys held now, without counting a use (a token request counts
    /// only once it is answered: a refused one keeps nothing unlocked).
    func current() -> UnlockedKeys? { state.withLock { $0.unlocked } }

    /// Counts as use: the idle timeout starts again.
    func touch() {
        let now = environment.time.now()
        state.withLock { $0.lastUse = now }
    }

    /// The keys for one request, counting it as use and remembering the
    /// grant it asks a token of; nil when locked.
    func use(grant name: String?) -> UnlockedKeys? {
        let now = environment.time.now()
        return state.withLock { state in
            guard let unlocked = state.unlocked else { return nil }
            state.lastUse = now
            if let name { state.recent[name] = now }
            return unlocked
        }
    }

    /// Whole seconds left of `limit` since `start`, at least 1 while any is
    /// left; 0 when there is no limit.
    static func remaining(_ limit: TimeInterval, since start: Date, now: Date) -> UInt32 {
        guard limit > 0 else { return 0 }
        return UInt32(max(1, min(Double(UInt32.max), limit - now.timeIntervalSince(start))))
    }

    // MARK: Lifetime

    /// The timeout that has passed at `now`, if any (nil too when locked).
    func expiry(now: Date) -> String? {
        state.withLock { state -> String? in
            guard state.unlocked != nil else { return nil }
            if options.idleTimeout > 0 && now.timeIntervalSince(state.lastUse) >= options.idleTimeout {
                return "idle timeout"
            }
            if options.hardTimeout > 0 && now.timeIntervalSince(state.unlockedAt) >= options.hardTimeout {
                return "hard timeout"
            }
            return nil
        }
    }

    /// Locks when a timeout has passed or the vault file was replaced; true
    /// while the keys stay.
    func enforceLifetime(now: Date) -> Bool {
        guard isUnlocked else { return false }
        if let why = expiry(now: now) {
            lock(why)
            return false
        }
        return checkVaultFile()
    }

    /// Locks when the vault file is no longer the one unlocked (replaced by
    /// a new vault at the same path, or removed); true while the keys stay.
    @discardableResult
    func checkVaultFile() -> Bool {
        let known = state.withLock { $0.databaseIdentity }
        if let known, FileIdentity(path: environment.location.databasePath) != known {
            lock("the vault file was replaced or removed")
        }
        return isUnlocked
    }

    // MARK: Connections

    /// The session's vault over `current` keys, opened on first use and
    /// again after the keys changed (a lock and a new unlock).
    func vault(_ current: UnlockedKeys, session: inout VaultSession?) throws(VaultError) -> Vault {
        if let session, session.keys === current { return session.vault }
        if let idle = current.take() {
            session = VaultSession(keys: current, vault: idle)
            return idle
        }
        let location = environment.location
        let vault = Vault(
            location: location, database: try Vault.connect(location.databasePath), header: current.header,
            keys: current.keys, time: environment.time)
        // A new vault at the same path may even reuse the old file's inode:
        // its header names another vault, and these keys are not for it.
        guard let blob = try vault.getMeta("header"), try Header(decoding: blob).vaultID == current.header.vaultID
        else {
            lock("the vault file was replaced")
            throw VaultError(.locked, "the agent is locked")
        }
        session = VaultSession(keys: current, vault: vault)
        return vault
    }

    // MARK: Background refresh

    /// The keys and the grants asked for since unlocking that are not in
    /// `busy` and not waiting to be retried; nil when locked or none.
    func refreshCandidates(now: Date, excluding busy: Set<String>) -> (UnlockedKeys, [String])? {
        state.withLock { state -> (UnlockedKeys, [String])? in
            guard let unlocked = state.unlocked else { return nil }
            let names = state.recent.keys.filter { name in
                !busy.contains(name) && (state.retryAfter[name].map { $0 <= now } ?? true)
            }.sorted()
            return names.isEmpty ? nil : (unlocked, names)
        }
    }

    /// The keys while unlocked, for background work over every grant.
    var currentKeys: UnlockedKeys? { state.withLock { $0.unlocked } }

    /// Stops refreshing `name` in the background (gone, dead, or not refreshable).
    func forget(_ name: String) { state.withLock { $0.recent[name] = nil } }

    /// Tries `name` again no sooner than `date` (nil: at once).
    func retry(_ name: String, after date: Date?) { state.withLock { $0.retryAfter[name] = date } }
}

/// A file's device and inode: whether a path still names the file it did.
struct FileIdentity: Equatable, Sendable {
    let device: dev_t
    let inode: ino_t

    /// The identity of what `path` names (not following a link), or nil.
    init?(path: String) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        device = st.st_dev
        inode = st.st_ino
    }
}
