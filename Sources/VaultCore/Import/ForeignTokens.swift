package import FoundationEssentials
internal import Glibc
package import VaultCrypto

/// Token files of the tools people come to vault from, each read as its
/// own documentation describes it and turned into vault's import JSON
/// (an OAuth token response plus `provider`, `account` and, where the
/// file carries the client, `provider_config.client_id`/`client_secret`).
/// What makes each grant refreshable is said in docs/cli.md.
package enum ForeignTokens {
    /// The tools `vault import --from` reads.
    package enum Tool: String, CaseIterable, Sendable {
        /// gcloud's application default credentials (`type: authorized_user`).
        case gcloud
        /// One remote's `token = {json}` in rclone.conf.
        case rclone
        /// gh's hosts.yml (`oauth_token` per host).
        case gh
        /// mutt_oauth2.py's token file (JSON, usually kept GPG-encrypted).
        case muttOAuth2 = "mutt_oauth2"
    }

    /// What a foreign file gave: vault's import JSON, and whether the file
    /// named the client its tokens were issued to.
    package struct Converted {
        package var object: [String: JSONValue]
        package var clientFromFile: Bool
    }

    /// Converts `input` (the tool's file) to vault's import JSON. `section`
    /// picks rclone's remote or gh's host.
    package static func convert(_ tool: Tool, _ input: SecureBytes, section: String?, now: Date) throws(VaultError)
        -> Converted
    {
        let text = input.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        switch tool {
        case .gcloud: return try gcloud(text)
        case .rclone: return try rclone(text, remote: section)
        case .gh: return try gh(text, host: section ?? "github.com")
        case .muttOAuth2: return try mutt(text, now: now)
        }
    }

    // MARK: gcloud

    /// `gcloud auth application-default login` writes
    /// `{"type": "authorized_user", "client_id", "client_secret", "refresh_token", ...}`:
    /// gcloud's own client and a refresh token, no access token.
    static func gcloud(_ text: String) throws(VaultError) -> Converted {
        let o = try object(text, what: "the gcloud credentials")
        guard o["type"] == .string("authorized_user") else {
            throw VaultError(
                .invalidInput, "the gcloud credentials are not of type 'authorized_user'",
                remedy: .serviceAccountKeyIsNoGrant)
        }
        guard case .string(let refresh)? = o["refresh_token"], case .string(let id)? = o["client_id"],
            case .string(let secret)? = o["client_secret"]
        else {
            throw VaultError(.invalidInput, "the gcloud credentials lack client_id, client_secret or refresh_token")
        }
        var config: [String: JSONValue] = ["client_id": .string(id), "client_secret": .string(secret)]
        if case .string(let uri)? = o["token_uri"] { config["token_endpoint"] = .string(uri) }
        var out: [String: JSONValue] = [
            "provider": .string("google"), "refresh_token": .string(refresh), "provider_config": .object(config),
        ]
        if case .string(let account)? = o["account"], !account.isEmpty { out["account"] = .string(account) }
        return Converted(object: out, clientFromFile: true)
    }

    // MARK: rclone

    /// rclone.conf is INI: `[remote]`, then `key = value` lines; an OAuth
    /// remote keeps `token = {"access_token", "token_type", "refresh_token",
    /// "expiry": RFC 3339}` and, when the user registered their own,
    /// `client_id` and `client_secret`.
    static func rclone(_ text: String, remote: String?) throws(VaultError) -> Converted {
        var sections: [(String, [String: String])] = []
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = trim(raw)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") && line.hasSuffix("]") {
                sections.append((String(line.dropFirst().dropLast()), [:]))
            } else if let eq = line.firstIndex(of: "="), !sections.isEmpty {
                let key = trim(line[..<eq])
                let value = trim(line[line.index(after: eq)...])
                sections[sections.count - 1].1[key] = value
            }
        }
        let withTokens = sections.filter { $0.1["token"] != nil }
        let chosen: (String, [String: String])
        if let remote {
            guard let found = sections.first(where: { $0.0 == remote }) else {
                throw VaultError(
                    .notFound, "rclone.conf has no remote '\(remote)'",
                    remedy: .sectionsWithTokens(withTokens.map(\.0)))
            }
            chosen = found
        } else {
            guard withTokens.count == 1 else {
                throw VaultError(
                    .invalidInput,
                    withTokens.isEmpty
                        ? "rclone.conf has no remote with a token" : "rclone.conf has several remotes with a token",
                    remedy: withTokens.isEmpty ? nil : .chooseSection(tool: "rclone", among: withTokens.map(\.0)))
            }
            chosen = withTokens[0]
        }
        guard let tokenJSON = chosen.1["token"] else {
            throw VaultError(.invalidInput, "rclone remote '\(chosen.0)' has no token")
        }
        let token = try object(tokenJSON, what: "rclone remote '\(chosen.0)''s token")
        var out: [String: JSONValue] = [:]
        for key in ["access_token", "refresh_token", "token_type"] { out[key] = token[key] }
        if case .string(let expiry)? = token["expiry"], !expiry.hasPrefix("0001-01-01") {
            guard let date = Timestamps.rfc3339(expiry) else {
                throw VaultError(.invalidInput, "rclone remote '\(chosen.0)''s token has an unreadable expiry")
            }
            out["expires_at"] = .number(Double(date.epochSeconds))
        }
        // rclone's backends by their OAuth provider; others keep rclone's type as the name.
        let type = chosen.1["type"] ?? ""
        let providers = [
            "drive": "google", "google cloud storage": "google", "gphotos": "google", "onedrive": "microsoft",
        ]
        out["provider"] = .string(providers[type] ?? (type.isEmpty ? "rclone" : type))
        var config: [String: JSONValue] = [:]
        if let id = chosen.1["client_id"], !id.isEmpty { config["client_id"] = .string(id) }
        if let secret = chosen.1["client_secret"], !secret.isEmpty { config["client_secret"] = .string(secret) }
        if let url = chosen.1["token_url"], !url.isEmpty { config["token_endpoint"] = .string(url) }
        if !config.isEmpty { out["provider_config"] = .object(config) }
        return Converted(object: out, clientFromFile: config["client_id"] != nil)
    }

    // MARK: gh

    /// gh's hosts.yml: a mapping of hosts, each with `oauth_token` (older gh),
    /// or `user` and `users: {NAME: {oauth_token}}` (gh 2.40 and later, when
    /// the token is not in the system keyring). OAuth app tokens from gh do
    /// not expire and have no refresh token.
    static func gh(_ text: String, host: String) throws(VaultError) -> Converted {
        let doc = SimpleYAML.parse(text)
        guard doc.keys.contains(where: { $0.first == host }) else {
            let hosts = Set(doc.keys.compactMap(\.first)).sorted()
            throw VaultError(
                .notFound, "hosts.yml has no host '\(host)'",
                remedy: hosts.isEmpty ? nil : .chooseSection(tool: "gh", among: hosts))
        }
        let user = doc[[host, "user"]]
        let token = doc[[host, "oauth_token"]] ?? user.flatMap { doc[[host, "users", $0, "oauth_token"]] }
        guard let token, !token.isEmpty else {
            throw VaultError(
                .invalidInput, "hosts.yml keeps no token for '\(host)'",
                remedy: .ghTokenInKeyring)
        }
        var out: [String: JSONValue] = [
            "provider": .string("github"), "access_token": .string(token), "token_type": .string("bearer"),
        ]
        if let user { out["account"] = .string(user) }
        return Converted(object: out, clientFromFile: false)
    }

    // MARK: mutt_oauth2.py

    /// mutt_oauth2.py's token file: `registration` (google, microsoft),
    /// `email`, `access_token`, `access_token_expiration` (local time,
    /// ISO 8601 without offset), `refresh_token`; newer copies also keep
    /// `client_id` and `client_secret` (older ones keep them in the script).
    static func mutt(_ text: String, now: Date) throws(VaultError) -> Converted {
        let o = try object(text, what: "the mutt_oauth2.py token file")
        guard case .string(let registration)? = o["registration"], !registration.isEmpty else {
            throw VaultError(.invalidInput, "the mutt_oauth2.py token file has no 'registration'")
        }
        var out: [String: JSONValue] = ["provider": .string(registration)]
        for key in ["access_token", "refresh_token"] {
            if case .string(let s)? = o[key], !s.isEmpty { out[key] = .string(s) }
        }
        if case .string(let email)? = o["email"], !email.isEmpty { out["account"] = .string(email) }
        if case .string(let expiry)? = o["access_token_expiration"], !expiry.isEmpty {
            guard let date = Timestamps.localISO8601(expiry) else {
                throw VaultError(
                    .invalidInput, "the mutt_oauth2.py token file has an unreadable access_token_expiration")
            }
            out["expires_at"] = .number(Double(date.epochSeconds))
        } else if out["access_token"] != nil {
            // No expiry known: treat the access token as spent, so a refresh comes first.
            out["expires_at"] = .number(Double(now.epochSeconds - 1))
        }
        var config: [String: JSONValue] = [:]
        if case .string(let id)? = o["client_id"], !id.isEmpty { config["client_id"] = .string(id) }
        if case .string(let s)? = o["client_secret"], !s.isEmpty { config["client_secret"] = .string(s) }
        if !config.isEmpty { out["provider_config"] = .object(config) }
        return Converted(object: out, clientFromFile: config["client_id"] != nil)
    }

    // MARK: Helpers

    /// `s` without spaces, tabs and carriage returns at either end.
    static func trim(_ s: Substring) -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" }
        return String(s.drop(while: blank).reversed().drop(while: blank).reversed())
    }

    static func object(_ text: String, what: String) throws(VaultError) -> [String: JSONValue] {
        guard case .object(let o)? = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)) else {
            throw VaultError(.invalidInput, "\(what) is not a JSON object")
        }
        return o
    }
}

