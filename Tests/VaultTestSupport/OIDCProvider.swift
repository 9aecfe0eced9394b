import Foundation

/// The real OpenID Connect provider of the tests: glewlwyd, started once
/// per test run by Tools/testservers/glewlwyd.py on loopback.
public final class OIDCProvider: @unchecked Sendable {
    public struct Settings: Decodable, Sendable {
        public let base, issuer, redirect_uri, user, password, email: String
        public let public_client, confidential_client, client_secret: String
        /// The client that authenticates with private_key_jwt, and its PKCS#8 key file.
        public let jwt_client, jwt_client_key: String?
    }

    public let settings: Settings
    /// The directory the server keeps its state in (for browser.py).
    public let directory: String
    private let server: FixtureServer
    private let home: TemporaryDirectory

    /// One provider with one-use (rotating) refresh tokens for the whole run.
    public static let shared: Result<OIDCProvider, any Error> = Result {
        let provider = try OIDCProvider(rotate: true)
        RunEnd.atExit { provider.end() }
        return provider
    }

    init(rotate: Bool) throws {
        home = TemporaryDirectory()
        directory = home.path + "/glewlwyd"
        server = try FixtureServer(
            script: "glewlwyd.py", arguments: ["serve", directory] + (rotate ? ["--rotate"] : []))
        settings = try JSONDecoder().decode(Settings.self, from: Data(server.firstLine.utf8))
    }

    private let issuers = NSLock()

    /// Stops the server by its script and removes its directory.
    func end() {
        server.stop()
        home.remove()
    }

