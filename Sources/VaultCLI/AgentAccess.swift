internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore

/// This vault's agent as a command sees it: where it listens, a
/// connection to it, a token in one round trip, and handing it the key
/// after a passphrase unlock.
struct AgentAccess {
    let environment: [String: String]
    let output: Output

    /// The agent's paths for this vault, or nil when agents are off
    /// (`VAULT_AGENT=off`) or there is no `XDG_RUNTIME_DIR`.
    func paths(for location: VaultLocation) -> AgentPaths? {
        if environment["VAULT_AGENT"] == "off" { return nil }
        return AgentPaths.resolve(environment: environment, location: location)
    }

    /// A connection to this vault's running agent, or nil. An agent socket
    /// that is not safely ours is reported and ignored.
    func client(for location: VaultLocation) -> AgentClient? {
        guard let paths = paths(for: location) else { return nil }
        do {
            return try AgentClient.connect(paths)
        } catch {
            if error.code != .notFound { output.warn("not using the agent: \(error.reason)") }
            return nil
        }
    }

    /// The token from this vault's agent in one round trip, or nil when no
    /// agent holds the vault unlocked (the caller then opens it itself).
    func token(_ name: String, at location: VaultLocation, minimumValidity: Double, forceRefresh: Bool) throws
        -> AgentToken?
    {
        guard let agent = client(for: location) else { return nil }
        do {
            return try agent.token(name, minimumValidity: minimumValidity, forceRefresh: forceRefresh)
        } catch {
            if error.code == .locked || error.code == .unsupported || error.code == .io { return nil }
            throw error
        }
    }

    /// A token of `name` narrowed to `target` from this vault's agent, or
    /// nil when no agent holds the vault unlocked or it is too old to know
    /// the operation: the caller then opens the vault itself.
    func derivedGrant(_ name: String, target: TokenTarget, at location: VaultLocation, minimumValidity: Double) throws
        -> Grant?
    {
        guard let agent = client(for: location) else { return nil }
        do {
            return try agent.derivedToken(name, target: target, minimumValidity: minimumValidity)
        } catch {
            if error.code == .locked || error.code == .unsupported || error.code == .io { return nil }
            throw error
        }
    }

    /// A fresh access token of `name` and what describes it from this
    /// vault's agent, under its policy, or nil when no agent holds the vault
    /// unlocked or it cannot hand this grant out this way (an OAuth 1.0a
    /// grant, an older agent): the caller then opens the vault itself.
    func grant(_ name: String, at location: VaultLocation, minimumValidity: Double) throws -> Grant? {
        guard let agent = client(for: location) else { return nil }
        do {
            return try agent.grantToken(name, minimumValidity: minimumValidity)
        } catch {
            if error.code == .locked || error.code == .unsupported || error.code == .io { return nil }
            throw error
        }
    }

    /// The header fields for `method` on `url` with a fresh token of `name`,
    /// made by this vault's agent under its policy (it signs a DPoP proof
    /// itself), or nil when no agent holds the vault unlocked or it cannot
    /// (an OAuth 1.0a grant, an older agent): the caller then goes on
    /// without it.
    func authorization(
        _ name: String, method: String, url: String?, nonce: String?, at location: VaultLocation,
        minimumValidity: Double
    ) throws -> RequestAuthorization? {
        guard let agent = client(for: location) else { return nil }
        do {
            return try agent.authorization(
                name, method: method, url: url, nonce: nonce, minimumValidity: minimumValidity)
        } catch {
            if error.code == .locked || error.code == .unsupported || error.code == .io { return nil }
            throw error
        }
    }

    /// The agent of another machine, forwarded here over SSH, when there is
    /// no vault here: `VAULT_AGENT_SOCK`, else
    /// `$XDG_RUNTIME_DIR/vault/forwarded.sock` when it exists. It hands out
    /// access tokens only.
    func forwarded(for location: VaultLocation) throws -> ForwardedAgent? {
        guard environment["VAULT_AGENT"] != "off", !Vault.exists(at: location) else { return nil }
        let named = environment["VAULT_AGENT_SOCK"].flatMap { $0.isEmpty ? nil : $0 }
        guard let path = named ?? environment["XDG_RUNTIME_DIR"].map({ $0 + "/vault/forwarded.sock" }) else {
            return nil
        }
        if named == nil && !FileSystem.exists(path) { return nil }
        do {
            return try ForwardedAgent.connect(socket: path)
        } catch {
            guard error.code == .notFound else { throw error }
            throw CLIError(error.reason, hints: Self.forwardingHints(path, named: named != nil))
        }
    }

    /// How to reach the laptop's agent again when the forwarded socket at
    /// `path` is missing or stale (its ssh session ended), or to stop
    /// looking for it (docs/agent.md, "Forwarding to other machines").
    static func forwardingHints(_ path: String, named: Bool) -> [String] {
        let stale = FileSystem.exists(path)
        let forward =
            "forward it from the machine that holds the vault: 'ssh -R \(path):$XDG_RUNTIME_DIR/vault/forward-ID.sock HOST', "
            + "or 'RemoteForward \(path) ${XDG_RUNTIME_DIR}/vault/forward-ID.sock' in its ~/.ssh/config "
            + "('vault agent --status' there prints the forwarding socket; docs/agent.md)"
        let first =
            stale
            ? "the ssh session that forwarded it has ended: remove \(path) (unless this server's sshd has StreamLocalBindUnlink yes) and "
                + forward
            : forward
        let without =
            named
            ? "to use no forwarded agent, unset VAULT_AGENT_SOCK" : "to use no forwarded agent, remove \(path)"
        return [first, without]
    }

    /// Notes a token this command handed out without an agent in the
    /// vault's audit log (an agent logs the ones it hands out).
    func audit(_ name: String, at location: VaultLocation, outcome: AuditEntry.Outcome, reason: String? = nil) {
        let entry = AuditEntry(
            time: Date(), grant: name, peer: .thisProcess, claimed: nil, outcome: outcome, reason: reason)
        if let failure = AuditLog(directory: location.directory).append(entry) {
            output.warn("the audit log: \(failure.reason)")
        }
    }

    /// After a passphrase unlock: hands the key to a locked agent, or
    /// starts one, so the next commands need no passphrase.
    func shareUnlock(_ vault: Vault, agent: AgentClient?) {
        guard environment["VAULT_AGENT"] != "off", let paths = paths(for: vault.location) else { return }
        if let agent {
            do { try agent.load(vault) } catch { output.warn("the agent did not take the key: \(error.reason)") }
            return
        }
        do {
            let options = try AgentSettings(environment: environment, options: nil)
            // Said only once the agent confirmed it holds the vault.
            _ = try AgentLauncher.start(vault, paths: paths, settings: options, environment: environment)
            output.info(
                "the agent keeps this vault unlocked (\(options.summary)); 'vault lock' locks it")
        } catch {
            output.warn("could not start the agent: \(CLIError(reporting: error).message)")
        }
    }
}
