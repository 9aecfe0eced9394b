import Foundation
import Testing
import VaultTestSupport

/// What a refresh answer leaves behind.
enum Outcome: String, Sendable {
    /// The stored grant is byte-for-byte what it was (as `show --json --reveal` prints it).
    case kept
    /// The grant is marked dead (kept, shown by `vault list`).
    case dead
    /// New tokens were stored.
    case refreshed
}

/// `vault token --force-refresh` against the scriptable provider, one row
/// per kind of token-endpoint answer: the status decides first, then the
/// OAuth error code (with each provider's own codes as its preset
/// declares them), and every string from the provider is checked before
/// anything is stored or printed.
@Suite("refresh answers: status first, provider error codes, strict strings, expiry, ID tokens")
struct RefreshAnswerTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let label: String
        let persona: String
        /// One canned answer of the fixture, as JSON.
        let answer: String
        let status: Int32
        let says: [String]
        let outcome: Outcome
        var testDescription: String { label }
    }

    static let rows: [Row] = [
        // Status first: 429 and 5xx are transient whatever the body says.
        Row(
            label: "429 with too_many_requests and Retry-After is transient and names the wait", persona: "rfc",
            answer: #"{"status":429,"json":{"error":"too_many_requests"},"headers":{"Retry-After":"30"}}"#,
            status: 75, says: ["HTTP 429", "Retry-After"], outcome: .kept),
        Row(
            label: "503 with service_unavailable is transient", persona: "rfc",
            answer: #"{"status":503,"json":{"error":"service_unavailable"}}"#, status: 75, says: ["HTTP 503"],
            outcome: .kept),
        Row(
            label: "500 with unknown_error (Microsoft) is transient", persona: "microsoft",
            answer: #"{"status":500,"json":{"error":"unknown_error","error_description":"AADSTS50000"}}"#,
            status: 75, says: ["HTTP 500"], outcome: .kept),
        Row(
            label: "a proxy's 400 HTML page is a failure and kills nothing", persona: "rfc",
            answer: #"{"status":400,"body":"<html><body>Bad Request</body></html>","content_type":"text/html"}"#,
            status: 1, says: ["not an OAuth answer"], outcome: .kept),
        Row(
            label: "a 400 JSON answer without an error code kills nothing", persona: "rfc",
            answer: #"{"status":400,"json":{"message":"bad request"}}"#, status: 1, says: ["not an OAuth answer"],
            outcome: .kept),
        Row(
            label: "invalid_grant in a 403 is not a refusal", persona: "rfc",
            answer: #"{"status":403,"json":{"error":"invalid_grant"}}"#, status: 1, says: ["invalid_grant"],
            outcome: .kept),
        Row(
            label: "invalid_client is about the client: the grant is kept, the hint names the client", persona: "rfc",
            answer: #"{"error":"invalid_client","description":"client secret expired"}"#, status: 1,
            says: ["does not accept the client", "client id and secret"], outcome: .kept),
        Row(
            label: "unauthorized_client is about the client too", persona: "google",
            answer: #"{"error":"unauthorized_client"}"#, status: 1, says: ["does not accept the client"],
            outcome: .kept),
        Row(
            label: "another OAuth error (invalid_scope) changes nothing", persona: "rfc",
            answer: #"{"error":"invalid_scope"}"#, status: 1, says: ["invalid_scope"], outcome: .kept),
        Row(
            label: "invalid_grant in a 400 kills the grant (control)", persona: "rfc",
            answer: #"{"error":"invalid_grant"}"#, status: 2, says: ["needs a new authorization"], outcome: .dead),
        // GitHub answers errors in HTTP 200, with its own codes.
        Row(
            label: "GitHub: bad_refresh_token in a 200 kills the grant", persona: "github",
            answer: #"{"error":"bad_refresh_token","description":"The refresh token passed is incorrect or expired."}"#,
            status: 2, says: ["bad_refresh_token", "run 'vault add work' to authorize it again"], outcome: .dead),
        Row(
            label: "GitHub: a form-encoded bad_refresh_token in a 200 kills the grant", persona: "github",
            answer: #"{"status":200,"form":{"error":"bad_refresh_token"}}"#, status: 2, says: ["bad_refresh_token"],
            outcome: .dead),
        Row(
            label: "GitHub: incorrect_client_credentials in a 200 is about the client", persona: "github",
            answer: #"{"error":"incorrect_client_credentials"}"#, status: 1, says: ["does not accept the client"],
            outcome: .kept),
        // Strings from the provider.
        Row(
            label: "an error code with an escape sequence is no OAuth error code and is not shown", persona: "rfc",
            answer: #"{"status":400,"json":{"error":"invalid_grant\u001b[2J"}}"#, status: 1,
            says: ["not an OAuth error code"], outcome: .kept),
        Row(
            label: "a description's C1 controls and bidirectional overrides never reach the terminal",
            persona: "rfc", answer: #"{"error":"invalid_grant","description":"revoked\u009b31m by \u202enimda"}"#,
            status: 2, says: ["revoked"], outcome: .dead),
        Row(
            label: "an access token with CR LF is refused", persona: "rfc",
            answer: #"{"issue":{"access_token":"at-1\r\nX-Injected: yes"}}"#, status: 1,
            says: ["access_token contains"], outcome: .kept),
        Row(
            label: "an access token with an escape sequence is refused", persona: "github",
            answer: #"{"issue":{"access_token":"ghu_\u001b]52;c;ZXZpbA==\u0007"}}"#, status: 1,
            says: ["access_token contains"], outcome: .kept),
        Row(
            label: "a non-ASCII access token is refused", persona: "rfc",
            answer: #"{"issue":{"access_token":"t\u00f6ken"}}"#, status: 1, says: ["access_token contains"],
            outcome: .kept),
        Row(
            label: "a refresh token with LF is refused", persona: "microsoft",
            answer: #"{"issue":{"refresh_token":"rt\nusername=evil"}}"#, status: 1, says: ["refresh_token contains"],
            outcome: .kept),
        Row(
            label: "a token type with CR LF is refused", persona: "rfc",
            answer: #"{"issue":{"token_type":"Bearer\r\nX-Injected: yes"}}"#, status: 1, says: ["token_type"],
            outcome: .kept),
        // One expiry parser.
        Row(
            label: "expires_in -3600 is refused", persona: "rfc", answer: #"{"issue":{"expires_in":-3600}}"#,
            status: 1, says: ["expires_in"], outcome: .kept),
        Row(
            label: "expires_in \"nan\" is refused", persona: "google", answer: #"{"issue":{"expires_in":"nan"}}"#,
            status: 1, says: ["expires_in"], outcome: .kept),
        Row(
            label: "expires_in 1e300 is refused", persona: "rfc", answer: #"{"issue":{"expires_in":1e300}}"#,
            status: 1, says: ["expires_in"], outcome: .kept),
        Row(
            label: "refresh_token_expires_in -1 is refused", persona: "github",
            answer: #"{"issue":{"refresh_token_expires_in":-1}}"#, status: 1, says: ["refresh_token_expires_in"],
            outcome: .kept),
        // OpenID Connect Core 12.2: the new ID token is the original's.
        Row(
            label: "an ID token for another subject is refused", persona: "google",
            answer: #"{"issue":{"id_token_claims":{"sub":"user-2"}}}"#, status: 1, says: ["12.2", "sub"],
            outcome: .kept),
        Row(
            label: "an ID token from another issuer is refused", persona: "google",
            answer: #"{"issue":{"id_token_claims":{"iss":"https://evil.example"}}}"#, status: 1, says: ["issuer"],
            outcome: .kept),
        Row(
            label: "an ID token with another audience is refused", persona: "google",
            answer:
                #"{"issue":{"id_token_claims":{"aud":["vault-test.apps.googleusercontent.com","other-client"]}}}"#,
            status: 1, says: ["12.2", "aud"], outcome: .kept),
        Row(
            label: "an ID token with an azp the original lacked is refused", persona: "rfc",
            answer: #"{"issue":{"id_token_claims":{"azp":"someone-else"}}}"#, status: 1, says: ["12.2", "azp"],
            outcome: .kept),
        Row(
            label: "an ID token with another auth_time is refused", persona: "rfc",
            answer: #"{"issue":{"id_token_claims":{"auth_time":1000}}}"#, status: 1, says: ["12.2", "auth_time"],
            outcome: .kept),
        Row(
            label: "an expired ID token is refused", persona: "google",
            answer: #"{"issue":{"id_token_claims":{"exp":1000}}}"#, status: 1, says: ["expired"], outcome: .kept),
        Row(
            label: "an ID token with the original's claims is stored (control)", persona: "google",
            answer: #"{"issue":{}}"#, status: 0, says: [], outcome: .refreshed),
    ]

    @Test(arguments: rows)
    func refresh(_ row: Row) throws {
        let scene = try ProviderScene(row.persona, settings: row.persona == "github" ? ["github_app": true] : [:])
        let added = try scene.add()
        try #require(added.status == 0, "\(added.stderr)")
        var answer = try JSONSerialization.jsonObject(with: Data(row.answer.utf8)) as! [String: Any]
        answer["when"] = "refresh_token"
        try scene.script(["token": [answer]])
        let before = try scene.snapshot()

        let r = try scene.home.run("token", "work", "--force-refresh")
        #expect(r.status == row.status, "\(r.stderr)")
        for words in row.says { #expect(r.stderr.contains(words), "\(r.stderr)") }
        #expect(terminalControls(r.stderr).isEmpty, "\(r.stderr.unicodeScalars.map { $0.value })")
        #expect(try scene.log("token", grantType: "refresh_token").count == 1)
        let shown = try #require(try scene.shown())
        // Tokens are compared, never printed: failures name what differs.
        let printed = !r.stdout.isEmpty
        let oneLine = r.stdout.hasSuffix("\n") && r.stdout.split(separator: "\n").count == 1
        let unchanged = try scene.snapshot() == before
        switch row.outcome {
        case .kept:
            #expect(!printed, "a token was printed")
            #expect(unchanged, "the stored grant changed")
        case .dead:
            #expect(!printed, "a token was printed")
            #expect(shown["state"] as? String == "dead")
            #expect(try scene.home.run("token", "work").status == 2)
        case .refreshed:
            #expect(oneLine, "not one token line")
            #expect(!unchanged, "nothing was stored")
            #expect(shown["state"] as? String == "fresh")
        }
    }
}

/// `vault import` reads a token response with the same rules as a refresh:
/// strict token strings, one expiry parser, the whole response kept.
@Suite("import: the token response rules of a refresh")
struct ImportAnswerTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let label: String
        /// The fields besides `provider`, as JSON.
        let fields: String
        let status: Int32
        let says: [String]
        var testDescription: String { label }
    }

    static let rows: [Row] = [
        Row(
            label: "an access token with LF is refused", fields: #""access_token":"a\nb","refresh_token":"r""#,
            status: 1, says: ["access_token contains"]),
        Row(
            label: "a refresh token with an escape sequence is refused",
            fields: #""access_token":"a","refresh_token":"r\u001b[2J""#, status: 1, says: ["refresh_token contains"]),
        Row(
            label: "expires_in -3600 is refused (control)", fields: #""access_token":"a","expires_in":-3600"#,
            status: 1, says: ["expires_in"]),
        Row(
            label: "refresh_token_expires_in \"nan\" is refused",
            fields: #""access_token":"a","refresh_token":"r","refresh_token_expires_in":"nan""#, status: 1,
            says: ["refresh_token_expires_in"]),
        Row(
            label: "refresh_token_expires_in and unknown fields are kept",
            fields: #""access_token":"a","refresh_token":"r","refresh_token_expires_in":7776000,"x_team":{"id":"T1"}"#,
            status: 0, says: []),
    ]

    @Test(arguments: rows)
    func importing(_ row: Row) throws {
        let home = Home()
        try home.initKeyfileVault()
        let r = try home.run("import", "work", stdin: #"{"provider":"plain","# + row.fields + "}")
        #expect(r.status == row.status, "\(r.stderr)")
        for words in row.says { #expect(r.stderr.contains(words), "\(r.stderr)") }
        let shown = try home.run("show", "work", "--json")
        #expect((shown.status == 0) == (row.status == 0))
        // A refused import stores nothing, so there is nothing more to read.
        if row.status == 0 {
            let doc = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
            let expiry = try #require(doc["refresh_token_expires_at"] as? Double)
            #expect(abs(expiry - Date().timeIntervalSince1970 - 7_776_000) < 120)
            let response = try #require(doc["token_response"] as? [String: Any])
            #expect((response["x_team"] as? [String: Any])?["id"] as? String == "T1")
            #expect(
                response["access_token"] == nil && response["refresh_token"] == nil && response["provider"] == nil)
            #expect(try home.run("list").stdout.contains("REFRESH EXPIRES"))
        }
    }
}
