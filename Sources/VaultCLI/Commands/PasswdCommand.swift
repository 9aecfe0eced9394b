internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// `vault passwd`.
struct PasswdCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "passwd",
        abstract: "Change the vault's passphrase without re-encrypting grants.",
        usage: "passwd [{new-passphrase-file}] [{kdf-memory}] [{kdf-passes}]",
        discussion: """
            The vault is unlocked as usual (key file, VAULT_PASSPHRASE_COMMAND, ..., terminal).
            The new passphrase comes from --new-passphrase-file, VAULT_NEW_PASSPHRASE_COMMAND,
            VAULT_NEW_PASSPHRASE_FILE or VAULT_NEW_PASSPHRASE, else it is asked twice on the
            terminal. Only the passphrase keyslot is rewritten, in one transaction: an
            interruption leaves either the old or the new passphrase working. On a key-file
            vault this adds a passphrase.
            """,
        examples: ["vault passwd", "VAULT_NEW_PASSPHRASE_FILE=new.txt vault passwd"],
        printsJSON: false
    )

    @Option("new-passphrase-file", value: "FILE", help: "read the new passphrase from FILE")
    var newPassphraseFile: String?
    let kdf = KDFOptions()

    func run(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals()
        let kdf = try self.kdf.parameters(command: "passwd")
        let vault = try ctx.opener.openVaultDirectly()
        let key = try ctx.opener.unlockSources.newPassphrase(
            prefix: "VAULT_NEW", fileFlag: newPassphraseFile)
        try vault.keyslots.changePassphrase(to: key, kdf: kdf)
        ctx.output.info("changed the passphrase")
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$newPassphraseFile] + kdf.declarations }
}
