public import FoundationEssentials
public import VaultCrypto
public import VaultHTTP

/// A Google service-account key file (the JSON a console hands out): the
/// account's e-mail address, its RSA private key and the token endpoint.
/// Other RFC 7523 servers take the same file, written by hand.
public struct ServiceAccountKey: Sendable {
    /// `client_email`: the assertions' issuer.
    public let clientEmail: String
    /// `private_key`: a PEM (PKCS#8) RSA private key.
    public let privateKey: String
    /// `private_key_id`: the key's id, sent as the assertions' `kid`.
    public let privateKeyID: String?
    /// `token_uri`: where assertions are exchanged, and their audience.
    public let tokenURI: String?

    /// Reads a key file's bytes; `source` names the file in errors. The
    /// key's form is checked (`JWTAssertion.checkPrivateKey`), so a key
    /// that cannot sign is refused before anything is stored.
    public init(json bytes: SecureBytes, source: String) throws(VaultError) {
        struct Wire: Decodable {
            var type: String?
            var client_email: String?
            var private_key: String?
            var private_key_id: String?
            var token_uri: String?
        }
        var data = bytes.withUnsafeBytes { Data($0) }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        guard let w = try? JSONDecoder().decode(Wire.self, from: data) else {
            throw VaultError(
                .invalidInput, "\(source) is not a service account key file (a JSON object with string fields)",
                remedy: .downloadServiceAccountKey)
        }
        if let type = w.type, type != "service_account" {
            throw VaultError(
                .invalidInput,
                "\(source) holds credentials of type '\(ProviderText.sanitized(type, limit: 40))', not a service account key"
                    + " (\"type\": \"service_account\")")
        }
        guard let key = w.private_key, !key.isEmpty else {
            throw VaultError(.invalidInput, "\(source) has no 'private_key'")
        }
        guard let email = w.client_email, !email.isEmpty, ProviderText.isToken(email) else {
            throw VaultError(.invalidInput, "\(source) has no usable 'client_email'")
        }
        if let uri = w.token_uri {
            do { try URLPolicy.check(uri) } catch {
                throw VaultError(.invalidInput, "\(source): token_uri: \(error.reason)")
            }
        }
        if let id = w.private_key_id, !ProviderText.isToken(id) {
            throw VaultError(.invalidInput, "\(source) has a 'private_key_id' that is not printable ASCII")
        }
        try JWTAssertion.checkPrivateKey(key, source: "the private key in \(source)")
        clientEmail = email
        privateKey = key
        privateKeyID = w.private_key_id
        tokenURI = w.token_uri
    }
}

/// Grants a machine holds for itself: client credentials (RFC 6749
/// section 4.4, with a secret or `private_key_jwt`) and service accounts
/// (RFC 7523 section 2.1). Their credentials live in the grant's provider
/// configuration, encrypted with it; a new access token is minted from
/// them whenever the stored one is stale, by `TokenRefresher` under the
/// same one-request-at-a-time coordination as a refresh.
///
/// Apps and the command line call `clientCredentials` or `serviceAccount`
/// to make the first grant (one token request, nothing stored), then use
/// the grant like any other.
public enum MachineGrants {
    /// A client credentials grant from `provider`'s token endpoint and
    /// client. With `privateKeyPEM` the client authenticates with
    /// `private_key_jwt` (and `keyID` as `kid`), else with its secret as the
    /// provider says (Basic or in the body). `scopes` are asked for with
    /// every token; when empty, the provider's own `scopes`, as for an
    /// authorization.
    public static func clientCredentials(
        provider p: Provider, scopes: [String], privateKeyPEM: String? = nil, keyID: String? = nil,
        transport: any HTTPTransport, now: Date
    ) throws(VaultError) -> Grant {
        guard p.protocolVersion == .oauth2 else {
            throw VaultError(.invalidInput, "provider '\(p.name)' speaks OAuth 1.0a, which has no client credentials")
        }
        guard let endpoint = p.tokenEndpoint, let clientID = p.clientID else {
            throw VaultError(
                .invalidInput, "provider '\(p.name)' needs a token endpoint and a client id for client credentials",
                remedy: p.clientID == nil ? .giveClient(oauth1: false) : nil)
        }
        var config = p.storedConfiguration
        config.tokenEndpoint = endpoint
        config.clientID = clientID
        let asked = scopes.isEmpty ? p.scopes : scopes
        config.scopes = asked.isEmpty ? nil : asked
        if let privateKeyPEM {
            try JWTAssertion.checkPrivateKey(privateKeyPEM, source: "the client key")
            config.clientPrivateKey = privateKeyPEM
            config.clientKeyID = keyID
            config.clientSecret = nil
            config.tokenEndpointAuthMethod = "private_key_jwt"
        } else {
            guard config.clientSecret != nil else {
                throw VaultError(
                    .invalidInput, "client credentials need the client's secret or private key",
                    remedy: .giveMachineCredentials)
            }
            if config.tokenEndpointAuthMethod == "private_key_jwt" { config.tokenEndpointAuthMethod = nil }
        }
        let blank = Grant(
            provider: p.name, kind: .clientCredentials, account: clientID, providerConfiguration: config,
            createdAt: now, refreshTokenRotates: false)
        return try mint(blank, name: p.name, transport: transport, now: now, what: "getting a token from '\(p.name)'")
    }

