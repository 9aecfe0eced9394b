internal import VaultCore

/// What a command runs with: its parsed arguments and environment, and
/// the helpers that own the rest (output, opening the vault, the agent,
/// the network). Built once per process.
struct Context {
    let command: Command
    let arguments: ParsedArguments
    let environment: [String: String]
    let time: any TimeSource = SystemTime()
    let output: Output
    let network: Network
    let agents: AgentAccess
    let opener: VaultOpener

    init(command: Command, arguments: ParsedArguments, environment: [String: String]) {
        self.command = command
        self.arguments = arguments
        self.environment = environment
        output = Output(json: arguments.flag(GlobalOptions.json.name))
        network = Network(environment: environment, command: command.name)
        agents = AgentAccess(environment: environment, output: output)
        var unlockSources = UnlockSources(
            environment: environment, keyfileFlag: arguments.value(GlobalOptions.keyfile.name))
        unlockSources.handsOutTokens = UnlockSources.tokenCommands.contains(command.name)
        opener = VaultOpener(
            environment: environment, unlockSources: unlockSources, time: time, output: output, agents: agents,
            network: network)
    }

    /// Exactly `count` positional arguments, named for the usage message.
    func positionals(_ names: String...) throws -> [String] {
        let given = arguments.positionals
        guard given.count == names.count else {
            if given.count < names.count {
                throw CLIError.usage("missing \(names[given.count])", command: command.name)
            }
            throw CLIError.usage("unexpected argument '\(given[names.count])'", command: command.name)
        }
        return given
    }

    /// A grant name from the command line; invalid names are usage errors.
    func grantName(_ name: String) throws -> String {
        do { try GrantName.validateForCommandLine(name) } catch {
            throw CLIError("invalid grant name '\(name)'", hint: error.remedy.map(Remedies.hint), exitCode: .usage)
        }
        return name
    }
}
