import FoundationEssentials
package import VaultCrypto
public import VaultHTTP

/// Calls a provider's token-style endpoints (token, device authorization,
/// revocation): form-encoded POSTs with client authentication, answers in
/// JSON (or form encoding, which GitHub sends without an Accept header),
/// and errors classified by how a caller recovers (AppAuth's rule).
public struct TokenEndpoint {
    let transport: any HTTPTransport
    let client: OAuthClient
    /// What a refusal (`invalid_grant`) refuses, in its errors: the grant,
    /// or what a machine grant's kind names (`Grant.refusedCredential`).
    var refused = "the grant"

    /// Creates a client for `client` over `transport`.
    public init(transport: any HTTPTransport, client: OAuthClient) {
        self.transport = transport
        self.client = client
    }

    /// An answer of a token-style endpoint, as received.
    package struct Answer {
        package let status: Int
        package let body: SecureBytes
        /// The Retry-After header, for 429 and 503.
        package let retryAfter: String?
        /// The Content-Type header, to say what a non-OAuth answer was.
        package let contentType: String?
        /// The Date header: the provider's clock, to tell a refused
        /// assertion from a clock that is wrong here.
        package var date: String? = nil
        /// The Location header of a redirect, which is never followed: for
        /// a diagnosis of who answered.
        package var location: String? = nil

        /// An answer as received.
        package init(status: Int, body: SecureBytes, retryAfter: String?, contentType: String?) {
            self.status = status
            self.body = body
            self.retryAfter = retryAfter
            self.contentType = contentType
        }
    }

    /// POSTs `form` to `url` with the client's authentication, and with a
    /// DPoP proof when the client has a key: the server's nonce challenge
    /// (`use_dpop_nonce`, RFC 9449 section 8) is answered once.
    func send(
        _ url: String, form: [(String, String)], what: String, timeout: Double = 30,
        extras: TokenRequestExtras = .none
    ) throws(VaultError) -> Answer {
        let first = try sendOnce(url, form: form, what: what, timeout: timeout, extras: extras)
        guard client.dpopKey != nil, DPoPNonces.asksForNonce(first.response) else { return first.answer }
        return try sendOnce(url, form: form, what: what, timeout: timeout, extras: extras).answer
    }

    /// One POST of `send`.
    private func sendOnce(
        _ url: String, form: [(String, String)], what: String, timeout: Double, extras: TokenRequestExtras
    ) throws(VaultError) -> (answer: Answer, response: HTTPResponse) {
        var pairs = extras.adding(to: form)
        var headers: [(name: String, value: String)] = [
            ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
        ]
        headers += extras.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        // An RFC 7523 JWT bearer request authenticates with its assertion alone.
        let anonymous = client.authMethod == "none"
        guard let clientID = client.id ?? (anonymous ? "" : nil) else {
            throw VaultError(
                .invalidInput, "provider '\(client.providerName)' has no client id",
                remedy: .configureClient)
        }
        switch (client.authMethod, client.secret) {
        case ("none", _):
            break
        case ("private_key_jwt", _):
            pairs += try clientAssertion(clientID, endpoint: url)
        case ("client_secret_post", let secret?):
            pairs += [("client_id", clientID), ("client_secret", secret)]
        case (_, let secret?):
            // RFC 6749 section 2.3.1: form-encode both parts before base64.
            let raw = FormEncoding.percentEncode(clientID) + ":" + FormEncoding.percentEncode(secret)
            headers.append(("Authorization", "Basic " + Base64.encodeString(Array(raw.utf8), .standard)))
        case (_, nil):
            pairs.append(("client_id", clientID))
        }
        if let key = client.dpopKey {
            let nonce = DPoPNonces.shared.nonce(for: url)
            headers.append(("DPoP", try key.proof(method: "POST", url: url, nonce: nonce, at: client.now())))
        }
        let body = try Secure.copy(Array(FormEncoding.encode(pairs).utf8))
        let response: HTTPResponse
        do {
            var request = HTTPRequest(method: "POST", url: url, headers: headers, body: body)
            request.timeout = timeout
            response = try transport.send(request)
        } catch {
            throw error.vaultError(what)
        }
        if client.dpopKey != nil { DPoPNonces.shared.remember(response, from: url) }
        var answer = Answer(
            status: response.status, body: response.body, retryAfter: response.header("retry-after"),
            contentType: response.header("content-type"))
        answer.date = response.header("date")
        answer.location = response.header("location")
        return (answer, response)
    }

