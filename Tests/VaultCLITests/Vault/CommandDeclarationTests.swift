import Testing

@testable import VaultCLI

/// The commands' option declarations, in process: what the parser binds,
/// and that every usage line is made of options the command declares.
@Suite("command options are declared once")
struct CommandDeclarationTests {
    /// Parses `words` for `command` and binds them to a fresh `C`.
    func parsed<C: VaultCommand>(_ type: C.Type, _ words: [String]) throws -> C {
        let command = Command(type)
        let arguments = try ArgumentParser.parse(words, options: command.acceptedOptions, command: command.name)
        return try C.bound(arguments)
    }

    /// The option declarations of `value` found by reflection, its groups'
    /// where they stand: what each command's `declarations` must list.
    /// Only this test reflects; no process does.
    static func reflected(_ value: Any) -> [any OptionDeclaration] {
        Mirror(reflecting: value).children.flatMap { child -> [any OptionDeclaration] in
            if let declaration = child.value as? any OptionDeclaration { return [declaration] }
            if child.value is any OptionGroup { return reflected(child.value) }
            // An @Option's storage, `_name`: a struct that holds its declaration.
            if child.label?.hasPrefix("_") == true { return reflected(child.value) }
            return []
        }
    }

    @Test("each command lists exactly the options it declares, in their order (the table no process reflects on)")
    func declarationsListed() {
        for type in Commands.types {
            let command = type.init()
            let listed = command.declarations.map { ObjectIdentifier($0) }
            let declared = Self.reflected(command).map { ObjectIdentifier($0) }
            #expect(listed == declared, "\(type.configuration.name): \(command.declarations.map(\.spec.name))")
        }
        #expect(Set(Commands.types.map { $0.configuration.name }).count == Commands.types.count)
        // The switch that finds one command by its name finds each one.
        for type in Commands.types {
            let found = Commands.type(named: type.configuration.name).map { ObjectIdentifier($0) }
            #expect(found == ObjectIdentifier(type), "\(type.configuration.name)")
        }
        #expect(Commands.type(named: "no-such-command") == nil)
    }

    @Test("every option in a usage line comes from a declaration of its command")
    func usageLinesComeFromDeclarations() {
        for command in Commands.all {
            // Written by hand, `--keyfile PATH` drifted from `--new-keyfile`:
            // templates name options only as `{name}`.
            let template = command.configuration.usage.split(separator: " ")
            #expect(!template.contains { $0.contains("--") && $0 != "--" }, "\(command.name): \(template)")
            let usage = command.usage
            #expect(!usage.contains("{") && !usage.contains("}"), "\(command.name): \(usage)")
            let named = usage.split(whereSeparator: { " [|]".contains($0) }).filter { $0.hasPrefix("--") && $0 != "--" }
            for option in named {
                #expect(
                    command.acceptedOptions.contains { "--" + $0.name == option },
                    "vault \(command.name) advertises \(option), which it does not accept")
            }
        }
    }

    @Test("keyslot advertises the option it reads: --new-keyfile PATH")
    func keyslotUsage() {
        let usage = Commands.named("keyslot")!.usage
        #expect(
            usage
                == "keyslot list|add|remove [--new-keyfile PATH | --secret-service | --passphrase [--kdf-memory MIB] "
                + "[--kdf-passes N]] [SLOT]")
    }

    @Test("no command declares an option twice or shadows a shared one")
    func namesAreUnique() {
        for command in Commands.all {
            let names = command.acceptedOptions.map(\.name)
            #expect(Set(names).count == names.count, "\(command.name): \(names)")
        }
    }

    @Test("options, flags and groups bind to their declarations")
    func binding() throws {
        let keyslot = try parsed(KeyslotCommand.self, ["add", "--new-keyfile", "/k", "--kdf-passes=4"])
        #expect(keyslot.newKeyfile == "/k")
        #expect(!keyslot.secretService && !keyslot.passphrase)
        #expect(keyslot.kdf.passes == 4 && keyslot.kdf.memory == nil)

        let add = try parsed(AddCommand.self, ["google", "--scope", "a", "--scope", "b", "--flow", "device"])
        #expect(add.scopes == ["a", "b"])
        #expect(add.flow == .device)
        #expect(add.serviceAccount == nil)
    }

    @Test("a hidden option is accepted but not documented")
    func hiddenOption() throws {
        let agent = Commands.named("agent")!
        #expect(agent.acceptedOptions.contains { $0.name == "key-on-stdin" })
        #expect(!agent.documentedOptions.contains { $0.name == "key-on-stdin" })
        #expect(try parsed(AgentCommand.self, ["--key-on-stdin"]).keyOnStdin)
    }

    @Test("a group's options appear where the group is declared, in order")
    func groupOrder() {
        #expect(
            Commands.named("keyslot")!.options.map(\.name) == [
                "new-keyfile", "secret-service", "passphrase", "kdf-memory", "kdf-passes",
            ])
        #expect(
            Commands.named("agent")!.options.map(\.name) == [
                "foreground", "idle-timeout", "timeout", "refresh-before", "confirm-command", "confirm-timeout",
                "keepalive-lead", "keepalive-every", "notify-command", "status", "key-on-stdin",
            ])
    }
}