    /// A second issuer on this provider, at `/api/NAME`, whose refresh
    /// tokens do not rotate and die after `seconds` unused: glewlwyd's
    /// rolling refresh tokens, which each use starts again (an inactivity
    /// limit). Added on first use; its URL.
    public func inactivityIssuer(_ name: String, seconds: Int) throws -> String {
        issuers.lock()
        defer { issuers.unlock() }
        let r = try VaultProcess.start(
            ["\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "issuer", directory, name, "\(seconds)"],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        guard r.status == 0 else { throw ScriptFailed(description: "glewlwyd.py issuer: \(r.stderr)") }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// An issuer on this provider, at `/api/NAME`, with glewlwyd's
    /// `features` on (`par`, `par-required`, `iss`: see glewlwyd.py).
    /// Added on first use; its URL.
    public func featureIssuer(_ name: String, _ features: [String]) throws -> String {
        issuers.lock()
        defer { issuers.unlock() }
        let r = try VaultProcess.start(
            ["\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "feature", directory, name] + features,
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        guard r.status == 0 else { throw ScriptFailed(description: "glewlwyd.py feature: \(r.stderr)") }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// An issuer on this provider, at `/api/NAME`, where clients register
    /// themselves (RFC 7591, open registration) and delete their
    /// registration (RFC 7592). Added on first use; its URL.
    public func registrationIssuer(_ name: String) throws -> String {
        issuers.lock()
        defer { issuers.unlock() }
        return try script("registration", name)
    }

    /// The client `id` as the admin API shows it, or nil when the provider has none.
    public func client(_ id: String) throws -> [String: Any]? {
        let r = try VaultProcess.start(
            ["\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "client", directory, id],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        guard r.status == 0 else { return nil }
        return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
    }

    /// Runs glewlwyd.py with `arguments` after the server's directory; its output.
    private func script(_ command: String, _ arguments: String...) throws -> String {
        let r = try VaultProcess.start(
            ["\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", command, directory] + arguments,
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        guard r.status == 0 else { throw ScriptFailed(description: "glewlwyd.py \(command): \(r.stderr)") }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The token response of a whole code flow for the confidential client
    /// at `issuer` (the first issuer when nil), run without vault.
    public func confidentialTokens(issuer: String? = nil) throws -> [String: Any] {
        let r = try VaultProcess.start(
            [
                "\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "tokens", directory,
                settings.confidential_client,
            ] + (issuer.map { ["--issuer", $0] } ?? []),
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        guard r.status == 0, let doc = try? JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        else { throw ScriptFailed(description: "glewlwyd.py tokens: \(r.stderr)") }
        return doc
    }

    /// A $BROWSER command that plays the person in `mode` (see browser.py).
    public func browser(_ mode: String) -> String {
        "python3 \(FixtureServer.root.path)/Tools/testservers/browser.py \(mode) \(directory)"
    }
}

/// A test server's script that failed, and what it said.
struct ScriptFailed: Error, CustomStringConvertible {
    let description: String
}

/// What Tools/testservers/dovecot.py prints: its ports and its CA.
public struct MailServerInfo: Decodable, Sendable {
    /// IMAP with STARTTLS offered (a login without it is accepted too).
    public let imap: Int
    /// IMAP over TLS from the first byte.
    public let imaps: Int
    /// SMTP submission with STARTTLS offered (a login without it is accepted too).
    public let submission: Int
    /// SMTP submission over TLS from the first byte.
    public let submissions: Int
    /// The CA certificate (PEM) that issued the server's certificate, for SSL_CERT_FILE.
    public let ca: String
    /// With --long-tokens, the port of the script's own token issuer.
    public let issuer: Int?

    /// Reads the line the script printed.
    public init(line: String) throws {
        self = try JSONDecoder().decode(MailServerInfo.self, from: Data(line.utf8))
    }
}

/// Dovecot (IMAP and submission) checking tokens at the shared provider.
public final class MailServer: @unchecked Sendable {
    public let imap: Int
    public let submission: Int
    /// All the ports, and the CA to trust for TLS.
    public let info: MailServerInfo
    private let server: FixtureServer
    private let home = TemporaryDirectory()

    public static let shared: Result<MailServer, any Error> = Result {
        let mail = try MailServer(provider: try OIDCProvider.shared.get())
        RunEnd.atExit { mail.end() }
        return mail
    }

    /// A Dovecot of its own whose submission relay is down: SMTP logins
    /// succeed, then the server says it cannot reach the relay.
    public static func relayDown() throws -> MailServer {
        try MailServer(provider: try OIDCProvider.shared.get(), relayDown: true)
    }

    init(provider: OIDCProvider, relayDown: Bool = false) throws {
        server = try FixtureServer(
            script: "dovecot.py",
            arguments: ["serve", home.path + "/dovecot", provider.directory + "/settings.json"]
                + (relayDown ? ["--relay-down"] : []))
        info = try MailServerInfo(line: server.firstLine)
        imap = info.imap
        submission = info.submission
    }

    /// Stops the server by its script and removes its directory.
    func end() {
        server.stop()
        home.remove()
    }
}

/// git over smart HTTP through Apache, tokens checked at the shared provider.
public final class GitServer: @unchecked Sendable {
    public let url: String
    public let port: Int
    private let server: FixtureServer
    private let home = TemporaryDirectory()

    public static let shared: Result<GitServer, any Error> = Result {
        let git = try GitServer(provider: try OIDCProvider.shared.get())
        RunEnd.atExit { git.end() }
        return git
    }

    init(provider: OIDCProvider) throws {
        server = try FixtureServer(
            script: "git_http.py", arguments: ["serve", home.path + "/git", provider.directory + "/settings.json"])
        struct Info: Decodable {
            let port: Int
            let url: String
        }
        let info = try JSONDecoder().decode(Info.self, from: Data(server.firstLine.utf8))
        url = info.url
        port = info.port
    }

    /// Stops the server by its script and removes its directory.
    func end() {
        server.stop()
        home.remove()
    }

    /// The ends of Apache's error and access logs: what a failed git
    /// command's message shows, since the server's side of a failure is
    /// only there.
    public func errorLogTail(lines: Int = 20) -> String {
        func tail(_ name: String) -> String {
            let text = (try? String(contentsOfFile: home.path + "/git/logs/" + name, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
        }
        return tail("error.log") + "\nrequests:\n" + tail("access.log")
    }
}
