internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// `vault import`.
struct ImportCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "import",
        abstract: "Store a grant given as JSON on stdin, or from another tool's token file.",
        usage: "import NAME [{replace}] [{from:choices}] [{remote}] [{host}] [{client-id}] [{client-secret-file}]",
        arguments: [("NAME", "the name to store the grant under")],
        discussion: """
            Standard input holds one JSON object: the fields of an OAuth token response
            (access_token, refresh_token, token_type, expires_in or expires_at in seconds since
            the epoch, refresh_token_expires_in, scope, id_token; expires_in counts from iat when
            it is plausible, else from now), plus "provider" and optionally
            "account", "token_secret" (OAuth 1.0a) and "provider_config" (endpoints and client,
            for refresh). Other fields are kept as the token response ('vault show --json').
            What 'vault show --json --reveal NAME' prints is read back whole (its scopes, times
            and token_response): piped into 'vault import', it moves one grant.
            Tokens must be printable ASCII and expiry times sensible, as in a refresh.

            A refresh token needs a token endpoint and the client it was issued to. What
            provider_config lacks comes from the configured provider of that name (a preset,
            or a provider file in $XDG_CONFIG_HOME/vault/providers/; one that names only an
            issuer is discovered there, as 'vault add' does), its client included;
            --client-id and --client-secret-file name the client instead. vault warns when
            it does not know the provider, and when the grant cannot be refreshed ('vault list'
            then never shows it as refreshable).

            --from reads another tool's file from stdin (secrets never go on a command line):
              gcloud       application_default_credentials.json (type authorized_user): refreshable,
                           with gcloud's client from the file and Google's token endpoint.
              rclone       rclone.conf; --remote picks the remote (needed when several have a
                           token). drive is Google, onedrive Microsoft; other types need a provider
                           file named after the type, with its token_endpoint. Refreshable when
                           the remote has its own client_id and client_secret; tokens of rclone's
                           built-in client work until they expire.
              gh           hosts.yml; --host picks the host. GitHub OAuth app tokens do not expire
                           and have no refresh token: nothing to refresh. gh 2.40 and later keep the
                           token in the system keyring instead (see 'gh auth login --insecure-storage').
              mutt_oauth2  the token file, decrypted: gpg -d TOKENFILE | vault import NAME --from
                           mutt_oauth2. Refreshable with the client the file names, else the
                           configured provider's (google, microsoft), which must be the client
                           registered in mutt_oauth2.py, or --client-id and --client-secret-file.
            A grant imported without an account or scopes learns them at its first refresh.
            """,
        examples: [
            #"vault import work < token.json"#,
            #"printf '%s' "$RESPONSE" | vault import github --replace"#,
            #"vault import gcloud --from gcloud < ~/.config/gcloud/application_default_credentials.json"#,
            #"vault import drive --from rclone --remote gdrive < ~/.config/rclone/rclone.conf"#,
            #"gpg -d ~/.mutt/token.gpg | vault import mail --from mutt_oauth2"#,
        ]
    )

    @Flag("replace", help: "overwrite a grant of the same name")
    var replace: Bool
    @Option("from", value: "TOOL", help: "read that tool's own token file from stdin: {choices}")
    var from: ForeignTokens.Tool?
    @Option("remote", value: "R", help: "--from rclone: the remote whose token to import")
    var remote: String?
    @Option("host", value: "H", help: "--from gh: the host (default github.com)")
    var host: String?
    @Option("client-id", value: "ID", help: "the client the tokens were issued to")
    var clientID: String?
    @Option("client-secret-file", value: "F", help: "read that client's secret from file F")
    var clientSecretFile: String?

    /// `--remote` and `--host` name a section of one tool's file.
    func validate() throws(ValidationError) {
        if remote != nil && from != .rclone { throw ValidationError("--remote goes with --from rclone") }
        if host != nil && from != .gh { throw ValidationError("--host goes with --from gh") }
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let tool = from
        var clientSecret: String? = nil
        if let path = clientSecretFile {
            let raw = try SecretFile.trimmingNewline(SecretFile.read(path: path))
            clientSecret = raw.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
        let input = try StandardInput.read(limit: TokenResponse.maximumSize)
        guard input.count > 0 else {
            throw CLIError("standard input is empty", hint: "pipe the token JSON into 'vault import \(name)'")
        }
        let now = ctx.time.now()
        let section = tool.flatMap { $0 == .rclone ? remote : host }
        var grant = try importedGrant(input, from: tool, section: section, now: now)
        grant.providerConfiguration?.dropRegistration()
        let notes = try resolveClient(&grant, name: name, tool: tool, clientSecret: clientSecret, ctx: ctx)
        let vault = try ctx.opener.openVault()
        _ = try vault.save(grant, as: name, mode: replace ? .replace : .insertOnly)
        // Said once the grant is stored, so that no warning precedes a refusal.
        for note in notes { note.warning ? ctx.output.warn(note.text) : ctx.output.info(note.text) }
        if ctx.output.json {
            try ctx.output.printJSON(GrantSummary(name: name, grant: grant, now: now))
        } else {
            ctx.output.info("imported '\(name)' (\(grant.provider)\(grant.account.map { ", " + $0 } ?? ""))")
        }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$replace, $from, $remote, $host, $clientID, $clientSecretFile] }
}