    /// RFC 7523 section 2.2: a new assertion signed by the client's key, in
    /// place of a secret, for `endpoint` unless the client names an audience.
    func clientAssertion(_ clientID: String, endpoint: String) throws(VaultError) -> [(String, String)] {
        guard let key = client.privateKey else {
            throw VaultError(
                .invalidInput, "the client of '\(client.providerName)' uses private_key_jwt but has no private key")
        }
        let claims = JWTAssertion.Claims(
            issuer: clientID, subject: clientID, audience: client.audience ?? endpoint, now: client.now())
        return [
            ("client_id", clientID),
            ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
            ("client_assertion", try JWTAssertion.sign(claims, keyID: client.keyID, privateKeyPEM: key)),
        ]
    }

    /// POSTs `form` to `url` with the client's authentication; status and body.
    func post(_ url: String, form: [(String, String)], what: String, timeout: Double = 30) throws(VaultError)
        -> (Int, SecureBytes)
    {
        let answer = try send(url, form: form, what: what, timeout: timeout)
        return (answer.status, answer.body)
    }

    /// A token response: a success answer with a well-formed access token,
    /// else the error `classify` makes of the answer.
    func tokenResponse(
        _ url: String, form: [(String, String)], what: String, timeout: Double = 30,
        extras: TokenRequestExtras = .none
    ) throws(VaultError) -> TokenResponse {
        try tokenResponse(try send(url, form: form, what: what, timeout: timeout, extras: extras), what: what)
    }

    /// The token response in `answer`, or the error `classify` makes of it.
    func tokenResponse(_ answer: Answer, what: String) throws(VaultError) -> TokenResponse {
        if let error = TokenEndpoint.classify(answer, what: what, quirks: client.quirks, refused: refused) {
            throw error
        }
        guard TokenEndpoint.isJSONObject(answer.body) || FormAnswer.pairs(answer.body) != nil else {
            throw TokenEndpoint.notOAuth(answer, what: what)
        }
        let response: TokenResponse
        do { response = try TokenResponse(json: TokenEndpoint.normalized(answer.body)) } catch {
            throw VaultError(.badResponse, "\(what): the provider's answer is not a token response (\(error.reason))")
        }
        guard response.accessToken != nil else {
            throw VaultError(.badResponse, "\(what): the provider's answer has no access_token")
        }
        // RFC 9449 section 5: a DPoP-bound token only for a request with a proof.
        let types = client.dpopKey == nil ? ["bearer"] : ["bearer", "dpop"]
        if let type = response.tokenType, !types.contains(type.lowercased()) {
            throw VaultError(.badResponse, "\(what): unsupported token type '\(type)'")
        }
        return response
    }

    /// What an answer means, the status first (RFC 6749 section 5.2):
    /// nil for a success to parse; for 429 and 5xx a transient error
    /// whatever the body says; else the OAuth error code decides, read
    /// through the provider's aliases. Only `invalid_grant` in a 400 or
    /// 401 (or, for a provider that answers errors with HTTP 200, in a
    /// 200) is a refusal, the one error that kills a grant.
    /// `invalid_client` and `unauthorized_client` are about the client,
    /// not the grant. An answer that is not an OAuth error (an HTML page
    /// from a proxy, an error code outside RFC 6749's characters) is a
    /// failure that changes nothing.
    package static func classify(
        _ answer: Answer, what: String, quirks: ErrorQuirks, refused: String = "the grant"
    ) -> VaultError? {
        classifyAnswer(answer, what: what, quirks: quirks, refused: refused).map { $0.with(httpStatus: answer.status) }
    }

