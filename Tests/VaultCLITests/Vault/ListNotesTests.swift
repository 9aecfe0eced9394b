import Foundation
import Testing
import VaultTestSupport

/// `vault list` adds notes for a person on stderr after its table; with
/// `--json` stderr carries only errors (docs/cli.md, `vault list`).
@Suite("list: notes with the table, none with --json")
struct ListNotesTests {
    @Test("a provider this machine has no file of is noted under the table, not beside JSON")
    func providerNote() throws {
        let home = Home()
        try home.initKeyfileVault()
        // The grant's endpoints come from a provider file, gone since.
        try home.providerFile(
            "p",
            [
                "authorization_endpoint": "https://127.0.0.1:9/authorize",
                "token_endpoint": "https://127.0.0.1:9/token",
                "client_id": "c",
            ])
        let grant = #"{"access_token":"t","refresh_token":"r","expires_in":3600,"provider":"p"}"#
        #expect(try home.run("import", "work", stdin: grant).status == 0)
        try FileManager.default.removeItem(atPath: home.path + "/config/vault/providers/p.json")
        // One that came with endpoints of its own needs no provider file.
        let own =
            #"{"access_token":"t","refresh_token":"r","expires_in":3600,"provider":"q","#
            + #""provider_config":{"token_endpoint":"https://127.0.0.1:9/token","client_id":"c"}}"#
        let imported = try home.run("import", "mine", stdin: own)
        #expect(imported.status == 0 && imported.stderr == "vault: imported 'mine' (q)\n", "\(imported.stderr)")
        let text = try home.run("list")
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stderr.contains("vault: no provider file for 'p' on this machine"), "\(text.stderr)")
        #expect(!text.stderr.contains("'q'"), "\(text.stderr)")
        let json = try home.run("list", "--json")
        #expect(json.status == 0)
        #expect(json.stderr.isEmpty, "\(json.stderr)")
        #expect(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) is [Any])
    }
}
