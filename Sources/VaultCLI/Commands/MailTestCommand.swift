internal import FoundationEssentials
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP

/// What `vault test --json` prints: the attempt and what the server said.
struct MailTestOutput: Encodable {
    let mailProtocol: String
    let host: String
    let port: Int
    let security: String
    let mechanism: String
    let user: String
    let result: String
    let loggedIn: Bool
    let server: [String]
    let mechanisms: [String]
    let challenge: String?
    /// After a refused login: whether the provider's userinfo endpoint
    /// accepted the same token (nil when it was not asked or did not say).
    let tokenAccepted: Bool?
    let error: String?

    enum CodingKeys: String, CodingKey {
        case mailProtocol = "protocol"
        case host, port, security, mechanism, user, result
        case loggedIn = "logged_in"
        case server, mechanisms, challenge
        case tokenAccepted = "token_accepted"
        case error
    }

    /// Encodes nulls too, so every key is always there.
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(mailProtocol, forKey: .mailProtocol)
        try c.encode(host, forKey: .host)
        try c.encode(port, forKey: .port)
        try c.encode(security, forKey: .security)
        try c.encode(mechanism, forKey: .mechanism)
        try c.encode(user, forKey: .user)
        try c.encode(result, forKey: .result)
        try c.encode(loggedIn, forKey: .loggedIn)
        try c.encode(server, forKey: .server)
        try c.encode(mechanisms, forKey: .mechanisms)
        try c.encode(challenge, forKey: .challenge)
        try c.encode(tokenAccepted, forKey: .tokenAccepted)
        try c.encode(error, forKey: .error)
    }
}

