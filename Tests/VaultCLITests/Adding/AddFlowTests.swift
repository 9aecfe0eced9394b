import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

/// `vault add` against the real OpenID Connect provider (glewlwyd on
/// loopback), with a scripted browser standing in for the person. The
/// provider registers one exact redirect URI (port included), so these
/// runs cannot listen on it at the same time: the suite is serialized.
@Suite("vault add against a real OpenID Connect provider", .serialized)
struct AddFlowTests {
    let oidc: OIDCProvider
    let home = Home()

    init() throws {
        oidc = try OIDCProvider.shared.get()
        try home.initKeyfileVault()
    }

    var s: OIDCProvider.Settings { oidc.settings }

    /// Writes $XDG_CONFIG_HOME/vault/providers/NAME.json.
    func providerFile(_ name: String, _ fields: [String: Any]) throws { try home.providerFile(name, fields) }

    /// The usual local provider: issuer only (endpoints by discovery), the
    /// registered redirect URI, and a client.
    func localProvider(client: String? = nil) throws {
        try providerFile(
            "local", ["issuer": s.issuer, "client_id": client ?? s.public_client, "redirect_uri": s.redirect_uri])
    }

    func add(_ args: [String], browser mode: String = "approve", extra: [String: String] = [:]) throws -> ProcessResult
    {
        var env = home.environment
        env["BROWSER"] = oidc.browser(mode)
        for (k, v) in extra { env[k] = v }
        return try VaultProcess.run(["add"] + args, environment: env)
    }

    func shown(_ name: String) throws -> [String: Any]? {
        let r = try home.run("show", name, "--json", "--reveal")
        guard r.status == 0 else { return nil }
        return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
    }

    /// The access token works at the provider's userinfo endpoint.
    func userinfoWorks(_ accessToken: String) throws -> String? {
        let r = try CurlTransport().send(
            HTTPRequest(
                method: "GET", url: s.base + "/api/oidc/userinfo", headers: [("Authorization", "Bearer \(accessToken)")]
            ))
        guard r.status == 200 else { return nil }
        let doc = try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [String: Any]
        return doc?["email"] as? String
    }

    func expectNothingStored(_ name: String) throws {
        let r = try home.run("show", name)
        #expect(r.status == 1 && r.stderr.contains("not found"), "\(name) was stored: \(r.stderr)")
    }

