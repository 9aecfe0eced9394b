import FoundationEssentials
import VaultHTTP

/// An OAuth 2.0 / OpenID Connect provider: endpoints, client and quirks,
/// all as data (docs/providers.md). Presets ship in config/providers/;
/// files in `$XDG_CONFIG_HOME/vault/providers/` add or override them.
public struct Provider: Sendable, Equatable {
    /// How a person can authorize.
    public enum Flow: String, Sendable, Codable, CaseIterable {
        /// Authorization code with PKCE through the system browser and a loopback redirect.
        case browser
        /// Device authorization grant (RFC 8628), for machines without a browser.
        case device
        /// Like browser, but the person pastes the redirect URL or the code.
        case paste
        /// No person: the client gets tokens for itself (RFC 6749 section
        /// 4.4), with `MachineGrants` rather than `Authorizer`. Needs only
        /// a token endpoint.
        case clientCredentials = "client-credentials"

        /// The flows for a person that a provider's endpoints allow, for a
        /// provider that lists none: browser and paste with an
        /// authorization endpoint, device with a device authorization
        /// endpoint. Client credentials are never implied: a provider for
        /// machines lists them.
        static func forPeople(authorizationEndpoint: Bool, deviceEndpoint: Bool) -> [Flow] {
            (authorizationEndpoint ? [.browser] : []) + (deviceEndpoint ? [.device] : [])
                + (authorizationEndpoint ? [.paste] : [])
        }
    }

    /// The name grants refer to it by.
    public var name: String
    /// A name for people, if different.
    public var displayName: String?
    /// OAuth 2.0 (default) or OAuth 1.0a.
    public var protocolVersion: Grant.Kind
    /// OAuth 1.0a: where temporary credentials come from.
    public var requestTokenEndpoint: String?
    /// OAuth 1.0a: HMAC-SHA1 (default), RSA-SHA1 or PLAINTEXT.
    public var signatureMethod: OAuth1SignatureMethod
    /// The OpenID Connect issuer, if any.
    public var issuer: String?
    /// Where the person authorizes.
    public var authorizationEndpoint: String?
    /// Where codes and refresh tokens are exchanged for tokens.
    public var tokenEndpoint: String?
    /// Where the device flow starts (RFC 8628).
    public var deviceAuthorizationEndpoint: String?
    /// Where tokens are revoked (RFC 7009).
    public var revocationEndpoint: String?
    /// The userinfo endpoint, for the liveness probe and the account name.
    public var userinfoEndpoint: String?
    /// Where authorization requests are pushed before the browser opens
    /// (RFC 9126); when set, the browser sees only `client_id` and
    /// `request_uri`.
    public var pushedAuthorizationRequestEndpoint: String?
    /// True when the provider takes authorization requests only pushed
    /// (RFC 9126 section 5): an authorization without a pushed-request
    /// endpoint is refused before it starts.
    public var requirePushedAuthorizationRequests: Bool = false
    /// True when the provider names itself (`iss`) in every authorization
    /// response (RFC 9207): an answer without it is refused. An `iss` that
    /// is present is compared with the issuer either way.
    public var authorizationResponseIssParameterSupported: Bool = false
    /// The JWS algorithms the provider accepts in DPoP proofs (RFC 9449
    /// section 5.1), as its metadata lists them; nil when it says nothing.
    public var dpopSigningAlgValuesSupported: [String]?
    /// True when every grant of this provider is bound to a DPoP key
    /// (RFC 9449 section 5.2's client metadata), as if `vault add --dpop`.
    public var dpopBoundAccessTokens: Bool = false
    /// The grant types the provider's metadata lists (RFC 8414
    /// `grant_types_supported`): whether it offers RFC 8693 token exchange,
    /// for one; nil when it says nothing.
    public var grantTypesSupported: [String]?
    /// Scopes asked for by default.
    public var scopes: [String]
    /// The OAuth client id.
    public var clientID: String?
    /// The client secret, for confidential clients.
    public var clientSecret: String?
    /// Extra query parameters of the authorization request.
    public var authorizationParams: [String: String]
    /// The authorization flows the provider allows.
    public var flows: [Flow]
    /// A fixed loopback redirect URI, for providers that register exact URIs.
    public var redirectURI: String?
    /// `client_secret_basic` (default) or `client_secret_post`.
    public var tokenEndpointAuthMethod: String
    /// True when the client must never send a secret (Microsoft public clients).
    public var publicClient: Bool
    /// How the provider's error answers deviate from RFC 6749 section 5.2:
    /// its own error codes, errors in HTTP 200 answers (GitHub).
    public var errorQuirks: ErrorQuirks
    /// Hosts whose git credentials this provider's grants can serve.
    public var gitHosts: [String]
    /// The user name git should send with the token (default `oauth2`).
    public var gitUsername: String?
    /// Defaults for `{name}` placeholders in endpoints (Microsoft's tenant).
    public var variables: [String: String]
    /// The claim that names the account (default: email, then sub).
    public var accountClaim: String?
    /// Free text for people: quirks, what to add.
    public var notes: String?
    /// How a person registers an application (a client) for vault with
    /// this provider, for the message that asks for one.
    public var registration: Registration?
    /// How long the provider's refresh tokens live, as it documents them;
    /// nil when the file says nothing.
    public var refreshTokenPolicy: RefreshTokenPolicy?
    /// Where the definition came from: "preset", or the user file's path.
    public var source: String
    /// The `endpoints_source` of the grant this provider was made from,
    /// when it was made from a stored grant alone.
    package var storedSource: String?
    /// Where clients can register themselves (RFC 7591), from discovery of
    /// the issuer or from the user's provider file.
    package var registrationEndpoint: String?
    /// The client vault registered with this provider for the grant, if it did.
    package var registeredClient: RegisteredClient?

