import Foundation
import Testing
import VaultTestSupport

/// Dovecot checking tokens at its own issuer of JWT-sized access tokens
/// (Tools/testservers/dovecot.py --long-tokens); mail sent through its
/// submission service lands in the user's maildir here.
final class LongTokenMail: Sendable {
    let imap: Int
    let submission: Int
    /// All the ports, and the CA to trust for TLS.
    let info: MailServerInfo
    /// The issuer's token endpoint, which refreshes any refresh token.
    let tokenEndpoint: String
    /// The user's maildir (its INBOX).
    let maildir: String
    private let server: FixtureServer
    private let home = TemporaryDirectory()

    static let shared: Result<LongTokenMail, any Error> = Result {
        let mail = try LongTokenMail()
        RunEnd.atExit { mail.end() }
        return mail
    }

    /// Stops the server by its script and removes its directory.
    func end() {
        server.stop()
        home.remove()
    }

    private init() throws {
        // Dovecot reads the mail as its own user, who must get through.
        try FileManager.default.setAttributes([.posixPermissions: 0o711], ofItemAtPath: home.path)
        server = try FixtureServer(script: "dovecot.py", arguments: ["serve", home.path + "/dovecot", "--long-tokens"])
        info = try MailServerInfo(line: server.firstLine)
        imap = info.imap
        submission = info.submission
        tokenEndpoint = "http://127.0.0.1:\(info.issuer ?? 0)/token"
        maildir = home.path + "/dovecot/mail/ada"
    }

    /// Whether a message with this subject has arrived in the user's INBOX.
    func delivered(_ subject: String) -> Bool {
        MailClientTests.messages(in: maildir).contains { $0.contains("Subject: \(subject)") }
    }
}

/// docs/mail.md's configurations, run with the real clients as written (the
/// test server's address and user, without TLS, in place of Gmail's) against
/// Dovecot, with an access token of 1.5 KB that vault refreshed for the
/// grant: Microsoft's access tokens are JWTs of 1-2 KB, about twice the size
/// of the shared provider's.
@Suite("mail clients: docs/mail.md's configurations with a JWT-sized token")
struct MailClientTests {
    let mail: LongTokenMail
    let home = Home()

