import Synchronization
internal import VaultCore

/// The keys of one unlock, shared read-only by the agent's threads, and the
/// SQLite connections over them that no thread is using. Keeping a few open
/// spares every request opening one (and SQLite recreating the write-ahead
/// log, as the last connection to close deletes it).
///
/// Unchecked because `LocalKeys` and `Vault` are core classes that are not
/// `Sendable`: the keys never change after unlocking and are only read, and a
/// `Vault` belongs to the thread that took it until it gives it back. The
/// pool is a plain array behind a lock, as the compiler cannot yet follow a
/// non-Sendable value handed into a `Mutex`'s state.
final class UnlockedKeys: @unchecked Sendable {
    let header: Header
    let keys: LocalKeys
    private let poolLock = Mutex(())
    private var idle: [Vault] = []

    init(header: Header, keys: LocalKeys) {
        self.header = header
        self.keys = keys
    }

    /// A connection no thread is using, if there is one.
    func take() -> Vault? { poolLock.withLock { _ in idle.popLast() } }

    /// Hands a connection back for another thread (at most eight are kept).
    func give(_ vault: Vault) {
        poolLock.withLock { _ in if idle.count < 8 { idle.append(vault) } }
    }
}

/// A thread's own view of the unlocked vault: its own SQLite connection over
/// the shared keys.
struct VaultSession {
    let keys: UnlockedKeys
    let vault: Vault

    /// Gives the connection back to the keys' pool.
    func end() { keys.give(vault) }
}