/// The few timestamp forms other tools write.
enum Timestamps {
    /// RFC 3339 (Go's time.Time in JSON): `2024-05-01T12:00:00.123456789+02:00` or `...Z`.
    static func rfc3339(_ s: String) -> Date? {
        guard let (seconds, rest) = civil(s) else { return nil }
        if rest == "Z" || rest == "z" { return Date(epochSeconds: seconds) }
        let b = Array(rest.utf8)
        guard b.count == 6, b[0] == 0x2b || b[0] == 0x2d, b[3] == 0x3a,
            let h = Int64(String(decoding: b[1...2], as: UTF8.self)),
            let m = Int64(String(decoding: b[4...5], as: UTF8.self)), h < 24, m < 60
        else { return nil }
        let offset = (h * 3600 + m * 60) * (b[0] == 0x2b ? 1 : -1)
        return Date(epochSeconds: seconds - offset)
    }

    /// Python's `datetime.isoformat()` of a naive local time: `2024-05-01T12:00:00.123456`.
    static func localISO8601(_ s: String) -> Date? {
        guard let (asUTC, rest) = civil(s), rest.isEmpty else { return nil }
        var t = time_t(asUTC)
        var utc = tm()
        guard gmtime_r(&t, &utc) != nil else { return nil }
        utc.tm_isdst = -1
        let local = mktime(&utc)
        guard local != -1 else { return nil }
        return Date(epochSeconds: Int64(local))
    }

