/// Help text in the OVERVIEW / USAGE / ARGUMENTS / OPTIONS shape.
enum Help {
    static let version = "0.1.0"

    static var overview: String {
        var lines = [
            "OVERVIEW: keep OAuth grants encrypted and hand out fresh tokens",
            "",
            "USAGE: vault COMMAND [OPTIONS]",
            "",
            "COMMANDS:",
        ]
        let width = Commands.all.map(\.name.count).max() ?? 0
        for c in Commands.all {
            lines.append("  \(c.name)\(String(repeating: " ", count: width - c.name.count + 2))\(c.abstract)")
        }
        lines +=
            [
                "",
                "OPTIONS:",
            ] + optionLines(GlobalOptions.all) + [
                "  --version          print the version",
                "",
                "UNLOCKING: --keyfile or VAULT_KEYFILE, VAULT_PASSPHRASE_COMMAND, VAULT_PASSPHRASE_FILE,",
                "VAULT_PASSPHRASE, then the terminal. Exit codes: 0 ok, 1 failure, 2 grant needs",
                "re-authorization, 64 usage error, 75 transient failure, 77 locked or wrong passphrase.",
                "",
                "See 'vault help COMMAND' for more about a command.",
            ]
        return lines.joined(separator: "\n")
    }

    static func text(for c: Command) -> String {
        var lines = ["OVERVIEW: \(c.abstract)", "", "USAGE: " + c.usageLines.joined(separator: "\n       ")]
        if !c.arguments.isEmpty {
            lines += ["", "ARGUMENTS:"]
            let width = c.arguments.map(\.0.count).max() ?? 0
            for (name, help) in c.arguments {
                lines.append("  \(name)\(String(repeating: " ", count: width - name.count + 2))\(help)")
            }
        }
        lines += ["", "OPTIONS:"] + optionLines(c.documentedOptions + c.sharedOptions)
        if let discussion = c.discussion { lines += ["", discussion] }
        if !c.examples.isEmpty { lines += ["", "EXAMPLES:"] + c.examples.map { "  " + $0 } }
        return lines.joined(separator: "\n")
    }

    private static func optionLines(_ options: [OptionSpec]) -> [String] {
        let labels = options.map(\.label)
        let width = max(labels.map(\.count).max() ?? 0, 17)
        return zip(labels, options).map { label, o in
            "  \(label)\(String(repeating: " ", count: width - label.count + 2))\(o.help)"
        }
    }
}

/// `vault help`.
struct HelpCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "help",
        abstract: "Show help for vault or one of its commands.",
        usage: "help [COMMAND]",
        arguments: [("COMMAND", "the command to explain")],
        examples: ["vault help", "vault help import"],
        printsJSON: false
    )

    /// COMMAND.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .command : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let args = ctx.arguments.positionals
        guard args.count <= 1 else { throw CLIError.usage("unexpected argument '\(args[1])'", command: "help") }
        if let name = args.first {
            guard let command = Commands.named(name) else {
                throw Commands.unknown(name)
            }
            ctx.output.out(Help.text(for: command))
        } else {
            ctx.output.out(Help.overview)
        }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
