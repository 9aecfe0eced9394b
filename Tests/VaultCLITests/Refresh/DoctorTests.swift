import Foundation
import Glibc
import Testing
import VaultTestSupport

/// `vault doctor`'s findings, from its `--json` document.
struct DoctorRun {
    let result: ProcessResult
    let document: [String: Any]

    init(_ result: ProcessResult) throws {
        self.result = result
        document = try #require(
            try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
            "stdout: \(result.stdout) stderr: \(result.stderr)")
    }

    /// The finding of `check` for `grant` (nil: the vault's own checks).
    func finding(_ check: String, of grant: String? = nil) -> [String: Any]? {
        let findings: [[String: Any]]
        if let grant {
            let grants = document["grants"] as? [[String: Any]] ?? []
            findings = grants.first { $0["name"] as? String == grant }?["findings"] as? [[String: Any]] ?? []
        } else {
            findings = document["vault"] as? [[String: Any]] ?? []
        }
        return findings.first { $0["check"] as? String == check }
    }

    func status(_ check: String, of grant: String? = nil) -> String? {
        finding(check, of: grant)?["status"] as? String
    }

    func detail(_ check: String, of grant: String? = nil) -> String {
        finding(check, of: grant)?["detail"] as? String ?? ""
    }

    func remedy(_ check: String, of grant: String? = nil) -> String {
        finding(check, of: grant)?["remedy"] as? String ?? ""
    }
}

/// `vault doctor` against the scriptable provider playing Google: each
/// cause it is asked to find, made real at the provider, and found by the
/// check that names it.
@Suite("vault doctor: causes at the provider")
final class DoctorProviderTests {
    let scene: ProviderScene

    init() throws {
        scene = try ProviderScene("google", providerFields: ["client_secret": "fixture-client-secret"])
    }

    /// Imports a grant minted by the fixture as NAME, its access token
    /// expiring in `expiresIn` seconds.
    func importGrant(_ name: String = "work", scope: String = "openid email", expiresIn: Int = 3600) throws {
        let minted = try #require(try scene.post("/__mint", ["scope": scope]) as? [String: Any])
        let grant: [String: Any] = [
            "access_token": minted["access_token"]!, "refresh_token": minted["refresh_token"]!,
            "expires_at": Int(Date().timeIntervalSince1970) + expiresIn, "provider": "google", "scope": scope,
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let r = try scene.home.run("import", name, stdin: json)
        try #require(r.status == 0, "\(r.stderr)")
    }

    func doctor(_ args: String...) throws -> DoctorRun {
        try DoctorRun(try scene.home.run(["doctor"] + args + ["--json"]))
    }

    @Test("a healthy grant: every check passes, exit 0, and the grant's refresh token is never sent")
    func healthy() throws {
        try importGrant()
        let before = try scene.snapshot()
        let d = try doctor("work")
        #expect(d.result.status == 0, "\(d.result.stdout)")
        #expect(d.document["ok"] as? Bool == true)
        for check in ["state", "reachable", "clock", "client", "access-token"] {
            #expect(d.status(check, of: "work") == "ok", "\(check): \(d.detail(check, of: "work"))")
        }
        #expect(d.status("refresh", of: "work") == "skipped")
        // One token request, the probe, and the grant as it was: nothing spent, nothing refreshed.
        let requests = try scene.log("token")
        #expect(requests.count == 1)
        #expect(requests.first?["grant_type"] as? String == "refresh_token")
        #expect(try scene.snapshot() == before)
        // The human report says so on stderr; the table is on stdout.
        let human = try scene.home.run("doctor", "work")
        #expect(human.status == 0 && human.stderr == "vault: no problem found\n", "\(human.stderr)")
        #expect(human.stdout.contains("work     client        ok"), "\(human.stdout)")
    }

    @Test("the provider's Date header ten minutes ahead: the clock check fails and says by how much")
    func skewedClock() throws {
        try importGrant()
        try scene.post("/__settings", ["clock_offset": 600])
        let d = try doctor("work")
        #expect(d.result.status == 1)
        #expect(d.status("clock", of: "work") == "fail")
        #expect(d.detail("clock", of: "work").contains("behind"), "\(d.detail("clock", of: "work"))")
        #expect(d.remedy("clock", of: "work").contains("clock"))
        // Within the tolerance it passes (control).
        try scene.post("/__settings", ["clock_offset": 20])
        #expect(try doctor("work").status("clock", of: "work") == "ok")
    }

    @Test("a web page answers in place of the token endpoint: a proxy or portal is named")
    func htmlAnswer() throws {
        try importGrant()
        try scene.script([
            "token": [
                [
                    "status": 200, "body": "<html><body>Sign in to the hotel Wi-Fi</body></html>",
                    "content_type": "text/html; charset=utf-8",
                ]
            ]
        ])
        let d = try doctor("work")
        #expect(d.result.status == 1)
        #expect(d.status("proxy", of: "work") == "fail")
        #expect(d.detail("proxy", of: "work").contains("text/html"))
        #expect(d.finding("client", of: "work") == nil, "a web page says nothing about the client")
    }

    @Test("only evidence of something in between names a portal: a redirect elsewhere does, a 4xx page does not")
    func htmlEvidence() throws {
        try importGrant()
        let page = "<html><body>Method Not Allowed</body></html>"
        try scene.script([
            "token": [
                [
                    "status": 302, "body": page, "content_type": "text/html",
                    "headers": ["Location": "https://portal.example.net/login"],
                ]
            ]
        ])
        let redirected = try doctor("work")
        #expect(redirected.result.status == 1)
        #expect(redirected.status("proxy", of: "work") == "fail")
        #expect(
            redirected.detail("proxy", of: "work").contains("redirect (HTTP 302) to portal.example.net"),
            "\(redirected.detail("proxy", of: "work"))")
        // The endpoint's own server refusing with a page: not a portal.
        try scene.script(["token": [["status": 405, "body": page, "content_type": "text/html"]]])
        let refused = try doctor("work")
        #expect(refused.finding("proxy", of: "work") == nil, "\(refused.result.stdout)")
        #expect(refused.status("reachable", of: "work") == "ok")
        #expect(refused.status("client", of: "work") == "skipped", "\(refused.detail("client", of: "work"))")
    }

