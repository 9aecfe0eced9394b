import Foundation
import Glibc
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

/// Fresh tokens against the real provider, whose refresh tokens are one-use
/// (they rotate), through a counting proxy that can also play dead.
@Suite("fresh tokens: token, refresh, check and remove --revoke")
struct RefreshTests {
    let oidc: OIDCProvider
    let proxy: FixtureServer
    let home = Home()

    init() throws {
        oidc = try OIDCProvider.shared.get()
        proxy = try FixtureServer(script: "counting_proxy.py", arguments: [oidc.settings.base])
        try home.initKeyfileVault()
    }

    var proxied: String { "http://127.0.0.1:\(proxy.port)/api/oidc" }

    /// Tokens from a whole code flow run outside vault, imported as NAME
    /// with refresh going through the proxy. `expiresIn` < 0 makes it expired.
    func importGrant(
        _ name: String, confidential: Bool = false, expiresIn: Int = -10, empty400IsInvalidGrant: Bool = true
    ) throws -> [String: Any] {
        let s = oidc.settings
        let client = confidential ? s.confidential_client : s.public_client
        let r = try VaultProcess.start(
            // The confidential client's secret comes from the settings file, never argv.
            ["\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "tokens", oidc.directory, client],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        try #require(r.status == 0, "\(r.stderr)")
        let tokens = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        var config: [String: Any] = [
            "token_endpoint": proxied + "/token", "userinfo_endpoint": proxied + "/userinfo",
            "revocation_endpoint": proxied + "/revoke", "client_id": client,
            // glewlwyd answers a revoked refresh token with a bare 400.
            "empty_400_is_invalid_grant": empty400IsInvalidGrant,
        ]
        if confidential { config["client_secret"] = s.client_secret }
        let grant: [String: Any] = [
            "access_token": tokens["access_token"]!, "refresh_token": tokens["refresh_token"]!,
            "expires_at": Int(Date().timeIntervalSince1970) + expiresIn, "provider": "local",
            "account": s.email, "provider_config": config,
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let imported = try home.run("import", name, "--replace", stdin: json)
        try #require(imported.status == 0, "\(imported.stderr)")
        return tokens
    }

    func counts() throws -> (requests: Int, refreshes: Int) {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(proxy.port)/__counts"))
        let doc = try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as! [String: Any]
        let grants = doc["grant_types"] as! [String: Int]
        return (doc["requests"] as! Int, grants["refresh_token"] ?? 0)
    }

    func control(_ path: String) throws {
        _ = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(proxy.port)\(path)"))
    }

    /// The stored records and the authenticated state (its generation
    /// included), raw, to prove nothing was written.
    func rawRecords() throws -> String {
        try VaultProcess.start(
            [
                home.vaultFile,
                "SELECT hex(id), version, hex(nonce), hex(ciphertext) FROM records ORDER BY id;"
                    + "SELECT hex(value) FROM meta WHERE key = 'state'",
            ],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/sqlite3"
        ).wait().stdout
    }

    func state(_ name: String) throws -> String? {
        let r = try home.run("show", name, "--json")
        let doc = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        return doc?["state"] as? String
    }

    func parallelTokens(_ name: String, count: Int = 20) throws -> [ProcessResult] {
        let running = try (0..<count).map { _ in try home.start("token", name) }
        return running.map { $0.wait(timeout: 90) }
    }

    @Test("an expired grant and 20 vault token at once: one refresh, one token for all, still refreshable")
    func singleRefresh() throws {
        _ = try importGrant("work")
        #expect(try state("work") == "refreshable")
        let results = try parallelTokens("work")
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr).filter { !$0.isEmpty })")
        let printed = Set(results.map(\.stdout))
        #expect(printed.count == 1)
        #expect(printed.first?.hasSuffix("\n") == true && printed.first!.count > 100)
        #expect(try counts().refreshes == 1)
        #expect(try state("work") == "fresh")
        // The rotated refresh token was stored: the grant refreshes again.
        let again = try home.run("refresh", "work")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try counts().refreshes == 2)
        #expect(try home.run("token", "work").stdout != printed.first)
        // A fresh token needs no network at all.
        let before = try counts().requests
        #expect(try home.run("token", "work").status == 0)
        #expect(try counts().requests == before)
    }

