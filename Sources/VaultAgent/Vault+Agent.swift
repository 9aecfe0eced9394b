internal import Glibc
public import VaultCore
internal import VaultCrypto

extension Vault {
    /// Opens the vault at `location` with the keys the agent holds, or
    /// returns nil when the agent is locked or holds another vault.
    public static func open(at location: VaultLocation, agent: AgentClient, time: any TimeSource = SystemTime())
        throws(VaultError) -> Vault?
    {
        let locked = try LockedVault(location: location)
        guard try agent.hello(vaultID: locked.header.vaultID).unlocked else { return nil }
        let vault = Vault(
            location: location, database: locked.database, header: locked.header,
            keys: AgentKeys(client: agent, vaultID: locked.header.vaultID), time: time)
        vault.refreshCoordinator = AgentRefreshCoordinator(client: agent)
        return vault
    }

    /// True when this vault was opened through an agent.
    public var isThroughAgent: Bool { keys.masterKey == nil }

    /// The agent's keys of a vault opened through it.
    package var agentKeys: AgentKeys? { keys as? AgentKeys }

    /// Writes the master key to `fd` (a pipe to a new agent process).
    package func writeMasterKey(to fd: Int32) throws(VaultError) {
        let key = try requireMasterKey()
        var raw = Array(header.vaultID) + key.unsafeCopyToArray()
        defer { secureZero(&raw) }
        var sent = 0
        while sent < raw.count {
            let n = raw.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + sent, raw.count - sent) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw VaultError(.io, "cannot hand the key to the agent: \(FileSystem.errnoText())") }
            sent += n
        }
    }
}

extension Vault {
    /// Opens with a master key handed to the agent: the vault id must match
    /// and the key must authenticate the state.
    static func open(at location: VaultLocation, masterKey: SecureBytes, vaultID: [UInt8], time: any TimeSource)
        throws(VaultError) -> (vault: Vault, keys: LocalKeys)
    {
        let locked = try LockedVault(location: location)
        guard locked.header.vaultID == vaultID else {
            throw VaultError(.wrongKey, "the key is for another vault")
        }
        let keys = try LocalKeys(header: locked.header, masterKey: masterKey)
        let vault = Vault(location: location, database: locked.database, header: locked.header, keys: keys, time: time)
        do {
            _ = try vault.read { (_: StateManifest) throws(VaultError) in () }
        } catch {
            throw error.code == .tampered ? VaultError(.wrongKey, "the key does not open this vault") : error
        }
        return (vault, keys)
    }
}
