import Synchronization
import Testing
import VaultHTTP

@testable import VaultCLI

/// A command that says whether it ran: what the dispatcher runs of it
/// when its options do not parse or do not go together.
private struct ProbeCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "probe", abstract: "Say whether it ran.", usage: "probe [{limit}] [{first}] [{second}]")
    /// How many times `run` was reached.
    static let runs = Mutex(0)

    @Option("limit", value: "N", help: "a count")
    var limit: Count?
    @Flag("first", help: "one of two")
    var first: Bool
    @Flag("second", help: "the other")
    var second: Bool

    func validate() throws(ValidationError) {
        if first && second { throw ValidationError("--first and --second exclude each other") }
    }

    func run(_ ctx: Context) throws -> ExitCode {
        Self.runs.withLock { $0 += 1 }
        return .ok
    }

    var declarations: [any OptionDeclaration] { [$limit, $first, $second] }
}

/// Option values parsed into types, and rules across options checked by
/// `validate()`, in process: both before a command's `run`.
@Suite("typed option values and the validate phase")
struct OptionValueTests {
    /// `words` bound to a fresh `C` and validated, as the dispatcher does before `run`.
    func bound<C: VaultCommand>(_ type: C.Type, _ words: [String]) throws(CLIError) -> C {
        let command = Command(type)
        let arguments = try ArgumentParser.parse(words, options: command.acceptedOptions, command: command.name)
        return try C.bound(arguments)
    }

    /// The usage error binding `words` raises, or nil when they bind.
    func refusal<C: VaultCommand>(_ type: C.Type, _ words: [String]) -> CLIError? {
        do {
            _ = try bound(type, words)
            return nil
        } catch {
            return error
        }
    }

    /// `vault NAME WORDS...` is refused with `message` and the hint to see its help.
    func expectUsageError(_ name: String, _ words: [String], _ message: String) throws {
        let type = try #require(Commands.type(named: name))
        let refused = refusal(type, words)
        let error = try #require(refused)
        #expect(error.message == message)
        #expect(error.exitCode == .usage)
        #expect(error.hint == "see 'vault \(name) --help'")
    }

    @Test("the dispatcher binds, then validates, and runs a command only when both pass")
    func phases() throws {
        let probe = Command(ProbeCommand.self)
        func dispatch(_ words: [String]) -> CLIError? {
            do {
                let arguments = try ArgumentParser.parse(words, options: probe.acceptedOptions, command: "probe")
                _ = try probe.run(Context(command: probe, arguments: arguments, environment: [:]))
                return nil
            } catch {
                return CLIError(reporting: error)
            }
        }
        let before = ProbeCommand.runs.withLock { $0 }
        #expect(dispatch(["--limit", "none"])?.message == "--limit needs a positive number")
        #expect(dispatch(["--first", "--second"])?.message == "--first and --second exclude each other")
        #expect(dispatch(["--first", "--second"])?.exitCode == .usage)
        #expect(ProbeCommand.runs.withLock { $0 } == before)
        #expect(dispatch(["--limit", "3", "--second"]) == nil)
        #expect(ProbeCommand.runs.withLock { $0 } == before + 1)
    }

    @Test("an enum's cases are the values, the choices and the message")
    func enumValues() {
        #expect(EnvFormat(argument: "fish") == .fish)
        #expect(EnvFormat(argument: "yaml") == nil)
        #expect(EnvFormat(argument: "SH") == nil)
        #expect(EnvFormat.choices == EnvFormat.allCases.map(\.rawValue))
        #expect(EnvFormat.requirement == "must be sh, fish, dotenv or json")
        #expect(MechanismChoice(argument: "oauthbearer")?.mechanism == .oauthbearer)
        #expect(OptionText.alternatives(["a"]) == "a")
        #expect(OptionText.alternatives(["a", "b"]) == "a or b")
    }