    @Test("a GET of the token endpoint (no client to POST with) answered 404 shows the host answers, no warning")
    func getAnswers404() throws {
        // Kept with a token endpoint and no client id: the probe can only GET it.
        let json =
            #"{"access_token":"a","expires_in":3600,"provider":"x","provider_config":{"token_endpoint":"\#(scene.base)/token"}}"#
        try #require(try scene.home.run("import", "bare", stdin: json).status == 0)
        let d = try doctor("bare")
        #expect(d.result.status == 0, "\(d.result.stdout)")
        #expect(d.finding("endpoint", of: "bare") == nil, "\(d.result.stdout)")
        #expect(d.status("reachable", of: "bare") == "ok")
        #expect(d.detail("reachable", of: "bare").contains("answered a GET with HTTP 404"))
        // A POST answered 404 is evidence: the probe of a grant with a client says so (control).
        try importGrant()
        try scene.script(["token": [["status": 404, "body": "<html>not here</html>", "content_type": "text/html"]]])
        #expect(try doctor("work").status("endpoint", of: "work") == "warn")
    }

    @Test("the client secret was rotated at the provider: invalid_client, and how to give the new one")
    func rotatedSecret() throws {
        try importGrant(expiresIn: -60)
        try scene.post("/__settings", ["client_secret": "the-new-secret"])
        let d = try doctor("work")
        #expect(d.result.status == 1)
        #expect(d.status("client", of: "work") == "fail")
        #expect(d.detail("client", of: "work").contains("invalid_client"))
        #expect(d.remedy("client", of: "work").contains("vault add work --client-secret-file FILE"))
        // The stale grant's refresh fails the same way, and it is not marked dead.
        #expect(d.status("refresh", of: "work") == "fail")
        #expect(try scene.shown()?["state"] as? String != "dead")
    }

