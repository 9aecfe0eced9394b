internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

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

            A grant whose client vault registered itself ('vault add --register') has that client
            deleted too (RFC 7592), after the revocation: each step is reported. When the
            revocation succeeded but the deletion fails, the grant is removed all the same (its
            tokens are revoked), the client is named for deleting it at the provider, and the exit
            status is 1. When the provider refuses the revocation, deleting the client ends the
            grant instead (a provider deletes a client's tokens with it, RFC 7592 section 2.3);
            when that fails too, the grant is kept. A deletion answered 401 or 404 means the
            provider no longer knows the client: it counts as deleted. Without --revoke, a
            registered client stays at the provider.
            """,
        examples: ["vault remove old-work", "vault remove work --revoke"]
    )

    @Flag("revoke", help: "revoke the grant at the provider first (RFC 7009), and delete a client vault registered")
    var revoke: Bool

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let vault = try ctx.opener.openVault()
        guard revoke else {
            let registered = (try? vault.load(name))?.providerConfiguration.flatMap(RegisteredClient.init)
            try vault.remove(name)
            if registered != nil {
                ctx.output.warn(
                    "the client vault registered for '\(name)' stays at the provider; '--revoke' deletes it")
            }
            try ctx.output.report(
                "removed '\(name)'", json: Removed(name: name, clientRegistration: registered != nil ? .kept : nil))
            return .ok
        }
        let stored = try vault.load(name)
        let kind = stored.kind
        if let registered = stored.providerConfiguration.flatMap(RegisteredClient.init) {
            return try revokeRegistered(name, stored, registered, vault: vault, ctx: ctx)
        }
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
            try ctx.output.report("removed '\(name)'", json: Removed(name: name))
        }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$revoke] }
}

extension RemoveCommand {
    /// What `remove --json` prints, whatever happened: every key always
    /// there, null when it does not apply (docs/cli.md).
    struct Removed: Encodable {
        /// What became of a client vault registered for the grant.
        enum Registration: String, Encodable {
            /// Deleted at the provider now (RFC 7592).
            case deleted
            /// The provider no longer knew it (401 or 404): deleted before.
            case gone
            /// Left at the provider: removed without --revoke.
            case kept
            /// The provider gave no way to delete it (no registration client URI).
            case unmanaged
            /// Its deletion failed: the grant is kept, and the exit status says why.
            case failed
        }

        let name: String
        /// The token type revoked (`refresh_token`, `access_token`), or nil when none was.
        var revoked: String? = nil
        var clientRegistration: Registration? = nil

        enum CodingKeys: String, CodingKey {
            case name, revoked
            case clientRegistration = "client_registration"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(name, forKey: .name)
            // Nulls are written out: one shape for every outcome.
            try c.encode(revoked, forKey: .revoked)
            try c.encode(clientRegistration?.rawValue, forKey: .clientRegistration)
        }
    }

    /// `remove --revoke` for a grant whose client vault registered: the
    /// revocation (RFC 7009), then the client's deletion (RFC 7592), each
    /// reported.
    func revokeRegistered(
        _ name: String, _ grant: Grant, _ registered: RegisteredClient, vault: Vault, ctx: Context
    ) throws -> ExitCode {
        let client = grant.providerConfiguration?.clientID ?? "?"
        let transport = CurlTransport(caBundle: ctx.environment["SSL_CERT_FILE"])
        let registrar = ClientRegistrar(transport: transport)
        var revoked: String? = nil
        // The grant, and with it the registration token, is kept until the
        // client is deleted: a deletion that fails can be tried again.
        do {
            switch try ctx.network.refresher(vault).revoke(name) {
            case .revoked(let type):
                revoked = type
                ctx.output.info("revoked the \(type.replacing("_", with: " ")) at the provider")
            case .unsupported:
                ctx.output.info("the provider has no revocation endpoint")
            }
        } catch {
            // Refused: deleting the client is the other way to end its tokens.
            // Anything transient keeps everything for another try.
            guard error.code != .transient, registered.clientURI != nil else { throw error }
            let deletion: ClientRegistrar.Deletion
            do { deletion = try registrar.delete(registered) } catch let failed {
                throw CLIError(
                    "\(error.reason); deleting the client registration failed too (\(failed.reason)): "
                        + "'\(name)' is kept", hint: "try again later, or remove it without --revoke")
            }
            try vault.remove(name)
            ctx.output.warn("\(error.reason)")
            let gone = deletion == .gone
            ctx.output.warn(
                (gone
                    ? "the client '\(client)' vault registered was already deleted at the provider"
                    : "deleted the client '\(client)' vault registered instead")
                    + ": a provider that follows RFC 7592 invalidates its tokens with it")
            try ctx.output.report(
                gone ? "removed '\(name)'" : "deleted the client registration and removed '\(name)'",
                json: Removed(name: name, clientRegistration: gone ? .gone : .deleted))
            return .ok
        }
        let deletion: ClientRegistrar.Deletion
        do { deletion = try registrar.delete(registered) } catch {
            // Its tokens are revoked; the grant stays so that the
            // registration token can delete the client on another try.
            if ctx.output.json {
                try ctx.output.printJSON(Removed(name: name, revoked: revoked, clientRegistration: .failed))
            }
            throw CLIError(
                "the tokens of '\(name)' are revoked, but deleting the client '\(client)' vault registered failed: "
                    + "\(error.reason); '\(name)' is kept so that the client can still be deleted",
                hint: "run 'vault remove \(name) --revoke' again, or 'vault remove \(name)' to leave the client there",
                exitCode: error.code == .transient ? .transient : .failure)
        }
        try vault.remove(name)
        switch deletion {
        case .deleted:
            try ctx.output.report(
                "deleted the client '\(client)' vault registered at the provider and removed '\(name)'",
                json: Removed(name: name, revoked: revoked, clientRegistration: .deleted))
        case .gone:
            try ctx.output.report(
                "the client '\(client)' vault registered was already deleted at the provider; removed '\(name)'",
                json: Removed(name: name, revoked: revoked, clientRegistration: .gone))
        case .unmanaged:
            ctx.output.warn(
                "the provider offers no way to delete the client '\(client)' vault registered: it stays there")
            try ctx.output.report(
                "removed '\(name)'", json: Removed(name: name, revoked: revoked, clientRegistration: .unmanaged))
        }
        return .ok
    }
}
