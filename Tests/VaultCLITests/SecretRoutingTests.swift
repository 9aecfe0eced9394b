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
        let home = Home()
        home.extra["VAULT_AGENT"] = "off"
        try home.initKeyfileVault()
        // The user's own provider: their client, the real endpoints.
        try home.providerFile(
            "corp",
            [
                "token_endpoint": provider.proxied + "/token", "authorization_endpoint": provider.proxied + "/auth",
                "client_id": s.public_client, "flows": ["browser"],
            ])
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

    /// Requests that reached a counting proxy.
    func requests(_ proxy: FixtureServer) throws -> Int {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(proxy.port)/__counts"))
        let doc = try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [String: Any]
        return doc?["requests"] as? Int ?? -1
    }
}
