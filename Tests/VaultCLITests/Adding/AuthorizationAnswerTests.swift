import Foundation
import Glibc
import Testing
import VaultTestSupport

/// `vault add` against the scriptable provider: the code exchange and the
/// device flow, one row per kind of answer. Nothing is stored on any failure.
@Suite("authorization answers: code exchange and device flow")
struct AuthorizationAnswerTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let label: String
        let persona: String
        /// Canned answers of the fixture, as JSON: {"token": [...], "device": [...]}.
        let script: String
        let status: Int32
        let says: [String]
        var settings = "{}"
        var testDescription: String { label }
    }

    static let exchanges: [Row] = [
        Row(
            label: "GitHub: bad_verification_code in a 200 is reported as such", persona: "github",
            script:
                #"{"token":[{"error":"bad_verification_code","description":"The code passed is incorrect or expired."}]}"#,
            status: 1, says: ["bad_verification_code", "incorrect or expired"]),
        Row(
            label: "GitHub: a form-encoded bad_verification_code in a 200", persona: "github",
            script: #"{"token":[{"status":200,"form":{"error":"bad_verification_code"}}]}"#, status: 1,
            says: ["bad_verification_code"]),
        Row(
            label: "GitHub: incorrect_client_credentials in a 200 is about the client", persona: "github",
            script: #"{"token":[{"error":"incorrect_client_credentials"}]}"#, status: 1,
            says: ["does not accept the client", "client id and secret"]),
        Row(
            label: "an access token with CR LF is refused", persona: "github",
            script: #"{"token":[{"issue":{"access_token":"gho_1\r\nX-Injected: yes"}}]}"#, status: 1,
            says: ["access_token contains"]),
        Row(
            label: "expires_in 1e300 is refused", persona: "microsoft",
            script: #"{"token":[{"issue":{"expires_in":1e300}}]}"#, status: 1, says: ["expires_in"]),
        Row(
            label: "a description with a bidirectional override is shown without it", persona: "rfc",
            script: #"{"token":[{"error":"invalid_request","description":"\u202egnorw si edoc ruoy"}]}"#,
            status: 1, says: ["invalid_request"]),
        Row(
            label: "invalid_scope names the scopes asked for, and the provider file that names them", persona: "google",
            script: #"{"token":[{"error":"invalid_scope","description":"Some requested scopes were invalid."}]}"#,
            status: 1,
            says: [
                "invalid_scope",
                "vault: hint: vault asked for the scopes of provider 'google': openid email; "
                    + "change \"scopes\" in ", "/providers/google.json, or ask for others with --scope S",
            ]),
        Row(
            label: "503 at the code exchange is transient", persona: "google",
            script: #"{"token":[{"status":503,"json":{"error":"backend_error"}}]}"#, status: 75, says: ["HTTP 503"]),
    ]

    @Test(arguments: exchanges)
    func codeExchange(_ row: Row) throws {
        let scene = try ProviderScene(row.persona, settings: try Self.object(row.settings))
        try scene.script(try Self.object(row.script))
        let r = try scene.add()
        #expect(r.status == row.status, "\(r.stderr)")
        for words in row.says { #expect(r.stderr.contains(words), "\(r.stderr)") }
        #expect(terminalControls(r.stderr).isEmpty, "\(r.stderr)")
        #expect(try scene.log("token", grantType: "authorization_code").count == 1)
        #expect(try scene.home.run("show", "work").status == 1, "nothing stored")
    }

    static let devicePolls: [Row] = [
        Row(
            label: "GitHub: authorization_pending in a 200, then the approval", persona: "github",
            script: #"{"token":[{"error":"authorization_pending"},{"error":"authorization_pending"}]}"#, status: 0,
            says: []),
        Row(
            label: "GitHub: a form-encoded authorization_pending in a 200, then the approval", persona: "github",
            script: #"{"token":[{"status":200,"form":{"error":"authorization_pending"}}]}"#, status: 0, says: []),
        Row(
            label: "GitHub: a form-encoded device authorization answer", persona: "github",
            script: #"{"device":[{"issue":{"encoding":"form"}}]}"#, status: 0, says: []),
        Row(
            label: "GitHub: expired_token in a 200 says the code expired (exit 75)", persona: "github",
            script: #"{"token":[{"error":"authorization_pending"},{"error":"expired_token"}]}"#, status: 75,
            says: ["expired"]),
        Row(
            label: "GitHub: access_denied in a 200 says the person denied it (exit 1)", persona: "github",
            script: #"{"token":[{"error":"access_denied"}]}"#, status: 1, says: ["denied"]),
        Row(
            label: "GitHub: device_flow_disabled at the device endpoint is about the client", persona: "github",
            script: #"{"device":[{"error":"device_flow_disabled"}]}"#, status: 1, says: ["does not accept the client"]),
        Row(
            label: "RFC 8628: expired_token in a 400 says the code expired (exit 75)", persona: "rfc",
            script: #"{"token":[{"error":"expired_token"}]}"#, status: 75, says: ["expired"]),
        Row(
            label: "RFC 8628: access_denied in a 400 says the person denied it (exit 1)", persona: "rfc",
            script: #"{"token":[{"error":"access_denied"}]}"#, status: 1, says: ["denied"]),
        Row(
            label: "Microsoft: authorization_declined is a denial (exit 1)", persona: "microsoft",
            script: #"{"token":[{"error":"authorization_declined"}]}"#, status: 1, says: ["denied"]),
        Row(
            label: "Google: 428 authorization_pending, then the approval", persona: "google",
            script: #"{"token":[{"error":"authorization_pending"}]}"#, status: 0, says: []),
        Row(
            label: "Google: 403 access_denied is a denial (exit 1)", persona: "google",
            script: #"{"token":[{"error":"access_denied"}]}"#, status: 1, says: ["denied"]),
    ]

    @Test(arguments: devicePolls)
    func deviceFlow(_ row: Row) throws {
        let scene = try ProviderScene(row.persona, settings: try Self.object(row.settings))
        var script = try Self.object(row.script)
        if let polls = script["token"] as? [[String: Any]] {
            script["token"] = polls.map { $0.merging(["when": "urn:ietf:params:oauth:grant-type:device_code"]) { $1 } }
        }
        try scene.script(script)
        let r = try scene.add("tv", flow: "device")
        #expect(r.status == row.status, "\(r.stderr)")
        for words in row.says { #expect(r.stderr.contains(words), "\(r.stderr)") }
        #expect(terminalControls(r.stderr).isEmpty, "\(r.stderr)")
        let polls = try scene.log("token")
        let scripted = (script["token"] as? [Any])?.count ?? 0
        #expect(polls.count == (row.status == 0 ? scripted + 1 : scripted), "\(polls.count) polls")
        #expect(polls.allSatisfy { ($0["accept"] as? String)?.contains("application/json") == true })
        let stored = try scene.home.run("show", "tv").status == 0
        #expect(stored == (row.status == 0))
    }

    @Test("GitHub: slow_down in a 200 adds five seconds to the interval")
    func slowDown() throws {
        let scene = try ProviderScene("github")
        try scene.script([
            "token": [
                ["error": "slow_down", "when": "urn:ietf:params:oauth:grant-type:device_code"] as [String: Any]
            ]
        ])
        let r = try scene.add("tv", flow: "device")
        #expect(r.status == 0, "\(r.stderr)")
        let times = try scene.log("token").compactMap { $0["time"] as? Double }
        try #require(times.count == 2)
        #expect(times[1] - times[0] >= 5.9, "the second poll came \(times[1] - times[0]) s after the first")
    }

    static func object(_ json: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] ?? [:]
    }
}

/// How vault presents its client at the token endpoint: the method the
/// provider file names, else the one discovery lists (RFC 6749 2.3.1
/// encoding for Basic), and never a secret from a public client.
@Suite("client authentication from discovery and provider files")
struct ClientAuthenticationTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let label: String
        let persona: String
        /// Fixture settings, as JSON (auth_methods: what it lists and accepts).
        let settings: String
        /// Provider file fields, as JSON.
        let file: String
        /// The method every token request must have used.
        let expected: String
        var testDescription: String { label }
    }

    static let rows: [Row] = [
        Row(
            label: "discovery lists only client_secret_post: the code exchange and refresh post the secret",
            persona: "rfc", settings: #"{"auth_methods":["client_secret_post"]}"#, file: "{}",
            expected: "client_secret_post"),
        Row(
            label: "discovery lists only client_secret_basic: Basic", persona: "rfc",
            settings: #"{"auth_methods":["client_secret_basic"]}"#, file: "{}", expected: "client_secret_basic"),
        Row(
            label: "discovery lists no method: Basic, the default of OpenID Connect Discovery", persona: "rfc",
            settings: #"{"auth_methods":null}"#, file: "{}", expected: "client_secret_basic"),
        Row(
            label: "the provider file's method wins over discovery", persona: "rfc",
            settings: #"{"auth_methods":["client_secret_post"]}"#,
            file: #"{"token_endpoint_auth_method":"client_secret_post"}"#, expected: "client_secret_post"),
        Row(
            label: "Google's preset posts the secret", persona: "google", settings: "{}", file: "{}",
            expected: "client_secret_post"),
        Row(
            label: "GitHub's preset posts the secret", persona: "github", settings: #"{"github_app":true}"#,
            file: "{}", expected: "client_secret_post"),
        Row(
            label: "Microsoft's public client never sends a secret, even one given with --client-secret-file",
            persona: "microsoft", settings: "{}", file: "{}", expected: "none"),
    ]

    @Test(arguments: rows)
    func method(_ row: Row) throws {
        let scene = try ProviderScene(
            row.persona, settings: try AuthorizationAnswerTests.object(row.settings),
            providerFields: try AuthorizationAnswerTests.object(row.file))
        let r = try VaultProcess.run(
            [
                "add", scene.provider, "work", "--flow", "browser", "--client-secret-file",
                scene.home.path + "/client-secret",
            ],
            environment: scene.home.environment)
        #expect(r.status == 0, "\(r.stderr)")
        let refreshed = try scene.home.run("refresh", "work")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        let used = try scene.log("token").map { $0["auth"] as? String ?? "?" }
        #expect(used.count == 2 && used.allSatisfy { $0 == row.expected }, "\(used)")
    }
}
