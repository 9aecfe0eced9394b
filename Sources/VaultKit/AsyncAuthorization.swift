public import VaultCore

extension Authorizer {
    /// Runs the authorization on a Dispatch thread, off Swift's cooperative
    /// pool (it waits on the browser, the person, and the provider), and
    /// returns the new grant; nothing is stored. A task cancelled before
    /// the flow starts gets `cancelled`.
    public func authorize(_ request: AuthorizationRequest) async throws(VaultError) -> Grant {
        let authorizer = Handoff(self)
        return try await blocking { () throws(VaultError) in try authorizer.value.authorize(request) }
    }

    /// Exchanges a code the app obtained itself, on a Dispatch thread (see
    /// `exchange(code:codeVerifier:redirectURI:provider:scopes:nonce:extras:)`).
    public func exchange(
        code: String, codeVerifier: String, redirectURI: String, provider: Provider, scopes: [String] = [],
        nonce: String? = nil, extras: TokenRequestExtras = .none
    ) async throws(VaultError) -> Grant {
        let authorizer = Handoff(self)
        return try await blocking { () throws(VaultError) in
            try authorizer.value.exchange(
                code: code, codeVerifier: codeVerifier, redirectURI: redirectURI, provider: provider, scopes: scopes,
                nonce: nonce, extras: extras)
        }
    }
}