    init() throws {
        mail = try LongTokenMail.shared.get()
        try home.initKeyfileVault()
        // Named as in docs/mail.md, and expired, so that the client's first
        // `vault token gmail` refreshes it.
        let grant: [String: Any] = [
            "access_token": "expired", "refresh_token": UUID().uuidString,
            "expires_at": Int(Date().timeIntervalSince1970) - 600, "provider": "local", "account": "ada",
            "provider_config": ["token_endpoint": mail.tokenEndpoint, "client_id": "mail-tests"],
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let imported = try home.run("import", "gmail", stdin: json)
        try #require(imported.status == 0, "\(imported.stderr)")
    }

    static func installed(_ program: String) -> Bool { FileManager.default.isExecutableFile(atPath: program) }

    /// Cyrus SASL's XOAUTH2 client plugin, which mbsync needs (Debian's
    /// libsasl2-modules-kdexoauth2); Cyrus SASL itself has none.
    static let saslXOAUTH2: Bool = {
        let files = FileManager.default
        let multiarch = ((try? files.contentsOfDirectory(atPath: "/usr/lib")) ?? []).map { "/usr/lib/\($0)/sasl2" }
        return (multiarch + ["/usr/lib/sasl2"]).contains { files.fileExists(atPath: $0 + "/libkdexoauth2.so") }
    }()

    /// The messages of a maildir folder.
    static func messages(in folder: String) -> [String] {
        ["new", "cur"].flatMap { sub in
            ((try? FileManager.default.contentsOfDirectory(atPath: "\(folder)/\(sub)")) ?? []).compactMap {
                FileManager.default.contents(atPath: "\(folder)/\(sub)/\($0)").map {
                    String(decoding: $0, as: UTF8.self)
                }
            }
        }
    }

    /// The clients run `vault token gmail` as docs/mail.md writes it, so
    /// vault is on their PATH.
    var environment: [String: String] {
        var env = home.environment
        env["PATH"] = URL(fileURLWithPath: VaultProcess.binary).deletingLastPathComponent().path + ":/usr/bin:/bin"
        return env
    }

    /// The token the clients were given, after they ran: 1.5 KB, refreshed.
    func token() throws -> String {
        let r = try home.run("token", "gmail")
        try #require(r.status == 0, "\(r.stderr)")
        let token = r.stdout.trimmingCharacters(in: .newlines)
        try #require(token.count >= 1500 && token != "expired")
        return token
    }

    /// The configuration docs/mail.md gives under `## HEADING`, with each
    /// line whose first word `settings` names replaced (the test server for
    /// Gmail's), and the settings it lacks added.
    static func documented(_ heading: String, _ settings: [(String, String)]) throws -> String {
        let doc = try String(contentsOfFile: FixtureServer.root.path + "/docs/mail.md", encoding: .utf8)
        let section = try #require(doc.components(separatedBy: "\n## \(heading)\n").dropFirst().first)
        let block = try #require(section.components(separatedBy: "```\n").dropFirst().first)
        var lines = block.split(separator: "\n").map(String.init)
        for (key, value) in settings {
            let line = "\(key) \(value)"
            if let i = lines.firstIndex(where: { $0.hasPrefix(key + " ") }) {
                lines[i] = line
            } else {
                lines.append(line)
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Sends one message with docs/mail.md's msmtp account, `auth` as given
    /// there unless `mechanism` says otherwise.
    func msmtp(_ mechanism: String? = nil, subject: String) throws -> ProcessResult {
        let config = home.path + "/msmtprc"
        var server = [
            ("host", "127.0.0.1"), ("port", String(mail.submission)), ("tls", "off"), ("user", "ada"),
            ("from", "ada@example.com"),
        ]
        if let mechanism { server.append(("auth", mechanism)) }
        home.write(config, try Self.documented("msmtp", server))
        let message = "From: ada@example.com\nTo: ada@example.com\nSubject: \(subject)\n\nHello.\n"
        return try VaultProcess.start(
            ["-C", config, "-a", "gmail", "ada@example.com"], environment: environment, stdin: message,
            executable: "/usr/bin/msmtp"
        ).wait()
    }

    @Test(
        "docs/mail.md's msmtp account sends through Dovecot's submission: auth xoauth2 sends the response after the 334",
        .enabled(if: installed("/usr/bin/msmtp"), "needs msmtp (Tools/setup)"))
    func msmtpDocumented() throws {
        let subject = "sent by msmtp \(UUID().uuidString)"
        let r = try msmtp(subject: subject)
        let token = try token()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(mail.delivered(subject))
        #expect(!r.stdout.contains(token) && !r.stderr.contains(token))
    }

    @Test(
        "msmtp with auth oauthbearer puts the response on the AUTH line, which Dovecot refuses as too long",
        .enabled(if: installed("/usr/bin/msmtp"), "needs msmtp (Tools/setup)"))
    func msmtpOAuthBearer() throws {
        let subject = "sent by msmtp with oauthbearer \(UUID().uuidString)"
        let r = try msmtp("oauthbearer", subject: subject)
        let token = try token()
        // msmtp's EX_NOPERM: authentication failed.
        #expect(r.status == 77, "\(r.stderr)")
        #expect(r.stderr.contains("500 5.5.2 Line too long"), "\(r.stderr)")
        #expect(!mail.delivered(subject))
        #expect(!r.stdout.contains(token) && !r.stderr.contains(token))
    }

    /// Runs docs/mail.md's smtplib code (`code`, the documented block unless
    /// changed) against the test server, sending `subject`.
    func smtplib(_ code: String, subject: String) throws -> ProcessResult {
        let script =
            code
            .replacingOccurrences(of: "\"smtp.gmail.com\", 587", with: "\"localhost\", \(mail.submission)")
            .replacingOccurrences(of: "ada@gmail.com", with: "ada@example.com")
            .replacingOccurrences(of: "Subject: hello", with: "Subject: \(subject)")
        home.write(home.path + "/send.py", script)
        var env = environment
        env["SSL_CERT_FILE"] = mail.info.ca
        return try VaultProcess.start([home.path + "/send.py"], environment: env, executable: "/usr/bin/python3")
            .wait()
    }

    @Test(
        "docs/mail.md's smtplib code sends through Dovecot's submission after the 334; smtplib's default is too long a line",
        .enabled(if: installed("/usr/bin/python3"), "needs python3"))
    func smtplibDocumented() throws {
        let doc = try String(contentsOfFile: FixtureServer.root.path + "/docs/mail.md", encoding: .utf8)
        let section = try #require(doc.components(separatedBy: "\n## Python (smtplib)\n").dropFirst().first)
        let code = try #require(section.components(separatedBy: "```\n").dropFirst().first)
        #expect(code.contains("initial_response_ok=False"))
        let subject = "sent by smtplib \(UUID().uuidString)"
        let r = try smtplib(code, subject: subject)
        let token = try token()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(mail.delivered(subject))
        #expect(!r.stdout.contains(token) && !r.stderr.contains(token))
        // Control: smtplib's default sends the response on the AUTH line.
        let initial = "sent by smtplib's default \(UUID().uuidString)"
        let refused = try smtplib(
            code.replacingOccurrences(of: ", initial_response_ok=False", with: ""), subject: initial)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("5.5.2 Line too long"), "\(refused.stderr)")
        #expect(!mail.delivered(initial))
        #expect(!refused.stdout.contains(token) && !refused.stderr.contains(token))
    }

    /// Syncs the INBOX with docs/mail.md's mbsync account, `AuthMechs` as
    /// given there unless `mechanism` says otherwise.
    func mbsync(_ mechanism: String? = nil) throws -> (ProcessResult, local: String) {
        let local = home.path + "/mail-\(mechanism ?? "documented")"
        try FileManager.default.createDirectory(atPath: local, withIntermediateDirectories: true)
        var server = [("Host", "127.0.0.1"), ("Port", String(mail.imap)), ("User", "ada"), ("SSLType", "None")]
        if let mechanism { server.append(("AuthMechs", mechanism)) }
        let account = try Self.documented("mbsync (isync)", server)
        let config = home.path + "/mbsyncrc"
        home.write(
            config,
            account + """

                IMAPStore gmail-remote
                Account gmail

                MaildirStore gmail-local
                Path \(local)/
                Inbox \(local)/INBOX

                Channel gmail
                Far :gmail-remote:
                Near :gmail-local:
                Patterns INBOX
                Create Near
                Sync Pull
                SyncState *

                """)
        let r = try VaultProcess.start(
            ["-c", config, "gmail"], environment: environment, executable: "/usr/bin/mbsync"
        ).wait()
        return (r, local + "/INBOX")
    }

    @Test(
        "docs/mail.md's mbsync account (AuthMechs XOAUTH2) syncs the inbox over IMAP",
        .enabled(if: installed("/usr/bin/mbsync"), "needs isync (Tools/setup)"),
        .enabled(if: saslXOAUTH2, "needs Cyrus SASL's XOAUTH2 plugin (libsasl2-modules-kdexoauth2)"))
    func mbsyncDocumented() throws {
        let (r, inbox) = try mbsync()
        let token = try token()
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(Self.messages(in: inbox).contains { $0.contains("Subject: welcome to the test mailbox") })
        #expect(!r.stdout.contains(token) && !r.stderr.contains(token))
    }

    @Test(
        "mbsync has no OAUTHBEARER: Debian's Cyrus SASL offers no such client mechanism",
        .enabled(if: installed("/usr/bin/mbsync"), "needs isync (Tools/setup)"))
    func mbsyncOAuthBearer() throws {
        let (r, inbox) = try mbsync("OAUTHBEARER")
        #expect(r.status == 1)
        #expect(r.stderr.contains("selected SASL mechanism(s) not available"), "\(r.stderr)")
        #expect(Self.messages(in: inbox).isEmpty)
    }

    @Test(
        "mutt and neomutt, offlineimap and aerc with a JWT-sized token",
        .disabled("not installed by Tools/setup: docs/mail.md says their configurations are untested"),
        arguments: ["neomutt", "mutt", "offlineimap", "aerc"])
    func untested(_ client: String) {
        Issue.record("\(client) is not tested yet")
    }
}
