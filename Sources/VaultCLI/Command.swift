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
    let run: @Sendable (Context) throws(CLIError) -> ExitCode

    /// Options shown in help, completions and the manual.
    var documentedOptions: [OptionSpec] { options.filter { !$0.hidden } }
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