    /// A service-account grant: `key`'s account (or `subject`, for
    /// domain-wide delegation), with tokens from the key's `token_uri`, else
    /// `provider`'s token endpoint. `provider` also supplies the revocation
    /// and userinfo endpoints, the error quirks, and the scopes when
    /// `scopes` is empty.
    public static func serviceAccount(
        key: ServiceAccountKey, subject: String?, scopes: [String], provider p: Provider,
        transport: any HTTPTransport, now: Date
    ) throws(VaultError) -> Grant {
        guard let endpoint = key.tokenURI ?? p.tokenEndpoint else {
            throw VaultError(.invalidInput, "the key file has no token_uri and provider '\(p.name)' no token endpoint")
        }
        if let subject, !ProviderText.isToken(subject) || subject.contains(" ") {
            throw VaultError(.invalidInput, "the subject must be an account name or e-mail address without spaces")
        }
        var config = ProviderConfiguration(
            name: p.name, issuer: p.issuer, tokenEndpoint: endpoint, revocationEndpoint: p.revocationEndpoint,
            userinfoEndpoint: p.userinfoEndpoint, clientID: key.clientEmail, tokenEndpointAuthMethod: "none",
            errorQuirks: p.errorQuirks)
        config.clientPrivateKey = key.privateKey
        config.clientKeyID = key.privateKeyID
        config.subject = subject
        // As for client credentials: none given, the provider's own.
        let asked = scopes.isEmpty ? p.scopes : scopes
        config.scopes = asked.isEmpty ? nil : asked
        let blank = Grant(
            provider: p.name, kind: .serviceAccount, account: subject ?? key.clientEmail,
            providerConfiguration: config, createdAt: now, refreshTokenRotates: false)
        return try mint(blank, name: p.name, transport: transport, now: now, what: "getting a token from '\(p.name)'")
    }

