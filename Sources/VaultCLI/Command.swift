/// A command: its help text, its options, and what it does.
struct Command: Sendable {
    let name: String
    /// One sentence, shown in `vault help`.
    let abstract: String
    /// The usage line after `vault `.
    let usage: String
    var arguments: [(String, String)] = []
    var options: [OptionSpec] = []
    var discussion: String? = nil
    var examples: [String] = []
    /// Whether `--json` is accepted; a command that takes it prints exactly
    /// one JSON document and a newline on stdout, whatever it did.
    var printsJSON = true
    let run: @Sendable (Context) throws -> ExitCode

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
        initCommand, addCommand, importCommand, listCommand, showCommand, tokenCommand, refreshCommand, checkCommand,
        envCommand, execCommand, headerCommand, signCommand, xoauth2Command, gitCredentialCommand,
        renameCommand, removeCommand, passwdCommand, keyslotCommand, agentCommand, lockCommand, remoteCommand,
        syncCommand, joinCommand, pairCommand, conflictsCommand,
        providersCommand, completionCommand, helpCommand,
    ]

    static func named(_ name: String) -> Command? { all.first { $0.name == name } }
}