    @Test("browser flow, public client with PKCE, endpoints by discovery: the grant is right and works")
    func browserPublic() throws {
        try localProvider()
        let r = try add(["local", "work"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("vault: added 'work' (local, ada@example.com; scopes: openid email)"))
        #expect(r.stderr.contains("code_challenge_method=S256") && r.stderr.contains("&nonce="))
        let g = try #require(try shown("work"))
        #expect(g["account"] as? String == s.email)
        #expect(g["scopes"] as? [String] == ["openid", "email"])
        #expect(g["state"] as? String == "fresh")
        let expires = try #require(g["expires_at"] as? Int)
        #expect(abs(Double(expires) - Date().timeIntervalSince1970 - 3600) < 120)
        #expect(g["has_refresh_token"] as? Bool == true && g["has_id_token"] as? Bool == true)
        #expect(try userinfoWorks(try #require(g["access_token"] as? String)) == s.email)
    }

    @Test("browser flow, confidential client with the secret from a file")
    func browserConfidential() throws {
        try localProvider(client: s.confidential_client)
        home.write(home.path + "/client-secret", s.client_secret + "\n")
        let r = try add(["local", "conf", "--client-secret-file", home.path + "/client-secret"])
        #expect(r.status == 0, "\(r.stderr)")
        let g = try #require(try shown("conf"))
        #expect(try userinfoWorks(try #require(g["access_token"] as? String)) == s.email)
        #expect(!r.stderr.contains(s.client_secret))
    }

    @Test("--issuer discovers a provider the user named")
    func issuerDiscovery() throws {
        // The file carries only what the provider registered for vault.
        try providerFile("corp", ["client_id": s.public_client, "redirect_uri": s.redirect_uri])
        let r = try add(["corp", "--issuer", s.issuer, "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        let doc = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        #expect(doc?["provider"] as? String == "corp" && doc?["account"] as? String == s.email)
    }

    @Test("device flow: the person approves the code on another device")
    func deviceFlow() throws {
        try localProvider()
        var env = home.environment
        env["BROWSER"] = oidc.browser("nothing")
        let log = home.path + "/device.err"
        let p = try VaultProcess.start(["add", "local", "tv", "--flow", "device"], environment: env, stderrFile: log)
        var code: String? = nil
        for _ in 0..<150 where code == nil {
            usleep(100_000)
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            code = text.split(separator: "\n").first { $0.contains("enter the code") }?.split(separator: " ").last.map(
                String.init)
        }
        let userCode = try #require(code)
        let approve = try VaultProcess.start(
            [
                "\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "approve-device", oidc.directory, userCode,
                s.public_client, "openid email",
            ],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        #expect(approve.status == 0, "\(approve.stderr)")
        let r = p.wait(timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        // The prompt is a message like every other line vault writes.
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("vault: to authorize, open ") && $0.hasSuffix(" code \(userCode)") })
        #expect(lines.allSatisfy { $0.hasPrefix("vault: ") }, "\(r.stderr)")
        let g = try #require(try shown("tv"))
        #expect(try userinfoWorks(try #require(g["access_token"] as? String)) == s.email)
    }

    @Test("kube-credential where kubectl lets it ask: a dead grant is authorized again and kubectl gets the new token")
    func kubeCredentialAuthorizesAgain() throws {
        try providerFile(
            "local",
            [
                "issuer": s.issuer, "client_id": s.public_client, "redirect_uri": s.redirect_uri,
                "empty_400_is_invalid_grant": true,
            ])
        let expired = Int(Date().timeIntervalSince1970) - 60
        let stale =
            #"{"access_token":"stale","refresh_token":"not-one-glewlwyd-issued","expires_at":\#(expired),"#
            + #""scope":"openid email","provider":"local","account":"\#(s.email)"}"#
        let imported = try home.run("import", "kub", stdin: stale)
        try #require(imported.status == 0, "\(imported.stderr)")
        var env = home.environment
        env["BROWSER"] = oidc.browser("approve")
        func info(interactive: Bool) -> String {
            #"{"kind":"ExecCredential","apiVersion":"client.authentication.k8s.io/v1","#
                + #""spec":{"interactive":\#(interactive)}}"#
        }
        // kubectl says the plugin may not ask: the grant is dead, nothing is asked.
        env["KUBERNETES_EXEC_INFO"] = info(interactive: false)
        let refused = try VaultProcess.run(["kube-credential", "kub"], environment: env)
        #expect(refused.status == 2 && !refused.stderr.contains("open this address"), "\(refused.stderr)")
        env["KUBERNETES_EXEC_INFO"] = info(interactive: true)
        let r = try VaultProcess.run(["kube-credential", "kub"], environment: env)
        #expect(r.status == 0 && r.stderr.contains("authorizing it again"), "\(r.stderr)")
        let doc = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        let token = try #require((doc?["status"] as? [String: Any])?["token"] as? String, "\(r.stdout)")
        #expect(try userinfoWorks(token) == s.email)
    }

    @Test("device flow nobody approves: vault's own --timeout ends the wait, and it says so, not that the code expired")
    func deviceFlowTimeout() throws {
        try localProvider()
        var env = home.environment
        env["BROWSER"] = oidc.browser("nothing")
        let r = try VaultProcess.start(
            ["add", "local", "tv", "--flow", "device", "--timeout", "2"], environment: env
        ).wait(timeout: 60)
        #expect(r.status == 75, "\(r.stderr)")
        #expect(r.stderr.contains("enter the code"), "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: error: stopped waiting for the approval after 2 seconds, the time allowed; the code had not expired"
            ), "\(r.stderr)")
        // The provider's own lifetime for its codes, from its answer.
        #expect(
            r.stderr.contains(
                "vault: hint: run it again and approve the code sooner, or wait longer with --timeout SECONDS (the provider keeps a code for "
            ), "\(r.stderr)")
        #expect(!r.stderr.contains("expired before it was approved"), "\(r.stderr)")
        try expectNothingStored("tv")
    }