extension ImportCommand {

    /// The grant in `input`: token JSON, or another tool's token file
    /// converted to it.
    func importedGrant(_ input: SecureBytes, from tool: ForeignTokens.Tool?, section: String?, now: Date) throws
        -> Grant
    {
        guard let tool else { return try TokenResponse(json: input).importedGrant(now: now) }
        let converted = try ForeignTokens.convert(tool, input, section: section, now: now)
        var data: Data
        do { data = try JSONEncoder().encode(JSONValue.object(converted.object)) } catch {
            throw VaultError(.internalError, "could not re-encode the \(tool.rawValue) token")
        }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        var bytes = [UInt8](data)
        defer { secureZero(&bytes) }
        let json: SecureBytes
        do { json = try SecureBytes(copying: bytes) } catch {
            throw VaultError(.internalError, "could not hold the \(tool.rawValue) token in locked memory")
        }
        return try TokenResponse(json: json).importedGrant(now: now)
    }

    /// Completes the grant's provider configuration from the configured
    /// provider of its name; returns what to tell the person (an unknown
    /// provider, a grant that cannot be refreshed).
    /// Tokens from another tool keep that tool's client: a refresh token
    /// works only with the client it was issued to, so a configured
    /// client is taken only where the tool uses the user's own
    /// (mutt_oauth2.py) or the JSON names none.
    func resolveClient(
        _ grant: inout Grant, name: String, tool: ForeignTokens.Tool?, clientSecret: String?, ctx: Context
    ) throws -> [(warning: Bool, text: String)] {
        var notes: [(warning: Bool, text: String)] = []
        var config = grant.providerConfiguration ?? ProviderConfiguration()
        // Where the endpoints came from is for vault to say, not the file.
        config.endpointsSource = nil
        let givenClient = clientID
        if givenClient == nil && clientSecret != nil {
            throw CLIError.usage("--client-secret-file goes with --client-id", command: "import")
        }
        let configDirectory = try ctx.opener.location().configDirectory
        let catalog = ProviderCatalog.load(configDirectory: configDirectory, only: grant.provider)
        // The endpoints and the client come from one source together: the
        // configured provider (with the file's client, yours, or the
        // provider's), or the file alone (with its own client, or none).
        // Your client never goes to endpoints a file chose.
        let match = ProviderMatch(grant.provider, config: config, catalog: catalog, ctx: ctx)
        let (known, foreign) = (match.known, match.foreign)
        notes += match.notes
        if let id = givenClient {
            if let first = foreign.first { throw Self.clientRefused(for: first, provider: grant.provider) }
            config.clientID = id
            config.clientSecret = clientSecret
        }
        // The file's own endpoints and client, with a refresh token to spend
        // there: the grant refreshes as it came, whatever vault knows.
        let ownRoute = known == nil && config.tokenEndpoint != nil && config.clientID != nil
        if !foreign.isEmpty { config.endpointsSource = ProviderConfiguration.importedEndpoints }
        if let first = foreign.first, !ownRoute {
            notes.append(
                (
                    true,
                    "'\(name)' keeps the \(first.field) its file names (\(first.own))"
                        + (first.provider.map { ", not provider '\(grant.provider)''s (\($0))" } ?? "")
                        + ": it refreshes there with the file's own client only, and is not authorized again there"
                ))
        } else if let provider = known {
            config = config.completed(by: provider.resolved(), takeClient: tool == nil || tool == .muttOAuth2)
            config.endpointsSource = config.endpointsSource ?? provider.endpointsSourceLabel
        }
        // A provider file of that name that cannot be used is the cause, not an unknown provider.
        let unusable = known == nil ? catalog.problem(of: grant.provider) : nil
        // A grant that keeps the endpoints and client it came with refreshes
        // as it is: a provider vault does not know is nothing to warn of.
        if known == nil && (unusable != nil || !ownRoute) {
            notes.append(
                (
                    true,
                    (unusable.map { "provider '\(grant.provider)' cannot be used: \($0.reason); " }
                        ?? "vault knows no provider '\(grant.provider)' (see 'vault providers'); ")
                        + (config.tokenEndpoint == nil
                            ? "the grant keeps no token endpoint" : "the grant keeps the provider_config it was given")
                ))
        }
        grant.providerConfiguration = config
        if let note = refreshNote(
            grant, name: name, tool: tool, fileNamesEndpoints: !foreign.isEmpty, undiscovered: match.undiscovered,
            unusableFile: unusable != nil, configDirectory: configDirectory)
        {
            notes.append(note)
        }
        return notes
    }

