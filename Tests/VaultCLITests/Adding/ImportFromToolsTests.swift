import Foundation
import Testing
import VaultTestSupport

/// `vault import` resolving a configured provider and its client, and
/// `--from` reading other tools' own files, which the tests write as each
/// tool's documentation describes them. Refresh goes to the real provider
/// (glewlwyd), standing in for Google through a provider file that moves
/// only the google preset's endpoints.
@Suite("import: configured providers and other tools' token files")
struct ImportFromToolsTests {
    let oidc: OIDCProvider
    let home = Home()

    init() throws {
        oidc = try OIDCProvider.shared.get()
        try home.initKeyfileVault()
    }

    var s: OIDCProvider.Settings { oidc.settings }

    /// The google preset, its endpoints moved to the local provider; `client` adds the confidential client.
    func googleAtLocalProvider(client: Bool = false) throws {
        var fields: [String: Any] = [
            "issuer": s.issuer, "token_endpoint": s.issuer + "/token", "userinfo_endpoint": s.issuer + "/userinfo",
            "revocation_endpoint": s.issuer + "/revoke", "empty_400_is_invalid_grant": true,
        ]
        if client {
            fields["client_id"] = s.confidential_client
            fields["client_secret"] = s.client_secret
        }
        try home.providerFile("google", fields)
    }

