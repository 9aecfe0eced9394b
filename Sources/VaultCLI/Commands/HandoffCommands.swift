internal import FoundationEssentials
internal import Glibc
internal import VaultAgent
internal import VaultCore
internal import VaultCrypto
internal import VaultHTTP
internal import VaultSync

/// The variables `env` and `exec` hand to programs for one grant.
struct GrantVariables {
    /// Name and value pairs, in a fixed order.
    let pairs: [(String, String)]

    /// `WORK_ACCESS_TOKEN`, ... for `grant` under `prefix`.
    init(prefix: String, grant: Grant) {
        var p: [(String, String)] = [
            ("\(prefix)_ACCESS_TOKEN", grant.accessToken ?? ""),
            ("\(prefix)_TOKEN_TYPE", grant.tokenType.map { $0.lowercased() == "bearer" ? "Bearer" : $0 } ?? "Bearer"),
        ]
        if let expiry = grant.expiresAt {
            p.append(("\(prefix)_TOKEN_EXPIRES_AT", String(expiry.epochSeconds)))
            p.append(("\(prefix)_TOKEN_EXPIRES", Format.timestamp(expiry)))
        }
        if let account = grant.account { p.append(("\(prefix)_ACCOUNT", account)) }
        p.append(("\(prefix)_SCOPES", grant.scopes.joined(separator: " ")))
        p.append(("\(prefix)_PROVIDER", grant.provider))
        pairs = p
    }

    /// The default prefix: the grant name in upper case, other characters as `_`.
    static func prefix(for name: String) -> String {
        var out = String(name.uppercased().map { ($0.isASCII && ($0.isLetter || $0.isNumber)) ? $0 : "_" })
        if out.first?.isNumber == true { out = "_" + out }
        return out
    }

    /// A prefix given with --prefix must make valid variable names.
    static func validate(prefix: String) -> Bool {
        guard let first = prefix.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic)
        else { return false }
        return prefix.unicodeScalars.allSatisfy {
            $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)))
        }
    }
}

/// Shell and file quoting for `vault env`.
enum EnvFormat: String {
    case sh, fish, dotenv, json

    func line(_ name: String, _ value: String) -> String {
        switch self {
        case .sh:
            // Single quotes keep everything literal; a ' closes, escapes and reopens.
            return "export \(name)='" + value.replacing("'", with: "'\\''") + "'"
        case .fish:
            // In fish single quotes only \\ and \' are special.
            return "set -gx \(name) '" + value.replacing("\\", with: "\\\\").replacing("'", with: "\\'") + "'"
        case .dotenv:
            return "\(name)=" + (EnvFormat.dotenvQuoted(value) ?? "")
        case .json:
            return ""  // printed as one object
        }
    }

    /// `value` quoted so that python-dotenv and Docker Compose's env_file
    /// both read it back unchanged, or nil when no quoting serves both.
    ///
    /// Single quotes are literal to Compose, whose only escape there is
    /// `\'`; python-dotenv also reads `\\` as one backslash, so a backslash
    /// before a backslash, a quote or the closing quote rules them out.
    /// Double quotes then, with `\\`, `\"`, `\n` and `\r`, which both
    /// decode; but both interpolate `$` there (Compose `$NAME` and `${NAME}`,
    /// python-dotenv `${NAME}`), and Compose documents no escape for it.
    /// python-dotenv expands `${NAME}` inside single quotes too: see
    /// `pythonDotenvExpands`.
    static func dotenvQuoted(_ value: String) -> String? {
        let scalars = Array(value.unicodeScalars)
        let backslashTrouble = scalars.indices.contains {
            scalars[$0] == "\\" && ($0 + 1 == scalars.count || scalars[$0 + 1] == "\\" || scalars[$0 + 1] == "'")
        }
        let lineBreak = value.unicodeScalars.contains { $0 == "\n" || $0 == "\r" }
        if !backslashTrouble && !lineBreak {
            return "'" + value.replacing("'", with: "\\'") + "'"
        }
        guard !value.contains("$") else { return nil }
        var escaped = ""
        for c in value.unicodeScalars {
            switch c {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            default: escaped.unicodeScalars.append(c)
            }
        }
        return "\"" + escaped + "\""
    }