    /// How to register a client with a provider, in words for people: each
    /// field is shown as it is (escaped) when `vault add` finds no client.
    public struct Registration: Sendable, Equatable, Decodable {
        /// Where to register (an address, and what to choose there).
        public var url: String?
        /// What to enter as the redirect (callback) URI.
        public var redirectURI: String?
        /// What to set for the device flow, when the provider has one.
        public var deviceFlow: String?
        /// Whether vault needs the client secret, and for which flows.
        public var clientSecret: String?

        enum CodingKeys: String, CodingKey, CaseIterable {
            case url
            case redirectURI = "redirect_uri"
            case deviceFlow = "device_flow"
            case clientSecret = "client_secret"
        }

        /// Reads the object, refusing unknown fields as provider files do.
        public init(from decoder: any Decoder) throws {
            let any = try decoder.container(keyedBy: AnyCodingKey.self)
            let known = Set(CodingKeys.allCases.map(\.rawValue))
            if let unknown = any.allKeys.map(\.stringValue).sorted().first(where: { !known.contains($0) }) {
                throw VaultError.unknownField(unknown, in: "registration.", known: known)
            }
            let c = try decoder.container(keyedBy: CodingKeys.self)
            url = try c.decodeIfPresent(String.self, forKey: .url)
            redirectURI = try c.decodeIfPresent(String.self, forKey: .redirectURI)
            deviceFlow = try c.decodeIfPresent(String.self, forKey: .deviceFlow)
            clientSecret = try c.decodeIfPresent(String.self, forKey: .clientSecret)
        }
    }

    /// True when the provider speaks OpenID Connect (an issuer and `openid`).
    public var isOpenIDConnect: Bool { issuer != nil && scopes.contains("openid") }

    /// The configuration a stored grant keeps for refresh and revocation.
    public var storedConfiguration: ProviderConfiguration {
        var c = ProviderConfiguration(
            name: name, issuer: issuer, authorizationEndpoint: authorizationEndpoint, tokenEndpoint: tokenEndpoint,
            deviceAuthorizationEndpoint: deviceAuthorizationEndpoint, revocationEndpoint: revocationEndpoint,
            userinfoEndpoint: userinfoEndpoint, clientID: clientID, clientSecret: publicClient ? nil : clientSecret,
            tokenEndpointAuthMethod: tokenEndpointAuthMethod,
            signatureMethod: protocolVersion == .oauth1 ? signatureMethod.rawValue : nil, errorQuirks: errorQuirks,
            redirectURI: redirectURI, authorizationParams: authorizationParams.isEmpty ? nil : authorizationParams,
            accountClaim: accountClaim, endpointsSource: endpointsSourceLabel)
        c.registrationEndpoint = registeredClient?.endpoint
        c.registrationClientURI = registeredClient?.clientURI
        c.registrationAccessToken = registeredClient?.accessToken
        return c
    }

