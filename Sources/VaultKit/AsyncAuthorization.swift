public import VaultCore

extension Authorizer {
    /// Runs the authorization on one of VaultKit's threads, off Swift's
    /// cooperative pool (it waits on the browser, the person, and the
    /// provider), and returns the new grant; nothing is stored. A task
    /// cancelled before the flow starts gets `cancelled`. While it waits
    /// for the person, the thread does not count against the limit of
    /// VaultKit's threads.
    public func authorize(_ request: AuthorizationRequest) async throws(VaultError) -> Grant {
        let authorizer = Handoff(self)
        return try await blocking { () throws(VaultError) in
            try WorkerThreads.shared.waiting { () throws(VaultError) in try authorizer.value.authorize(request) }
        }
    }

    /// Exchanges a code the app obtained itself, on one of VaultKit's threads (see
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