    /// `g` with a newly minted access token; nothing is stored. An
    /// `invalid_grant` (the key or client deleted or disabled) is a
    /// refusal, which kills the grant; a refusal while this machine's clock
    /// is off from the provider's is not, and says so.
    package static func mint(
        _ g: Grant, name: String, transport: any HTTPTransport, now: Date, what: String? = nil
    ) throws(VaultError) -> Grant {
        guard let config = g.providerConfiguration, let endpoint = config.tokenEndpoint else {
            throw VaultError(
                .invalidInput, "grant '\(name)' does not say where to get tokens (no token endpoint)",
                remedy: .addProviderConfiguration)
        }
        var client = OAuthClient(config, providerName: g.provider)
        client.now = { now }
        let scope = config.scopes.map { $0.joined(separator: " ") }
        var form: [(String, String)]
        switch g.kind {
        case .serviceAccount:
            guard let issuer = config.clientID, let key = config.clientPrivateKey else {
                throw VaultError(.invalidInput, "grant '\(name)' has no service account key")
            }
            client.authMethod = "none"
            let assertion = try JWTAssertion.sign(
                JWTAssertion.Claims(
                    issuer: issuer, subject: config.subject, audience: endpoint, scope: scope, now: now),
                keyID: config.clientKeyID, privateKeyPEM: key)
            form = [("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion)]
        case .clientCredentials:
            form = [("grant_type", "client_credentials")]
        case .oauth1, .oauth2:
            throw VaultError(.internalError, "grant '\(name)' is not a machine grant")
        }
        // RFC 6749 section 4.4.2 and RFC 7523 section 2.1 both take `scope`
        // in the request (Google reads it from the assertion).
        if let scope { form.append(("scope", scope)) }
        let what = what ?? "getting a token for '\(name)'"
        var token = TokenEndpoint(transport: transport, client: client)
        token.refused = g.refusedCredential
        let answer = try token.send(endpoint, form: form, what: what, timeout: TokenRefresher.requestTimeout)
        let response: TokenResponse
        do { response = try token.tokenResponse(answer, what: what) } catch {
            throw ClockCheck.refusal(
                error, answer: answer, now: now, signed: g.kind == .serviceAccount || config.clientPrivateKey != nil)
        }
        var next = try g.applying(refresh: response, now: now, what: what)
        // Nothing here renews: a refresh token would only be another secret to keep.
        next.refreshToken = nil
        next.refreshTokenExpiresAt = nil
        next.refreshTokenRotates = false
        if next.scopes.isEmpty { next.scopes = config.scopes ?? [] }
        return next
    }
}

/// Tells a refused assertion from a clock that is wrong here: assertions
/// carry `iat` and `exp` from this machine's clock, and a provider refuses
/// one that is not yet valid or already expired by its own.
enum ClockCheck {
    /// Seconds of difference past which this machine's clock looks wrong:
    /// well above network delays, well under an assertion's lifetime.
    static let tolerance: Double = 30

    /// `error` (from a token request whose answer is `answer`), or, when
    /// the request carried a signed assertion, the provider refused it and
    /// the clocks disagree, an error that says so and changes nothing.
    static func refusal(_ error: VaultError, answer: TokenEndpoint.Answer, now: Date, signed: Bool) -> VaultError {
        // A refusal of the request, in an OAuth error or not (glewlwyd
        // answers a client assertion it refuses with an empty 403).
        let refusal =
            [.refused, .invalidClient, .providerError].contains(error.code)
            || (error.code == .badResponse && (400..<500).contains(answer.status))
        guard signed, refusal else { return error }
        let skew = answer.date.flatMap(HTTPDate.parse).map { now.timeIntervalSince($0) }
        let timeWords = ["iat", "exp", "expired", "not yet valid", "not valid yet", "timeframe", "clock", "future"]
        let said = error.reason.lowercased()
        let mentionsTime = timeWords.contains { said.contains($0) }
        let wrong: String
        if let skew, abs(skew) > tolerance {
            wrong =
                "this machine's clock is \(Int(abs(skew).rounded())) seconds \(skew > 0 ? "ahead of" : "behind") the provider's"
        } else if skew == nil && mentionsTime {
            wrong = "the provider's answer is about the assertion's time: this machine's clock looks wrong"
        } else {
            return error
        }
        let out = VaultError(
            .providerError, "\(error.reason); \(wrong)",
            oauthError: error.oauthError, remedy: .setClock)
        return error.httpStatus.map { out.with(httpStatus: $0) } ?? out
    }
}

/// The Date header's IMF-fixdate (RFC 9110 section 5.6.7), the form
/// servers send: `Sun, 06 Nov 1994 08:49:37 GMT`.
package enum HTTPDate {
    /// The instant `text` names, or nil when it is not an IMF-fixdate.
    package static func parse(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]) else {
            return nil
        }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let m = months.firstIndex(of: String(parts[2])) else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (1...31).contains(day), (1970...9999).contains(year), clock[0] < 24, clock[1] < 60,
            clock[2] < 61
        else { return nil }
        // Days from the civil date (Howard Hinnant's algorithm).
        let month = m + 1
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146097 + doe - 719468
        return Date(epochSeconds: Int64(days * 86400 + clock[0] * 3600 + clock[1] * 60 + clock[2]))
    }
}
