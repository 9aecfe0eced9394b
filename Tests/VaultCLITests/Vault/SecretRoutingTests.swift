import Foundation
import Glibc
import Testing
import VaultHTTP
import VaultTestSupport

/// Where secrets go (docs/threat-model.md): a grant's endpoints and its
/// client come from one source together. A token file someone hands the
/// user can name endpoints of its own, but never gets the user's client,
/// code or verifier sent there.
@Suite("where secrets go: endpoints and client from one source")
struct SecretRoutingTests {
    @Test("an imported file's own token endpoint gets no client of the user's, no refresh and no re-authorization")
    func importedEndpoints() throws {
        let provider = try CountedProvider()
        let s = provider.oidc.settings
        // The endpoint a stranger's token file names: a proxy that counts
        // every request that reaches it.
        let stranger = try FixtureServer(script: "counting_proxy.py", arguments: [s.base])
        let strangerURL = "http://127.0.0.1:\(stranger.port)/api/oidc"
        // The user's own provider: their client, the real endpoints.
        let home = try Self.userHome(provider)
        let tokens = try provider.tokens()
        func file(_ config: [String: Any]?) throws -> String {
            var object: [String: Any] = [
                "access_token": tokens["access_token"]!, "refresh_token": tokens["refresh_token"]!,
                "expires_at": Int(Date().timeIntervalSince1970) - 10, "provider": "corp",
            ]
            if let config { object["provider_config"] = config }
            return String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
        }
        let attack = try file(["token_endpoint": strangerURL + "/token", "endpoints_source": "preset"])

        let imported = try home.run("import", "g", stdin: attack)
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stderr.contains("keeps the token_endpoint its file names"), "\(imported.stderr)")
        let shown = try JSONSerialization.jsonObject(with: Data(try home.run("show", "g", "--json").stdout.utf8))
        #expect((shown as? [String: Any])?["endpoints_source"] as? String == "imported file")
        // Neither a refresh nor an authorization again goes to the file's endpoint.
        let refreshed = try home.run("refresh", "g")
        #expect(refreshed.status != 0, "\(refreshed.stderr)")
        let again = try home.run("add", "g")
        #expect(again.status == 1, "\(again.stderr)")
        #expect(again.stderr.contains("is authorized again only at its provider's own endpoints"), "\(again.stderr)")
        #expect(again.stderr.contains("'vault remove g', then 'vault add corp g'"), "\(again.stderr)")
        // The user's client is not given to the file's endpoint either.
        let withClient = try home.run("import", "h", "--client-id", s.public_client, stdin: attack)
        #expect(withClient.status == 1, "\(withClient.stderr)")
        #expect(withClient.stderr.contains("vault sends a client you give only to a configured provider's endpoints"))
        #expect(try requests(stranger) == 0)

