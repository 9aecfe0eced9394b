internal import VaultAgent
internal import VaultCore
internal import VaultSync

/// The Argon2id cost of a new passphrase (`init`, `passwd`, `keyslot add`).
struct KDFOptions: OptionGroup {
    @Option(
        "kdf-memory", value: "MIB",
        help: "Argon2id memory in MiB (default 256, at least 64); lower only on very small machines")
    var memory: Mebibytes?
    @Option("kdf-passes", value: "N", help: "Argon2id passes (default 3, 2 to 20)")
    var passes: UInt32?

    /// KDF parameters from --kdf-memory and --kdf-passes, checked against the bounds.
    func parameters(command: String) throws -> KDFParameters {
        var kdf = KDFParameters.default
        if let memory { kdf.memoryBytes = memory.bytes }
        if let passes { kdf.passes = passes }
        do { try kdf.validate() } catch {
            throw CLIError.usage(error.reason, command: command)
        }
        return kdf
    }

    /// This group's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$memory, $passes] }
}

/// `vault init`.
struct InitCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "init",
        abstract: "Create a new vault.",
        usage: "init [{keyfile}] [{kdf-memory}] [{kdf-passes}]",
        discussion: """
            The new passphrase comes from VAULT_PASSPHRASE_COMMAND, VAULT_PASSPHRASE_FILE or
            VAULT_PASSPHRASE when set, else it is asked twice on the terminal. With --keyfile
            (or VAULT_KEYFILE), vault writes a new random key to PATH (mode 0600) and the vault
            opens with that file alone, for servers and CI. The vault lives in $VAULT_HOME,
            else $XDG_DATA_HOME/vault, else ~/.local/share/vault.
            """,
        examples: [
            "vault init",
            "vault init --keyfile ~/.config/vault/ci.key",
        ]
    )

    let kdf = KDFOptions()

    func run(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals()
        let location = try ctx.opener.location()
        if Vault.exists(at: location) {
            throw CLIError("a vault already exists at \(location.databasePath)")
        }
        let kdf = try self.kdf.parameters(command: "init")
        let created: Vault
        let unlock: String
        if let path = ctx.opener.unlockSources.keyfilePath {
            let secret = try Keyfile.generate()
            try Keyfile.write(secret, to: path)
            do {
                created = try Vault.create(at: location, key: .keyfile(secret), time: ctx.time)
            } catch {
                Keyfile.discard(path: path)
                throw error
            }
            unlock = "key file"
            ctx.output.info("wrote a new key file to \(path); keep it safe, it alone opens the vault")
        } else {
            let key = try ctx.opener.unlockSources.newPassphrase(
                prefix: "VAULT", fileFlag: nil, otherwise: "or make a key-file vault with 'vault init --keyfile PATH'")
            created = try Vault.create(at: location, key: key, kdf: kdf, time: ctx.time)
            unlock = "passphrase"
        }
        if ctx.output.json {
            try ctx.output.printJSON(["path": created.location.databasePath, "unlock": unlock])
        } else {
            ctx.output.info("created a vault at \(created.location.databasePath)")
        }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { kdf.declarations }
}
