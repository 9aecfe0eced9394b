import Foundation
import VaultCrypto
import VaultHTTP
import VaultTestSupport

/// The scriptable provider (Tools/testservers/provider_fixture.py) playing
/// one provider, and a vault home whose provider file points that
/// provider's preset at it: endpoints and client only, so every quirk the
/// preset encodes (error codes, client authentication, answers in HTTP 200)
/// is the preset's own. The plain RFC persona is a provider found by
/// discovery instead.
final class ProviderScene {
    /// `rfc`, `github`, `google` or `microsoft`.
    let persona: String
    /// The provider's name in vault: the persona's preset, `plain` (found by
    /// discovery) for the RFC persona, or a preset the RFC persona plays.
    let provider: String
    let server: FixtureServer
    let home = Home()
    var base: String { server.base }

    /// The fixture's client of each persona.
    static let clientIDs = [
        "rfc": "vault-test", "github": "vault-test", "google": "vault-test.apps.googleusercontent.com",
        "microsoft": "00000000-0000-0000-0000-00000000vault",
    ]

    init(
        _ persona: String, as preset: String? = nil, settings: [String: Any] = [:], providerFields: [String: Any] = [:]
    ) throws {
        self.persona = persona
        provider = preset ?? (persona == "rfc" ? "plain" : persona)
        server = try FixtureServer(script: "provider_fixture.py", arguments: [persona])
        try home.initKeyfileVault()
        if !settings.isEmpty { _ = try post("/__settings", settings) }
        try writeProviderFile(providerFields)
        home.write(home.path + "/client-secret", "fixture-client-secret\n")
        let fixture = FixtureServer.root.appendingPathComponent("Tools/testservers/provider_fixture.py").path
        home.extra["BROWSER"] = "/usr/bin/python3 \(fixture) browse"
    }

    /// $XDG_CONFIG_HOME/vault/providers/NAME.json: where the fixture lives.
    func writeProviderFile(_ extra: [String: Any]) throws {
        var fields: [String: Any] = ["client_id": ProviderScene.clientIDs[persona]!]
        switch persona {
        case "github":
            fields["authorization_endpoint"] = base + "/login/oauth/authorize"
            fields["token_endpoint"] = base + "/login/oauth/access_token"
            fields["device_authorization_endpoint"] = base + "/login/device/code"
            fields["userinfo_endpoint"] = base + "/user"
        case "google":
            fields["issuer"] = base
            fields["authorization_endpoint"] = base + "/o/oauth2/v2/authorize"
            fields["token_endpoint"] = base + "/token"
            fields["device_authorization_endpoint"] = base + "/device/code"
            fields["revocation_endpoint"] = base + "/revoke"
            fields["userinfo_endpoint"] = base + "/v1/userinfo"
        case "microsoft":
            fields["issuer"] = base + "/{tenantid}/v2.0"
            fields["authorization_endpoint"] = base + "/{tenant}/oauth2/v2.0/authorize"
            fields["token_endpoint"] = base + "/{tenant}/oauth2/v2.0/token"
            fields["device_authorization_endpoint"] = base + "/{tenant}/oauth2/v2.0/devicecode"
            fields["userinfo_endpoint"] = base + "/oidc/userinfo"
        default:
            fields["issuer"] = base  // everything else by discovery, unless a preset names them
            if provider != "plain" {
                fields["authorization_endpoint"] = base + "/authorize"
                fields["token_endpoint"] = base + "/token"
                fields["revocation_endpoint"] = base + "/revoke"
                fields["userinfo_endpoint"] = base + "/userinfo"
                if provider == "gitlab" { fields["device_authorization_endpoint"] = base + "/device" }
            }
        }
        for (k, v) in extra { fields[k] = v }
        let dir = home.path + "/config/vault/providers"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let data = try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        _ = FileManager.default.createFile(atPath: dir + "/\(provider).json", contents: data)
    }

    /// A control request to the fixture; its JSON answer.
    @discardableResult
    func post(_ path: String, _ object: Any) throws -> Any {
        let body = try SecureBytes(copying: [UInt8](try JSONSerialization.data(withJSONObject: object)))
        let r = try CurlTransport().send(HTTPRequest(method: "POST", url: base + path, body: body))
        return try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) })
    }

    /// Queues canned answers (see the fixture's documentation).
    func script(_ answers: [String: Any]) throws { try post("/__script", answers) }

    /// The requests the fixture saw (secrets never logged).
    func log() throws -> [[String: Any]] {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: base + "/__log"))
        return try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [[String: Any]] ?? []
    }

    /// Requests to one endpoint (`token`, `device`, `authorize`, ...).
    func log(_ endpoint: String, grantType: String? = nil) throws -> [[String: Any]] {
        try log().filter {
            $0["endpoint"] as? String == endpoint && (grantType == nil || $0["grant_type"] as? String == grantType)
        }
    }

    /// The flags `vault add` needs for this persona's client.
    var clientFlags: [String] {
        persona == "microsoft" ? [] : ["--client-secret-file", home.path + "/client-secret"]
    }

    /// `vault add PROVIDER NAME --flow FLOW` with the scripted browser.
    func add(_ name: String = "work", flow: String = "browser", _ extra: [String] = []) throws -> ProcessResult {
        try VaultProcess.run(
            ["add", provider, name, "--flow", flow, "--timeout", "60"] + clientFlags + extra,
            environment: home.environment)
    }

    /// `vault show NAME --json` (with `--reveal` when asked), parsed.
    func shown(_ name: String = "work", reveal: Bool = false) throws -> [String: Any]? {
        let r = try VaultProcess.run(
            ["show", name, "--json"] + (reveal ? ["--reveal"] : []), environment: home.environment)
        guard r.status == 0 else { return nil }
        return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
    }

    /// The stored grant as `show --json --reveal` prints it, for "nothing changed" checks.
    func snapshot(_ name: String = "work") throws -> String {
        try home.run("show", name, "--json", "--reveal").stdout
    }
}

/// Bytes a terminal would act on: C0 and C1 controls (but newline), DEL,
/// and the bidirectional overrides and isolates.
func terminalControls(_ text: String) -> [Unicode.Scalar] {
    text.unicodeScalars.filter {
        ($0.value < 0x20 && $0 != "\n") || (0x7f...0x9f).contains($0.value) || (0x202a...0x202e).contains($0.value)
            || (0x2066...0x2069).contains($0.value) || $0.value == 0x200e || $0.value == 0x200f
            || $0.value == 0x061c
    }
}
