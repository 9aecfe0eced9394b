import FoundationEssentials
public import VaultHTTP

/// OpenID Connect Discovery 1.0: a provider from its issuer URL.
public enum Discovery {
    /// Fetches `ISSUER/.well-known/openid-configuration` and builds a
    /// provider called `name` from it. The document's issuer must be
    /// exactly the one asked for.
    public static func provider(
        name: String, issuer: String, transport: any HTTPTransport
    ) throws(VaultError) -> Provider {
        try provider(name: name, issuer: issuer, transport: transport, base: nil)
    }

    static func provider(name: String, issuer: String, transport: any HTTPTransport, base: ProviderFile?)
        throws(VaultError) -> Provider
    {
        let trimmed = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        let url = trimmed + "/.well-known/openid-configuration"
        let response: HTTPResponse
        do {
            response = try transport.send(
                HTTPRequest(method: "GET", url: url, headers: [("Accept", "application/json")]))
        } catch {
            // The transport's reason names the address already: say it once.
            throw error.vaultError("discovery")
        }
        guard response.status == 200 else {
            throw VaultError(
                response.status >= 500 || response.status == 429 ? .transient : .badResponse,
                "discovery at \(URLPolicy.redacted(url)) answered HTTP \(response.status)")
        }
        struct Document: Decodable {
            var issuer: String
            var authorization_endpoint: String?
            var token_endpoint: String?
            var device_authorization_endpoint: String?
            var revocation_endpoint: String?
            var userinfo_endpoint: String?
            var token_endpoint_auth_methods_supported: [String]?
            var registration_endpoint: String?
            var pushed_authorization_request_endpoint: String?
            var require_pushed_authorization_requests: Flag?
            var authorization_response_iss_parameter_supported: Flag?
            var dpop_signing_alg_values_supported: Strings?
            var grant_types_supported: Strings?
        }
        /// A metadata list of strings; any other value reads as absent.
        struct Strings: Decodable {
            var value: [String]?
            init(from decoder: any Decoder) throws {
                value = try? decoder.singleValueContainer().decode([String].self)
            }
        }
        /// A metadata flag: true only as JSON `true`; any other value reads
        /// as false rather than making the whole document unusable.
        struct Flag: Decodable {
            var value: Bool
            init(from decoder: any Decoder) throws {
                value = (try? decoder.singleValueContainer().decode(Bool.self)) ?? false
            }
        }
        guard let doc = try? JSONDecoder().decode(Document.self, from: response.body.withUnsafeBytes { Data($0) })
        else {
            throw VaultError(
                .badResponse, "discovery at \(URLPolicy.redacted(url)) did not return a discovery document")
        }
        guard doc.issuer == trimmed || doc.issuer == issuer else {
            throw VaultError(.badResponse, "the discovery document names another issuer ('\(doc.issuer)')")
        }
        var file = ProviderFile()
        file.name = name
        file.issuer = doc.issuer
        file.authorization_endpoint = doc.authorization_endpoint
        file.token_endpoint = doc.token_endpoint
        file.device_authorization_endpoint = doc.device_authorization_endpoint
        file.revocation_endpoint = doc.revocation_endpoint
        file.userinfo_endpoint = doc.userinfo_endpoint
        file.pushed_authorization_request_endpoint = doc.pushed_authorization_request_endpoint
        file.require_pushed_authorization_requests = doc.require_pushed_authorization_requests?.value
        file.authorization_response_iss_parameter_supported = doc.authorization_response_iss_parameter_supported?.value
        file.dpop_signing_alg_values_supported = doc.dpop_signing_alg_values_supported?.value
        file.grant_types_supported = doc.grant_types_supported?.value
        file.registration_endpoint = doc.registration_endpoint
        file.flows = Provider.Flow.forPeople(
            authorizationEndpoint: doc.authorization_endpoint != nil,
            deviceEndpoint: doc.device_authorization_endpoint != nil)
        file.scopes = ["openid", "email"]
        file.token_endpoint_auth_method = authMethod(supported: doc.token_endpoint_auth_methods_supported)
        // A provider file of the same name keeps its client and quirks.
        // What the file says wins over what was discovered.
        let merged = base.map { file.merging($0) } ?? file
        return try Provider(file: merged, source: "discovered from \(doc.issuer)")
    }

    /// The client authentication vault uses, from the methods the provider
    /// lists: Basic when listed, or when nothing is listed (OpenID Connect
    /// Discovery's default); else the secret in the body when that is
    /// listed. Other methods (private_key_jwt, ...) leave Basic, which the
    /// provider then refuses with a clear invalid_client.
    static func authMethod(supported: [String]?) -> String {
        guard let supported, !supported.contains("client_secret_basic") else { return "client_secret_basic" }
        return supported.contains("client_secret_post") ? "client_secret_post" : "client_secret_basic"
    }
}
