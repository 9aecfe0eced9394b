import Foundation
import Glibc
import Testing
import VaultTestSupport

@Suite("git credentials")
struct GitEraseTests {
    @Test("erase never makes a token that cannot be refreshed unusable")
    func eraseWithoutRefreshToken() throws {
        let home = Home()
        try home.initKeyfileVault()
        // A classic GitHub OAuth token: no expiry, no refresh token.
        try home.run("import", "gh", stdin: #"{"access_token":"gho_classic","provider":"github"}"#)
        try home.run("git-credential", "map", "github.com", "gh")
        let request = "protocol=https\nhost=github.com\n"
        let first = try home.run("git-credential", "get", stdin: request + "\n")
        #expect(first.stdout.contains("password=gho_classic\n"), "\(first.stderr)")
        #expect(try home.run("git-credential", "erase", stdin: request + "password=gho_classic\n\n").status == 0)
        let again = try home.run("git-credential", "get", stdin: request + "\n")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("password=gho_classic\n"))
        #expect(try home.run("token", "gh").stdout == "gho_classic\n")
        let list = try home.run("list")
        #expect(list.stdout.contains("fresh"), "\(list.stdout)")
    }

    @Test("paths are matched with their case; hosts without")
    func caseSensitivePaths() throws {
        let home = Home()
        try home.initKeyfileVault()
        try home.run("import", "upper", stdin: Home.tokenJSON("upper-token"))
        try home.run("import", "lower", stdin: Home.tokenJSON("lower-token"))
        try home.run("git-credential", "map", "git.example.com/Team/App", "upper")
        try home.run("git-credential", "map", "git.example.com/team/app", "lower")
        func password(_ host: String, _ path: String) throws -> String {
            let r = try home.run("git-credential", "get", stdin: "protocol=https\nhost=\(host)\npath=\(path)\n\n")
            return r.stdout
        }
        #expect(try password("git.example.com", "Team/App.git").contains("password=upper-token"))
        #expect(try password("git.example.com", "team/app.git").contains("password=lower-token"))
        #expect(try password("GIT.Example.com", "Team/App").contains("password=upper-token"))
        #expect(try password("git.example.com", "TEAM/APP").isEmpty)
    }
}
