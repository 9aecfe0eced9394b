import Foundation
import Glibc
import Testing
import VaultTestSupport

/// `vault test imap|smtp`: logins with the grant's token against Dovecot
/// (TLS with a CA of the test run, tokens checked at the shared provider),
/// and against a server that repeats the token back.
@Suite("vault test: IMAP and SMTP logins against Dovecot")
struct MailLoginTests {
    let mail: MailServer
    let home = Home()

    init() throws {
        mail = try MailServer.shared.get()
        try home.initKeyfileVault()
        home.extra["SSL_CERT_FILE"] = mail.info.ca
    }

    func test(_ args: String...) throws -> ProcessResult { try home.run(["test"] + args) }

    /// The grant's access token now, for the leak checks.
    func token(_ name: String = "mail") throws -> String {
        let r = try home.run("token", name)
        try #require(r.status == 0, "\(r.stderr)")
        return r.stdout.trimmingCharacters(in: .newlines)
    }

    /// Neither the token nor a SASL response carrying it is in the output.
    func expectNoToken(_ r: ProcessResult, _ token: String, _ label: String) {
        let responses = [
            "user=ada\u{1}auth=Bearer \(token)\u{1}\u{1}", "n,a=ada,\u{1}auth=Bearer \(token)\u{1}\u{1}",
        ].map { Data($0.utf8).base64EncodedString() }
        for secret in [token] + responses {
            #expect(!r.stdout.contains(secret) && !r.stderr.contains(secret), "\(label): the token leaked")
        }
        #expect(!r.stdout.contains(String(token.prefix(24))) && !r.stderr.contains(String(token.prefix(24))))
    }

    @Test("logs in to IMAP and SMTP, with TLS and with STARTTLS, with XOAUTH2 and OAUTHBEARER, refreshing first")
    func logins() throws {
        let original = try ProviderGrants.importConfidential("mail", into: home, expiresIn: -600)
        let cases: [(String, [String], String)] = [
            ("imap", ["--port", String(mail.info.imaps)], "OK Logged in"),
            ("imap", ["--port", String(mail.info.imaps), "--mechanism", "oauthbearer"], "OK Logged in"),
            ("imap", ["--port", String(mail.info.imap), "--starttls", "--mechanism", "xoauth2"], "OK Logged in"),
            ("smtp", ["--port", String(mail.info.submission)], "235 2.7.0 Logged in."),
            ("smtp", ["--port", String(mail.info.submission), "--mechanism", "oauthbearer"], "235 2.7.0 Logged in."),
            ("smtp", ["--port", String(mail.info.submissions), "--tls"], "235 2.7.0 Logged in."),
        ]
        var results: [(String, ProcessResult)] = []
        for (proto, options, success) in cases {
            let r = try home.run(["test", proto, "mail", "--host", "localhost"] + options)
            let label = "\(proto) \(options)"
            #expect(r.status == 0, "\(label): \(r.stdout)\(r.stderr)")
            #expect(r.stdout.contains(success), "\(label): \(r.stdout)")
            #expect(r.stderr.contains("vault: logged in to localhost:"), "\(label): \(r.stderr)")
            results.append((label, r))
        }
        // The expired token was refreshed before the first login.
        let token = try token()
        #expect(token != original["access_token"] as? String)
        for (label, r) in results { expectNoToken(r, token, label) }
        // The capabilities and the STARTTLS switch are what the server said.
        #expect(results[2].1.stdout.contains("STARTTLS"))
        #expect(results[3].1.stdout.contains("220 2.0.0 Begin TLS negotiation now."))
    }