    /// `YYYY-MM-DDTHH:MM:SS[.fraction]` as seconds since the epoch in UTC,
    /// and what follows (the offset).
    static func civil(_ s: String) -> (Int64, Substring)? {
        let b = Array(s.utf8)
        guard b.count >= 19, b[4] == 0x2d, b[7] == 0x2d, b[10] == 0x54 || b[10] == 0x20, b[13] == 0x3a,
            b[16] == 0x3a
        else { return nil }
        func n(_ r: Range<Int>) -> Int64? {
            guard b[r].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int64(String(decoding: b[r], as: UTF8.self))
        }
        guard let y = n(0..<4), let mo = n(5..<7), let d = n(8..<10), let h = n(11..<13), let mi = n(14..<16),
            let se = n(17..<19), (1...12).contains(mo), (1...31).contains(d), h < 24, mi < 60, se < 61
        else { return nil }
        var i = 19
        if i < b.count && b[i] == 0x2e {
            i += 1
            while i < b.count && b[i] >= 0x30 && b[i] <= 0x39 { i += 1 }
        }
        // Days from the civil date (Howard Hinnant's algorithm).
        let yy = mo <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        let rest = String(decoding: b[i...], as: UTF8.self)
        return (days * 86400 + h * 3600 + mi * 60 + se, Substring(rest))
    }
}

