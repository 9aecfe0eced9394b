import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore
@testable import VaultSync

@Suite("the token endpoint client")
struct TokenEndpointTests {
    func provider(_ fields: String) throws -> Provider {
        let json =
            #"{"name": "p", "authorization_endpoint": "https://id.example/auth", "token_endpoint": "https://id.example/token", "flows": ["browser"], "client_id": "my client", \#(fields)}"#
        return try Provider(file: ProviderFile.parse(Array(json.utf8), source: "test"), source: "test")
    }

    func exchange(_ p: Provider, _ fake: FakeTransport) throws(VaultError) -> TokenResponse {
        try TokenEndpoint(transport: fake, client: OAuthClient(p)).tokenResponse(
            "https://id.example/token", form: [("grant_type", "authorization_code"), ("code", "c")], what: "exchange")
    }

    @Test("client_secret_basic form-encodes id and secret before base64 (RFC 6749 2.3.1)")
    func basicAuth() throws {
        let fake = FakeTransport([(200, #"{"access_token":"a","token_type":"Bearer"}"#, [])])
        _ = try exchange(try provider(#""client_secret": "s:e/c r""#), fake)
        let r = fake.requests[0]
        let expected = "Basic " + Data("my%20client:s%3Ae%2Fc%20r".utf8).base64EncodedString()
        #expect(r.headers["authorization"] == expected)
        #expect(r.headers["accept"] == "application/json")
        #expect(!r.body.contains("client_secret"))
        #expect(r.body == "grant_type=authorization_code&code=c")
    }

    @Test("client_secret_post sends the client in the body; a public client never sends a secret")
    func postAndPublic() throws {
        let post = FakeTransport([(200, #"{"access_token":"a"}"#, [])])
        _ = try exchange(
            try provider(#""client_secret": "s", "token_endpoint_auth_method": "client_secret_post""#), post)
        #expect(post.requests[0].body.hasSuffix("&client_id=my%20client&client_secret=s"))
        #expect(post.requests[0].headers["authorization"] == nil)
        let pub = FakeTransport([(200, #"{"access_token":"a"}"#, [])])
        _ = try exchange(try provider(#""client_secret": "s", "public_client": true"#), pub)
        #expect(pub.requests[0].body.hasSuffix("&client_id=my%20client"))
        #expect(!pub.requests[0].body.contains("client_secret") && pub.requests[0].headers["authorization"] == nil)
    }

    @Test("a form-encoded answer (GitHub without Accept) is read like JSON")
    func formAnswer() throws {
        let fake = FakeTransport([(200, "access_token=gho_x&scope=repo%2Cgist&token_type=bearer", [])])
        let r = try exchange(try provider(#""scopes": []"#), fake)
        #expect(r.accessToken == "gho_x" && r.scope == ["repo", "gist"])
    }

    @Test(
        "errors are classified by OAuth code first, then by bare status",
        arguments: [
            (
                400, #"{"error":"invalid_grant","error_description":"Token revoked"}"#, VaultError.Code.refused,
                "invalid_grant"
            ),
            (401, #"{"error":"invalid_client"}"#, .refused, "invalid_client"),
            (403, #"{"error":"invalid_code"}"#, .refused, "invalid_code"),
            (400, "", .refused, nil),
            (401, "", .refused, nil),
            (503, #"{"error":"temporarily_unavailable"}"#, .transient, "temporarily_unavailable"),
            (500, "<html>oops</html>", .transient, nil),
            (429, "", .transient, nil),
            (302, "", .badResponse, nil),
            (200, #"{"token_type":"Bearer"}"#, .badResponse, nil),
            (200, #"{"access_token":"a","token_type":"mac"}"#, .badResponse, nil),
            (200, "<html>login</html>", .badResponse, nil),
        ] as [(Int, String, VaultError.Code, String?)])
    func classification(status: Int, body: String, code: VaultError.Code, oauthError: String?) throws {
        let p = try provider(#""scopes": []"#)
        do throws(VaultError) {
            _ = try exchange(p, FakeTransport([(status, body, [])]))
            Issue.record("accepted HTTP \(status) \(body)")
        } catch {
            #expect(error.code == code, "\(error.reason)")
            #expect(error.oauthError == oauthError)
        }
    }

    @Test("the provider's description is shown, cleaned of control characters")
    func description() throws {
        let p = try provider(#""scopes": []"#)
        do throws(VaultError) {
            _ = try exchange(
                p,
                FakeTransport([(400, "{\"error\":\"access_denied\",\"error_description\":\"no\\u001b[31m way\"}", [])]))
        } catch {
            #expect(error.reason == "exchange: the provider refused: access_denied: no[31m way")
        }
    }

    @Test("ID token claims: issuer (with Microsoft's tenant placeholder), audience, expiry, nonce")
    func idToken() throws {
        func token(_ claims: [String: Any]) throws -> String {
            let payload = try JSONSerialization.data(withJSONObject: claims)
            return "e30." + Base64.encodeString([UInt8](payload), .urlSafeUnpadded) + ".sig"
        }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let good: [String: Any] = [
            "iss": "https://id.example", "sub": "s1", "aud": ["c", "x"], "exp": 1_800_000_100, "nonce": "n",
            "email": "a@b",
        ]
        #expect(
            try IDTokenClaims.verify(token(good), issuer: "https://id.example", clientID: "c", nonce: "n", now: now)
                .account == "a@b")
        var unverified = good
        unverified["email_verified"] = false
        #expect(
            try IDTokenClaims.verify(
                token(unverified), issuer: "https://id.example", clientID: "c", nonce: "n", now: now
            ).account == "s1")
        for (key, value) in [("iss", "https://evil.example"), ("aud", "other"), ("exp", 1_799_999_000), ("nonce", "m")]
            as [(String, Any)]
        {
            var bad = good
            bad[key] = value
            #expect(throws: VaultError.self, "\(key)") {
                try IDTokenClaims.verify(token(bad), issuer: "https://id.example", clientID: "c", nonce: "n", now: now)
            }
        }
        #expect(
            IDTokenClaims.matches(
                issuer: "https://login.microsoftonline.com/9188040d-6c67/v2.0",
                pattern: "https://login.microsoftonline.com/{tenantid}/v2.0"))
        #expect(
            !IDTokenClaims.matches(
                issuer: "https://login.microsoftonline.com/a/b/v2.0",
                pattern: "https://login.microsoftonline.com/{tenantid}/v2.0"))
        #expect(
            !IDTokenClaims.matches(
                issuer: "https://evil.example/x/v2.0", pattern: "https://login.microsoftonline.com/{tenantid}/v2.0"))
        #expect(throws: VaultError.self) {
            try IDTokenClaims.verify("not-a-jwt", issuer: "i", clientID: "c", nonce: nil, now: now)
        }
    }
}