    @Test("the agent refreshes a used short-lived grant before it expires; vault token never waits on the network")
    func backgroundRefresh() throws {
        let runtime = home.path + "/run"
        mkdir(runtime, 0o700)
        home.extra["XDG_RUNTIME_DIR"] = runtime
        let first = try importGrant("short", expiresIn: 14)
        let expiry = Date().addingTimeInterval(14)
        let started = try home.run("agent", "--refresh-before", "10s")
        #expect(started.status == 0, "\(started.stderr)")
        defer { _ = try? home.run("lock") }
        // From here only the agent can open the vault.
        home.extra["VAULT_KEYFILE"] = nil
        let before = try counts().refreshes
        #expect(try home.run("token", "short", "--min-valid", "0").stdout == "\(first["access_token"]!)\n")
        #expect(try counts().refreshes == before, "a fresh token needs no refresh")
        // Half-way through the token's short life the agent refreshes it.
        let deadline = Date().addingTimeInterval(30)
        while try counts().refreshes == before && Date() < deadline { usleep(200_000) }
        #expect(try counts().refreshes == before + 1)
        #expect(Date() < expiry, "refreshed ahead of the expiry")
        // After the old expiry, with the provider unreachable: the token is
        // already fresh, so the command does not need the network at all.
        while Date() < expiry.addingTimeInterval(1) { usleep(200_000) }
        try control("/__down")
        let r = try home.run("token", "short")
        try control("/__up")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stdout.isEmpty && r.stdout != "\(first["access_token"]!)\n")
        #expect(try counts().refreshes == before + 1)
        // And the new token is the provider's: userinfo accepts it.
        #expect(try home.run("check", "short").status == 0)
    }

    @Test("two synced machines refreshing one grant at once spend its one-use refresh token once")
    func syncedRefresh() throws {
        let dir = TemporaryDirectory()
        let dav = try WebDAVStore(in: dir.path, password: "pw")
        let url = dav.url
        let passwordFile = dav.passwordFile
        home.extra["VAULT_AGENT"] = "off"
        _ = try importGrant("work")  // expired: the next token call refreshes
        #expect(try home.run("remote", "set", url, "--user", "vault", "--password-file", passwordFile).status == 0)
        #expect(try home.run("sync").status == 0)
        let other = Home()
        other.extra = ["VAULT_AGENT": "off", "VAULT_KEYFILE": home.path + "/key"]
        let joined = try other.run("join", url, "--user", "vault", "--password-file", passwordFile)
        #expect(joined.status == 0, "\(joined.stderr)")

        let before = try counts().refreshes
        let running = try (0..<4).flatMap { _ in [try home.start("token", "work"), try other.start("token", "work")] }
        let results = running.map { $0.wait(timeout: 120) }
        #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
        #expect(Set(results.map(\.stdout)).count == 1, "every process printed the same token")
        #expect(try counts().refreshes == before + 1, "the one-use refresh token was spent once")
        #expect(try state("work") == "fresh")
        let otherState = try other.run("show", "work", "--json").stdout
        #expect(otherState.contains("\"state\" : \"fresh\""), "\(otherState)")
        // And it refreshes again later: the rotated token reached both. The
        // machine that refreshed (either: the eight raced) holds the grant
        // (docs/sync.md, "Refresh rights while the store is away"), as its
        // doctor says: the other asks for it, and has it once the holder has
        // synced.
        let told = try home.run("doctor", "work")
        let homeHolds = (told.stdout + told.stderr).contains("this machine holds the right to refresh it")
        let (holder, asker) = homeHolds ? (home, other) : (other, home)
        // The doctor's probe of the token endpoint spends nothing, but is counted.
        let probed = try counts().refreshes
        #expect(try holder.run("sync").status == 0 && asker.run("sync").status == 0)
        let again = try holder.run("token", "work", "--force-refresh")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try asker.run("sync").status == 0)
        let asked = try asker.run("token", "work", "--force-refresh")
        #expect(asked.status == 75 && asked.stderr.contains("holds the right to refresh 'work'"), "\(asked.stderr)")
        #expect(try holder.run("sync").status == 0)
        let handedOver = try asker.run("token", "work", "--force-refresh")
        #expect(handedOver.status == 0, "\(handedOver.stderr)")
        #expect(try counts().refreshes == probed + 2)
    }

    @Test("the provider down: every vault token exits 75; the grant and the vault state are byte-for-byte unchanged")
    func providerDown() throws {
        _ = try importGrant("work")
        let before = try rawRecords()
        #expect(!before.isEmpty)
        try control("/__down")
        let results = try parallelTokens("work")
        #expect(results.allSatisfy { $0.status == 75 }, "\(Set(results.map(\.status)))")
        #expect(results.allSatisfy { $0.stderr.contains("vault: error: refreshing 'work'") && $0.stdout.isEmpty })
        try control("/__status/503")
        #expect(try home.run("token", "work").status == 75)
        #expect(try home.run("check", "work").status == 75)
        #expect(try rawRecords() == before)
        try control("/__up")
        #expect(try home.run("token", "work").status == 0)
    }

    @Test("a revoked grant: vault token exits 2 and marks it dead, kept; vault check agrees")
    func revoked() throws {
        let tokens = try importGrant("work", confidential: true)
        try ProviderGrants.revoke(tokens["refresh_token"] as! String, hint: "refresh_token")
        let r = try home.run("token", "work")
        #expect(r.status == 2)
        #expect(
            r.stderr.contains("needs a new authorization")
                && r.stderr.contains("run 'vault add work' to authorize it again"))
        #expect(try state("work") == "dead")
        #expect(try home.run("list").stdout.contains("dead"))
        #expect(try home.run("check", "work").status == 2)
        #expect(try home.run("token", "work").status == 2)
    }

    @Test("empty_400_is_invalid_grant set in the provider file after the grant was added counts for it")
    func empty400FromProviderFile() throws {
        let tokens = try importGrant("work", confidential: true, empty400IsInvalidGrant: false)
        try ProviderGrants.revoke(tokens["refresh_token"] as! String, hint: "refresh_token")
        let before = try home.run("refresh", "work")
        #expect(before.status == 1, "\(before.stderr)")
        #expect(before.stderr.contains("\"empty_400_is_invalid_grant\": true in its provider file"), "\(before.stderr)")
        // A file for another token endpoint of the same name does not say how this one answers.
        let file: [String: Any] = [
            "authorization_endpoint": proxied + "/auth", "token_endpoint": proxied + "/token",
            "client_id": oidc.settings.confidential_client, "empty_400_is_invalid_grant": true,
        ]
        var elsewhere = file
        elsewhere["token_endpoint"] = "https://elsewhere.example/token"
        try home.providerFile("local", elsewhere)
        #expect(try home.run("refresh", "work").status == 1)
        try home.providerFile("local", file)
        let after = try home.run("refresh", "work")
        #expect(after.status == 2, "\(after.stderr)")
        #expect(after.stderr.contains("needs a new authorization"), "\(after.stderr)")
        #expect(!after.stderr.contains("empty_400_is_invalid_grant"), "\(after.stderr)")
        #expect(try state("work") == "dead")
    }

    @Test("vault check: a live grant answers 0 and names its state")
    func check() throws {
        _ = try importGrant("live", confidential: true, expiresIn: 3600)
        let r = try home.run("check", "live", "--json")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("\"state\" : \"live\""))
        #expect(r.stdout.contains("\"stored_token_refused\" : false"), "\(r.stdout)")
        let plain = try home.run("check", "live")
        #expect(plain.stderr == "vault: 'live' is live (\(oidc.settings.email))\n", "\(plain.stderr)")
    }

    @Test("vault check after the provider revoked the access token: refreshed, and it says the stored one was refused")
    func checkRevokedAccessToken() throws {
        let tokens = try importGrant("mail", confidential: true, expiresIn: 3600)
        try ProviderGrants.revoke(tokens["access_token"] as! String, hint: "access_token")
        let r = try home.run("check", "mail")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(
            r.stderr
                == "vault: the provider no longer accepted the stored access token (the userinfo endpoint answered "
                + "HTTP 401); refreshed it: 'mail' is live (\(oidc.settings.email))\n", "\(r.stderr)")
        #expect(try counts().refreshes == 1)
        // The new token is accepted: the next check says nothing more.
        let again = try home.run("check", "mail", "--json")
        #expect(again.stdout.contains("\"stored_token_refused\" : false"), "\(again.stdout)")
        try ProviderGrants.revoke(
            try home.run("token", "mail").stdout.trimmingCharacters(in: .newlines), hint: "access_token")
        let json = try home.run("check", "mail", "--json")
        #expect(json.status == 0 && json.stdout.contains("\"stored_token_refused\" : true"), "\(json.stdout)")
    }

    @Test("remove --revoke: the provider rejects the refresh token afterwards")
    func removeRevoke() throws {
        let tokens = try importGrant("gone", confidential: true, expiresIn: 3600)
        let r = try home.run("remove", "gone", "--revoke")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("revoked the refresh token at the provider and removed 'gone'"))
        let s = oidc.settings
        let body = try SecureBytes(
            copying: Array("grant_type=refresh_token&refresh_token=\(tokens["refresh_token"]!)".utf8))
        let basic = Data("\(s.confidential_client):\(s.client_secret)".utf8).base64EncodedString()
        let refused = try CurlTransport().send(
            HTTPRequest(
                method: "POST", url: s.issuer + "/token",
                headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Basic \(basic)")],
                body: body))
        #expect(refused.status == 400)
        #expect(try home.run("show", "gone").status == 1)
    }

    @Test("remove --revoke keeps the grant when the revocation fails, and says so without an endpoint")
    func removeRevokeFailures() throws {
        _ = try importGrant("kept", confidential: true, expiresIn: 3600)
        try control("/__down")
        let r = try home.run("remove", "kept", "--revoke")
        #expect(r.status == 75)
        #expect(r.stderr.contains("the grant was kept"))
        #expect(try home.run("show", "kept").status == 0)
        try control("/__up")
        let plain = try home.run(
            "import", "plain", stdin: #"{"access_token":"a","refresh_token":"r","provider":"x"}"#)
        #expect(plain.status == 0)
        let gone = try home.run("remove", "plain", "--revoke")
        #expect(gone.status == 0)
        #expect(gone.stderr.contains("has no revocation endpoint"))
    }

    @Test("remove --revoke refused with 401 (glewlwyd, a public client): no 'try again', the way out instead")
    func removeRevokeRefused() throws {
        _ = try importGrant("public", confidential: false, expiresIn: 3600)
        let r = try home.run("remove", "public", "--revoke")
        #expect(r.status == 1, "\(r.stderr)")
        #expect(
            r.stderr.hasPrefix(
                "vault: error: revoking 'public': the provider refused this client's revocation request (HTTP 401)"),
            "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: hint: the grant was kept: 'vault remove public' without --revoke removes it here, and its "
                    + "tokens stay valid at the provider until they expire"), "\(r.stderr)")
        #expect(!r.stderr.contains("try again") && !r.stderr.contains("not an OAuth answer"), "\(r.stderr)")
        #expect(try home.run("show", "public").status == 0)
        #expect(try home.run("remove", "public").status == 0)
    }

    @Test("expired without a refresh token: exit 2, and the grant stays 'expired'")
    func expiredWithoutRefresh() throws {
        let old = Int(Date().timeIntervalSince1970) - 100
        _ = try home.run("import", "old", stdin: #"{"access_token":"a","expires_at":\#(old),"provider":"x"}"#)
        let r = try home.run("token", "old")
        #expect(r.status == 2)
        #expect(r.stderr.contains("has expired and has no refresh token"))
        #expect(try state("old") == "expired")
    }

    @Test("SIGKILL during refreshes never leaves a half-written grant")
    func killDuringRefresh() throws {
        _ = try importGrant("k")
        // The kill delay follows the machine: it shrinks after a run that
        // completed and grows after one that was killed, so the kills keep
        // landing inside refreshes however fast or loaded the machine is.
        var window = 50_000.0
        var rng = SystemRandomNumberGenerator()
        var killed = 0
        for _ in 0..<40 {
            let p = try home.start("token", "k", "--force-refresh")
            usleep(UInt32(Double.random(in: 0...window, using: &rng)))
            p.signal(SIGKILL)
            if p.wait().status == 128 + SIGKILL {
                killed += 1
                window *= 1.25
            } else {
                window = max(2_000, window * 0.8)
            }
            let listed = try home.run("list", "--json")
            #expect(listed.status == 0 && listed.stderr.isEmpty, "\(listed.stderr)")
        }
        #expect(killed >= 5, "only \(killed) refreshes were interrupted")
        // Whatever happened, the grant reads back whole: fresh, refreshable or
        // dead (a kill after the provider rotated the token but before the
        // commit spends the old one; see docs/threat-model.md).
        #expect(["fresh", "refreshable", "dead"].contains(try state("k")))
        print("refresh kill loop: 40 runs, \(killed) killed")
    }
}
