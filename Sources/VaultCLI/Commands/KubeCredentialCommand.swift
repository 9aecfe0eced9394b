internal import FoundationEssentials
internal import VaultCore

/// `vault kube-credential`: kubectl's exec credential plugin.
struct KubeCredentialCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "kube-credential",
        abstract: "Give kubectl a fresh access token (a kubectl exec credential plugin).",
        usage: "kube-credential NAME [{min-valid}] [{id-token} | [{resource}] [{audience}] [{scope}] [{exchange}]]",
        arguments: [("NAME", "the grant")],
        discussion: """
            Prints an ExecCredential of the apiVersion kubectl asks for in KUBERNETES_EXEC_INFO
            (client.authentication.k8s.io/v1beta1 or /v1; v1beta1 when it is not set) with the
            grant's fresh access token and its expirationTimestamp, so that kubectl keeps the token
            exactly as long as it is valid and runs vault again after. Name it in a kubeconfig's
            users[].user.exec (docs/cli.md has an example). The token comes as 'vault token' gets
            it: through the agent when one holds the vault, refreshed first when needed, once for
            many kubectl processes. When kubectl says the plugin may not ask the person
            (interactive: false), vault never asks for the passphrase on the terminal: run the agent,
            or give a key file. When it may, a grant the provider no longer accepts (exit 2
            otherwise) is authorized again as 'vault add NAME' does, the device flow over SSH.
            Errors go to stderr, which kubectl shows, with vault's exit status.
            --resource, --audience and --scope narrow the token as 'vault token' does, for an API
            server that checks a token's audience. --id-token gives the grant's ID token instead,
            for clusters whose OIDC settings take ID tokens (as kubelogin does): refreshed first when
            it has less than --min-valid left; through a forwarded agent, by the agent's machine under
            its policy, which asks or logs it as an ID token.
            """,
        examples: [
            "vault kube-credential work",
            "vault kube-credential work --audience kubernetes",
            "vault kube-credential work --id-token",
        ],
        printsJSON: false
    )

    @Option("min-valid", value: "SECONDS", help: "refresh when fewer seconds remain (default 60)", in: 0..<1e7)
    var minValid: Seconds?
    @Flag("id-token", help: "give the grant's ID token, not its access token")
    var idToken: Bool
    let narrowing = TargetOptions()

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    /// The narrowing options name a valid target.
    func validate() throws(ValidationError) {
        try narrowing.validate()
        if idToken && narrowing.given {
            throw ValidationError(
                "--id-token gives the grant's own ID token: not with --resource, --audience, --scope or --exchange")
        }
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let info = try ExecInfo(environment: ctx.environment["KUBERNETES_EXEC_INFO"])
        var opener = ctx.opener
        opener.unlockSources.asksOnTerminal = info.interactive
        let minimum = minValid?.value ?? Grant.freshnessMargin
        if idToken {
            let (token, expiry) = try Self.freshIDToken(name, minimumValidity: minimum, opener: opener, ctx: ctx)
            let left = expiry.timeIntervalSince(ctx.time.now())
            if left < minimum {
                ctx.output.warn(
                    "the ID token of '\(name)' is valid for \(max(0, Int(left))) s more, less than the \(Int(minimum)) s "
                        + "asked for: it could not be refreshed now, or the provider sent no new one with the refresh")
            }
            try ctx.output.printJSON(
                ExecCredential(
                    apiVersion: info.apiVersion,
                    status: .init(token: token, expirationTimestamp: expiry.utcText)))
            return .ok
        }
        let target = try narrowing.target(ctx)
        let fresh = {
            try TokenOutput.fresh(
                name, minimumValidity: minimum, force: false, target: target, ctx: ctx, opener: opener,
                command: "kube-credential")
        }
        let token: TokenOutput
        do {
            token = try fresh()
        } catch let error where info.interactive && CLIError(reporting: error).exitCode == .dead {
            // kubectl lets the plugin ask the person: the grant is
            // authorized again as 'vault add NAME' would (the device flow
            // over SSH), its messages on stderr, which kubectl shows.
            ctx.output.warn("\(CLIError(reporting: error).message); authorizing it again")
            let added = try CLI.dispatch(["add", name], environment: ctx.environment)
            guard added == .ok else { return added }
            token = try fresh()
        }
        guard token.tokenType.lowercased() == "bearer" else {
            throw CLIError(
                "the access token of '\(name)' is a \(token.tokenType) token, and kubectl sends only bearer tokens")
        }
        Commands.warnIfShort(
            name, expiresAt: token.expiresAt, minimum: minimum, notRefreshedBecause: token.notRefreshedBecause,
            ctx: ctx)
        let credential = ExecCredential(
            apiVersion: info.apiVersion,
            status: .init(
                token: token.accessToken,
                expirationTimestamp: token.expiresAt.map { Date(timeIntervalSince1970: Double($0)).utcText }))
        try ctx.output.printJSON(credential)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$minValid, $idToken] + narrowing.declarations }

    /// The grant's ID token with more than `minimumValidity` seconds left,
    /// refreshed first when needed, and when it expires.
    static func freshIDToken(_ name: String, minimumValidity: Double, opener: VaultOpener, ctx: Context) throws -> (
        String, Date
    ) {
        if let forwarded = try ctx.agents.forwarded(for: try ctx.opener.location()) {
            // The agent's machine refreshes it, under its policy.
            let handed = try forwarded.idToken(name, minimumValidity: minimumValidity, claims: .ofThisProcess())
            return (handed.token, handed.expiresAt)
        }
        let vault = try opener.openVault()
        guard try vault.load(name).idTokenExpiry != nil else {
            throw CLIError(
                "'\(name)' holds no ID token",
                hint:
                    "authorize it again with the openid scope ('vault add \(name) --scope openid'), or use its access token"
            )
        }
        let grant: Grant
        do {
            grant = try ctx.network.refresher(vault).freshGrantWithIDToken(name, minimumValidity: minimumValidity).grant
            ctx.agents.audit(name, at: vault.location, outcome: .allowed)
        } catch {
            ctx.agents.audit(name, at: vault.location, outcome: .failed, reason: error.code.rawValue)
            throw error
        }
        guard let token = grant.idToken, let expiry = grant.idTokenExpiry,
            expiry.timeIntervalSince(ctx.time.now()) > 0
        else {
            throw CLIError(
                "the provider sent no new ID token with the refresh of '\(name)', and the one it holds has expired",
                hint: "give kubectl the access token (no --id-token), or authorize it again with 'vault add \(name)'")
        }
        return (token, expiry)
    }
}

