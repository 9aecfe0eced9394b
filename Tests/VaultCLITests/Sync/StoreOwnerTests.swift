import Foundation
import Testing
import VaultTestSupport

/// A store folder holds one vault (docs/sync.md, "Objects": the root and
/// the keys name it): `vault remote set` refuses the folder of another
/// vault, with what to do, and keeps the settings it had.
extension SyncTests {
    @Test("remote set refuses a folder that holds another vault and changes no setting")
    func anotherVaultsFolder() throws {
        try a.run("import", "work", stdin: Home.tokenJSON("a-1"))
        try connect(a)
        try sync(a)

        // A vault of its own, not a's (its own key file).
        let c = Home()
        try c.initKeyfileVault()
        c.extra["VAULT_AGENT"] = "off"
        c.write(c.path + "/store-password", "store password\n")
        let set = ["--user", "vault", "--password-file", c.path + "/store-password"]
        let refused = try c.run(["remote", "set", proxied] + set)
        #expect(refused.status == 64, "\(refused.stderr)")
        #expect(
            refused.stderr.contains("vault: error: \(proxied) holds another vault (id "), "\(refused.stderr)")
        #expect(refused.stderr.contains("not this one (id "))
        #expect(refused.stderr.contains("vault: hint: to sync this vault, give 'vault remote set' another folder"))
        #expect(refused.stderr.contains("vault: hint: to use the vault the store holds on this machine, join it"))
        #expect(try c.run("remote").stderr.contains("no store is set"))

        // A store set before stays set; the same folder by another address is refused too.
        let own = davURL + "c/"
        let first = try c.run(["remote", "set", own] + set)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try c.run(["remote", "set", davURL] + set).status == 64)
        #expect(try c.run("remote").stdout.hasPrefix(own), "the earlier store is kept")
        #expect(try c.run("sync").status == 0)

        // The vault's own folder is taken again, by a machine of that vault.
        #expect(
            try a.run(["remote", "set", proxied, "--user", "vault", "--password-file", a.path + "/store-password"])
                .status == 0)
        try sync(a)
    }
}
