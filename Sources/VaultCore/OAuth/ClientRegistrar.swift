import FoundationEssentials
import VaultCrypto
package import VaultHTTP

/// Dynamic client registration: a public client for vault registered at
/// the provider's registration endpoint (RFC 7591), and deleted again
/// (RFC 7592). The endpoint is only ever the one the provider's discovery
/// document or the user's provider file names, and the registered client
/// is kept with exactly that provider's endpoints.
package struct ClientRegistrar {
    /// What a successful registration gives.
    package struct Client: Equatable, Sendable {
        /// The client id the provider issued.
        package var id: String
        /// A secret, when the provider issued one although none was asked for.
        package var secret: String?
        /// How the client authenticates at the token endpoint: `client_secret_basic` or `client_secret_post` with a secret.
        package var authMethod: String?
        /// The registration, with what deletes it.
        package var registration: RegisteredClient
    }

    let transport: any HTTPTransport

    /// A registrar that sends its requests with `transport`.
    package init(transport: any HTTPTransport) { self.transport = transport }

    /// The client metadata vault registers (RFC 7591 section 2): a native
    /// public client with the authorization code grant and a loopback
    /// redirect (RFC 8252); PKCE is used with it always.
    static func metadata(redirectURI: String) -> [String: JSONValue] {
        [
            "client_name": .string("vault"),
            "redirect_uris": .array([.string(redirectURI)]),
            "token_endpoint_auth_method": .string("none"),
            "grant_types": .array([.string("authorization_code"), .string("refresh_token")]),
            "response_types": .array([.string("code")]),
            "application_type": .string("native"),
            // glewlwyd makes a client confidential unless told otherwise,
            // whatever its token_endpoint_auth_method, and its token
            // endpoint then refuses the client; servers that do not know
            // this field ignore it (RFC 7591 section 2).
            "client_confidential": .bool(false),
        ]
    }

    /// Registers a public client for `redirectURI` at `endpoint` and checks
    /// the provider's answer strictly.
    package func register(at endpoint: String, redirectURI: String) throws(VaultError) -> Client {
        let what = "registering a client at \(URLPolicy.redacted(endpoint))"
        let body: SecureBytes
        do {
            let data = try JSONEncoder().encode(JSONValue.object(Self.metadata(redirectURI: redirectURI)))
            body = try SecureBytes(copying: Array(data))
        } catch {
            throw VaultError(.internalError, "\(what): cannot encode the client metadata")
        }
        let response: HTTPResponse
        do {
            response = try transport.send(
                HTTPRequest(
                    method: "POST", url: endpoint,
                    headers: [("Content-Type", "application/json"), ("Accept", "application/json")], body: body))
        } catch {
            throw error.vaultError(what)
        }
        // RFC 7591 answers 201; glewlwyd answers 200.
        guard response.status == 201 || response.status == 200 else {
            throw Self.refusal(response, what: what)
        }
        return try Self.client(from: response.body, endpoint: endpoint, redirectURI: redirectURI, what: what)
    }

    /// Why the registration endpoint refused, in words for people.
    static func refusal(_ response: HTTPResponse, what: String) -> VaultError {
        let status = response.status
        if status >= 500 || status == 429 {
            return VaultError(.transient, "\(what): the provider answered HTTP \(status)", remedy: .tryAgainShortly)
        }
        if status == 401 || status == 403 {
            return VaultError(
                .refused,
                "\(what): the provider allows registration only with an initial access token (HTTP \(status)), "
                    + "which vault does not have", remedy: .giveClient(oauth1: false))
        }
        switch OAuthErrorBody(response.body) {
        case .error(let code, let description):
            let detail = description.map { ": \($0)" } ?? ""
            let meaning: String
            switch code {
            case "invalid_redirect_uri": meaning = "the provider does not accept vault's loopback redirect URI"
            case "invalid_client_metadata": meaning = "the provider refuses the client vault asked for"
            case "invalid_software_statement", "unapproved_software_statement":
                meaning = "the provider wants a software statement, which vault does not have"
            default: meaning = "the provider refused"
            }
            return VaultError(
                .refused, "\(what): \(meaning) (\(code)\(detail))", remedy: .giveClient(oauth1: false))
        case .none, .malformed:
            return VaultError(.badResponse, "\(what): the provider answered HTTP \(status)")
        }
    }

    /// The registered client in a success answer: `client_id` a string of
    /// visible ASCII, the redirect URI echoed as sent, any secret with a
    /// method that uses it, and registration management (RFC 7592) only at
    /// the registration endpoint's own origin, with its token.
    static func client(from body: SecureBytes, endpoint: String, redirectURI: String, what: String)
        throws(VaultError) -> Client
    {
        func bad(_ why: String) -> VaultError { VaultError(.badResponse, "\(what): \(why)") }
        // The answer carries the registration access token and maybe a
        // client secret: its copy for the decoder is wiped once read, as
        // token responses' are.
        var data = body.withUnsafeBytes { Data($0) }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        guard let value = try? JSONDecoder().decode(JSONValue.self, from: data), case .object(let o) = value
        else { throw bad("the answer is not a JSON object") }
        func text(_ key: String) throws(VaultError) -> String? {
            switch o[key] {
            case nil, .null?: return nil
            case .string(let s)?:
                guard !s.isEmpty, s.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value < 0x7f }) else {
                    throw bad("'\(key)' is empty or not visible ASCII")
                }
                return s
            default: throw bad("'\(key)' is not a string")
            }
        }
        func texts(_ key: String) throws(VaultError) -> [String]? {
            switch o[key] {
            case nil, .null?: return nil
            case .array(let a)?:
                var out: [String] = []
                for case .string(let s) in a { out.append(s) }
                guard out.count == a.count else { throw bad("'\(key)' is not a list of strings") }
                return out
            default: throw bad("'\(key)' is not a list of strings")
            }
        }
        guard let id = try text("client_id") else { throw bad("the answer has no client_id") }
        // The server may change metadata it was sent (RFC 7591 section
        // 3.2.1): a client vault cannot use is refused here, not stored.
        guard let uris = try texts("redirect_uris") else { throw bad("the answer does not list the redirect URIs") }
        guard uris == [redirectURI] else { throw bad("the provider registered other redirect URIs than vault's") }
        if let grants = try texts("grant_types"), !grants.contains("authorization_code") {
            throw bad("the registered client may not use the authorization code grant")
        }
        if let types = try texts("response_types"), !types.contains("code") {
            throw bad("the registered client may not use response type code")
        }
        let secret = try text("client_secret")
        var authMethod: String? = nil
        switch try text("token_endpoint_auth_method") {
        case nil:
            // RFC 7591 section 2: absent means client_secret_basic.
            authMethod = secret == nil ? nil : "client_secret_basic"
        case "none"?:
            guard secret == nil else { throw bad("the provider issued a client secret for a client without one") }
        case let method? where method == "client_secret_basic" || method == "client_secret_post":
            guard secret != nil else { throw bad("the client is to authenticate with \(method) but has no secret") }
            authMethod = method
        case let method?:
            throw bad("the registered client is to authenticate with \(method), which vault cannot")
        }
        let clientURI = try text("registration_client_uri")
        let token = try text("registration_access_token")
        guard (clientURI == nil) == (token == nil) else {
            throw bad("the answer has one of registration_client_uri and registration_access_token without the other")
        }
        if let clientURI {
            do { try URLPolicy.check(clientURI) } catch { throw bad("registration_client_uri: \(error.reason)") }
            // The registration access token goes only where the client was registered.
            guard let mine = origin(endpoint), origin(clientURI) == mine else {
                throw bad("registration_client_uri is not at the registration endpoint's host")
            }
        }
        return Client(
            id: id, secret: secret, authMethod: authMethod,
            registration: RegisteredClient(endpoint: endpoint, clientURI: clientURI, accessToken: token))
    }

    /// `scheme://authority` of an absolute URL, lower-cased.
    static func origin(_ url: String) -> String? {
        guard let scheme = url.firstRange(of: "://") else { return nil }
        let rest = url[scheme.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        return (url[..<scheme.upperBound] + authority).lowercased()
    }

    /// What deleting a registration came to.
    package enum Deletion: Equatable {
        /// The provider deleted the client (RFC 7592 section 2.3).
        case deleted
        /// The provider no longer knows the client: it answered 401 or 404,
        /// what RFC 7592 section 2 has for a deleted client's token (glewlwyd:
        /// 401 with an empty body).
        case gone
        /// The grant keeps no registration_client_uri: the provider manages no registrations.
        case unmanaged
    }

    /// Deletes the registered client `registration` (RFC 7592 section 2.3).
    package func delete(_ registration: RegisteredClient) throws(VaultError) -> Deletion {
        guard let uri = registration.clientURI, let token = registration.accessToken else { return .unmanaged }
        let what = "deleting the client registration"
        // Checked again, whatever stored it: the token goes only to the
        // registration endpoint's host, and only as a header can carry it.
        do { try URLPolicy.check(uri) } catch {
            throw VaultError(.invalidInput, "\(what): registration_client_uri: \(error.reason)")
        }
        guard let mine = ClientRegistrar.origin(registration.endpoint), ClientRegistrar.origin(uri) == mine else {
            throw VaultError(
                .invalidInput, "\(what): registration_client_uri is not at the registration endpoint's host")
        }
        guard !token.isEmpty, token.unicodeScalars.allSatisfy({ (0x21...0x7e).contains($0.value) }) else {
            throw VaultError(.invalidInput, "\(what): the registration access token is not one a header can carry")
        }
        let response: HTTPResponse
        do {
            response = try transport.send(
                HTTPRequest(method: "DELETE", url: uri, headers: [("Authorization", "Bearer \(token)")]))
        } catch {
            throw error.vaultError(what)
        }
        // RFC 7592 section 2: a token of a client that is no longer there
        // gets 401; some servers say 404. Either way nothing is left to delete.
        if response.status == 401 || response.status == 404 { return .gone }
        // RFC 7592 answers 204; glewlwyd answers 200.
        guard response.status == 204 || response.status == 200 else {
            if response.status >= 500 || response.status == 429 {
                throw VaultError(.transient, "\(what): the provider answered HTTP \(response.status)")
            }
            let code = OAuthErrorBody(response.body).code.map { " (\($0))" } ?? ""
            throw VaultError(.refused, "\(what): the provider answered HTTP \(response.status)\(code)")
        }
        return .deleted
    }
}
