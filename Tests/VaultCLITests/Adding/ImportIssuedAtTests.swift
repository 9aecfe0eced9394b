import Foundation
import Testing
import VaultTestSupport

/// `vault import` counts `expires_in` from when the answer was issued
/// (`iat`) when it says so plausibly, else from the import.
@Suite("import: expires_in from the answer's iat")
struct ImportIssuedAtTests {
    func expiresAt(iat: Int, now: Int) throws -> Int {
        let home = Home()
        try home.initKeyfileVault()
        let json = #"{"access_token":"t","expires_in":3600,"iat":\#(iat),"provider":"p"}"#
        let imported = try home.run("import", "work", stdin: json)
        try #require(imported.status == 0, "\(imported.stderr)")
        let shown = try home.run("show", "work", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        return try #require(object["expires_at"] as? Int, "\(shown.stdout)")
    }

    @Test("an answer 40 s old expires 40 s sooner; an iat in the future or before expires_in is not believed")
    func issuedAt() throws {
        let now = Int(Date().timeIntervalSince1970)
        #expect(try expiresAt(iat: now - 40, now: now) == now - 40 + 3600)
        // Later than now: this machine's clock or the file is wrong; from now.
        let future = try expiresAt(iat: now + 1000, now: now)
        #expect(future >= now + 3600 && future < now + 3600 + 60, "\(future - now)")
        // The token would have expired before the import: from now.
        let stale = try expiresAt(iat: now - 7200, now: now)
        #expect(stale >= now + 3600 && stale < now + 3600 + 60, "\(stale - now)")
    }
}
