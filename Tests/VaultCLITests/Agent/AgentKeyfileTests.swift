import Foundation
import Testing
import VaultTestSupport

/// The agent comes first in the unlock order (docs/cli.md, "Unlocking"),
/// but a key file given while it holds the vault is not ignored when it is
/// bad: the command fails as it would without the agent, naming the file.
@Suite("a bad key file while the agent holds the vault")
struct AgentKeyfileTests {
    @Test("a missing, foreign or wrong --keyfile fails naming the file; a right one is no trouble")
    func badKeyfileIsAnError() throws {
        let home = Home()
        try home.initKeyfileVault()
        let other = Home()
        try other.initKeyfileVault()
        #expect(try home.run("import", "work", stdin: Home.tokenJSON("t", provider: "p")).status == 0)
        home.allowAgent()
        #expect(try home.start("agent").wait().status == 0)
        defer { _ = try? home.run("lock") }
        // The agent serves without a key file here.
        home.extra["VAULT_KEYFILE"] = nil

        let missing = try home.run("list", "--keyfile", home.path + "/nonexistent")
        #expect(missing.status == 1, "\(missing.stderr)")
        #expect(missing.stderr.contains(home.path + "/nonexistent") && missing.stderr.contains("--keyfile"))
        home.write(home.path + "/random", String(repeating: "x", count: 32))
        let random = try home.run("token", "work", "--keyfile", home.path + "/random")
        #expect(random.status == 77 && random.stdout.isEmpty, "\(random.stderr)")
        #expect(random.stderr.contains("(from --keyfile)"), "\(random.stderr)")
        let wrong = try home.run("list", "--keyfile", other.path + "/key")
        #expect(wrong.status == 77, "\(wrong.stderr)")
        #expect(wrong.stderr.contains("does not open this vault (from key file \(other.path)/key)"), "\(wrong.stderr)")

        let right = try home.run("token", "work", "--keyfile", home.path + "/key")
        #expect(right.status == 0 && right.stdout == "t\n", "\(right.stderr)")
        #expect(try home.run("list", "--keyfile", home.path + "/key").status == 0)
    }
}