/// `vault test`.
struct MailTestCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "test",
        abstract: "Log in to an IMAP or SMTP server with a grant's token and report what the server said.",
        usage:
            "test imap|smtp NAME {host} [{port}] [{tls} | {starttls} | {plain}] [{mechanism:choices}] [{user}] [{json}]",
        arguments: [("imap|smtp", "the protocol"), ("NAME", "the grant")],
        discussion: """
            Takes a fresh token as 'vault xoauth2' does (refreshed first when needed), logs in with
            SASL XOAUTH2 (or OAUTHBEARER) as the grant's account, sends a NOOP and logs out. The
            server's lines go to stdout (a line that repeats the token is left out; the token is
            never shown), the outcome to stderr. IMAP uses TLS on port 993 by default (STARTTLS on
            143), SMTP STARTTLS on 587 (TLS on 465); --tls and --starttls choose, and --plain, with
            no TLS, is allowed only to a loopback host, as the token would cross in clear. The
            certificate is always verified (SSL_CERT_FILE names a CA bundle to trust instead).
            After a refused login the same token is shown to the provider's userinfo endpoint, as
            'vault check' does, to tell a revoked token from a scope or login problem. Exit status
            0: logged in. 1: the server refused the login (its words are shown) or does not speak
            the protocol. 2: the grant is dead. 75: the server could not be reached, TLS failed, or
            the server failed after it took the token (an SMTP 4xx, such as a relay it cannot
            reach).
            """,
        examples: [
            "vault test imap gmail --host imap.gmail.com", "vault test smtp outlook --host smtp.office365.com",
            "vault test smtp gmail --host smtp.gmail.com --port 465 --mechanism oauthbearer --json",
        ]
    )

    @Option("host", value: "HOST", help: "the server's host name or IP address")
    var host: String?
    @Option("port", value: "PORT", help: "the server's port (default: IMAP 993, SMTP 587)")
    var port: Port?
    @Flag("tls", help: "TLS from the first byte (imaps, smtps)")
    var tls: Bool
    @Flag("starttls", help: "a plain connection switched to TLS with STARTTLS before the login")
    var starttls: Bool
    @Flag("plain", help: "no TLS, only to a loopback host (a local test server)")
    var plain: Bool
    @Option("mechanism", value: "MECHANISM", help: "the SASL mechanism: {choices} (default xoauth2)")
    var mechanism: MechanismChoice?
    @Option("user", value: "USER", help: "the login (default: the grant's account)")
    var user: String?

    /// imap|smtp, then NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        switch positionals.count {
        case 0: .words(["imap", "smtp"])
        case 1: .grant
        default: .nothing
        }
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let given = try ctx.positionals("imap|smtp", "NAME")
        guard let mailProtocol = MailProtocol(rawValue: given[0]) else {
            throw CLIError.usage("the protocol must be imap or smtp, not '\(given[0])'", command: "test")
        }
        let name = try ctx.grantName(given[1])
        let request = try connection(mailProtocol, caBundle: ctx.network.caBundle)
        // Checked before any token is fetched.
        if let user, !OutputGrammar.isSASLUser(user) {
            throw CLIError.usage("--user must not be empty or contain control characters", command: "test")
        }
        let grant = try Commands.freshGrants([name], ctx: ctx)[0].1
        guard let login = user ?? grant.account else {
            throw CLIError("grant '\(name)' names no account", hint: "pass --user LOGIN")
        }
        guard OutputGrammar.isSASLUser(login) else {
            throw CLIError(
                "the user name \(login.debugDescription) contains control characters, which SASL cannot carry",
                hint: "pass the login with --user")
        }
        let tokenText = grant.accessToken ?? ""
        guard OutputGrammar.isBearerToken(tokenText) else {
            throw CLIError(
                "the access token of '\(name)' is not a bearer token SASL can carry (RFC 6750 b64token)",
                hint: "run 'vault refresh \(name)', or 'vault add \(name)' to authorize it again")
        }
        let token = try SecureBytes(copying: tokenText.utf8)
        var attempt = request
        attempt.user = login
        let result = try MailLogin.attempt(attempt, token: token)
        var report = MailTestReport(request: attempt, result: result, grantName: name, grant: grant)
        if result.outcome == .refused,
            result.mechanisms.isEmpty || result.mechanisms.contains(attempt.mechanism.rawValue)
        {
            report.provider = MailTestReport.providerCheck(
                Commands.withStoredEndpoints(grant, name: name, ctx: ctx), transport: ctx.network.transport)
        }
        let failure = report.failure
        if ctx.output.json {
            try ctx.output.printJSON(
                MailTestOutput(
                    mailProtocol: attempt.mailProtocol.rawValue, host: attempt.host, port: attempt.port,
                    security: attempt.security.rawValue, mechanism: attempt.mechanism.rawValue, user: login,
                    result: MailTestReport.word(result.outcome), loggedIn: result.outcome.loggedIn,
                    server: result.lines, mechanisms: result.mechanisms, challenge: result.challenge,
                    tokenAccepted: report.provider?.accepted, error: failure?.message))
        } else {
            for line in result.lines { ctx.output.out(Console.escaped(line)) }
        }
        if let failure { throw failure }
        ctx.output.info(
            "logged in to \(attempt.host):\(attempt.port) (\(attempt.mailProtocol.rawValue), \(attempt.security.rawValue)) as \(login) with \(attempt.mechanism.rawValue)"
        )
        return .ok
    }

    /// Host, port, TLS and mechanism from the options, all checked; the user is filled in later.
    func connection(_ mailProtocol: MailProtocol, caBundle: String?) throws -> MailLoginRequest {
        guard let host else { throw CLIError.usage("missing --host", command: "test") }
        guard OutputGrammar.isSASLHost(host) else {
            throw CLIError.usage(
                "--host must be a host name or an IP address ([...] for IPv6), not \(host.debugDescription)",
                command: "test")
        }
        let number = port?.number
        let bearer = (mechanism ?? .xoauth2).mechanism
        let chosen = [(tls, MailSecurity.tls), (starttls, .starttls), (plain, .plain)].filter(\.0).map(\.1)
        guard chosen.count <= 1 else {
            throw CLIError.usage("--tls, --starttls and --plain exclude each other", command: "test")
        }
        let security: MailSecurity
        if let one = chosen.first {
            security = one
        } else {
            // The ports' own conventions: IMAP 143 and SMTP 587/25 start plain and switch.
            switch mailProtocol {
            case .imap: security = number == 143 ? .starttls : .tls
            case .smtp: security = number == 465 ? .tls : .starttls
            }
        }
        if security == .plain && !URLPolicy.isLoopback(host) {
            throw CLIError(
                "--plain would send the token in clear text to \(host): it is allowed only to a loopback host",
                hint: "use --tls or --starttls", exitCode: .usage)
        }
        let defaultPort =
            switch (mailProtocol, security) {
            case (.imap, .tls): 993
            case (.imap, _): 143
            case (.smtp, .tls): 465
            case (.smtp, _): 587
            }
        return MailLoginRequest(
            mailProtocol: mailProtocol, host: host, port: number ?? defaultPort, security: security,
            mechanism: bearer, user: "",
            caBundle: caBundle)
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$host, $port, $tls, $starttls, $plain, $mechanism, $user] }
}

