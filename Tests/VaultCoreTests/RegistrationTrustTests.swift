import Foundation
import Testing
import VaultHTTP
import VaultTestSupport

@testable import VaultCore

/// Where a registration access token may go, whatever stored the
/// registration, and where a registration endpoint may come from.
@Suite("client registrations: the token goes only to the registration's own host")
struct RegistrationTrustTests {
    @Test(
        "a stored registration whose address is elsewhere, or whose token cannot be a header, sends nothing",
        arguments: [
            ("https://evil.example/register/client/1", "token"),
            ("http://idp.example/register/client/1", "token"),
            ("https://idp.example@evil.example/register/client/1", "token"),
            ("https://idp.example/register/client/1", "token\r\nX-Injected: 1"),
        ])
    func deleteChecksAgain(uri: String, token: String) {
        let transport = FakeTransport([(204, "", [])])
        let registration = RegisteredClient(
            endpoint: "https://idp.example/register", clientURI: uri, accessToken: token)
        #expect(throws: VaultError.self) { try ClientRegistrar(transport: transport).delete(registration) }
        #expect(transport.requests.isEmpty)
    }

    @Test("a registration at its own host is deleted with its token")
    func deleteAtItsHost() throws {
        let transport = FakeTransport([(204, "", [])])
        let registration = RegisteredClient(
            endpoint: "https://idp.example/register", clientURI: "https://IDP.example/register/client/1",
            accessToken: "token")
        #expect(try ClientRegistrar(transport: transport).delete(registration) == .deleted)
        #expect(transport.requests.first?.headers["authorization"] == "Bearer token")
    }

    @Test("a file that names its own endpoints takes no registration endpoint from what it overrides")
    func registrationEndpointTravels() throws {
        let base = try ProviderFile.parse(
            Array(
                #"{"name": "p", "authorization_endpoint": "https://a.example/auth", "token_endpoint": "https://a.example/token", "registration_endpoint": "https://a.example/register"}"#
                    .utf8), source: "base")
        let own = try ProviderFile.parse(
            Array(#"{"name": "p", "token_endpoint": "https://b.example/token"}"#.utf8), source: "file")
        #expect(base.merging(own).registration_endpoint == nil)
        let names = try ProviderFile.parse(Array(#"{"name": "p", "scopes": ["x"]}"#.utf8), source: "file")
        #expect(base.merging(names).registration_endpoint == "https://a.example/register")
    }

    @Test("an imported configuration keeps no registration")
    func importDrops() throws {
        var config = ProviderConfiguration()
        config.registrationEndpoint = "https://evil.example/register"
        config.registrationClientURI = "https://evil.example/register/1"
        config.registrationAccessToken = "token"
        config.dropRegistration()
        #expect(RegisteredClient(config) == nil)
        #expect(config.registrationAccessToken == nil)
    }
}
