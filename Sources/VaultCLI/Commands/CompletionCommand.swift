/// Shell completion scripts and the man page, generated from the command
/// table so they never drift from the commands themselves.
enum Completion {
    static var commandNames: [String] { Commands.all.map(\.name) }

    static func options(_ c: Command) -> [String] {
        (c.documentedOptions + GlobalOptions.all).map { "--" + $0.name }
    }

    static func bash() -> String {
        var cases = ""
        for c in Commands.all {
            cases += "        \(c.name)) opts=\"\(options(c).joined(separator: " "))\" ;;\n"
        }
        return """
            # bash completion for vault: eval "$(vault completion bash)"
            _vault() {
                local cur cmd opts
                cur="${COMP_WORDS[COMP_CWORD]}"
                cmd="${COMP_WORDS[1]}"
                if [ "$COMP_CWORD" -eq 1 ]; then
                    COMPREPLY=($(compgen -W "\(commandNames.joined(separator: " ")) --help --version" -- "$cur"))
                    return
                fi
                case "$cmd" in
            \(cases)        *) opts="" ;;
                esac
                if [[ "$cur" == -* ]]; then
                    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
                elif [[ "$cmd" =~ ^(show|token|refresh|check|remove|rename|env|exec|header|xoauth2)$ ]]; then
                    COMPREPLY=($(compgen -W "$(vault list --json 2>/dev/null | sed -n 's/^ *"name" : "\\(.*\\)",$/\\1/p')" -- "$cur"))
                elif [ "$cmd" = add ] && [ "$COMP_CWORD" -eq 2 ]; then
                    COMPREPLY=($(compgen -W "$(vault providers --json 2>/dev/null | sed -n 's/^ *"name" : "\\(.*\\)",$/\\1/p')" -- "$cur"))
                fi
            }
            complete -F _vault vault

            """
    }

    static func zsh() -> String {
        var lines = ""
        for c in Commands.all {
            lines += "    '\(c.name):\(c.abstract.replacing("'", with: "'\\''").replacing(":", with: "\\:"))'\n"
        }
        var optionCases = ""
        for c in Commands.all {
            optionCases +=
                "    \(c.name)) _arguments '*: :->args' \(options(c).map { "'\($0)[]'" }.joined(separator: " ")) ;;\n"
        }
        return """
            #compdef vault
            # zsh completion for vault: vault completion zsh > "${fpath[1]}/_vault"
            _vault() {
              local -a commands
              commands=(
            \(lines)  )
              if (( CURRENT == 2 )); then
                _describe 'command' commands
                return
              fi
              case "$words[2]" in
            \(optionCases)  esac
            }
            _vault "$@"

            """
    }

    static func fish() -> String {
        var out = "# fish completion for vault: vault completion fish > ~/.config/fish/completions/vault.fish\n"
        out += "complete -c vault -f\n"
        for c in Commands.all {
            let abstract = c.abstract.replacing("'", with: "\\'")
            out += "complete -c vault -n '__fish_use_subcommand' -a '\(c.name)' -d '\(abstract)'\n"
            for o in c.documentedOptions + GlobalOptions.all {
                let help = o.help.replacing("'", with: "\\'")
                out += "complete -c vault -n '__fish_seen_subcommand_from \(c.name)' -l '\(o.name)' -d '\(help)'"
                out += o.takesValue ? " -r\n" : "\n"
            }
        }
        return out
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
            m += ".TP\n.B vault \(esc(c.usage))\n\(esc(c.abstract))\n"
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

extension Commands {
    static let completionCommand = Command(
        name: "completion",
        abstract: "Print a shell completion script (bash, zsh or fish).",
        usage: "completion bash|zsh|fish",
        arguments: [("SHELL", "bash, zsh or fish")],
        examples: [
            #"eval "$(vault completion bash)""#, #"vault completion zsh > "${fpath[1]}/_vault""#,
            "vault completion fish > ~/.config/fish/completions/vault.fish",
        ]
    ) { (ctx: Context) throws(CLIError) -> ExitCode in
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
}