    /// python-dotenv expands `${NAME}` in every value, quoted or not, and
    /// has no escape for it; only `interpolate=False` reads such a value back.
    static func pythonDotenvExpands(_ value: String) -> Bool {
        guard let start = value.firstRange(of: "${") else { return false }
        return value[start.upperBound...].contains("}")
    }
}

/// The request an OAuth 1.0a signature or a DPoP proof covers (`header`, `sign`).
struct SigningOptions: OptionGroup {
    @Option("method", value: "M", help: "OAuth 1.0a and DPoP: the request's HTTP method (default GET)")
    var method: String?
    @Option("url", value: "U", help: "OAuth 1.0a and DPoP: the request's URL, query included")
    var url: String?
    @Option("body-form", value: "F", help: "OAuth 1.0a: a form-encoded request body to sign, from file F")
    var bodyForm: String?

    /// Signs the request given by --method, --url and --body-form.
    func signature(_ grant: Grant, ctx: Context) throws -> [(String, String)] {
        guard let url else {
            throw CLIError.usage("an OAuth 1.0a signature needs --url", command: ctx.command.name)
        }
        var body: String? = nil
        if let file = bodyForm {
            let raw = try SecretFile.read(path: file)
            body = raw.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
        return try OAuth1.sign(
            method: method ?? "GET", url: url, bodyForm: body, credentials: grant.oauth1Credentials(),
            nonce: OAuth1.nonce(), timestamp: ctx.time.now().epochSeconds)
    }

    /// This group's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$method, $url, $bodyForm] }
}

extension Commands {
    /// Fresh grants for several names: from the forwarded agent when there
    /// is no vault here, else from this vault's agent (under its policy),
    /// else from the vault unlocked here. What the agents hand out carries
    /// the access token and what describes it, never a refresh token.
    static func freshGrants(_ names: [String], target: TokenTarget? = nil, ctx: Context) throws -> [(String, Grant)] {
        if let target { return try names.map { ($0, try narrowedGrant($0, target: target, ctx: ctx)) } }
        let location = try ctx.opener.location()
        if let forwarded = try ctx.agents.forwarded(for: location) {
            let claims = RequesterClaims.ofThisProcess()
            return try names.map { name in
                (name, try forwarded.token(name, minimumValidity: Grant.freshnessMargin, claims: claims))
            }
        }
        var vault: Vault?
        var out: [(String, Grant)] = []
        // Each name is asked of the agent, under its policy; only one it
        // cannot hand out this way (an OAuth 1.0a grant, an agent that is
        // locked or older) is taken from the vault opened here.
        for name in names {
            if let handed = try ctx.agents.grant(name, at: location, minimumValidity: Grant.freshnessMargin) {
                out.append((name, handed))
                continue
            }
            if vault == nil { vault = try ctx.opener.openVault() }
            out.append((name, try handOut(name, from: vault!, ctx: ctx)))
        }
        return out
    }

    /// The header fields for one request, made by an agent: the forwarded
    /// one when there is no vault here, else this vault's, under its
    /// policy. The agent signs a DPoP-bound grant's proof, so its key stays
    /// there. Nil when neither can (no agent, an older one, an OAuth 1.0a
    /// grant): the caller then makes them itself.
    static func agentAuthorization(_ name: String, method: String, url: String?, nonce: String?, ctx: Context)
        throws -> RequestAuthorization?
    {
        let location = try ctx.opener.location()
        do {
            if let forwarded = try ctx.agents.forwarded(for: location) {
                do {
                    return try forwarded.authorization(
                        name, method: method, url: url, nonce: nonce, minimumValidity: Grant.freshnessMargin,
                        claims: RequesterClaims.ofThisProcess())
                } catch {
                    // An agent older than operation 13: operation 11 is asked instead.
                    guard error.code == .unsupported else { throw error }
                    return nil
                }
            }
            return try ctx.agents.authorization(
                name, method: method, url: url, nonce: nonce, at: location, minimumValidity: Grant.freshnessMargin)
        } catch let error as VaultError {
            // The one request field the agent can miss: a bound grant's URL.
            guard error.remedy == .giveRequestURL else { throw error }
            throw CLIError(error.reason, hint: Remedies.hint(.giveRequestURL), exitCode: .usage)
        }
    }

