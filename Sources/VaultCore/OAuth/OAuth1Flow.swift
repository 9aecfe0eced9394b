import FoundationEssentials
import VaultHTTP

/// RFC 5849 section 2: temporary credentials, the person's authorization,
/// token credentials. The callback is a loopback listener (browser) or
/// `oob` (paste: the person types the verifier the provider shows).
extension Authorizer {
    func oauth1Flow(_ request: AuthorizationRequest) throws(VaultError) -> Grant {
        let p = request.provider
        guard let requestURL = p.requestTokenEndpoint, let authorizeURL = p.authorizationEndpoint,
            let accessURL = p.tokenEndpoint
        else {
            throw VaultError(.invalidInput, "provider '\(p.name)' lacks OAuth 1.0a endpoints")
        }
        guard let key = p.clientID, let secret = p.clientSecret else {
            throw VaultError(
                .invalidInput, "OAuth 1.0a needs the consumer key and secret",
                remedy: .giveClient(oauth1: true))
        }
        var credentials = OAuth1Credentials(
            consumerKey: key,
            consumerSecret: try Secure.copy(Array(secret.utf8)),
            method: p.signatureMethod)

        var listener: LoopbackListener? = nil
        let callback: String
        if request.flow == .browser {
            let fixed = p.redirectURI.flatMap(LoopbackRedirect.init)
            do {
                listener = try LoopbackListener(port: fixed?.port ?? 0, path: fixed?.path ?? "/callback")
            } catch {
                throw VaultError(.io, "cannot start the redirect listener: \(error.reason)", remedy: .useFlow([.paste]))
            }
            callback = p.redirectURI ?? listener!.redirectURI
        } else {
            callback = "oob"
        }

        let temporary = try oauth1Post(
            requestURL, credentials, extra: [("oauth_callback", callback)], what: "asking for a request token")
        guard temporary["oauth_callback_confirmed"] == "true", let requestToken = temporary["oauth_token"],
            let requestSecret = temporary["oauth_token_secret"]
        else {
            throw VaultError(.badResponse, "the provider's request token answer is incomplete")
        }

        var query = [("oauth_token", requestToken)]
        query += p.authorizationParams.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        let url = FormEncoding.appendQuery(authorizeURL, query)
        let answer: [(String, String)]
        if let redirected = try browse(url, listener: listener, request) {
            answer = redirected
        } else {
            let text = try ui.readPasted(prompt: "paste the verifier the provider shows (or the address): ")
            let pasted = try pasted(text)
            answer = pasted.count == 1 && pasted[0].0 == "code" ? [("oauth_verifier", pasted[0].1)] : pasted
        }
        func value(_ k: String) -> String? { answer.first { $0.0 == k }?.1 }
        // The returned token plays the part of state: it must be ours.
        if let returned = value("oauth_token"), returned != requestToken {
            throw VaultError(.badResponse, "the answer is for another authorization (oauth_token differs; refused)")
        }
        guard let verifier = value("oauth_verifier"), !verifier.isEmpty else {
            let why =
                value("oauth_problem").map { ProviderText.sanitized($0, limit: 80) }
                ?? (value("denied") != nil ? "denied" : "no verifier")
            throw VaultError(.refused, "the authorization was refused: \(why)", oauthError: why)
        }

        credentials.token = requestToken
        credentials.tokenSecret = requestSecret
        let access = try oauth1Post(
            accessURL, credentials, extra: [("oauth_verifier", verifier)], what: "exchanging the verifier")
        guard let token = access["oauth_token"], let tokenSecret = access["oauth_token_secret"] else {
            throw VaultError(.badResponse, "the provider's access token answer is incomplete")
        }
        let account = [p.accountClaim, "screen_name", "username", "user_nsid", "user_id"].compactMap { $0 }
            .lazy.compactMap { access[$0] }.first
        return Grant(
            provider: p.name, kind: .oauth1, account: account, accessToken: token, tokenSecret: tokenSecret,
            providerConfiguration: p.storedConfiguration, createdAt: time.now())
    }

    /// A signed, empty POST; the answer is form-encoded.
    func oauth1Post(_ url: String, _ c: OAuth1Credentials, extra: [(String, String)], what: String)
        throws(VaultError) -> [String: String]
    {
        let params = try OAuth1.sign(
            method: "POST", url: url, credentials: c, nonce: OAuth1.nonce(), timestamp: time.now().epochSeconds,
            extra: extra)
        let empty = try Secure.copy([])
        let response: HTTPResponse
        do {
            response = try transport.send(
                HTTPRequest(
                    method: "POST", url: url,
                    headers: [
                        ("Authorization", OAuth1.authorizationHeader(params)),
                        ("Content-Type", "application/x-www-form-urlencoded"),
                    ], body: empty))
        } catch {
            throw error.vaultError(what)
        }
        let text = response.body.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        var fields: [String: String] = [:]
        for (k, v) in FormEncoding.decode(Substring(text)) where fields[k] == nil { fields[k] = v }
        guard response.status == 200 else {
            let status = response.status
            if let problem = fields["oauth_problem"] ?? fields["error"], status != 429, status < 500 {
                throw VaultError(
                    .refused,
                    "\(what): the provider refused: \(ProviderText.sanitized(problem))",
                    oauthError: ProviderText.sanitized(problem, limit: 80))
            }
            // RFC 5849 section 3.2: a bad signature, consumer key or token is
            // a 401 (or a 400), with or without a body.
            if status == 400 || status == 401 {
                throw VaultError(.refused, "\(what): the provider refused the request (HTTP \(status))")
            }
            throw TokenEndpoint.classify(status: status, body: response.body, what: what)
        }
        return fields
    }
}