    @Test("a stale grant is refreshed as 'vault token' would; a fresh one never is")
    func staleRefreshed() throws {
        try importGrant(expiresIn: -60)
        let d = try doctor("work")
        #expect(d.result.status == 0, "\(d.result.stdout)")
        #expect(d.status("refresh", of: "work") == "ok")
        #expect(try scene.log("token").count == 2, "the probe and one refresh")
        #expect(try doctor("work").status("refresh", of: "work") == "skipped")
        #expect(try scene.log("token").count == 3, "then only the probe")
    }

    @Test("--mail: a grant without Gmail's scope fails, naming the scope and the command that adds it")
    func mailScopes() throws {
        try importGrant()
        let plain = try doctor("work")
        #expect(plain.status("scopes", of: "work") == "skipped")
        let d = try doctor("work", "--mail")
        #expect(d.result.status == 1)
        #expect(d.status("scopes", of: "work") == "fail")
        #expect(d.remedy("scopes", of: "work").contains("vault add work --scope https://mail.google.com/"))
        // Gmail API scopes without the IMAP one are a warning even without --mail.
        try importGrant("api", scope: "openid https://www.googleapis.com/auth/gmail.readonly")
        #expect(try doctor("api").status("scopes", of: "api") == "warn")
    }

    @Test(
        "a Google grant refused 7 days after it was authorized: likely an app in testing, with the evidence",
        .enabled(if: FakeTime.installed, "needs libfaketime (Debian's faketime package)"))
    func googleTestingApp() throws {
        // Authorized a week ago: imported with the clock 7 days back.
        let minted = try #require(try scene.post("/__mint", ["scope": "openid email"]) as? [String: Any])
        let grant: [String: Any] = [
            "access_token": minted["access_token"]!, "refresh_token": minted["refresh_token"]!,
            "expires_in": 3599, "provider": "google",
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let imported = try VaultProcess.start(
            ["-f", "-7d", VaultProcess.binary, "import", "work"], environment: scene.home.environment, stdin: json,
            executable: FakeTime.wrapper
        ).wait()
        try #require(imported.status == 0, "\(imported.stderr)")
        try scene.script([
            "token": [
                [
                    "error": "invalid_grant", "description": "Token has been expired or revoked.",
                    "when": "refresh_token",
                ]
            ]
        ])
        #expect(try scene.home.run("token", "work").status == 2)
        let d = try doctor("work")
        #expect(d.result.status == 1)
        #expect(d.status("state", of: "work") == "fail")
        #expect(d.status("google-testing", of: "work") == "warn")
        #expect(d.detail("google-testing", of: "work").contains("7 days ago"))
        #expect(d.remedy("google-testing", of: "work").contains("vault add work"))

        // Control: a grant refused on its first day is not blamed on testing.
        try importGrant("young", expiresIn: -60)
        try scene.script(["token": [["error": "invalid_grant", "when": "refresh_token"]]])
        #expect(try scene.home.run("token", "young").status == 2)
        #expect(try doctor("young").finding("google-testing", of: "young") == nil)
    }
}

/// `vault doctor` where the network fails, and against the real provider,
/// store and agent.
@Suite("vault doctor: the network, the real provider, the store and the agent")
struct DoctorEnvironmentTests {
    let home = Home()

    init() throws {
        home.extra["VAULT_AGENT"] = "off"
        try home.initKeyfileVault()
    }

    func importStale(_ name: String, endpoint: String) throws {
        let past = Int(Date().timeIntervalSince1970) - 60
        let json =
            #"{"access_token":"a","refresh_token":"r","expires_at":\#(past),"provider":"x","provider_config":{"token_endpoint":"\#(endpoint)","client_id":"c"}}"#
        let r = try home.run("import", name, stdin: json)
        try #require(r.status == 0, "\(r.stderr)")
    }

