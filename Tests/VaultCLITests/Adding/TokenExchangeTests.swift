import Foundation
import Testing
import VaultHTTP
import VaultTestSupport

/// `vault token --exchange` (RFC 8693) against a token endpoint that checks
/// exchanges as the RFC says (Tools/testservers/token_exchange_server.py):
/// client authentication, a subject token it issued, the token types, the
/// audience and scope.
@Suite("narrowed tokens: token exchange against a real token endpoint", .serialized)
struct TokenExchangeTests {
    struct Settings: Decodable {
        let port: Int
        let token_endpoint: String
        let client_id: String
        let client_secret: String
        let other_client_id: String
        let other_client_secret: String
    }

    let server: FixtureServer
    let s: Settings
    let home = Home()

    init() throws {
        server = try FixtureServer(script: "token_exchange_server.py")
        s = try JSONDecoder().decode(Settings.self, from: Data(server.firstLine.utf8))
        try home.initKeyfileVault()
    }

    func json(_ method: String, _ path: String) throws -> Any {
        let r = try CurlTransport().send(HTTPRequest(method: method, url: "http://127.0.0.1:\(s.port)" + path))
        return try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) })
    }

    /// Stores a grant the server minted under `name`, for `client`; an
    /// expired access token when `expired`.
    func importGrant(
        _ name: String, client: String? = nil, secret: String? = nil, expired: Bool = false, into: Home? = nil
    ) throws {
        let tokens = try #require(try json("POST", "/__issue") as? [String: Any])
        let grant: [String: Any] = [
            "access_token": tokens["access_token"]!, "refresh_token": tokens["refresh_token"]!,
            "expires_at": Int(Date().timeIntervalSince1970) + (expired ? -10 : 3600), "scope": "read write",
            "provider": "xchg",
            "provider_config": [
                "token_endpoint": s.token_endpoint, "client_id": client ?? s.client_id,
                "client_secret": secret ?? s.client_secret,
            ],
        ]
        let text = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let r = try (into ?? home).run("import", name, stdin: text)
        try #require(r.status == 0, "\(r.stderr)")
    }

    func introspect(_ token: String) throws -> [String: Any] {
        let query = token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""
        return try #require(try json("GET", "/__introspect?token=" + query) as? [String: Any])
    }

    /// The outcomes of the token requests of `grantType` the server saw.
    func log(_ grantType: String) throws -> [String] {
        let entries = try #require(try json("GET", "/__log") as? [[String: Any]])
        return entries.filter { $0["grant_type"] as? String == grantType }.compactMap { $0["outcome"] as? String }
    }

    static let exchange = "urn:ietf:params:oauth:grant-type:token-exchange"

    @Test("--exchange: a narrower token for the audience, cached, the grant's own token untouched")
    func exchanged() throws {
        try importGrant("x")
        let before = try home.run("show", "x", "--json", "--reveal").stdout
        let r = try home.run("token", "x", "--exchange", "--audience", "billing", "--scope", "read")
        try #require(r.status == 0, "\(r.stderr)")
        let token = r.stdout.trimmingCharacters(in: .newlines)
        let t = try introspect(token)
        #expect(t["active"] as? Bool == true && t["exchanged"] as? Bool == true)
        #expect(t["aud"] as? String == "billing" && t["scope"] as? String == "read")
        #expect(try log(Self.exchange) == ["ok"])

        // Asked again: the cached token, no second exchange.
        let again = try home.run("token", "x", "--exchange", "--audience", "billing", "--scope", "read")
        #expect(again.stdout.trimmingCharacters(in: .newlines) == token, "\(again.stderr)")
        #expect(try log(Self.exchange) == ["ok"])
        // Another target is another exchange; the header carries it.
        let header = try home.run("header", "x", "--exchange", "--audience", "reports")
        #expect(header.status == 0, "\(header.stderr)")
        let reports = String(header.stdout.dropFirst("Authorization: Bearer ".count)).trimmingCharacters(in: .newlines)
        #expect(try introspect(reports)["aud"] as? String == "reports" && reports != token)
        #expect(try log(Self.exchange) == ["ok", "ok"])
        let shown = try #require(
            try JSONSerialization.jsonObject(with: Data(try home.run("show", "x", "--json", "--reveal").stdout.utf8))
                as? [String: Any])
        let was = try #require(try JSONSerialization.jsonObject(with: Data(before.utf8)) as? [String: Any])
        #expect(shown["access_token"] as? String == was["access_token"] as? String)
        #expect(shown["refresh_token"] as? String == was["refresh_token"] as? String)
        // show says what the grant's narrowed tokens are for; their tokens only with --reveal.
        let narrowed = try #require(shown["narrowed_tokens"] as? [[String: Any]])
        #expect(Set(narrowed.compactMap { $0["audience"] as? String }) == ["billing", "reports"])
        #expect(narrowed.allSatisfy { $0["exchange"] as? Bool == true && $0["access_token"] != nil })
        let plain = try #require(
            try JSONSerialization.jsonObject(with: Data(try home.run("show", "x", "--json").stdout.utf8))
                as? [String: Any])
        let listed = try #require(plain["narrowed_tokens"] as? [[String: Any]])
        #expect(listed.count == 2 && listed.allSatisfy { $0["access_token"] == nil })
        let text = try home.run("show", "x").stdout
        #expect(text.contains("narrowed token:") && text.contains("audience billing") && !text.contains(token))
    }

    @Test("providers --json says whether a provider offers token exchange, from the grant types it lists")
    func providersSayExchange() throws {
        try home.providerFile(
            "xchg",
            [
                "token_endpoint": s.token_endpoint, "client_id": s.client_id, "flows": ["client-credentials"],
                "grant_types_supported": ["refresh_token", Self.exchange],
            ])
        try home.providerFile(
            "plainx", ["token_endpoint": s.token_endpoint, "client_id": s.client_id, "flows": ["client-credentials"]])
        let r = try home.run("providers", "--json")
        let all = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
        #expect(all.first { $0["name"] as? String == "xchg" }?["token_exchange"] as? Bool == true)
        #expect(all.first { $0["name"] as? String == "plainx" }?["token_exchange"] == nil)
    }

    @Test("--exchange with an expired grant: refreshed first, then the new access token is exchanged")
    func refreshedFirst() throws {
        try importGrant("old", expired: true)
        let r = try home.run("token", "old", "--exchange", "--audience", "billing")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try log("refresh_token") == ["ok"])
        #expect(try log(Self.exchange) == ["ok"])
        #expect(try introspect(r.stdout.trimmingCharacters(in: .newlines))["scope"] as? String == "read write")
        let shown = try JSONSerialization.jsonObject(with: Data(try home.run("show", "old", "--json").stdout.utf8))
        #expect((shown as? [String: Any])?["state"] as? String == "fresh")
    }

    @Test(
        "a refused exchange (invalid_target, invalid_scope, unauthorized_client): exit 1, its error, nothing changed")
    func refused() throws {
        try importGrant("x")
        try importGrant("other", client: s.other_client_id, secret: s.other_client_secret)
        let rows: [(grant: String, args: [String], error: String)] = [
            ("x", ["--audience", "payroll"], "invalid_target"),
            ("x", ["--audience", "billing", "--scope", "admin"], "invalid_scope"),
            ("other", ["--audience", "billing"], "unauthorized_client"),
        ]
        for row in rows {
            let before = try home.run("show", row.grant, "--json", "--reveal").stdout
            let r = try home.run(["token", row.grant, "--exchange"] + row.args)
            #expect(r.status == 1, "\(row.error): \(r.stderr)")
            #expect(r.stderr.contains(row.error) && r.stdout.isEmpty, "\(r.stderr)")
            #expect(try home.run("show", row.grant, "--json", "--reveal").stdout == before, "\(row.error)")
        }
        #expect(try log(Self.exchange) == ["invalid_target", "invalid_scope", "unauthorized_client"])
        // An exchange names what it is for: a usage error before any request.
        let r = try home.run("token", "x", "--exchange")
        #expect(r.status == 64 && r.stderr.contains("audience"), "\(r.stderr)")
    }

    @Test("through the agent: the agent, which alone can open the vault, exchanges and caches")
    func throughAgent() throws {
        let agent = AgentHome()
        try agent.home.initPassphraseVault("agent passphrase")
        try importGrant("x", into: agent.home)
        _ = try #require(try agent.waitForAgent())
        agent.home.extra["VAULT_PASSPHRASE_FILE"] = nil
        let r = try agent.home.run("token", "x", "--exchange", "--audience", "billing", "--scope", "read")
        try #require(r.status == 0, "\(r.stderr)")
        let token = r.stdout.trimmingCharacters(in: .newlines)
        #expect(try introspect(token)["aud"] as? String == "billing")
        let env = try agent.home.run(
            "env", "x", "--exchange", "--audience", "billing", "--scope", "read", "--format", "json")
        let vars = try JSONSerialization.jsonObject(with: Data(env.stdout.utf8)) as? [String: String]
        #expect(vars?["X_ACCESS_TOKEN"] == token && vars?["X_SCOPES"] == "read", "\(env.stderr)")
        #expect(try log(Self.exchange) == ["ok"])
        // The agent logged what it handed out.
        let audit = try agent.home.run("log", "x")
        #expect(audit.status == 0 && audit.stdout.contains("x"), "\(audit.stderr)")
        // A refused target comes back from the agent as the provider said it.
        let refused = try agent.home.run("token", "x", "--exchange", "--audience", "payroll")
        #expect(refused.status == 1 && refused.stderr.contains("invalid_target"), "\(refused.stderr)")
    }
}
