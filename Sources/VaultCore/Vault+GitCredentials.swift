extension Vault {
    /// Makes the next fresh-token request refresh, if the access token is
    /// still `accessToken` (git saw it refused). Marks nothing dead.
    /// Returns true when it did something.
    ///
    /// A grant that cannot be refreshed (no refresh token, such as a classic
    /// GitHub OAuth token that never expires) is left as it is: git sends
    /// `erase` after any 401, and a token moved into the past could never
    /// come back, although it may still work. Its token is handed out again
    /// by the next `get`; `vault check` asks the provider whether it lives.
    @discardableResult
    public func markStale(_ name: String, ifAccessToken accessToken: String) throws(VaultError) -> Bool {
        var changed = false
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, grant) = try loadLive(name, state: state)
            guard let current = grant.accessToken, current.utf8.elementsEqual(accessToken.utf8),
                grant.refreshToken != nil
            else { return }
            var next = grant
            next.expiresAt = time.now().addingTimeInterval(-1)
            try rewrite(row, with: next, name: name, state: &state)
            changed = true
        }
        return changed
    }
}
