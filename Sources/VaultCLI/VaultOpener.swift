internal import Glibc
import Synchronization
internal import VaultAgent
internal import VaultCore
internal import VaultSync

/// Finds and unlocks the vault for a command: through this vault's agent
/// when one holds it unlocked, else with a key from `UnlockSources`.
struct VaultOpener {
    let environment: [String: String]
    var unlockSources: UnlockSources
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
                if let vault = try Vault.open(at: location, agent: agent, time: time) {
                    try checkUnusedKeyfile(at: location)
                    finishOnItsOwn(vault, agent: agent)
                    return vault
                }
            } catch let error as VaultError {
                if error.code == .damaged || error.code == .noVault { throw error }
                output.warn("not using the agent: \(error.reason)")
            }
        }
        let (vault, shareable) = try unlockHere(location)
        if shareable { agents.shareUnlock(vault, agent: agent) }
        vault.refreshCoordinator = SyncRefreshCoordinator(
            transport: network.transport, configDirectory: location.configDirectory)
        return vault
    }

    /// A key file given to a command that the agent served, which did not
    /// need it: one that cannot be read or is no key file fails as it would
    /// without the agent (exit 1 naming the file, or 77), and one given
    /// with --keyfile must open this vault (docs/cli.md, "Unlocking"). The
    /// agent still comes first: this only refuses to ignore a bad file.
    func checkUnusedKeyfile(at location: VaultLocation) throws {
        guard unlockSources.keyfilePath != nil else { return }
        let (key, origin, _) = try unlockSources.key()
        // VAULT_KEYFILE is often set for every command: read, not tried.
        guard unlockSources.keyfileFlag != nil else { return }
        let opened: Result<Vault, VaultError>
        do throws(VaultError) {
            opened = .success(try Vault.open(at: location, key: key, time: time))
        } catch {
            opened = .failure(error)
        }
        guard case .failure(let error) = opened else { return }
        guard error.code == .wrongKey else { throw error }
        throw CLIError("\(error.reason) (from \(origin))", hint: error.remedy.map(Remedies.hint), exitCode: .locked)
    }

    /// Lets a command opened through the agent finish on its own when the
    /// agent locks or exits before it is done: its record operations are
    /// then done here, with a key from the sources it would use without an
    /// agent (a key file, a passphrase command, file or variable, or the
    /// terminal); a refresh the agent did not answer is done here too.
    /// Without a source the command fails as locked (exit 77).
    private func finishOnItsOwn(_ vault: Vault, agent: AgentClient) {
        guard let keys = vault.agentKeys else { return }
        let location = vault.location
        keys.fallback = { () throws(VaultError) -> Vault? in
            guard unlockSources.available else { return nil }
            do {
                // Not shared with an agent: the user just locked it.
                return try unlockHere(location).0
            } catch let error as VaultError {
                throw error
            } catch {
                let reported = CLIError(reporting: error)
                throw VaultError(
                    reported.exitCode == .locked ? .locked : reported.exitCode == .usage ? .invalidInput : .io,
                    reported.message)
            }
        }
        vault.refreshCoordinator = AgentRefreshCoordinator(
            client: agent,
            here: SyncRefreshCoordinator(transport: network.transport, configDirectory: location.configDirectory))
        #if DEBUG
            keys.beforeRequest = AgentTestPause(environment: environment)?.wait
        #endif
    }

    /// Opens the vault by unlocking it in this process, never through the
    /// agent: for changes to keyslots, which need the master key.
    func openVaultDirectly() throws -> Vault {
        let location = try existingLocation()
        let vault = try unlockHere(location).0
        vault.refreshCoordinator = SyncRefreshCoordinator(
            transport: network.transport, configDirectory: location.configDirectory)
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
                    // A passphrase another machine set, taken here at a
                    // sync, says why the one from before fails.
                    let taken = Self.takenPassphraseHints(key, origin: origin, location: location)
                    if interactive && attempts < 3 {
                        output.error(error.reason, hint: attempts == 1 ? taken.first : nil)
                        continue
                    }
                    let hints = taken.isEmpty ? error.remedy.map { [Remedies.hint($0)] } ?? [] : taken
                    throw CLIError(
                        origin == "terminal" ? error.reason : "\(error.reason) (from \(origin))", hints: hints,
                        exitCode: .locked)
                }
                throw error
            }
        }
    }

    /// Why a passphrase fails when the vault's passphrase was changed on
    /// another machine and a sync here took it, and how to give the new
    /// one from `origin`; empty otherwise. Says when, never anything of
    /// either passphrase.
    static func takenPassphraseHints(_ key: KeySource, origin: String, location: VaultLocation) -> [String] {
        guard case .passphrase = key, let taken = Vault.passphraseNote(.taken, at: location) else { return [] }
        let opens =
            taken.passphrases > 1
            ? "the passphrases set there and here open this vault now, an older one does not"
            : "the passphrase set there opens this vault now, the one from before does not"
        let why =
            "the vault's passphrase was changed on another machine ('vault passwd' there), and this machine took it at its sync of \(taken.at.utcText): \(opens)"
        let fix: String
        switch origin {
        case "terminal": fix = "type the passphrase set on the other machine"
        case "VAULT_PASSPHRASE_FILE", "VAULT_PASSPHRASE_COMMAND", "VAULT_PASSPHRASE":
            let change =
                origin == "VAULT_PASSPHRASE_FILE"
                ? "write the new passphrase into the file VAULT_PASSPHRASE_FILE names (mode 0600)"
                : origin == "VAULT_PASSPHRASE_COMMAND"
                    ? "make VAULT_PASSPHRASE_COMMAND print the new passphrase"
                    : "give the new passphrase in VAULT_PASSPHRASE"
            fix =
                "\(change); programs served by an agent that holds the vault unlocked keep working until it locks, then need it too"
        default: fix = "give the new passphrase"
        }
        return [why, fix]
    }
}

#if DEBUG
    /// A pause before a request to the agent, for tests only: debug builds
    /// read `VAULT_TEST_AGENT_PAUSE=N:PATH` and, before the Nth request of
    /// the command's record operations, create PATH and wait (at most a
    /// minute) until it is removed, so a test can lock the agent in the
    /// middle of a command. Release builds have no such variable.
    struct AgentTestPause {
        let count: Int
        let path: String
        let seen = Counter()

        final class Counter: Sendable {
            private let count = Mutex(0)
            /// Counts one more request and returns the count.
            func next() -> Int {
                count.withLock {
                    $0 += 1; return $0
                }
            }
        }

        init?(environment: [String: String]) {
            guard let spec = environment["VAULT_TEST_AGENT_PAUSE"], let colon = spec.firstIndex(of: ":"),
                let count = Int(spec[..<colon]), count > 0
            else { return nil }
            self.count = count
            path = String(spec[spec.index(after: colon)...])
        }

        func wait() {
            guard seen.next() == count else { return }
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return }
            close(fd)
            for _ in 0..<1200 where access(path, F_OK) == 0 { usleep(50_000) }
        }
    }
#endif
