internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP
internal import VaultSync

/// `vault git-credential`.
struct GitCredentialCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "git-credential",
        abstract: "Serve git credentials from grants (git's credential helper protocol).",
        usage: "git-credential get|store|erase\ngit-credential map [HOST[/PATH] [NAME]] [{username}] [{remove}]",
        arguments: [
            ("get|store|erase", "what git asks, with its request on stdin"),
            ("map HOST[/PATH] NAME", "make grant NAME serve HOST (and PATH, when git sends one)"),
        ],
        discussion: """
            Set it up with: git config --global credential.helper '!vault git-credential'
            (add credential.useHttpPath true to map paths). 'get' answers a user name and a fresh
            token as password (with password_expiry_utc); hosts without a grant get an empty answer
            so git falls through to other helpers. Presets map their own hosts (github.com,
            gitlab.com) when exactly one grant of that provider exists. 'erase', which git sends
            after a refusal, makes the next 'get' refresh the token; it marks nothing dead, and
            leaves a grant without a refresh token as it is. Tokens are only given over https, or
            plain http to a loopback host. Paths match with their case, hosts without.
            """,
        examples: [
            "git config --global credential.helper '!vault git-credential'",
            "vault git-credential map github.com gh",
            "vault git-credential map git.example.com/team work --username oauth2",
        ]
    )

    @Option("username", value: "U", help: "map: the user name to send (default: the provider's, else oauth2)")
    var username: String?
    @Flag("remove", help: "map: forget the mapping of HOST[/PATH]")
    var remove: Bool

    /// The action; after `map HOST`, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        switch positionals.count {
        case 0: return .words(["get", "store", "erase", "map"])
        case 2 where positionals[0] == "map": return .grant
        default: return .nothing
        }
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let args = ctx.arguments.positionals
        guard let action = args.first else {
            throw CLIError.usage("missing get, store, erase or map", command: "git-credential")
        }
        let configDirectory = try ctx.opener.location().configDirectory
        switch action {
        case "map":
            return try gitMap(Array(args.dropFirst()), ctx: ctx, configDirectory: configDirectory)
        case "get", "store", "erase":
            // git reads its own key=value protocol here, never JSON.
            if ctx.output.json {
                throw CLIError.usage("--json is only for 'git-credential map'", command: "git-credential")
            }
            guard args.count == 1 else {
                throw CLIError.usage("unexpected argument '\(args[1])'", command: "git-credential")
            }
        default:
            throw CLIError.usage("unknown action '\(action)'", command: "git-credential")
        }
        let input = try StandardInput.read(limit: 65536)
        let request = GitCredentialRequest(input.withUnsafeBytes { String(decoding: $0, as: UTF8.self) })
        // 'store' tells a helper that credentials worked; vault has nothing to keep.
        guard action != "store", let host = request.host, let proto = request.proto else { return .ok }
        let hostOnly = String(host.split(separator: ":").first ?? "")
        guard proto == "https" || (proto == "http" && URLPolicy.isLoopback(hostOnly)) else { return .ok }
        let map = try GitCredentialMap.load(configDirectory: configDirectory)
        let catalog = ProviderCatalog.load(configDirectory: configDirectory)
        var entry = map.entry(host: host, path: request.path)
        if let forwarded = try ctx.agents.forwarded(for: try ctx.opener.location()) {
            // Only the hosts mapped here: which grants exist is the agent's
            // machine's to know. 'erase' changes nothing there either.
            guard let entry, action == "get" else { return .ok }
            let grant = try forwarded.token(
                entry.grant, minimumValidity: Grant.freshnessMargin, claims: .ofThisProcess())
            return try answer(host: host, entry: entry, grant: grant, catalog: catalog)
        }
        let vault = try ctx.opener.openVault()
        if entry == nil {
            // A preset may serve its own host when the choice is unambiguous.
            let providers = catalog.sorted.filter { $0.gitHosts.contains(host.lowercased()) }.map(\.name)
            let grants = try vault.list().grants
            let candidates = grants.filter { providers.contains($0.grant.provider) }
            if candidates.count == 1 {
                entry = GitCredentialMap.Entry(grant: candidates[0].name)
            } else if candidates.count > 1 {
                ctx.output.warn(
                    "several grants could serve \(host); choose one with 'vault git-credential map \(host) NAME'")
            }
        }
        guard let entry else { return .ok }
        if action == "erase" {
            if let password = request.fields["password"] {
                _ = try vault.markStale(entry.grant, ifAccessToken: password)
            }
            return .ok
        }
        let grant =
            try ctx.agents.grant(entry.grant, at: vault.location, minimumValidity: Grant.freshnessMargin)
            ?? Commands.handOut(entry.grant, from: vault, ctx: ctx)
        return try answer(host: host, entry: entry, grant: grant, catalog: catalog)
    }

    /// Writes git's answer: the user name and the token as password.
    private func answer(host: String, entry: GitCredentialMap.Entry, grant: Grant, catalog: ProviderCatalog) throws
        -> ExitCode
    {
        let username =
            entry.username ?? catalog.providers[grant.provider]?.gitUsername ?? "oauth2"
        let password = grant.accessToken ?? ""
        // git reads one key=value a line: a line break would add fields of its own.
        guard OutputGrammar.isGitValue(username), OutputGrammar.isGitValue(password), !password.isEmpty else {
            throw CLIError(
                "the user name or token for \(host) cannot be sent in git's credential protocol (a line break or NUL)",
                hint: "set the user name with 'vault git-credential map \(host) \(entry.grant) --username U'")
        }
        var answer = "username=\(username)\npassword=\(password)\n"
        if let expiry = grant.expiresAt { answer += "password_expiry_utc=\(expiry.epochSeconds)\n" }
        var bytes = Array(answer.utf8)
        Console.writeAll(&bytes, fd: 1)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$username, $remove] }
}

