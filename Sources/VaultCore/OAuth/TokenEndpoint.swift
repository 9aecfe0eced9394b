package import FoundationEssentials
public import VaultCrypto
public import VaultHTTP

/// Calls a provider's token-style endpoints (token, device authorization,
/// revocation): form-encoded POSTs with client authentication, answers in
/// JSON (or form encoding, which GitHub sends without an Accept header),
/// and errors classified by how a caller recovers (AppAuth's rule).
public struct TokenEndpoint {
    let transport: any HTTPTransport
    let client: OAuthClient

    /// Creates a client for `client` over `transport`.
    public init(transport: any HTTPTransport, client: OAuthClient) {
        self.transport = transport
        self.client = client
    }

    /// POSTs `form` to `url` with the client's authentication and returns the parsed JSON body.
    func post(_ url: String, form: [(String, String)], what: String, timeout: Double = 30) throws(VaultError)
        -> (Int, SecureBytes)
    {
        guard let clientID = client.id else {
            throw VaultError(
                .invalidInput, "provider '\(client.providerName)' has no client id",
                remedy: .configureClient)
        }
        var pairs = form
        var headers: [(name: String, value: String)] = [
            ("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json"),
        ]
        if let secret = client.secret {
            if client.authMethod == "client_secret_post" {
                pairs += [("client_id", clientID), ("client_secret", secret)]
            } else {
                // RFC 6749 section 2.3.1: form-encode both parts before base64.
                let raw = FormEncoding.percentEncode(clientID) + ":" + FormEncoding.percentEncode(secret)
                headers.append(("Authorization", "Basic " + Base64.encodeString(Array(raw.utf8), .standard)))
            }
        } else {
            pairs.append(("client_id", clientID))
        }
        let body = try wrap { () throws(CryptoError) in try SecureBytes(copying: Array(FormEncoding.encode(pairs).utf8))
        }
        let response: HTTPResponse
        do {
            var request = HTTPRequest(method: "POST", url: url, headers: headers, body: body)
            request.timeout = timeout
            response = try transport.send(request)
        } catch {
            throw error.vaultError(what)
        }
        return (response.status, response.body)
    }

    /// A token response: 200 with an access token, else a classified error.
    func tokenResponse(_ url: String, form: [(String, String)], what: String, timeout: Double = 30)
        throws(VaultError) -> TokenResponse
    {
        let (status, body) = try post(url, form: form, what: what, timeout: timeout)
        guard status == 200 else { throw TokenEndpoint.classify(status: status, body: body, what: what) }
        let response: TokenResponse
        do { response = try TokenResponse(json: TokenEndpoint.normalized(body)) } catch {
            throw VaultError(.badResponse, "\(what): the provider's answer is not a token response (\(error.reason))")
        }
        guard response.accessToken != nil else {
            throw VaultError(.badResponse, "\(what): the provider's answer has no access_token")
        }
        if let type = response.tokenType, type.lowercased() != "bearer" {
            throw VaultError(.badResponse, "\(what): unsupported token type '\(type)'")
        }
        return response
    }

    /// Turns an error answer into a typed error. OAuth error codes decide
    /// first; a bare status (some providers send no body) decides otherwise.
    static func classify(status: Int, body: SecureBytes, what: String) -> VaultError {
        let parsed = OAuthErrorBody(body)
        if let code = parsed?.error {
            let description = parsed?.description.map { ": \($0)" } ?? ""
            if code == "temporarily_unavailable" || code == "server_error" || code == "slow_down" {
                return VaultError(
                    .transient, "\(what): the provider is unavailable (\(code)\(description))", oauthError: code)
            }
            return VaultError(.refused, "\(what): the provider refused: \(code)\(description)", oauthError: code)
        }
        switch status {
        case 500...599, 429:
            return VaultError(.transient, "\(what): the provider answered HTTP \(status)")
        case 400, 401, 403:
            return VaultError(.refused, "\(what): the provider refused the request (HTTP \(status), no error code)")
        default:
            return VaultError(.badResponse, "\(what): unexpected HTTP \(status) from the provider")
        }
    }

    /// Some providers answer in form encoding; make it JSON for the parser.
    package static func normalized(_ body: SecureBytes) throws(VaultError) -> SecureBytes {
        let first = body.withUnsafeBytes { $0.first { $0 != 0x20 && $0 != 0x0a && $0 != 0x0d && $0 != 0x09 } }
        guard let first, first != UInt8(ascii: "{") else { return body }
        let text = body.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        var object: [String: String] = [:]
        for (k, v) in FormEncoding.decode(Substring(text)) where object[k] == nil { object[k] = v }
        var data: Data
        do { data = try JSONEncoder().encode(object) } catch {
            throw VaultError(.badResponse, "cannot read the answer")
        }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        // A form answer carries expires_in as text; TokenResponse accepts that.
        return try wrap { () throws(CryptoError) in try SecureBytes(copying: data) }
    }
}

/// Who vault is at a provider: client id, secret and how to present them.
public struct OAuthClient: Sendable {
    /// For messages.
    public var providerName: String
    /// The client id, if any.
    public var id: String?
    /// Nil for public clients.
    public var secret: String?
    /// `client_secret_basic` or `client_secret_post`.
    public var authMethod: String

    /// The client of a provider definition.
    public init(_ p: Provider) {
        providerName = p.name
        id = p.clientID
        secret = p.publicClient ? nil : p.clientSecret
        authMethod = p.tokenEndpointAuthMethod
    }

    /// The client a stored grant remembers.
    public init(_ c: ProviderConfiguration, providerName: String) {
        self.providerName = providerName
        id = c.clientID
        secret = c.clientSecret
        authMethod = c.tokenEndpointAuthMethod ?? "client_secret_basic"
    }
}

/// `{"error": ..., "error_description": ...}` of RFC 6749 section 5.2.
package struct OAuthErrorBody {
    let error: String?
    let description: String?

    package init?(_ body: SecureBytes) {
        struct Wire: Decodable {
            var error: String?
            var error_description: String?
        }
        let data = body.withUnsafeBytes { Data($0) }
        if let w = try? JSONDecoder().decode(Wire.self, from: data), w.error != nil {
            error = w.error
            description = w.error_description.map { OAuthErrorBody.clean($0) }
            return
        }
        let text = String(decoding: data, as: UTF8.self)
        let pairs = FormEncoding.decode(Substring(text))
        guard let e = pairs.first(where: { $0.0 == "error" })?.1, !e.isEmpty, !text.hasPrefix("<") else { return nil }
        error = e
        description = pairs.first { $0.0 == "error_description" }.map { OAuthErrorBody.clean($0.1) }
    }

    /// Keeps a provider's message printable and short.
    static func clean(_ s: String) -> String {
        String(s.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7f }.prefix(300).map(Character.init))
    }
}

extension HTTPError {
    /// How an HTTP failure looks to a vault user.
    func vaultError(_ what: String) -> VaultError {
        switch code {
        case .network: VaultError(.transient, "\(what): \(reason)", hint: "check the network and try again")
        case .tooLarge, .redirect: VaultError(.badResponse, "\(what): \(reason)")
        case .tls: VaultError(.badResponse, "\(what): \(reason)")
        case .refusedURL: VaultError(.invalidInput, "\(what): \(reason)")
        case .unavailable: VaultError(.internalError, "\(what): \(reason)")
        }
    }
}
