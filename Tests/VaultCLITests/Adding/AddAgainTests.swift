import Foundation
import Testing
import VaultHTTP
import VaultTestSupport

/// The first `vault add` of a provider without a client, supplying the
/// client, and `vault add NAME` authorizing a grant again. Part of the
/// serialized AddFlowTests: the provider registers one exact redirect URI.
extension AddFlowTests {
    /// The record ids in the vault file, raw, to check a grant kept its sync identity.
    func recordIDs() throws -> [String] {
        try VaultProcess.start(
            [home.vaultFile, "SELECT hex(id) FROM records WHERE deleted = 0 ORDER BY id"],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/sqlite3"
        ).wait().stdout.split(separator: "\n").map(String.init)
    }

    @Test("a provider without a client says how to register one; the client then comes from --client-id or a file")
    func clientFromFlagOrFile() throws {
        try providerFile("local", ["issuer": s.issuer, "redirect_uri": s.redirect_uri])
        let bare = try add(["local", "x"])
        #expect(bare.status == 1)
        #expect(bare.stderr.contains("vault: error: provider 'local' has no client"), "\(bare.stderr)")
        #expect(bare.stderr.contains("vault: hint: redirect URI: \(s.redirect_uri)"))
        #expect(bare.stderr.contains("vault: hint: then give vault the client: put {\"client_id\": \"ID\""))
        #expect(bare.stderr.contains("/config/vault/providers/local.json (mode 0600), or pass --client-id ID"))
        try expectNothingStored("x")
        // As the message says: --client-id ...
        let flag = try add(["local", "byflag", "--client-id", s.public_client])
        #expect(flag.status == 0, "\(flag.stderr)")
        // ... or the client in the provider file, which overrides field by field.
        try providerFile(
            "local", ["issuer": s.issuer, "redirect_uri": s.redirect_uri, "client_id": s.public_client])
        let file = try add(["local", "byfile"])
        #expect(file.status == 0, "\(file.stderr)")
        #expect(try userinfoWorks(try #require(try shown("byfile")?["access_token"] as? String)) == s.email)
    }

    @Test("a refused --issuer grant: the hint, run as printed, authorizes it again in place with its own client")
    func hintAfterRefusalWorks() throws {
        // The file holds only what the provider registered (the exact
        // redirect) and its quirk; issuer, client id and secret are given
        // on the command line and remembered by the grant alone.
        try providerFile("mini", ["redirect_uri": s.redirect_uri, "empty_400_is_invalid_grant": true])
        home.write(home.path + "/secret", s.client_secret + "\n")
        let first = try add([
            "mini", "--issuer", s.issuer, "--client-id", s.confidential_client, "--client-secret-file",
            home.path + "/secret",
        ])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try home.run("git-credential", "map", "127.0.0.1", "mini").status == 0)
        let ids = try recordIDs()
        #expect(ids.count == 1)
        let created = try #require(try shown("mini")?["created_at"] as? Int)
        let refresh = try #require(try shown("mini")?["refresh_token"] as? String)
        try ProviderGrants.revoke(refresh, hint: "refresh_token")

        let refused = try home.run("refresh", "mini")
        #expect(refused.status == 2, "\(refused.stderr)")
        let hint = try #require(
            refused.stderr.split(separator: "\n").first { $0.hasPrefix("vault: hint: run '") }, "\(refused.stderr)")
        #expect(hint == "vault: hint: run 'vault add mini' to authorize it again")
        let command = hint.split(separator: "'")[1].split(separator: " ").map(String.init)
        #expect(command.first == "vault")

        let again = try add(Array(command.dropFirst(2)) + ["--scope", "profile"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(
            again.stderr.contains(
                "vault: authorized 'mini' again (mini, ada@example.com; scopes: openid email profile)"))
        let g = try #require(try shown("mini"))
        #expect(g["state"] as? String == "fresh" && g["created_at"] as? Int == created)
        #expect((g["scopes"] as? [String])?.contains("profile") == true)
        #expect(try userinfoWorks(try #require(g["access_token"] as? String)) == s.email)
        // Same record (sync identity), same name, same git mapping.
        #expect(try recordIDs() == ids)
        let mapped = try VaultProcess.run(
            ["git-credential", "get"], environment: home.environment,
            stdin: "protocol=https\nhost=127.0.0.1\n\n")
        #expect(mapped.status == 0 && mapped.stdout.contains("password="), "\(mapped.stderr)")
        #expect(try home.run("refresh", "mini").status == 0)
        #expect(!again.stderr.contains(s.client_secret))
    }

    @Test("vault add NAME for a grant made from a preset override uses the grant's client, not the file's new one")
    func againKeepsTheGrantsClient() throws {
        try localProvider(client: s.public_client)
        #expect(try add(["local", "keep"]).status == 0)
        // The file now names a client the provider does not know: the grant's own is used.
        try localProvider(client: "not-registered")
        let again = try add(["keep"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("authorized 'keep' again"))
        #expect(again.stderr.contains("client_id=\(s.public_client)"))
    }

    @Test("a discovery error names the address once; a browser timeout offers only the flows the provider has")
    func smallerMessages() throws {
        let dead = try add(["dead", "--issuer", "http://127.0.0.1:1/oidc", "--client-id", "c"])
        #expect(dead.status == 75)
        #expect(dead.stderr.components(separatedBy: "127.0.0.1:1/oidc").count == 2, "\(dead.stderr)")
        #expect(
            dead.stderr.contains("vault: error: discovery: http://127.0.0.1:1/oidc/.well-known/openid-configuration"))
        // No device endpoint: the hint does not offer --flow device.
        try providerFile(
            "nodevice",
            [
                "issuer": s.issuer, "authorization_endpoint": s.issuer + "/auth", "token_endpoint": s.issuer + "/token",
                "client_id": s.public_client, "redirect_uri": s.redirect_uri, "flows": ["browser", "paste"],
                "scopes": ["openid", "email"],
            ])
        let slow = try add(["nodevice", "--timeout", "1"], browser: "nothing")
        #expect(slow.status == 75, "\(slow.stderr)")
        #expect(
            slow.stderr.contains("vault: hint: finish the authorization in the browser sooner, or use --flow paste\n"))
        #expect(!slow.stderr.contains("--flow device"))
    }
}
