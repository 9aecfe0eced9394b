internal import VaultAgent
internal import VaultCore
internal import VaultSync

/// `vault rename`.
struct RenameCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "rename",
        abstract: "Give a grant a new name.",
        usage: "rename NAME NEW-NAME",
        arguments: [("NAME", "the grant to rename"), ("NEW-NAME", "its new name, which must be free")],
        examples: ["vault rename google work-google"]
    )

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let names = try ctx.positionals("NAME", "NEW-NAME")
        let (from, to) = (try ctx.grantName(names[0]), try ctx.grantName(names[1]))
        let vault = try ctx.opener.openVault()
        try vault.rename(from, to: to)
        try ctx.output.report("renamed '\(from)' to '\(to)'", json: ["name": to, "renamed_from": from])
        return .ok
    }
}

/// `vault remove`.
struct RemoveCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "remove",
        abstract: "Delete a grant from the vault, optionally revoking it first.",
        usage: "remove NAME [{revoke}]",
        arguments: [("NAME", "the grant to delete")],
        discussion: """
            With --revoke, the refresh token (else the access token) is revoked at the provider's
            revocation endpoint before the grant is deleted; if the revocation fails the grant is
            kept. A provider without a revocation endpoint is reported, and the grant is deleted.
            For client credentials and service accounts only the access token can be revoked:
            the client's secret or the service account's key stays valid at the provider, which
            vault says; delete or rotate it there.
            """,
        examples: ["vault remove old-work", "vault remove work --revoke"]
    )

    @Flag("revoke", help: "revoke the grant at the provider first (RFC 7009)")
    var revoke: Bool

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let vault = try ctx.opener.openVault()
        /// What `remove --json` prints.
        struct Removed: Encodable {
            let name: String
            let revoked: String?
        }
        guard revoke else {
            try vault.remove(name)
            try ctx.output.report("removed '\(name)'", json: Removed(name: name, revoked: nil))
            return .ok
        }
        let kind = try vault.load(name).kind
        let result = try ctx.network.refresher(vault).revokeAndRemove(name)
        // A client cannot revoke its own credentials (RFC 7009 revokes tokens).
        switch kind {
        case .serviceAccount:
            ctx.output.warn(
                "the service account's key stays valid at the provider: delete or disable it there (Google: IAM, Service accounts, Keys) if it should no longer work"
            )
        case .clientCredentials:
            ctx.output.warn(
                "the client's secret or key stays valid at the provider: rotate or delete it there if it should no longer work"
            )
        case .oauth1, .oauth2:
            break
        }
        switch result {
        case .revoked(let type):
            try ctx.output.report(
                "revoked the \(type.replacing("_", with: " ")) at the provider and removed '\(name)'",
                json: Removed(name: name, revoked: type))
        case .unsupported:
            ctx.output.warn(
                "the provider has no revocation endpoint; the grant stays valid there until it expires or you revoke it in your account settings"
            )
            try ctx.output.report("removed '\(name)'", json: Removed(name: name, revoked: nil))
        }
        return .ok
    }
}

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
}
