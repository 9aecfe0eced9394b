public import FoundationEssentials
public import VaultCrypto

/// The fields of an OAuth 2.0 token response (RFC 6749 section 5.1), read
/// leniently where providers differ (`expires_in` as a number or a string,
/// `scope` as a space- or comma-separated string or an array) and strictly
/// where a wrong byte would do harm: tokens, token type and scopes must be
/// of RFC 6749 Appendix A's characters, and expiry times pass
/// `TokenExpiry`. The same rules serve `vault import`, the code exchange
/// and every refresh.
public struct TokenResponse: Sendable {
    /// The access token.
    public var accessToken: String?
    /// The refresh token, if the provider issued one.
    public var refreshToken: String?
    /// The token type, usually `Bearer`.
    public var tokenType: String?
    /// Seconds the access token is valid from now.
    public var expiresIn: Double?
    /// When the access token expires, in seconds since the epoch.
    public var expiresAt: Int64?
    /// Seconds the refresh token stays valid (GitHub Apps, Microsoft).
    public var refreshTokenExpiresIn: Double?
    /// The scopes granted.
    public var scope: [String]?
    /// The OpenID Connect ID token.
    public var idToken: String?
    /// OAuth 1.0a token secret, for imports.
    public var tokenSecret: String?
    /// Import extras, not part of a provider's response.
    public var provider: String?
    /// The account the grant belongs to.
    public var account: String?
    /// The endpoints and client needed to refresh or revoke the grant.
    public var providerConfiguration: ProviderConfiguration?
    /// Every field of the response but the tokens and the import extras,
    /// as sent (kept with the grant).
    public var fields: [String: JSONValue] = [:]

    /// Largest JSON document accepted.
    public static let maximumSize = 1 << 20
    /// Largest set of kept fields, serialized; past it only scalars are kept.
    static let maximumKept = 16384

    /// Parses a JSON object. Unknown fields are kept; wrong types, bad
    /// characters and impossible expiry times are errors.
    public init(json: SecureBytes) throws(VaultError) {
        guard json.count <= TokenResponse.maximumSize else {
            throw VaultError(.invalidInput, "the token JSON is larger than 1 MiB")
        }
        var data = json.withUnsafeBytes { Data($0) }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        do {
            self = try JSONDecoder().decode(Wire.self, from: data).response
        } catch let error as VaultError {
            throw error
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context) {
            let field = context.codingPath.map(\.stringValue).joined(separator: ".")
            guard !field.isEmpty else { throw VaultError(.invalidInput, "the token JSON is not a JSON object") }
            throw VaultError(.invalidInput, "the token JSON has a wrong type for '\(field)'")
        } catch {
            throw VaultError(.invalidInput, "the token JSON is not a JSON object")
        }
    }

    /// The grant this response describes, as imported by `vault import`.
    public func importedGrant(now: Date) throws(VaultError) -> Grant {
        guard let provider, !provider.isEmpty else {
            throw VaultError(.invalidInput, "the token JSON has no 'provider'", remedy: .nameProviderInJSON)
        }
        guard accessToken != nil || refreshToken != nil else {
            throw VaultError(.invalidInput, "the token JSON has neither 'access_token' nor 'refresh_token'")
        }
        // A DPoP-bound token (RFC 9449) is of no use without its key, which
        // no token file carries: imported, it would be sent as a bearer token.
        if let tokenType, tokenType.lowercased() != "bearer", tokenSecret == nil {
            let type = ProviderText.sanitized(tokenType, limit: 20)
            if tokenType.lowercased() == "dpop" {
                throw VaultError(
                    .invalidInput, "the token JSON's tokens are bound to a DPoP key it does not carry",
                    remedy: .authorizeWithDPoP(
                        provider: (try? GrantName.validateForCommandLine(provider)) != nil ? provider : "PROVIDER"))
            }
            throw VaultError(.invalidInput, "the token JSON's token_type '\(type)' is not one vault imports (Bearer)")
        }
        let shown = try ShownGrant(fields, scope: scope, now: now)
        var response = self
        response.scope = shown.scopes ?? scope
        response.fields = shown.tokenResponse ?? fields.filter { !ShownGrant.fields.contains($0.key) }
        // A saved answer is counted from when it was issued, if it says
        // (`iat`), not from now: a token 40 s old expires 40 s sooner.
        var g = response.grant(
            provider: provider, account: account ?? idToken.flatMap(IDTokenClaims.unverifiedAccount),
            now: issuedAt(now: now) ?? now)
        g.createdAt = shown.createdAt ?? now
        g.refreshedAt = shown.refreshedAt
        if refreshTokenExpiresIn == nil, let end = shown.refreshTokenExpiresAt { g.refreshTokenExpiresAt = end }
        g.providerConfiguration = providerConfiguration
        return g
    }

