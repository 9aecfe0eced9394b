import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultCore

/// A refresh of a grant without an account asks the provider's userinfo
/// endpoint, with the new access token, who it belongs to, and stores the
/// answer as an edit of the metadata apart from the refresh; a grant with an
/// account is refreshed without that request, its metadata untouched.
@Suite("refresh: the account learned from userinfo, as a metadata edit of its own")
struct RefreshLearnsAccountTests {
    let dir = TemporaryDirectory()

    /// The lineage's metadata tag of the grant stored as `name`.
    func metaTag(_ vault: Vault, _ name: String) throws -> String? {
        let (row, _) = try vault.loadWithRow(name)
        return try vault.keys.open(row).lineage.meta
    }

    @Test("the first refresh learns the account; later ones neither ask nor edit")
    func learnsOnce() throws {
        let vault = try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
        var g = TestKeys.grant(token: "old", now: Date(epochSeconds: 1_000_000_000))
        g.account = nil
        g.scopes = []
        g.providerConfiguration?.userinfoEndpoint = "https://id.example/userinfo"
        _ = try vault.save(g, as: "imported")
        let before = try metaTag(vault, "imported")
        let fake = FakeTransport([
            (200, #"{"access_token":"new1","expires_in":3600,"scope":"openid email"}"#, []),
            (200, #"{"sub":"user-1","email":"a@example.com"}"#, []),
            (200, #"{"access_token":"new2","expires_in":3600}"#, []),
        ])
        let refresher = TokenRefresher(vault: vault, transport: fake)
        let first = try refresher.freshGrant("imported", forceRefresh: true).grant
        #expect(first.account == "a@example.com" && first.scopes == ["openid", "email"])
        #expect(try vault.load("imported").account == "a@example.com")
        #expect(fake.requests.count == 2)
        #expect(fake.requests.last?.url == "https://id.example/userinfo")
        #expect(fake.requests.last?.headers["authorization"] == "Bearer new1")
        let learned = try metaTag(vault, "imported")
        #expect(learned != nil && learned != before)

        _ = try refresher.freshGrant("imported", forceRefresh: true)
        #expect(fake.requests.count == 3)
        #expect(try metaTag(vault, "imported") == learned)
        #expect(try vault.load("imported").accessToken == "new2")
    }

    @Test("a userinfo endpoint that fails keeps the refreshed tokens and no account")
    func userinfoFails() throws {
        let vault = try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
        var g = TestKeys.grant(token: "old", now: Date(epochSeconds: 1_000_000_000))
        g.account = nil
        g.providerConfiguration?.userinfoEndpoint = "https://id.example/userinfo"
        _ = try vault.save(g, as: "imported")
        let before = try metaTag(vault, "imported")
        let fake = FakeTransport([(200, #"{"access_token":"new1","expires_in":3600}"#, []), (500, "", [])])
        let fresh = try TokenRefresher(vault: vault, transport: fake).freshGrant("imported", forceRefresh: true)
        #expect(fresh.refreshed && fresh.grant.account == nil)
        #expect(try vault.load("imported").accessToken == "new1")
        #expect(try metaTag(vault, "imported") == before)
    }
}
