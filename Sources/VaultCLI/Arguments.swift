/// One option a command accepts.
struct OptionSpec: Sendable {
    let name: String
    let valueName: String?
    let help: String
    var repeatable = false
    /// Internal options (the agent's start-up handshake) stay out of help
    /// and completions.
    var hidden = false
    /// The values the option takes, when they are a fixed set (for completion).
    var choices: [String] = []

    var takesValue: Bool { valueName != nil }

    /// Whether its value is a file name (for completion).
    var takesFile: Bool { ["PATH", "F", "FILE", "KEY.json"].contains(valueName ?? "") }
}

/// Options shared by commands: `--keyfile` and `--help` by all, `--json`
/// by those that print data (`Command.printsJSON`).
enum GlobalOptions {
    static let json = OptionSpec(name: "json", valueName: nil, help: "print data as JSON")
    static let all: [OptionSpec] = [
        json,
        OptionSpec(name: "keyfile", valueName: "PATH", help: "unlock with this key file (also VAULT_KEYFILE)"),
        OptionSpec(name: "help", valueName: nil, help: "show help for the command"),
    ]
}

/// A parsed command line: the options given and the positional arguments.
struct ParsedArguments {
    var options: [String: [String]] = [:]
    var positionals: [String] = []
    /// Arguments after `--`, untouched.
    var trailing: [String]? = nil

    func flag(_ name: String) -> Bool { options[name] != nil }
    func value(_ name: String) -> String? { options[name]?.last }
    func values(_ name: String) -> [String] { options[name] ?? [] }
}

/// Parses `--name`, `--name VALUE`, `--name=VALUE` and `-h` against the
/// command's option list. Unknown options are usage errors: a typo must
/// never be taken for an argument.
enum ArgumentParser {
    /// `all` is every option the command accepts, shared ones included
    /// (`Command.acceptedOptions`).
    static func parse(_ args: [String], options all: [OptionSpec], command: String?) throws(CLIError)
        -> ParsedArguments
    {
        var parsed = ParsedArguments()
        var i = 0
        while i < args.count {
            let arg = args[i]
            i += 1
            if arg == "--" {
                parsed.trailing = Array(args[i...])
                break
            }
            if arg == "-h" {
                parsed.options["help", default: []].append("")
                continue
            }
            guard arg.hasPrefix("--"), arg.count > 2 else {
                if arg.hasPrefix("-") && arg != "-" {
                    throw CLIError.usage("unknown option '\(arg)'", command: command)
                }
                parsed.positionals.append(arg)
                continue
            }
            let body = arg.dropFirst(2)
            let name: String
            var inlineValue: String? = nil
            if let eq = body.firstIndex(of: "=") {
                name = String(body[..<eq])
                inlineValue = String(body[body.index(after: eq)...])
            } else {
                name = String(body)
            }
            guard let spec = all.first(where: { $0.name == name }) else {
                throw CLIError.usage("unknown option '--\(name)'", command: command)
            }
            let value: String
            if spec.takesValue {
                if let inlineValue {
                    value = inlineValue
                } else {
                    guard i < args.count else {
                        throw CLIError.usage("option '--\(name)' needs a value (\(spec.valueName!))", command: command)
                    }
                    value = args[i]
                    i += 1
                }
            } else {
                guard inlineValue == nil else {
                    throw CLIError.usage("option '--\(name)' takes no value", command: command)
                }
                value = ""
            }
            if parsed.options[name] != nil && !spec.repeatable && spec.takesValue {
                throw CLIError.usage("option '--\(name)' given more than once", command: command)
            }
            parsed.options[name, default: []].append(value)
        }
        return parsed
    }
}
