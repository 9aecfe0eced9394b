extension Vault {
    /// Stores the outcome of a narrowed refresh in record `id`: the refresh
    /// token the answer left and the new cached token, as long as the
    /// record still holds the refresh token that was spent (else it is
    /// kept as it is, like `storeRefreshed`). Returns the grant as stored.
    func storeDerived(id: [UInt8], spentRefreshToken: String?, _ next: Grant) throws(VaultError) -> Grant {
        let now = time.now()
        return try storeSpending(id: id, spentRefreshToken: spentRefreshToken) { current in
            var merged = current
            merged.refreshToken = next.refreshToken
            merged.refreshTokenRotates = next.refreshTokenRotates
            merged.refreshTokenExpiresAt = next.refreshTokenExpiresAt
            merged.refreshedAt = next.refreshedAt
            if let token = next.derivedTokens.first { merged.derivedTokens = current.caching(token, now: now) }
            return merged
        }
    }

    /// Caches `token` in record `id` (an exchange spends no refresh token:
    /// the record's tokens are otherwise left as they are).
    func cacheDerived(id: [UInt8], _ token: DerivedToken) throws(VaultError) -> Grant {
        var stored: Grant?
        let now = time.now()
        try update { (state: inout StateManifest) throws(VaultError) in
            let (row, name, current) = try liveRecord(id: id, state: state)
            var next = current
            next.derivedTokens = current.caching(token, now: now)
            try rewrite(row, with: next, name: name, state: &state)
            stored = next
        }
        guard let stored else { throw VaultError(.internalError, "the grant was not read") }
        return stored
    }
}
