internal import CPlatform
internal import Glibc
internal import Synchronization
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP

/// The one message `vault add` gives when a provider has no client yet:
/// where to register an application, what to enter there, which scopes,
/// whether vault needs the secret, and how to hand the client to vault.
/// The provider-specific words are data (`registration` in the provider
/// file); every line is escaped on its way to the terminal.
enum ClientRegistration {
    static func error(for p: Provider, configDirectory: String) -> CLIError {
        let who = p.displayName ?? p.name
        let r = p.registration
        let oauth1 = p.protocolVersion == .oauth1
        var hints = ["register an application with \(who) at " + (r?.url ?? "the provider's developer pages")]
        if p.flows.contains(.browser) || p.flows.contains(.paste) {
            let redirect =
                p.redirectURI.map { "\($0), as the provider file's redirect_uri says" } ?? r?.redirectURI
                ?? "http://127.0.0.1/callback if the provider accepts any loopback port; else a fixed one such as "
                + "http://127.0.0.1:8976/callback, set as redirect_uri in the provider file too"
            hints.append("redirect URI: \(redirect)")
        }
        if p.flows.contains(.device) {
            hints.append(
                "device flow (--flow device): "
                    + (r?.deviceFlow ?? "enable it for the application if the provider asks"))
        }
        if !p.scopes.isEmpty {
            hints.append("scopes: \(p.scopes.joined(separator: " ")) (what vault asks for; more with --scope)")
        }
        let secret = r?.clientSecret ?? (p.publicClient ? "none" : "give it to vault if the provider issues one")
        hints.append("client secret: \(secret)")
        let id = oauth1 ? "KEY" : "ID"
        let needsSecret = oauth1 || !p.publicClient
        let file = "\(configDirectory)/providers/\(p.name).json"
        let json =
            needsSecret ? "{\"client_id\": \"\(id)\", \"client_secret\": \"SECRET\"}" : "{\"client_id\": \"\(id)\"}"
        let flags = needsSecret ? "--client-id \(id) --client-secret-file FILE" : "--client-id \(id)"
        hints.append("then give vault the client: put \(json) in \(file) (mode 0600), or pass \(flags)")
        return CLIError(
            "provider '\(p.name)' has no client: vault needs an application registered with \(who) first",
            hints: hints)
    }
}

extension ClientRegistration {
    /// `vault add --register`: registers a public client for vault at the
    /// provider's own registration endpoint (RFC 7591) and makes it the
    /// provider's client, with a fixed loopback redirect URI so that
    /// authorizing the grant again later uses the URI registered now.
    static func register(_ p: inout Provider, transport: any HTTPTransport, output: Output) throws
        -> ClientRegistrar
        .Client
    {
        guard let endpoint = p.registrationEndpoint else { throw noEndpoint(p) }
        let redirectURI = try p.redirectURI ?? freeLoopbackRedirect()
        let client = try ClientRegistrar(transport: transport).register(at: endpoint, redirectURI: redirectURI)
        p.clientID = client.id
        p.clientSecret = client.secret
        p.publicClient = client.secret == nil
        if let method = client.authMethod { p.tokenEndpointAuthMethod = method }
        p.redirectURI = redirectURI
        p.registeredClient = client.registration
        output.info(
            "registered client '\(client.id)' for vault with \(p.name) (redirect URI \(redirectURI)"
                + (client.secret != nil ? "; the provider issued a client secret, kept in the vault)" : ")"))
        return client
    }

    /// The error for `--register` with a provider that names no registration endpoint.
    static func noEndpoint(_ p: Provider) -> CLIError {
        let why =
            p.issuer != nil
            ? "its discovery document names no registration_endpoint"
            : "its provider file names no registration_endpoint"
        return CLIError(
            "provider '\(p.name)' does not offer dynamic client registration (RFC 7591): \(why)",
            hint: "register an application with the provider yourself and give vault its client with --client-id")
    }

