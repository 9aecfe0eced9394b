import Foundation
import Testing
import VaultKit
import VaultTestSupport

/// `TokenSession.derivedToken` over an app's own store, against the token
/// exchange endpoint of Tools/testservers/token_exchange_server.py.
@Suite("TokenSession.derivedToken: narrowed tokens for apps")
struct DerivedTokenTests {
    struct Settings: Decodable {
        let port: Int
        let token_endpoint: String
        let client_id: String
        let client_secret: String
    }

    @Test("an exchange for an audience, cached in the grant; a refused target changes nothing")
    func exchangeInMemory() async throws {
        let server = try FixtureServer(script: "token_exchange_server.py")
        let s = try JSONDecoder().decode(Settings.self, from: Data(server.firstLine.utf8))
        let issued = try await CurlTransport().send(
            HTTPRequest(method: "POST", url: "http://127.0.0.1:\(s.port)/__issue"))
        let tokens = try #require(
            try JSONSerialization.jsonObject(with: issued.body.withUnsafeBytes { Data($0) }) as? [String: Any])
        var config = ProviderConfiguration(tokenEndpoint: s.token_endpoint, clientID: s.client_id)
        config.clientSecret = s.client_secret
        let grant = Grant(
            provider: "xchg", accessToken: tokens["access_token"] as? String,
            refreshToken: tokens["refresh_token"] as? String, tokenType: "Bearer",
            expiresAt: Date().addingTimeInterval(3600), scopes: ["read", "write"], providerConfiguration: config,
            createdAt: Date())
        let store = InMemoryGrantStore()
        try await store.save(grant, as: "app")
        let session = TokenSession(store: store)
        let target = try TokenTarget(audience: "billing", scopes: ["read"], exchange: true)
        let token = try await session.derivedToken("app", for: target)
        #expect(token.accessToken.hasPrefix("xt-") && token.scopes == ["read"] && token.expiresAt != nil)
        #expect(try await store.retrieve("app").derivedTokens == [token])
        #expect(try await session.derivedToken("app", for: target) == token)
        let log = try await CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(s.port)/__log"))
        let entries = try #require(
            try JSONSerialization.jsonObject(with: log.body.withUnsafeBytes { Data($0) }) as? [[String: Any]])
        #expect(entries.count == 1, "the second call went to the provider")

        let before = try await store.retrieve("app")
        await #expect(throws: VaultError.self) {
            _ = try await session.derivedToken("app", for: try TokenTarget(audience: "payroll", exchange: true))
        }
        #expect(try await store.retrieve("app") == before)
    }
}
