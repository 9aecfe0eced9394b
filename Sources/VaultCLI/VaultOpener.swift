internal import VaultAgent
internal import VaultCore
internal import VaultSync

/// Finds and unlocks the vault for a command: through this vault's agent
/// when one holds it unlocked, else with a key from `UnlockSources`.
struct VaultOpener {
    let environment: [String: String]
    let unlockSources: UnlockSources
    let time: any TimeSource
    let output: Output
    let agents: AgentAccess
    let network: Network

    /// Where the vault is: `VAULT_HOME`, or the default.
    func location() throws -> VaultLocation {
        try VaultLocation.resolve(environment: environment)
    }

    /// Opens the vault: through this vault's agent when one holds it
    /// unlocked, else by unlocking it here. A passphrase unlock is shared
    /// with the agent (started if none runs) unless VAULT_AGENT=off.
    func openVault() throws -> Vault {
        let location = try existingLocation()
        let agent = agents.client(for: location)
        if let agent {
            do {
                if let vault = try Vault.open(at: location, agent: agent, time: time) { return vault }
            } catch {
                if error.code == .damaged || error.code == .noVault { throw error }
                output.warn("not using the agent: \(error.reason)")
            }
        }
        let (vault, shareable) = try unlockHere(location)
        if shareable { agents.shareUnlock(vault, agent: agent) }
        vault.refreshCoordinator = SyncRefreshCoordinator(transport: network.transport)
        return vault
    }

    /// Opens the vault by unlocking it in this process, never through the
    /// agent: for changes to keyslots, which need the master key.
    func openVaultDirectly() throws -> Vault {
        let vault = try unlockHere(try existingLocation()).0
        vault.refreshCoordinator = SyncRefreshCoordinator(transport: network.transport)
        return vault
    }

    private func existingLocation() throws -> VaultLocation {
        let location = try location()
        guard Vault.exists(at: location) else {
            // Through a forwarded agent this machine has tokens, not a vault.
            if let socket = environment["VAULT_AGENT_SOCK"], !socket.isEmpty {
                throw CLIError(
                    "no vault at \(location.databasePath); the forwarded agent at \(socket) hands out access tokens only",
                    hint: "run this command on the machine that holds the vault")
            }
            throw CLIError("no vault at \(location.databasePath)", hint: "run 'vault init' to create one")
        }
        return location
    }

    /// Unlocks here. A wrong passphrase typed on the terminal may be
    /// retried twice; other sources fail at once. Also says whether the
    /// key was a passphrase (worth keeping in the agent).
    private func unlockHere(_ location: VaultLocation) throws -> (Vault, Bool) {
        var attempts = 0
        // A vault with a Secret Service slot opens from the keyring first.
        var keyring: (vaultID: [UInt8], slotIDs: [[UInt8]])? = nil
        if SecretService.usable(environment: environment),
            let info = try? Vault.secretServiceSlots(at: location), !info.slotIDs.isEmpty
        {
            keyring = info
        }
        while true {
            attempts += 1
            let (key, origin, interactive) = try unlockSources.key(secretServiceVault: keyring)
            do {
                let vault = try Vault.open(at: location, key: key, time: time)
                if case .passphrase = key { return (vault, true) }
                return (vault, false)
            } catch {
                if case .secretService = key, error.code == .wrongKey {
                    output.warn("\(error.reason); trying the passphrase")
                    keyring = nil
                    attempts -= 1
                    continue
                }
                if error.code == .wrongKey {
                    if interactive && attempts < 3 {
                        output.error(error.reason)
                        continue
                    }
                    throw CLIError(
                        origin == "terminal" ? error.reason : "\(error.reason) (from \(origin))",
                        hint: error.remedy.map(Remedies.hint),
                        exitCode: .locked)
                }
                throw error
            }
        }
    }
}
