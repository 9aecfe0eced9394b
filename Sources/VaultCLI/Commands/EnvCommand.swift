internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// `vault env`.
struct EnvCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "env",
        abstract: "Print shell lines that export fresh tokens and their metadata.",
        usage: "env NAME... [{format:choices}] [{prefix}] [{resource}] [{audience}] [{scope}] [{exchange}]",
        arguments: [("NAME", "one or more grants")],
        discussion: """
            For a grant named work: WORK_ACCESS_TOKEN, WORK_TOKEN_TYPE, WORK_TOKEN_EXPIRES_AT
            (seconds since the epoch), WORK_TOKEN_EXPIRES (ISO 8601), WORK_ACCOUNT, WORK_SCOPES
            and WORK_PROVIDER. Tokens are refreshed first when needed. Values are quoted for the
            format, so any character is safe. dotenv quotes so that python-dotenv and Docker
            Compose's env_file read the same bytes back; python-dotenv alone expands ${NAME} even
            in single quotes, so vault warns about such a value (read it with interpolate=False,
            or use --format json). A value no quoting serves for both is refused. --resource,
            --audience, --scope and --exchange hand out a narrowed token, as for 'vault token'.
            """,
        examples: [
            "eval \"$(vault env work)\"", "vault env work --format fish | source",
            "vault env work --format dotenv > .env",
        ]
    )

    @Option("format", value: "FORMAT", help: "{choices} (default sh)")
    var format: EnvFormat?
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
        let format = ctx.output.json ? .json : (format ?? .sh)
        let pairs = try Commands.variables(
            ctx.arguments.positionals, prefix: prefix, target: try narrowing.target(ctx), ctx: ctx)
        if format == .dotenv {
            for (name, value) in pairs where EnvFormat.dotenvQuoted(value) == nil {
                throw CLIError(
                    "\(name) holds '$' with a line break or a backslash before a backslash or quote: no dotenv quoting reads back the same in both python-dotenv and Docker Compose",
                    hint: "use --format json, sh or fish, or 'vault exec'")
            }
            for (name, value) in pairs where EnvFormat.pythonDotenvExpands(value) {
                ctx.output.warn(
                    "\(name) holds '${...}', which python-dotenv expands unless read with interpolate=False (Docker Compose reads it as is)"
                )
            }
        }
        if format == .json {
            var object: [String: String] = [:]
            for (k, v) in pairs { object[k] = v }
            try ctx.output.printJSON(object)
        } else {
            var text = pairs.map { format.line($0.0, $0.1) }.joined(separator: "\n") + "\n"
            var bytes = Array(text.utf8)
            Console.writeAll(&bytes, fd: 1)
            text = ""
        }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$format, $prefix] + narrowing.declarations }
}