    @Test("usage, help and completion take an enum option's values from its type")
    func choicesFromTheType() throws {
        let env = try #require(Commands.named("env"))
        let format = try #require(env.options.first { $0.name == "format" })
        #expect(format.choices == EnvFormat.allCases.map(\.rawValue))
        #expect(format.help == "sh, fish, dotenv or json (default sh)")
        #expect(env.usage.hasPrefix("env NAME... [--format sh|fish|dotenv|json] "))
        let add = try #require(Commands.named("add"))
        #expect(
            add.options.first { $0.name == "flow" }?.choices == ["browser", "device", "paste", "client-credentials"])
        #expect(add.usage.contains(" [--flow browser|device|paste|client-credentials] "))
        // No option lists its choices by hand, and none keeps a `{choices}` unfilled.
        for command in Commands.all {
            for option in command.options {
                #expect(!option.help.contains("{choices}"), "\(command.name) --\(option.name)")
            }
        }
    }

    @Test("a value parses into its type when the options are bound")
    func binding() throws {
        let env = try bound(EnvCommand.self, ["work", "--format", "dotenv", "--prefix", "GH"])
        #expect(env.format == .dotenv && env.prefix?.text == "GH")
        #expect(try bound(EnvCommand.self, ["work"]).format == nil)
        let conflicts = try bound(ConflictsCommand.self, ["resolve", "g", "--keep", "2"])
        #expect(conflicts.keep == .side(2))
        let policy = try bound(PolicyCommand.self, ["--forwarded", "deny"])
        #expect(policy.forwarded == .deny && policy.local == nil)
        let add = try bound(AddCommand.self, ["google", "--timeout", "90.5", "--flow", "paste"])
        #expect(add.timeout?.value == 90.5 && add.flow == .paste)
        let token = try bound(TokenCommand.self, ["work", "--min-valid", "300"])
        #expect(token.minValid?.value == 300)
        #expect(try bound(TokenCommand.self, ["work"]).minValid == nil)
        let log = try bound(LogCommand.self, ["--limit", "20"])
        #expect(log.limit?.value == 20)
        let test = try bound(MailTestCommand.self, ["imap", "g", "--host", "h", "--port", "143"])
        #expect(test.port?.number == 143 && test.mechanism == nil)
        let agent = try bound(AgentCommand.self, ["--idle-timeout", "15m", "--keepalive-every", "0"])
        #expect(agent.timeouts.idle?.seconds == 900 && agent.timeouts.keepAliveEvery?.seconds == 0)
        let initial = try bound(InitCommand.self, ["--kdf-memory", "64", "--kdf-passes", "2"])
        #expect(initial.kdf.memory?.bytes == 64 << 20 && initial.kdf.passes == 2)
    }

    /// A value the option does not take, and the usage error that says so.
    static let refused: [(String, [String], String)] = [
        ("env", ["g", "--format", "yaml"], "--format must be sh, fish, dotenv or json"),
        ("env", ["g", "--prefix", "9X"], "--prefix must be letters, digits and _, not starting with a digit"),
        ("exec", ["g", "--prefix", "A-B"], "--prefix must be letters, digits and _, not starting with a digit"),
        ("import", ["g", "--from", "aws"], "--from must be gcloud, rclone, gh or mutt_oauth2"),
        ("policy", ["--local", "ask"], "--local must be allow, confirm or deny"),
        (
            "conflicts", ["resolve", "g", "--keep", "both"],
            "--keep must be current, other or the number of another side"
        ),
        ("conflicts", ["resolve", "g", "--keep", "0"], "--keep must be current, other or the number of another side"),
        ("add", ["google", "--timeout", "0"], "--timeout needs a number of seconds"),
        ("add", ["google", "--timeout", "86401"], "--timeout needs a number of seconds"),
        ("add", ["google", "--flow", "carrier"], "--flow must be browser, device, paste or client-credentials"),
        ("token", ["g", "--min-valid", "-5"], "--min-valid needs a number of seconds"),
        ("token", ["g", "--min-valid", "abc"], "--min-valid needs a number of seconds"),
        ("token", ["g", "--min-valid", "1e7"], "--min-valid needs a number of seconds"),
        ("token", ["g", "--min-valid", "nan"], "--min-valid needs a number of seconds"),
        ("test", ["imap", "g", "--port", "70000"], "--port must be a number from 1 to 65535"),
        ("test", ["imap", "g", "--port", "+25"], "--port must be a number from 1 to 65535"),
        ("test", ["imap", "g", "--mechanism", "plain"], "--mechanism must be xoauth2 or oauthbearer"),
        ("xoauth2", ["g", "--port", "0"], "--port must be a number from 1 to 65535"),
        ("log", ["--limit", "0"], "--limit needs a positive number"),
        ("agent", ["--idle-timeout", "5x"], "--idle-timeout needs a duration such as 90s, 15m or 8h"),
        ("init", ["--kdf-passes", "three"], "--kdf-passes needs a whole number"),
        ("passwd", ["--kdf-memory", "2097152"], "--kdf-memory needs a whole number of MiB"),
    ]

    @Test("a value an option does not take is a usage error naming the option, before run", arguments: refused)
    func refusedValues(_ name: String, _ words: [String], _ message: String) throws {
        try expectUsageError(name, words, message)
    }

    /// Options that do not go together, refused by the command's `validate()`.
    static let excluded: [(String, [String], String)] = [
        ("policy", ["g", "--reset", "--local", "allow"], "--reset is not used with --local or --forwarded"),
        ("import", ["g", "--remote", "drive"], "--remote goes with --from rclone"),
        ("import", ["g", "--from", "gh", "--remote", "drive"], "--remote goes with --from rclone"),
        ("import", ["g", "--from", "rclone", "--host", "h"], "--host goes with --from gh"),
        ("token", ["g", "--exchange"], "a token exchange needs a resource or an audience to ask for"),
        ("env", ["g", "--resource", "api"], "a resource must be an absolute URI without a fragment (RFC 8707)"),
        ("exec", ["g", "--audience", ""], "an audience must be a non-empty string without control characters"),
        (
            "header", ["g", "--scope", "a\"b"],
            "a scope has a character OAuth scopes cannot have (RFC 6749 section 3.3)"
        ),
        ("add", ["google", "--register", "--client-id", "x"], "--register and --client-id exclude each other"),
        (
            "add", ["google", "--register", "--flow", "device"],
            "--register registers a client for the browser and paste flows: not with --flow device"
        ),
        (
            "add", ["google", "--subject", "u@example.com"],
            "--subject needs --flow client-credentials or --service-account"
        ),
    ]

    @Test("options that do not go together are a usage error of validate, before run", arguments: excluded)
    func excludedCombinations(_ name: String, _ words: [String], _ message: String) throws {
        try expectUsageError(name, words, message)
    }

    @Test("options that go together pass validate")
    func acceptedCombinations() throws {
        _ = try bound(ImportCommand.self, ["g", "--from", "rclone", "--remote", "drive"])
        _ = try bound(ImportCommand.self, ["g", "--from", "gh", "--host", "github.example.com"])
        _ = try bound(PolicyCommand.self, ["g", "--reset"])
        _ = try bound(TokenCommand.self, ["g", "--exchange", "--audience", "billing", "--scope", "read"])
        _ = try bound(AddCommand.self, ["google", "--register", "--flow", "paste"])
        _ = try bound(AddCommand.self, ["api", "--flow", "client-credentials", "--client-key-file", "k.pem"])
        _ = try bound(AddCommand.self, ["google", "--service-account", "k.json", "--subject", "u@example.com"])
    }

    @Test("header checks the request's method, URL and nonce in validate, before run")
    func headerRequestOptions() throws {
        try expectUsageError(
            "header", ["g", "--method", "get"], "--method must be an HTTP method in capitals (GET, POST, ...)")
        try expectUsageError(
            "header", ["g", "--url", "https://example.com/a b"],
            "--url must be an absolute http or https URL of at most 8 KiB of printable ASCII, without spaces "
                + "or backslashes (percent-encode other characters)")
        try expectUsageError(
            "header", ["g", "--dpop-nonce", "a\"b"],
            "--dpop-nonce is not a DPoP nonce (1 to 1024 printable ASCII characters without spaces, quotes "
                + "or backslashes)")
        _ = try bound(HeaderCommand.self, ["g", "--method", "POST", "--url", "https://example.com/a%20b"])
    }
}
