public import FoundationEssentials
public import VaultCrypto

/// The fields of an OAuth 2.0 token response (RFC 6749 section 5.1), read
/// leniently where providers differ: `expires_in` as a number or a string,
/// `scope` as a space-separated string or an array.
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

    /// Largest JSON document accepted.
    public static let maximumSize = 1 << 20

    /// Parses a JSON object. Unknown fields are ignored; wrong types are errors.
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
            throw VaultError(.invalidInput, "the token JSON has no 'provider'", hint: "add \"provider\": \"NAME\"")
        }
        guard accessToken != nil || refreshToken != nil else {
            throw VaultError(.invalidInput, "the token JSON has neither 'access_token' nor 'refresh_token'")
        }
        let expiry: Date?
        if let expiresAt {
            expiry = Date(epochSeconds: expiresAt)
        } else if let expiresIn {
            guard expiresIn.isFinite, expiresIn >= 0, expiresIn < 1e10 else {
                throw VaultError(.invalidInput, "'expires_in' is out of range")
            }
            expiry = Date(epochSeconds: now.epochSeconds + Int64(expiresIn))
        } else {
            expiry = nil
        }
        var g = grant(
            provider: provider, account: account ?? idToken.flatMap(IDTokenClaims.unverifiedAccount), now: now)
        g.expiresAt = expiry
        g.providerConfiguration = providerConfiguration
        return g
    }

    /// The grant this response gives, for `provider` and `account`.
    public func grant(provider: String, account: String?, now: Date) -> Grant {
        Grant(
            provider: provider, kind: tokenSecret != nil ? .oauth1 : .oauth2, account: account,
            accessToken: accessToken, refreshToken: refreshToken, tokenType: tokenType,
            // An absurd expires_in is treated as none rather than trusted.
            expiresAt: expiresIn.flatMap { $0.isFinite && $0 >= 0 && $0 < 1e10 ? $0 : nil }
                .map { Date(epochSeconds: now.epochSeconds + Int64($0)) } ?? expiresAt.map(Date.init(epochSeconds:)),
            scopes: scope ?? [], idToken: idToken, tokenSecret: tokenSecret, createdAt: now)
    }

    private struct Wire: Decodable {
        var response: TokenResponse

        enum Keys: String, CodingKey {
            case access_token, refresh_token, token_type, expires_in, expires_at, scope, id_token
            case token_secret, oauth_token_secret, provider, account, provider_config
        }

        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: Keys.self)
            func string(_ k: Keys) throws -> String? {
                let s = try c.decodeIfPresent(String.self, forKey: k)
                return s?.isEmpty == true ? nil : s
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
            r.accessToken = try string(.access_token)
            r.refreshToken = try string(.refresh_token)
            r.tokenType = try string(.token_type)
            r.expiresIn = try number(.expires_in)
            if let at = try number(.expires_at) {
                guard at.isFinite, at >= 0, at < 1e11 else {
                    throw VaultError(.invalidInput, "'expires_at' is out of range")
                }
                r.expiresAt = Int64(at)
            }
            if let list = try? c.decodeIfPresent([String].self, forKey: .scope) {
                r.scope = list
            } else if let text = try string(.scope) {
                // RFC 6749 uses spaces; GitHub answers with commas.
                r.scope = text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init)
            }
            r.idToken = try string(.id_token)
            r.tokenSecret = try string(.token_secret) ?? string(.oauth_token_secret)
            r.provider = try string(.provider)
            r.account = try string(.account)
            r.providerConfiguration = try c.decodeIfPresent(ProviderConfiguration.self, forKey: .provider_config)
            response = r
        }
    }

    private init() {}
}
