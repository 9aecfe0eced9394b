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

    /// `--name VALUE`, as usage and help show it.
    var label: String { "--\(name)" + (valueName.map { " " + $0 } ?? "") }
}

/// A declared option of a command: what it accepts, and where its parsed
/// value goes. Commands declare them as stored properties and list them in
/// `declarations` (no process looks for them by reflection: a dynamic cast
/// scans the conformance tables of the whole binary, which doubled `vault
/// token`'s start-up; `CommandDeclarationTests` checks each list against the
/// stored properties).
protocol OptionDeclaration: AnyObject {
    var spec: OptionSpec { get }
    /// Whether the command line gave it.
    var given: Bool { get }
    /// Takes this option's value from a parsed command line; a value that
    /// does not parse is a usage error of `command`.
    func bind(_ parsed: ParsedArguments, command: String) throws(CLIError)
}

/// A set of options several commands share: a struct whose stored
/// properties are option declarations (swift-argument-parser's
/// `@OptionGroup`). A command holds one as a stored property and lists
/// its `declarations` among its own.
protocol OptionGroup {
    /// The group's options, in the order they are declared.
    var declarations: [any OptionDeclaration] { get }
    /// Checks the group's options together; the `validate()` of each
    /// command that holds the group calls it.
    func validate() throws(ValidationError)
}

extension OptionGroup {
    /// No rule across the group's options.
    func validate() throws(ValidationError) {}
}

/// `--name`: given or not.
@propertyWrapper
final class Flag: OptionDeclaration {
    let spec: OptionSpec
    private(set) var wrappedValue = false

    init(_ name: String, help: String, hidden: Bool = false) {
        spec = OptionSpec(name: name, valueName: nil, help: help, hidden: hidden)
    }

    /// The declaration itself (`$name`), for messages that name the option.
    var projectedValue: Flag { self }
    var given: Bool { wrappedValue }

    func bind(_ parsed: ParsedArguments, command: String) { wrappedValue = parsed.flag(spec.name) }
}

/// `--name VALUE`, at most once, its value a `Value` (`@Option(...) var
/// format: EnvFormat?`): text that is not one is a usage error when the
/// command line is bound, before the command runs.
///
/// The wrapper is a struct and its declaration, `$name`, a class that
/// is not generic: an instance of a generic class needs its metadata made
/// at run time, per value type (20,000 instructions each, and a scan of
/// the binary's conformance records when the type parameter had a
/// requirement), which `vault token` would pay at every start. A struct's
/// layout is known when the command is compiled. The value is parsed when
/// the command line is bound, to check it, and again when it is read.
@propertyWrapper
struct Option<Value> {
    /// The declaration, which holds the text the command line gave.
    let projectedValue: ValueOption
    /// The value that text stands for, nil when none or out of range.
    private let parse: (String) -> Value?

    var wrappedValue: Value? { projectedValue.text.flatMap(parse) }
}

extension Option where Value: OptionValue {
    /// `help` may say `{choices}` for the values of a fixed set, which
    /// come from `Value`, as completion's do.
    init(_ name: String, value valueName: String, help: String) {
        let choices = Value.choices
        let text = choices.isEmpty ? help : help.replacing("{choices}", with: OptionText.alternatives(choices))
        let parse = { (text: String) in Value(argument: text) }
        self.parse = parse
        projectedValue = ValueOption(
            OptionSpec(name: name, valueName: valueName, help: text, choices: choices),
            accepts: { parse($0) != nil }, requirement: { Value.requirement })
    }

    /// An option that takes the values of `range` only: `in: 0..<1e7`.
    init<R: RangeExpression>(_ name: String, value valueName: String, help: String, in range: R)
    where R.Bound == Value {
        let parse = { (text: String) in Value(argument: text).flatMap { range.contains($0) ? $0 : nil } }
        self.parse = parse
        projectedValue = ValueOption(
            OptionSpec(name: name, valueName: valueName, help: help, choices: Value.choices),
            accepts: { parse($0) != nil }, requirement: { Value.requirement })
    }
}

/// The declaration of an `@Option`: what it accepts and the text given.
final class ValueOption: OptionDeclaration {
    let spec: OptionSpec
    /// The option's text on the command line, once bound and checked.
    private(set) var text: String? = nil
    private let accepts: (String) -> Bool
    /// What the option needs, said after its name: `must be sh or fish`.
    private let requirement: () -> String

    init(_ spec: OptionSpec, accepts: @escaping (String) -> Bool, requirement: @escaping () -> String) {
        self.spec = spec
        self.accepts = accepts
        self.requirement = requirement
    }

    var given: Bool { text != nil }

    func bind(_ parsed: ParsedArguments, command: String) throws(CLIError) {
        let given = parsed.value(spec.name)
        if let given, !accepts(given) {
            throw CLIError.usage("--\(spec.name) \(requirement())", command: command)
        }
        text = given
    }
}

/// `--name VALUE`, as many times as wanted.
@propertyWrapper
final class RepeatedOption: OptionDeclaration {
    let spec: OptionSpec
    private(set) var wrappedValue: [String] = []

    init(_ name: String, value valueName: String, help: String) {
        spec = OptionSpec(name: name, valueName: valueName, help: help, repeatable: true)
    }

    /// The declaration itself (`$name`), for messages that name the option.
    var projectedValue: RepeatedOption { self }
    var given: Bool { !wrappedValue.isEmpty }

    func bind(_ parsed: ParsedArguments, command: String) { wrappedValue = parsed.values(spec.name) }
}

/// Options shared by commands: `--keyfile` and `--help` by all, `--json`
/// by those that print data (`Command.printsJSON`).
enum GlobalOptions {
    static let json = OptionSpec(name: "json", valueName: nil, help: "print data as JSON")
    static let keyfile = OptionSpec(
        name: "keyfile", valueName: "PATH", help: "unlock with this key file (also VAULT_KEYFILE)")
    static let help = OptionSpec(name: "help", valueName: nil, help: "show help for the command")
    static let all: [OptionSpec] = [json, keyfile, help]
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
                parsed.options[GlobalOptions.help.name, default: []].append("")
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
