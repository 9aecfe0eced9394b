/// Shell completion scripts and the man page, generated from the command
/// table so they never drift from the commands themselves.
enum Completion {
    static var commandNames: [String] { Commands.all.map(\.name) }

    static func options(_ c: Command) -> [String] {
        (c.documentedOptions + c.sharedOptions).map { "--" + $0.name }
    }

    /// Every script asks `vault completion candidates` (CompletionCandidates),
    /// with stdin closed and stderr dropped: completion never prompts.
    static func bash() -> String {
        """
        # bash completion for vault: eval "$(vault completion bash)"
        _vault() {
            local cur="${COMP_WORDS[COMP_CWORD]}" IFS=$'\\n'
            local -a out
            out=($(vault completion candidates -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null </dev/null | cut -f1))
            if [ "${out[0]}" = files ]; then
                COMPREPLY=($(compgen -f -- "$cur"))
            else
                COMPREPLY=($(compgen -W "${out[*]:1}" -- "$cur"))
            fi
        }
        complete -F _vault vault

        """
    }

    static func zsh() -> String {
        """
        #compdef vault
        # zsh completion for vault: vault completion zsh > "${fpath[1]}/_vault"
        _vault() {
          local -a out
          out=("${(@f)$(vault completion candidates -- "${(@)words[2,CURRENT]}" 2>/dev/null </dev/null)}")
          if [[ "$out[1]" == files ]]; then
            _files
          else
            compadd -- "${(@)${(@)out[2,-1]}%%$'\\t'*}"
          fi
        }
        _vault "$@"

        """
    }

    static func fish() -> String {
        """
        # fish completion for vault: vault completion fish > ~/.config/fish/completions/vault.fish
        function __vault_complete
            set -l words (commandline -opc)[2..-1] (commandline -ct)
            set -l out (vault completion candidates -- $words 2>/dev/null </dev/null)
            if test "$out[1]" = files
                __fish_complete_path (commandline -ct)
            else
                printf '%s\\n' $out[2..-1]
            end
        end
        complete -c vault -f -a '(__vault_complete)'

        """
    }

    /// The man page, in roff.
    static func manPage() -> String {
        func esc(_ s: String) -> String {
            s.replacing("\\", with: "\\e").replacing("-", with: "\\-").split(
                separator: "\n", omittingEmptySubsequences: false
            )
            .map { $0.hasPrefix(".") || $0.hasPrefix("'") ? "\\&" + $0 : String($0) }.joined(separator: "\n")
        }
        var m = """
            .TH VAULT 1 "" "vault \(Help.version)" "User Commands"
            .SH NAME
            vault \\- keep OAuth grants encrypted and hand out fresh tokens
            .SH SYNOPSIS
            .B vault
            .I COMMAND
            [\\fIOPTIONS\\fR]
            .SH DESCRIPTION
            vault keeps OAuth 2.0 and OpenID Connect grants encrypted at rest (libsodium inside SQLite),
            runs authorizations with providers, and hands fresh access tokens to scripts, mail clients and
            git, refreshing them first, never twice at once.
            .SH COMMANDS

            """
        for c in Commands.all {
            m += ".TP\n" + c.usageLines.map { ".B \(esc($0))\n" }.joined(separator: ".TQ\n") + "\(esc(c.abstract))\n"
            if let d = c.discussion { m += ".IP\n\(esc(d.replacing("\n", with: " ")))\n" }
            for o in c.documentedOptions {
                m +=
                    ".IP\n\\fB\\-\\-\(esc(o.name))\\fR\(o.valueName.map { " \\fI\(esc($0))\\fR" } ?? "") \(esc(o.help))\n"
            }
            for e in c.examples { m += ".IP\n.B \(esc(e))\n" }
        }
        m += """
            .SH GLOBAL OPTIONS
            .TP
            .B \\-\\-json
            Print data as JSON.
            .TP
            .BI \\-\\-keyfile " PATH"
            Unlock with this key file (also \\fBVAULT_KEYFILE\\fR).
            .SH UNLOCKING
            In order: \\fB\\-\\-keyfile\\fR or \\fBVAULT_KEYFILE\\fR, \\fBVAULT_PASSPHRASE_COMMAND\\fR,
            \\fBVAULT_PASSPHRASE_FILE\\fR, \\fBVAULT_PASSPHRASE\\fR, then the terminal. With none of them
            and no terminal, vault exits with status 77.
            .SH EXIT STATUS
            0 success; 1 failure; 2 the grant needs a new authorization; 64 usage error; 75 transient
            failure (network, provider, busy vault) or time ran out (a device code expired): try
            again; 77 locked or wrong passphrase.
            .SH FILES
            .TP
            .I $VAULT_HOME/vault.db
            The vault (default \\fI~/.local/share/vault/vault.db\\fR).
            .TP
            .I $XDG_CONFIG_HOME/vault/providers/*.json
            Provider definitions.
            .TP
            .I $XDG_CONFIG_HOME/vault/git\\-credentials.json
            Which grant serves which git host.
            .SH SEE ALSO
            docs/cli.md, docs/providers.md, docs/mail.md, docs/format.md, docs/threat\\-model.md

            """
        return m
    }
}

/// `vault completion`.
struct CompletionCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "completion",
        abstract: "Print a shell completion script (bash, zsh or fish).",
        usage: "completion bash|zsh|fish",
        arguments: [("SHELL", "bash, zsh or fish")],
        discussion: """
            Option values, subcommands and grant names complete where they belong. Grant names
            come from a running agent or a key file only: on a locked vault completion offers no
            names, and never prompts or waits. The scripts call 'vault completion candidates --
            WORDS...'.
            """,
        examples: [
            #"eval "$(vault completion bash)""#, #"vault completion zsh > "${fpath[1]}/_vault""#,
            "vault completion fish > ~/.config/fish/completions/vault.fish",
        ],
        printsJSON: false
    )

    /// SHELL.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .words(["bash", "zsh", "fish"]) : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        if ctx.arguments.positionals == ["candidates"], let words = ctx.arguments.trailing {
            let lines = CompletionCandidates(context: ctx).lines(words)
            Console.write(lines.joined(separator: "\n") + "\n", to: 1)
            return .ok
        }
        let shell = try ctx.positionals("SHELL")[0]
        let text: String
        switch shell {
        case "bash": text = Completion.bash()
        case "zsh": text = Completion.zsh()
        case "fish": text = Completion.fish()
        case "man": text = Completion.manPage()  // used to generate docs/vault.1
        default: throw CLIError.usage("unknown shell '\(shell)' (bash, zsh or fish)", command: "completion")
        }
        var bytes = Array(text.utf8)
        Console.writeAll(&bytes, fd: 1)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [] }
}
