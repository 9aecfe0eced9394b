internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// `vault exec`.
struct ExecCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "exec",
        abstract: "Run a command with fresh tokens in its environment.",
        usage: "exec NAME... [{prefix}] [{resource}] [{audience}] [{scope}] [{exchange}] -- COMMAND [ARGUMENT...]",
        arguments: [("NAME", "one or more grants"), ("COMMAND", "the program to run, found in PATH")],
        discussion: """
            Sets the variables 'vault env' prints, then replaces itself with COMMAND: its stdin,
            stdout and stderr are yours, signals reach it directly, and its exit status is vault's.
            Tokens are never on any command line. The command gets back the umask and core-dump
            limit vault tightened for itself. --resource, --audience, --scope and --exchange hand
            out a narrowed token, as for 'vault token'.
            """,
        examples: [
            #"vault exec work -- sh -c 'curl -H "Authorization: Bearer $WORK_ACCESS_TOKEN" https://api.example.com/'"#,
            "vault exec github --prefix GH -- ./deploy.sh",
        ],
        printsJSON: false
    )

    @Option("prefix", value: "PREFIX", help: "variable name prefix (default: the grant name in upper case)")
    var prefix: VariablePrefix?
    let narrowing = TargetOptions()

    /// NAME..., grants.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        .grant
    }

    /// The narrowing options name a valid target.
    func validate() throws(ValidationError) { try narrowing.validate() }

    func run(_ ctx: Context) throws -> ExitCode {
        guard let command = ctx.arguments.trailing, let program = command.first else {
            throw CLIError.usage("missing '-- COMMAND'", command: "exec")
        }
        let pairs = try Commands.variables(
            ctx.arguments.positionals, prefix: prefix, target: try narrowing.target(ctx), ctx: ctx)
        for (k, v) in pairs { setenv(k, v, 1) }
        if let caller = CLI.callerSettings {
            umask(caller.umask)
            var limit = caller.coreLimit
            setrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        execvp(program, argv)
        let reason = String(cString: strerror(errno))
        throw CLIError(
            "cannot run '\(program)': \(reason.lowercased())", exitCode: errno == ENOENT ? .usage : .failure)
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$prefix] + narrowing.declarations }
}