    /// A copy with `{name}` placeholders filled from `overrides`, then the defaults.
    public func resolved(_ overrides: [String: String] = [:]) -> Provider {
        let values = variables.merging(overrides) { $1 }
        func fill(_ s: String?) -> String? {
            guard var s else { return nil }
            for (k, v) in values { s = s.replacing("{\(k)}", with: v) }
            return s
        }
        var p = self
        p.issuer = fill(issuer)
        p.authorizationEndpoint = fill(authorizationEndpoint)
        p.tokenEndpoint = fill(tokenEndpoint)
        p.deviceAuthorizationEndpoint = fill(deviceAuthorizationEndpoint)
        p.revocationEndpoint = fill(revocationEndpoint)
        p.userinfoEndpoint = fill(userinfoEndpoint)
        p.pushedAuthorizationRequestEndpoint = fill(pushedAuthorizationRequestEndpoint)
        p.requestTokenEndpoint = fill(requestTokenEndpoint)
        p.registrationEndpoint = fill(registrationEndpoint)
        return p
    }

    /// Builds and checks a provider from a parsed file.
    package init(file f: ProviderFile, source: String) throws(VaultError) {
        guard let name = f.name else { throw VaultError(.invalidInput, "\(source): 'name' is missing") }
        do { try GrantName.validateForCommandLine(name) } catch {
            throw VaultError(.invalidInput, "\(source): invalid name '\(name)'")
        }
        self.name = name
        displayName = f.display_name
        guard let proto = Grant.Kind(rawValue: f.protocol ?? "oauth2"), proto == .oauth2 || proto == .oauth1 else {
            throw VaultError(.invalidInput, "\(source): protocol must be oauth2 or oauth1")
        }
        protocolVersion = proto
        requestTokenEndpoint = f.request_token_endpoint
        guard let method = OAuth1SignatureMethod(rawValue: f.signature_method ?? "HMAC-SHA1") else {
            throw VaultError(.invalidInput, "\(source): signature_method must be HMAC-SHA1, RSA-SHA1 or PLAINTEXT")
        }
        signatureMethod = method
        issuer = f.issuer
        authorizationEndpoint = f.authorization_endpoint
        tokenEndpoint = f.token_endpoint
        deviceAuthorizationEndpoint = f.device_authorization_endpoint
        revocationEndpoint = f.revocation_endpoint
        userinfoEndpoint = f.userinfo_endpoint
        pushedAuthorizationRequestEndpoint = f.pushed_authorization_request_endpoint
        requirePushedAuthorizationRequests = f.require_pushed_authorization_requests ?? false
        authorizationResponseIssParameterSupported = f.authorization_response_iss_parameter_supported ?? false
        dpopSigningAlgValuesSupported = f.dpop_signing_alg_values_supported
        dpopBoundAccessTokens = f.dpop_bound_access_tokens ?? false
        grantTypesSupported = f.grant_types_supported
        registrationEndpoint = f.registration_endpoint
        scopes = f.scopes ?? []
        clientID = f.client_id
        clientSecret = f.client_secret
        authorizationParams = f.authorization_params ?? [:]
        if let listed = f.flows {
            flows = listed
        } else if proto == .oauth1 {
            flows = [.browser, .paste]
        } else {
            // Without `flows`, the endpoints decide. An issuer without a
            // token endpoint, or with no endpoint for a person listed, has
            // those endpoints from discovery, and the flows with them
            // (Discovery.provider): a file with an issuer and a token
            // endpoint alone, kept to refresh imported grants, still loads.
            let listsPersonEndpoint = f.authorization_endpoint != nil || f.device_authorization_endpoint != nil
            let discovered = f.issuer != nil && (f.token_endpoint == nil || !listsPersonEndpoint)
            flows = Flow.forPeople(
                authorizationEndpoint: discovered || f.authorization_endpoint != nil,
                deviceEndpoint: discovered || f.device_authorization_endpoint != nil)
            guard !flows.isEmpty else {
                throw VaultError(
                    .invalidInput,
                    "provider '\(name)' (\(source)): needs 'authorization_endpoint' or "
                        + "'device_authorization_endpoint' for a person to authorize, or "
                        + "\"flows\": [\"client-credentials\"] for machines only")
            }
        }
        redirectURI = f.redirect_uri
        tokenEndpointAuthMethod = f.token_endpoint_auth_method ?? "client_secret_basic"
        publicClient = f.public_client ?? false
        errorQuirks = ErrorQuirks()
        errorQuirks.aliases = f.error_aliases ?? [:]
        errorQuirks.errorsWithHTTP200 = f.errors_with_http_200 ?? false
        errorQuirks.empty400IsInvalidGrant = f.empty_400_is_invalid_grant ?? false
        gitHosts = f.git_hosts ?? []
        gitUsername = f.git_username
        variables = f.variables ?? [:]
        accountClaim = f.account_claim
        notes = f.notes
        registration = f.registration
        refreshTokenPolicy = f.refresh_token_policy
        self.source = source
        try validate()
    }