    /// A fresh grant from a vault this command opened, noted in the audit log.
    static func handOut(
        _ name: String, from vault: Vault, minimumValidity: Double = Grant.freshnessMargin, force: Bool = false,
        ctx: Context
    ) throws -> Grant {
        do {
            let fresh = try ctx.network.refresher(vault).freshGrant(
                name, minimumValidity: minimumValidity, forceRefresh: force)
            ctx.agents.audit(name, at: vault.location, outcome: .allowed)
            return fresh.grant
        } catch {
            ctx.agents.audit(name, at: vault.location, outcome: .failed, reason: error.code.rawValue)
            throw error
        }
    }

    /// The variables of grants `names`, named with `prefix` (`--prefix`) or each grant's own.
    static func variables(_ names: [String], prefix: String?, target: TokenTarget? = nil, ctx: Context) throws
        -> [(String, String)]
    {
        guard !names.isEmpty else { throw CLIError.usage("missing NAME", command: ctx.command.name) }
        let validNames = try names.map { (n: String) throws -> String in try ctx.grantName(n) }
        if let prefix {
            guard names.count == 1 else {
                throw CLIError.usage("--prefix works with one NAME", command: ctx.command.name)
            }
            guard GrantVariables.validate(prefix: prefix) else {
                throw CLIError.usage(
                    "--prefix must be letters, digits and _, not starting with a digit", command: ctx.command.name)
            }
        }
        var pairs: [(String, String)] = []
        for (name, grant) in try freshGrants(validNames, target: target, ctx: ctx) {
            let variables = GrantVariables(prefix: prefix ?? GrantVariables.prefix(for: name), grant: grant).pairs
            // The C environment ends a value at NUL: refuse rather than hand out a cut value.
            if let bad = variables.first(where: { !OutputGrammar.isEnvironmentValue($0.1) }) {
                throw CLIError("\(bad.0) of '\(name)' contains a NUL byte, which no environment can carry")
            }
            pairs += variables
        }
        return pairs
    }

}

/// `vault env`.
struct EnvCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "env",
        abstract: "Print shell lines that export fresh tokens and their metadata.",
        usage: "env NAME... [{format:choices}] [{prefix}] [{resource}] [{audience}] [{scope}] [{exchange}]",
        arguments: [("NAME", "one or more grants")],
        discussion: """
            For a grant named work: WORK_ACCESS_TOKEN, WORK_TOKEN_TYPE, WORK_TOKEN_EXPIRES_AT
            (seconds since the epoch), WORK_TOKEN_EXPIRES (ISO 8601), WORK_ACCOUNT, WORK_SCOPES
            and WORK_PROVIDER. Tokens are refreshed first when needed. Values are quoted for the
            format, so any character is safe. dotenv quotes so that python-dotenv and Docker
            Compose's env_file read the same bytes back; python-dotenv alone expands ${NAME} even
            in single quotes, so vault warns about such a value (read it with interpolate=False,
            or use --format json). A value no quoting serves for both is refused. --resource,
            --audience, --scope and --exchange hand out a narrowed token, as for 'vault token'.
            """,
        examples: [
            "eval \"$(vault env work)\"", "vault env work --format fish | source",
            "vault env work --format dotenv > .env",
        ]
    )

    @Option(
        "format", value: "FORMAT", help: "sh (default), fish, dotenv or json",
        choices: ["sh", "fish", "dotenv", "json"])
    var format: String?
    @Option("prefix", value: "PREFIX", help: "variable name prefix (default: the grant name in upper case)")
    var prefix: String?
    let narrowing = TargetOptions()

    /// NAME..., grants.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        .grant
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let formatName = ctx.output.json ? "json" : (format ?? "sh")
        guard let format = EnvFormat(rawValue: formatName) else {
            throw CLIError.usage("--format must be sh, fish, dotenv or json", command: "env")
        }
        let pairs = try Commands.variables(
            ctx.arguments.positionals, prefix: prefix, target: try narrowing.target(ctx), ctx: ctx)
        if format == .dotenv {
            for (name, value) in pairs where EnvFormat.dotenvQuoted(value) == nil {
                throw CLIError(
                    "\(name) holds '$' with a line break or a backslash before a backslash or quote: no dotenv quoting reads back the same in both python-dotenv and Docker Compose",
                    hint: "use --format json, sh or fish, or 'vault exec'")
            }
            for (name, value) in pairs where EnvFormat.pythonDotenvExpands(value) {
                ctx.output.warn(
                    "\(name) holds '${...}', which python-dotenv expands unless read with interpolate=False (Docker Compose reads it as is)"
                )
            }
        }
        if format == .json {
            var object: [String: String] = [:]
            for (k, v) in pairs { object[k] = v }
            try ctx.output.printJSON(object)
        } else {
            var text = pairs.map { format.line($0.0, $0.1) }.joined(separator: "\n") + "\n"
            var bytes = Array(text.utf8)
            Console.writeAll(&bytes, fd: 1)
            text = ""
        }
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$format, $prefix] + narrowing.declarations }
}