    /// When a saved answer was issued: its `iat` (seconds since 1970), when
    /// that is plausible: not later than `now`, and not earlier than its
    /// access token's `expires_in` before now (a token already expired
    /// by it would be an odd file to import: its clock is wrong). Nil
    /// otherwise, or without `expires_in` to measure it by.
    func issuedAt(now: Date) -> Date? {
        guard let expiresIn, case .number(let seconds)? = fields["iat"], seconds.isFinite else { return nil }
        let issued = Date(timeIntervalSince1970: seconds.rounded(.down))
        guard issued <= now, issued >= now.addingTimeInterval(-expiresIn) else { return nil }
        return issued
    }

    /// The grant this response gives, for `provider` and `account`.
    public func grant(provider: String, account: String?, now: Date) -> Grant {
        Grant(
            provider: provider, kind: tokenSecret != nil ? .oauth1 : .oauth2, account: account,
            accessToken: accessToken, refreshToken: refreshToken, tokenType: tokenType,
            expiresAt: accessTokenExpiry(now: now), scopes: scope ?? [], idToken: idToken, tokenSecret: tokenSecret,
            createdAt: now, refreshTokenExpiresAt: refreshTokenExpiresIn.map { TokenExpiry.date(in: $0, from: now) },
            tokenResponse: fields.isEmpty ? nil : fields)
    }

    /// When the access token expires: `expires_in` from now, else `expires_at`.
    func accessTokenExpiry(now: Date) -> Date? {
        expiresIn.map { TokenExpiry.date(in: $0, from: now) } ?? expiresAt.map(Date.init(epochSeconds:))
    }

    private struct Wire: Decodable {
        var response: TokenResponse

        enum Keys: String, CodingKey, CaseIterable {
            case access_token, refresh_token, token_type, expires_in, expires_at, refresh_token_expires_in, scope
            case id_token, token_secret, oauth_token_secret, provider, account, provider_config
        }

        /// Kept elsewhere (tokens) or not part of a provider's answer.
        static let notKept: Set<String> = [
            "access_token", "refresh_token", "id_token", "token_secret", "oauth_token_secret", "provider", "account",
            "provider_config",
        ]

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            func string(_ k: Keys) throws -> String? {
                let s = try c.decodeIfPresent(String.self, forKey: k)
                return s?.isEmpty == true ? nil : s
            }
            func token(_ k: Keys) throws -> String? {
                guard let s = try string(k) else { return nil }
                guard ProviderText.isToken(s) else {
                    throw VaultError(
                        .invalidInput,
                        "\(k.rawValue) contains characters that a token cannot have (RFC 6749 appendix A)"
                    )
                }
                return s
            }
            func number(_ k: Keys) throws -> Double? {
                guard c.contains(k), try !c.decodeNil(forKey: k) else { return nil }
                if let d = try? c.decode(Double.self, forKey: k) { return d }
                guard let d = Double(try c.decode(String.self, forKey: k)) else {
                    throw VaultError(.invalidInput, "'\(k.rawValue)' is not a number")
                }
                return d
            }
            var r = TokenResponse()
            r.accessToken = try token(.access_token)
            r.refreshToken = try token(.refresh_token)
            r.tokenType = try string(.token_type)
            if let type = r.tokenType, !ProviderText.isTokenType(type) {
                throw VaultError(.invalidInput, "token_type contains characters that a token type cannot have")
            }
            r.expiresIn = try number(.expires_in).map { (v: Double) throws(VaultError) in
                try TokenExpiry.seconds(v, field: "expires_in")
            }
            r.expiresAt = try number(.expires_at).map { (v: Double) throws(VaultError) in
                try TokenExpiry.epoch(v, field: "expires_at")
            }
            r.refreshTokenExpiresIn = try number(.refresh_token_expires_in).map { (v: Double) throws(VaultError) in
                try TokenExpiry.seconds(v, field: "refresh_token_expires_in")
            }
            if let list = try? c.decodeIfPresent([String].self, forKey: .scope) {
                r.scope = list
            } else if let text = try string(.scope) {
                // RFC 6749 uses spaces; GitHub answers with commas.
                r.scope = text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
            }
            if let scopes = r.scope, !scopes.allSatisfy(ProviderText.isScope) {
                throw VaultError(.invalidInput, "scope contains characters that a scope cannot have")
            }
            r.idToken = try token(.id_token)
            r.tokenSecret = try token(.token_secret) ?? token(.oauth_token_secret)
            r.provider = try string(.provider)
            r.account = try string(.account)
            r.providerConfiguration = try c.decodeIfPresent(ProviderConfiguration.self, forKey: .provider_config)
            r.fields = try Wire.kept(decoder)
            response = r
        }

