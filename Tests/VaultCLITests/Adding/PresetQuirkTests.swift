import Foundation
import Testing
import VaultTestSupport

/// Each quirk a preset encodes (docs/providers.md), exercised through the
/// built binary against the fixture playing that provider. The provider
/// file only moves the preset's endpoints to the fixture and names the
/// client; the quirks are the preset's.
@Suite("provider presets' quirks against the provider they describe")
struct PresetQuirkTests {
    enum Quirk: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case githubAcceptJSON = "GitHub: every token request asks for JSON"
        case githubCommaScopes = "GitHub: scopes answered with commas are stored one by one"
        case githubClassicNoRefresh = "GitHub: a classic OAuth app's token has no refresh token and no expiry"
        case githubAccountLogin = "GitHub: the account is the user's login"
        case githubGit = "GitHub: a grant serves git for github.com, as user x-access-token"
        case githubAppRotation = "GitHub App: expiring tokens, rotating refresh tokens, refresh_token_expires_in"
        case githubAppForm = "GitHub App: a form-encoded token response keeps refresh_token_expires_in"
        case googleOffline = "Google: access_type=offline and prompt=consent bring a refresh token"
        case googleNonRotating = "Google: refresh answers without a refresh token keep the old one"
        case googleTestingExpiry = "Google: a refresh token that expired (apps in testing, 7 days) kills the grant"
        case microsoftOfflineAccess = "Microsoft: offline_access brings a refresh token"
        case microsoftRotation = "Microsoft: refresh tokens rotate; the new one is stored before use"
        case microsoftTenantIssuer = "Microsoft: an ID token from the user's own tenant matches {tenantid}"
        case microsoftRefreshExpiry = "Microsoft: refresh_token_expires_in and ext_expires_in are kept"
        case plainRevocation = "RFC 7009: remove --revoke posts the refresh token with its hint"
        case gitlabGit = "GitLab: a grant serves git for gitlab.com, as user oauth2"
        case linkedinPost = "LinkedIn: no device flow; the browser flow posts the client secret"

