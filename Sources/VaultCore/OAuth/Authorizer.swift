import FoundationEssentials
internal import Glibc
package import VaultCrypto
public import VaultHTTP

/// What an authorization needs from the person's side: a browser, a place
/// to show a device code, a way to paste. The CLI implements it; tests
/// script it.
public protocol AuthorizationUI {
    /// Opens `url` in the person's browser (and always shows it, in case
    /// no browser opens).
    func openBrowser(_ url: String)
    /// Tells the person something (the device code and where to enter it).
    func show(_ message: String)
    /// Reads the redirect URL or the code the person pastes.
    func readPasted(prompt: String) throws(VaultError) -> String
    /// Shows `url` to the person and, when `launchURL` is given, opens
    /// that instead in the browser: a loopback address that redirects this
    /// user's browser to `url`, so no command line carries `url`'s state
    /// or PKCE challenge. Without `launchURL` nothing is started.
    func openBrowser(_ url: String, launching launchURL: String?)
}

extension AuthorizationUI {
    /// Opens `url` itself, for interfaces that start no process.
    public func openBrowser(_ url: String, launching launchURL: String?) { openBrowser(url) }
}

/// What to authorize.
public struct AuthorizationRequest: Sendable {
    /// The provider to authorize at.
    public var provider: Provider
    /// Browser, device or paste.
    public var flow: Provider.Flow
    /// Scopes to ask for; the provider's defaults when empty.
    public var scopes: [String]
    /// The account to preselect at the provider (`login_hint`).
    public var loginHint: String?
    /// Seconds to wait for the browser or the device approval.
    public var timeout: Double
    /// Parameters added to the authorization URL for this request (after
    /// the provider's `authorizationParams`, which they override). The
    /// protocol's own (`AuthorizationRequest.protocolParameters`) are
    /// refused when the authorization starts.
    public var additionalParameters: [String: String] = [:]
    /// Parameters and headers added to the token request that ends this
    /// authorization (the code exchange, or the device flow's polls).
    public var tokenExtras: TokenRequestExtras = .none
    /// The key to bind the grant's tokens to (RFC 9449 DPoP): its
    /// thumbprint goes in the authorization request (`dpop_jkt`) and its
    /// proofs with every token request. The grant keeps it when the
    /// provider answers with a DPoP-bound access token, or with a bearer
    /// one and a refresh token (which RFC 9449 section 5 lets it bind to
    /// the key alone).
    public var dpopKey: DPoPKey?
    /// True when a bearer access token is refused, the tokens never stored:
    /// set for a grant whose access token was DPoP-bound before, as it is
    /// for any grant of a provider that says `dpop_bound_access_tokens`.
    public var requiresDPoPAccessToken = false

    /// The authorization URL's fields that the flow sets itself.
    public static let protocolParameters: Set<String> = [
        "response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method",
        "nonce", "login_hint", "request", "request_uri", "dpop_jkt",
    ]

    /// Creates a request.
    public init(
        provider: Provider, flow: Provider.Flow, scopes: [String] = [], loginHint: String? = nil, timeout: Double = 300
    ) {
        self.provider = provider
        self.flow = flow
        self.scopes = scopes
        self.loginHint = loginHint
        self.timeout = timeout
    }

    var effectiveScopes: [String] { scopes.isEmpty ? provider.scopes : scopes }
}

/// Runs OAuth 2.0 / OpenID Connect authorizations: authorization code with
/// PKCE (S256), `state` and, for OpenID Connect, `nonce`, always; or the
/// device authorization grant. Returns the grant; stores nothing.
public struct Authorizer {
    let transport: any HTTPTransport
    let ui: any AuthorizationUI
    let time: any TimeSource
    let sleep: @Sendable (Double) -> Void

    /// Creates an authorizer.
    public init(
        transport: any HTTPTransport, ui: any AuthorizationUI, time: any TimeSource = SystemTime(),
        sleep: (@Sendable (Double) -> Void)? = nil
    ) {
        self.transport = transport
        self.ui = ui
        self.time = time
        self.sleep = sleep ?? Authorizer.systemSleep
    }

    /// Sleeps the thread, resuming after signals.
    static let systemSleep: @Sendable (Double) -> Void = { seconds in
        var t = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
        var left = timespec()
        while nanosleep(&t, &left) != 0 && errno == EINTR { t = left }
    }