    /// Checks endpoints (https, or http to loopback), flows against
    /// endpoints, the client authentication method and the redirect URI.
    func validate() throws(VaultError) {
        let where_ = "provider '\(name)' (\(source))"
        try checkEndpointURLs(where_)
        try checkFlows(where_)
        try checkExtensions(where_)
        try checkDiscovery(where_)
        try checkClient(where_)
    }

    /// Every endpoint, its variables filled in, is https (or http to
    /// loopback). `where_` names the provider in the error.
    private func checkEndpointURLs(_ where_: String) throws(VaultError) {
        let sample = resolved(variables.mapValues { _ in "x" })
        let endpoints: [(String, String?)] = [
            ("issuer", sample.issuer?.replacing("{tenantid}", with: "x")),
            ("authorization_endpoint", sample.authorizationEndpoint), ("token_endpoint", sample.tokenEndpoint),
            ("device_authorization_endpoint", sample.deviceAuthorizationEndpoint),
            ("revocation_endpoint", sample.revocationEndpoint), ("userinfo_endpoint", sample.userinfoEndpoint),
            ("request_token_endpoint", sample.requestTokenEndpoint),
            ("pushed_authorization_request_endpoint", sample.pushedAuthorizationRequestEndpoint),
            ("registration_endpoint", sample.registrationEndpoint),
        ]
        for case (let key, let value?) in endpoints {
            do { try URLPolicy.check(value) } catch {
                throw VaultError(.invalidInput, "\(where_): \(key): \(error.reason)")
            }
        }
    }

    /// There are flows, and OAuth 1.0a has its three endpoints and no
    /// device flow.
    private func checkFlows(_ where_: String) throws(VaultError) {
        guard !flows.isEmpty else { throw VaultError(.invalidInput, "\(where_): 'flows' is empty") }
        if protocolVersion == .oauth1 {
            guard requestTokenEndpoint != nil, authorizationEndpoint != nil, tokenEndpoint != nil else {
                throw VaultError(
                    .invalidInput,
                    "\(where_): OAuth 1.0a needs request_token_endpoint, authorization_endpoint and token_endpoint")
            }
            guard !flows.contains(.device) else {
                throw VaultError(.invalidInput, "\(where_): OAuth 1.0a has no device flow")
            }
        }
    }

