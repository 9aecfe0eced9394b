internal import CPlatform
internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultSync

/// `vault lock`.
struct LockCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "lock",
        abstract: "Make the agent forget the vault's keys.",
        usage: "lock",
        discussion: """
            The next command asks for the passphrase again. An agent started on demand exits;
            one run with --foreground keeps running, locked.
            """,
        examples: ["vault lock"]
    )

    func run(_ ctx: Context) throws -> ExitCode {
        _ = try ctx.positionals()
        let location = try ctx.opener.location()
        guard let paths = AgentPaths.resolve(environment: ctx.environment, location: location) else {
            try ctx.output.report("no agent is running (XDG_RUNTIME_DIR is not set)", json: AgentOutput(nil))
            return .ok
        }
        let client: AgentClient
        do throws(VaultError) {
            client = try AgentClient.connect(paths)
        } catch {
            guard error.code == .notFound else { throw error }
            try ctx.output.report("no agent is running for this vault", json: AgentOutput(nil))
            return .ok
        }
        try client.lock()
        try ctx.output.report("locked", json: AgentOutput(lockedAgent: ()))
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