    /// Runs the authorization and returns the new grant.
    public func authorize(_ request: AuthorizationRequest) throws(VaultError) -> Grant {
        let p = request.provider
        guard p.flows.contains(request.flow) else {
            throw VaultError(
                .invalidInput, "provider '\(p.name)' does not offer the \(request.flow.rawValue) flow",
                remedy: .offeredFlows(p.flows))
        }
        if p.protocolVersion == .oauth1 { return try oauth1Flow(request) }
        switch request.flow {
        case .browser, .paste: return try codeFlow(request)
        case .device: return try deviceFlow(request)
        case .clientCredentials:
            throw VaultError(
                .invalidInput, "client credentials involve no person: use MachineGrants.clientCredentials")
        }
    }

    // MARK: Authorization code

    /// The authorization code flow (RFC 6749 section 4.1, with PKCE), in
    /// AppAuth's three steps: the request the browser is sent with
    /// (`authorizationRequest`), the answer it comes back with
    /// (`authorizationCode`), and the exchange of the code for tokens.
    func codeFlow(_ request: AuthorizationRequest) throws(VaultError) -> Grant {
        let p = request.provider
        guard let authorizationEndpoint = p.authorizationEndpoint, let tokenEndpoint = p.tokenEndpoint,
            let clientID = p.clientID
        else {
            throw VaultError(
                .invalidInput, "provider '\(p.name)' needs an authorization endpoint, a token endpoint and a client id",
                remedy: p.clientID == nil ? .giveClient(oauth1: false) : nil)
        }
        // Refused before anything is sent: without an issuer, the iss the
        // provider says it sends could not be checked (RFC 9207).
        try Authorizer.requireIssuerForIss(p)
        let pkce = try PKCE()
        let state = try RandomToken.make()
        let oidc = p.issuer != nil && request.effectiveScopes.contains("openid")
        let nonce = oidc ? try RandomToken.make() : nil
        let fixed = p.redirectURI.flatMap(LoopbackRedirect.init)

        var listener: LoopbackListener? = nil
        let redirectURI: String
        if request.flow == .browser {
            do {
                listener = try LoopbackListener(port: fixed?.port ?? 0, path: fixed?.path ?? "/callback")
            } catch {
                throw VaultError(.io, "cannot start the redirect listener: \(error.reason)", remedy: .useFlow([.paste]))
            }
            redirectURI = p.redirectURI ?? listener!.redirectURI
        } else {
            // Nothing listens: the browser ends on an error page whose
            // address the person copies.
            redirectURI = p.redirectURI ?? "http://127.0.0.1:1/callback"
        }

        let query = try authorizationQuery(
            request, clientID: clientID, redirectURI: redirectURI, state: state, pkce: pkce, nonce: nonce)
        let (url, pushed) = try authorizationRequest(query, at: authorizationEndpoint, clientID: clientID, request)
        var answer = try browse(url, listener: listener, request)
        if answer == nil {
            answer = try pasted(ui.readPasted(prompt: "paste the address the browser ended on (or the code): "))
        }
        let code = try authorizationCode(in: answer ?? [], state: state, pushed: pushed, request)
        let endpoint = TokenEndpoint(transport: transport, client: client(p, request))
        let response = try endpoint.tokenResponse(
            tokenEndpoint,
            form: [
                ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                ("code_verifier", pkce.verifier),
            ], what: "exchanging the authorization code", extras: request.tokenExtras)
        return try grant(from: response, request: request, nonce: nonce)
    }

    /// Shows `url` to the person and, when `listener` listens for the
    /// redirect (the browser flow), waits for it: the answer's parameters,
    /// or nil for the paste flow. The address the browser is started with
    /// is a loopback one that only this user's processes can follow (see
    /// `LoopbackListener`): the real one carries the request's secrets
    /// (state and the PKCE challenge, an OAuth 1.0a request token), and a
    /// command line is readable by every local user.
    func browse(_ url: String, listener: LoopbackListener?, _ request: AuthorizationRequest) throws(VaultError)
        -> [(String, String)]?
    {
        ui.openBrowser(url, launching: listener?.offer(url, at: "/start/" + (try RandomToken.make())))
        guard let listener else { return nil }
        do { return try listener.waitForRedirect(timeout: request.timeout) } catch {
            let others = request.provider.flows.filter { $0 != .browser }
            throw VaultError(
                .timedOut, "no answer from the browser within \(Int(request.timeout)) seconds",
                remedy: request.provider.redirectURI == nil
                    ? .finishSoonerOrFixRedirect(otherFlows: others) : .finishSooner(otherFlows: others))
        }
    }

