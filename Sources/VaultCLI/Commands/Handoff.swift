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
            ("\(prefix)_TOKEN_TYPE", TokenOutput.standardType(grant.tokenType)),
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

/// Shell and file quoting for `vault env`; its cases are `--format`'s values.
enum EnvFormat: String, CaseIterable, OptionValue {
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
        var notRefreshed: [String: String] = [:]
        // Each name is asked of the agent, under its policy; only one it
        // cannot hand out this way (an OAuth 1.0a grant, an agent that is
        // locked or older) is taken from the vault opened here.
        for name in names {
            if let handed = try ctx.agents.grant(name, at: location, minimumValidity: Grant.freshnessMargin) {
                out.append((name, handed))
                continue
            }
            if vault == nil { vault = try ctx.opener.openVault() }
            let fresh = try handOutFresh(name, from: vault!, ctx: ctx)
            notRefreshed[name] = fresh.notRefreshedBecause
            out.append((name, fresh.grant))
        }
        for (name, grant) in out {
            warnIfShort(
                name, expiresAt: grant.expiresAt?.epochSeconds, minimum: Grant.freshnessMargin,
                notRefreshedBecause: notRefreshed[name], ctx: ctx)
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

    /// Says so on stderr when the access token handed out for `name` has
    /// less than `minimum` seconds left: it could not be refreshed now (the
    /// sync store away while another machine holds the grant, say) and the
    /// one it had is still valid, or the provider's tokens do not last that
    /// long; the reason, when the refresh made here was kept from it
    /// (`notRefreshedBecause`). Nothing for a token without expiry.
    static func warnIfShort(
        _ name: String, expiresAt: Int64?, minimum: Double, notRefreshedBecause reason: String? = nil, ctx: Context
    ) {
        guard let expiresAt else { return }
        let left = Double(expiresAt) - ctx.time.now().timeIntervalSince1970
        guard left < minimum else { return }
        let why =
            reason.map { "it could not be refreshed now: \($0)" }
            ?? "it could not be refreshed now, or the provider's tokens do not last that long"
        ctx.output.warn(
            "the access token of '\(name)' is valid for \(max(0, Int(left))) s more, less than the \(Int(minimum)) s "
                + "asked for: \(why)")
    }

    /// A fresh grant from a vault this command opened, noted in the audit log.
    static func handOut(
        _ name: String, from vault: Vault, minimumValidity: Double = Grant.freshnessMargin, force: Bool = false,
        ctx: Context
    ) throws -> Grant {
        try handOutFresh(name, from: vault, minimumValidity: minimumValidity, force: force, ctx: ctx).grant
    }

    /// `handOut`, with whether the grant was refreshed and, when it
    /// should have been and could not be now, why.
    static func handOutFresh(
        _ name: String, from vault: Vault, minimumValidity: Double = Grant.freshnessMargin, force: Bool = false,
        ctx: Context
    ) throws -> FreshGrant {
        do {
            let fresh = try ctx.network.refresher(vault).freshGrant(
                name, minimumValidity: minimumValidity, forceRefresh: force)
            ctx.agents.audit(name, at: vault.location, outcome: .allowed)
            return fresh
        } catch {
            ctx.agents.audit(name, at: vault.location, outcome: .failed, reason: error.code.rawValue)
            throw error
        }
    }

    /// The variables of grants `names`, named with `prefix` (`--prefix`) or each grant's own.
    static func variables(
        _ names: [String], prefix: VariablePrefix?, target: TokenTarget? = nil, ctx: Context
    ) throws -> [(String, String)] {
        guard !names.isEmpty else { throw CLIError.usage("missing NAME", command: ctx.command.name) }
        let validNames = try names.map { (n: String) throws -> String in try ctx.grantName(n) }
        if prefix != nil && names.count != 1 {
            throw CLIError.usage("--prefix works with one NAME", command: ctx.command.name)
        }
        var pairs: [(String, String)] = []
        for (name, grant) in try freshGrants(validNames, target: target, ctx: ctx) {
            let variables = GrantVariables(prefix: prefix?.text ?? GrantVariables.prefix(for: name), grant: grant).pairs
            // The C environment ends a value at NUL: refuse rather than hand out a cut value.
            if let bad = variables.first(where: { !OutputGrammar.isEnvironmentValue($0.1) }) {
                throw CLIError("\(bad.0) of '\(name)' contains a NUL byte, which no environment can carry")
            }
            pairs += variables
        }
        return pairs
    }

}
