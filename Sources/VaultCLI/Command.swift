internal import VaultCore

/// A command of the `vault` command line: a type whose stored properties
/// declare its options (`@Flag`, `@Option`, `@RepeatedOption`, option
/// groups) and whose `configuration` says the rest. Parsing, validation,
/// usage, help, completion and the man page all read those declarations.
///
/// A command runs in three steps: its options are bound, each value parsed
/// into its type (`OptionValue`); `validate()` checks how they combine;
/// then `run`. A usage error in the first two comes before any work.
protocol VaultCommand: SendableMetatype {
    /// The name, help text and usage of the command.
    static var configuration: CommandConfiguration { get }
    init()
    /// The command's options, in the order they are declared, its groups'
    /// where they stand.
    var declarations: [any OptionDeclaration] { get }
    /// Checks the bound options together (one excludes another, one needs
    /// another), before `run` opens anything (swift-argument-parser's
    /// `validate()`). What needs the vault, the agent or the network to
    /// decide is `run`'s to check.
    func validate() throws(ValidationError)
    /// Runs the command once its options are bound and valid.
    func run(_ ctx: Context) throws -> ExitCode
    /// What the positional argument after `positionals` is, for completion.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument
}

extension VaultCommand {
    /// No positional argument to complete.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument { .nothing }

    /// No rule across options.
    func validate() throws(ValidationError) {}

    /// A command with the options of `arguments` bound and validated: a
    /// value that does not parse, or options that do not go together, are
    /// usage errors of this command.
    static func bound(_ arguments: ParsedArguments) throws(CLIError) -> Self {
        let command = Self()
        let name = configuration.name
        for declaration in command.declarations { try declaration.bind(arguments, command: name) }
        do { try command.validate() } catch { throw CLIError.usage(error.message, command: name) }
        return command
    }
}

/// Options that do not go together, found by a command's `validate()`:
/// reported as a usage error of that command, with its help named.
struct ValidationError: Error {
    let message: String

    init(_ message: String) { self.message = message }
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
        options = C().declarations.map(\.spec)
        run = { ctx in try C.bound(ctx.arguments).run(ctx) }
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

    /// The usage lines, each beginning `vault `: most commands have one;
    /// a command with two forms (`remote set` of a WebDAV and of an S3
    /// store) has a line for each.
    var usageLines: [String] { usage.split(separator: "\n").map { "vault " + $0 } }

    /// Options shown in help, completions and the manual.
    var documentedOptions: [OptionSpec] { options.filter { !$0.hidden } }

    /// The shared options this command takes: `--json` only where it prints JSON.
    var sharedOptions: [OptionSpec] { GlobalOptions.all.filter { printsJSON || $0.name != "json" } }

    /// Everything the parser accepts for this command.
    var acceptedOptions: [OptionSpec] { options + sharedOptions }
}

/// All commands, in the order `vault help` lists them.
enum Commands {
    /// The command types: a table the compiler builds, so that running one
    /// command builds that command alone (help, completion and the manual
    /// build them all).
    static let types: [any VaultCommand.Type] = [
        InitCommand.self, AddCommand.self, ImportCommand.self, ListCommand.self, ShowCommand.self,
        TokenCommand.self, RefreshCommand.self, KeepaliveCommand.self, CheckCommand.self, DoctorCommand.self,
        EnvCommand.self, ExecCommand.self, HeaderCommand.self, SignCommand.self, XOAuth2Command.self,
        MailTestCommand.self, GitCredentialCommand.self, KubeCredentialCommand.self, RenameCommand.self,
        RemoveCommand.self,
        PasswdCommand.self, KeyslotCommand.self, AgentCommand.self, LockCommand.self, PolicyCommand.self,
        LogCommand.self, RemoteCommand.self, SyncCommand.self, JoinCommand.self, PairCommand.self,
        ConflictsCommand.self, ProvidersCommand.self, CompletionCommand.self, HelpCommand.self,
    ]

    static let all: [Command] = types.map { Command($0) }

    /// The usage error for a command name that is none: the commands near
    /// it (a slip of the keyboard, as for grant names) first, then help.
    static func unknown(_ name: String) -> CLIError {
        let near = GrantName.nearest(to: name, among: types.map { $0.configuration.name })
        return CLIError(
            "unknown command '\(name)'",
            hints: (near.isEmpty ? [] : [Remedies.didYouMean(near)]) + ["see 'vault help'"],
            exitCode: .usage)
    }

    /// The command of that name, built alone: a `switch` the compiler
    /// builds, so that no other command's configuration is made on the
    /// way (`CommandDeclarationTests` checks it against `types`).
    static func named(_ name: String) -> Command? { type(named: name).map { Command($0) } }

    static func type(named name: String) -> (any VaultCommand.Type)? {
        switch name {
        case "init": InitCommand.self
        case "add": AddCommand.self
        case "import": ImportCommand.self
        case "list": ListCommand.self
        case "show": ShowCommand.self
        case "token": TokenCommand.self
        case "refresh": RefreshCommand.self
        case "keepalive": KeepaliveCommand.self
        case "check": CheckCommand.self
        case "doctor": DoctorCommand.self
        case "env": EnvCommand.self
        case "exec": ExecCommand.self
        case "header": HeaderCommand.self
        case "sign": SignCommand.self
        case "xoauth2": XOAuth2Command.self
        case "test": MailTestCommand.self
        case "git-credential": GitCredentialCommand.self
        case "kube-credential": KubeCredentialCommand.self
        case "rename": RenameCommand.self
        case "remove": RemoveCommand.self
        case "passwd": PasswdCommand.self
        case "keyslot": KeyslotCommand.self
        case "agent": AgentCommand.self
        case "lock": LockCommand.self
        case "policy": PolicyCommand.self
        case "log": LogCommand.self
        case "remote": RemoteCommand.self
        case "sync": SyncCommand.self
        case "join": JoinCommand.self
        case "pair": PairCommand.self
        case "conflicts": ConflictsCommand.self
        case "providers": ProvidersCommand.self
        case "completion": CompletionCommand.self
        case "help": HelpCommand.self
        default: nil
        }
    }
}