    private static func classifyAnswer(_ answer: Answer, what: String, quirks: ErrorQuirks, refused: String)
        -> VaultError?
    {
        let status = answer.status
        let parsed = OAuthErrorBody(answer.body)
        if status == 429 || (500...599).contains(status) {
            let code = parsed.code.map { ", \($0)" } ?? ""
            let wait = answer.retryAfter.flatMap(TokenEndpoint.retryAfterText).map { "; \($0)" } ?? ""
            return VaultError(
                .transient, "\(what): the provider is unavailable (HTTP \(status)\(code))\(wait)",
                oauthError: parsed.code.map { quirks.canonical($0) }, remedy: .tryAgainLater
            ).with(retryAfter: TokenEndpoint.retryAfterSeconds(answer))
        }
        switch parsed {
        case .malformed:
            return VaultError(
                .badResponse,
                "\(what): the provider's answer (HTTP \(status)) carries an error code that is not an OAuth error code")
        case .error(let raw, let description):
            let code = quirks.canonical(raw)
            let said = raw + (description.map { ": \($0)" } ?? "")
            let refusal = status == 400 || status == 401 || (status == 200 && quirks.errorsWithHTTP200)
            switch code {
            case "invalid_grant" where refusal:
                return VaultError(.refused, "\(what): the provider refused \(refused): \(said)", oauthError: code)
            case "invalid_client", "unauthorized_client":
                return VaultError(
                    .invalidClient, "\(what): the provider does not accept the client: \(said)",
                    oauthError: code, remedy: .checkClientAuthentication)
            case "temporarily_unavailable", "server_error":
                return VaultError(.transient, "\(what): the provider is unavailable (\(said))", oauthError: code)
            default:
                return VaultError(
                    .providerError, "\(what): the provider refused the request: \(said)", oauthError: code)
            }
        case .none:
            if status == 200 { return nil }
            if status == 400 && answer.body.count == 0 && quirks.empty400IsInvalidGrant {
                return VaultError(
                    .refused, "\(what): the provider refused \(refused) (HTTP 400 without a body)",
                    oauthError: "invalid_grant")
            }
            return notOAuth(answer, what: what)
        }
    }

    /// The error for an answer that is neither an OAuth error nor a token
    /// response: an HTML page, plain text, an empty body.
    static func notOAuth(_ answer: Answer, what: String) -> VaultError {
        let kind = answer.contentType.map { ProviderText.sanitized(String($0.prefix { $0 != ";" }), limit: 60) }
        let empty = answer.body.count == 0
        let bare = answer.status == 400 && empty
        return VaultError(
            .badResponse,
            "\(what): the provider answered HTTP \(answer.status) with something that is not an OAuth answer"
                + (empty ? " (an empty body)" : kind.map { " (\($0))" } ?? ""),
            remedy: bare ? .declareEmpty400IsInvalidGrant : nil)
    }

    /// True when the body, after white space, starts a JSON object.
    static func isJSONObject(_ body: SecureBytes) -> Bool {
        body.withUnsafeBytes { $0.first { $0 != 0x20 && $0 != 0x0a && $0 != 0x0d && $0 != 0x09 } } == UInt8(ascii: "{")
    }

    /// The error for an answer other than a success, from its status and
    /// body alone (callers without the provider's quirks: revocation,
    /// OAuth 1.0a).
    package static func classify(status: Int, body: SecureBytes, what: String) -> VaultError {
        let answer = Answer(status: status, body: body, retryAfter: nil, contentType: nil)
        return classify(answer, what: what, quirks: ErrorQuirks())
            ?? VaultError(.badResponse, "\(what): unexpected HTTP \(status) from the provider").with(httpStatus: status)
    }

    /// Retry-After in seconds: delay seconds as sent, or an HTTP date less
    /// the answer's own Date (two readings of the provider's clock; this
    /// machine's is not compared with it). Nil when it says neither.
    static func retryAfterSeconds(_ answer: Answer) -> Double? {
        guard let value = answer.retryAfter?.split(separator: " ").joined(separator: " "), !value.isEmpty else {
            return nil
        }
        if let seconds = Int(value) { return seconds >= 0 ? Double(min(seconds, 86_400 * 7)) : nil }
        guard let until = HTTPDate.parse(value), let sent = answer.date.flatMap(HTTPDate.parse) else { return nil }
        return max(0, min(until.timeIntervalSince(sent), 86_400 * 7))
    }