/// Just enough YAML for gh's hosts.yml: nested mappings by indentation,
/// `key: value` scalars, plain or quoted. Keys are paths from the top.
enum SimpleYAML {
    static func parse(_ text: String) -> [[String]: String] {
        var out: [[String]: String] = [:]
        var stack: [(indent: Int, key: String)] = []
        for raw in text.split(separator: "\n") {
            let line = raw.hasSuffix("\r") ? raw.dropLast() : raw
            let indent = line.prefix { $0 == " " }.count
            let body = line.dropFirst(indent)
            if body.isEmpty || body.hasPrefix("#") || body.hasPrefix("-") { continue }
            guard let colon = body.firstIndex(of: ":") else { continue }
            let key = unquote(ForeignTokens.trim(body[..<colon]))
            let value = ForeignTokens.trim(body[body.index(after: colon)...])
            while let last = stack.last, last.indent >= indent { stack.removeLast() }
            let path = stack.map(\.key) + [key]
            if value.isEmpty {
                stack.append((indent, key))
            } else {
                out[path] = unquote(value)
            }
        }
        return out
    }

    static func unquote(_ s: String) -> String {
        if s.count >= 2, let f = s.first, f == "\"" || f == "'", s.last == f { return String(s.dropFirst().dropLast()) }
        return s
    }
}

extension ProviderConfiguration {
    /// This configuration with what it lacks taken from `p`, a configured
    /// provider. Its client only with `takeClient`, and never half of it:
    /// a secret goes with its own client id.
    package func completed(by p: Provider, takeClient: Bool) -> ProviderConfiguration {
        let base = p.storedConfiguration
        var c = self
        c.name = name ?? base.name
        c.issuer = issuer ?? base.issuer
        c.authorizationEndpoint = authorizationEndpoint ?? base.authorizationEndpoint
        c.tokenEndpoint = tokenEndpoint ?? base.tokenEndpoint
        c.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint ?? base.deviceAuthorizationEndpoint
        c.revocationEndpoint = revocationEndpoint ?? base.revocationEndpoint
        c.userinfoEndpoint = userinfoEndpoint ?? base.userinfoEndpoint
        if clientID == nil && takeClient {
            c.clientID = base.clientID
            c.clientSecret = base.clientSecret
        }
        c.tokenEndpointAuthMethod = tokenEndpointAuthMethod ?? base.tokenEndpointAuthMethod
        c.signatureMethod = signatureMethod ?? base.signatureMethod
        c.errorAliases = errorAliases ?? base.errorAliases
        c.errorsWithHTTP200 = errorsWithHTTP200 ?? base.errorsWithHTTP200
        c.empty400IsInvalidGrant = empty400IsInvalidGrant ?? base.empty400IsInvalidGrant
        c.redirectURI = redirectURI ?? base.redirectURI
        c.authorizationParams = authorizationParams ?? base.authorizationParams
        c.accountClaim = accountClaim ?? base.accountClaim
        c.endpointsSource = base.endpointsSource
        return c
    }
}