    /// Pushed authorization requests, RFC 9207's iss and DPoP: each with
    /// what it needs, and none with OAuth 1.0a.
    private func checkExtensions(_ where_: String) throws(VaultError) {
        // Without an issuer to discover it from, a provider that takes only
        // pushed requests must name where they go.
        if requirePushedAuthorizationRequests && pushedAuthorizationRequestEndpoint == nil
            && (issuer == nil || authorizationEndpoint != nil)
        {
            throw VaultError(
                .invalidInput,
                "\(where_): require_pushed_authorization_requests needs 'pushed_authorization_request_endpoint'")
        }
        // RFC 9207: an answer's iss is compared with the issuer; a provider
        // said to send it, without an issuer to compare it with, would
        // have the mix-up defence skipped.
        if authorizationResponseIssParameterSupported && issuer == nil {
            throw VaultError(
                .invalidInput,
                "\(where_): authorization_response_iss_parameter_supported needs 'issuer', which the answers' iss "
                    + "is compared with")
        }
        if pushedAuthorizationRequestEndpoint != nil && protocolVersion == .oauth1 {
            throw VaultError(.invalidInput, "\(where_): OAuth 1.0a has no pushed authorization requests")
        }
        if dpopBoundAccessTokens {
            guard protocolVersion != .oauth1 else {
                throw VaultError(.invalidInput, "\(where_): OAuth 1.0a has no DPoP-bound tokens")
            }
            guard DPoPKey.algorithm(for: dpopSigningAlgValuesSupported) != nil else {
                throw VaultError(
                    .invalidInput,
                    "\(where_): dpop_bound_access_tokens needs a DPoP algorithm vault signs with (ES256 or EdDSA) "
                        + "in dpop_signing_alg_values_supported")
            }
        }
    }

    /// Without an issuer to discover them from, the endpoints the flows
    /// need are named.
    private func checkDiscovery(_ where_: String) throws(VaultError) {
        if tokenEndpoint == nil && issuer == nil {
            throw VaultError(.invalidInput, "\(where_): needs 'token_endpoint' or an 'issuer' to discover it")
        }
        if issuer == nil {
            if (flows.contains(.browser) || flows.contains(.paste)) && authorizationEndpoint == nil {
                throw VaultError(.invalidInput, "\(where_): the browser and paste flows need 'authorization_endpoint'")
            }
            if flows.contains(.device) && deviceAuthorizationEndpoint == nil {
                throw VaultError(.invalidInput, "\(where_): the device flow needs 'device_authorization_endpoint'")
            }
        }
    }

    /// The client authentication method, the flows a client of OAuth
    /// 1.0a has, the error aliases and the fixed redirect URI.
    private func checkClient(_ where_: String) throws(VaultError) {
        guard ["client_secret_basic", "client_secret_post", "private_key_jwt"].contains(tokenEndpointAuthMethod) else {
            throw VaultError(
                .invalidInput,
                "\(where_): token_endpoint_auth_method must be client_secret_basic, client_secret_post or private_key_jwt"
            )
        }
        if protocolVersion == .oauth1 && flows.contains(.clientCredentials) {
            throw VaultError(.invalidInput, "\(where_): OAuth 1.0a has no client credentials flow")
        }
        for (k, v) in errorQuirks.aliases where !ProviderText.isErrorCode(k) || !ProviderText.isErrorCode(v) {
            throw VaultError(.invalidInput, "\(where_): error_aliases must map error codes to error codes")
        }
        if let redirectURI {
            guard let (scheme, host) = URLPolicy.schemeAndHost(redirectURI), scheme == "http",
                URLPolicy.isLoopback(host), LoopbackRedirect(redirectURI) != nil
            else {
                throw VaultError(
                    .invalidInput,
                    "\(where_): redirect_uri must be http://127.0.0.1:PORT/PATH (a loopback address with a port)")
            }
        }
    }
}

/// A fixed loopback redirect URI, taken apart: port and path.
struct LoopbackRedirect: Equatable {
    let host: String
    let port: UInt16
    let path: String

    init?(_ uri: String) {
        guard uri.hasPrefix("http://") else { return nil }
        let rest = uri.dropFirst(7)
        let authority = rest.prefix { $0 != "/" }
        let path = rest.dropFirst(authority.count)
        guard let colon = authority.lastIndex(of: ":"), let port = UInt16(authority[authority.index(after: colon)...]),
            port > 0
        else { return nil }
        host = String(authority[..<colon])
        self.port = port
        self.path = path.isEmpty ? "/" : String(path.prefix { $0 != "?" && $0 != "#" })
    }
}

