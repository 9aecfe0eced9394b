import Foundation
import Testing
import VaultHTTP
import VaultTestSupport

/// `vault add --register` (RFC 7591) and `vault remove --revoke` (RFC 7592)
/// against glewlwyd with open client registration, with a scripted browser
/// standing in for the person.
@Suite("dynamic client registration against a real OpenID Connect provider", .serialized)
struct DynamicRegistrationTests {
    let oidc: OIDCProvider
    let home = Home()

    init() throws {
        oidc = try OIDCProvider.shared.get()
        try home.initKeyfileVault()
    }

    func add(_ args: [String], browser mode: String = "approve") throws -> ProcessResult {
        var env = home.environment
        env["BROWSER"] = oidc.browser(mode)
        // glewlwyd's registration endpoint answers 500 now and then while
        // other tests add plugin instances; vault then says "try again"
        // (75) and stores nothing, which is right. The flows these tests
        // are about start again, at most twice; any other failure counts.
        var r = try VaultProcess.run(["add"] + args, environment: env)
        for _ in 0..<2
        where r.status == 75 && r.stderr.contains("registering a client")
            && r.stderr.contains("answered HTTP 500")
        {
            r = try VaultProcess.run(["add"] + args, environment: env)
        }
        return r
    }

    func shown(_ name: String, reveal: Bool = false) throws -> [String: Any]? {
        let r = try home.run(["show", name, "--json"] + (reveal ? ["--reveal"] : []))
        guard r.status == 0 else { return nil }
        return try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
    }

    @Test("add --register registers a public client, authorizes with it, refreshes; remove --revoke deletes it")
    func registerAndDelete() throws {
        let issuer = try oidc.registrationIssuer("reg")
        let r = try add(["corp", "--issuer", issuer, "--register"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("vault: registered client '"), "\(r.stderr)")
        #expect(r.stderr.contains("vault: added 'corp' (corp, \(oidc.settings.email)"), "\(r.stderr)")
        let g = try #require(try shown("corp"))
        let registration = try #require(g["client_registration"] as? [String: Any])
        #expect(registration["registration_endpoint"] as? String == issuer + "/register")
        #expect(registration["deletable"] as? Bool == true)
        #expect(registration["registration_access_token"] == nil, "the token is shown only with --reveal")
        let revealed = try #require(try shown("corp", reveal: true)?["client_registration"] as? [String: Any])
        let token = try #require(revealed["registration_access_token"] as? String)
        let uri = try #require(revealed["registration_client_uri"] as? String)
        let clientID = try #require(uri.split(separator: "/").last.map(String.init))
        #expect(!r.stderr.contains(token))
        // glewlwyd's own view: a public client with exactly vault's loopback redirect.
        let client = try #require(try oidc.client(clientID))
        #expect(client["confidential"] as? Bool == false)
        let redirects = try #require(client["redirect_uri"] as? [String])
        #expect(redirects.count == 1 && redirects[0].hasPrefix("http://127.0.0.1:"))
        #expect(try !home.run("show", "corp").stdout.contains(token))
        // The grant refreshes with the registered client.
        let refreshed = try home.run("refresh", "corp")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        // glewlwyd refuses a public client's revocation (401): deleting the client ends the grant.
        let removed = try home.run("remove", "corp", "--revoke")
        #expect(removed.status == 0, "\(removed.stderr)")
        #expect(removed.stderr.contains("deleted the client registration and removed 'corp'"), "\(removed.stderr)")
        #expect(!removed.stderr.contains(token))
        #expect(try oidc.client(clientID)?["enabled"] as? Bool != true)
        let read = try CurlTransport().send(
            HTTPRequest(method: "GET", url: uri, headers: [("Authorization", "Bearer \(token)")]))
        #expect(read.status == 401 || read.status == 404, "the registration still answers \(read.status)")
        #expect(try home.run("show", "corp").status == 1)
    }

    @Test("add --register --dpop: a registered client whose tokens are bound to a DPoP key, usable with vault header")
    func registerBound() throws {
        let issuer = try oidc.featureIssuer("regdpop", ["registration", "dpop"])
        let r = try add(["bound", "--issuer", issuer, "--register", "--dpop"])
        #expect(r.status == 0, "\(r.stderr)")
        let g = try #require(try shown("bound"))
        #expect(g["token_type"] as? String == "DPoP" && g["dpop_alg"] as? String == "ES256")
        #expect(g["client_registration"] != nil)
        // Its error names the cause (glewlwyd's answer); it holds no token.
        let refreshed = try home.run("refresh", "bound")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        let header = try home.run("header", "bound", "--url", issuer + "/userinfo")
        // Compared aside, so that a failure prints no token.
        let accepted = try CurlAnswer.get(issuer + "/userinfo", headers: header.stdout).status == 200
        #expect(accepted)
        #expect(try home.run("remove", "bound", "--revoke").status == 0)
    }

    @Test("a provider whose discovery names no registration endpoint gives a clear error, and nothing is stored")
    func noRegistrationEndpoint() throws {
        let r = try add(["plain", "--issuer", oidc.settings.issuer, "--register"])
        #expect(r.status == 1)
        #expect(
            r.stderr.contains(
                "vault: error: provider 'plain' does not offer dynamic client registration (RFC 7591): "
                    + "its discovery document names no registration_endpoint"), "\(r.stderr)")
        #expect(try home.run("show", "plain").status == 1)
    }

