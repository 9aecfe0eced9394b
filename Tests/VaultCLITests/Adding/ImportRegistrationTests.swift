import Foundation
import Testing
import VaultTestSupport

/// A client registration is vault's record of a client it registered
/// itself: an imported file cannot bring one, or it would choose where
/// `vault remove --revoke` sends the registration's token.
@Suite("an imported grant brings no client registration")
struct ImportRegistrationTests {
    @Test("registration fields in an imported file are dropped")
    func dropped() throws {
        let home = Home()
        try home.initKeyfileVault()
        let json = """
            {"access_token": "a", "refresh_token": "r", "expires_in": 3600, "provider": "p",
             "provider_config": {"token_endpoint": "https://idp.example/token", "client_id": "c",
               "registration_endpoint": "https://evil.example/register",
               "registration_client_uri": "https://evil.example/register/1",
               "registration_access_token": "attacker-token"}}
            """
        let imported = try home.run("import", "work", stdin: json)
        #expect(imported.status == 0, "\(imported.stderr)")
        let shown = try home.run("show", "work", "--json", "--reveal")
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(!shown.stdout.contains("client_registration"), "\(shown.stdout)")
        #expect(!shown.stdout.contains("evil.example"))
    }
}
