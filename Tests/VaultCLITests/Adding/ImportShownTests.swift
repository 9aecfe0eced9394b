import Foundation
import Testing
import VaultTestSupport

/// `vault show --json --reveal NAME | vault import NEW` moves a grant whole.
@Suite("import: a grant as 'vault show --json --reveal' prints it")
struct ImportShownTests {
    func object(_ r: ProcessResult) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stdout)")
    }

    @Test("scopes, account, expiry, id token, times and the kept answer come through; show's own fields do not")
    func roundTrip() throws {
        let home = Home()
        try home.initKeyfileVault()
        try home.providerFile("p", ["token_endpoint": "https://id.example/token", "client_id": "c"])
        let original =
            #"{"access_token":"at","refresh_token":"rt","id_token":"a.b.c","expires_in":3600,"#
            + #""scope":"openid email mail","refresh_token_expires_in":86400,"ext_expires_in":7200,"#
            + #""provider":"p","account":"ada@example.com"}"#
        try #require(try home.run("import", "old", stdin: original).status == 0)
        let shown = try home.run("show", "old", "--json", "--reveal")
        try #require(shown.status == 0, "\(shown.stderr)")
        let moved = try home.run("import", "new", stdin: shown.stdout)
        #expect(moved.status == 0, "\(moved.stderr)")
        let before = try object(shown)
        let after = try object(try home.run("show", "new", "--json", "--reveal"))
        #expect(after["scopes"] as? [String] == ["openid", "email", "mail"], "\(after)")
        for key in [
            "provider", "account", "expires_at", "access_token", "refresh_token", "id_token", "token_type",
            "created_at", "refreshed_at", "refresh_token_expires_at", "refresh_token_deadline_at",
        ] {
            #expect(
                (after[key].map { "\($0)" } ?? "nil") == (before[key].map { "\($0)" } ?? "nil"), "\(key): \(after)")
        }
        let kept = try #require(after["token_response"] as? [String: Any])
        #expect(Set(kept.keys) == Set((before["token_response"] as? [String: Any] ?? [:]).keys), "\(kept)")
        #expect(kept["name"] == nil && kept["state"] == nil && kept["token_response"] == nil)
    }

    @Test("'scope' and 'scopes' that disagree are refused; a machine grant's JSON is refused")
    func disagreements() throws {
        let home = Home()
        try home.initKeyfileVault()
        let both = #"{"access_token":"at","provider":"p","scope":"openid","scopes":["openid","mail"]}"#
        let r = try home.run("import", "x", stdin: both)
        #expect(r.status == 1)
        #expect(
            r.stderr.contains(
                "the token JSON's 'scope' (openid) and 'scopes' (openid mail) name different scopes; keep one of them"),
            "\(r.stderr)")
        let agree = #"{"access_token":"at","provider":"p","scope":"mail openid","scopes":["openid","mail"]}"#
        #expect(try home.run("import", "y", stdin: agree).status == 0)
        let machine = #"{"access_token":"at","provider":"p","kind":"client_credentials"}"#
        let m = try home.run("import", "z", stdin: machine)
        #expect(m.status == 1 && m.stderr.contains("machine grant"), "\(m.stderr)")
    }
}
