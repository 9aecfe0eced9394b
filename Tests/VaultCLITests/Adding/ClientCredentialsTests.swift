import Foundation
import Testing
import VaultTestSupport

/// Client credentials (RFC 6749 section 4.4) with a client secret, against
/// django-oauth-toolkit on loopback (Tools/testservers/django_oauth.py).
@Suite(
    "client credentials with a secret against django-oauth-toolkit",
    .enabled(if: MachineSupport.djangoOAuthToolkit, "needs python3-django-oauth-toolkit"))
final class ClientCredentialsSecretTests {
    struct Settings: Decodable {
        let port: Int
        let token_endpoint, revocation_endpoint, resource, client_id, client_secret, other_client_secret: String
    }

    let home = Home()
    let server: FixtureServer
    let settings: Settings
    var secretFile: String { home.path + "/secret" }

    init() throws {
        server = try FixtureServer(script: "django_oauth.py", arguments: [home.path + "/django"])
        settings = try JSONDecoder().decode(Settings.self, from: Data(server.firstLine.utf8))
        try home.initKeyfileVault()
        home.write(secretFile, settings.client_secret + "\n")
        for (name, method) in [("dot", "client_secret_basic"), ("dotpost", "client_secret_post")] {
            try home.providerFile(
                name,
                [
                    "token_endpoint": settings.token_endpoint, "revocation_endpoint": settings.revocation_endpoint,
                    "flows": ["client-credentials"], "token_endpoint_auth_method": method,
                ])
        }
    }

    func add(_ provider: String, _ name: String, _ extra: [String] = [], secret: String? = nil) throws
        -> ProcessResult
    {
        try VaultProcess.run(
            [
                "add", provider, name, "--flow", "client-credentials", "--client-id", settings.client_id,
                "--client-secret-file", secret ?? secretFile,
            ] + extra,
            environment: home.environment)
    }

    func log() throws -> [[String: Any]] {
        try MachineSupport.json("http://127.0.0.1:\(settings.port)/__log") as? [[String: Any]] ?? []
    }

