/// A command of the `vault` command line: a type whose stored properties
/// declare its options (`@Flag`, `@Option`, `@RepeatedOption`, option
/// groups) and whose `configuration` says the rest. Parsing, validation,
/// usage, help, completion and the man page all read those declarations.
protocol VaultCommand: SendableMetatype {
    /// The name, help text and usage of the command.
    static var configuration: CommandConfiguration { get }
    init()
    /// Runs the command once its options are bound.
    func run(_ ctx: Context) throws -> ExitCode
    /// What the positional argument after `positionals` is, for completion.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument
}

extension VaultCommand {
    /// No positional argument to complete.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument { .nothing }
}

/// What a command says about itself, beyond its options.
struct CommandConfiguration: Sendable {
    let name: String
    /// One sentence, shown in `vault help`.
    let abstract: String
    /// The usage line after `vault `; `{name}` stands for the declared
    /// option `--name` with its value name, and `{name:choices}` for it
    /// with its values (`--keep current|other`), so the two cannot drift.
    let usage: String
    var arguments: [(String, String)] = []
    var discussion: String? = nil
    var examples: [String] = []
    /// Whether `--json` is accepted; a command that takes it prints exactly
    /// one JSON document and a newline on stdout, whatever it did.
    var printsJSON = true
}

/// A command as the dispatcher, help, completion and the man page see it:
/// its configuration and declared options, and how to run it.
struct Command: Sendable {
    let configuration: CommandConfiguration
    /// The command's own options, in declaration order.
    let options: [OptionSpec]
    let run: @Sendable (Context) throws -> ExitCode
    /// What the positional argument after the given ones is, for completion.
    let argument: @Sendable ([String]) -> CompletionCandidates.Argument

    init<C: VaultCommand>(_ type: C.Type) {
        configuration = C.configuration
        options = Declarations.options(of: C())
        run = { ctx in
            let command = C()
            Declarations.bind(command, to: ctx.arguments)
            return try command.run(ctx)
        }
        argument = { C.argument(after: $0) }
    }

    var name: String { configuration.name }
    var abstract: String { configuration.abstract }
    var arguments: [(String, String)] { configuration.arguments }
    var discussion: String? { configuration.discussion }
    var examples: [String] { configuration.examples }
    var printsJSON: Bool { configuration.printsJSON }

    /// The usage line after `vault `, each `{name}` replaced by the option
    /// it names.
    var usage: String {
        var text = configuration.usage
        for option in acceptedOptions {
            text = text.replacing("{\(option.name)}", with: option.label)
            text = text.replacing(
                "{\(option.name):choices}", with: "--\(option.name) " + option.choices.joined(separator: "|"))
        }
        return text
    }

    /// Options shown in help, completions and the manual.
    var documentedOptions: [OptionSpec] { options.filter { !$0.hidden } }

    /// The shared options this command takes: `--json` only where it prints JSON.
    var sharedOptions: [OptionSpec] { GlobalOptions.all.filter { printsJSON || $0.name != "json" } }

    /// Everything the parser accepts for this command.
    var acceptedOptions: [OptionSpec] { options + sharedOptions }
}

/// All commands, in the order `vault help` lists them.
enum Commands {
    static let all: [Command] = [
        Command(InitCommand.self), Command(AddCommand.self), Command(ImportCommand.self),
        Command(ListCommand.self), Command(ShowCommand.self), Command(TokenCommand.self),
        Command(RefreshCommand.self), Command(KeepaliveCommand.self), Command(CheckCommand.self),
        Command(DoctorCommand.self),
        Command(EnvCommand.self),
        Command(ExecCommand.self), Command(HeaderCommand.self), Command(SignCommand.self),
        Command(XOAuth2Command.self), Command(MailTestCommand.self), Command(GitCredentialCommand.self),
        Command(RenameCommand.self),
        Command(RemoveCommand.self), Command(PasswdCommand.self), Command(KeyslotCommand.self),
        Command(AgentCommand.self), Command(LockCommand.self), Command(PolicyCommand.self), Command(LogCommand.self),
        Command(RemoteCommand.self),
        Command(SyncCommand.self), Command(JoinCommand.self), Command(PairCommand.self),
        Command(ConflictsCommand.self), Command(ProvidersCommand.self), Command(CompletionCommand.self),
        Command(HelpCommand.self),
    ]

    static func named(_ name: String) -> Command? { all.first { $0.name == name } }
}