    @Test("a JWT-sized token (1.5 KB) logs in to SMTP and IMAP: the response goes after the server's go-ahead")
    func longToken() throws {
        let long = try LongTokenMail.shared.get()
        home.extra["SSL_CERT_FILE"] = long.info.ca
        let grant: [String: Any] = [
            "access_token": "expired", "refresh_token": UUID().uuidString,
            "expires_at": Int(Date().timeIntervalSince1970) - 600, "provider": "local", "account": "ada",
            "provider_config": ["token_endpoint": long.tokenEndpoint, "client_id": "mail-tests"],
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        try #require(try home.run("import", "long", stdin: json).status == 0)
        for (proto, port, mechanism, security) in [
            ("smtp", long.info.submission, "xoauth2", "--starttls"),
            ("smtp", long.info.submissions, "oauthbearer", "--tls"), ("imap", long.info.imaps, "xoauth2", "--tls"),
        ] {
            let r = try test(
                proto, "long", "--host", "127.0.0.1", "--port", String(port), "--mechanism", mechanism, security)
            #expect(r.status == 0, "\(proto) \(mechanism): \(r.stdout)\(r.stderr)")
            expectNoToken(r, try token("long"), "\(proto) \(mechanism)")
        }
        #expect(try token("long").count >= 1500)
    }

    @Test("--json: one document with the server's lines and the mechanisms it offers")
    func json() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        let r = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps), "--json")
        #expect(r.status == 0, "\(r.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(doc["result"] as? String == "logged_in" && doc["logged_in"] as? Bool == true)
        #expect(doc["protocol"] as? String == "imap" && doc["security"] as? String == "tls")
        #expect(doc["user"] as? String == "ada" && doc["mechanism"] as? String == "XOAUTH2")
        #expect((doc["mechanisms"] as? [String]) == ["XOAUTH2", "OAUTHBEARER"])
        #expect((doc["server"] as? [String])?.contains { $0.hasSuffix("OK Logged in") } == true)
        #expect(doc.keys.contains("error") && doc["error"] is NSNull)
        expectNoToken(r, try token(), "json")
    }

    @Test("a revoked token handed out by the agent: the provider is asked too, at the grant's own endpoint")
    func refusedThroughTheAgent() throws {
        let tokens = try ProviderGrants.importConfidential("mail", into: home)
        home.allowAgent()
        #expect(try home.start("agent").wait().status == 0)
        defer { _ = try? home.run("lock") }
        let token = try #require(tokens["access_token"] as? String)
        try ProviderGrants.revoke(token, hint: "access_token")
        let imap = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps), "--json")
        #expect(imap.status == 1, "\(imap.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(imap.stdout.utf8)) as? [String: Any])
        #expect(doc["token_accepted"] as? Bool == false, "\(imap.stdout)")
        #expect(imap.stderr.contains("the provider no longer accepts this access token"), "\(imap.stderr)")
        expectNoToken(imap, token, "imap")
    }

    @Test("a revoked token: exit 1, the server's words, and that the provider refuses it too, never the token")
    func refused() throws {
        let tokens = try ProviderGrants.importConfidential("mail", into: home)
        // Positive control: the same grant logs in before the revocation.
        let before = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps))
        try #require(before.status == 0, "\(before.stderr)")
        let token = try #require(tokens["access_token"] as? String)
        try ProviderGrants.revoke(token, hint: "access_token")

        let imap = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps))
        #expect(imap.status == 1, "\(imap.stderr)")
        #expect(imap.stderr.contains("vault: error: 127.0.0.1:\(mail.info.imaps) refused the XOAUTH2 login of ada"))
        // Dovecot's XOAUTH2 challenge, decoded from base64.
        #expect(imap.stderr.contains("(challenge: {"), "\(imap.stderr)")
        // Asked at the userinfo endpoint, the provider refuses the token too:
        // revoked, not a scope or login problem, and a refresh is the remedy.
        #expect(
            imap.stderr.contains(
                "vault: hint: the provider no longer accepts this access token either (its userinfo endpoint answered HTTP 401)"
            ), "\(imap.stderr)")
        #expect(imap.stderr.contains("run 'vault refresh mail' for a new token and test again"), "\(imap.stderr)")
        #expect(!imap.stderr.contains("mail scope"), "\(imap.stderr)")
        expectNoToken(imap, token, "imap")

        let smtp = try test(
            "smtp", "mail", "--host", "127.0.0.1", "--port", String(mail.info.submission), "--mechanism", "oauthbearer"
        )
        #expect(smtp.status == 1, "\(smtp.stderr)")
        #expect(smtp.stdout.contains("535 5.7.8 Authentication failed."))
        #expect(smtp.stderr.contains("refused the OAUTHBEARER login of ada: 535 5.7.8 Authentication failed."))
        #expect(smtp.stderr.contains("the provider no longer accepts this access token"), "\(smtp.stderr)")
        expectNoToken(smtp, token, "smtp")

        // --json: the document also when the login was refused.
        let json = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps), "--json")
        #expect(json.status == 1)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(doc["result"] as? String == "refused" && doc["logged_in"] as? Bool == false)
        #expect((doc["error"] as? String)?.contains("refused the XOAUTH2 login of ada") == true)
        #expect((doc["challenge"] as? String)?.hasPrefix("{") == true)
        #expect(doc["token_accepted"] as? Bool == false)
        expectNoToken(json, token, "json")

        // What the hint says works: a refresh, and the same test passes.
        #expect(try home.run("refresh", "mail").status == 0)
        let after = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps))
        #expect(after.status == 0, "\(after.stderr)")
    }

    @Test("a token the provider accepts, refused for another login: the scopes or the login, not a revocation")
    func wrongLogin() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        let r = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps), "--user", "grace")
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("refused the XOAUTH2 login of grace"), "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: hint: the provider still accepts the token (its userinfo endpoint answered HTTP 200): the server refused it for its scopes, the login, or its own check of the token (the client or audience of tokens it takes)"
            ), "\(r.stderr)")
        #expect(
            r.stderr.contains("vault: hint: the login grace differs from the grant's account (ada)"), "\(r.stderr)")
        #expect(!r.stderr.contains("no longer accepts"), "\(r.stderr)")
        let json = try test(
            "smtp", "mail", "--host", "127.0.0.1", "--port", String(mail.info.submission), "--user", "grace", "--json")
        #expect(json.status == 1, "\(json.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(doc["token_accepted"] as? Bool == true && doc["logged_in"] as? Bool == false)
        expectNoToken(r, try token(), "wrong login")
    }

    @Test("a token of another client, refused by the server's own check: the hint names that check, not only the login")
    func otherClientsToken() throws {
        // Dovecot asks the provider about each token as the confidential
        // client, and glewlwyd calls the public client's tokens inactive
        // to it: the login and the scopes are right, the token is not the
        // server's.
        try ProviderGrants.importConfidential(
            "mail", into: home, scopes: ["openid", "email", "mail"], publicClient: true)
        let r = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps), "--user", "ada")
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("the provider still accepts the token"), "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "the scopes are not the cause; the login is, or the server's own check of the token (the client or audience of tokens it takes)"
            ), "\(r.stderr)")
        expectNoToken(r, try token(), "another client's token")
    }

    @Test(
        "a short login that is right (Dovecot's ada for ada@example.com), refused for a revoked token: the hint offers the account, never tells to drop the login"
    )
    func shortLogin() throws {
        // The account is the address; Dovecot's login is the short name. No
        // userinfo endpoint: the provider cannot be asked, so both the
        // revocation and the login are offered as causes.
        let tokens = try ProviderGrants.importConfidential(
            "mail", into: home, account: "ada@example.com", userinfo: false)
        try ProviderGrants.revoke(try #require(tokens["access_token"] as? String), hint: "access_token")

        let r = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps), "--user", "ada")
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("refused the XOAUTH2 login of ada"), "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: hint: the login ada differs from the grant's account (ada@example.com): if this server expects the account as the login, test without --user, which logs in as ada@example.com"
            ), "\(r.stderr)")
        #expect(!r.stderr.contains("leave out --user"), "\(r.stderr)")
        #expect(r.stderr.contains("a token the provider revoked is refused the same way"), "\(r.stderr)")
        // The login was right: with a new token it logs in as ada, and the
        // account as the login is what this server refuses.
        #expect(try home.run("refresh", "mail").status == 0)
        let again = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps), "--user", "ada")
        #expect(again.status == 0, "\(again.stderr)")
        let account = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps))
        #expect(account.status == 1 && account.stderr.contains("login of ada@example.com"), "\(account.stderr)")
    }

    @Test(
        "the account as the login, refused while the grant has the scope the challenge names and the provider takes the token: the login is named, with the short name to try"
    )
    func accountAsLogin() throws {
        // Dovecot's login is ada, the grant's account ada@example.com, and
        // its challenge names the scope mail, which the grant has.
        try ProviderGrants.importConfidential(
            "mail", into: home, account: "ada@example.com", scopes: ["openid", "email", "mail"])
        let r = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps))
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains("refused the XOAUTH2 login of ada@example.com"), "\(r.stderr)")
        #expect(r.stderr.contains("\"scope\":\"mail\""), "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: hint: the provider still accepts the token (its userinfo endpoint answered HTTP 200), and the server asks for the scope mail, which 'mail' has: the scopes are not the cause; the login is, or the server's own check of the token (the client or audience of tokens it takes)\n"
            ), "\(r.stderr)")
        let hinted =
            "'vault test imap mail --host 127.0.0.1 --port \(mail.info.imaps) --tls --user ada'"
        #expect(
            r.stderr.contains(
                "vault: hint: the login ada@example.com is a whole address; a server whose logins are short names wants the part before @: \(hinted)"
            ), "\(r.stderr)")
        #expect(!r.stderr.contains("Gmail") && !r.stderr.contains("the login must be its account"), "\(r.stderr)")
        // The command the hint gives logs in.
        let again = try test(
            "imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps), "--tls", "--user", "ada")
        #expect(again.status == 0, "\(again.stderr)")

        // A grant without that scope keeps the scope hint, and no short name.
        try ProviderGrants.importConfidential(
            "mail", into: home, account: "ada@example.com", scopes: ["openid", "email"])
        let lacking = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps))
        #expect(lacking.status == 1, "\(lacking.stderr)")
        #expect(
            lacking.stderr.contains(
                "vault: hint: the server asks for the scope mail, which 'mail' lacks: run 'vault add mail --scope mail'"
            ), "\(lacking.stderr)")
        #expect(!lacking.stderr.contains("--user ada"), "\(lacking.stderr)")
        expectNoToken(r, try token(), "account as login")
    }

    @Test("SMTP: a login that worked, then the server's relay down: logged in, and what the server said after")
    func relayDown() throws {
        let down = try MailServer.relayDown()
        home.extra["SSL_CERT_FILE"] = down.info.ca
        try ProviderGrants.importConfidential("mail", into: home)
        let r = try test("smtp", "mail", "--host", "127.0.0.1", "--port", String(down.info.submission))
        #expect(r.status == 75, "\(r.stderr)")
        #expect(r.stdout.contains("235 2.7.0 Logged in."), "\(r.stdout)")
        #expect(
            r.stderr.contains(
                "vault: error: logged in to 127.0.0.1:\(down.info.submission) as ada with XOAUTH2, then the server failed: 421 "
            ), "\(r.stderr)")
        #expect(r.stderr.contains("Failed to connect to relay server"), "\(r.stderr)")
        #expect(r.stderr.contains("vault: hint: the token works"), "\(r.stderr)")
        #expect(!r.stderr.contains("check the port") && !r.stderr.contains("weird server reply"), "\(r.stderr)")
        let json = try test("smtp", "mail", "--host", "127.0.0.1", "--port", String(down.info.submission), "--json")
        #expect(json.status == 75, "\(json.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(doc["logged_in"] as? Bool == true && doc["result"] as? String == "failed_after_login")
        #expect((doc["error"] as? String)?.contains("Failed to connect to relay server") == true)
        expectNoToken(r, try token(), "relay down")
        expectNoToken(json, try token(), "relay down json")
        // Positive control: IMAP on the same server logs in.
        let imap = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(down.info.imaps))
        #expect(imap.status == 0, "\(imap.stderr)")
    }

    @Test("a server that repeats the SASL response back: those lines are left out, the rest is shown")
    func echoedToken() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        let echo = try FixtureServer(script: "echo_imap.py", arguments: ["serve"])
        let token = try token()
        for mechanism in ["xoauth2", "oauthbearer"] {
            let r = try test(
                "imap", "mail", "--host", "127.0.0.1", "--port", String(echo.port), "--plain", "--mechanism", mechanism)
            #expect(r.status == 1, "\(r.stderr)")
            // Three of the server's lines repeated the response; each was withheld.
            let withheld = r.stdout.components(separatedBy: "\n").filter {
                $0 == "[a line that repeats the access token, not shown]"
            }
            #expect(withheld.count == 3, "\(mechanism): \(r.stdout)")
            #expect(r.stdout.contains("* OK nothing repeated here"))
            #expect(r.stderr.contains("A002 NO [AUTHENTICATIONFAILED] refused"), "\(r.stderr)")
            expectNoToken(r, token, mechanism)
        }
    }

    @Test("plain IMAP and SMTP to a loopback host with --plain")
    func plainLoopback() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        let imap = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.imap), "--plain")
        #expect(imap.status == 0, "\(imap.stderr)")
        #expect(imap.stderr.contains("(imap, plain)"))
        let smtp = try test("smtp", "mail", "--host", "127.0.0.1", "--port", String(mail.submission), "--plain")
        #expect(smtp.status == 0, "\(smtp.stderr)")
    }

    @Test("plain text to a host that is not loopback is a usage error, before anything is unlocked or sent")
    func plainRefused() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        for host in ["imap.example.com", "192.0.2.1", "[2001:db8::1]"] {
            let r = try test("imap", "mail", "--host", host, "--plain")
            #expect(r.status == 64, "\(host): \(r.stderr)")
            #expect(r.stdout.isEmpty)
            #expect(r.stderr.contains("--plain would send the token in clear text"), "\(r.stderr)")
        }
        // Refused before the vault is opened: no key needed.
        home.extra["VAULT_KEYFILE"] = nil
        let r = try test("smtp", "mail", "--host", "smtp.example.com", "--plain")
        #expect(r.status == 64, "\(r.stderr)")
    }

    @Test(
        "a port nobody listens on: nothing is listening there, check the port, exit 75; so is an untrusted certificate"
    )
    func unreachable() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        let closed = try ClosedPort()
        let r = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(closed.port))
        #expect(r.status == 75, "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: error: nothing is listening at 127.0.0.1:\(closed.port) (the connection was refused)\n"),
            "\(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: hint: check the port (IMAP is on port 993 (TLS) or 143 (STARTTLS)); if it is right, the server is not running there"
            ), "\(r.stderr)")
        #expect(!r.stderr.contains("try again later"), "\(r.stderr)")
        #expect(r.stdout.isEmpty)
        let json = try test("smtp", "mail", "--host", "127.0.0.1", "--port", String(closed.port), "--json")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(doc["result"] as? String == "unreachable" && json.status == 75, "\(json.stdout)")

        home.extra["SSL_CERT_FILE"] = nil
        let untrusted = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps))
        #expect(untrusted.status == 75, "\(untrusted.stderr)")
        #expect(untrusted.stderr.contains("vault: error: TLS with 127.0.0.1:"), "\(untrusted.stderr)")
        expectNoToken(untrusted, try token(), "untrusted")
    }

    @Test(
        "a certificate from a CA this system does not trust is named as such, with SSL_CERT_FILE, and no --starttls hint"
    )
    func untrustedCertificate() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        home.extra["SSL_CERT_FILE"] = nil
        let cases: [(String, [String])] = [
            ("imap", ["--port", String(mail.info.imaps)]), ("smtp", ["--port", String(mail.info.submission)]),
        ]
        for (proto, options) in cases {
            let r = try home.run(["test", proto, "mail", "--host", "127.0.0.1"] + options)
            #expect(r.status == 75, "\(proto): \(r.stderr)")
            #expect(
                r.stderr.contains(
                    "vault: error: TLS with 127.0.0.1:\(options[1]) failed: the server's certificate is not trusted: it comes from a CA this system does not trust"
                ), "\(proto): \(r.stderr)")
            #expect(r.stderr.contains("SSL_CERT_FILE=CA.pem"), "\(proto): \(r.stderr)")
            #expect(!r.stderr.contains("--starttls") && !r.stderr.contains("ssh remote key"), "\(proto): \(r.stderr)")
            let json = try home.run(["test", proto, "mail", "--host", "127.0.0.1", "--json"] + options)
            let doc = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            #expect(doc["result"] as? String == "tls_failed", "\(json.stdout)")
        }
        // Positive control: with the test run's CA named, the same login works.
        home.extra["SSL_CERT_FILE"] = mail.info.ca
        #expect(try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps)).status == 0)
    }

    @Test("a port where the other protocol answers: named with its greeting at once, exit 1, and the port to use")
    func wrongProtocol() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        let cases: [(String, Int, [String], String, String, String)] = [
            ("imap", mail.info.submission, ["--starttls"], "SMTP", "220 ", "--starttls"),
            ("imap", mail.info.submissions, [], "SMTP", "220 ", "--tls"),
            ("smtp", mail.info.imap, [], "IMAP", "* OK ", "--starttls"),
        ]
        for (proto, port, options, spoken, greeting, security) in cases {
            let label = "\(proto) to \(spoken) port \(port) \(options)"
            let started = Date()
            let r = try home.run(["test", proto, "mail", "--host", "127.0.0.1", "--port", String(port)] + options)
            // The greeting says it all: no wait for libcurl's timeout (10 s).
            #expect(Date().timeIntervalSince(started) < 8, "\(label)")
            #expect(r.status == 1, "\(label): \(r.stderr)")
            #expect(r.stdout.hasPrefix(greeting), "\(label): \(r.stdout)")
            #expect(
                r.stderr.contains(
                    "vault: error: 127.0.0.1:\(port) answered as an \(spoken) server, not as \(proto.uppercased()): \"\(greeting)"
                ), "\(label): \(r.stderr)")
            #expect(
                r.stderr.contains(
                    "vault: hint: this port is for 'vault test \(spoken.lowercased()) mail --host 127.0.0.1 --port \(port) \(security)'"
                ), "\(label): \(r.stderr)")
            #expect(!r.stderr.contains("cannot reach") && !r.stderr.contains("try again"), "\(label): \(r.stderr)")
            // The command the hint gives gets past the greeting: to the login.
            let hinted = try home.run(
                ["test", spoken.lowercased(), "mail", "--host", "127.0.0.1", "--port", String(port), security])
            #expect(hinted.status == 0, "\(label), as hinted: \(hinted.stderr)")
        }
    }

    @Test("STARTTLS to a port that wants TLS from the first byte, and TLS to a plain port, say which option fits")
    func wrongTLS() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        let silent = try test("smtp", "mail", "--host", "127.0.0.1", "--port", String(mail.info.submissions))
        #expect(silent.status == 75, "\(silent.stderr)")
        // Connected, then silence: not "cannot reach".
        #expect(
            silent.stderr.contains(
                "vault: error: connected to 127.0.0.1:\(mail.info.submissions), and the server said nothing in")
                && !silent.stderr.contains("cannot reach"), "\(silent.stderr)")
        #expect(silent.stderr.contains("vault: hint: if this port wants TLS from the first byte"), "\(silent.stderr)")
        let plain = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imap), "--tls")
        #expect(plain.status == 75, "\(plain.stderr)")
        #expect(plain.stderr.contains("--starttls"), "\(plain.stderr)")
    }

    @Test("a dead grant exits 2 and a locked vault 77, and no connection is made")
    func deadAndLocked() throws {
        let tokens = try ProviderGrants.importConfidential("mail", into: home, expiresIn: -600)
        try ProviderGrants.revoke(tokens["refresh_token"] as! String, hint: "refresh_token")
        let dead = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps))
        #expect(dead.status == 2, "\(dead.stderr)")
        #expect(dead.stdout.isEmpty)
        home.extra["VAULT_KEYFILE"] = nil
        let locked = try test("imap", "mail", "--host", "127.0.0.1", "--port", String(mail.info.imaps))
        #expect(locked.status == 77, "\(locked.stderr)")
        #expect(locked.stdout.isEmpty)
    }
}

/// A loopback port that is bound but not listening, so a connection to it
/// is refused for as long as this value lives.
final class ClosedPort {
    let port: Int
    private let fd: Int32

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EIO) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { p -> Bool in
                bind(fd, p, length) == 0 && getsockname(fd, p, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw POSIXError(.EIO)
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