    @Test("Basic and post client authentication both get tokens the server's resource accepts; refresh mints a new one")
    func basicAndPost() throws {
        let basic = try add("dot", "api", ["--scope", "read"])
        try #require(basic.status == 0, "\(basic.stderr)")
        #expect(basic.stderr.contains("added 'api' (dot, client credentials, \(settings.client_id); scopes: read)"))
        try #require(try add("dotpost", "api-post", ["--scope", "read"]).status == 0)
        #expect(try log().map { $0["client_auth"] as? String } == ["basic", "post"])
        #expect(
            try log().allSatisfy {
                $0["grant_type"] as? String == "client_credentials" && $0["scope"] as? String == "read"
            })
        for name in ["api", "api-post"] {
            let token = try home.run("token", name).stdout.trimmingCharacters(in: .newlines)
            #expect(try MachineSupport.status(settings.resource, token: token) == 200)
        }
        let first = try home.run("token", "api").stdout
        #expect(try home.run("refresh", "api").status == 0)
        let second = try home.run("token", "api").stdout
        let requests = try log().count
        #expect(first != second && requests == 3)
        #expect(try MachineSupport.status(settings.resource, token: second.trimmingCharacters(in: .newlines)) == 200)
        let row = try home.listed()["api"]
        #expect(row?["kind"] as? String == "client_credentials" && row?["state"] as? String == "fresh")
        // The secret appears nowhere vault prints, nor in the vault's bytes.
        for args in [["show", "api", "--json", "--reveal"], ["list", "--json"], ["env", "api"]] {
            let out = try VaultProcess.run(args, environment: home.environment).stdout
            #expect(!out.contains(settings.client_secret))
        }
        for (name, bytes) in home.snapshot() {
            #expect(bytes.range(of: Data(settings.client_secret.utf8)) == nil, "\(name)")
        }
    }

    @Test(
        "a wrong secret, a scope the server refuses, a missing or group-writable secret file: exit code, reason, nothing stored"
    )
    func refusals() throws {
        home.write(home.path + "/wrong", settings.other_client_secret + "\n")
        home.write(home.path + "/shared", settings.client_secret + "\n")
        chmod(home.path + "/shared", 0o664)
        let cases: [(String?, [String], String)] = [
            (home.path + "/wrong", [], "the provider does not accept the client: invalid_client"),
            (nil, ["--scope", "admin"], "the provider refused the request: invalid_scope"),
            (home.path + "/shared", [], "shared is writable by group or others"),
            (home.path + "/absent", [], "cannot open"),
        ]
        let before = home.snapshot()
        for (secret, extra, reason) in cases {
            let r = try add("dot", "api", extra, secret: secret)
            #expect(r.status == 1, "\(extra): \(r.stderr)")
            #expect(r.stderr.contains(reason), "\(extra): \(r.stderr)")
            #expect(!r.stderr.contains(settings.client_secret) && !r.stderr.contains(settings.other_client_secret))
        }
        // Neither secret nor key: a usage error before any request.
        let bare = try home.run("add", "dot", "api", "--flow", "client-credentials", "--client-id", settings.client_id)
        #expect(bare.status == 64 && bare.stderr.contains("client credentials need the client's secret"))
        // A provider for machines only says so when --flow is forgotten.
        let noFlow = try home.run("add", "dot", "api", "--client-id", settings.client_id)
        #expect(
            noFlow.status == 64
                && noFlow.stderr.contains("offers only client credentials: add --flow client-credentials"))
        let listed = try home.listed()
        #expect(home.snapshot() == before && listed.isEmpty)
        #expect(try log().count == 2)
    }

    @Test("invalid_scope names the scopes asked for and where they came from: --scope, or the provider file's")
    func invalidScope() throws {
        let given = try add("dot", "api", ["--scope", "read", "--scope", "admin"])
        #expect(given.status == 1, "\(given.stderr)")
        #expect(given.stderr.contains("invalid_scope"), "\(given.stderr)")
        #expect(
            given.stderr.contains(
                "vault: hint: vault asked for the scopes of --scope: read admin; ask for others with --scope S (repeatable)\n"
            ), "\(given.stderr)")
        try home.providerFile(
            "dotadmin",
            [
                "token_endpoint": settings.token_endpoint, "flows": ["client-credentials"], "scopes": ["admin"],
            ])
        let fromFile = try add("dotadmin", "api")
        #expect(fromFile.status == 1, "\(fromFile.stderr)")
        #expect(
            fromFile.stderr.contains(
                "vault: hint: vault asked for the scopes of provider 'dotadmin': admin; change \"scopes\" in "),
            "\(fromFile.stderr)")
        #expect(
            fromFile.stderr.contains(
                "/providers/dotadmin.json, or ask for others with --scope S (repeatable), which replaces them\n"),
            "\(fromFile.stderr)")
        #expect(try home.listed().isEmpty)
        // --scope replaces the file's, as the hint says.
        #expect(try add("dotadmin", "api", ["--scope", "read"]).status == 0)
    }

    @Test("check of a machine grant without a userinfo endpoint: one token request with its credentials says it works")
    func check() throws {
        try #require(try add("dot", "ci", ["--scope", "read"]).status == 0)
        let before = try log().count
        let r = try home.run("check", "ci")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr == "vault: 'ci' is live (\(settings.client_id))\n", "\(r.stderr)")
        let requests = try log().dropFirst(before)
        #expect(requests.count == 1 && requests.first?["grant_type"] as? String == "client_credentials", "\(requests)")
        let token = try home.run("token", "ci").stdout.trimmingCharacters(in: .newlines)
        #expect(try MachineSupport.status(settings.resource, token: token) == 200)
    }

    @Test(
        "doctor on a healthy machine grant: one token request with its credentials, as check makes, and no portal"
    )
    func doctorHealthy() throws {
        try #require(try add("dot", "ci", ["--scope", "read"]).status == 0)
        let before = try log().count
        let r = try home.run("doctor", "ci", "--json")
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let grants = doc["grants"] as? [[String: Any]] ?? []
        let findings = grants.first { $0["name"] as? String == "ci" }?["findings"] as? [[String: Any]] ?? []
        func finding(_ check: String) -> [String: Any]? { findings.first { $0["check"] as? String == check } }
        // The probe is a token request (django answers a GET with its 405 page).
        #expect(finding("reachable")?["status"] as? String == "ok")
        #expect(
            (finding("reachable")?["detail"] as? String)?.contains("answered a token request with HTTP 200") == true,
            "\(findings)")
        #expect(finding("proxy") == nil && finding("endpoint") == nil, "\(findings)")
        #expect(finding("credentials")?["status"] as? String == "ok", "\(findings)")
        // A machine grant has no refresh token to spend: no refresh finding speaks of one.
        #expect(finding("refresh") == nil, "\(findings)")
        let requests = try log().dropFirst(before)
        #expect(requests.count == 1 && requests.first?["grant_type"] as? String == "client_credentials", "\(requests)")
        let human = try home.run("doctor", "ci")
        #expect(human.status == 0 && !human.stdout.contains("portal"), "\(human.stdout)\(human.stderr)")
    }

    @Test("remove --revoke revokes the access token (RFC 7009) and says the secret stays valid")
    func revoke() throws {
        try #require(try add("dot", "api", ["--scope", "read"]).status == 0)
        let token = try home.run("token", "api").stdout.trimmingCharacters(in: .newlines)
        let r = try home.run("remove", "api", "--revoke")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("the client's secret or key stays valid at the provider"))
        #expect(try MachineSupport.status(settings.resource, token: token) != 200)
        #expect(try home.listed().isEmpty)
    }
}