        // Positive control: the same tokens without endpoints of their own
        // take the user's provider whole, and refresh there.
        let honest = try home.run("import", "h", stdin: try file(nil))
        #expect(honest.status == 0, "\(honest.stderr)")
        let fine = try JSONSerialization.jsonObject(with: Data(try home.run("show", "h", "--json").stdout.utf8))
        #expect((fine as? [String: Any])?["endpoints_source"] as? String == "provider file")
        #expect(try home.run("refresh", "h").status == 0)
        #expect(try provider.refreshes() == 1)
        #expect(try requests(stranger) == 0)
    }

    @Test("a provider file naming another provider inside gives git none of that provider's tokens")
    func providerFileNamedOtherwise() throws {
        let home = Home()
        home.extra["VAULT_AGENT"] = "off"
        try home.initKeyfileVault()
        #expect(try home.run("import", "gh", stdin: Home.tokenJSON("gh-token-canary", provider: "github")).status == 0)
        let request = "protocol=https\nhost=git.corp-tools.example\n\n"
        // A company's file, reviewed for its endpoints, that says it is github.
        try home.providerFile(
            "corp",
            ["name": "github", "issuer": "https://id.corp-tools.example", "git_hosts": ["git.corp-tools.example"]])
        let asked = try home.run("git-credential", "get", stdin: request)
        #expect(!asked.stdout.contains("gh-token-canary"), "the GitHub token went to the file's host")
        let listed = try home.run("providers")
        #expect(listed.stderr.contains("says it defines provider 'github'"), "\(listed.stderr)")
        // Positive control: github's own host still gets it.
        let github = try home.run("git-credential", "get", stdin: "protocol=https\nhost=github.com\n\n")
        #expect(github.stdout.contains("password=gh-token-canary"), "\(github.stderr)")
    }

    /// Runs as another user (`nobody`): an OAuth endpoint of its own on
    /// loopback that records every request it gets (line, headers, body) in
    /// `argv[1]/requests`, says its port in `argv[1]/port`, and refuses
    /// every grant.
    static let stranger = #"""
        import http.server, json, os, sys
        shared = sys.argv[1]
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with open(os.path.join(shared, "requests"), "ab") as f:
                    f.write(self.requestline.encode() + b"\n" + bytes(self.headers) + body + b"\n")
                answer = json.dumps({"error": "invalid_grant"}).encode()
                self.send_response(400)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
            do_GET = do_POST
            def log_message(self, *args):
                pass
        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        with open(os.path.join(shared, "port.tmp"), "w") as f:
            f.write(str(server.server_port))
        os.rename(os.path.join(shared, "port.tmp"), os.path.join(shared, "port"))
        server.serve_forever()
        """#

    @Test(
        "a token file from another local user, naming that user's endpoint, never gets the person's client secret, code or verifier",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") && getuid() == 0))
    func strangerAsAnotherUser() throws {
        let provider = try CountedProvider()
        let s = provider.oidc.settings
        let shared = TemporaryDirectory()
        chmod(shared.path, 0o1777)
        let stranger = try VaultProcess.start(
            [
                "--reuid=nobody", "--regid=nogroup", "--clear-groups", "/usr/bin/python3", "-c", Self.stranger,
                shared.path,
            ],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/setpriv")
        defer {
            stranger.signal(SIGTERM)
            _ = stranger.wait(timeout: 10)
        }
        var port = ""
        for _ in 0..<200 where port.isEmpty {
            port = (try? String(contentsOfFile: shared.path + "/port", encoding: .utf8)) ?? ""
            if port.isEmpty { usleep(25_000) }
        }
        try #require(!port.isEmpty, "the other user's endpoint did not start")
        let endpoint = "http://127.0.0.1:\(port)/token"

        // The person's own provider: the real endpoints and their client,
        // with a secret.
        let secret = "client-secret-\(UUID().uuidString)-canary"
        let home = try Self.userHome(provider, secret: secret)
        // The files the other user hands over, written by that user: a
        // token response naming the person's provider and the stranger's
        // endpoint without a client, and a gcloud file whose own client
        // goes with its own endpoint.
        let plain = shared.path + "/token.json"
        let gcloud = shared.path + "/application_default_credentials.json"
        home.write(
            plain,
            #"{"access_token":"a","refresh_token":"stranger-refresh","expires_at":\#(Int(Date().timeIntervalSince1970) - 10),"provider":"corp","provider_config":{"token_endpoint":"\#(endpoint)"}}"#
        )
        home.write(
            gcloud,
            #"{"type":"authorized_user","client_id":"stranger-client","client_secret":"stranger-secret","refresh_token":"stranger-refresh","token_uri":"\#(endpoint)"}"#
        )
        giveToNobody(plain)
        giveToNobody(gcloud)

        let imported = try home.run("import", "g", stdin: try String(contentsOfFile: plain, encoding: .utf8))
        #expect(imported.status == 0, "\(imported.stderr)")
        _ = try home.run("refresh", "g")
        let again = try home.run("add", "g")
        #expect(again.status == 1, "\(again.stderr)")
        let withClient = try home.run(
            "import", "h", "--client-id", s.public_client, stdin: try String(contentsOfFile: plain, encoding: .utf8))
        #expect(withClient.status == 1, "\(withClient.stderr)")
        let fromGcloud = try home.run(
            "import", "adc", "--from", "gcloud", stdin: try String(contentsOfFile: gcloud, encoding: .utf8))
        #expect(fromGcloud.status == 0, "\(fromGcloud.stderr)")
        // The gcloud file's own client may refresh at its own endpoint:
        // that is the other user's grant, and it is refused there.
        _ = try home.run("refresh", "adc")
        let againGcloud = try home.run("add", "adc")
        #expect(againGcloud.status != 0, "\(againGcloud.stderr)")

        let seen = (try? String(contentsOfFile: shared.path + "/requests", encoding: .utf8)) ?? ""
        #expect(!seen.contains(secret), "the person's client secret reached the other user")
        #expect(!seen.contains(s.public_client), "the person's client reached the other user")
        #expect(
            !seen.contains("code_verifier") && !seen.contains("authorization_code"), "a code reached the other user")
        // Only the gcloud file's own refresh went there, with its own
        // client (which also shows the other user's endpoint was reached).
        let posts = seen.components(separatedBy: "POST ").count - 1
        #expect(posts == 1, "\(posts) requests reached the other user's endpoint")
        #expect(seen.contains("stranger-refresh"))
        #expect(try provider.refreshes() == 0)
    }

    /// A home whose provider `corp` is the person's own: the real endpoints
    /// and their client (with `secret`, when given).
    static func userHome(_ provider: CountedProvider, secret: String? = nil) throws -> Home {
        let s = provider.oidc.settings
        let home = Home()
        home.extra["VAULT_AGENT"] = "off"
        try home.initKeyfileVault()
        var fields: [String: Any] = [
            "token_endpoint": provider.proxied + "/token", "authorization_endpoint": provider.proxied + "/auth",
            "client_id": s.public_client, "flows": ["browser"],
        ]
        fields["client_secret"] = secret
        try home.providerFile("corp", fields)
        return home
    }

    /// Requests that reached a counting proxy.
    func requests(_ proxy: FixtureServer) throws -> Int {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(proxy.port)/__counts"))
        let doc = try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [String: Any]
        return doc?["requests"] as? Int ?? -1
    }
}