    /// Why a client given on the command line is not sent to the endpoints
    /// a token file chose.
    static func clientRefused(for first: (field: String, own: String, provider: String?), provider: String)
        -> CLIError
    {
        CLIError(
            "the token file names its own \(first.field) (\(first.own)), "
                + (first.provider.map { "not provider '\(provider)''s (\($0))" }
                    ?? "and vault knows no provider '\(provider)' to vouch for it")
                + ": vault sends a client you give only to a configured provider's endpoints",
            hint: "remove provider_config from the file to use provider '\(provider)', "
                + "or import it without --client-id to keep the file's own client")
    }

    /// The configured provider an imported grant names, and which of the
    /// token file's endpoints are not that provider's (all of them, when
    /// vault knows no such provider).
    struct ProviderMatch {
        /// The configured provider, its endpoints discovered when its file
        /// names an issuer alone.
        var known: Provider?
        var foreign: [(field: String, own: String, provider: String?)] = []
        /// The issuer whose discovery failed, if one did.
        var undiscovered: String?
        var notes: [(warning: Bool, text: String)] = []

        init(_ name: String, config: ProviderConfiguration, catalog: ProviderCatalog, ctx: Context) {
            known = catalog.providers[name]
            if var provider = known {
                // A provider known by its issuer alone has its endpoints
                // from discovery, as 'vault add' finds them.
                if provider.tokenEndpoint == nil, let issuer = provider.issuer, config.tokenEndpoint == nil {
                    let transport = CurlTransport(caBundle: ctx.environment["SSL_CERT_FILE"])
                    do {
                        provider = try catalog.discovering(provider.name, issuer: issuer, transport: transport)
                        known = provider
                    } catch {
                        undiscovered = issuer
                        notes.append((true, "could not discover provider '\(provider.name)': \(error.reason)"))
                    }
                }
                foreign = config.endpoints(notOf: provider)
            } else if config.namesEndpoints {
                foreign = ProviderConfiguration.endpointFields.compactMap { field, path in
                    config[keyPath: path].map { (field, $0, nil) }
                }
            }
        }
    }

    /// What to tell the person about refreshing the imported `grant`, as
    /// its provider configuration now stands: that a grant from another
    /// tool has no refresh token, or why it cannot be refreshed and what
    /// would let it. Nil when there is nothing to say. `undiscovered` is
    /// the issuer of a provider known by its issuer alone whose discovery
    /// failed just now; `unusableFile`, that the provider's file cannot be used.
    func refreshNote(
        _ grant: Grant, name: String, tool: ForeignTokens.Tool?, fileNamesEndpoints: Bool, undiscovered: String?,
        unusableFile: Bool, configDirectory: String
    ) -> (warning: Bool, text: String)? {
        guard grant.kind == .oauth2 else { return nil }
        let config = grant.providerConfiguration ?? ProviderConfiguration()
        if grant.refreshToken == nil {
            // Said for other tools' files, whose users may expect a refresh.
            guard tool != nil else { return nil }
            return (
                false,
                "'\(name)' has no refresh token: it works as long as its access token does"
                    + (grant.expiresAt == nil ? " (this one has no expiry)" : "")
            )
        }
        guard !grant.hasRefreshRoute else { return nil }
        let missing = config.tokenEndpoint == nil ? "no token endpoint" : "no client id"
        let why: String
        if fileNamesEndpoints && config.tokenEndpoint != nil {
            why = "; its file names its own endpoints and no client, and vault gives them no client of yours"
        } else if tool == .rclone && config.clientID == nil {
            why =
                "; its tokens were issued to rclone's built-in client, which vault cannot use: "
                + "give the remote a client_id and client_secret of your own in rclone"
        } else if config.tokenEndpoint == nil, let issuer = undiscovered {
            // The provider file is right: its issuer did not answer.
            why =
                "; provider '\(grant.provider)' names only its issuer, and discovery at \(issuer) failed: "
                + "import it again with --replace once the issuer answers"
        } else if config.tokenEndpoint == nil && unusableFile {
            why = "; correct its provider file as the warning above says, then import again with --replace"
        } else if config.tokenEndpoint == nil {
            // The client may be the file's own: then only the endpoint is
            // missing, and a provider file of the user's supplies it.
            let file = "\(configDirectory)/providers/\(grant.provider).json"
            let fields =
                config.clientID == nil
                ? "token_endpoint, authorization_endpoint and client_id"
                : "token_endpoint and authorization_endpoint"
            why =
                "; vault knows no provider '\(grant.provider)' with a token endpoint: write \(file) with its "
                + "\(fields) (see docs/providers.md), then import again with --replace"
                + (config.clientID == nil ? "" : " (the client its file names goes to that endpoint alone)")
        } else {
            why =
                "; give provider '\(grant.provider)' your client (client_id in its provider file), "
                + "or pass --client-id and --client-secret-file: the client the tokens were issued to"
        }
        return (true, "'\(name)' cannot be refreshed: \(missing)\(why)")
    }
}
