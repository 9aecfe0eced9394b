internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// `vault remote`.
struct RemoteCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "remote",
        abstract: "Show or set the store this vault syncs with.",
        usage:
            "remote [set URL [{user}] [{password-file}]]\n"
            + "remote set s3://BUCKET[/FOLDER] [{endpoint}] [{region}] [{path-style}] [{credentials-file}] "
            + "[{profile}]",
        arguments: [
            ("set URL", "sync with the WebDAV collection or HTTP base URL"),
            ("set s3://BUCKET[/FOLDER]", "sync with a folder of an S3 bucket (AWS S3, Ceph RGW, MinIO, R2, ...)"),
        ],
        discussion: """
            The store only ever sees ciphertext (docs/sync.md). Its user name and password are kept
            inside the vault, encrypted; the password comes from --password-file or is asked on the
            terminal. 'set' creates the folder when it does not exist yet (WebDAV MKCOL, parents
            too), checks that the store answers, and whether it honours If-Match: a store that does
            not still works (lost updates are detected and sent again, old objects deleted later),
            and 'set' says so once. A folder that holds another vault is refused (exit 64): sync
            this vault to another folder, or join that vault with 'vault join'. Plain http is
            refused except to a loopback address.
            An S3 store is a bucket and a folder in it, at --endpoint (AWS_ENDPOINT_URL_S3; default
            AWS's for the region) with --region (AWS_REGION; default us-east-1). Its access key id
            and secret key are kept inside the vault, and never given on the command line: from
            the AWS credentials file (--credentials-file, AWS_SHARED_CREDENTIALS_FILE or
            ~/.aws/credentials; --profile, AWS_PROFILE or "default"), else AWS_ACCESS_KEY_ID and
            AWS_SECRET_ACCESS_KEY, else asked on the terminal. 'set' creates a missing bucket and
            refuses one with versioning (docs/sync.md, "S3 stores").
            """,
        examples: [
            "vault remote set https://dav.example.com/vault/ --user ada",
            "vault remote set s3://team-vault/ada --endpoint https://rgw.example.com --profile team",
            "vault remote",
        ]
    )

    let store = StoreOptions()

    /// `set`.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .words(["set"]) : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let words = ctx.arguments.positionals
        if words.isEmpty {
            let vault = try ctx.opener.openVaultDirectly()
            let engine = try ctx.network.syncEngine(vault)
            guard try ctx.network.syncEngine(vault).isConfigured else {
                try ctx.output.report(
                    "no store is set; set one with 'vault remote set URL'",
                    json: RemoteOutput(url: nil, user: nil, preconditions: nil))
                return .ok
            }
            let d = try engine.remoteDescription()
            if ctx.output.json {
                try ctx.output.printJSON(RemoteOutput(url: d.url, user: d.user, preconditions: d.preconditions))
                return .ok
            }
            let who = StoreKind.of(url: d.url).userLabel
            ctx.output.out(Console.escaped(d.url + (d.user.map { " (\(who) \($0))" } ?? "")))
            if !d.preconditions { ctx.output.info("this store ignores If-Match; lost updates are repaired") }
            if let device = try? engine.deviceLabel() {
                ctx.output.info("this machine is \(device) in 'vault conflicts'")
            }
            return .ok
        }
        guard words[0] == "set" else { throw CLIError.usage("unknown action '\(words[0])'", command: "remote") }
        let login = try store.login(
            url: try ctx.positionals("set", "URL")[1], command: "remote", environment: ctx.environment)
        let vault = try ctx.opener.openVaultDirectly()
        let engine = try ctx.network.syncEngine(vault)
        let previous = engine.syncedStore()
        let created = try RemoteCommand.setRemote(engine, login, environment: ctx.environment)
        // A new store where the vault was in step with another: the next
        // sync starts it, apart from the old one (a mistyped address?).
        if let previous, previous != login.url,
            (try? engine.probeStore(timeout: SyncEngine.defaultStoreTimeout)) == false
        {
            let (old, new) = (SyncEngine.displayName(previous), SyncEngine.displayName(login.url))
            // `warn` escapes the addresses for the terminal.
            ctx.output.warn(
                "this vault was in step with \(old) until now, and \(new) holds no vault yet: 'vault sync' starts "
                    + "a new store there, apart from the one the other machines sync with; if the address is "
                    + "mistyped, run 'vault remote set' again with the right one")
        }
        if ctx.output.json {
            let d = try engine.remoteDescription()
            try ctx.output.printJSON(RemoteOutput(url: d.url, user: d.user, preconditions: d.preconditions))
            return .ok
        }
        for place in created { ctx.output.info(Console.escaped("created \(place)")) }
        if let d = try? engine.remoteDescription(), !d.preconditions {
            ctx.output.info(
                "this store ignores If-Match; lost updates are repaired, and old objects are collected later")
            ctx.output.warn(
                "such a store could also show an old state or hide other machines' changes without vault noticing "
                    + "(docs/sync.md); prefer a store that honours If-Match (Apache mod_dav, WsgiDAV)")
        }
        ctx.output.info("this vault syncs with \(Console.escaped(SyncEngine.displayName(login.url))); run 'vault sync'")
        return .ok
    }

    /// Sets the store; an address that answers as no store of its kind
    /// does came from this command line (a usage error), and refused
    /// credentials are the ones just given.
    private static func setRemote(_ engine: SyncEngine, _ login: StoreLogin, environment: [String: String]) throws
        -> [String]
    {
        do {
            return try engine.setRemote(url: login.url, user: login.user, password: login.password)
        } catch {
            if let usage = Commands.unresolvedAWSHost(
                error, url: login.url, command: "remote", environment: environment)
            {
                throw usage
            }
            switch error.remedy {
            case .checkStoreAddress?:
                throw CLIError(
                    error.reason, hints: Commands.addressHints(error, url: login.url, command: "remote set"),
                    exitCode: .usage)
            case .joinStoreVaultOrChooseAnother?:
                // The folder typed is taken: a usage error, as a wrong address is.
                throw CLIError(
                    error.reason,
                    hints: [
                        "to sync this vault, give 'vault remote set' another folder",
                        "to use the vault the store holds on this machine, join it: 'vault join' with the same "
                            + "address and options makes a new vault (with another VAULT_HOME, or once this one "
                            + "is moved away)",
                    ], exitCode: .usage)
            case .setStoreCredentials?:
                // Not "set them with 'vault remote set'": that was this command.
                let check =
                    StoreKind.of(url: login.url) == .s3
                    ? "check the store's keys (--credentials-file, --profile, AWS_ACCESS_KEY_ID) and --region"
                    : "check the store's user (--user) and password (--password-file)"
                throw CLIError(error.reason, hint: check, exitCode: CLIError(error).exitCode)
            default:
                throw error
            }
        }
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { store.declarations }
}
