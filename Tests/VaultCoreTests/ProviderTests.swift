import Foundation
import Testing
import VaultTestSupport

@testable import VaultCore

@Suite("providers as data")
struct ProviderTests {
    static let configDir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("config/providers")

    @Test("the embedded presets are exactly config/providers/*.json (run Tools/gen-presets.py)")
    func embeddedMatchesFiles() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.configDir.path).filter {
            $0.hasSuffix(".json")
        }
        #expect(Set(names.map { String($0.dropLast(5)) }) == Set(Presets.files.map(\.name)))
        for (name, json) in Presets.files {
            let file = try String(contentsOf: Self.configDir.appendingPathComponent(name + ".json"), encoding: .utf8)
            #expect(file == json + "\n" || file == json, "\(name)")
        }
    }

    @Test("every preset parses, validates and names only real https endpoints")
    func presets() throws {
        let catalog = ProviderCatalog.load(configDirectory: "/nonexistent")
        #expect(catalog.problems.isEmpty)
        #expect(
            Set(catalog.providers.keys) == [
                "flickr", "github", "gitlab", "google", "linkedin", "microsoft", "trello", "twitter",
            ])
        for p in catalog.sorted {
            let r = p.resolved()
            for endpoint in [
                r.authorizationEndpoint, r.tokenEndpoint, r.deviceAuthorizationEndpoint, r.revocationEndpoint,
                r.userinfoEndpoint, r.issuer,
            ].compactMap({ $0 }) {
                #expect(endpoint.hasPrefix("https://"), "\(p.name): \(endpoint)")
                #expect(!endpoint.contains("127.0.0.1") && !endpoint.contains("localhost"))
            }
            #expect(r.tokenEndpoint != nil && r.authorizationEndpoint != nil, "\(p.name)")
        }
        #expect(try catalog.provider("google").authorizationParams == ["access_type": "offline", "prompt": "consent"])
        #expect(try catalog.provider("microsoft").scopes.contains("offline_access"))
        #expect(try catalog.provider("microsoft").publicClient)
        #expect(try catalog.provider("github").gitHosts == ["github.com"])
        #expect(try catalog.provider("linkedin").flows == [.browser, .paste])
    }

    @Test(
        "each preset's quirks, as data (the fixture-backed rows are in PresetQuirkTests)",
        arguments: [
            ("flickr", "authorization_params", "perms=read"),
            ("flickr", "account_claim", "username"),
            ("trello", "authorization_params", "expiration=never name=vault scope=read"),
            ("twitter", "account_claim", "screen_name"),
            ("twitter", "flows", "browser paste"),
            ("gitlab", "git", "gitlab.com oauth2"),
            ("linkedin", "token_endpoint_auth_method", "client_secret_post"),
            ("github", "git", "github.com x-access-token"),
            ("github", "errors_with_http_200", "true"),
            ("google", "token_endpoint_auth_method", "client_secret_post"),
            ("microsoft", "public_client", "true"),
            // Microsoft documents that a replaced refresh token is not
            // revoked; the others say nothing, which counts as revoking.
            ("microsoft", "refresh_token_reuse", "tolerated"),
            ("github", "refresh_token_reuse", "-"),
            ("gitlab", "refresh_token_reuse", "-"),
        ])
    func presetQuirk(_ name: String, _ field: String, _ value: String) throws {
        let p = try ProviderCatalog.load(configDirectory: "/nonexistent").provider(name)
        let actual: String
        switch field {
        case "authorization_params":
            actual = p.authorizationParams.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(
                separator: " ")
        case "account_claim": actual = p.accountClaim ?? "-"
        case "flows": actual = p.flows.map(\.rawValue).joined(separator: " ")
        case "git": actual = (p.gitHosts + [p.gitUsername ?? "oauth2"]).joined(separator: " ")
        case "token_endpoint_auth_method": actual = p.tokenEndpointAuthMethod
        case "errors_with_http_200": actual = "\(p.errorQuirks.errorsWithHTTP200)"
        case "refresh_token_reuse": actual = p.refreshTokenPolicy?.reuse?.rawValue ?? "-"
        default: actual = "\(p.publicClient)"
        }
        #expect(actual == value)
    }

    @Test("Microsoft's tenant is a variable with a default and an override")
    func variables() throws {
        let ms = try ProviderCatalog.load(configDirectory: "/nonexistent").provider("microsoft")
        #expect(ms.resolved().tokenEndpoint == "https://login.microsoftonline.com/common/oauth2/v2.0/token")
        #expect(
            ms.resolved(["tenant": "contoso.example"]).authorizationEndpoint
                == "https://login.microsoftonline.com/contoso.example/oauth2/v2.0/authorize")
    }

    func catalog(with files: [String: String]) throws -> (ProviderCatalog, TemporaryDirectory) {
        let dir = TemporaryDirectory()
        let providers = dir.path + "/providers"
        try FileManager.default.createDirectory(atPath: providers, withIntermediateDirectories: true)
        for (name, text) in files {
            _ = FileManager.default.createFile(atPath: providers + "/" + name, contents: Data(text.utf8))
        }
        return (ProviderCatalog.load(configDirectory: dir.path), dir)
    }

    @Test("a user file overrides a preset field by field, and adds new providers")
    func userFiles() throws {
        let (c, _) = try catalog(with: [
            "google.json": #"{"client_id": "my-id.apps.googleusercontent.com", "client_secret": "s"}"#,
            "corp.json": #"""
            {"name": "corp", "issuer": "https://id.corp.example", "scopes": ["openid"],
             "redirect_uri": "http://127.0.0.1:8765/callback", "flows": ["browser"]}
            """#,
        ])
        #expect(c.problems.isEmpty)
        let google = try c.provider("google")
        #expect(google.clientID == "my-id.apps.googleusercontent.com")
        #expect(google.tokenEndpoint == "https://oauth2.googleapis.com/token")
        #expect(google.source.hasSuffix("providers/google.json"))
        let corp = try c.provider("corp")
        #expect(corp.isOpenIDConnect && corp.redirectURI == "http://127.0.0.1:8765/callback")
    }

    @Test("a provider file defines the provider its file is named after, never another through its 'name'")
    func nameIsTheFileName() throws {
        let (c, _) = try catalog(with: [
            "corp.json": #"{"name": "github", "git_hosts": ["git.corp-tools.example"]}"#,
            "work.json": #"{"name": "work", "issuer": "https://id.work.example"}"#,
        ])
        let github = try c.provider("github")
        #expect(github.gitHosts == ["github.com"])
        #expect(c.providers["corp"] == nil)
        #expect(c.problems.count == 1)
        #expect(c.problems.first?.reason.contains("says it defines provider 'github'") == true)
        #expect(c.problems.first?.reason.contains("corp.json") == true)
        // A matching name, or none, is the file's own provider.
        #expect(c.files["work"] != nil)
        // The name's grammar is the file name's.
        let (bad, _) = try catalog(with: ["bad name.json": #"{"issuer": "https://a"}"#])
        #expect(bad.problems.first?.reason.contains("invalid name") == true)
    }

    @Test(
        "bad provider files are reported with their reason; the rest stay usable",
        arguments: [
            (#"{"name": "x", "token_endpiont": "https://a/t"}"#, "unknown field 'token_endpiont'"),
            (
                #"{"name": "x", "token_endpoint": "http://id.example/token", "flows": ["device"], "device_authorization_endpoint": "https://a/d"}"#,
                "plain http is refused for id.example"
            ),
            (
                #"{"name": "x", "issuer": "https://a", "redirect_uri": "http://example.com:80/cb"}"#,
                "redirect_uri must be"
            ),
            (#"{"name": "x", "issuer": "https://a", "redirect_uri": "http://127.0.0.1/cb"}"#, "redirect_uri must be"),
            (#"{"name": "x", "issuer": "https://a", "flows": ["telepathy"]}"#, "wrong value for 'flows"),
            (
                #"{"name": "x", "token_endpoint": "https://a/t"}"#,
                "needs 'authorization_endpoint' or 'device_authorization_endpoint' for a person to authorize"
            ),
            (
                #"{"name": "x", "token_endpoint": "https://a/t", "authorization_endpoint": "https://a/a", "flows": ["browser", "device"]}"#,
                "the device flow needs 'device_authorization_endpoint'"
            ),
            (
                #"{"name": "x", "token_endpoint": "https://a/t", "device_authorization_endpoint": "https://a/d", "flows": ["paste"]}"#,
                "the browser and paste flows need 'authorization_endpoint'"
            ),
            (
                #"{"name": "x", "issuer": "https://a", "token_endpoint_auth_method": "tls_client_auth"}"#,
                "token_endpoint_auth_method"
            ),
            (#"[1]"#, "not a JSON object"),
            (
                #"{"name": "x", "protocol": "oauth1", "token_endpoint": "https://a/t", "authorization_endpoint": "https://a/a"}"#,
                "OAuth 1.0a needs request_token_endpoint"
            ),
            (
                #"{"name": "x", "protocol": "oauth1", "request_token_endpoint": "https://a/r", "token_endpoint": "https://a/t", "authorization_endpoint": "https://a/a", "flows": ["device"]}"#,
                "OAuth 1.0a has no device flow"
            ),
            (#"{"name": "x", "protocol": "oauth3", "issuer": "https://a"}"#, "protocol must be oauth2 or oauth1"),
            (#"{"name": "bad name", "issuer": "https://a"}"#, "says it defines provider 'bad name'"),
            (
                #"{"name": "x", "issuer": "https://a", "refresh_token_policy": {"reuse": "sometimes"}}"#,
                "refresh_token_policy.reuse must be 'revokes' or 'tolerated'"
            ),
        ])
    func badFiles(text: String, reason: String) throws {
        let (c, _) = try catalog(with: ["x.json": text])
        #expect(c.problems.count == 1)
        #expect(c.problems.first?.reason.contains(reason) == true, "\(c.problems.first?.reason ?? "no problem")")
        #expect(c.providers["google"] != nil)
    }

    @Test(
        "a file without 'flows' gets those its endpoints allow, never client credentials",
        arguments: [
            (
                #"{"authorization_endpoint": "https://a/a", "token_endpoint": "https://a/t", "userinfo_endpoint": "https://a/u"}"#,
                "browser paste"
            ),
            (#"{"token_endpoint": "https://a/t", "device_authorization_endpoint": "https://a/d"}"#, "device"),
            (
                #"{"authorization_endpoint": "https://a/a", "token_endpoint": "https://a/t", "device_authorization_endpoint": "https://a/d"}"#,
                "browser device paste"
            ),
            (
                #"{"issuer": "https://a", "authorization_endpoint": "https://a/a", "token_endpoint": "https://a/t"}"#,
                "browser paste"
            ),
            // Endpoints from discovery: its document decides when vault adds.
            (#"{"issuer": "https://a"}"#, "browser device paste"),
            (#"{"issuer": "https://a", "token_endpoint": "https://a/t", "client_id": "c"}"#, "browser device paste"),
            (
                #"{"protocol": "oauth1", "request_token_endpoint": "https://a/r", "authorization_endpoint": "https://a/a", "token_endpoint": "https://a/t"}"#,
                "browser paste"
            ),
            // What a file lists stands.
            (
                #"{"authorization_endpoint": "https://a/a", "token_endpoint": "https://a/t", "device_authorization_endpoint": "https://a/d", "flows": ["device"]}"#,
                "device"
            ),
        ])
    func defaultFlows(text: String, flows: String) throws {
        let (c, _) = try catalog(with: ["x.json": text])
        #expect(c.problems.isEmpty, "\(c.problems.map(\.reason))")
        #expect(try c.provider("x").flows.map(\.rawValue).joined(separator: " ") == flows)
    }

    @Test("a provider described in code without flows gets those its endpoints allow")
    func defaultFlowsInCode() throws {
        let p = try Provider(
            name: "plain", authorizationEndpoint: "https://a/a", tokenEndpoint: "https://a/t",
            userinfoEndpoint: "https://a/u", clientID: "c")
        #expect(p.flows == [.browser, .paste])
    }

    static let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/providers.md")

    @Test("docs/providers.md's plain OAuth 2.0 example is a usable provider with the browser and paste flows")
    func plainOAuth2Example() throws {
        let text = try String(contentsOf: Self.docs, encoding: .utf8)
        let after = try #require(text.range(of: "A plain OAuth 2.0 provider"))
        let open = try #require(text.range(of: "```json\n", range: after.upperBound..<text.endIndex))
        let close = try #require(text.range(of: "```", range: open.upperBound..<text.endIndex))
        let example = String(text[open.upperBound..<close.lowerBound])
        #expect(!example.contains("\"flows\"") && !example.contains("issuer"))
        let (c, _) = try catalog(with: ["forge.json": example])
        #expect(c.problems.isEmpty, "\(c.problems.map(\.reason))")
        let forge = try c.provider("forge")
        #expect(forge.flows == [.browser, .paste])
        #expect(forge.userinfoEndpoint != nil && forge.deviceAuthorizationEndpoint == nil && !forge.isOpenIDConnect)
    }

    @Test("plain http endpoints are allowed for loopback hosts only")
    func loopbackHTTP() throws {
        let (c, _) = try catalog(with: [
            "local.json": #"{"issuer": "http://127.0.0.1:5556/api/oidc", "scopes": ["openid"]}"#
        ])
        #expect(c.problems.isEmpty)
        #expect(try c.provider("local").issuer == "http://127.0.0.1:5556/api/oidc")
    }
}
