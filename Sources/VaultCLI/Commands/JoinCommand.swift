internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// `vault join`.
struct JoinCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "join",
        abstract: "Create this machine's vault from a store another machine syncs to.",
        usage:
            "join URL [{user}] [{password-file}] [{pairing-code-file}]\n"
            + "join s3://BUCKET[/FOLDER] [{endpoint}] [{region}] [{path-style}] [{credentials-file}] "
            + "[{profile}] [{pairing-code-file}]",
        arguments: [("URL", "the store, as given to 'vault remote set' on the other machine")],
        discussion: """
            Opens the store's copy of the vault's keyslots with the vault's passphrase (from the
            usual sources: VAULT_PASSPHRASE_COMMAND, _FILE, VAULT_PASSPHRASE or the terminal) or
            its key file (--keyfile, VAULT_KEYFILE), creates the local vault with the same key,
            and syncs. With --pairing-code-file, no passphrase is needed: the code from 'vault
            pair' (valid once, for ten minutes) opens an offer the other machine left in the
            store. Either way the new vault opens later with the vault's passphrase or key files.
            A wrong passphrase exits 77 and leaves nothing behind.
            The store could try to guess the passphrase offline, as a thief of the vault file
            could: use a strong one.
            """,
        examples: [
            "vault join https://dav.example.com/vault/ --user ada",
            "vault join https://dav.example.com/vault/ --user ada --pairing-code-file code.txt",
        ]
    )

    let store = StoreOptions()
    @Option(
        "pairing-code-file", value: "F", help: "join with the one-time code 'vault pair' printed on the other machine")
    var pairingCodeFile: String?

    func run(_ ctx: Context) throws -> ExitCode {
        // A URL that carries a password is refused first, whatever else is wrong.
        let given = try Commands.storeURL(try ctx.positionals("URL")[0], command: "join")
        let location = try ctx.opener.location()
        if Vault.exists(at: location) {
            throw CLIError("a vault already exists at \(location.databasePath)")
        }
        let login = try store.login(url: given, command: "join", environment: ctx.environment)
        let (url, user, password) = (login.url, login.user, login.password)
        let report: SyncReport
        if let file = pairingCodeFile {
            let code: SecureBytes
            do throws(VaultError) { code = try SecretFile.read(path: file) } catch {
                throw CLIError("\(error.reason) (from --pairing-code-file)", hint: error.remedy.map(Remedies.hint))
            }
            let text = code.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
            do throws(VaultError) {
                (_, report) = try SyncEngine.join(
                    at: location, url: url, user: user, password: password, pairingCode: text,
                    transport: ctx.network.transport, time: ctx.time)
            } catch { throw Commands.joinFailure(error, url: url, environment: ctx.environment) }
        } else {
            let (key, _, _) = try ctx.opener.unlockSources.key(joining: true)
            do throws(VaultError) {
                (_, report) = try SyncEngine.join(
                    at: location, url: url, user: user, password: password, key: key, transport: ctx.network.transport,
                    time: ctx.time)
            } catch { throw Commands.joinFailure(error, url: url, environment: ctx.environment) }
        }
        ctx.output.info(
            "joined: created a vault at \(location.databasePath) from \(Console.escaped(SyncEngine.displayName(url)))")
        try Commands.printSyncReport(report, to: ctx.output)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { store.declarations + [$pairingCodeFile] }
}