    @Test("paste flow: the person pastes the address the browser ended on")
    func pasteFlow() throws {
        try localProvider()
        var env = home.environment
        env["BROWSER"] = oidc.browser("nothing")
        let log = home.path + "/paste.err"
        let p = try VaultProcess.start(
            ["add", "local", "pasted", "--flow", "paste"], environment: env, stderrFile: log, interactive: true)
        // Read the authorization URL vault printed, approve it at the provider
        // without a listener, and paste where the browser ended up.
        var url: String? = nil
        for _ in 0..<150 where url == nil {
            usleep(100_000)
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            url = text.split(separator: "\n").first { $0.hasPrefix("http://") }.map(String.init)
        }
        let authorization = try #require(url)
        let approved = try VaultProcess.start(
            [
                "\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "approve", oidc.directory, authorization,
                "--print-only",
            ],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        #expect(approved.status == 0, "\(approved.stderr)")
        p.send(approved.stdout)
        let r = p.wait(timeout: 60)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("vault: paste the address the browser ended on (or the code): "))
        let g = try #require(try shown("pasted"))
        #expect(try userinfoWorks(try #require(g["access_token"] as? String)) == s.email)
    }

    /// The bash example of docs/cli.md that runs the paste flow from a program.
    static func pasteScript() throws -> String {
        let text = try String(
            contentsOf: FixtureServer.root.appendingPathComponent("docs/cli.md"), encoding: .utf8)
        let blocks = text.components(separatedBy: "```bash\n").dropFirst().map {
            $0.components(separatedBy: "```")[0]
        }
        return try #require(blocks.first { $0.contains("--flow paste") })
    }