/// What kubectl tells an exec credential plugin in `KUBERNETES_EXEC_INFO`.
struct ExecInfo {
    /// The `ExecCredential` versions vault answers in.
    static let versions = ["client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1"]

    let apiVersion: String
    /// Whether the plugin may ask the person (stdin is theirs).
    let interactive: Bool

    /// From the variable's value; without one (vault run by hand, or by a
    /// kubectl that sends none), v1beta1, which every kubectl since 1.11 reads.
    init(environment value: String?) throws {
        guard let value, !value.isEmpty else {
            apiVersion = ExecInfo.versions[0]
            interactive = true
            return
        }
        struct Wire: Decodable {
            struct Spec: Decodable { var interactive: Bool? }
            var kind: String?
            var apiVersion: String?
            var spec: Spec?
        }
        let wire: Wire
        do { wire = try JSONDecoder().decode(Wire.self, from: Data(value.utf8)) } catch {
            throw CLIError("KUBERNETES_EXEC_INFO is not the JSON kubectl sends", exitCode: .usage)
        }
        guard wire.kind == nil || wire.kind == "ExecCredential", let version = wire.apiVersion,
            ExecInfo.versions.contains(version)
        else {
            throw CLIError(
                "kubectl asked for an ExecCredential vault cannot write",
                hint: "set the exec section's apiVersion to " + ExecInfo.versions.joined(separator: " or "),
                exitCode: .usage)
        }
        apiVersion = version
        interactive = wire.spec?.interactive ?? true
    }
}

/// What an exec credential plugin prints for kubectl.
struct ExecCredential: Encodable {
    struct Status: Encodable {
        let token: String
        /// RFC 3339 in UTC; kubectl runs the plugin again after it, or for
        /// every request when there is none.
        let expirationTimestamp: String?
    }

    let kind = "ExecCredential"
    let apiVersion: String
    let status: Status
}
