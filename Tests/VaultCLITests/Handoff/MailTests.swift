import Foundation
import Testing
import VaultTestSupport

/// IMAP and SMTP submission logins with vault's tokens against Dovecot,
/// which checks each token at the real provider's introspection endpoint.
@Suite("mail: Dovecot with XOAUTH2 and OAUTHBEARER")
struct MailTests {
    let mail: MailServer
    let home = Home()

    init() throws {
        mail = try MailServer.shared.get()
        try home.initKeyfileVault()
    }

    func client(_ proto: String, _ mech: String, response: String) throws -> ProcessResult {
        let port = proto == "imap" ? mail.imap : mail.submission
        return try VaultProcess.start(
            ["\(FixtureServer.root.path)/Tools/testservers/mail_client.py", proto, String(port), mech],
            environment: ["PATH": "/usr/bin:/bin"], stdin: response, executable: "/usr/bin/python3"
        ).wait()
    }

    func response(_ args: String...) throws -> String {
        let r = try VaultProcess.run(["xoauth2", "mail", "--base64"] + args, environment: home.environment)
        try #require(r.status == 0, "\(r.stderr)")
        return r.stdout
    }

    @Test("curl logs in to IMAP with vault token (the token given on curl's stdin, not its argv)")
    func curlIMAP() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        let token = try home.run("token", "mail")
        try #require(token.status == 0)
        let config = """
            url = "imap://127.0.0.1:\(mail.imap)/"
            user = "ada:"
            oauth2-bearer = "\(token.stdout.trimmingCharacters(in: .newlines))"
            request = "LIST \\"\\" \\"*\\""
            silent
            show-error
            """
        let r = try VaultProcess.start(
            ["-K", "-"], environment: ["PATH": "/usr/bin:/bin"], stdin: config, executable: "/usr/bin/curl"
        ).wait()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("INBOX"))
    }

    @Test("a client sending vault xoauth2 output logs in to IMAP and SMTP, with XOAUTH2 and OAUTHBEARER")
    func saslLogins() throws {
        try ProviderGrants.importConfidential("mail", into: home)
        let xoauth2 = try response()
        let bearer = try response("--oauthbearer", "--host", "127.0.0.1", "--port", String(mail.imap))
        for (proto, mech, r) in [
            ("imap", "XOAUTH2", xoauth2), ("imap", "OAUTHBEARER", bearer), ("smtp", "XOAUTH2", xoauth2),
            ("smtp", "OAUTHBEARER", try response("--oauthbearer")),
        ] {
            let result = try client(proto, mech, response: r)
            #expect(result.status == 0, "\(proto) \(mech): \(result.stdout)\(result.stderr)")
            #expect(result.stdout.hasPrefix("OK"))
        }
        // The SMTP response is over the 1024-byte line limit: it went after the 334.
        #expect(xoauth2.count > 1024)
    }

    @Test("a revoked grant fails cleanly: the server refuses the login, vault check marks it dead")
    func revoked() throws {
        let tokens = try ProviderGrants.importConfidential("mail", into: home)
        try ProviderGrants.revoke(tokens["refresh_token"] as! String, hint: "refresh_token")
        try ProviderGrants.revoke(tokens["access_token"] as! String, hint: "access_token")
        let refused = try client("imap", "XOAUTH2", response: try response())
        #expect(refused.status == 1)
        #expect(refused.stdout.contains("FAILED") && refused.stdout.contains("AUTHENTICATIONFAILED"))
        let smtp = try client("smtp", "XOAUTH2", response: try response())
        #expect(smtp.status == 1 && smtp.stdout.hasPrefix("FAILED"))
        let check = try home.run("check", "mail")
        #expect(check.status == 2, "\(check.stderr)")
        let after = try VaultProcess.run(["xoauth2", "mail", "--base64"], environment: home.environment)
        #expect(after.status == 2 && after.stdout.isEmpty)
    }
}