    /// The authorization request's parameters: the protocol's own, then the
    /// provider's and the caller's additions, which may not replace them.
    func authorizationQuery(
        _ request: AuthorizationRequest, clientID: String, redirectURI: String, state: String, pkce: PKCE,
        nonce: String?
    ) throws(VaultError) -> [(String, String)] {
        var query: [(String, String)] = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI),
            ("scope", request.effectiveScopes.joined(separator: " ")), ("state", state),
            ("code_challenge", pkce.challenge), ("code_challenge_method", pkce.method),
        ]
        if let nonce { query.append(("nonce", nonce)) }
        if let hint = request.loginHint { query.append(("login_hint", hint)) }
        // RFC 9449 section 10: the code is bound to the key before any proof is seen.
        if let key = request.dpopKey { query.append(("dpop_jkt", key.thumbprint)) }
        for (k, v) in request.additionalParameters {
            guard !k.isEmpty, !TokenRequestExtras.hasControl(k), !TokenRequestExtras.hasControl(v) else {
                throw VaultError(
                    .invalidInput, "an additional authorization parameter has an empty name or a control character")
            }
            guard !AuthorizationRequest.protocolParameters.contains(k.lowercased()) else {
                throw VaultError(
                    .invalidInput, "the authorization parameter '\(k)' is the protocol's own and cannot be added")
            }
        }
        let added = request.provider.authorizationParams.merging(request.additionalParameters) { $1 }
        for (k, v) in added.sorted(by: { $0.key < $1.key }) where !query.contains(where: { $0.0 == k }) {
            query.append((k, v))
        }
        return query
    }

    /// The address the browser is sent to: the authorization endpoint with
    /// `query`, or, at a provider that takes pushed requests (RFC 9126), with
    /// the handle of the request pushed to it directly, and that request.
    func authorizationRequest(
        _ query: [(String, String)], at authorizationEndpoint: String, clientID: String,
        _ request: AuthorizationRequest
    ) throws(VaultError) -> (url: String, pushed: PushedRequest?) {
        let p = request.provider
        if let parEndpoint = p.pushedAuthorizationRequestEndpoint {
            // RFC 9126: the request goes to the provider directly, with the
            // client's authentication; the browser carries only its handle.
            // RFC 9449 section 10.1: with a DPoP key, a proof goes with the pushed request too.
            let pushed = try push(query, to: parEndpoint, provider: p, client: client(p, request))
            let url = FormEncoding.appendQuery(
                authorizationEndpoint, [("client_id", clientID), ("request_uri", pushed.requestURI)])
            return (url, pushed)
        }
        if p.requirePushedAuthorizationRequests {
            throw VaultError(
                .invalidInput,
                "provider '\(p.name)' takes only pushed authorization requests but names no "
                    + "pushed_authorization_request_endpoint")
        }
        return (FormEncoding.appendQuery(authorizationEndpoint, query), nil)
    }

    /// The code of the answer the browser came back with, checked in this
    /// order: its state (an answer not for this request is refused before
    /// anything else in it is looked at), the server that sent it (RFC
    /// 9207), then an error or the code.
    func authorizationCode(
        in answer: [(String, String)], state: String, pushed: PushedRequest?, _ request: AuthorizationRequest
    ) throws(VaultError) -> String {
        let p = request.provider
        func value(_ key: String) -> String? { answer.first { $0.0 == key }?.1 }
        if let returned = value("state") {
            guard returned == state else {
                throw VaultError(.badResponse, "the answer's state does not match this authorization (refused)")
            }
        } else if request.flow == .browser || answer.count > 1 {
            throw VaultError(.badResponse, "the answer carries no state (refused)")
        }
        // RFC 9207: the answer names the server that sent it. Checked before
        // the error or the code is looked at, so a code from another server
        // (a mix-up) never reaches this provider's token endpoint.
        try checkIssuer(value("iss"), provider: p, bareCode: answer.count == 1 && value("code") != nil)
        if let error = value("error") {
            if let pushed, error == "invalid_request_uri" || error == "invalid_request_object",
                time.now() >= pushed.expiresAt
            {
                throw VaultError(
                    .timedOut,
                    "the pushed authorization request expired before the browser opened it (the provider "
                        + "gave it \(Int(pushed.lifetime)) seconds)",
                    remedy: .finishSooner(otherFlows: p.flows.filter { $0 != request.flow }))
            }
            guard ProviderText.isErrorCode(error) else {
                throw VaultError(
                    .badResponse, "the authorization was refused with an error code that is not an OAuth error code")
            }
            let description = value("error_description").map { ": " + ProviderText.sanitized($0) } ?? ""
            throw VaultError(
                .refused, "the authorization was refused: \(error)\(description)",
                oauthError: p.errorQuirks.canonical(error))
        }
        guard let code = value("code"), !code.isEmpty else {
            throw VaultError(.badResponse, "the answer carries no authorization code")
        }
        return code
    }

    /// RFC 9207 section 2.4: an `iss` in the answer must be the provider's
    /// issuer, compared as a string (Microsoft's `{tenantid}` standing for
    /// one path segment, as for ID tokens); a provider that says it always
    /// sends `iss` must have sent it, a pasted bare code included. A provider
    /// without an issuer (a plain OAuth 2.0 one, not said to send `iss`)
    /// has nothing to compare an `iss` with; one said to send it is
    /// refused (`requireIssuerForIss`).
    func checkIssuer(_ iss: String?, provider p: Provider, bareCode: Bool) throws(VaultError) {
        guard let iss else {
            guard p.authorizationResponseIssParameterSupported else { return }
            throw VaultError(
                .badResponse,
                bareCode
                    ? "provider '\(p.name)' names itself in its answers (iss): paste the whole address the "
                        + "browser ended on, not the code alone"
                    : "the answer does not name the server that sent it (iss), which provider '\(p.name)' always "
                        + "does (refused)")
        }
        guard let issuer = p.issuer else {
            // Nothing to compare with: only a provider not said to send iss gets here.
            try Authorizer.requireIssuerForIss(p)
            return
        }
        guard IDTokenClaims.matches(issuer: iss, pattern: issuer) else {
            throw VaultError(
                .badResponse,
                "the answer comes from another server ('\(ProviderText.sanitized(iss, limit: 200))', expected "
                    + "'\(issuer)'): refused, and its code was not used")
        }
    }

    /// A provider said to name itself in its answers (RFC 9207) needs an
    /// issuer to compare that name with: without one the mix-up defence
    /// would be skipped, so the authorization is refused instead.
    static func requireIssuerForIss(_ p: Provider) throws(VaultError) {
        guard p.authorizationResponseIssParameterSupported, p.issuer == nil else { return }
        throw VaultError(
            .invalidInput,
            "provider '\(p.name)' names itself in its answers (iss), but vault knows no issuer to compare that "
                + "name with: refused rather than authorizing without the mix-up check")
    }

    /// A pushed authorization request's handle and when it stops working.
    struct PushedRequest {
        let requestURI: String
        let lifetime: Double
        let expiresAt: Date
    }

    /// RFC 9126 section 2: POSTs the authorization request's parameters to
    /// the provider's pushed-request endpoint, authenticated as at the
    /// token endpoint, and returns the `request_uri` the browser is sent
    /// with. Each authorization pushes its own; none is kept or reused.
    func push(_ query: [(String, String)], to endpoint: String, provider p: Provider, client: OAuthClient)
        throws(VaultError) -> PushedRequest
    {
        let what = "pushing the authorization request"
        var client = client
        // RFC 9126 section 2: a client assertion's audience is the issuer
        // identifier, not the pushed-request endpoint's URL (which servers
        // need not take); without an issuer, the token endpoint's URL, which
        // the section has them take too (and for an issuer that is a
        // pattern, such as Microsoft's `{tenantid}`, which names no one).
        if client.audience == nil {
            client.audience = p.issuer.flatMap { $0.contains("{") ? nil : $0 } ?? p.tokenEndpoint
        }
        // The client's authentication adds client_id itself, except with
        // Basic, where the body still names the client the request is for.
        let basic =
            client.secret != nil && !["client_secret_post", "private_key_jwt", "none"].contains(client.authMethod)
        let form = query.filter { $0.0 != "client_id" || basic }
        let answer = try TokenEndpoint(transport: transport, client: client).send(endpoint, form: form, what: what)
        // Some providers refuse a pushed request with a bare 4xx (glewlwyd:
        // 403 for a wrong secret, redirect URI or parameter) where RFC 9126
        // section 2.3 has an OAuth error.
        if (400...499).contains(answer.status) && answer.body.count == 0 {
            throw VaultError(
                .providerError,
                "\(what): the provider refused it (HTTP \(answer.status) without a reason); check the client id, "
                    + "its secret, its redirect URI and the scopes"
            ).with(httpStatus: answer.status)
        }
        // 201 Created is the RFC's success; 200 is accepted too.
        if answer.status != 201, let error = TokenEndpoint.classify(answer, what: what, quirks: p.errorQuirks) {
            throw error
        }
        struct Wire: Decodable {
            var request_uri: String?
            var expires_in: Double?
        }
        let malformed = VaultError(
            .badResponse, "\(what): the provider's answer (HTTP \(answer.status)) has no usable request_uri")
        guard answer.status == 200 || answer.status == 201,
            let w = try? JSONDecoder().decode(Wire.self, from: answer.body.withUnsafeBytes { Data($0) }),
            let uri = w.request_uri, ProviderText.isToken(uri), uri.utf8.count <= 2048
        else { throw malformed }
        // RFC 9126 section 2.2: expires_in is required; a lifetime that is
        // absent or absurd is read as the shortest one, one minute.
        let lifetime = w.expires_in.flatMap { $0.isFinite && $0 > 0 ? min($0, 86400) : nil } ?? 60
        return PushedRequest(requestURI: uri, lifetime: lifetime, expiresAt: time.now().addingTimeInterval(lifetime))
    }

    /// Accepts a whole redirect URL, just its query, or a bare code.
    func pasted(_ text: String) throws(VaultError) -> [(String, String)] {
        let t = String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
        guard !t.isEmpty else { throw VaultError(.invalidInput, "nothing was pasted") }
        if let q = t.firstIndex(of: "?") {
            let rest = t[t.index(after: q)...]
            return FormEncoding.decode(rest.prefix { $0 != "#" })
        }
        if t.contains("=") { return FormEncoding.decode(Substring(t)) }
        return [("code", t)]
    }

    // MARK: Device authorization grant (RFC 8628)

    func deviceFlow(_ request: AuthorizationRequest) throws(VaultError) -> Grant {
        let p = request.provider
        guard let deviceEndpoint = p.deviceAuthorizationEndpoint, let tokenEndpoint = p.tokenEndpoint else {
            throw VaultError(.invalidInput, "provider '\(p.name)' has no device authorization endpoint")
        }
        let endpoint = TokenEndpoint(transport: transport, client: client(p, request))
        let what = "starting the device authorization"
        let answer = try endpoint.send(
            deviceEndpoint, form: [("scope", request.effectiveScopes.joined(separator: " "))], what: what)
        if let error = TokenEndpoint.classify(answer, what: what, quirks: p.errorQuirks) { throw error }
        let device = try DeviceAuthorization(answer.body)
        // Everything in the answer is the provider's text: the UI shows it
        // escaped, and only an https address (or http to loopback) is
        // offered as the place to go, never javascript: or file:.
        guard (try? URLPolicy.check(device.verificationURI)) != nil else {
            throw VaultError(
                .badResponse, "the device authorization answer gives a verification address that is not https")
        }
        let complete = device.verificationURIComplete.flatMap { (try? URLPolicy.check($0)) != nil ? $0 : nil }
        guard let schedule = DevicePolling(interval: device.interval, expiresIn: device.expiresIn) else {
            throw VaultError(
                .badResponse, "the device authorization answer has an unusable interval or expires_in (refused)")
        }
        ui.show("to authorize, open \(device.verificationURI) and enter the code \(device.userCode)")
        if let complete { ui.show("or open \(complete), which carries the code") }
        var interval = schedule.interval
        let deadline = time.now().addingTimeInterval(min(schedule.expiresIn, request.timeout))
        let expired = VaultError(
            .timedOut, "the device code expired before it was approved",
            remedy: .restartDeviceAuthorization)
        // The deadline is the caller's own limit when that comes first: the
        // code is still valid, and only the wait ended.
        let endOfWait =
            request.timeout < schedule.expiresIn
            ? VaultError(
                .timedOut,
                "stopped waiting for the approval after \(Int(request.timeout.rounded(.up))) seconds, the time "
                    + "allowed; the code had not expired",
                // Bounded: the provider's number is finite, not necessarily small.
                remedy: .waitLongerForDevice(codeLifetime: Int(min(schedule.expiresIn, 1e9).rounded(.down))))
            : expired
        while true {
            // The wait never outlasts the deadline, whatever the provider asked.
            let left = deadline.timeIntervalSince(time.now())
            guard left > 0 else { throw endOfWait }
            sleep(min(interval, left))
            guard time.now() < deadline else { throw endOfWait }
            do {
                let response = try endpoint.tokenResponse(
                    tokenEndpoint,
                    form: [
                        ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"),
                        ("device_code", device.deviceCode),
                    ],
                    what: "waiting for the device approval", extras: request.tokenExtras)
                return try grant(from: response, request: request, nonce: nil)
            } catch {
                // RFC 8628 section 3.5, with the provider's own codes read
                // as the standard ones (Microsoft's authorization_declined).
                switch error.oauthError {
                case "authorization_pending": continue
                case "slow_down": interval = min(interval + 5, DevicePolling.maximumInterval)
                case "expired_token": throw expired
                case "access_denied":
                    throw VaultError(
                        .refused, "the authorization was denied at the provider (access_denied)",
                        oauthError: "access_denied", remedy: .approveAtProvider)
                default: throw error
                }
            }
        }
    }

    // MARK: The grant

    /// The provider's client, with the request's DPoP key.
    func client(_ p: Provider, _ request: AuthorizationRequest) -> OAuthClient {
        var client = OAuthClient(p)
        client.dpopKey = request.dpopKey
        return client
    }

    func grant(from response: TokenResponse, request: AuthorizationRequest, nonce: String?) throws(VaultError) -> Grant
    {
        let p = request.provider
        let now = time.now()
        var account: String? = nil
        if let idToken = response.idToken, let issuer = p.issuer, let clientID = p.clientID {
            account = try IDTokenClaims.verify(idToken, issuer: issuer, clientID: clientID, nonce: nonce, now: now)
                .account
        } else if nonce != nil {
            throw VaultError(.badResponse, "the provider returned no ID token for an OpenID Connect authorization")
        }
        var g = response.grant(provider: p.name, account: account, now: now)
        if let key = request.dpopKey {
            // Only an OAuth 2.0 grant keeps a key (stored as oauth2_dpop).
            guard g.kind == .oauth2 else {
                throw VaultError(
                    .badResponse,
                    "\(p.name) answered a request made with a DPoP proof with an OAuth 1.0a token secret; "
                        + "the tokens were not stored")
            }
            if response.tokenType?.lowercased() == "dpop" {
                g.dpopKey = key
            } else if request.requiresDPoPAccessToken || p.dpopBoundAccessTokens {
                // A downgrade to bearer tokens, which anyone holding them can spend.
                throw VaultError(
                    .badResponse,
                    "\(p.name) answered with a bearer access token where a DPoP-bound one was asked for; "
                        + "the tokens were not stored")
            } else if g.refreshToken != nil {
                // RFC 9449 section 5: the refresh token may be bound to the
                // key alone; every refresh must then carry a proof of it.
                g.dpopKey = key
            }
        }
        if account == nil, let userinfo = p.userinfoEndpoint, g.accessToken != nil {
            g.account = try? UserInfo.account(endpoint: userinfo, grant: g, claim: p.accountClaim, transport: transport)
        }
        if g.scopes.isEmpty { g.scopes = request.effectiveScopes }
        g.providerConfiguration = p.storedConfiguration
        return g
    }
}

