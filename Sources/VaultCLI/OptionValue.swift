internal import FoundationEssentials
internal import VaultAgent
internal import VaultCore
internal import VaultHTTP

/// A value an option takes, parsed from its text before the command runs
/// (swift-argument-parser's `ExpressibleByArgument`): a command declares
/// `@Option("format", ...) var format: EnvFormat?` and its `run` sees a
/// format, never text it has to check. A value that does not parse is a usage error that
/// names the option and says what it needs, raised before the vault is
/// opened or the network used.
///
/// An enum that is `CaseIterable` with `String` raw values gets everything
/// from its cases: they are the values accepted, the choices completion
/// offers, usage's `{name:choices}` and help's `{choices}`, and the
/// message (`--format must be sh, fish, dotenv or json`). Adding a case is
/// the one edit a new value needs.
protocol OptionValue: Sendable {
    /// The value `argument` stands for, or nil when it stands for none.
    init?(argument: String)
    /// What the option needs, said after its name: `must be sh or fish`,
    /// `needs a number of seconds`.
    static var requirement: String { get }
    /// The values it takes, when they are a fixed set.
    static var choices: [String] { get }
}

extension OptionValue {
    /// Not a fixed set.
    static var choices: [String] { [] }
}

extension OptionValue where Self: CaseIterable, Self: RawRepresentable, RawValue == String {
    /// A case by its raw value.
    init?(argument: String) { self.init(rawValue: argument) }
    /// The cases' raw values, in declaration order.
    static var choices: [String] { allCases.map(\.rawValue) }
    /// `must be sh, fish, dotenv or json`.
    static var requirement: String { "must be " + OptionText.alternatives(choices) }
}

/// Any text: options whose value is checked where it is used (a path, a
/// client id, a URL the core parses).
extension String: OptionValue {
    init?(argument: String) { self = argument }
    static var requirement: String { "needs a value" }
}

/// Text for messages and help about option values.
enum OptionText {
    /// `a`, `a or b`, `a, b or c`.
    static func alternatives(_ words: [String]) -> String {
        guard let last = words.last else { return "" }
        guard words.count > 1 else { return last }
        return words.dropLast().joined(separator: ", ") + " or " + last
    }
}

/// A number of seconds, fractions allowed: `--min-valid 300`, `--timeout 90`.
/// Its option says which range it takes (`in:`).
struct Seconds: OptionValue, Comparable, ExpressibleByFloatLiteral, ExpressibleByIntegerLiteral {
    let value: Double

    init(_ value: Double) { self.value = value }
    init(floatLiteral value: Double) { self.value = value }
    init(integerLiteral value: Int) { self.value = Double(value) }

    init?(argument: String) {
        guard let value = Double(argument), value.isFinite else { return nil }
        self.value = value
    }

    static let requirement = "needs a number of seconds"

    static func < (a: Seconds, b: Seconds) -> Bool { a.value < b.value }
}

/// A duration with an optional unit: `90`, `90s`, `15m`, `8h`, `1d`; `0`
/// for none (`Duration.parse`).
struct Interval: OptionValue {
    let seconds: TimeInterval

    init?(argument: String) {
        guard let seconds = Duration.parse(argument) else { return nil }
        self.seconds = seconds
    }

    static let requirement = "needs a duration such as 90s, 15m or 8h"
}

/// A TCP port, 1 to 65535, in decimal digits only.
struct Port: OptionValue {
    let number: Int

    init?(argument: String) {
        guard OutputGrammar.isSASLPort(argument), let number = Int(argument) else { return nil }
        self.number = number
    }

    static let requirement = "must be a number from 1 to 65535"
}

/// A whole number above 0: `--limit 20`.
struct Count: OptionValue {
    let value: Int

    init?(argument: String) {
        guard let value = Int(argument), value > 0 else { return nil }
        self.value = value
    }

    static let requirement = "needs a positive number"
}

/// A whole number that fits 32 bits: `--kdf-passes 4`.
extension UInt32: OptionValue {
    init?(argument: String) { self.init(argument, radix: 10) }
    static var requirement: String { "needs a whole number" }
}

/// A size in MiB, up to 1 TiB so that its bytes fit: `--kdf-memory 256`.
struct Mebibytes: OptionValue {
    let bytes: UInt64

    init?(argument: String) {
        guard let mib = UInt64(argument), mib <= 1 << 20 else { return nil }
        bytes = mib << 20
    }

    static let requirement = "needs a whole number of MiB"
}

/// The prefix of the variables `env` and `exec` hand out: letters, digits
/// and `_`, not starting with a digit.
struct VariablePrefix: OptionValue {
    let text: String

    init?(argument: String) {
        guard GrantVariables.validate(prefix: argument) else { return nil }
        text = argument
    }

    static let requirement = "must be letters, digits and _, not starting with a digit"
}

/// `vault import --from`: the tools whose files it reads.
extension ForeignTokens.Tool: OptionValue {}

/// `vault policy --local` and `--forwarded`.
extension AgentPolicy.Rule: OptionValue {}

/// `vault add --flow`: every flow, `client-credentials` (a machine's) included.
extension Provider.Flow: OptionValue {}

/// `vault test --mechanism`: the SASL mechanisms, as the option spells them.
enum MechanismChoice: String, CaseIterable, OptionValue {
    case xoauth2, oauthbearer

    var mechanism: BearerMechanism {
        switch self {
        case .xoauth2: .xoauth2
        case .oauthbearer: .oauthbearer
        }
    }
}

/// `vault conflicts resolve --keep`: the current value, the other side,
/// or one of several other sides by its number.
enum ConflictSideChoice: OptionValue, Equatable {
    case current, other
    case side(Int)

    init?(argument: String) {
        switch argument {
        case "current": self = .current
        case "other": self = .other
        default:
            guard let n = Int(argument), n > 0 else { return nil }
            self = .side(n)
        }
    }

    static let requirement = "must be current, other or the number of another side"
    static var choices: [String] { ["current", "other"] }

    /// The word it was given as, for the report: `current`, `other`, `2`.
    var argument: String {
        switch self {
        case .current: "current"
        case .other: "other"
        case .side(let number): String(number)
        }
    }
}
