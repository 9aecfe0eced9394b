import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore

/// The mix-up defence (RFC 9207) is never skipped for want of an issuer,
/// a pushed request's client assertion is meant for the issuer (RFC 9126
/// section 2), and a registration the provider no longer knows counts as
/// deleted (RFC 7592 section 2).
@Suite("iss without an issuer, pushed requests' assertions, gone registrations")
struct MixUpAndPushTests {
    final class RecordingUI: AuthorizationUI, @unchecked Sendable {
        var opened: [String] = []
        func openBrowser(_ url: String) { opened.append(url) }
        func show(_ message: String) {}
        func readPasted(prompt: String) throws(VaultError) -> String { "" }
    }

    func provider(_ json: String) throws -> Provider {
        try Provider(file: ProviderFile.parse(Array(json.utf8), source: "test"), source: "test")
    }

    @Test("a provider file that says it sends iss without an issuer is invalid")
    func fileRefused() throws {
        let json = """
            {"name": "corp", "authorization_endpoint": "https://id.example/auth",
             "token_endpoint": "https://id.example/token", "client_id": "c",
             "authorization_response_iss_parameter_supported": true}
            """
        #expect {
            try provider(json)
        } throws: { error in
            (error as? VaultError)?.reason.contains(
                "authorization_response_iss_parameter_supported needs 'issuer'") == true
        }
    }

    @Test("a provider said to send iss without an issuer: refused before anything is sent or opened")
    func authorizerRefuses() throws {
        var p = try provider(
            """
            {"name": "corp", "authorization_endpoint": "https://id.example/auth",
             "token_endpoint": "https://id.example/token", "client_id": "c", "flows": ["browser", "paste"]}
            """)
        // An app can set the field on a provider it made.
        p.authorizationResponseIssParameterSupported = true
        let transport = FakeTransport([])
        let ui = RecordingUI()
        for flow in [Provider.Flow.browser, .paste] {
            #expect {
                try Authorizer(transport: transport, ui: ui).authorize(AuthorizationRequest(provider: p, flow: flow))
            } throws: { error in
                (error as? VaultError)?.reason.contains("vault knows no issuer to compare that name with") == true
            }
        }
        #expect(ui.opened.isEmpty && transport.requests.isEmpty)
        #expect(throws: VaultError.self) {
            try Authorizer(transport: transport, ui: ui).checkIssuer(nil, provider: p, bareCode: false)
        }
    }

    @Test("a pushed request's client assertion is for the issuer; without one, for the token endpoint")
    func pushedAssertionAudience() throws {
        let server = try FixtureServer(script: "provider_fixture.py", arguments: ["rfc"])
        let base = server.base
        let settings = try SecureBytes(
            copying: Array(#"{"par": true, "auth_methods": ["private_key_jwt"]}"#.utf8))
        _ = try CurlTransport().send(HTTPRequest(method: "POST", url: base + "/__settings", body: settings))
        let key = try String(
            contentsOfFile: FixtureServer.root.appendingPathComponent(
                "Tests/VaultCoreTests/Vectors/oauth1-test-rsa-key.pem"
            ).path, encoding: .utf8)
        let query = [
            ("response_type", "code"), ("client_id", "vault-test"),
            ("redirect_uri", "http://127.0.0.1:1/callback"), ("scope", "openid"), ("state", "s"),
        ]
        for issuer in [base as String?, nil] {
            var file = ProviderFile()
            file.name = "corp"
            file.issuer = issuer
            file.authorization_endpoint = base + "/authorize"
            file.token_endpoint = base + "/token"
            file.pushed_authorization_request_endpoint = base + "/par"
            file.client_id = "vault-test"
            file.token_endpoint_auth_method = "private_key_jwt"
            let p = try Provider(file: file, source: "test")
            var client = OAuthClient(p)
            client.privateKey = key
            let authorizer = Authorizer(transport: CurlTransport(), ui: RecordingUI())
            _ = try authorizer.push(query, to: base + "/par", provider: p, client: client)
        }
        let log = try CurlTransport().send(HTTPRequest(method: "GET", url: base + "/__log"))
        let entries = try JSONSerialization.jsonObject(with: log.body.withUnsafeBytes { Data($0) }) as? [[String: Any]]
        let claims = (entries ?? []).filter { $0["endpoint"] as? String == "par" }.map {
            $0["assertion_claims"] as? [String: Any]
        }
        try #require(claims.count == 2)
        #expect(claims[0]?["aud"] as? String == base, "the issuer, not \(claims[0]?["aud"] ?? "none")")
        #expect(claims[1]?["aud"] as? String == base + "/token", "\(claims[1]?["aud"] ?? "none")")
        #expect(claims[0]?["iss"] as? String == "vault-test" && claims[0]?["sub"] as? String == "vault-test")
    }

    @Test("a DELETE answered 401 or 404 means the registration is gone; 403 is a refusal", arguments: [401, 404, 403])
    func goneRegistration(status: Int) throws {
        let transport = FakeTransport([(status, "", [])])
        let registration = RegisteredClient(
            endpoint: "https://idp.example/register", clientURI: "https://idp.example/register/c1",
            accessToken: "token")
        if status == 403 {
            #expect(throws: VaultError.self) { try ClientRegistrar(transport: transport).delete(registration) }
        } else {
            #expect(try ClientRegistrar(transport: transport).delete(registration) == .gone)
        }
    }
}