    /// Deletes a client registered for an authorization that then failed
    /// or was stopped, so that nothing is left behind; when that is not
    /// possible, says what is left (the client id and where it is
    /// registered, never its tokens) for the person to delete.
    static func undo(_ client: ClientRegistrar.Client, transport: any HTTPTransport, output: Output) {
        let r = client.registration
        let left =
            "the client '\(client.id)' registered for it stays at the provider ("
            + (r.clientURI.map { "its registration: \(URLPolicy.redacted($0))" }
                ?? "registered at \(URLPolicy.redacted(r.endpoint))") + ")"
        do {
            switch try ClientRegistrar(transport: transport).delete(r) {
            case .deleted: output.info("deleted the client '\(client.id)' registered for it")
            case .gone: output.info("the client '\(client.id)' registered for it is gone from the provider already")
            case .unmanaged: output.warn("\(left), which offers no way to delete it: delete it there")
            }
        } catch {
            output.warn("\(left): deleting it failed (\(error.reason)); delete it there")
        }
    }

    /// `http://127.0.0.1:PORT/callback` with a port free now: a listener
    /// is opened on any port and closed, and the browser flow listens there.
    static func freeLoopbackRedirect() throws -> String {
        do { return try LoopbackListener(port: 0).redirectURI } catch {
            throw CLIError("cannot find a free loopback port for the redirect URI: \(error.reason)")
        }
    }
}

/// A client `vault add --register` registers, from before it is registered
/// until the grant that uses it is stored: deleted again (RFC 7592) when the
/// authorization fails or is cancelled, or when SIGINT, SIGTERM or SIGHUP
/// stops vault before the grant is stored. The signals are blocked from
/// the start and read on a thread of their own, which takes the same lock
/// as the registration and the storing of the grant: a signal during either
/// waits for it to end, so the client is deleted exactly when no grant
/// keeps it.
final class PendingRegistration: Sendable {
    enum State {
        /// Not registered (yet): nothing to delete.
        case none
        /// Registered, the grant not stored: to be deleted on failure.
        case pending(ClientRegistrar.Client)
        /// Stored with the grant, or deleted: nothing more to do.
        case settled
    }

    let state = Mutex(State.none)
    let transport: CurlTransport
    let output: Output

    /// Blocks the stop signals and starts watching for them.
    init(transport: CurlTransport, output: Output) {
        self.transport = transport
        self.output = output
        // The registration's answer carries its access token and maybe a
        // client secret, which end up in strings as tokens do: every heap
        // block is zeroed before it is freed from now on, as in the agent,
        // so no copy of them outlives its use.
        vault_wipe_freed_memory()
        let fd = vault_signal_fd()
        guard fd >= 0 else { return }
        startThread { [self] in
            var watched = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while true {
                if poll(&watched, 1, -1) < 0 && errno != EINTR { return }
                let signal = vault_signal_read(fd)
                if signal != 0 { stop(signal) }
            }
        }
    }

    /// Registers a client for `provider` (`ClientRegistration.register`).
    func register(_ provider: inout Provider) throws {
        try state.withLock { (s: inout State) throws -> Void in
            s = .pending(try ClientRegistration.register(&provider, transport: transport, output: output))
        }
    }

    /// Runs `store`, which stores the grant that keeps the client; once it
    /// succeeded, the client is the grant's and is never deleted here.
    func settle(_ store: () throws -> Void) throws {
        try state.withLock { (s: inout State) throws -> Void in
            try store()
            s = .settled
        }
    }

    /// The authorization failed: the client is deleted, if there is one.
    func undo() {
        state.withLock { s in
            if case .pending(let client) = s {
                ClientRegistration.undo(client, transport: transport, output: output)
            }
            s = .settled
        }
    }

    /// A stop signal: the client is deleted unless a stored grant keeps
    /// it, then vault ends by the signal, as it would have without this.
    func stop(_ signal: Int32) -> Never {
        state.withLock { s in
            if case .pending(let client) = s {
                output.warn(
                    "stopped (\(signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "SIGHUP")) before the grant was stored"
                )
                ClientRegistration.undo(client, transport: transport, output: output)
            }
            s = .settled
        }
        Glibc.signal(signal, SIG_DFL)
        vault_signal_unblock()
        raise(signal)
        _exit(128 + signal)
    }
}
