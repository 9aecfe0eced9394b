import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore

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

    /// One answer, the quirks of the provider, and what vault makes of it.
    struct Answer: Sendable, CustomTestStringConvertible {
        let status: Int
        let body: String
        var headers: [String: String] = [:]
        var github = false
        let code: VaultError.Code
        let oauthError: String?
        var testDescription: String { "\(github ? "GitHub " : "")HTTP \(status) \(body.prefix(60))" }
    }

    static let answers: [Answer] = [
        // 400 and 401: invalid_grant refuses the grant; the client errors are the client's.
        Answer(
            status: 400, body: #"{"error":"invalid_grant","error_description":"Token revoked"}"#, code: .refused,
            oauthError: "invalid_grant"),
        Answer(status: 401, body: #"{"error":"invalid_grant"}"#, code: .refused, oauthError: "invalid_grant"),
        Answer(
            status: 400, body: "error=invalid_grant&error_description=gone", code: .refused, oauthError: "invalid_grant"
        ),
        Answer(status: 401, body: #"{"error":"invalid_client"}"#, code: .invalidClient, oauthError: "invalid_client"),
        Answer(
            status: 400, body: #"{"error":"unauthorized_client"}"#, code: .invalidClient,
            oauthError: "unauthorized_client"),
        Answer(status: 400, body: #"{"error":"invalid_scope"}"#, code: .providerError, oauthError: "invalid_scope"),
        Answer(status: 403, body: #"{"error":"invalid_code"}"#, code: .providerError, oauthError: "invalid_code"),
        Answer(status: 403, body: #"{"error":"invalid_grant"}"#, code: .providerError, oauthError: "invalid_grant"),
        // No OAuth error: never a refusal.
        Answer(status: 400, body: "", code: .badResponse, oauthError: nil),
        Answer(status: 401, body: "", code: .badResponse, oauthError: nil),
        Answer(status: 400, body: "<html>login</html>", code: .badResponse, oauthError: nil),
        Answer(status: 400, body: #"{"message":"no"}"#, code: .badResponse, oauthError: nil),
        Answer(status: 400, body: "{\"error\":\"invalid_grant\\u001b[2J\"}", code: .badResponse, oauthError: nil),
        Answer(status: 400, body: #"{"error":{"code":400}}"#, code: .badResponse, oauthError: nil),
        Answer(status: 400, body: "error=invalid%0Agrant", code: .badResponse, oauthError: nil),
        // 429 and 5xx: transient whatever the body.
        Answer(
            status: 503, body: #"{"error":"temporarily_unavailable"}"#, code: .transient,
            oauthError: "temporarily_unavailable"),
        Answer(status: 503, body: #"{"error":"invalid_grant"}"#, code: .transient, oauthError: "invalid_grant"),
        Answer(status: 500, body: "<html>oops</html>", code: .transient, oauthError: nil),
        Answer(
            status: 429, body: #"{"error":"too_many_requests"}"#, headers: ["Retry-After": "30"], code: .transient,
            oauthError: "too_many_requests"),
        Answer(status: 400, body: #"{"error":"server_error"}"#, code: .transient, oauthError: "server_error"),
        // Other statuses, and 200s that are no token response.
        Answer(status: 302, body: "", code: .badResponse, oauthError: nil),
        Answer(status: 200, body: #"{"token_type":"Bearer"}"#, code: .badResponse, oauthError: nil),
        Answer(status: 200, body: #"{"access_token":"a","token_type":"mac"}"#, code: .badResponse, oauthError: nil),
        Answer(status: 200, body: "<html>login</html>", code: .badResponse, oauthError: nil),
        Answer(status: 200, body: #"{"error":"invalid_grant"}"#, code: .providerError, oauthError: "invalid_grant"),
        // GitHub: errors in 200 answers, in its own codes.
        Answer(
            status: 200, body: #"{"error":"bad_refresh_token"}"#, github: true, code: .refused,
            oauthError: "invalid_grant"),
        Answer(
            status: 200, body: "error=bad_verification_code", github: true, code: .refused, oauthError: "invalid_grant"),
        Answer(
            status: 200, body: #"{"error":"incorrect_client_credentials"}"#, github: true, code: .invalidClient,
            oauthError: "invalid_client"),
        Answer(
            status: 200, body: #"{"error":"authorization_pending"}"#, github: true, code: .providerError,
            oauthError: "authorization_pending"),
    ]

    @Test(
        "answers are classified status first, then by OAuth error code (with the provider's aliases)",
        arguments: answers)
    func classification(_ a: Answer) throws {
        var fields = #""scopes": []"#
        if a.github {
            fields +=
                #", "errors_with_http_200": true, "error_aliases": {"bad_refresh_token": "invalid_grant", "bad_verification_code": "invalid_grant", "incorrect_client_credentials": "invalid_client"}"#
        }
        let p = try provider(fields)
        do throws(VaultError) {
            _ = try exchange(p, FakeTransport([(a.status, a.body, a.headers.map { ($0.key, $0.value) })]))
            Issue.record("accepted HTTP \(a.status) \(a.body)")
        } catch {
            #expect(error.code == a.code, "\(error.reason)")
            #expect(error.oauthError == a.oauthError)
            #expect(error.reason.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7f })
            if a.status == 429 { #expect(error.reason.contains("wait 30 seconds (Retry-After)")) }
        }
    }

    @Test("the provider's description is shown, cleaned of control characters")
    func description() throws {
        let p = try provider(#""scopes": []"#)
        do throws(VaultError) {
            _ = try exchange(
                p,
                FakeTransport([
                    (400, "{\"error\":\"access_denied\",\"error_description\":\"no\\u001b[31m \\u009bway\\u202e\"}", [])
                ]))
        } catch {
            #expect(error.reason == "exchange: the provider refused the request: access_denied: no[31m way")
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