/// How `vault test` words the end of an attempt: the error for each
/// failure, with the remedies the server's answer points to.
struct MailTestReport {
    let request: MailLoginRequest
    let result: MailLoginResult
    let grantName: String
    let grant: Grant
    /// After a refused login: what the provider said of the same token.
    var provider: ProviderCheck? = nil

    /// What the provider's userinfo endpoint said of the token the server
    /// refused, as `vault check` asks it: a token the provider refuses
    /// too was revoked, whatever its scopes.
    struct ProviderCheck {
        /// The userinfo endpoint's HTTP status.
        let status: Int
        /// True for 2xx, false for 401, nil for anything else.
        var accepted: Bool? {
            switch status {
            case 200..<300: true
            case 401: false
            default: nil
            }
        }
    }

    /// Shows the grant's access token to its provider's userinfo endpoint;
    /// nil when the grant names none, or the request failed.
    static func providerCheck(_ grant: Grant, transport: any HTTPTransport) -> ProviderCheck? {
        guard grant.kind == .oauth2, let endpoint = grant.providerConfiguration?.userinfoEndpoint,
            let status = try? TokenRefresher.userinfoStatus(endpoint, grant: grant, transport: transport)
        else { return nil }
        return ProviderCheck(status: status)
    }

    /// The `result` word of `--json`.
    static func word(_ outcome: MailLoginResult.Outcome) -> String {
        switch outcome {
        case .loggedIn: "logged_in"
        case .refused: "refused"
        case .unreachable, .nothingListening, .silent: "unreachable"
        case .tls, .untrustedCertificate: "tls_failed"
        case .protocolError, .wrongProtocol: "protocol_error"
        case .failedAfterLogin: "failed_after_login"
        }
    }

    private var place: String { "\(request.host):\(request.port)" }

    /// What a server's own check of a token may refuse, besides scopes and
    /// the login: one that asks the provider (introspection) as its own
    /// client, or checks the audience, takes only the tokens meant for it.
    private let serverCheck = "the client or audience of tokens it takes"

    /// The protocol's own ports, for a hint to check the port.
    private var ports: String {
        switch request.mailProtocol {
        case .imap: "IMAP is on port 993 (TLS) or 143 (STARTTLS)"
        case .smtp: "SMTP submission is on port 587 (STARTTLS) or 465 (TLS)"
        }
    }

    /// The error to report, or nil when the login worked.
    var failure: CLIError? {
        switch result.outcome {
        case .loggedIn: return nil
        case .refused: return refused
        case .unreachable(let why):
            // A port that wants TLS first waits for a handshake that a
            // client expecting a greeting never starts.
            let hint =
                result.lines.isEmpty && request.security != .tls && why.contains("timeout")
                ? "the server said nothing: if this port wants TLS from the first byte (IMAP 993, SMTP 465), add --tls"
                : "try again later"
            return CLIError("cannot reach \(place): \(why)", hint: hint, exitCode: .transient)
        case .silent:
            return CLIError(
                "connected to \(place), and the server said nothing in \(Int(request.timeout)) s",
                hint: request.security != .tls
                    ? "if this port wants TLS from the first byte (IMAP 993, SMTP 465), add --tls"
                    : "check the port (\(ports))",
                exitCode: .transient)
        case .nothingListening:
            // A refused connection is most often a wrong port, rarely a
            // server that is down for a while.
            return CLIError(
                "nothing is listening at \(place) (the connection was refused)",
                hints: ["check the port (\(ports)); if it is right, the server is not running there"],
                exitCode: .transient)
        case .tls(let why):
            var hints: [String] = []
            if request.security == .starttls && why.contains("STARTTLS") {
                hints.append("use --tls with the server's TLS port (IMAP 993, SMTP 465)")
            } else {
                if request.security == .tls && result.lines.isEmpty {
                    hints.append("if this port starts in plain text (IMAP 143, SMTP 587 or 25), use --starttls")
                }
                hints.append(
                    "the certificate must be valid for \(request.host) and come from a CA this system trusts (SSL_CERT_FILE names another CA bundle)"
                )
            }
            return CLIError("TLS with \(place) failed: \(why)", hints: hints, exitCode: .transient)
        case .untrustedCertificate(let why):
            // The handshake reached the certificate: the port speaks TLS,
            // so --starttls is not the remedy.
            return CLIError(
                "TLS with \(place) failed: the server's certificate is not trusted: \(why)",
                hints: [
                    "if the server's certificate comes from a private CA (a company's, a test server's), name a bundle that holds that CA with SSL_CERT_FILE=CA.pem (it replaces the system's bundle); see docs/mail.md",
                    "otherwise check that --host is the name in the certificate and the server's certificate is current",
                ], exitCode: .transient)
        case .failedAfterLogin(let why):
            let said = result.afterLogin ?? why
            // An SMTP 4xx reply is the server's passing trouble.
            let transient = said.first == "4" || result.afterLogin == nil
            return CLIError(
                "logged in to \(place) as \(request.user) with \(request.mechanism.rawValue), then the server failed: \(said)",
                hint:
                    "the token works: what failed is the server's own (for SMTP submission, often its relay); try again later, or tell its administrator",
                exitCode: transient ? .transient : .failure)
        case .wrongProtocol(let spoken): return wrongProtocol(spoken)
        case .protocolError(let why):
            let said = result.refusal.map { " (it said: \($0))" } ?? ""
            return CLIError(
                "\(place) did not answer as an \(request.mailProtocol.rawValue.uppercased()) server should: \(why)\(said)",
                hint: "check the port: IMAP 993 (TLS) or 143, SMTP 587 or 465 (TLS)")
        }
    }