    /// Retry-After as a person reads it: delay seconds, or an HTTP date as sent.
    static func retryAfterText(_ value: String) -> String? {
        let v = ProviderText.sanitized(value, limit: 40).split(separator: " ").joined(separator: " ")
        guard !v.isEmpty else { return nil }
        if let seconds = Int(v), seconds >= 0 { return "it asks to wait \(seconds) seconds (Retry-After)" }
        return "it asks to wait until \(v) (Retry-After)"
    }

    /// Some providers answer in form encoding; make it JSON for the parser.
    /// A body that is neither a JSON object nor form encoding is returned
    /// as it is (and fails to parse as a token response).
    package static func normalized(_ body: SecureBytes) throws(VaultError) -> SecureBytes {
        guard let pairs = FormAnswer.pairs(body) else { return body }
        var object: [String: String] = [:]
        for (k, v) in pairs where object[k] == nil { object[k] = v }
        var data: Data
        do { data = try JSONEncoder().encode(object) } catch {
            throw VaultError(.badResponse, "cannot read the answer")
        }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        // A form answer carries numbers as text; TokenResponse accepts that.
        return try Secure.copy(data)
    }
}

/// `application/x-www-form-urlencoded` answers (GitHub's without an Accept
/// header): told from JSON and from HTML or plain text by their bytes.
enum FormAnswer {
    /// The pairs of a form-encoded body, or nil when the body is not one:
    /// printable ASCII without spaces, quotes or angle brackets, with `=`.
    static func pairs(_ body: SecureBytes) -> [(String, String)]? {
        let looksForm = body.withUnsafeBytes { (b: UnsafeRawBufferPointer) -> Bool in
            var sawEquals = false
            var end = b.count
            while end > 0, b[end - 1] == 0x0a || b[end - 1] == 0x0d { end -= 1 }
            guard end > 0 else { return false }
            for i in 0..<end {
                let c = b[i]
                guard c > 0x20, c < 0x7f, c != 0x22, c != 0x3c, c != 0x3e, c != 0x7b else { return false }
                if c == 0x3d { sawEquals = true }
            }
            return sawEquals
        }
        guard looksForm else { return nil }
        let text = body.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        return FormEncoding.decode(Substring(text).prefix { $0 != "\n" && $0 != "\r" && $0 != "\r\n" })
    }
}

/// A provider's deviations from RFC 6749 section 5.2 in its error answers,
/// as its provider file declares them (docs/providers.md).
public struct ErrorQuirks: Sendable, Equatable {
    /// The provider's own error codes and the RFC 6749 / RFC 8628 code
    /// each stands for (GitHub's `bad_refresh_token` is `invalid_grant`).
    public var aliases: [String: String] = [:]
    /// The provider answers errors with HTTP 200 (GitHub), so a refusal
    /// there counts as one in a 400.
    public var errorsWithHTTP200 = false
    /// The provider answers a spent or revoked refresh token with a bare
    /// 400 and no body (glewlwyd).
    public var empty400IsInvalidGrant = false

    /// No deviation.
    public init() {}

    /// The standard code a provider's code stands for.
    func canonical(_ code: String) -> String { aliases[code] ?? code }
}