    /// A token response from a whole code flow of the confidential client.
    func tokens() throws -> [String: Any] {
        let r = try VaultProcess.start(
            [
                "\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "tokens", oidc.directory,
                s.confidential_client, s.client_secret,
            ],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        try #require(r.status == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    func json(_ object: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    func shown(_ name: String) throws -> [String: Any] {
        let r = try home.run("show", name, "--json")
        return try #require(
            try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], "\(r.stderr)")
    }

    /// Refreshes NAME at the provider and checks the new access token works there.
    func refreshes(_ name: String) throws {
        let r = try home.run("refresh", name)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try shown(name)["state"] as? String == "fresh")
        #expect(try home.run("check", name).status == 0)
    }

    @Test("a token response naming a configured provider takes its endpoints and client, and refreshes")
    func configuredProvider() throws {
        try googleAtLocalProvider(client: true)
        let t = try tokens()
        let r = try home.run(
            "import", "work",
            stdin: try json([
                "access_token": t["access_token"]!, "refresh_token": t["refresh_token"]!, "expires_at": 1_000_000_000,
                "provider": "google",
            ]))
        #expect(r.status == 0 && !r.stderr.contains("warning"), "\(r.stderr)")
        #expect(try shown("work")["state"] as? String == "refreshable")
        try refreshes("work")
    }

    @Test("an unknown provider is warned about, and a grant that cannot refresh is listed as expired")
    func unknownProvider() throws {
        let r = try home.run(
            "import", "odd",
            stdin: #"{"access_token": "a1", "refresh_token": "r1", "expires_at": 1000000000, "provider": "nosuch"}"#)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("vault: warning: vault knows no provider 'nosuch'"), "\(r.stderr)")
        #expect(r.stderr.contains("vault: warning: 'odd' cannot be refreshed: no token endpoint"))
        let list = try home.run("list")
        let row = try #require(list.stdout.split(separator: "\n").first { $0.hasPrefix("odd ") })
        #expect(row.contains("expired") && !row.contains("refreshable"), "\(row)")
        let refresh = try home.run("refresh", "odd")
        #expect(refresh.status == 1 && refresh.stderr.contains("cannot be refreshed: it keeps no token endpoint"))
        #expect(refresh.stderr.contains("vault: hint: run 'vault add odd' to authorize it again"))
        // A provider it knows, without a client: the same, for the client.
        let known = try home.run(
            "import", "gh-ish",
            stdin: #"{"access_token": "a1", "refresh_token": "r1", "expires_at": 1000000000, "provider": "github"}"#)
        #expect(known.stderr.contains("'gh-ish' cannot be refreshed: no client id"), "\(known.stderr)")
        #expect(try shown("gh-ish")["state"] as? String == "expired")
    }

    @Test("gcloud application default credentials: gcloud's client from the file, Google's token endpoint")
    func gcloud() throws {
        try googleAtLocalProvider()
        let t = try tokens()
        let adc = try json([
            "type": "authorized_user", "client_id": s.confidential_client, "client_secret": s.client_secret,
            "refresh_token": t["refresh_token"]!, "quota_project_id": "demo", "universe_domain": "googleapis.com",
        ])
        let r = try home.run("import", "adc", "--from", "gcloud", stdin: adc)
        #expect(r.status == 0 && !r.stderr.contains("warning"), "\(r.stderr)")
        let g = try shown("adc")
        #expect(g["provider"] as? String == "google" && g["state"] as? String == "refreshable")
        try refreshes("adc")
        let sa = try home.run("import", "sa", "--from", "gcloud", stdin: #"{"type": "service_account"}"#)
        #expect(sa.status == 1 && sa.stderr.contains("not of type 'authorized_user'"))
    }

    @Test("rclone.conf: the remote chosen by name, its own client; rclone's built-in client cannot refresh")
    func rclone() throws {
        try googleAtLocalProvider()
        let t = try tokens()
        let token = try json([
            "access_token": t["access_token"]!, "token_type": "Bearer", "refresh_token": t["refresh_token"]!,
            "expiry": "2001-02-03T04:05:06.789012345+01:00",
        ])
        let conf = """
            [photos]
            type = onedrive
            token = {"access_token":"x1","token_type":"Bearer","refresh_token":"y1","expiry":"2099-01-01T00:00:00Z"}

            [gdrive]
            type = drive
            client_id = \(s.confidential_client)
            client_secret = \(s.client_secret)
            scope = drive
            token = \(token)

            """
        let several = try home.run("import", "d", "--from", "rclone", stdin: conf)
        #expect(several.status == 1 && several.stderr.contains("choose one with --remote: photos, gdrive"))
        let r = try home.run("import", "drive", "--from", "rclone", "--remote", "gdrive", stdin: conf)
        #expect(r.status == 0 && !r.stderr.contains("warning"), "\(r.stderr)")
        let g = try shown("drive")
        #expect(g["provider"] as? String == "google" && g["expires_at"] as? Int == 981_169_506)
        try refreshes("drive")
        let builtin = try home.run("import", "od", "--from", "rclone", "--remote", "photos", stdin: conf)
        #expect(builtin.status == 0)
        #expect(builtin.stderr.contains("'od' cannot be refreshed"), "\(builtin.stderr)")
        #expect(builtin.stderr.contains("rclone's built-in client"))
        let missing = try home.run("import", "n", "--from", "rclone", "--remote", "nosuch", stdin: conf)
        #expect(missing.status == 1 && missing.stderr.contains("rclone.conf has no remote 'nosuch'"))
    }

    /// rclone.conf with one remote of `type`, its own client (the
    /// confidential one) and a token from a whole code flow, spent long ago.
    func rcloneConf(type: String) throws -> String {
        let t = try tokens()
        let token = try json([
            "access_token": t["access_token"]!, "token_type": "Bearer", "refresh_token": t["refresh_token"]!,
            "expiry": "2001-02-03T04:05:06Z",
        ])
        return """
            [remote]
            type = \(type)
            client_id = \(s.confidential_client)
            client_secret = \(s.client_secret)
            token = \(token)

            """
    }

    @Test("an rclone remote with its own client but no provider vault knows: the provider file it needs, then refresh")
    func rcloneOwnClientUnknownProvider() throws {
        let r = try home.run("import", "box", "--from", "rclone", stdin: try rcloneConf(type: "glew"))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("'box' cannot be refreshed: no token endpoint"), "\(r.stderr)")
        #expect(!r.stderr.contains("built-in client"), "\(r.stderr)")
        let file = home.path + "/config/vault/providers/glew.json"
        #expect(r.stderr.contains("write \(file) with its token_endpoint and authorization_endpoint"), "\(r.stderr)")
        #expect(r.stderr.contains("then import again with --replace"), "\(r.stderr)")
        // Secrets never go into what vault says.
        #expect(!r.stderr.contains(s.client_secret))
        #expect(try shown("box")["state"] as? String == "expired")
        // What it said, done: the remote's own client refreshes at the file's token endpoint.
        try home.providerFile(
            "glew",
            [
                "token_endpoint": s.issuer + "/token", "authorization_endpoint": s.issuer + "/auth",
                "flows": ["browser", "paste"],
            ])
        let again = try home.run(
            "import", "box", "--replace", "--from", "rclone", stdin: try rcloneConf(type: "glew"))
        #expect(again.status == 0 && !again.stderr.contains("warning"), "\(again.stderr)")
        let refresh = try home.run("refresh", "box")
        #expect(refresh.status == 0, "\(refresh.stderr)")
        #expect(try shown("box")["state"] as? String == "fresh")
    }

    @Test("imports without an account or scopes learn them from the first refresh's answer")
    func learnedAtRefresh() throws {
        try googleAtLocalProvider()
        let adc = try json([
            "type": "authorized_user", "client_id": s.confidential_client, "client_secret": s.client_secret,
            "refresh_token": try tokens()["refresh_token"]!,
        ])
        for (name, tool, input) in [("adc", "gcloud", adc), ("drive", "rclone", try rcloneConf(type: "drive"))] {
            let r = try home.run("import", name, "--from", tool, stdin: input)
            #expect(r.status == 0 && !r.stderr.contains("warning"), "\(r.stderr)")
            let before = try shown(name)
            #expect(before["account"] == nil && (before["scopes"] as? [String])?.isEmpty == true, "\(before)")
            try refreshes(name)
            let after = try shown(name)
            #expect(after["account"] as? String == s.email, "\(name): \(after)")
            #expect(Set(after["scopes"] as? [String] ?? []) == ["openid", "email"], "\(name): \(after)")
        }
    }

    @Test("without an issuer to check an ID token against, the account comes from userinfo or stays unknown")
    func learnedWithoutIssuer() throws {
        for userinfo in [true, false] {
            var provider: [String: Any] = [
                "token_endpoint": s.issuer + "/token", "authorization_endpoint": s.issuer + "/auth",
                "flows": ["browser", "paste"],
            ]
            if userinfo { provider["userinfo_endpoint"] = s.issuer + "/userinfo" }
            try home.providerFile("glew", provider)
            let r = try home.run("import", "box", "--replace", "--from", "rclone", stdin: try rcloneConf(type: "glew"))
            #expect(r.status == 0 && !r.stderr.contains("warning"), "\(r.stderr)")
            let refresh = try home.run("refresh", "box")
            #expect(refresh.status == 0, "\(refresh.stderr)")
            let g = try shown("box")
            #expect(g["account"] as? String == (userinfo ? s.email : nil), "\(g)")
            #expect(Set(g["scopes"] as? [String] ?? []) == ["openid", "email"], "\(g)")
        }
    }

    /// glewlwyd puts no ID token in refresh answers; the fixture's Google does.
    @Test("an ID token in the refresh answer names the account only when checked against the grant's issuer")
    func learnedFromIDToken() throws {
        let scene = try ProviderScene("google")
        func minted() throws -> [String: Any] {
            try #require(try scene.post("/__mint", ["scope": "openid email"]) as? [String: Any])
        }
        let client = try #require(ProviderScene.clientIDs["google"])
        let adc = try json([
            "type": "authorized_user", "client_id": client, "client_secret": "fixture-client-secret",
            "refresh_token": try minted()["refresh_token"]!,
        ])
        #expect(try scene.home.run("import", "adc", "--from", "gcloud", stdin: adc).status == 0)
        #expect(try scene.home.run("refresh", "adc").status == 0)
        let g = try #require(try scene.shown("adc"))
        #expect(g["has_id_token"] as? Bool == true && g["account"] as? String == "ada@example.com", "\(g)")
        #expect(try scene.log("userinfo").isEmpty)
        // The same answer through a provider file without an issuer names no one.
        try scene.home.providerFile(
            "fixture",
            [
                "token_endpoint": scene.base + "/token", "authorization_endpoint": scene.base + "/authorize",
                "flows": ["browser", "paste"],
            ])
        let t = try minted()
        let token = try json([
            "access_token": t["access_token"]!, "token_type": "Bearer", "refresh_token": t["refresh_token"]!,
        ])
        let conf =
            "[f]\ntype = fixture\nclient_id = \(client)\nclient_secret = fixture-client-secret\ntoken = \(token)\n"
        #expect(try scene.home.run("import", "f", "--from", "rclone", stdin: conf).status == 0)
        #expect(try scene.home.run("refresh", "f").status == 0)
        let f = try #require(try scene.shown("f"))
        #expect(f["has_id_token"] as? Bool == true && f["account"] == nil, "\(f)")
    }

    @Test("gh's hosts.yml: the host's token, which does not expire and has nothing to refresh")
    func gh() throws {
        let hosts = """
            github.com:
                users:
                    monalisa:
                        oauth_token: gho_16C7e42F292c6912E7710c838347Ae178B4a
                git_protocol: https
                user: monalisa
                oauth_token: gho_16C7e42F292c6912E7710c838347Ae178B4a
            ghe.example.com:
                user: hubot
                users:
                    hubot:
                        oauth_token: "gho_0000000000000000000000000000000000ee"
            """
        let r = try home.run("import", "gh", "--from", "gh", stdin: hosts)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "'gh' has no refresh token: it works as long as its access token does (this one has no expiry)"))
        let g = try shown("gh")
        #expect(g["account"] as? String == "monalisa" && g["state"] as? String == "fresh")
        #expect(try home.run("token", "gh").stdout == "gho_16C7e42F292c6912E7710c838347Ae178B4a\n")
        let ghe = try home.run("import", "ghe", "--from", "gh", "--host", "ghe.example.com", stdin: hosts)
        #expect(ghe.status == 0, "\(ghe.stderr)")
        #expect(try home.run("token", "ghe").stdout == "gho_0000000000000000000000000000000000ee\n")
        let keyring = try home.run("import", "k", "--from", "gh", stdin: "github.com:\n    user: monalisa\n")
        #expect(keyring.status == 1 && keyring.stderr.contains("hosts.yml keeps no token for 'github.com'"))
    }

    @Test("mutt_oauth2.py's token file from stdin (decrypted by gpg): the configured client refreshes it")
    func muttOAuth2() throws {
        try googleAtLocalProvider(client: true)
        let t = try tokens()
        let file = try json([
            "registration": "google", "authflow": "localhostauthcode", "email": s.email,
            "access_token": t["access_token"]!, "access_token_expiration": "2001-02-03T04:05:06.123456",
            "refresh_token": t["refresh_token"]!,
        ])
        let r = try home.run("import", "mail", "--from", "mutt_oauth2", stdin: file)
        #expect(r.status == 0 && !r.stderr.contains("warning"), "\(r.stderr)")
        let g = try shown("mail")
        #expect(g["account"] as? String == s.email && g["state"] as? String == "refreshable")
        try refreshes("mail")
        // Without a configured client, --client-id and a secret file name it.
        try googleAtLocalProvider()
        let t2 = try tokens()
        home.write(home.path + "/secret", s.client_secret + "\n")
        let file2 = try json(["registration": "google", "email": s.email, "refresh_token": t2["refresh_token"]!])
        let bare = try home.run("import", "mail2", "--from", "mutt_oauth2", stdin: file2)
        #expect(bare.stderr.contains("'mail2' cannot be refreshed: no client id"), "\(bare.stderr)")
        let named = try home.run(
            "import", "mail2", "--replace", "--from", "mutt_oauth2", "--client-id", s.confidential_client,
            "--client-secret-file", home.path + "/secret", stdin: file2)
        #expect(named.status == 0 && !named.stderr.contains("warning"), "\(named.stderr)")
        try refreshes("mail2")
    }

    @Test(
        "bad input to --from changes nothing and says what is wrong",
        arguments: [
            (["--from", "nope"], "x", 64, "--from must be gcloud, rclone, gh or mutt_oauth2"),
            (["--remote", "r"], "{}", 64, "--remote goes with --from rclone"),
            (["--from", "mutt_oauth2"], "not json", 1, "the mutt_oauth2.py token file is not a JSON object"),
            (["--from", "rclone"], "[a]\ntype = drive\n", 1, "rclone.conf has no remote with a token"),
        ])
    func badInput(flags: [String], input: String, status: Int32, message: String) throws {
        let before = home.snapshot()
        let r = try VaultProcess.run(["import", "x"] + flags, environment: home.environment, stdin: input)
        #expect(r.status == status && r.stderr.contains(message), "\(r.stderr)")
        #expect(home.snapshot() == before)
    }
}
