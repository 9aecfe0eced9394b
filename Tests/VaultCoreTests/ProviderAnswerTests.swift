import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore

/// OpenID Connect Core 12.2 for ID tokens in refresh answers, the client
/// authentication discovery lists, and the quirk data the presets carry
/// into stored grants.
@Suite("provider answers: ID tokens in refreshes, client authentication, quirks as data")
struct ProviderAnswerTests {
    let now = Date(epochSeconds: 1_800_000_000)

    /// A change to the refreshed ID token's claims, and the claim a refusal names (nil: accepted).
    static let idTokenChanges: [(String, String?)] = [
        ("{}", nil),
        (#"{"iat": 1800000100}"#, nil),
        (#"{"sub": "user-2"}"#, "sub"),
        (#"{"aud": ["c", "other"]}"#, "aud"),
        (#"{"azp": "c"}"#, "azp"),
        (#"{"auth_time": 1700000001}"#, "auth_time"),
        (#"{"iat": 1699999999}"#, "iat"),
        (#"{"iss": "https://evil.example"}"#, "issuer"),
        (#"{"exp": 1700000000}"#, "expired"),
        (#"{"aud": "other"}"#, "another client"),
    ]

    @Test("OpenID Connect Core 12.2: a refreshed ID token must match the original", arguments: idTokenChanges)
    func refreshedIDToken(_ change: String, _ refusal: String?) throws {
        let claims: [String: Any] = [
            "iss": "https://id.example", "sub": "user-1", "aud": "c", "exp": 1_800_003_600, "iat": 1_800_000_000,
            "auth_time": 1_700_000_000, "email": "a@example.com",
        ]
        func jwt(_ c: [String: Any]) throws -> String {
            "e30." + Base64.encodeString([UInt8](try JSONSerialization.data(withJSONObject: c)), .urlSafeUnpadded)
                + ".sig"
        }
        var g = TestKeys.grant(token: "old", now: now)
        g.idToken = try jwt(claims)
        g.providerConfiguration = ProviderConfiguration(issuer: "https://id.example", clientID: "c")
        let changed = claims.merging(
            try JSONSerialization.jsonObject(with: Data(change.utf8)) as! [String: Any]
        ) { $1 }
        let response = try TokenResponse(
            json: bytes(#"{"access_token":"n","id_token":""# + (try jwt(changed)) + #""}"#))
        do throws(VaultError) {
            let next = try g.applying(refresh: response, now: now, what: "refreshing 'work'")
            #expect(refusal == nil, "accepted")
            #expect(next.idToken == response.idToken)
        } catch {
            #expect(error.code == .badResponse)
            #expect(refusal.map { error.reason.contains($0) } == true, "\(error.reason)")
            #expect(error.reason.hasPrefix("refreshing 'work': "))
        }
    }

    @Test(
        "client authentication from discovery's token_endpoint_auth_methods_supported",
        arguments: [
            (nil, "client_secret_basic"), (["client_secret_basic"], "client_secret_basic"),
            (["client_secret_post"], "client_secret_post"),
            (["private_key_jwt", "client_secret_post"], "client_secret_post"),
            (["client_secret_post", "client_secret_basic"], "client_secret_basic"),
            (["private_key_jwt"], "client_secret_basic"),
        ] as [([String]?, String)])
    func discoveredAuthMethod(_ listed: [String]?, _ used: String) throws {
        var doc: [String: Any] = [
            "issuer": "https://id.example", "token_endpoint": "https://id.example/token",
            "authorization_endpoint": "https://id.example/auth",
        ]
        doc["token_endpoint_auth_methods_supported"] = listed
        let body = String(decoding: try JSONSerialization.data(withJSONObject: doc), as: UTF8.self)
        let p = try Discovery.provider(
            name: "corp", issuer: "https://id.example", transport: FakeTransport([(200, body, [])]))
        #expect(p.tokenEndpointAuthMethod == used)
        #expect(p.storedConfiguration.tokenEndpointAuthMethod == used)
    }

    @Test("the presets' error quirks are data, and a stored grant keeps them through the record reader")
    func presetQuirks() throws {
        let catalog = ProviderCatalog.load(configDirectory: TemporaryDirectory().path)
        let github = try catalog.provider("github").errorQuirks
        #expect(github.errorsWithHTTP200)
        #expect(github.canonical("bad_refresh_token") == "invalid_grant")
        #expect(github.canonical("incorrect_client_credentials") == "invalid_client")
        #expect(try catalog.provider("microsoft").errorQuirks.canonical("authorization_declined") == "access_denied")
        #expect(try catalog.provider("google").errorQuirks == ErrorQuirks())
        var g = TestKeys.grant(token: "t", now: now)
        g.providerConfiguration = try catalog.provider("github").storedConfiguration
        g.refreshTokenExpiresAt = now
        g.tokenResponse = [
            "scope": .string("repo,gist"), "n": .number(1.5), "i": .number(1), "big": .number(1e20),
            "x": .array([.null, .bool(true), .number(0)]),
        ]
        let sealed = try Payload(name: "gh", grant: g).sealedBytes().unsafeCopyToArray()
        let ours = try sealed.withUnsafeBytes { try Payload(json: $0, label: "record") }
        #expect(ours.grant == g)
        #expect(Payload.decodedWithFoundation(sealed) == ours)
        #expect(OAuthClient(ours.grant!.providerConfiguration!, providerName: "github").quirks == github)
        // Listing reads no token response.
        let listed = try sealed.withUnsafeBytes { try Payload(json: $0, label: "record", secrets: false) }
        #expect(listed.grant?.tokenResponse == nil && listed.grant?.refreshTokenExpiresAt == now)
    }

    @Test(
        "a provider file's error_aliases must map error codes to error codes",
        arguments: [
            (#"{"bad": "invalid_grant"}"#, true), (#"{"bad\"x": "invalid_grant"}"#, false), (#"{"a": ""}"#, false),
        ])
    func aliases(_ map: String, _ valid: Bool) throws {
        let json =
            #"{"name": "p", "token_endpoint": "https://id.example/token", "flows": ["device"], "device_authorization_endpoint": "https://id.example/device", "error_aliases": "#
            + map + "}"
        let file = try ProviderFile.parse(Array(json.utf8), source: "test")
        #expect(((try? Provider(file: file, source: "test")) != nil) == valid)
    }

    func bytes(_ s: String) throws -> SecureBytes { try SecureBytes(copying: Array(s.utf8)) }
}
