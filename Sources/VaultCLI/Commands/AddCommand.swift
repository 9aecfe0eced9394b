internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// The person's side of an authorization, on a terminal.
struct TerminalAuthorizationUI: AuthorizationUI {
    let environment: [String: String]
    let console = Console()

    func openBrowser(_ url: String) { openBrowser(url, launching: url) }

    func openBrowser(_ url: String, launching launchURL: String?) {
        guard let launchURL else {
            console.info("open this address to authorize:")
            showAddress(url)
            return
        }
        console.info("open this address to authorize (vault is also opening it in your browser):")
        showAddress(url)
        // $BROWSER gets the URL as its one argument; the shell only splits
        // $BROWSER itself, never the URL.
        guard let command = environment["BROWSER"].flatMap({ $0.isEmpty ? nil : $0 }) ?? xdgOpen() else {
            console.info("no browser found ($BROWSER is unset and xdg-open is not installed): open the address above")
            return
        }
        if !BrowserLauncher.launch(command, url: launchURL, environment: environment) {
            console.warn("could not start a browser; open the address above yourself")
        }
    }

    /// The authorization address on a line of its own, so it can be
    /// copied whole; escaped, as the endpoint in it is a provider file's.
    func showAddress(_ url: String) { Console.write(Console.escaped(url) + "\n", to: 2) }

    /// xdg-open, if it is on the PATH.
    func xdgOpen() -> String? {
        let path = environment["PATH"] ?? "/usr/bin:/bin"
        for dir in path.split(separator: ":") where access("\(dir)/xdg-open", X_OK) == 0 { return "xdg-open" }
        return nil
    }

    /// Shows one line of the flow's text, which carries the provider's
    /// strings: a message like any other, escaped, so they cannot forge
    /// vault's own lines.
    func show(_ message: String) { console.info(message) }