    @Test("--register with a client of one's own, or for an existing grant, is a usage error")
    func usage() throws {
        let r = try add(["x", "--issuer", oidc.settings.issuer, "--register", "--client-id", "abc"])
        #expect(r.status == 64, "\(r.stderr)")
        let device = try add(["x", "--issuer", oidc.settings.issuer, "--register", "--flow", "device"])
        #expect(device.status == 64, "\(device.stderr)")
    }

    /// The client id in `vault: registered client 'ID' ...`.
    func registeredID(_ stderr: String) -> String? {
        guard let start = stderr.firstRange(of: "registered client '")?.upperBound,
            let end = stderr[start...].firstIndex(of: "'")
        else { return nil }
        return String(stderr[start..<end])
    }

    @Test("the person denies after --register: the client is deleted at glewlwyd, nothing stored")
    func deniedDeletes() throws {
        let issuer = try oidc.registrationIssuer("reg")
        let r = try add(["denied", "--issuer", issuer, "--register"], browser: "deny")
        #expect(r.status == 1, "\(r.stderr)")
        let clientID = try #require(registeredID(r.stderr), "\(r.stderr)")
        #expect(r.stderr.contains("vault: deleted the client '\(clientID)' registered for it"), "\(r.stderr)")
        #expect(try oidc.client(clientID)?["enabled"] as? Bool != true, "the client is left at glewlwyd")
        #expect(try home.run("show", "denied").status == 1)
    }

    @Test("remove --revoke of a client already deleted at glewlwyd (401, empty body): gone, the grant removed")
    func alreadyDeleted() throws {
        let issuer = try oidc.registrationIssuer("reg")
        let r = try add(["early", "--issuer", issuer, "--register"])
        #expect(r.status == 0, "\(r.stderr)")
        let revealed = try #require(try shown("early", reveal: true)?["client_registration"] as? [String: Any])
        let token = try #require(revealed["registration_access_token"] as? String)
        let uri = try #require(revealed["registration_client_uri"] as? String)
        let deleted = try CurlTransport().send(
            HTTPRequest(method: "DELETE", url: uri, headers: [("Authorization", "Bearer \(token)")]))
        try #require(deleted.status == 200 || deleted.status == 204, "glewlwyd answered \(deleted.status)")
        let removed = try home.run("remove", "early", "--revoke", "--json")
        #expect(removed.status == 0, "\(removed.stderr)")
        let doc = try JSONSerialization.jsonObject(with: Data(removed.stdout.utf8)) as? [String: Any]
        #expect(doc?["client_registration"] as? String == "gone", "\(removed.stdout)")
        #expect(!removed.stderr.contains(token))
        #expect(try home.run("show", "early").status == 1)
    }
}
