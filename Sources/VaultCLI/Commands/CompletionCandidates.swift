internal import VaultAgent
internal import VaultCore

/// What the shell scripts ask `vault completion candidates -- WORDS...`:
/// the words that may come next, from the command table. The first line
/// is `words` or `files` (complete file names instead); then one
/// candidate a line, with a tab and a description where there is one.
/// Shells filter by what was typed.
///
/// Grant names come from the agent, or from a key file, never from a
/// passphrase: completion must not prompt, and must not wait for a KDF or
/// a passphrase command.
struct CompletionCandidates {
    let context: Context

    /// What a positional argument of a command is.
    enum Argument {
        case grant, provider, command
        case words([String])
        case nothing
    }

    /// `words`: what follows `vault` on the command line, the word being
    /// completed last (possibly empty).
    func lines(_ words: [String]) -> [String] {
        let current = words.last ?? ""
        guard words.count > 1, let command = Commands.named(words[0]) else {
            guard words.count <= 1 else { return ["words"] }
            return ["words"] + Commands.all.map { "\($0.name)\t\($0.abstract)" } + ["--help", "--version"]
        }
        let options = command.documentedOptions + command.sharedOptions
        let before = Array(words.dropFirst().dropLast())
        if command.name == "exec", before.contains("--") { return ["files"] }
        if let last = before.last, last.hasPrefix("--"),
            let option = options.first(where: { "--" + $0.name == last }), option.takesValue
        {
            if option.takesFile { return ["files"] }
            return ["words"] + option.choices
        }
        if current.hasPrefix("-") {
            return ["words"] + options.map { "--\($0.name)\t\($0.help)" }
        }
        var positionals: [String] = []
        var skip = false
        for word in before {
            if skip {
                skip = false
            } else if word.hasPrefix("-") {
                skip = options.first { "--" + $0.name == word }?.takesValue ?? false
            } else {
                positionals.append(word)
            }
        }
        switch command.argument(positionals) {
        case .grant: return ["words"] + grantNames()
        case .provider:
            let configDirectory = (try? context.opener.location())?.configDirectory
            let providers = configDirectory.map { ProviderCatalog.load(configDirectory: $0).sorted.map(\.name) } ?? []
            return ["words"] + providers + grantNames()
        case .command: return ["words"] + Commands.all.map(\.name)
        case .words(let list): return ["words"] + list
        case .nothing: return ["words"]
        }
    }

    /// The grant names, if the vault opens without asking anyone: through
    /// its agent, or with a key file. Otherwise none.
    func grantNames() -> [String] {
        guard let location = try? context.opener.location(), Vault.exists(at: location) else { return [] }
        var vault: Vault? = nil
        if let paths = context.agents.paths(for: location), let agent = try? AgentClient.connect(paths, timeout: 2) {
            vault = try? Vault.open(at: location, agent: agent, time: context.time)
        }
        if vault == nil, let path = context.opener.unlockSources.keyfilePath, let key = try? Keyfile.read(path: path) {
            vault = try? Vault.open(at: location, key: .keyfile(key), time: context.time)
        }
        guard let vault, let listing = try? vault.list(secrets: false) else { return [] }
        return listing.grants.map(\.name)
    }
}