        var testDescription: String { rawValue }
        var persona: String {
            switch self {
            case .githubAcceptJSON, .githubCommaScopes, .githubClassicNoRefresh, .githubAccountLogin, .githubGit,
                .githubAppRotation, .githubAppForm:
                "github"
            case .googleOffline, .googleNonRotating, .googleTestingExpiry: "google"
            case .microsoftOfflineAccess, .microsoftRotation, .microsoftTenantIssuer, .microsoftRefreshExpiry:
                "microsoft"
            case .plainRevocation, .gitlabGit, .linkedinPost: "rfc"
            }
        }
        /// The preset the RFC persona plays, if any.
        var preset: String? {
            switch self {
            case .gitlabGit: "gitlab"
            case .linkedinPost: "linkedin"
            default: nil
            }
        }
    }

    @Test(arguments: Quirk.allCases)
    func quirk(_ quirk: Quirk) throws {
        var settings: [String: Any] = [:]
        if [.githubAppRotation, .githubAppForm].contains(quirk) { settings["github_app"] = true }
        if quirk == .microsoftRefreshExpiry { settings["refresh_token_expires_in"] = 86400 }
        let scene = try ProviderScene(quirk.persona, as: quirk.preset, settings: settings)
        if quirk == .githubAppForm {
            try scene.script(["token": [["issue": ["encoding": "form"], "when": "authorization_code"]]])
        }
        let scopes = quirk == .githubCommaScopes ? ["--scope", "repo", "--scope", "gist"] : []
        let added = try scene.add("work", flow: "browser", scopes)
        try #require(added.status == 0, "\(added.stderr)")
        let grant = try #require(try scene.shown(reveal: true))
        let now = Date().timeIntervalSince1970
        switch quirk {
        case .githubAcceptJSON:
            let token = try scene.log("token")
            #expect(!token.isEmpty && token.allSatisfy { $0["accept"] as? String == "application/json" })
        case .githubCommaScopes:
            #expect(grant["scopes"] as? [String] == ["repo", "gist"])
        case .githubClassicNoRefresh:
            #expect(grant["has_refresh_token"] as? Bool == false && grant["expires_at"] == nil)
            #expect(grant["state"] as? String == "fresh")
            #expect(added.stderr.contains("issued no refresh token"))
        case .githubAccountLogin:
            #expect(grant["account"] as? String == "octocat")
        case .githubGit, .gitlabGit:
            let host = quirk == .githubGit ? "github.com" : "gitlab.com"
            let r = try scene.home.run("git-credential", "get", stdin: "protocol=https\nhost=\(host)\n\n")
            #expect(r.status == 0, "\(r.stderr)")
            let user = quirk == .githubGit ? "x-access-token" : "oauth2"
            let token = try #require(grant["access_token"] as? String)
            let answered = r.stdout.hasPrefix("username=\(user)\npassword=\(token)\n")
            #expect(answered, "git was not given the user name \(user) and the grant's token")
        case .linkedinPost:
            let device = try scene.add("tv", flow: "device")
            #expect(device.status == 1 && device.stderr.contains("does not offer the device flow"), "\(device.stderr)")
            #expect(try scene.log("token").map { $0["auth"] as? String } == ["client_secret_post"])
            #expect(grant["account"] as? String == "ada@example.com")
        case .githubAppRotation, .githubAppForm:
            let expiry = try #require(grant["refresh_token_expires_at"] as? Double)
            #expect(abs(expiry - now - 15_897_600) < 120)
            #expect(abs((grant["expires_at"] as? Double ?? 0) - now - 28800) < 120)
            let response = try #require(grant["token_response"] as? [String: Any])
            // As sent: a number in JSON, text in a form-encoded answer.
            let kept = response["refresh_token_expires_in"]
            #expect(kept as? Double == 15_897_600 || kept as? String == "15897600")
            try refreshTwice(scene, rotates: true)
            let listed = try scene.home.run("list")
            #expect(listed.stdout.contains("REFRESH EXPIRES"), "\(listed.stdout)")
        case .googleOffline:
            let authorize = try #require(try scene.log("authorize").first?["form"] as? [String: String])
            #expect(authorize["access_type"] == "offline" && authorize["prompt"] == "consent")
            #expect(grant["has_refresh_token"] as? Bool == true)
        case .googleNonRotating:
            try refreshTwice(scene, rotates: false)
        case .googleTestingExpiry:
            try scene.script([
                "token": [
                    [
                        "error": "invalid_grant", "description": "Token has been expired or revoked.",
                        "when": "refresh_token",
                    ]
                ]
            ])
            let r = try scene.home.run("token", "work", "--force-refresh")
            #expect(r.status == 2 && r.stderr.contains("Token has been expired or revoked"), "\(r.stderr)")
            #expect(try scene.shown()?["state"] as? String == "dead")
        case .microsoftOfflineAccess:
            let authorize = try #require(try scene.log("authorize").first?["form"] as? [String: String])
            #expect(authorize["scope"]?.split(separator: " ").contains("offline_access") == true)
            #expect(grant["has_refresh_token"] as? Bool == true)
        case .microsoftRotation:
            try refreshTwice(scene, rotates: true)
        case .microsoftTenantIssuer:
            #expect(grant["account"] as? String == "ada@example.com" && grant["has_id_token"] as? Bool == true)
        case .microsoftRefreshExpiry:
            #expect(try scene.home.run("refresh", "work").status == 0)
            let after = try #require(try scene.shown())
            let expiry = try #require(after["refresh_token_expires_at"] as? Double)
            #expect(abs(expiry - now - 86400) < 120)
            let response = try #require(after["token_response"] as? [String: Any])
            #expect(response["ext_expires_in"] as? Double == 3600 && response["access_token"] == nil)
            let shown = try scene.home.run("show", "work")
            #expect(shown.stdout.contains("refresh until:"), "\(shown.stdout)")
        case .plainRevocation:
            let r = try scene.home.run("remove", "work", "--revoke")
            #expect(r.status == 0, "\(r.stderr)")
            let revoke = try #require(try scene.log("revoke").first?["form"] as? [String: String])
            #expect(revoke["token_type_hint"] == "refresh_token" && revoke["token"] == "(sent)")
        }
    }

    /// Two refreshes in a row: the second works only if the first's refresh
    /// token (rotated or not) was kept.
    func refreshTwice(_ scene: ProviderScene, rotates: Bool) throws {
        let first = try #require(try scene.shown(reveal: true)?["refresh_token"] as? String)
        #expect(try scene.home.run("refresh", "work").status == 0)
        let second = try #require(try scene.shown(reveal: true)?["refresh_token"] as? String)
        let rotated = first != second
        #expect(rotated == rotates)
        let again = try scene.home.run("refresh", "work")
        #expect(again.status == 0, "\(again.stderr)")
    }
}