    /// Reads one line from standard input, whatever it is: a person pastes
    /// at the terminal, and a program that runs the flow writes the address
    /// into a pipe (docs/cli.md).
    func readPasted(prompt: String) throws(VaultError) -> String {
        console.prompt(prompt)
        var bytes: [UInt8] = []
        var b: UInt8 = 0
        var ended = false
        while bytes.count < 16384 {
            let n = read(0, &b, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { ended = true }
            if n <= 0 || b == 0x0a { break }
            bytes.append(b)
        }
        // Standard input that is not the terminal (/dev/null under xargs,
        // nohup or ssh -n) ends at once: say where vault read.
        if ended && bytes.isEmpty && isatty(0) == 0 {
            throw VaultError(
                .invalidInput,
                "nothing was pasted: standard input, which is not the terminal, ended; give the address there, "
                    + "or add '</dev/tty' to paste it at the terminal")
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension AuthorizationRequest {
    var effectiveScopesForDisplay: [String] { scopes.isEmpty ? provider.scopes : scopes }
}

/// `vault add`.
struct AddCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "add",
        abstract: "Authorize with a provider and store the grant, or authorize a grant again.",
        usage:
            "add PROVIDER [NAME] [{scope}]... [{client-id}] [{client-secret-file}] [{flow:choices}] [{client-key-file} [{client-key-id}]] [{service-account} [{subject}]] [{login-hint}] [{issuer}] [{tenant}] [{timeout}] [{register}] [{dpop}]\nadd NAME [{flow:choices}] [{timeout}]",
        arguments: [
            ("PROVIDER", "a provider from 'vault providers', or a new name with --issuer"),
            (
                "NAME",
                "the name to store the grant under (default: PROVIDER); alone, an existing grant to authorize again"
            ),
        ],
        discussion: """
            The browser flow listens on 127.0.0.1 for the redirect, opens the authorization page
            with $BROWSER (the URL as its one argument) or xdg-open, and always prints the URL.
            PKCE (S256) and state are always used, and a nonce for OpenID Connect. The device flow
            shows a code to enter on another device; the paste flow reads the address the browser
            ended on (or the code) as one line from standard input, so a program can answer it
            too (docs/cli.md). An existing grant of the same name is replaced only when the new
            authorization succeeds. Nothing is stored on any failure. Exit status 75 when the
            device code expires or the browser never comes back (run it again), 1 when the
            person or the provider refuses.

            'vault add NAME' alone, for a grant that exists, authorizes it again with the
            provider and client it was authorized with (its own endpoints, client id and
            secret, as 'gh auth refresh' does), keeping its name, its git-credential mappings
            and its identity for sync; --scope adds scopes to its own, and --client-id or
            --client-secret-file change its client. This is what to run when a grant is dead.

            vault ships no client for its presets: the first 'vault add' of a provider without
            one says where to register an application, what redirect URI and device setting to
            enter, which scopes vault asks for and whether a secret is needed. Then put the
            client in $XDG_CONFIG_HOME/vault/providers/PROVIDER.json ({"client_id": ...,
            "client_secret": ...}), or pass --client-id and --client-secret-file.
            'vault providers' shows which providers still need a client.

            Grants for machines need no person. --flow client-credentials (RFC 6749 section 4.4)
            authenticates the client with its secret (--client-secret-file, sent as the provider
            says: Basic or in the body) or its private key (--client-key-file, private_key_jwt).
            --service-account KEY.json reads a service account's key file and gets tokens with
            RS256-signed assertions (RFC 7523); its token_uri is where, and PROVIDER may be any new
            name when no provider file describes the server. The secret or key is stored
            encrypted in the vault (the file can then be deleted), and 'vault token' mints a new
            token whenever the stored one is stale. Keys must be unencrypted PKCS#8 PEM (BEGIN
            PRIVATE KEY) RSA keys.
            """,
        examples: [
            "vault add google work --client-id 123.apps.googleusercontent.com --client-secret-file ~/google-secret",
            "vault add github --flow device --scope repo",
            "vault add corp --issuer https://id.corp.example --client-id vault",
            "vault add work --scope https://mail.google.com/",
            "vault add api ci --flow client-credentials --client-id ci-bot --client-secret-file ~/ci-secret",
            "vault add google ci --service-account ~/key.json --scope https://www.googleapis.com/auth/cloud-platform",
        ]
    )

    @RepeatedOption(
        "scope", value: "S",
        help: "a scope to ask for (repeatable; default: the provider's; for a grant: added to its own)")
    var scopes: [String]
    @Option("client-id", value: "ID", help: "the OAuth client id (else the provider file's)")
    var clientID: String?
    @Option("client-secret-file", value: "F", help: "read the client secret from file F")
    var clientSecretFile: String?
    @Option("flow", value: "FLOW", help: "{choices} (default: browser; device over SSH)")
    var flow: Provider.Flow?
    @Option(
        "client-key-file", value: "F",
        help: "client credentials: authenticate with the PKCS#8 RSA key in file F (private_key_jwt)")
    var clientKeyFile: String?
    @Option("client-key-id", value: "KID", help: "the client key's id, sent as the assertions' kid")
    var clientKeyID: String?
    @Option(
        "service-account", value: "KEY.json",
        help: "a service account's key file (Google's JSON format): tokens by RFC 7523 JWT bearer")
    var serviceAccount: String?
    @Option("subject", value: "USER", help: "with --service-account: act for USER (domain-wide delegation)")
    var subject: String?
    @Option("login-hint", value: "EMAIL", help: "suggest this account to the provider")
    var loginHint: String?
    @Option("issuer", value: "URL", help: "discover an OpenID Connect provider from its issuer")
    var issuer: String?
    @Option("tenant", value: "T", help: "the tenant, for providers that have one (Microsoft)")
    var tenant: String?
    @Option("timeout", value: "SECONDS", help: "how long to wait for the person (default 300)", in: 0.001...86_400)
    var timeout: Seconds?
    @Flag(
        "register",
        help: "register a client for vault with the provider first (RFC 7591 dynamic registration), if it allows that")
    var register: Bool
    @Flag("dpop", help: "bind the grant's tokens to a key vault keeps in the vault (RFC 9449 DPoP)")
    var dpop: Bool

    /// PROVIDER, or a grant to authorize again.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .provider : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let args = ctx.arguments.positionals
        guard let first = args.first else { throw CLIError.usage("missing PROVIDER", command: "add") }
        guard args.count <= 2 else { throw CLIError.usage("unexpected argument '\(args[2])'", command: "add") }
        let name = try ctx.grantName(args.count == 2 ? args[1] : first)
        _ = try ctx.grantName(first)
        if serviceAccount != nil || flow == .clientCredentials {
            return try addMachineGrant(
                ctx, providerName: first, name: name,
                transport: CurlTransport(caBundle: ctx.environment["SSL_CERT_FILE"]))
        }
        let transport = CurlTransport(caBundle: ctx.environment["SSL_CERT_FILE"])
        var (provider, existing, opened) = try provider(
            first, name: name, reauthorizing: args.count == 1 && issuer == nil, transport: transport, ctx: ctx)
        var flow: Provider.Flow
        if let requested = self.flow { flow = requested } else { flow = try defaultFlow(ctx, provider: provider) }
        if register && flow == .device { flow = provider.flows.contains(.paste) ? .paste : .browser }
        if opened == nil { opened = try ctx.opener.openVault() }
        let vault = opened!
        // Registered once the vault is open, so a wrong passphrase leaves no
        // client behind; deleted again unless the grant is stored.
        let pending = register ? PendingRegistration(transport: transport, output: ctx.output) : nil
        try pending?.register(&provider)
        // The client registered has the loopback redirect, not the device
        // grant: a hint or a later authorization offers only its flows.
        if register { provider.flows.removeAll { $0 == .device } }
        var scopes = scopes
        if existing != nil {
            // Scopes given now come on top of the grant's own.
            scopes = provider.scopes + scopes.filter { !provider.scopes.contains($0) }
        }
        var request = AuthorizationRequest(
            provider: provider, flow: flow, scopes: scopes, loginHint: loginHint,
            timeout: timeout?.value ?? 300)
        request.dpopKey = try proofKey(for: provider, existing: existing)
        request.requiresDPoPAccessToken = existing?.accessTokenIsDPoPBound == true
        let authorizer = Authorizer(
            transport: transport, ui: TerminalAuthorizationUI(environment: ctx.environment), time: ctx.time)
        var grant: Grant
        do { grant = try authorizer.authorize(request) } catch {
            pending?.undo()
            throw try scopeRefusal(
                error, asked: request.effectiveScopesForDisplay, provider: provider.name, grantsOwn: existing != nil,
                ctx: ctx)
        }
        if request.dpopKey != nil && !grant.accessTokenIsDPoPBound {
            ctx.output.warn(
                grant.isDPoPBound
                    ? "\(provider.name) answered with a bearer access token: only the refresh token is bound to the DPoP key"
                    : "\(provider.name) answered with bearer tokens: the grant's tokens are not bound to a DPoP key")
        }
        grant = grant.withDocumentedLifetime(provider.refreshTokenPolicy, authorizedAt: grant.createdAt)
        if let existing {
            // The tokens are new: the provider counts inactivity from now.
            grant.refreshedAt = grant.createdAt
            grant.createdAt = existing.createdAt
        }
        let existed = existing != nil || (try? vault.load(name)) != nil
        // Replacing keeps the record's id: its sync identity, as well as its name and mappings.
        if let pending {
            do { try pending.settle { _ = try vault.save(grant, as: name) } } catch {
                pending.undo()
                throw error
            }
        } else {
            _ = try vault.save(grant, as: name)
        }
        if existing != nil { tellAuthorizedAgain(name, grant, provider: provider, vault: vault, ctx: ctx) }
        try report(
            name, grant, provider: provider, existing: existing, existed: existed,
            asked: request.effectiveScopesForDisplay, ctx: ctx)
        return .ok
    }

    /// `error` as the command reports it; a refusal of the scopes asked
    /// (`invalid_scope`) names them, where they came from and how to ask
    /// for others. `grantsOwn`: a grant's own scopes were asked for again.
    func scopeRefusal(_ error: any Error, asked: [String], provider: String, grantsOwn: Bool, ctx: Context) throws
        -> any Error
    {
        guard let refusal = error as? VaultError, refusal.oauthError == "invalid_scope" else { return error }
        let reported = CLIError(reporting: refusal)
        let others = "ask for others with --scope S (repeatable)"
        let hint: String
        if asked.isEmpty {
            hint = "vault asked for no scope (no --scope, and provider '\(provider)' names none): \(others)"
        } else if grantsOwn {
            hint =
                "vault asked for the grant's own scopes\(scopes.isEmpty ? "" : " and those of --scope"): "
                + "\(asked.joined(separator: " ")); a grant added again keeps its own, so to ask for others, "
                + "'vault remove' it first and add it with --scope S"
        } else if !scopes.isEmpty {
            hint = "vault asked for the scopes of --scope: \(asked.joined(separator: " ")); \(others)"
        } else {
            let directory = try ctx.opener.location().configDirectory
            let inFile = ProviderCatalog.load(configDirectory: directory).files[provider] != nil
            hint =
                "vault asked for the scopes of provider '\(provider)': \(asked.joined(separator: " ")); "
                + (inFile
                    ? "change \"scopes\" in \(GrantLifetimes.providerFile(provider, configDirectory: directory)), or \(others), which replaces them"
                    : "\(others), which replaces them")
        }
        return CLIError(
            reported.message, hints: [reported.hint].compactMap { $0 } + reported.moreHints + [hint],
            exitCode: reported.exitCode)
    }

    /// The options that go together, checked before anything is opened:
    /// `--register` with those it excludes, and a machine's credentials
    /// only for a grant for a machine.
    func validate() throws(ValidationError) {
        if register {
            for option in [$clientID, $clientSecretFile, $serviceAccount] where option.given {
                throw ValidationError("--register and --\(option.spec.name) exclude each other")
            }
            if let flow, flow != .browser && flow != .paste {
                throw ValidationError(
                    "--register registers a client for the browser and paste flows: not with --flow \(flow.rawValue)")
            }
        }
        guard serviceAccount == nil && flow != .clientCredentials else { return }
        for option in [$clientKeyFile, $clientKeyID, $subject] where option.given {
            throw ValidationError("--\(option.spec.name) needs --flow client-credentials or --service-account")
        }
    }

    /// The provider to authorize `name` at: the one the grant `name` was
    /// authorized at when it is one (`reauthorizing`: one argument, no
    /// `--issuer`), else the provider named `first`, with the client given
    /// on the command line; the grant it replaces, and the vault when it had
    /// to be opened to find out.
    private func provider(
        _ first: String, name: String, reauthorizing: Bool, transport: CurlTransport, ctx: Context
    ) throws -> (Provider, Grant?, Vault?) {
        let configDirectory = try ctx.opener.location().configDirectory
        let catalog = ProviderCatalog.load(configDirectory: configDirectory)
        // One argument may name a grant to authorize again: finding out needs
        // the vault, and unlocking first means a wrong passphrase wastes no
        // authorization anyway.
        var opened: Vault? = nil
        var existing: Grant? = nil
        var nearNames: [String] = []
        if reauthorizing {
            opened = try ctx.opener.openVault()
            (existing, nearNames) = try existingGrant(name, in: opened!)
        }
        var provider: Provider
        if let existing, existing.kind.mintsTokens {
            // A grant for a machine has no person to ask: its credentials mint its tokens.
            throw CLIError(
                "'\(name)' is a grant for a machine: its stored credentials get it new tokens",
                hint: "'vault refresh \(name)' mints one now; to replace its key or secret, add it again with "
                    + "'vault add \(existing.provider) \(name) --service-account KEY.json' or '--flow client-credentials'",
                exitCode: .usage)
        }
        if let existing {
            if register {
                throw CLIError.usage(
                    "'\(name)' is a grant: 'vault add \(name)' authorizes it again with its own client; "
                        + "--register is for a new grant", command: "add")
            }
            for problem in catalog.problems(ignoring: existing.provider) { ctx.output.warn(problem.reason) }
            var base = catalog.providers[existing.provider]
            // A grant that keeps no token endpoint, of a provider known by
            // its issuer alone (imported while the issuer did not answer),
            // is authorized again at the endpoints discovery finds now.
            if let known = base, known.tokenEndpoint == nil, let issuer = known.issuer,
                existing.providerConfiguration?.tokenEndpoint == nil
            {
                base = try catalog.discovering(known.name, issuer: issuer, transport: transport)
            }
            provider = try Provider(storedIn: existing, name: name, base: base)
            if existing.providerConfiguration?.endpointsSource == "discovery", let issuer = provider.issuer {
                provider = try rediscovered(provider, grant: name, issuer: issuer, transport: transport)
            }
        } else {
            if opened != nil && catalog.providers[first] == nil && !catalog.files.keys.contains(first)
                && catalog.problem(of: first) == nil
            {
                // Neither a grant nor a provider: say both were looked for.
                let listed =
                    "'vault list' shows the grants; providers: "
                    + "\(catalog.providers.keys.sorted().joined(separator: ", ")); or describe one with --issuer URL"
                throw CLIError(
                    "no grant or provider named '\(first)'",
                    hints: (nearNames.isEmpty ? [] : [Remedies.hint(.nearGrantNames(nearNames))]) + [listed],
                    exitCode: .failure)
            }
            provider = try resolveProvider(first, catalog: catalog, ctx: ctx, transport: transport)
        }
        if let id = clientID, id != provider.clientID {
            // The registration vault kept was of another client: it must not
            // travel with this one (remove --revoke would delete the wrong one).
            provider.clientID = id
            provider.registeredClient = nil
        }
        if let path = clientSecretFile {
            let raw = try SecretFile.trimmingNewline(SecretFile.read(path: path))
            provider.clientSecret = raw.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
        guard provider.clientID != nil || register else {
            throw ClientRegistration.error(for: provider, configDirectory: configDirectory)
        }
        // Said before the vault is unlocked: there is nothing to register at.
        if register && provider.registrationEndpoint == nil { throw ClientRegistration.noEndpoint(provider) }
        return (provider, existing, opened)
    }

    /// Says what was stored: the grant's summary with `--json`, else a line
    /// and what the user should know (another account, scopes not granted,
    /// no refresh token).
    private func report(
        _ name: String, _ grant: Grant, provider: Provider, existing: Grant?, existed: Bool, asked: [String],
        ctx: Context
    ) throws {
        if ctx.output.json {
            try ctx.output.printJSON(GrantSummary(name: name, grant: grant, now: ctx.time.now()))
            return
        }
        let who = grant.account.map { ", \($0)" } ?? ""
        let scopes = grant.kind == .oauth1 ? "" : "; scopes: \(grant.scopes.joined(separator: " "))"
        let verb = existing != nil ? "authorized '\(name)' again" : "\(existed ? "replaced" : "added") '\(name)'"
        ctx.output.info("\(verb) (\(provider.name)\(who)\(scopes))")
        if let before = existing?.account, let after = grant.account, before != after {
            ctx.output.warn("'\(name)' was for \(before) and is now for \(after)")
        }
        let missing = asked.filter { !grant.scopes.contains($0) }
        if !missing.isEmpty { ctx.output.warn("the provider did not grant: \(missing.joined(separator: " "))") }
        // OAuth 1.0a token credentials do not expire and have no refresh token.
        if grant.refreshToken == nil && grant.kind == .oauth2 {
            ctx.output.warn(
                "the provider issued no refresh token; 'vault add \(name)' will be needed again when the access token expires"
            )
        }
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] {
        [
            $scopes, $clientID, $clientSecretFile, $flow, $clientKeyFile, $clientKeyID, $serviceAccount, $subject,
            $loginHint, $issuer, $tenant, $timeout, $register, $dpop,
        ]
    }
}

extension AddCommand {
    /// After `vault add NAME` authorized a grant again: what was told of
    /// it before (its death, its deadline) is forgotten, and the notify
    /// command, if any, hears that it lives again.
    func tellAuthorizedAgain(_ name: String, _ grant: Grant, provider: Provider, vault: Vault, ctx: Context) {
        guard let (row, _) = try? vault.loadWithRow(name) else { return }
        NoticeLedger(directory: vault.location.directory).forget(record: row.id)
        guard let notifier = NotifySettings.notifier(environment: ctx.environment, location: vault.location) else {
            return
        }
        notifier.notice(
            GrantNotice(
                event: .reauthorized, name: name, record: row.id, grant: grant, reason: "authorized again",
                deadline: grant.refreshTokenDeadline(policy: provider.refreshTokenPolicy)?.date))
    }

    /// The grant stored under `name`, or nil and the stored names near it
    /// when there is none; any other trouble reading it (a damaged record)
    /// is an error, not a new grant.
    func existingGrant(_ name: String, in vault: Vault) throws -> (Grant?, near: [String]) {
        do { return (try vault.load(name), []) } catch {
            guard error.code == .notFound else { throw error }
            if case .nearGrantNames(let names) = error.remedy { return (nil, names) }
            return (nil, [])
        }
    }

    /// A new DPoP key when the grant's tokens are to be bound to one: with
    /// --dpop, when the provider binds every grant
    /// (`dpop_bound_access_tokens`), or when the grant authorized again was
    /// bound. Signed with the first of vault's algorithms the provider lists.
    func proofKey(for provider: Provider, existing: Grant?) throws -> DPoPKey? {
        guard dpop || provider.dpopBoundAccessTokens || existing?.isDPoPBound == true else { return nil }
        guard provider.protocolVersion != .oauth1 else {
            throw CLIError.usage("--dpop binds OAuth 2.0 tokens; \(provider.name) uses OAuth 1.0a", command: "add")
        }
        guard let algorithm = DPoPKey.algorithm(for: provider.dpopSigningAlgValuesSupported) else {
            let listed = (provider.dpopSigningAlgValuesSupported ?? []).map { ProviderText.sanitized($0, limit: 20) }
            throw CLIError(
                "\(provider.name) takes DPoP proofs signed with \(listed.joined(separator: ", ")) only; "
                    + "vault signs them with \(DPoPKey.supportedAlgorithms.joined(separator: " or "))",
                exitCode: .failure)
        }
        return try DPoPKey.generate(algorithm: algorithm)
    }

    /// A grant found by discovery keeps its endpoints, not what its issuer
    /// says of pushed requests (RFC 9126) and `iss` in answers (RFC 9207):
    /// those are asked again. The pushed-request endpoint is taken only
    /// when the issuer still names the grant's own authorization and token
    /// endpoints, so all of them come from one source. When the issuer
    /// cannot be asked, nothing is authorized: going ahead without what it
    /// may require would be a downgrade an attacker on the path could force.
    func rediscovered(_ provider: Provider, grant name: String, issuer: String, transport: CurlTransport) throws
        -> Provider
    {
        let fresh: Provider
        do { fresh = try Discovery.provider(name: provider.name, issuer: issuer, transport: transport) } catch {
            let transient = error.code == .transient
            throw CLIError(
                "cannot ask \(issuer) again whether it takes pushed requests or names itself in answers "
                    + "(\(error.reason)): '\(name)' is not authorized again without knowing",
                hint: transient
                    ? "try again shortly"
                    : "check the issuer's discovery document (its .well-known/openid-configuration)",
                exitCode: transient ? .transient : .failure)
        }
        var p = provider
        p.authorizationResponseIssParameterSupported =
            p.authorizationResponseIssParameterSupported || fresh.authorizationResponseIssParameterSupported
        if fresh.authorizationEndpoint == p.authorizationEndpoint && fresh.tokenEndpoint == p.tokenEndpoint,
            p.pushedAuthorizationRequestEndpoint == nil
        {
            p.pushedAuthorizationRequestEndpoint = fresh.pushedAuthorizationRequestEndpoint
            p.requirePushedAuthorizationRequests = fresh.requirePushedAuthorizationRequests
        }
        return p
    }

    /// The provider: a preset or user file, discovered when it has only an issuer or `--issuer` is given.
    func resolveProvider(
        _ name: String, catalog: ProviderCatalog, ctx: Context, transport: CurlTransport
    ) throws -> Provider {
        let issuerFlag = issuer
        // A provider whose own file is wrong is that error, not an unknown
        // provider; an incomplete one is what --issuer completes.
        let own = catalog.problem(of: name)
        for problem in catalog.problems(ignoring: name) where problem != own { ctx.output.warn(problem.reason) }
        let known = catalog.providers[name]
        var overrides: [String: String] = [:]
        if let tenant = tenant { overrides["tenant"] = tenant }
        if let issuer = issuerFlag ?? (known?.tokenEndpoint == nil ? known?.issuer : nil) {
            if let own, catalog.isUnreadable(name) { ctx.output.warn(own.reason) }
            return try catalog.discovering(name, issuer: issuer, transport: transport)
        }
        guard let known else {
            if let own { throw own }
            throw CLIError(try catalog.provider(name).name)
        }
        // A preset stands in for a file of its name that is not used.
        if let own { ctx.output.warn(own.reason) }
        return known.resolved(overrides)
    }

    /// The flow when none is asked for: device (else paste) over SSH without
    /// a display, else browser; never client credentials, which is asked for.
    func defaultFlow(_ ctx: Context, provider: Provider) throws -> Provider.Flow {
        let env = ctx.environment
        let remote =
            env["SSH_CONNECTION"] != nil && env["DISPLAY"] == nil && env["WAYLAND_DISPLAY"] == nil
            && env["BROWSER"] == nil
        if remote {
            if provider.flows.contains(.device) { return .device }
            if provider.flows.contains(.paste) { return .paste }
        }
        let personal = provider.flows.filter { $0 != .clientCredentials }
        guard let first = personal.first else {
            throw CLIError.usage(
                "provider '\(provider.name)' offers only client credentials: add --flow client-credentials",
                command: "add")
        }
        return personal.contains(.browser) ? .browser : first
    }
}
