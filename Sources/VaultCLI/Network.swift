internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// How a command reaches providers and the sync store: the HTTP
/// transport, and the refresher and sync engine that use it.
struct Network {
    let environment: [String: String]
    /// The command, named in usage errors.
    let command: String

    /// The HTTP transport; libcurl itself is loaded only when a request is made.
    var transport: CurlTransport { CurlTransport(caBundle: caBundle) }

    /// A CA bundle to trust instead of the system's: `SSL_CERT_FILE`.
    var caBundle: String? { environment["SSL_CERT_FILE"] }

    /// Seconds per request to the sync store: `VAULT_STORE_TIMEOUT`, or the default.
    func storeTimeout() throws -> Double {
        guard let text = environment["VAULT_STORE_TIMEOUT"] else { return SyncEngine.defaultStoreTimeout }
        guard let seconds = Double(text), seconds >= 1, seconds <= 600 else {
            throw CLIError.usage("VAULT_STORE_TIMEOUT needs a number of seconds (1 to 600)", command: command)
        }
        return seconds
    }

    /// The sync engine of `vault`, with this command's store timeout; a
    /// request that runs out of time is said on stderr before it is tried
    /// again, so that a store that never answers is not minutes of silence.
    func syncEngine(_ vault: Vault) throws -> SyncEngine {
        var engine = SyncEngine(vault: vault, transport: transport, storeTimeout: try storeTimeout())
        engine.onStoreTimeout = { wait in
            Console().info(
                "the store at \(wait.place) has not answered \(wait.method) \(wait.name) in "
                    + "\(ObjectStoreWait.said(wait.seconds)); trying again (\(wait.nextAttempt) of \(wait.attempts))")
        }
        return engine
    }

    /// The hint for a store that did not answer: its server, then the time
    /// each request is given (`VAULT_STORE_TIMEOUT`, the agent's own when
    /// the agent synced).
    static func unansweredStoreHint(throughAgent: Bool) -> String {
        "check that the store's server is running and answers; a slow store needs more time per request: "
            + (throughAgent
                ? "VAULT_STORE_TIMEOUT in the agent's environment"
                : "VAULT_STORE_TIMEOUT (seconds, default \(Int(SyncEngine.defaultStoreTimeout)))")
    }

    /// Fresh tokens from `vault`, coordinated as it was opened (through
    /// the agent, or with the sync store).
    /// A grant a refresh marks dead is told to the notify command, if any.
    func refresher(_ vault: Vault) -> TokenRefresher {
        var refresher = TokenRefresher(vault: vault, transport: transport)
        refresher.observer = NotifySettings.notifier(environment: environment, location: vault.location)
        return refresher
    }
}
