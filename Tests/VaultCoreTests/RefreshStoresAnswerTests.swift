import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultCore

/// What a refresh answer says of the refresh token's lifetime and the rest
/// of the answer is stored with the new tokens, not only handed back.
@Suite("refresh: the answer's refresh-token expiry and fields are stored")
struct RefreshStoresAnswerTests {
    let dir = TemporaryDirectory()

    @Test("refresh_token_expires_in and the answer's other fields reach the vault; a DPoP key stays with the tokens")
    func storedWithTheTokens() throws {
        let vault = try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
        let key = try DPoPKey.generate()
        var g = TestKeys.grant(token: "old", now: Date(epochSeconds: 1_000_000_000))
        g.dpopKey = key
        g.tokenType = "DPoP"
        _ = try vault.save(g, as: "work")
        let fake = FakeTransport([
            (
                200,
                #"{"access_token":"new1","token_type":"DPoP","expires_in":3600,"refresh_token":"r2","refresh_token_expires_in":86400,"ext":"x"}"#,
                []
            )
        ])
        let fresh = try TokenRefresher(vault: vault, transport: fake).freshGrant("work", forceRefresh: true)
        let stored = try vault.load("work")
        #expect(stored.accessToken == "new1" && stored.refreshToken == "r2")
        #expect(stored.refreshTokenExpiresAt != nil)
        #expect(stored.refreshTokenExpiresAt == fresh.grant.refreshTokenExpiresAt)
        #expect(stored.tokenResponse?["ext"] == .string("x"))
        // Compared aside, so that a failure prints no key.
        let sameKey = stored.dpopKey == key
        #expect(sameKey)
        // The refresh carried a proof of that key.
        #expect(fake.requests.first?.headers["dpop"] != nil)
    }
}