extension GitCredentialCommand {

    func gitMap(_ args: [String], ctx: Context, configDirectory: String) throws -> ExitCode {
        var map = try GitCredentialMap.load(configDirectory: configDirectory)
        if args.isEmpty {
            if ctx.output.json {
                try ctx.output.printJSON(map.entries)
            } else {
                let rows =
                    [["HOST", "GRANT", "USERNAME"]]
                    + map.entries.sorted { $0.key < $1.key }.map { [$0.key, $0.value.grant, $0.value.username ?? "-"] }
                if map.entries.isEmpty {
                    ctx.output.info("no git hosts are mapped; presets serve their own hosts")
                } else {
                    for line in Format.table(rows) { ctx.output.out(line) }
                }
            }
            return .ok
        }
        if remove {
            guard args.count == 1 else {
                throw CLIError.usage("--remove takes HOST[/PATH] only", command: "git-credential")
            }
            try map.set(args[0], nil)
            try ctx.output.report("forgot the mapping of \(args[0])", json: map.entries)
            return .ok
        }
        guard args.count == 2 else { throw CLIError.usage("map needs HOST[/PATH] and NAME", command: "git-credential") }
        let name = try ctx.grantName(args[1])
        // A mapping to a grant that does not exist would only fail later, inside git.
        let vault = try ctx.opener.openVault()
        let names = try vault.list(secrets: false).grants.map(\.name)
        guard names.contains(name) else {
            let near = GrantName.nearest(to: name, among: names)
            throw CLIError(
                "grant '\(name)' not found",
                hint: near.isEmpty ? "see 'vault list' for the grants there are" : Remedies.hint(.nearGrantNames(near)))
        }
        try map.set(args[0], GitCredentialMap.Entry(grant: name, username: username))
        try ctx.output.report("\(args[0]) is served by '\(name)'", json: map.entries)
        return .ok
    }
}