/// `vault exec`.
struct ExecCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "exec",
        abstract: "Run a command with fresh tokens in its environment.",
        usage: "exec NAME... [{prefix}] [{resource}] [{audience}] [{scope}] [{exchange}] -- COMMAND [ARGUMENT...]",
        arguments: [("NAME", "one or more grants"), ("COMMAND", "the program to run, found in PATH")],
        discussion: """
            Sets the variables 'vault env' prints, then replaces itself with COMMAND: its stdin,
            stdout and stderr are yours, signals reach it directly, and its exit status is vault's.
            Tokens are never on any command line. The command gets back the umask and core-dump
            limit vault tightened for itself. --resource, --audience, --scope and --exchange hand
            out a narrowed token, as for 'vault token'.
            """,
        examples: [
            #"vault exec work -- sh -c 'curl -H "Authorization: Bearer $WORK_ACCESS_TOKEN" https://api.example.com/'"#,
            "vault exec github --prefix GH -- ./deploy.sh",
        ],
        printsJSON: false
    )

    @Option("prefix", value: "PREFIX", help: "variable name prefix (default: the grant name in upper case)")
    var prefix: String?
    let narrowing = TargetOptions()

    /// NAME..., grants.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        .grant
    }

    func run(_ ctx: Context) throws -> ExitCode {
        guard let command = ctx.arguments.trailing, let program = command.first else {
            throw CLIError.usage("missing '-- COMMAND'", command: "exec")
        }
        let pairs = try Commands.variables(
            ctx.arguments.positionals, prefix: prefix, target: try narrowing.target(ctx), ctx: ctx)
        for (k, v) in pairs { setenv(k, v, 1) }
        if let caller = CLI.callerSettings {
            umask(caller.umask)
            var limit = caller.coreLimit
            setrlimit(Int32(RLIMIT_CORE.rawValue), &limit)
        }
        let argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        execvp(program, argv)
        let reason = String(cString: strerror(errno))
        throw CLIError(
            "cannot run '\(program)': \(reason.lowercased())", exitCode: errno == ENOENT ? .usage : .failure)
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$prefix] + narrowing.declarations }
}

