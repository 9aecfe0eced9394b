internal import FoundationEssentials
internal import VaultCore
internal import VaultHTTP

extension AddCommand {
    /// `vault add` for a machine: client credentials or a service account.
    /// Every file and flag is checked, and the vault unlocked, before the
    /// one token request; nothing is stored unless it succeeds.
    func addMachineGrant(_ ctx: Context, providerName: String, name: String, transport: CurlTransport)
        throws -> ExitCode
    {
        if serviceAccount != nil, flow != nil {
            throw CLIError.usage(
                "--service-account takes no --flow (it is its own: RFC 7523 JWT bearer)", command: "add")
        }
        let personOnly =
            [$loginHint, $timeout]
            + (serviceAccount != nil ? [$clientID, $clientSecretFile, $clientKeyFile, $clientKeyID] : [$subject])
        for option in personOnly where option.given {
            let with = serviceAccount != nil ? "--service-account" : "--flow client-credentials"
            throw CLIError.usage("--\(option.spec.name) does not go with \(with)", command: "add")
        }
        for scope in scopes where !ProviderText.isScope(scope) {
            throw CLIError.usage("--scope '\(scope)' is not a scope (printable, no spaces or quotes)", command: "add")
        }
        let grant: Grant
        if let path = serviceAccount {
            let key = try ServiceAccountKey(json: SecretFile.read(path: path, limit: 65536), source: path)
            let provider = try machineProvider(providerName, ctx: ctx, transport: transport, required: false)
            // Unlock first: a wrong passphrase must not waste a token request.
            let vault = try ctx.opener.openVault()
            let server: Provider
            if let provider { server = provider } else { server = try keyProvider(providerName, key: key) }
            let asked = askedScopes(replacing: name, of: providerName, in: vault)
            do {
                grant = try MachineGrants.serviceAccount(
                    key: key, subject: subject, scopes: asked, provider: server, transport: transport,
                    now: ctx.time.now())
            } catch {
                throw try scopeRefusal(
                    error, asked: asked.isEmpty ? server.scopes : asked, provider: server.name,
                    grantsOwn: asked != scopes, ctx: ctx)
            }
            return try storeMachineGrant(ctx, grant, name: name, vault: vault)
        }
        var keyPEM: String? = nil
        if let path = clientKeyFile {
            if clientSecretFile != nil {
                throw CLIError.usage("give --client-secret-file or --client-key-file, not both", command: "add")
            }
            let raw = try SecretFile.read(path: path, limit: 16384)
            let pem = raw.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            try JWTAssertion.checkPrivateKey(pem, source: path)
            keyPEM = pem
        } else if clientKeyID != nil {
            throw CLIError.usage("--client-key-id goes with --client-key-file", command: "add")
        }
        guard var provider = try machineProvider(providerName, ctx: ctx, transport: transport, required: true) else {
            throw CLIError("unknown provider '\(providerName)'")
        }
        if let id = clientID { provider.clientID = id }
        if let path = clientSecretFile {
            let raw = try SecretFile.trimmingNewline(SecretFile.read(path: path))
            provider.clientSecret = raw.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            provider.publicClient = false
        }
        if keyPEM == nil && (provider.clientSecret == nil || provider.publicClient) {
            throw CLIError.usage(
                "client credentials need the client's secret (--client-secret-file) or key (--client-key-file)",
                command: "add")
        }
        let vault = try ctx.opener.openVault()
        let keyID = clientKeyID
        let ready = provider
        let minted = try clientCredentials(
            ready, scopes: askedScopes(replacing: name, of: providerName, in: vault), privateKeyPEM: keyPEM,
            keyID: keyID, ctx: ctx, transport: transport)
        return try storeMachineGrant(ctx, minted, name: name, vault: vault)
    }

    /// The first token of a client credentials grant. A refusal of a
    /// request that asked for no scope says so: some providers answer it
    /// with a bare 403.
    func clientCredentials(
        _ provider: Provider, scopes: [String], privateKeyPEM: String?, keyID: String?, ctx: Context,
        transport: CurlTransport
    ) throws -> Grant {
        do {
            return try MachineGrants.clientCredentials(
                provider: provider, scopes: scopes, privateKeyPEM: privateKeyPEM, keyID: keyID, transport: transport,
                now: ctx.time.now())
        } catch {
            if error.oauthError == "invalid_scope" {
                throw try scopeRefusal(
                    error, asked: scopes.isEmpty ? provider.scopes : scopes, provider: provider.name,
                    grantsOwn: scopes != self.scopes, ctx: ctx)
            }
            guard scopes.isEmpty, provider.scopes.isEmpty, error.code != .transient else { throw error }
            var reported = CLIError(reporting: error)
            reported.moreHints.append(
                "no scope was asked for (no --scope, and provider '\(provider.name)' names no scopes), which some providers refuse: give --scope S"
            )
            throw reported
        }
    }

    /// The scopes to ask for: a machine grant of the same provider that is
    /// replaced (a new key or secret, as the hint for a refused one says)
    /// keeps its own, with the --scope ones on top, as a person's grant
    /// authorized again does; otherwise the --scope ones (none: the
    /// provider's).
    func askedScopes(replacing name: String, of provider: String, in vault: Vault) -> [String] {
        guard let existing = try? vault.load(name), existing.provider == provider,
            existing.kind == .serviceAccount || existing.kind == .clientCredentials
        else { return scopes }
        let own = existing.providerConfiguration?.scopes ?? existing.scopes
        return own + scopes.filter { !own.contains($0) }
    }

    /// The provider named on the command line; for a service account, nil
    /// when no provider of that name exists (the key file then says all).
    func machineProvider(_ name: String, ctx: Context, transport: CurlTransport, required: Bool)
        throws -> Provider?
    {
        let catalog = ProviderCatalog.load(configDirectory: try ctx.opener.location().configDirectory)
        if !required && issuer == nil {
            if catalog.providers[name] == nil && catalog.problem(of: name) == nil { return nil }
        }
        return try resolveProvider(name, catalog: catalog, ctx: ctx, transport: transport)
    }

    /// A provider made of a key file alone: its token_uri.
    func keyProvider(_ name: String, key: ServiceAccountKey) throws -> Provider {
        guard let uri = key.tokenURI else {
            throw CLIError(
                "the key file has no token_uri and no provider '\(name)' says where to get tokens",
                hint: "name a provider (vault add google NAME --service-account ...) or add token_uri to the key file")
        }
        return try Provider(name: name, tokenEndpoint: uri, clientID: nil, flows: [.clientCredentials])
    }

    func storeMachineGrant(_ ctx: Context, _ grant: Grant, name: String, vault: Vault)
        throws -> ExitCode
    {
        let existed = (try? vault.load(name)) != nil
        _ = try vault.save(grant, as: name)
        if ctx.output.json {
            try ctx.output.printJSON(GrantSummary(name: name, grant: grant, now: ctx.time.now()))
        } else {
            let who = grant.account.map { ", \($0)" } ?? ""
            let scopes = grant.scopes.isEmpty ? "" : "; scopes: \(grant.scopes.joined(separator: " "))"
            let kind = grant.kind == .serviceAccount ? "service account" : "client credentials"
            ctx.output.info(
                "\(existed ? "replaced" : "added") '\(name)' (\(grant.provider), \(kind)\(who)\(scopes));"
                    + " its secret or key is now kept in the vault, and the file can be deleted")
        }
        return .ok
    }
}