        /// The fields to keep with the grant: each that decodes as a
        /// finite JSON value nested at most `JSONValue.maximumDepth` deep.
        static func kept(_ decoder: any Decoder) throws -> [String: JSONValue] {
            let all = try decoder.container(keyedBy: AnyCodingKey.self)
            var kept: [String: JSONValue] = [:]
            for key in all.allKeys where !notKept.contains(key.stringValue) {
                guard let v = try? all.decode(JSONValue.self, forKey: key), v.depth <= JSONValue.maximumDepth else {
                    continue
                }
                kept[key.stringValue] = v
            }
            let size = (try? JSONEncoder().encode(kept).count) ?? Int.max
            guard size > TokenResponse.maximumKept else { return kept }
            return kept.filter {
                if case .string(let s) = $0.value { return s.utf8.count <= 1024 }
                if case .array = $0.value { return false }
                if case .object = $0.value { return false }
                return true
            }
        }
    }

    private init() {}
}

extension Grant {
    /// This grant after a successful refresh answered `response` at `now`:
    /// the new access token and expiry, the rotated refresh token if any
    /// (else the old one) and whether it rotated, the refresh token's
    /// expiry when the provider gives it, the answer's fields, the scopes
    /// it states, and a new ID token only if it passes OpenID Connect Core
    /// 12.2 against the one the grant holds. A grant without an account
    /// takes the one that ID token names, when its issuer and audience were
    /// checked against the grant's own (imports from other tools keep no
    /// account). `what` starts error messages.
    public func applying(refresh response: TokenResponse, now: Date, what: String) throws(VaultError) -> Grant {
        var next = self
        if let idToken = response.idToken {
            let config = providerConfiguration
            let claims = try IDTokenClaims.verifyRefreshed(
                idToken, original: self.idToken, issuer: config?.issuer, clientID: config?.clientID, now: now,
                what: what)
            next.idToken = idToken
            // Without an issuer to compare, any server could name any account.
            if account == nil, kind == .oauth2, config?.issuer != nil, config?.clientID != nil {
                next.account = claims.account
            }
        }
        next.accessToken = response.accessToken
        next.tokenType = response.tokenType ?? tokenType
        next.expiresAt = response.accessTokenExpiry(now: now)
        next.takeRefreshToken(of: response, now: now)
        if let scopes = response.scope, !scopes.isEmpty { next.scopes = scopes }
        next.tokenResponse = response.fields.isEmpty ? nil : response.fields
        next.refreshedAt = now
        return next
    }
}

extension Grant {
    /// The refresh token as a refresh answer leaves it: rotated when the
    /// answer carries a new one (whose life is the one the answer gives,
    /// or unknown), and whether the provider rotates it.
    mutating func takeRefreshToken(of response: TokenResponse, now: Date) {
        let old = refreshToken
        if let rotated = response.refreshToken {
            refreshToken = rotated
            if rotated != old { refreshTokenExpiresAt = nil }
        }
        refreshTokenRotates = response.refreshToken.map { $0 != old } ?? false
        if let seconds = response.refreshTokenExpiresIn {
            refreshTokenExpiresAt = TokenExpiry.date(in: seconds, from: now)
        }
    }
}

/// The one reader of expiry times from providers and files, for imports,
/// code exchanges and refreshes alike: a negative, non-finite or absurd
/// value is refused, never read as "never expires".
public enum TokenExpiry {
    /// Longest lifetime accepted, in seconds (about 317 years).
    public static let maximumSeconds: Double = 1e10
    /// Latest absolute time accepted, in seconds since the epoch.
    public static let maximumEpoch: Double = 1e11