/// `vault header`.
struct HeaderCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "header",
        abstract: "Print an Authorization header with a fresh token (or an OAuth 1.0a signature).",
        usage:
            "header NAME [{method} {url} [{body-form}]] [{dpop-nonce}] [{resource}] [{audience}] [{scope}] "
            + "[{exchange}]",
        arguments: [("NAME", "the grant")],
        discussion: """
            Prints 'Authorization: Bearer TOKEN', ready for curl -H @-. For an OAuth 1.0a grant it
            prints a signed 'Authorization: OAuth ...' header for the request given by --method,
            --url and --body-form (RFC 5849, with a fresh nonce and timestamp). For a grant bound
            to a DPoP key (vault add --dpop) it prints 'Authorization: DPoP TOKEN' and a 'DPoP:'
            proof for the request given by --method and --url (RFC 9449, with the token's hash);
            when the server answers 401 with a DPoP-Nonce header, ask again with --dpop-nonce.
            --resource, --audience, --scope and --exchange put a narrowed token in it, as for
            'vault token'.
            """,
        examples: [
            "vault header work | curl -H @- https://api.example.com/",
            "vault header flickr --url 'https://api.flickr.com/services/rest?method=flickr.test.login'",
            "vault header bound --method POST --url https://api.example.com/items | curl -H @- -d @item.json https://api.example.com/items",
        ],
        printsJSON: false
    )

    let signing = SigningOptions()
    @Option("dpop-nonce", value: "N", help: "DPoP: the nonce the server gave in its DPoP-Nonce header")
    var dpopNonce: String?
    let narrowing = TargetOptions()

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        // What the options say is checked before a refresh spends anything.
        try checkRequestOptions()
        let target = try narrowing.target(ctx)
        if target == nil, signing.bodyForm == nil,
            let made = try Commands.agentAuthorization(
                name, method: signing.method ?? "GET", url: signing.url, nonce: dpopNonce, ctx: ctx)
        {
            try printFields(name, made)
            return .ok
        }
        let grant = try Commands.freshGrants([name], target: target, ctx: ctx)[0].1
        if dpopNonce != nil && !grant.accessTokenIsDPoPBound {
            throw CLIError.usage("--dpop-nonce is for an access token bound to a DPoP key", command: "header")
        }
        let line: String
        if grant.kind == .oauth1 {
            line = "Authorization: " + OAuth1.authorizationHeader(try signing.signature(grant, ctx: ctx))
        } else if grant.accessTokenIsDPoPBound {
            line = try dpopLines(name, grant, ctx: ctx)
        } else {
            line = "Authorization: Bearer \(try headerToken(name, grant))"
        }
        var bytes = Array((line + "\n").utf8)
        Console.writeAll(&bytes, fd: 1)
        return .ok
    }

    /// Prints the fields an agent made (operation 13), under the rules a
    /// header made here follows.
    func printFields(_ name: String, _ made: RequestAuthorization) throws {
        if dpopNonce != nil && !made.dpopBound {
            throw CLIError.usage("--dpop-nonce is for an access token bound to a DPoP key", command: "header")
        }
        if made.dpopBound { try checkBoundTarget(signing.url ?? "") }
        // `Authorization: SCHEME TOKEN` and a proof: visible ASCII, one space after the scheme.
        let names = made.fields.map { $0.name.lowercased() }
        let wellFormed = made.fields.allSatisfy { field in
            let words = field.value.split(separator: " ", omittingEmptySubsequences: false)
            return words.count == (field.name.lowercased() == "authorization" ? 2 : 1)
                && words.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { (0x21...0x7e).contains($0) } }
        }
        guard names == (made.dpopBound ? ["authorization", "dpop"] : ["authorization"]), wellFormed else {
            throw CLIError(
                "the agent's header fields for '\(name)' are not ones an HTTP request can carry",
                hint: "run 'vault refresh \(name)', or 'vault add \(name)' to authorize it again")
        }
        var bytes = Array((made.fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n") + "\n").utf8)
        Console.writeAll(&bytes, fd: 1)
    }

    /// A DPoP-bound token travels with its proof over https, or plain http
    /// to this machine only.
    func checkBoundTarget(_ url: String) throws {
        guard case .success = Result(catching: { () throws(HTTPError) in try URLPolicy.check(url) }) else {
            throw CLIError.usage(
                "a DPoP-bound token goes to an https URL (or plain http to this machine only)", command: "header")
        }
    }

    /// The grammar of --url, --method and --dpop-nonce, which a signature
    /// or a DPoP proof covers.
    func checkRequestOptions() throws {
        if let url = signing.url, !DPoPKey.isRequestURL(url) {
            throw CLIError.usage(
                "--url must be an absolute http or https URL of at most 8 KiB of printable ASCII, without spaces "
                    + "or backslashes (percent-encode other characters)", command: "header")
        }
        if let method = signing.method, !DPoPKey.isMethod(method) {
            throw CLIError.usage("--method must be an HTTP method in capitals (GET, POST, ...)", command: "header")
        }
        if let nonce = dpopNonce, !DPoPKey.isNonce(nonce) {
            throw CLIError.usage(
                "--dpop-nonce is not a DPoP nonce (1 to 1024 printable ASCII characters without spaces, quotes "
                    + "or backslashes)",
                command: "header")
        }
    }

    /// The access token, refused when it would break the header line.
    func headerToken(_ name: String, _ grant: Grant) throws -> String {
        let token = grant.accessToken ?? ""
        // A header value ends at a line break: refuse what would start another header.
        guard !token.isEmpty, token.unicodeScalars.allSatisfy({ (0x21...0x7e).contains($0.value) }) else {
            throw CLIError(
                "the access token of '\(name)' has characters an HTTP header cannot carry",
                hint: "run 'vault refresh \(name)', or 'vault add \(name)' to authorize it again")
        }
        return token
    }

    /// `Authorization: DPoP TOKEN` and the `DPoP` proof for --method on --url.
    func dpopLines(_ name: String, _ grant: Grant, ctx: Context) throws -> String {
        guard let url = signing.url else {
            throw CLIError.usage(
                "'\(name)' is bound to a DPoP key: its proof is for one request, given by --url (and --method)",
                command: "header")
        }
        guard signing.bodyForm == nil else {
            throw CLIError.usage(
                "--body-form is for OAuth 1.0a; a DPoP proof does not cover the body", command: "header")
        }
        try checkBoundTarget(url)
        _ = try headerToken(name, grant)
        let headers = try grant.authorizationHeaders(
            method: signing.method ?? "GET", url: url, nonce: dpopNonce, at: ctx.time.now())
        return headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { signing.declarations + [$dpopNonce] + narrowing.declarations }
}

/// `vault sign`.
struct SignCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "sign",
        abstract: "Print a URL signed with an OAuth 1.0a grant (query-string signing).",
        usage: "sign NAME {url} [{method}] [{body-form}]",
        arguments: [("NAME", "an OAuth 1.0a grant")],
        discussion: "Adds the protocol parameters and the signature to the URL's query (RFC 5849 section 3.5.3).",
        examples: ["curl \"$(vault sign trello --url 'https://api.trello.com/1/members/me')\""],
        printsJSON: false
    )

    let signing = SigningOptions()

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        let grant = try Commands.freshGrants([name], ctx: ctx)[0].1
        let params = try signing.signature(grant, ctx: ctx)
        var bytes = Array((OAuth1.signedURL(signing.url ?? "", params) + "\n").utf8)
        Console.writeAll(&bytes, fd: 1)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { signing.declarations }
}