/// A device authorization answer (RFC 8628 section 3.2), in JSON or form
/// encoding, numbers as numbers or text.
package struct DeviceAuthorization {
    let deviceCode: String
    let userCode: String
    let verificationURI: String
    let verificationURIComplete: String?
    /// Seconds the codes stay valid, as sent (checked by `DevicePolling`).
    let expiresIn: Double?
    /// Seconds between polls, as sent (checked by `DevicePolling`).
    let interval: Double?

    package init(_ body: SecureBytes) throws(VaultError) {
        let malformed = VaultError(.badResponse, "the device authorization answer is malformed")
        var data = try TokenEndpoint.normalized(body).withUnsafeBytes { Data($0) }
        defer { data.withUnsafeMutableBytes { secureZero($0) } }
        struct Wire: Decodable {
            var fields: [String: String] = [:]
            var numbers: [String: Double] = [:]
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: AnyCodingKey.self)
                for k in c.allKeys {
                    if let s = try? c.decode(String.self, forKey: k) {
                        fields[k.stringValue] = s
                        if let d = Double(s) { numbers[k.stringValue] = d }
                    } else if let d = try? c.decode(Double.self, forKey: k) {
                        numbers[k.stringValue] = d
                    }
                }
            }
        }
        guard let w = try? JSONDecoder().decode(Wire.self, from: data) else { throw malformed }
        // Codes and addresses are sent back or shown to the person: printable ASCII only.
        func text(_ key: String) -> String? { w.fields[key].flatMap { ProviderText.isToken($0) ? $0 : nil } }
        guard let deviceCode = text("device_code"), let userCode = text("user_code"),
            let uri = text("verification_uri") ?? text("verification_url")  // Google's older name
        else { throw malformed }
        self.deviceCode = deviceCode
        self.userCode = userCode
        verificationURI = uri
        verificationURIComplete = text("verification_uri_complete")
        expiresIn = w.numbers["expires_in"]
        interval = w.numbers["interval"]
    }
}