    /// A lifetime in seconds from now (`expires_in`, `refresh_token_expires_in`).
    public static func seconds(_ value: Double, field: String) throws(VaultError) -> Double {
        guard value.isFinite, value >= 0, value < maximumSeconds else {
            throw VaultError(.invalidInput, "'\(field)' is out of range")
        }
        return value
    }

    /// A time in seconds since the epoch (`expires_at`).
    public static func epoch(_ value: Double, field: String) throws(VaultError) -> Int64 {
        guard value.isFinite, value >= 0, value < maximumEpoch else {
            throw VaultError(.invalidInput, "'\(field)' is out of range")
        }
        return Int64(value)
    }

    /// The time `seconds` (checked by `seconds(_:field:)`) after `now`, to the second.
    public static func date(in seconds: Double, from now: Date) -> Date {
        Date(epochSeconds: now.epochSeconds + Int64(seconds))
    }
}

/// What `vault show --json --reveal NAME` writes beside a token response's
/// fields, read back by `vault import` so that a grant moves whole: its
/// scopes (`scopes`, an array, beside a response's `scope`), when it was
/// authorized and last refreshed (an inactivity limit counts from the
/// refresh, a lifetime from the authorization), its refresh token's end,
/// and the provider's answer as it was kept (`token_response`). The rest
/// of show's fields (state, counts, texts) are its own and are dropped.
struct ShownGrant {
    /// Every field `vault show --json` writes that is not a token response's.
    static let fields: Set<String> = [
        "name", "kind", "state", "expires", "scopes", "has_access_token", "has_refresh_token", "has_id_token",
        "created_at", "refreshed_at", "dead_reason", "refresh_token_expires_at", "refresh_token_expires",
        "token_response", "conflict", "endpoints_source", "client_registration", "narrowed_tokens",
        "refresh_token_deadline_at", "refresh_token_deadline", "refresh_token_deadline_rule",
        "refresh_token_deadline_renewable", "refresh_token_policy_source", "pushed_authorization_requests",
        "authorization_response_iss", "last_used_at", "last_used", "dpop_alg", "dpop_jkt",
    ]

    var scopes: [String]?
    var createdAt: Date?
    var refreshedAt: Date?
    var refreshTokenExpiresAt: Date?
    var tokenResponse: [String: JSONValue]?

    /// Reads show's fields among `fields`; `scope`: the response's own,
    /// which `scopes` must not contradict.
    init(_ given: [String: JSONValue], scope: [String]?, now: Date) throws(VaultError) {
        let fields = given.filter { $0.value != .null }
        if let kind = fields["kind"] {
            guard kind == .string("oauth2") || kind == .string("oauth1") else {
                throw VaultError(
                    .invalidInput,
                    "the token JSON is a machine grant's ('kind'): its tokens are minted with a client "
                        + "credential that the JSON does not carry; authorize it again on this machine instead")
            }
        }
        if let value = fields["scopes"] {
            guard case .array(let items) = value else {
                throw VaultError(.invalidInput, "the token JSON has a wrong type for 'scopes'")
            }
            let list = try items.map { item throws(VaultError) -> String in
                guard case .string(let s) = item, ProviderText.isScope(s) else {
                    throw VaultError(.invalidInput, "scopes contains something that is not a scope")
                }
                return s
            }
            if let scope, Set(scope) != Set(list) {
                throw VaultError(
                    .invalidInput,
                    "the token JSON's 'scope' (\(scope.joined(separator: " "))) and 'scopes' "
                        + "(\(list.joined(separator: " "))) name different scopes; keep one of them")
            }
            scopes = list
        }
        func date(_ key: String) throws(VaultError) -> Date? {
            guard let value = fields[key] else { return nil }
            guard case .number(let n) = value, n.isFinite, n > 0, n < 1e11 else {
                throw VaultError(.invalidInput, "the token JSON has a wrong type for '\(key)'")
            }
            return Date(timeIntervalSince1970: n.rounded(.down))
        }
        createdAt = try date("created_at").map { min($0, now) }
        refreshedAt = try date("refreshed_at").map { min($0, now) }
        refreshTokenExpiresAt = try date("refresh_token_expires_at")
        if let value = fields["token_response"] {
            guard case .object(let kept) = value else {
                throw VaultError(.invalidInput, "the token JSON has a wrong type for 'token_response'")
            }
            tokenResponse = kept
        }
    }
}