/// `vault xoauth2`.
struct XOAuth2Command: VaultCommand {
    static let configuration = CommandConfiguration(
        name: "xoauth2",
        abstract: "Print the SASL XOAUTH2 (or OAUTHBEARER) response for IMAP and SMTP.",
        usage: "xoauth2 NAME [{base64}] [{user}] [{oauthbearer} [{host}] [{port}]]",
        arguments: [("NAME", "the grant")],
        discussion: """
            XOAUTH2: user=USER^Aauth=Bearer TOKEN^A^A. OAUTHBEARER: n,a=USER,^A[host=HOST^A]
            [port=PORT^A]auth=Bearer TOKEN^A^A. Mail clients usually want --base64; some (msmtp's
            passwordeval with auth oauthbearer) want only the token: use 'vault token'.
            See docs/mail.md for msmtp, mutt, mbsync, offlineimap and aerc.
            """,
        examples: [
            "vault xoauth2 gmail --base64", "vault xoauth2 work --oauthbearer --host imap.example.com --port 993",
        ],
        printsJSON: false
    )

    @Flag("base64", help: "print it base64-encoded, as sent on the wire")
    var base64: Bool
    @Option("user", value: "USER", help: "the login (default: the grant's account)")
    var user: String?
    @Flag("oauthbearer", help: "RFC 7628 OAUTHBEARER instead of XOAUTH2")
    var oauthbearer: Bool
    @Option("host", value: "HOST", help: "OAUTHBEARER: the server's host name")
    var host: String?
    @Option("port", value: "PORT", help: "OAUTHBEARER: the server's port")
    var port: String?

