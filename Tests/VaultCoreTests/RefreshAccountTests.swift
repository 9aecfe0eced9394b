import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

@testable import VaultCore

/// What a refresh answer teaches a grant that other tools' files left
/// without an account or scopes: the scopes it states, and the account its
/// ID token names once that token was checked against the grant's issuer
/// and client; never an account the grant already has.
@Suite("refresh answers: the account and scopes a grant lacked")
struct RefreshAccountTests {
    let now = Date(epochSeconds: 1_800_000_000)

    /// An unsigned JWT of `claims` (tokens from the token endpoint are checked by their claims).
    func jwt(_ claims: [String: Any]) throws -> String {
        "e30." + Base64.encodeString([UInt8](try JSONSerialization.data(withJSONObject: claims)), .urlSafeUnpadded)
            + ".sig"
    }

    /// A refresh answer.
    func answer(_ json: String) throws -> TokenResponse {
        try TokenResponse(json: try SecureBytes(copying: Array(json.utf8)))
    }

    /// The grant's account, its issuer, the ID token's extra claims, and the account after the refresh.
    static let cases: [(String?, String?, String, String?)] = [
        (nil, "https://id.example", "{}", "a@example.com"),
        (nil, "https://id.example", #"{"email_verified": false}"#, "user-1"),
        (nil, "https://id.example", #"{"email": null}"#, "user-1"),
        // No issuer to check the token against: it names no one.
        (nil, nil, "{}", nil),
        // An account the grant has stays.
        ("ada@example.com", "https://id.example", "{}", "ada@example.com"),
    ]

    @Test("the account comes from a checked ID token, and only where the grant has none", arguments: cases)
    func account(_ before: String?, _ issuer: String?, _ extra: String, _ after: String?) throws {
        var claims: [String: Any] = [
            "iss": "https://id.example", "sub": "user-1", "aud": "c", "exp": 1_800_003_600, "iat": 1_800_000_000,
            "email": "a@example.com",
        ]
        let changes = try JSONSerialization.jsonObject(with: Data(extra.utf8)) as! [String: Any]
        for (k, v) in changes { claims[k] = v is NSNull ? nil : v }
        let token = try jwt(claims)
        var g = TestKeys.grant(token: "old", now: now)
        g.account = before
        g.idToken = nil
        g.scopes = []
        g.providerConfiguration = ProviderConfiguration(
            issuer: issuer, tokenEndpoint: "https://id.example/token", clientID: "c")
        let response = try answer(#"{"access_token":"n","scope":"openid email","id_token":""# + token + #""}"#)
        let next = try g.applying(refresh: response, now: now, what: "refreshing 'work'")
        #expect(next.account == after)
        #expect(next.scopes == ["openid", "email"])
        #expect(next.idToken == token)
    }

    @Test("an ID token for another client fails the refresh rather than naming an account")
    func otherClient() throws {
        var g = TestKeys.grant(token: "old", now: now)
        g.account = nil
        g.idToken = nil
        g.providerConfiguration = ProviderConfiguration(
            issuer: "https://id.example", tokenEndpoint: "https://id.example/token", clientID: "c")
        let claims: [String: Any] = [
            "iss": "https://id.example", "sub": "user-1", "aud": "other", "exp": 1_800_003_600,
            "email": "a@example.com",
        ]
        let token = try jwt(claims)
        let response = try answer(#"{"access_token":"n","id_token":""# + token + #""}"#)
        #expect(throws: VaultError.self) { try g.applying(refresh: response, now: now, what: "r") }
    }
}
