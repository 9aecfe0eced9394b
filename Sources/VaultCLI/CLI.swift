internal import CPlatform
internal import Glibc

/// The `vault` command line.
public enum CLI {
    /// Runs the command line and returns the process exit status.
    public static func main(arguments: [String], environment: [String: String]) -> Int32 {
        hardenProcess()
        let console = Console()
        do {
            return try dispatch(Array(arguments.dropFirst()), environment: environment).rawValue
        } catch {
            // The one place a command's error becomes a message and an exit code.
            let error = CLIError(reporting: error)
            console.error(error.message, hint: error.hint, more: error.moreHints)
            return error.exitCode.rawValue
        }
    }

    /// Private files whatever the caller's umask; no core dumps, no ptrace
    /// by other processes of the same user. The caller's settings are kept
    /// so that `vault exec` can hand them back to the command it runs.
    static func hardenProcess() {
        let old = umask(0o077)
        var core = rlimit()
        getrlimit(Int32(RLIMIT_CORE.rawValue), &core)
        callerSettings = CallerSettings(umask: old, coreLimit: core)
        if vault_refuse_core_dumps() != 0 {
            Console().warn("could not disable core dumps")
        }
    }

    /// What the process had before `hardenProcess`.
    struct CallerSettings {
        let umask: mode_t
        let coreLimit: rlimit
    }

    /// Set once at start-up, before anything else runs; read by `vault exec`.
    nonisolated(unsafe) static var callerSettings: CallerSettings? = nil

    static func dispatch(_ args: [String], environment: [String: String]) throws -> ExitCode {
        guard let first = args.first else {
            Console().out(Help.overview)
            return .usage
        }
        switch first {
        case "--version", "version":
            Console().out("vault \(Help.version)")
            return .ok
        case "--help", "-h":
            Console().out(Help.overview)
            return .ok
        default:
            break
        }
        // Global options may come before the command name.
        var rest = args
        var leading: [String] = []
        while let a = rest.first, a.hasPrefix("-"), a != "--" {
            leading.append(rest.removeFirst())
            if GlobalOptions.all.contains(where: { $0.takesValue && "--" + $0.name == a }), let v = rest.first {
                leading.append(v)
                rest.removeFirst()
            }
        }
        guard let name = rest.first else { throw CLIError.usage("no command given", command: nil) }
        guard let command = Commands.named(name) else {
            throw Commands.unknown(name)
        }
        let parsed: ParsedArguments
        do {
            parsed = try ArgumentParser.parse(
                leading + Array(rest.dropFirst()), options: command.acceptedOptions, command: name)
        } catch {
            // 'vault exec work python3 -c ...': the program's options reached vault's parser.
            guard name == "exec", !rest.contains("--") else { throw error }
            throw CLIError(
                error.message, hint: "put '--' before the program: vault exec NAME... -- COMMAND [ARGUMENT...]",
                exitCode: .usage)
        }
        if parsed.flag(GlobalOptions.help.name) {
            Console().out(Help.text(for: command))
            return .ok
        }
        // exec runs what follows '--'; completion completes it.
        if parsed.trailing != nil && name != "exec" && name != "completion" {
            throw CLIError.usage("'--' is not used by 'vault \(name)'", command: name)
        }
        let context = Context(command: command, arguments: parsed, environment: environment)
        _ = try context.network.storeTimeout()  // a bad VAULT_STORE_TIMEOUT is a usage error for every command
        return try command.run(context)
    }
}