    @Test("a name that never resolves (RFC 6761 .invalid) is a DNS failure; a closed port refuses")
    func unreachable() throws {
        try importStale("nodns", endpoint: "https://token.vault-doctor.invalid/token")
        // A port nobody listens on: bind one, learn it, close it.
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(probe, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(probe, $0, &length) }
        }
        close(probe)
        try importStale("closed", endpoint: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))/token")
        let before = home.snapshot()
        let d = try DoctorRun(try home.run("doctor", "--json"))
        #expect(d.result.status == 1)
        #expect(d.status("dns", of: "nodns") == "fail")
        #expect(d.detail("dns", of: "nodns").contains("token.vault-doctor.invalid"))
        #expect(d.status("reachable", of: "closed") == "fail")
        #expect(d.detail("reachable", of: "closed").contains("nothing accepts connections"))
        for name in ["nodns", "closed"] { #expect(d.status("refresh", of: name) == "skipped") }
        #expect(home.snapshot() == before, "nothing changed")
        // Failures first in the human report, each with what to do.
        let human = try home.run("doctor")
        let lines = human.stdout.split(separator: "\n")
        #expect(lines.first?.hasPrefix("FAIL ") == true, "\(human.stdout)")
        #expect(human.stdout.contains("  what to do: "))
        #expect(human.stderr == "vault: 2 problems found\n", "\(human.stderr)")
    }

    @Test("glewlwyd: a live grant passes; the same grant revoked fails, found by its refresh")
    func realProvider() throws {
        _ = try ProviderGrants.importConfidential("live", into: home, expiresIn: 3600)
        let live = try DoctorRun(try home.run("doctor", "live", "--json"))
        #expect(live.result.status == 0, "\(live.result.stdout)")
        #expect(live.status("client", of: "live") == "ok", "\(live.detail("client", of: "live"))")
        #expect(live.status("access-token", of: "live") == "ok")
        // The refresh token was never spent: it still refreshes (glewlwyd's are one-use).
        #expect(try home.run("refresh", "live").status == 0)

        let tokens = try ProviderGrants.importConfidential("revoked", into: home, expiresIn: -60)
        try ProviderGrants.revoke(tokens["refresh_token"] as! String, hint: "refresh_token")
        let d = try DoctorRun(try home.run("doctor", "revoked", "--json"))
        #expect(d.result.status == 1)
        #expect(d.status("refresh", of: "revoked") == "fail")
        #expect(d.remedy("refresh", of: "revoked").contains("vault add revoked"))
        // Now marked dead: the next run says so from the vault alone.
        let again = try DoctorRun(try home.run("doctor", "revoked", "--json"))
        #expect(again.status("state", of: "revoked") == "fail")
        #expect(again.status("refresh", of: "revoked") == "skipped")
    }

    @Test("the WebDAV store stopped: the sync-store check fails; running, it passes")
    func storeStopped() throws {
        let dir = TemporaryDirectory()
        var store: WebDAVStore? = try WebDAVStore(in: dir.path)
        let url = try #require(store?.url)
        let set = try home.run("remote", "set", url, "--user", "vault", "--password-file", dir.path + "/store-password")
        try #require(set.status == 0, "\(set.stderr)")
        #expect(try home.run("sync").status == 0)
        let up = try DoctorRun(try home.run("doctor", "--json"))
        #expect(up.status("sync-store") == "ok", "\(up.detail("sync-store"))")
        #expect(up.status("conflicts") == "ok")
        #expect(up.result.status == 0)
        store = nil
        let down = try DoctorRun(try home.run("doctor", "--json"))
        #expect(down.result.status == 1)
        #expect(down.status("sync-store") == "fail")
        #expect(down.remedy("sync-store").contains("vault sync"))
    }

    @Test("the agent locked and no key to unlock here: the agent and unlock checks say so")
    func agentLocked() throws {
        let a = AgentHome()
        try a.home.initPassphraseVault("agent passphrase")
        a.home.extra["VAULT_PASSPHRASE_FILE"] = nil
        let agent = try a.home.start("agent", "--foreground", "--idle-timeout", "1h")
        defer { kill(agent.pid, SIGTERM) }
        _ = try #require(try a.waitForAgent())
        let d = try DoctorRun(try a.home.run("doctor", "--json"))
        #expect(d.result.status == 1)
        #expect(d.status("agent") == "warn")
        #expect(d.detail("agent").contains("locked"))
        #expect(d.status("unlock") == "fail")
        #expect(d.remedy("unlock").contains("vault agent"), "\(d.remedy("unlock"))")
    }
}
