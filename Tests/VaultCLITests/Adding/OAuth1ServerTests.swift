import Foundation
import Testing
import VaultTestSupport

/// Requests signed by vault, checked by oauthlib's ResourceEndpoint on a
/// loopback server (Tools/testservers/oauth1_server.py).
@Suite("OAuth 1.0a signatures accepted by an oauthlib server")
struct OAuth1ServerTests {
    struct Settings: Decodable {
        let port: Int
        let client_key, client_secret, token, token_secret: String
    }

    let server: FixtureServer
    let settings: Settings
    let home = Home()
    static let keyPath = FixtureServer.root.appendingPathComponent(
        "Tests/VaultCoreTests/Vectors/oauth1-test-rsa-key.pem"
    ).path

    init() throws {
        let dir = TemporaryDirectory()
        let pub = dir.path + "/pub.pem"
        let r = try VaultProcess.start(
            ["rsa", "-in", Self.keyPath, "-pubout", "-out", pub], environment: ["PATH": "/usr/bin:/bin"],
            executable: "/usr/bin/openssl"
        ).wait()
        try #require(r.status == 0, "\(r.stderr)")
        server = try FixtureServer(script: "oauth1_server.py", arguments: [pub])
        settings = try JSONDecoder().decode(Settings.self, from: Data(server.firstLine.utf8))
        try home.initKeyfileVault()
    }

    var resource: String { "http://127.0.0.1:\(settings.port)/resource" }