/// Who vault is at a provider: client id, secret and how to present them.
public struct OAuthClient: Sendable {
    /// For messages.
    public var providerName: String
    /// The client id, if any.
    public var id: String?
    /// Nil for public clients.
    public var secret: String?
    /// `client_secret_basic`, `client_secret_post`, `private_key_jwt`, or
    /// `none` (no client authentication: an RFC 7523 JWT bearer request).
    public var authMethod: String
    /// How the provider's error answers deviate from the RFC.
    public var quirks: ErrorQuirks
    /// `private_key_jwt`: the PEM private key that signs client assertions.
    public var privateKey: String?
    /// `private_key_jwt`: the key's id (`kid`), if any.
    public var keyID: String?
    /// `private_key_jwt`: the assertions' audience; when nil, the endpoint
    /// called (the token endpoint, as RFC 7523 section 3 suggests, or the
    /// revocation endpoint, which glewlwyd for one insists on).
    public var audience: String?
    /// The key whose proofs go with every request (RFC 9449 DPoP), for a
    /// DPoP-bound grant or an authorization that asks for one.
    public var dpopKey: DPoPKey?
    /// The clock that dates assertions and proofs.
    var now: @Sendable () -> Date = { Date() }

    /// The client of a provider definition.
    public init(_ p: Provider) {
        providerName = p.name
        id = p.clientID
        secret = p.publicClient ? nil : p.clientSecret
        authMethod = p.tokenEndpointAuthMethod
        quirks = p.errorQuirks
    }

    /// The client a stored grant remembers.
    public init(_ c: ProviderConfiguration, providerName: String) {
        self.providerName = providerName
        id = c.clientID
        secret = c.clientSecret
        authMethod = c.tokenEndpointAuthMethod ?? "client_secret_basic"
        quirks = c.errorQuirks
        privateKey = c.clientPrivateKey
        keyID = c.clientKeyID
    }

    /// The client a stored grant remembers, with the grant's DPoP key.
    package init(grant g: Grant, _ c: ProviderConfiguration) {
        self.init(c, providerName: g.provider)
        dpopKey = g.dpopKey
    }
}

/// `{"error": ..., "error_description": ...}` of RFC 6749 section 5.2, in
/// JSON or form encoding.
package enum OAuthErrorBody {
    /// No `error` field: a success, or not an OAuth answer at all.
    case none
    /// An error code of RFC 6749's characters, with its description cleaned for people.
    case error(String, description: String?)
    /// An `error` field that is not an OAuth error code (wrong type or
    /// characters): not to be shown, not to be trusted.
    case malformed

    package init(_ body: SecureBytes) {
        struct Wire: Decodable {
            var error: String?
            var error_description: String?
        }
        struct AnyError: Decodable {
            var error: Bool
            enum Keys: String, CodingKey { case error }
            init(from decoder: any Decoder) throws {
                error = try decoder.container(keyedBy: Keys.self).contains(.error)
            }
        }
        let data = body.withUnsafeBytes { Data($0) }
        let code: String?
        let description: String?
        if let w = try? JSONDecoder().decode(Wire.self, from: data) {
            (code, description) = (w.error, w.error_description)
        } else if (try? JSONDecoder().decode(AnyError.self, from: data))?.error == true {
            self = .malformed  // an object whose "error" is no string
            return
        } else if let pairs = FormAnswer.pairs(body) {
            code = pairs.first { $0.0 == "error" }?.1
            description = pairs.first { $0.0 == "error_description" }?.1
        } else {
            self = .none
            return
        }
        guard let code else {
            self = .none
            return
        }
        guard ProviderText.isErrorCode(code) else {
            self = .malformed
            return
        }
        let shown = description.map { ProviderText.sanitized($0) }.flatMap { $0.isEmpty ? nil : $0 }
        self = .error(code, description: shown)
    }

    /// The error code, if the body carries a well-formed one.
    var code: String? {
        if case .error(let c, _) = self { return c }
        return nil
    }
}

extension HTTPError {
    /// How an HTTP failure looks to a vault user.
    package func vaultError(_ what: String) -> VaultError {
        switch code {
        case .network: VaultError(.transient, "\(what): \(reason)", remedy: .checkNetwork)
        case .tooLarge, .redirect: VaultError(.badResponse, "\(what): \(reason)")
        case .tls: VaultError(.badResponse, "\(what): \(reason)")
        case .refusedURL: VaultError(.invalidInput, "\(what): \(reason)")
        case .unavailable: VaultError(.internalError, "\(what): \(reason)")
        }
    }
}
