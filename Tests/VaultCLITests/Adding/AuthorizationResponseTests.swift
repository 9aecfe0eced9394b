import Foundation
import Testing
import VaultTestSupport

/// RFC 9207 (the answer names its server: `iss`) and RFC 9126 (pushed
/// authorization requests) against the scriptable provider, found by
/// discovery: what the final RFCs say, and the ways glewlwyd's drafts
/// differ (no `authorization_response_iss_parameter_supported` in its
/// metadata, bare 403 answers from its pushed-request endpoint).
@Suite("authorization answers: iss (RFC 9207) and pushed requests (RFC 9126)")
struct AuthorizationResponseTests {
    /// A refused answer: exit 1, nothing stored, and the code never at the token endpoint.
    func expectMixUpRefused(_ scene: ProviderScene, _ r: ProcessResult, says: String) throws {
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains(says), "\(r.stderr)")
        #expect(try scene.log("token").isEmpty, "the code reached the token endpoint")
        #expect(try scene.home.run("show", "work").status == 1, "nothing stored")
    }

    @Test("an iss of another server is refused, advertised or not, and the code is never exchanged")
    func wrongIssuer() throws {
        for advertised in [true, false] {
            let scene = try ProviderScene("rfc", settings: ["iss_parameter": true, "advertise_iss": advertised])
            try scene.script(["authorize": [["iss": "https://attacker.example"]]])
            try expectMixUpRefused(
                scene, try scene.add(), says: "comes from another server ('https://attacker.example'")
        }
    }

    @Test("a provider that says it sends iss: an answer without one is refused")
    func missingIssuer() throws {
        let scene = try ProviderScene("rfc", settings: ["iss_parameter": true])
        try scene.script(["authorize": [["iss": NSNull()]]])
        try expectMixUpRefused(scene, try scene.add(), says: "does not name the server that sent it (iss)")
    }

    @Test("an error answer with another server's iss is refused as a mix-up, not reported as its error")
    func errorWithWrongIssuer() throws {
        let scene = try ProviderScene("rfc", settings: ["iss_parameter": true])
        try scene.script(["authorize": [["deny": true, "iss": "https://attacker.example"]]])
        let r = try scene.add()
        try expectMixUpRefused(scene, r, says: "comes from another server")
        #expect(!r.stderr.contains("access_denied"), "\(r.stderr)")
    }

    @Test("the provider's own iss is accepted, advertised (RFC 9207) or not (glewlwyd's draft)")
    func rightIssuer() throws {
        for advertised in [true, false] {
            let scene = try ProviderScene("rfc", settings: ["iss_parameter": true, "advertise_iss": advertised])
            let r = try scene.add()
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try scene.log("token", grantType: "authorization_code").count == 1)
        }
    }

    @Test("a pasted bare code is refused when the provider always sends iss")
    func pastedBareCode() throws {
        let scene = try ProviderScene("rfc", settings: ["iss_parameter": true])
        var env = scene.home.environment
        env["BROWSER"] = "/bin/true"
        let r = try VaultProcess.run(
            ["add", "plain", "work", "--flow", "paste"] + scene.clientFlags, environment: env, stdin: "some-code\n")
        try expectMixUpRefused(scene, r, says: "paste the whole address")
    }

    @Test("discovery names a pushed-request endpoint: the request is pushed, the browser sees only its handle")
    func pushed() throws {
        for required in [false, true] {
            let scene = try ProviderScene("rfc", settings: ["par": true, "par_required": required])
            let r = try scene.add()
            #expect(r.status == 0, "\(r.stderr)")
            let par = try #require(try scene.log("par").first)
            #expect(par["auth"] as? String == "client_secret_basic", "as at the token endpoint")
            let form = par["form"] as? [String: Any] ?? [:]
            for key in ["response_type", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method"] {
                #expect(form[key] != nil, "\(key) is not pushed")
            }
            #expect(form["client_secret"] as? String == nil)
            let authorize = try #require(try scene.log("authorize").first)
            let shown = (authorize["form"] as? [String: Any] ?? [:]).keys.sorted()
            #expect(shown == ["client_id", "request_uri"], "the browser saw \(shown)")
            #expect(!r.stderr.contains("code_challenge") && !r.stderr.contains("state="), "\(r.stderr)")
            #expect(try scene.log("token", grantType: "authorization_code").count == 1)
        }
    }

    @Test("the pushed-request endpoint refuses: a clear error, and the browser is never opened")
    func pushedRefused() throws {
        let rows: [(Any, String)] = [
            (["error": "invalid_request", "description": "bad redirect"], "invalid_request: bad redirect"),
            // glewlwyd's draft: a bare 403 where RFC 9126 has an OAuth error.
            (["status": 403, "body": ""], "HTTP 403 without a reason"),
            (["status": 201, "json": ["expires_in": 60]], "no usable request_uri"),
        ]
        for (answer, says) in rows {
            let scene = try ProviderScene("rfc", settings: ["par": true])
            try scene.script(["par": [answer]])
            let r = try scene.add()
            #expect(r.status == 1, "\(r.stderr)")
            #expect(r.stderr.contains("pushing the authorization request") && r.stderr.contains(says), "\(r.stderr)")
            #expect(try scene.log("authorize").isEmpty && scene.log("token").isEmpty)
        }
    }

    @Test("a request_uri used after its expires_in: said so, exit 75, nothing stored")
    func pushedExpired() throws {
        let scene = try ProviderScene("rfc", settings: ["par": true, "par_expires_in": 1])
        let fixture = FixtureServer.root.appendingPathComponent("Tools/testservers/provider_fixture.py").path
        scene.home.extra["BROWSER"] = "/usr/bin/python3 \(fixture) browse-after 2"
        let r = try scene.add()
        #expect(r.status == 75, "\(r.stderr)")
        #expect(r.stderr.contains("pushed authorization request expired"), "\(r.stderr)")
        #expect(try scene.log("token").isEmpty)
    }

    @Test("the device flow pushes nothing")
    func deviceNotPushed() throws {
        let scene = try ProviderScene("rfc", settings: ["par": true])
        let r = try scene.add(flow: "device")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try scene.log("par").isEmpty)
    }

    @Test("providers --json and show say what a provider file declares")
    func reported() throws {
        let scene = try ProviderScene("rfc", as: "corp")
        try scene.writeProviderFile([
            "pushed_authorization_request_endpoint": scene.base + "/par",
            "require_pushed_authorization_requests": true,
            "authorization_response_iss_parameter_supported": true,
        ])
        try scene.post("/__settings", ["iss_parameter": true])
        let list = try scene.home.run("providers", "--json")
        let all = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        let corp = try #require(all.first { $0["name"] as? String == "corp" })
        #expect(corp["pushed_authorization_request_endpoint"] as? String == scene.base + "/par")
        #expect(corp["require_pushed_authorization_requests"] as? Bool == true)
        #expect(corp["authorization_response_iss_parameter_supported"] as? Bool == true)
        let r = try scene.add()
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try scene.log("par").count == 1)
        let shown = try #require(try scene.shown())
        #expect(shown["pushed_authorization_requests"] as? String == "pushed (required)")
        #expect(shown["authorization_response_iss"] as? String == "required")
    }

    @Test("a provider file that says it sends iss but names no issuer is refused, not used without the check")
    func issWithoutIssuer() throws {
        let scene = try ProviderScene("rfc", as: "corp", settings: ["iss_parameter": true])
        try scene.writeProviderFile([
            "issuer": NSNull(), "authorization_endpoint": scene.base + "/authorize",
            "token_endpoint": scene.base + "/token", "authorization_response_iss_parameter_supported": true,
        ])
        let r = try scene.add()
        #expect(r.status == 1, "\(r.stderr)")
        #expect(
            r.stderr.contains("authorization_response_iss_parameter_supported needs 'issuer'"), "\(r.stderr)")
        #expect(!r.stderr.contains("unknown provider"), "the provider is there, its file is wrong: \(r.stderr)")
        #expect(try scene.log("authorize").isEmpty && scene.log("token").isEmpty)
        #expect(try scene.home.run("show", "work").status == 1)
    }

    @Test("authorized again, the issuer's discovery fails: no downgrade; exit 75 when transient, else 1")
    func rediscoveryFails() throws {
        for (status, exit) in [(503, Int32(75)), (429, 75), (404, 1)] {
            let scene = try ProviderScene("rfc", settings: ["par": true, "iss_parameter": true])
            #expect(try scene.add().status == 0)
            let before = try scene.snapshot()
            try scene.post("/__settings", ["discovery_status": status])
            let r = try VaultProcess.run(["add", "work", "--timeout", "60"], environment: scene.home.environment)
            #expect(r.status == exit, "\(status): \(r.stderr)")
            #expect(
                r.stderr.contains(
                    "vault: error: cannot ask \(scene.base) again whether it takes pushed requests or names itself "
                        + "in answers (discovery at \(scene.base)/.well-known/openid-configuration answered HTTP "
                        + "\(status)): 'work' is not authorized again without knowing"), "\(r.stderr)")
            #expect(try scene.log("authorize").count == 1, "the browser was sent again")
            #expect(try scene.snapshot() == before, "the grant changed")
        }
        // The network: nothing answers at the issuer any more.
        let scene = try ProviderScene("rfc", settings: ["par": true])
        #expect(try scene.add().status == 0)
        let gone = scene.base
        scene.server.stop()
        let r = try VaultProcess.run(["add", "work", "--timeout", "60"], environment: scene.home.environment)
        #expect(r.status == 75, "\(r.stderr)")
        #expect(r.stderr.contains("cannot ask \(gone) again"), "\(r.stderr)")
    }
}
