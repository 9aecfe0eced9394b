import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

/// Grants made from a real code flow at the shared provider, imported into
/// a test home, and revocation at that provider.
enum ProviderGrants {
    /// Imports tokens of the confidential client (or, with `publicClient`,
    /// of the public one, whose tokens the test servers' introspection
    /// calls inactive) as NAME (without a userinfo endpoint when `userinfo`
    /// is false); returns the token response.
    @discardableResult
    static func importConfidential(
        _ name: String, into home: Home, account: String = "ada", expiresIn: Int = 3600, idToken: Bool = false,
        userinfo: Bool = true, scopes: [String] = [], publicClient: Bool = false
    ) throws -> [String: Any] {
        let oidc = try OIDCProvider.shared.get()
        let s = oidc.settings
        let client = publicClient ? s.public_client : s.confidential_client
        let r = try VaultProcess.start(
            [
                // The secret comes from the settings file, never argv.
                "\(FixtureServer.root.path)/Tools/testservers/glewlwyd.py", "tokens", oidc.directory, client,
            ],
            environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/python3"
        ).wait()
        try #require(r.status == 0, "\(r.stderr)")
        let tokens = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        var grant: [String: Any] = [
            "access_token": tokens["access_token"]!, "refresh_token": tokens["refresh_token"]!,
            "expires_at": Int(Date().timeIntervalSince1970) + expiresIn, "provider": "local", "account": account,
            "provider_config": [
                "token_endpoint": s.issuer + "/token", "userinfo_endpoint": s.issuer + "/userinfo",
                "revocation_endpoint": s.issuer + "/revoke", "client_id": client,
                "client_secret": s.client_secret,
                // glewlwyd answers a revoked refresh token with a bare 400.
                "empty_400_is_invalid_grant": true,
            ],
        ]
        if !scopes.isEmpty { grant["scope"] = scopes.joined(separator: " ") }
        if publicClient {
            var config = grant["provider_config"] as! [String: Any]
            config["client_secret"] = nil
            grant["provider_config"] = config
        }
        if !userinfo {
            var config = grant["provider_config"] as! [String: Any]
            config["userinfo_endpoint"] = nil
            grant["provider_config"] = config
        }
        if idToken {
            grant["id_token"] = tokens["id_token"]!
            var config = grant["provider_config"] as! [String: Any]
            config["issuer"] = s.issuer
            grant["provider_config"] = config
        }
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let imported = try home.run("import", name, "--replace", stdin: json)
        try #require(imported.status == 0, "\(imported.stderr)")
        return tokens
    }

    /// Revokes a token at the provider as the confidential client.
    static func revoke(_ token: String, hint: String) throws {
        let s = try OIDCProvider.shared.get().settings
        let body = try SecureBytes(copying: Array("token=\(token)&token_type_hint=\(hint)".utf8))
        let basic = Data("\(s.confidential_client):\(s.client_secret)".utf8).base64EncodedString()
        let r = try CurlTransport().send(
            HTTPRequest(
                method: "POST", url: s.issuer + "/revoke",
                headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", "Basic \(basic)")],
                body: body))
        try #require(r.status == 200)
    }
}