    @Test("paste flow scripted as docs/cli.md shows: the address on standard input, even with a terminal")
    func pasteScripted() throws {
        // docs/cli.md's script: its provider 'corp', and 'approve' signing in
        // at the provider and printing the address the browser ended on.
        try providerFile("corp", ["issuer": s.issuer, "client_id": s.public_client, "redirect_uri": s.redirect_uri])
        let bin = home.path + "/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: bin + "/vault", withDestinationPath: VaultProcess.binary)
        home.write(
            bin + "/approve",
            "#!/bin/sh\nexec python3 '\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py' approve "
                + "'\(oidc.directory)' \"$1\" --print-only\n")
        chmod(bin + "/approve", 0o700)
        var env = home.environment
        env["PATH"] = bin + ":/usr/bin:/bin"
        // A controlling terminal that nobody types at: what is pasted must
        // come from standard input, as it does for a script run from a shell.
        let withTerminal = """
            import fcntl, os, pty, sys, termios
            master, slave = pty.openpty()
            os.set_inheritable(master, True)
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            os.execv(sys.argv[1], sys.argv[1:])
            """
        let r = try VaultProcess.start(
            ["-c", withTerminal, "/bin/bash", "-c", try Self.pasteScript()], environment: env,
            executable: "/usr/bin/python3"
        ).wait(timeout: 60)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("vault: added 'corp' (corp, \(s.email)"), "\(r.stdout)")
        let g = try #require(try shown("corp"))
        #expect(try userinfoWorks(try #require(g["access_token"] as? String)) == s.email)
    }

    @Test("paste flow with nothing pasted stores nothing")
    func pasteNothing() throws {
        try localProvider()
        let r = try add(["local", "nothing", "--flow", "paste"], browser: "nothing")
        #expect(r.status == 1)
        #expect(r.stderr.contains("nothing was pasted"))
        // Standard input is not the terminal here: the error says so.
        #expect(r.stderr.contains("standard input, which is not the terminal, ended"), "\(r.stderr)")
        try expectNothingStored("nothing")
    }

    @Test("a state that does not match is refused and nothing is stored")
    func wrongState() throws {
        try localProvider()
        let r = try add(["local", "x"], browser: "wrong-state")
        #expect(r.status == 1)
        #expect(r.stderr.contains("state does not match"))
        try expectNothingStored("x")
    }

    @Test("a denied authorization is reported with the provider's words and stores nothing")
    func denied() throws {
        try localProvider()
        let r = try add(["local", "x"], browser: "deny")
        #expect(r.status == 1)
        #expect(r.stderr.contains("refused: access_denied: The user denied access"), "\(r.stderr)")
        try expectNothingStored("x")
    }

    @Test("a wrong code and a replayed code are refused by the provider and store nothing")
    func wrongAndReplayedCode() throws {
        try localProvider()
        let wrong = try add(["local", "x"], browser: "fake-code")
        #expect(wrong.status == 1)
        #expect(wrong.stderr.contains("exchanging the authorization code: the provider refused"), "\(wrong.stderr)")
        try expectNothingStored("x")
        let first = try add(["local", "first"], browser: "approve-save")
        #expect(first.status == 0, "\(first.stderr)")
        let replay = try add(["local", "y"], browser: "replay")
        #expect(replay.status == 1)
        #expect(replay.stderr.contains("the provider refused"), "\(replay.stderr)")
        try expectNothingStored("y")
    }

    @Test("a provider that is down is a transient failure (75) and stores nothing")
    func providerDown() throws {
        try providerFile(
            "down",
            [
                "issuer": "http://127.0.0.1:1/oidc", "authorization_endpoint": "http://127.0.0.1:1/auth",
                "token_endpoint": "http://127.0.0.1:1/token", "client_id": "c", "scopes": ["openid"],
            ])
        let r = try add(["down"], browser: "fake-code")
        #expect(r.status == 75, "\(r.stderr)")
        #expect(r.stderr.contains("exchanging the authorization code"))
        try expectNothingStored("down")
        // Discovery against a dead issuer is transient too.
        let d = try add(["dead", "--issuer", "http://127.0.0.1:1/oidc", "--client-id", "c"])
        #expect(d.status == 75, "\(d.stderr)")
    }

    @Test("nobody coming back from the browser times out (75: try again) and stores nothing")
    func browserTimeout() throws {
        try localProvider()
        let r = try add(["local", "x", "--timeout", "1"], browser: "nothing")
        #expect(r.status == 75)
        #expect(r.stderr.contains("no answer from the browser within 1 seconds"))
        // Its provider file names the redirect URI: nothing to say of it.
        #expect(!r.stderr.contains("the redirect URI"), "\(r.stderr)")
        try expectNothingStored("x")
        // Sent back to a port chosen for this run, the browser may be
        // showing the provider's refusal of that address.
        let random = try add(
            ["y", "--issuer", s.issuer, "--client-id", s.public_client, "--timeout", "1"], browser: "nothing")
        #expect(random.status == 75, "\(random.stderr)")
        #expect(
            random.stderr.contains(
                "if the provider showed an error about the redirect URI, it takes only the one registered for its client: name it as \"redirect_uri\""
            ), "\(random.stderr)")
        try expectNothingStored("y")
    }

    @Test("a malformed token response is refused and stores nothing")
    func malformedTokenResponse() throws {
        let fixture = try FixtureServer(script: "http_fixture.py")
        try providerFile(
            "bad",
            [
                "authorization_endpoint": fixture.base + "/authorize", "token_endpoint": fixture.base + "/status/200",
                "client_id": "c", "scopes": ["read"], "flows": ["browser"],
            ])
        let r = try add(["bad"], browser: "fake-code")
        #expect(r.status == 1)
        #expect(r.stderr.contains("answered HTTP 200 with something that is not an OAuth answer"), "\(r.stderr)")
        try expectNothingStored("bad")
    }

    @Test("an ID token for another audience, or with another nonce, is refused", arguments: ["aud", "nonce"])
    func idTokenChecks(broken: String) throws {
        let fixture = try FixtureServer(script: "http_fixture.py")
        let aud = broken == "aud" ? "someone-else" : "vault-test"
        try providerFile(
            "idt",
            [
                "issuer": fixture.base, "authorization_endpoint": fixture.base + "/authorize",
                "token_endpoint": fixture.base + "/token?iss=\(fixture.base)&aud=\(aud)&nonce=not-the-nonce",
                "client_id": "vault-test", "scopes": ["openid"], "flows": ["browser"],
            ])
        let r = try add(["idt"], browser: "fake-code")
        #expect(r.status == 1)
        #expect(r.stderr.contains(broken == "aud" ? "is for another client" : "nonce does not match"), "\(r.stderr)")
        try expectNothingStored("idt")
    }

    @Test("secrets never reach argv: client secret, codes and tokens")
    func argvHygiene() throws {
        let sampler = ArgvSampler(canaries: [s.client_secret], recordAll: true)
        try localProvider(client: s.confidential_client)
        home.write(home.path + "/client-secret", s.client_secret + "\n")
        let r = try add(["local", "argv", "--client-secret-file", home.path + "/client-secret"])
        let g = try #require(try shown("argv"))
        let seen = sampler.stopAndCollect()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(seen.hits.isEmpty)
        let tokens = ["access_token", "refresh_token", "id_token"].compactMap { g[$0] as? String }
        #expect(tokens.count == 3)
        let leaked = seen.commandLines.contains { line in tokens.contains { line.contains($0) } }
        #expect(!leaked, "a token appeared in a command line")
        #expect(seen.commandLines.count > 1)
    }
}
