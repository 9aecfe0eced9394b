internal import FoundationEssentials
internal import VaultCore

/// The options that narrow the token `token`, `env`, `exec` and `header`
/// hand out to one resource, audience or fewer scopes (RFC 8707), or get
/// it by token exchange (RFC 8693).
struct TargetOptions: OptionGroup {
    @Option("resource", value: "URL", help: "a token for this resource only (RFC 8707), cached in the grant")
    var resource: String?
    @Option("audience", value: "AUD", help: "a token for this audience only, where the provider names it so")
    var audience: String?
    @RepeatedOption("scope", value: "S", help: "a token with only these scopes (repeatable)")
    var scope: [String]
    @Flag("exchange", help: "get it by token exchange (RFC 8693) of the grant's access token")
    var exchange: Bool

    /// Whether the options name a target at all.
    var given: Bool { resource != nil || audience != nil || !scope.isEmpty || exchange }

    /// The target the options name, or nil when they name none.
    func target(_ ctx: Context) throws -> TokenTarget? {
        guard given else { return nil }
        do { return try checkedTarget() } catch {
            throw CLIError.usage(error.message, command: ctx.command.name)
        }
    }

    /// Options that name no valid target (a resource that is not an
    /// absolute URI, an exchange without a resource or audience) are
    /// refused before any grant is looked at.
    func validate() throws(ValidationError) {
        if given { _ = try checkedTarget() }
    }

    /// Kept out of line: `vault token NAME` names no target, and the
    /// error this may throw would otherwise be set up on its path.
    @inline(never)
    private func checkedTarget() throws(ValidationError) -> TokenTarget {
        let scopes = scope.flatMap { $0.split(separator: " ").map(String.init) }
        do {
            return try TokenTarget(resource: resource, audience: audience, scopes: scopes, exchange: exchange)
        } catch {
            throw ValidationError(error.reason)
        }
    }

    /// This group's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$resource, $audience, $scope, $exchange] }
}

extension Commands {
    /// A token of `name` narrowed to `target`: from this vault's agent when
    /// it holds the vault, else from the vault opened here. A forwarded
    /// agent hands out the grant's own access tokens only.
    static func narrowedGrant(
        _ name: String, target: TokenTarget, minimumValidity: Double = Grant.freshnessMargin, force: Bool = false,
        ctx: Context
    ) throws -> Grant {
        let location = try ctx.opener.location()
        if try ctx.agents.forwarded(for: location) != nil {
            throw CLIError.usage(
                "--resource, --audience, --scope and --exchange need the vault on this machine, not a forwarded agent",
                command: ctx.command.name)
        }
        if !force,
            let handed = try ctx.agents.derivedGrant(
                name, target: target, at: location, minimumValidity: minimumValidity)
        {
            return handed
        }
        let vault = try ctx.opener.openVault()
        do {
            let fresh = try ctx.network.refresher(vault).derivedToken(
                name, for: target, minimumValidity: minimumValidity, forceRequest: force)
            ctx.agents.audit(name, at: vault.location, outcome: .allowed)
            return fresh.narrowedGrant
        } catch {
            ctx.agents.audit(name, at: vault.location, outcome: .failed, reason: error.code.rawValue)
            throw error
        }
    }
}