/// A provider file as written: every field optional, unknown fields refused.
package struct ProviderFile: Decodable {
    var name, display_name, issuer, authorization_endpoint, token_endpoint, device_authorization_endpoint: String?
    var revocation_endpoint, userinfo_endpoint, client_id, client_secret, redirect_uri: String?
    var pushed_authorization_request_endpoint: String?
    var require_pushed_authorization_requests, authorization_response_iss_parameter_supported: Bool?
    var dpop_signing_alg_values_supported: [String]?
    var dpop_bound_access_tokens: Bool?
    var grant_types_supported: [String]?
    var registration_endpoint: String?
    var token_endpoint_auth_method, account_claim, notes, git_username: String?
    var `protocol`, request_token_endpoint, signature_method: String?
    var scopes, git_hosts: [String]?
    var authorization_params, variables: [String: String]?
    var flows: [Provider.Flow]?
    var public_client: Bool?
    var error_aliases: [String: String]?
    var errors_with_http_200, empty_400_is_invalid_grant: Bool?
    var registration: Provider.Registration?
    var refresh_token_policy: RefreshTokenPolicy?

    enum CodingKeys: String, CodingKey, CaseIterable {
        case name, display_name, issuer, authorization_endpoint, token_endpoint, device_authorization_endpoint
        case revocation_endpoint, userinfo_endpoint, client_id, client_secret, redirect_uri
        case token_endpoint_auth_method, account_claim, notes, scopes, git_hosts, git_username, authorization_params
        case variables
        case flows, public_client, `protocol`, request_token_endpoint, signature_method
        case error_aliases, errors_with_http_200, empty_400_is_invalid_grant, registration
        case refresh_token_policy, registration_endpoint
        case pushed_authorization_request_endpoint, require_pushed_authorization_requests
        case authorization_response_iss_parameter_supported
        case dpop_signing_alg_values_supported, dpop_bound_access_tokens, grant_types_supported
    }

    /// An empty file, filled in by code (discovery).
    init() {}

    package init(from decoder: any Decoder) throws {
        let any = try decoder.container(keyedBy: AnyCodingKey.self)
        let known = Set(CodingKeys.allCases.map(\.rawValue))
        if let unknown = any.allKeys.map(\.stringValue).sorted().first(where: { !known.contains($0) }) {
            throw VaultError.unknownField(unknown, known: known)
        }
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        display_name = try c.decodeIfPresent(String.self, forKey: .display_name)
        issuer = try c.decodeIfPresent(String.self, forKey: .issuer)
        authorization_endpoint = try c.decodeIfPresent(String.self, forKey: .authorization_endpoint)
        token_endpoint = try c.decodeIfPresent(String.self, forKey: .token_endpoint)
        device_authorization_endpoint = try c.decodeIfPresent(String.self, forKey: .device_authorization_endpoint)
        revocation_endpoint = try c.decodeIfPresent(String.self, forKey: .revocation_endpoint)
        userinfo_endpoint = try c.decodeIfPresent(String.self, forKey: .userinfo_endpoint)
        registration_endpoint = try c.decodeIfPresent(String.self, forKey: .registration_endpoint)
        client_id = try c.decodeIfPresent(String.self, forKey: .client_id)
        client_secret = try c.decodeIfPresent(String.self, forKey: .client_secret)
        redirect_uri = try c.decodeIfPresent(String.self, forKey: .redirect_uri)
        token_endpoint_auth_method = try c.decodeIfPresent(String.self, forKey: .token_endpoint_auth_method)
        account_claim = try c.decodeIfPresent(String.self, forKey: .account_claim)
        notes = try c.decodeIfPresent(String.self, forKey: .notes)
        scopes = try c.decodeIfPresent([String].self, forKey: .scopes)
        git_hosts = try c.decodeIfPresent([String].self, forKey: .git_hosts)
        git_username = try c.decodeIfPresent(String.self, forKey: .git_username)
        authorization_params = try c.decodeIfPresent([String: String].self, forKey: .authorization_params)
        variables = try c.decodeIfPresent([String: String].self, forKey: .variables)
        flows = try c.decodeIfPresent([Provider.Flow].self, forKey: .flows)
        public_client = try c.decodeIfPresent(Bool.self, forKey: .public_client)
        `protocol` = try c.decodeIfPresent(String.self, forKey: .protocol)
        request_token_endpoint = try c.decodeIfPresent(String.self, forKey: .request_token_endpoint)
        signature_method = try c.decodeIfPresent(String.self, forKey: .signature_method)
        error_aliases = try c.decodeIfPresent([String: String].self, forKey: .error_aliases)
        errors_with_http_200 = try c.decodeIfPresent(Bool.self, forKey: .errors_with_http_200)
        empty_400_is_invalid_grant = try c.decodeIfPresent(Bool.self, forKey: .empty_400_is_invalid_grant)
        registration = try c.decodeIfPresent(Provider.Registration.self, forKey: .registration)
        refresh_token_policy = try c.decodeIfPresent(RefreshTokenPolicy.self, forKey: .refresh_token_policy)
        pushed_authorization_request_endpoint = try c.decodeIfPresent(
            String.self, forKey: .pushed_authorization_request_endpoint)
        require_pushed_authorization_requests = try c.decodeIfPresent(
            Bool.self, forKey: .require_pushed_authorization_requests)
        authorization_response_iss_parameter_supported = try c.decodeIfPresent(
            Bool.self, forKey: .authorization_response_iss_parameter_supported)
        dpop_signing_alg_values_supported = try c.decodeIfPresent(
            [String].self, forKey: .dpop_signing_alg_values_supported)
        dpop_bound_access_tokens = try c.decodeIfPresent(Bool.self, forKey: .dpop_bound_access_tokens)
        grant_types_supported = try c.decodeIfPresent([String].self, forKey: .grant_types_supported)
    }

    /// Fields set in `override` replace this file's.
    func merging(_ o: ProviderFile) -> ProviderFile {
        var m = self
        m.name = o.name ?? name
        m.display_name = o.display_name ?? display_name
        m.issuer = o.issuer ?? issuer
        m.authorization_endpoint = o.authorization_endpoint ?? authorization_endpoint
        m.token_endpoint = o.token_endpoint ?? token_endpoint
        m.device_authorization_endpoint = o.device_authorization_endpoint ?? device_authorization_endpoint
        m.revocation_endpoint = o.revocation_endpoint ?? revocation_endpoint
        m.userinfo_endpoint = o.userinfo_endpoint ?? userinfo_endpoint
        m.client_id = o.client_id ?? client_id
        m.client_secret = o.client_secret ?? client_secret
        m.redirect_uri = o.redirect_uri ?? redirect_uri
        m.token_endpoint_auth_method = o.token_endpoint_auth_method ?? token_endpoint_auth_method
        m.account_claim = o.account_claim ?? account_claim
        m.notes = o.notes ?? notes
        m.scopes = o.scopes ?? scopes
        m.git_hosts = o.git_hosts ?? git_hosts
        m.git_username = o.git_username ?? git_username
        m.authorization_params = o.authorization_params ?? authorization_params
        m.variables = o.variables ?? variables
        m.flows = o.flows ?? flows
        m.public_client = o.public_client ?? public_client
        m.protocol = o.protocol ?? `protocol`
        m.request_token_endpoint = o.request_token_endpoint ?? request_token_endpoint
        m.signature_method = o.signature_method ?? signature_method
        m.error_aliases = o.error_aliases ?? error_aliases
        m.errors_with_http_200 = o.errors_with_http_200 ?? errors_with_http_200
        m.empty_400_is_invalid_grant = o.empty_400_is_invalid_grant ?? empty_400_is_invalid_grant
        m.registration = o.registration ?? registration
        m.refresh_token_policy = o.refresh_token_policy ?? refresh_token_policy
        // The pushed-request and registration endpoints travel with the
        // other endpoints: a file that names its own authorization or token
        // endpoint takes neither of this one's with them.
        let ownEndpoints = o.authorization_endpoint != nil || o.token_endpoint != nil
        m.registration_endpoint = o.registration_endpoint ?? (ownEndpoints ? nil : registration_endpoint)
        m.pushed_authorization_request_endpoint =
            o.pushed_authorization_request_endpoint ?? (ownEndpoints ? nil : pushed_authorization_request_endpoint)
        m.require_pushed_authorization_requests =
            o.require_pushed_authorization_requests ?? (ownEndpoints ? nil : require_pushed_authorization_requests)
        m.authorization_response_iss_parameter_supported =
            o.authorization_response_iss_parameter_supported ?? authorization_response_iss_parameter_supported
        // What the server's proofs may be signed with is the server's, like its endpoints.
        m.dpop_signing_alg_values_supported =
            o.dpop_signing_alg_values_supported ?? (ownEndpoints ? nil : dpop_signing_alg_values_supported)
        m.dpop_bound_access_tokens = o.dpop_bound_access_tokens ?? dpop_bound_access_tokens
        m.grant_types_supported = o.grant_types_supported ?? (ownEndpoints ? nil : grant_types_supported)
        return m
    }

    /// Reads a provider file's bytes: strict JSON (RFC 8259), then its
    /// fields; errors start with `source` (the file's path).
    package static func parse(_ bytes: [UInt8], source: String) throws(VaultError) -> ProviderFile {
        // Strictly RFC 8259: the decoder alone takes a trailing comma and
        // keeps the last of two members of one name, so the file vault
        // reads could differ from the one its writer reviewed.
        do throws(StrictJSON.Problem) { try StrictJSON.check(bytes) } catch {
            throw VaultError(.invalidInput, "\(source): not JSON (RFC 8259) at \(error)")
        }
        do {
            return try JSONDecoder().decode(ProviderFile.self, from: Data(StrictJSON.withoutByteOrderMark(bytes)))
        } catch let error as VaultError {
            throw VaultError(.invalidInput, "\(source): \(error.reason)")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.dataCorrupted(context) {
            let field = context.codingPath.map(\.stringValue).joined(separator: ".")
            throw VaultError(
                .invalidInput, "\(source): \(field.isEmpty ? "not a JSON object" : "wrong value for '\(field)'")")
        } catch {
            throw VaultError(.invalidInput, "\(source): not a valid provider file")
        }
    }
}

extension VaultError {
    /// A provider file's field vault does not know, with the known ones
    /// near it (a slip of the keyboard: `scope` for `scopes`), as grant
    /// names are suggested.
    static func unknownField(_ name: String, in object: String = "", known: Set<String>) -> VaultError {
        let near = GrantName.nearest(to: name, among: known.sorted()).map { "'\(object)\($0)'" }
        let suggestion =
            near.isEmpty
            ? ""
            : "; did you mean \(near.count == 1 ? near[0] : near.dropLast().joined(separator: ", ") + " or " + near.last!)?"
        return VaultError(.invalidInput, "unknown field '\(object)\(name)'\(suggestion)")
    }
}

/// A coding key for any string, to see every key of a JSON object.
struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
}

/// A client vault registered itself with a provider (RFC 7591), and what
/// deleting it again takes (RFC 7592), as a grant keeps them.
package struct RegisteredClient: Sendable, Equatable {
    /// The registration endpoint the client was registered at.
    package var endpoint: String
    /// Where the registration is read and deleted; nil when the provider manages none.
    package var clientURI: String?
    /// The bearer token for `clientURI`: a secret, like a client secret.
    package var accessToken: String?

    /// A registered client.
    package init(endpoint: String, clientURI: String?, accessToken: String?) {
        self.endpoint = endpoint
        self.clientURI = clientURI
        self.accessToken = accessToken
    }

    /// The registration a stored configuration keeps, if vault registered its client.
    package init?(_ c: ProviderConfiguration) {
        guard let endpoint = c.registrationEndpoint else { return nil }
        self.init(endpoint: endpoint, clientURI: c.registrationClientURI, accessToken: c.registrationAccessToken)
    }
}