    /// A greeting of another protocol, or of none: the port is another
    /// service's. The greeting is quoted (escaped with the rest of the
    /// message) and the protocol's own ports are named.
    private func wrongProtocol(_ spoken: String?) -> CLIError {
        let asked = request.mailProtocol.rawValue.uppercased()
        let greeting = String((result.lines.first ?? "").prefix(200))
        var hints: [String] = []
        let message: String
        if let spoken {
            let article = spoken == "POP3" ? "a" : "an"
            message = "\(place) answered as \(article) \(spoken) server, not as \(asked): \"\(greeting)\""
            if spoken == "IMAP" || spoken == "SMTP" {
                // The same security: it is what reached the greeting.
                hints.append(
                    "this port is for 'vault test \(spoken.lowercased()) \(grantName) --host \(request.host) --port \(request.port) --\(request.security.rawValue)'; \(ports)"
                )
            } else {
                hints.append("check the port: \(ports)")
            }
        } else {
            message = "\(place) did not answer as an \(asked) server: \"\(greeting)\""
            hints.append("check the port: \(ports)")
        }
        return CLIError(message, hints: hints)
    }

    private var refused: CLIError {
        let mechanism = request.mechanism.rawValue
        let offered = result.mechanisms
        if !offered.isEmpty && !offered.contains(mechanism) {
            let other: BearerMechanism = request.mechanism == .xoauth2 ? .oauthbearer : .xoauth2
            let hint =
                offered.contains(other.rawValue)
                ? "try --mechanism \(other.rawValue.lowercased())"
                : "this server takes no OAuth token over \(request.mailProtocol.rawValue.uppercased())"
            return CLIError(
                "\(place) does not offer \(mechanism) (it offers \(offered.joined(separator: " ")))", hint: hint)
        }
        var message = "\(place) refused the \(mechanism) login of \(request.user)"
        if let line = result.refusal { message += ": \(line)" }
        if let challenge = result.challenge { message += " (challenge: \(challenge))" }
        var hints: [String] = []
        if provider?.accepted == false {
            hints.append(
                "the provider no longer accepts this access token either (its userinfo endpoint answered HTTP 401): it was revoked, or the account changed; the scopes and the login are not the cause"
            )
            hints.append(
                "run 'vault refresh \(grantName)' for a new token and test again; if the provider refuses the refresh too, run 'vault add \(grantName)'"
            )
            return CLIError(message, hints: hints)
        }
        // A challenge that names a scope the grant has rules the scopes out:
        // with a token the provider still takes, the login is what is left.
        let wanted = Self.scope(in: result.challenge)
        let accepted = provider?.accepted == true ? provider?.status : nil
        if let wanted, grant.scopes.contains(wanted) {
            let taken = accepted.map {
                "the provider still accepts the token (its userinfo endpoint answered HTTP \($0)), and "
            }
            hints.append(
                (taken ?? "")
                    + "the server asks for the scope \(wanted), which '\(grantName)' has: the scopes are not the cause"
                    + (taken == nil
                        ? "" : "; the login is, or the server's own check of the token (" + serverCheck + ")"))
            hints.append(loginHint ?? "see docs/mail.md; --user changes the login")
            return withRevocationHint(message, hints)
        }
        if let status = accepted {
            hints.append(
                "the provider still accepts the token (its userinfo endpoint answered HTTP \(status)): the server refused it for its scopes, the login, or its own check of the token ("
                    + serverCheck + ")"
            )
        }
        if let wanted {
            hints.append(
                "the server asks for the scope \(wanted), which '\(grantName)' lacks: run 'vault add \(grantName) --scope \(wanted)'"
            )
        } else {
            let scopes = grant.scopes.isEmpty ? "none recorded" : grant.scopes.joined(separator: " ")
            hints.append(
                "the token needs the provider's mail scope (Gmail: https://mail.google.com/; Microsoft: IMAP.AccessAsUser.All or SMTP.Send), and the login must be its account; '\(grantName)' has the scopes: \(scopes)"
            )
            hints.append("see docs/mail.md; --user changes the login, 'vault add \(grantName) --scope S' adds a scope")
        }
        if let account = grant.account, account != request.user { hints.append(differentLogin(account)) }
        return withRevocationHint(message, hints)
    }

