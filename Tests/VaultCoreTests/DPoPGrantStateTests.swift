import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore

/// The states a grant's DPoP key and token type can reach from outside:
/// tokens an app migrates, odd token endpoint answers. Each must leave a
/// grant that sends its tokens the way they were issued, and that the
/// vault can read back.
@Suite("DPoP: the states a grant's key and token type reach")
struct DPoPGrantStateTests {
    let dir = TemporaryDirectory()

    func provider() throws -> Provider {
        try Provider(
            name: "p", authorizationEndpoint: "https://id.example/auth", tokenEndpoint: "https://id.example/token",
            clientID: "c")
    }

    /// An app's token response or AppAuth archive that names a DPoP token
    /// carries no key: migrated, the token would go out with the Bearer
    /// scheme and its refresh without a proof, which kills the grant.
    @Test("a migrated token response with token_type DPoP is refused: no key comes with it")
    func migratedDPoPTokenResponseRefused() throws {
        let json = #"{"access_token":"a","refresh_token":"r","token_type":"DPoP","expires_in":60}"#
        let bytes = try SecureBytes(copying: Array(json.utf8))
        let p = try provider()
        let migrated = Result { () throws(VaultError) in try Grant(tokenResponse: bytes, provider: p) }
        guard case .failure(let error) = migrated else {
            Issue.record("a DPoP token response was migrated without its key")
            return
        }
        #expect(error.code == .invalidInput)
    }

    @Test("a migrated AppAuth archive with token_type DPoP is refused: no key comes with it")
    func migratedDPoPAppAuthRefused() throws {
        let state = AppAuthState(
            accessToken: "a", accessTokenExpirationDate: Date().addingTimeInterval(60), tokenType: "DPoP",
            refreshToken: "r", authorizationEndpoint: "https://id.example/auth",
            tokenEndpoint: "https://id.example/token", clientID: "c")
        let migrated = Result { () throws(VaultError) in try Grant(appAuth: state, providerName: "p") }
        guard case .failure(let error) = migrated else {
            Issue.record("a DPoP AppAuth archive was migrated without its key")
            return
        }
        #expect(error.code == .invalidInput)
    }

    /// An OAuth 2.0 answer to a request made with a proof that also carries
    /// an OAuth 1.0a token secret: the grant must still be one the vault
    /// reads back, never a key stored under a kind that has none.
    @Test("a bearer answer with a token secret, asked for with a proof, is stored so that it reads back")
    func answerWithTokenSecretReadsBack() throws {
        let fake = FakeTransport([
            (200, #"{"device_code":"d","user_code":"U","verification_uri":"https://id.example/go","interval":1}"#, []),
            (200, #"{"access_token":"at","token_type":"Bearer","refresh_token":"rt","token_secret":"s"}"#, []),
        ])
        var request = AuthorizationRequest(provider: try DeviceFlowTests().provider(), flow: .device, timeout: 30)
        request.dpopKey = try DPoPKey.generate()
        let authorizer = Authorizer(transport: fake, ui: DeviceFlowTests.RecordingUI(), sleep: { _ in })
        // Refused (nothing stored) or stored so that it reads back: both are fine.
        let answered = Result(catching: { () throws(VaultError) in try authorizer.authorize(request) })
        if case .success(let grant) = answered {
            let vault = try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
            _ = try vault.save(grant, as: "work")
            if case .failure(let error) = Result(catching: { () throws(VaultError) in try vault.load("work") }) {
                Issue.record("the grant was stored but cannot be read back: \(error.code)")
            }
        }
    }
}