/// Client credentials with private_key_jwt client authentication (RFC 7523
/// section 2.2) and with a secret, against the shared glewlwyd (its OIDC
/// plugin checks client assertions against the client's "pubkey").
@Suite("client credentials against glewlwyd: private_key_jwt and a secret")
final class ClientCredentialsGlewlwydTests {
    let oidc: OIDCProvider
    let home = Home()

    init() throws {
        oidc = try OIDCProvider.shared.get()
        try home.initKeyfileVault()
    }

    var s: OIDCProvider.Settings { oidc.settings }

    func add(_ name: String, _ auth: [String], environment: [String: String]? = nil) throws -> ProcessResult {
        try VaultProcess.run(
            ["add", "gl", name, "--issuer", s.issuer, "--flow", "client-credentials", "--scope", "mail"] + auth,
            environment: environment ?? home.environment)
    }

    var jwtAuth: [String] { ["--client-id", s.jwt_client ?? "", "--client-key-file", s.jwt_client_key ?? ""] }

    @Test("private_key_jwt: tokens minted, minted again, and revoked with a signed assertion")
    func privateKeyJWT() throws {
        let r = try add("jwt", jwtAuth)
        try #require(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("client credentials, \(s.jwt_client ?? "")"))
        let first = try home.run("token", "jwt").stdout
        #expect(first.hasPrefix("ey"))  // glewlwyd's access tokens are JWTs
        #expect(try home.run("refresh", "jwt").status == 0)
        #expect(try home.run("token", "jwt").stdout != first)
        let removed = try home.run("remove", "jwt", "--revoke")
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stderr.contains("revoked the access token at the provider"))
    }

    @Test("a client secret works at glewlwyd too")
    func secret() throws {
        home.write(home.path + "/secret", s.client_secret + "\n")
        let r = try add("sec", ["--client-id", s.confidential_client, "--client-secret-file", home.path + "/secret"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try home.listed()["sec"]?["kind"] as? String == "client_credentials")
        // doctor's probe is a token request with the secret: glewlwyd takes it.
        let d = try DoctorRun(try home.run("doctor", "sec", "--json"))
        #expect(d.result.status == 0, "\(d.result.stdout)")
        #expect(d.status("reachable", of: "sec") == "ok" && d.status("credentials", of: "sec") == "ok")
        #expect(d.finding("endpoint", of: "sec") == nil && d.finding("proxy", of: "sec") == nil)
    }

    @Test("no --scope: the provider file's scopes are asked for; without them glewlwyd refuses (control)")
    func providerFileScopes() throws {
        home.write(home.path + "/secret", s.client_secret + "\n")
        let endpoints: [String: Any] = [
            "token_endpoint": s.issuer + "/token", "revocation_endpoint": s.issuer + "/revoke",
            "flows": ["client-credentials"],
        ]
        try home.providerFile("glscoped", endpoints.merging(["scopes": ["mail"]]) { a, _ in a })
        try home.providerFile("glbare", endpoints)
        func add(_ provider: String, _ name: String, _ extra: [String] = []) throws -> ProcessResult {
            try VaultProcess.run(
                [
                    "add", provider, name, "--flow", "client-credentials", "--client-id", s.confidential_client,
                    "--client-secret-file", home.path + "/secret",
                ] + extra, environment: home.environment)
        }
        let scoped = try add("glscoped", "ci-api")
        #expect(scoped.status == 0, "\(scoped.stderr)")
        #expect(scoped.stderr.contains("scopes: mail)"), "\(scoped.stderr)")
        #expect(try home.listed()["ci-api"]?["scopes"] as? [String] == ["mail"])
        // The scope goes with every new token, not just the first.
        #expect(try home.run("refresh", "ci-api").status == 0)
        #expect(try home.listed()["ci-api"]?["scopes"] as? [String] == ["mail"])
        // --scope still wins over the file's.
        let given = try add("glscoped", "ci-openid", ["--scope", "openid"])
        #expect(given.status == 0, "\(given.stderr)")
        #expect(try home.listed()["ci-openid"]?["scopes"] as? [String] == ["openid"])
        // Control: no scope anywhere, and glewlwyd refuses; nothing is stored.
        let bare = try add("glbare", "ci-bare")
        #expect(bare.status != 0, "\(bare.stderr)")
        #expect(bare.stderr.contains("HTTP 403"), "\(bare.stderr)")
        #expect(
            bare.stderr.contains(
                "vault: hint: no scope was asked for (no --scope, and provider 'glbare' names no scopes), which some providers refuse: give --scope S"
            ), "\(bare.stderr)")
        #expect(try home.listed()["ci-bare"] == nil)
    }

    @Test("a key the server does not know, and a PKCS#1 key, store nothing")
    func wrongKeys() throws {
        try MachineSupport.keyPair(home.path + "/stranger")
        let pkcs1 = home.path + "/pkcs1.pem"
        _ = try VaultProcess.start(
            ["pkey", "-in", home.path + "/stranger.pem", "-traditional", "-out", pkcs1],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/openssl"
        ).wait()
        chmod(pkcs1, 0o600)
        let before = home.snapshot()
        let stranger = try add(
            "jwt", ["--client-id", s.jwt_client ?? "", "--client-key-file", home.path + "/stranger.pem"])
        #expect(stranger.status == 1 && stranger.stderr.contains("HTTP 403"), "\(stranger.stderr)")
        let old = try add("jwt", ["--client-id", s.jwt_client ?? "", "--client-key-file", pkcs1])
        #expect(old.status == 1 && old.stderr.contains("PKCS#1"), "\(old.stderr)")
        #expect(old.stderr.contains("openssl pkcs8 -topk8 -nocrypt"))
        let listed = try home.listed()
        #expect(home.snapshot() == before && listed.isEmpty)
    }

    @Test(
        "a clock ten minutes behind: glewlwyd refuses the client assertion and vault names the clock",
        .enabled(if: FakeTime.installed, "needs libfaketime (Debian's faketime package)"))
    func clockBehind() throws {
        try #require(try add("jwt", jwtAuth).status == 0)
        let before = try home.shown("jwt")
        var env = home.environment
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        let r = try VaultProcess.start(
            ["-f", "-10m", VaultProcess.binary, "refresh", "jwt"], environment: env, executable: FakeTime.wrapper
        ).wait()
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("seconds behind the provider's"), "\(r.stderr)")
        #expect(try home.shown("jwt") == before)
    }
}