    func importGrant(_ name: String, client: String, secret: String, method: String) throws {
        let grant: [String: Any] = [
            "access_token": settings.token, "token_secret": settings.token_secret, "provider": "test1",
            "provider_config": ["client_id": client, "client_secret": secret, "signature_method": method],
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        try #require(try home.run("import", name, stdin: json).status == 0)
    }

    /// Sends a request with curl, the header given on curl's stdin (a config file).
    func send(_ url: String, header: String? = nil, method: String = "GET", body: String? = nil) throws -> Int {
        var config =
            "url = \"\(url)\"\nrequest = \"\(method)\"\nsilent\noutput = \"/dev/null\"\nwrite-out = \"%{http_code}\"\n"
        if let header { config += "header = \"\(header.replacingOccurrences(of: "\"", with: "\\\""))\"\n" }
        if let body {
            config += "header = \"Content-Type: application/x-www-form-urlencoded\"\ndata-binary = \"\(body)\"\n"
        }
        let r = try VaultProcess.start(
            ["-K", "-"], environment: ["PATH": "/usr/bin:/bin"], stdin: config, executable: "/usr/bin/curl"
        ).wait()
        return Int(r.stdout) ?? -1
    }

    func header(_ name: String, _ args: String...) throws -> String {
        let r = try VaultProcess.run(["header", name] + args, environment: home.environment)
        try #require(r.status == 0, "\(r.stderr)")
        return r.stdout.trimmingCharacters(in: .newlines)
    }

    @Test("HMAC-SHA1: a signed GET is accepted; the same request replayed is refused")
    func hmac() throws {
        try importGrant("h", client: settings.client_key, secret: settings.client_secret, method: "HMAC-SHA1")
        let url = resource + "?b=2&a=1&c=x%20y"
        let signed = try header("h", "--url", url)
        #expect(signed.hasPrefix("Authorization: OAuth oauth_consumer_key=\"\(settings.client_key)\""))
        #expect(try send(url, header: signed) == 200)
        #expect(try send(url, header: signed) == 401)
    }

    @Test("HMAC-SHA1: a signed POST with a form body is accepted; a changed body is refused")
    func formBody() throws {
        try importGrant("h", client: settings.client_key, secret: settings.client_secret, method: "HMAC-SHA1")
        home.write(home.path + "/body", "x=1&y=two+words")
        let signed = try header("h", "--method", "POST", "--url", resource, "--body-form", home.path + "/body")
        #expect(try send(resource, header: signed, method: "POST", body: "x=1&y=two+words") == 200)
        let again = try header("h", "--method", "POST", "--url", resource, "--body-form", home.path + "/body")
        #expect(try send(resource, header: again, method: "POST", body: "x=1&y=three+words") == 401)
    }

    @Test("query-string signing with vault sign is accepted")
    func querySigned() throws {
        try importGrant("h", client: settings.client_key, secret: settings.client_secret, method: "HMAC-SHA1")
        let r = try VaultProcess.run(["sign", "h", "--url", resource + "?q=1"], environment: home.environment)
        #expect(r.status == 0)
        #expect(try send(r.stdout.trimmingCharacters(in: .newlines)) == 200)
    }

    @Test("a tampered signature and a wrong secret are refused")
    func tampered() throws {
        try importGrant("h", client: settings.client_key, secret: settings.client_secret, method: "HMAC-SHA1")
        try importGrant("wrong", client: settings.client_key, secret: "not-the-secret", method: "HMAC-SHA1")
        let signed = try header("h", "--url", resource)
        let flipped = signed.replacingOccurrences(of: "oauth_signature=\"", with: "oauth_signature=\"A")
        #expect(try send(resource, header: flipped) == 401)
        #expect(try send(resource, header: try header("wrong", "--url", resource)) == 401)
    }

    @Test("RSA-SHA1 with the client's private key, and PLAINTEXT, are accepted")
    func otherMethods() throws {
        let pem = try String(contentsOfFile: Self.keyPath, encoding: .utf8)
        try importGrant("rsa", client: "rsa-client", secret: pem, method: "RSA-SHA1")
        #expect(try send(resource, header: try header("rsa", "--url", resource)) == 200)
        try importGrant("plain", client: settings.client_key, secret: settings.client_secret, method: "PLAINTEXT")
        #expect(try send(resource, header: try header("plain", "--url", resource)) == 200)
    }

    // MARK: The three-legged flow (vault add)

    func providerFile(method: String = "HMAC-SHA1", client: String? = nil) throws {
        let base = "http://127.0.0.1:\(settings.port)"
        let fields: [String: Any] = [
            "name": "local1", "protocol": "oauth1", "request_token_endpoint": base + "/request_token",
            "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/access_token",
            "client_id": client ?? settings.client_key, "signature_method": method,
        ]
        let dir = home.path + "/config/vault/providers"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(
            atPath: dir + "/local1.json", contents: try JSONSerialization.data(withJSONObject: fields))
    }

    func add(_ name: String, browser mode: String, secret: String? = nil, extra: [String] = []) throws -> ProcessResult
    {
        home.write(home.path + "/consumer-secret", (secret ?? settings.client_secret) + "\n")
        var env = home.environment
        env["BROWSER"] = "python3 \(FixtureServer.root.path)/Tools/testservers/browser.py \(mode) -"
        return try VaultProcess.run(
            ["add", "local1", name, "--client-secret-file", home.path + "/consumer-secret"] + extra, environment: env)
    }

    @Test("three-legged flow through the browser: the stored grant signs requests the server accepts")
    func threeLegged() throws {
        try providerFile()
        let r = try add("flow", browser: "oauth1-allow")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("vault: added 'flow' (local1)"))
        #expect(!r.stderr.contains("refresh token"))
        let shown = try home.run("show", "flow", "--json")
        #expect(shown.stdout.contains("\"kind\" : \"oauth1\""))
        #expect(try send(resource, header: try header("flow", "--url", resource)) == 200)
        #expect(!r.stderr.contains(settings.client_secret))
    }

    @Test("paste flow with an oob callback: the person types the verifier the provider shows")
    func pasteVerifier() throws {
        try providerFile()
        home.write(home.path + "/consumer-secret", settings.client_secret + "\n")
        let log = home.path + "/oob.err"
        let p = try VaultProcess.start(
            ["add", "local1", "oob", "--flow", "paste", "--client-secret-file", home.path + "/consumer-secret"],
            environment: home.environment, stderrFile: log, interactive: true)
        var url: String? = nil
        for _ in 0..<100 where url == nil {
            usleep(100_000)
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            url = text.split(separator: "\n").first { $0.hasPrefix("http://") }.map(String.init)
        }
        let page = try VaultProcess.start(
            ["-s", try #require(url) + "&decision=allow"], environment: ["PATH": "/usr/bin:/bin"],
            executable: "/usr/bin/curl"
        ).wait()
        let verifier = try #require(page.stdout.split(separator: " ").last.map(String.init))
        #expect(page.stdout.hasPrefix("Your verifier: "))
        p.send(verifier + "\n")
        let r = p.wait(timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try send(resource, header: try header("oob", "--url", resource)) == 200)
    }

    @Test("a denied authorization is an error and stores nothing")
    func denied() throws {
        try providerFile()
        let r = try add("no", browser: "oauth1-deny")
        #expect(r.status == 1)
        #expect(r.stderr.contains("the authorization was refused: denied"))
        #expect(try home.run("show", "no").status == 1)
    }

    @Test("a wrong consumer secret: the server rejects the signature and nothing is stored")
    func wrongSecret() throws {
        try providerFile()
        let r = try add("bad", browser: "oauth1-allow", secret: "wrong-secret")
        #expect(r.status == 1)
        #expect(r.stderr.contains("asking for a request token: the provider refused"), "\(r.stderr)")
        #expect(try home.run("show", "bad").status == 1)
    }

    @Test("RSA-SHA1 through the whole flow, with the private key as the consumer secret file")
    func rsaFlow() throws {
        try providerFile(method: "RSA-SHA1", client: "rsa-client")
        let pem = try String(contentsOfFile: Self.keyPath, encoding: .utf8)
        let r = try add("rsa", browser: "oauth1-allow", secret: pem)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try send(resource, header: try header("rsa", "--url", resource)) == 200)
    }
}