/// The userinfo endpoint: GTMAppAuth's liveness probe, and the account
/// name for providers without an ID token.
public enum UserInfo {
    /// The account claim from the userinfo endpoint.
    public static func account(endpoint: String, accessToken: String, claim: String?, transport: any HTTPTransport)
        throws(VaultError) -> String?
    {
        let bearer = Grant(provider: "", accessToken: accessToken, createdAt: Date())
        return try account(endpoint: endpoint, grant: bearer, claim: claim, transport: transport)
    }

    /// The account claim from the userinfo endpoint, asked with the grant's
    /// access token (and a DPoP proof when the grant is bound to a key).
    package static func account(endpoint: String, grant: Grant, claim: String?, transport: any HTTPTransport)
        throws(VaultError) -> String?
    {
        let response = try ProtectedResource.get(
            endpoint, grant: grant, transport: transport, what: "the userinfo request")
        guard response.status == 200 else { return nil }
        let data = response.body.withUnsafeBytes { Data($0) }
        struct Claims: Decodable {
            var values: [String: String] = [:]
            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: AnyCodingKey.self)
                for k in c.allKeys {
                    if let s = try? c.decode(String.self, forKey: k) { values[k.stringValue] = s }
                }
            }
        }
        guard let claims = try? JSONDecoder().decode(Claims.self, from: data) else { return nil }
        for key in [claim, "email", "login", "preferred_username", "sub"].compactMap({ $0 }) {
            if let v = claims.values[key], !v.isEmpty { return v }
        }
        return nil
    }
}

/// The provider's polling numbers for the device flow (RFC 8628 section
/// 3.2), bounded: an interval from 1 s to `maximumInterval` (5 s when
/// absent), and a lifetime that is positive and finite. Absurd numbers
/// (negative, not finite, an interval over an hour) are refused rather
/// than slept on or converted.
struct DevicePolling {
    static let maximumInterval = 60.0
    let interval: Double
    let expiresIn: Double

    init?(interval: Double?, expiresIn: Double?) {
        let i = interval ?? 5
        let e = expiresIn ?? 900
        guard i.isFinite, i >= 0, i <= 3600, e.isFinite, e > 0 else { return nil }
        self.interval = min(max(i, 1), DevicePolling.maximumInterval)
        self.expiresIn = e
    }
}