    /// Some servers' logins are the account (Gmail, Microsoft), others' a
    /// short name (Dovecot's user ada for ada@example.com): a login given
    /// that differs may well be right, so the account is offered, not
    /// imposed; the account as the login gets the short name to try.
    private var loginHint: String? {
        if let account = grant.account, account != request.user { return differentLogin(account) }
        guard let short = Self.shortName(of: request.user) else { return nil }
        return
            "the login \(request.user) is a whole address; a server whose logins are short names wants the part before @: 'vault test \(request.mailProtocol.rawValue) \(grantName) --host \(request.host) --port \(request.port) --\(request.security.rawValue) --user \(short)'"
    }

    /// A login given with --user that is not the grant's account.
    private func differentLogin(_ account: String) -> String {
        "the login \(request.user) differs from the grant's account (\(account)): if this server expects the account as the login, test without --user, which logs in as \(account)"
    }

    /// The refusal, with the revocation named as a cause when the provider
    /// could not be asked.
    private func withRevocationHint(_ message: String, _ hints: [String]) -> CLIError {
        var hints = hints
        if provider == nil {
            hints.append(
                "a token the provider revoked is refused the same way: 'vault check \(grantName)' asks the provider, and renews the token if it must"
            )
        }
        return CLIError(message, hints: hints)
    }

    /// The part of an address before its last `@` (`ada` for
    /// `ada@example.com`): the login of a server whose logins are short
    /// names. Nil for a login that is no address.
    static func shortName(of login: String) -> String? {
        guard let at = login.lastIndex(of: "@"), at != login.startIndex else { return nil }
        return String(login[..<at])
    }

    /// The `scope` of an XOAUTH2 error challenge (Gmail's
    /// `{"status":"400","schemes":"Bearer","scope":"..."}`), when it is one
    /// scope token (RFC 6749 section 3.3's characters).
    static func scope(in challenge: String?) -> String? {
        guard let challenge, let value = try? JSONDecoder().decode(JSONValue.self, from: Data(challenge.utf8)),
            case .object(let fields) = value, case .string(let scope)? = fields["scope"], !scope.isEmpty,
            scope.unicodeScalars.allSatisfy({
                $0.value == 0x21 || (0x23...0x5b).contains($0.value) || (0x5d...0x7e).contains($0.value)
            })
        else { return nil }
        return scope
    }
}

extension Commands {
    /// `grant` with the endpoints its stored record names, when it was
    /// handed out by this vault's agent (which sends the token and what
    /// describes it, not the provider's configuration): the token then
    /// goes only where the grant's own record says. A grant from a
    /// forwarded agent (no vault here) stays as it came.
    static func withStoredEndpoints(_ grant: Grant, name: String, ctx: Context) -> Grant {
        guard grant.providerConfiguration == nil, let location = try? ctx.opener.location(),
            Vault.exists(at: location), let stored = try? ctx.opener.openVault().load(name)
        else { return grant }
        var checked = grant
        checked.providerConfiguration = stored.providerConfiguration
        return checked
    }
}
