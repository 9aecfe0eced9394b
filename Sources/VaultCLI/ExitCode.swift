internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultSync

/// The exit codes (docs/cli.md, "Exit status").
enum ExitCode: Int32 {
    case ok = 0
    case failure = 1
    case dead = 2
    case usage = 64
    case transient = 75
    case locked = 77
}

/// An error the CLI reports: a message, an optional hint and the exit code.
struct CLIError: Error {
    let message: String
    let hint: String?
    /// Further hint lines, each shown on its own `vault: hint:` line.
    var moreHints: [String] = []
    let exitCode: ExitCode

    init(_ message: String, hint: String? = nil, exitCode: ExitCode = .failure) {
        self.message = message
        self.hint = hint
        self.exitCode = exitCode
    }

    /// An error with several hint lines.
    init(_ message: String, hints: [String], exitCode: ExitCode = .failure) {
        self.init(message, hint: hints.first, exitCode: exitCode)
        moreHints = Array(hints.dropFirst())
    }

    static func usage(_ message: String, command: String?) -> CLIError {
        let help = command.map { "see 'vault \($0) --help'" } ?? "see 'vault help'"
        return CLIError(message, hint: help, exitCode: .usage)
    }

    /// Whatever a command threw, as the CLI reports it: a `VaultError`
    /// by its code, a crypto failure as the core maps it.
    init(reporting error: any Error) {
        switch error {
        case let error as CLIError: self = error
        case let error as VaultError: self.init(error)
        case let error as CryptoError: self.init(VaultError(error))
        // Never the error's own text: it could quote input.
        default: self.init("internal error (\(type(of: error)))")
        }
    }

    init(_ error: VaultError) {
        let code: ExitCode
        switch error.code {
        case .wrongKey, .locked: code = .locked
        // Time ran out before anyone approved: nothing failed, try again.
        case .busy, .transient, .cancelled, .timedOut: code = .transient
        case .dead: code = .dead
        // Everything else, codes added later included: a failure.
        default:
            code = .failure
        }
        var hint = error.remedy.map(Remedies.hint)
        // A store that accepted the requests and never answered them.
        if error.code == .transient && error.remedy == .checkStore {
            hint = Network.unansweredStoreHint(throughAgent: false)
        }
        if error.code == .denied && hint == nil {
            hint =
                "'vault policy NAME' on the machine that holds the vault says what its agent answers"
        }
        self.init(error.reason, hint: hint, exitCode: code)
    }
}

extension VaultError.Code {
    /// What the code means, in a few words for a person: said where only
    /// the code was kept (the audit log records codes, not reasons). A
    /// code this build does not know is said as it is.
    var words: String {
        switch self {
        case .notFound: "no grant of that name"
        case .alreadyExists: "something of that name is there already"
        case .invalidInput: "the request was not valid"
        case .noVault: "no vault"
        case .wrongKey: "the passphrase or key did not open the vault"
        case .locked: "the vault was locked"
        case .damaged: "stored data was damaged"
        case .tampered: "stored data failed its authentication"
        case .unsupported: "not supported by this version"
        case .refused: "the provider refused the grant"
        case .invalidClient: "the provider refused the client"
        case .providerError: "the provider answered with an error"
        case .transient: "the network or the provider failed for now"
        case .badResponse: "the provider's answer failed a check"
        case .timedOut: "it took too long"
        case .dead: "the grant needs a new authorization"
        case .denied: "refused by the agent's policy"
        case .busy: "another process or machine was using the grant"
        case .cancelled: "cancelled"
        case .io: "a file could not be read or written"
        case .insecurePath: "a file or directory others could change"
        case .internalError: "an internal error"
        default: rawValue
        }
    }
}