    /// NAME, a grant.
    static func argument(after positionals: [String]) -> CompletionCandidates.Argument {
        positionals.isEmpty ? .grant : .nothing
    }

    func run(_ ctx: Context) throws -> ExitCode {
        let name = try ctx.grantName(ctx.positionals("NAME")[0])
        // OAUTHBEARER's host and port fields, checked before any token is fetched.
        var kv = ""
        if let host = host {
            guard OutputGrammar.isSASLHost(host) else {
                throw CLIError.usage(
                    "--host must be a host name or an IP address, not \(host.debugDescription)", command: "xoauth2")
            }
            kv += "host=\(host)\u{1}"
        }
        if let port = port {
            guard OutputGrammar.isSASLPort(port) else {
                throw CLIError.usage("--port must be a number from 1 to 65535", command: "xoauth2")
            }
            kv += "port=\(port)\u{1}"
        }
        let grant = try Commands.freshGrants([name], ctx: ctx)[0].1
        guard let user = user ?? grant.account else {
            throw CLIError("grant '\(name)' names no account", hint: "pass --user LOGIN")
        }
        let token = grant.accessToken ?? ""
        // Every field is checked against the SASL grammar: a ^A or a line
        // break in an account from an ID token would add fields of its own.
        guard OutputGrammar.isSASLUser(user) else {
            throw CLIError(
                "the user name \(user.debugDescription) contains control characters, which SASL cannot carry",
                hint: "pass the login with --user")
        }
        guard OutputGrammar.isBearerToken(token) else {
            throw CLIError(
                "the access token of '\(name)' is not a bearer token SASL can carry (RFC 6750 b64token)",
                hint: "run 'vault refresh \(name)', or 'vault add \(name)' to authorize it again")
        }
        let response: String
        if oauthbearer {
            // RFC 7628 section 3.1; the authzid in the GS2 header escapes , and =.
            let authzid = user.replacing("=", with: "=3D").replacing(",", with: "=2C")
            response = "n,a=\(authzid),\u{1}\(kv)auth=Bearer \(token)\u{1}\u{1}"
        } else {
            response = "user=\(user)\u{1}auth=Bearer \(token)\u{1}\u{1}"
        }
        var bytes =
            base64
            ? Array((Base64.encodeString(Array(response.utf8), .standard) + "\n").utf8) : Array(response.utf8)
        Console.writeAll(&bytes, fd: 1)
        return .ok
    }

    /// This command's options in the order they are declared: found without
    /// reflection, checked against the declarations by `CommandDeclarationTests`.
    var declarations: [any OptionDeclaration] { [$base64, $user, $oauthbearer, $host, $port] }
}
