import Foundation
import Testing
import VaultHTTP
import VaultTestSupport

/// Service accounts (RFC 7523 JWT bearer) against a real RFC 7523 token
/// endpoint: authlib's JWTBearerGrant on loopback
/// (Tools/testservers/jwt_bearer_server.py), standing in for Google's,
/// with a key pair made by the test and a key file in Google's format.
@Suite(
    "service accounts against an RFC 7523 server (authlib)",
    .enabled(if: MachineSupport.authlib, "needs python3-authlib"))
final class ServiceAccountTests {
    struct Settings: Decodable {
        let port: Int
        let token_endpoint, sa_email, sa_key_id, user: String
    }

    let home = Home()
    let server: FixtureServer
    let settings: Settings
    var keyFile: String { home.path + "/key.json" }
    var base: String { "http://127.0.0.1:\(settings.port)" }

    init() throws {
        try MachineSupport.keyPair(home.path + "/sa")
        try MachineSupport.keyPair(home.path + "/client")
        server = try FixtureServer(
            script: "jwt_bearer_server.py", arguments: [home.path + "/sa.pub", home.path + "/client.pub"])
        settings = try JSONDecoder().decode(Settings.self, from: Data(server.firstLine.utf8))
        try home.initKeyfileVault()
        try writeKeyFile(["private_key": try String(contentsOfFile: home.path + "/sa.pem", encoding: .utf8)])
        try home.providerFile(
            "rfc7523",
            [
                "token_endpoint": settings.token_endpoint, "revocation_endpoint": base + "/revoke",
                "userinfo_endpoint": base + "/userinfo", "flows": ["client-credentials"],
            ])
    }

    /// A key file in Google's format, `changes` applied (NSNull removes a field).
    func writeKeyFile(_ changes: [String: Any], to path: String? = nil) throws {
        var fields: [String: Any] = [
            "type": "service_account", "project_id": "vault-test", "private_key_id": settings.sa_key_id,
            "client_email": settings.sa_email, "client_id": "1234", "token_uri": settings.token_endpoint,
        ]
        for (k, v) in changes { fields[k] = v is NSNull ? nil : v }
        home.write(path ?? keyFile, String(decoding: try JSONSerialization.data(withJSONObject: fields), as: UTF8.self))
    }

    func settings(_ object: [String: Any]) throws { try MachineSupport.post(base + "/__settings", object) }

    func log() throws -> [[String: Any]] { try MachineSupport.json(base + "/__log") as? [[String: Any]] ?? [] }

    func claims(_ entry: [String: Any]) -> [String: Any] {
        (entry["assertion"] as? [String: Any])?["claims"] as? [String: Any] ?? [:]
    }

    @Test(
        "a token from an RS256 assertion works at the server; token, header, env, list and show; the key is kept encrypted"
    )
    func addAndUse() throws {
        let add = try home.run("add", "ci", "--service-account", keyFile, "--scope", "read")
        try #require(add.status == 0, "\(add.stderr)")
        #expect(add.stderr.contains("added 'ci' (ci, service account, \(settings.sa_email); scopes: read)"))
        // The key file may go: the vault holds the key now.
        try FileManager.default.removeItem(atPath: keyFile)
        let token = try home.run("token", "ci").stdout.trimmingCharacters(in: .newlines)
        #expect(try MachineSupport.status(base + "/userinfo", token: token) == 200)
        let requests = try log()
        try #require(requests.count == 1)
        #expect(requests[0]["grant_type"] as? String == "urn:ietf:params:oauth:grant-type:jwt-bearer")
        #expect(requests[0]["client_auth"] as? String == "none" && requests[0]["scope"] as? String == "read")
        let header = (requests[0]["assertion"] as? [String: Any])?["header"] as? [String: Any]
        #expect(header?["alg"] as? String == "RS256" && header?["kid"] as? String == settings.sa_key_id)
        let c = claims(requests[0])
        #expect(c["iss"] as? String == settings.sa_email && c["aud"] as? String == settings.token_endpoint)
        #expect(c["sub"] == nil && c["scope"] as? String == "read")
        #expect((c["exp"] as? Int ?? 0) - (c["iat"] as? Int ?? 0) == 300)

        #expect(try home.run("header", "ci").stdout == "Authorization: Bearer \(token)\n")
        #expect(try home.run("env", "ci").stdout.contains(token))
        let exec = try home.run("exec", "ci", "--", "/bin/sh", "-c", "test \"$CI_ACCESS_TOKEN\" = \"\(token)\"")
        #expect(exec.status == 0, "\(exec.stderr)")
        let row = try home.listed()["ci"]
        #expect(row?["kind"] as? String == "service_account" && row?["state"] as? String == "fresh")
        #expect(row?["account"] as? String == settings.sa_email)
        let shown = try home.run("show", "ci").stdout
        #expect(shown.contains("service account (RFC 7523)") && shown.contains("kept in the vault, never shown"))
        #expect(shown.contains(settings.sa_key_id))
        // The private key never leaves the vault: not in show (even --reveal), not in the file's bytes.
        let body = try String(contentsOfFile: home.path + "/sa.pem", encoding: .utf8).split(separator: "\n")[1]
        for args in [["show", "ci"], ["show", "ci", "--json"], ["show", "ci", "--json", "--reveal"], ["list"]] {
            let out = try VaultProcess.run(args, environment: home.environment)
            #expect(!out.stdout.contains("PRIVATE KEY") && !out.stdout.contains(body), "\(args)")
        }
        for (name, bytes) in home.snapshot() {
            #expect(bytes.range(of: Data("PRIVATE KEY".utf8)) == nil, "\(name)")
            #expect(bytes.range(of: Data(settings.sa_email.utf8)) == nil, "\(name)")
        }
    }

    @Test("a stale token is minted again, once for four processes that ask together")
    func mintsWhenStale() throws {
        // Tokens that live 30 s are stale at once (fresh means more than 60 s left).
        try settings(["expires_in": 30])
        try #require(try home.run("add", "ci", "--service-account", keyFile).status == 0)
        #expect(try home.run("token", "ci").status == 0)
        #expect(try log().count == 2)
        try settings(["expires_in": 3600])
        let runs = try (0..<4).map { _ in try home.start("token", "ci") }.map { $0.wait() }
        #expect(runs.allSatisfy { $0.status == 0 })
        #expect(Set(runs.map(\.stdout)).count == 1)
        #expect(try log().count == 3)
        let jtis = try log().map { claims($0)["jti"] as? String ?? "" }
        #expect(Set(jtis).count == 3)
    }

    @Test("with the passphrase withheld, the agent mints the token")
    func throughTheAgent() throws {
        let agent = AgentHome()
        try agent.home.initPassphraseVault("agent passphrase")
        try writeKeyFile(
            ["private_key": try String(contentsOfFile: home.path + "/sa.pem", encoding: .utf8)],
            to: agent.home.path + "/key.json")
        try settings(["expires_in": 30])
        let added = try agent.home.run("add", "ci", "--service-account", agent.home.path + "/key.json")
        try #require(added.status == 0, "\(added.stderr)")
        try #require(try agent.waitForAgent() != nil)
        agent.home.extra["VAULT_PASSPHRASE_FILE"] = nil
        let r = try agent.home.run("token", "ci")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(try MachineSupport.status(base + "/userinfo", token: r.stdout.trimmingCharacters(in: .newlines)) == 200)
        #expect(try log().count == 2)
        // doctor's token request goes through the agent too, which holds the key.
        let d = try DoctorRun(try agent.home.run("doctor", "ci", "--json"))
        #expect(d.result.status == 0, "\(d.result.stdout)")
        #expect(d.status("credentials", of: "ci") == "ok", "\(d.detail("credentials", of: "ci"))")
        #expect(d.status("reachable", of: "ci") == "skipped", "\(d.detail("reachable", of: "ci"))")
        #expect(try log().count == 3)
    }

    @Test("--subject asks for a user's token (domain-wide delegation); a subject the server refuses stores nothing")
    func subject() throws {
        let r = try home.run("add", "ci", "--service-account", keyFile, "--subject", settings.user)
        try #require(r.status == 0, "\(r.stderr)")
        #expect(claims(try log()[0])["sub"] as? String == settings.user)
        #expect(try home.listed()["ci"]?["account"] as? String == settings.user)
        let before = home.snapshot()
        let refused = try home.run("add", "other", "--service-account", keyFile, "--subject", "mallory@example.com")
        #expect(refused.status == 1)
        #expect(
            refused.stderr.contains(
                "the provider refused the service account's key, or its right to act for mallory@example.com: "
                    + "invalid_grant: Invalid \"sub\" value"), "\(refused.stderr)")
        let listed = try home.listed()
        #expect(home.snapshot() == before && listed.count == 1)
    }

    @Test(
        "without --scope, the provider file's scopes are asked for; a key replaced as the dead-key hint says keeps the grant's scopes"
    )
    func providerScopes() throws {
        try home.providerFile(
            "jb", ["token_endpoint": settings.token_endpoint, "flows": ["client-credentials"], "scopes": ["read"]])
        let add = try home.run("add", "jb", "bot", "--service-account", keyFile)
        try #require(add.status == 0, "\(add.stderr)")
        #expect(
            add.stderr.contains("added 'bot' (jb, service account, \(settings.sa_email); scopes: read)"),
            "\(add.stderr)")
        var requests = try log()
        #expect(
            requests.last?["scope"] as? String == "read" && claims(requests.last ?? [:])["scope"] as? String == "read")

        // A grant with a scope of its own, its key then replaced with the
        // hint's command (no --scope): the scopes it had are asked for again.
        try #require(try home.run("add", "jb", "bot", "--service-account", keyFile, "--scope", "write").status == 0)
        #expect(try log().last?["scope"] as? String == "read write")
        let replaced = try home.run("add", "jb", "bot", "--service-account", keyFile)
        #expect(replaced.status == 0, "\(replaced.stderr)")
        #expect(
            replaced.stderr.contains("replaced 'bot' (jb, service account, \(settings.sa_email); scopes: read write)"),
            "\(replaced.stderr)")
        requests = try log()
        #expect(requests.last?["scope"] as? String == "read write", "\(requests)")
        #expect(try home.listed()["bot"]?["scopes"] as? [String] == ["read", "write"])
    }

    @Test("a deleted key kills the grant, which is kept and says how to replace the key")
    func deletedKey() throws {
        try settings(["expires_in": 30])
        try #require(try home.run("add", "ci", "--service-account", keyFile).status == 0)
        try settings(["disable_key": true])
        let r = try home.run("token", "ci")
        #expect(r.status == 2 && r.stdout.isEmpty)
        #expect(
            r.stderr.contains(
                "grant 'ci' needs new credentials: getting a token for 'ci': the provider refused the service "
                    + "account's key: invalid_grant: Invalid JWT Signature."), "\(r.stderr)")
        #expect(r.stderr.contains("vault add ci ci --service-account KEY.json"))
        #expect(try home.listed()["ci"]?["state"] as? String == "dead")
        // Dead stays dead without asking the server again, and says why in
        // the words of its kind: it has no refresh token.
        let again = try home.run("token", "ci")
        let requests = try log().count
        #expect(again.status == 2 && requests == 2)
        #expect(
            again.stderr.contains(
                "grant 'ci' needs new credentials: the provider refused the service account's key (invalid_grant): "
                    + "the key was deleted or disabled"), "\(again.stderr)")
        #expect(!again.stderr.contains("refresh token"), "\(again.stderr)")

        // The name alone cannot authorize a machine grant again: it says what can.
        let alone = try home.run("add", "ci")
        #expect(alone.status == 64 && alone.stderr.contains("'vault refresh ci'"), "\(alone.stderr)")
        // The hint, run as printed with a key the server takes, brings it back.
        try settings(["disable_key": false])
        let replaced = try home.run("add", "ci", "ci", "--service-account", keyFile)
        #expect(replaced.status == 0, "\(replaced.stderr)")
        // Its tokens last 30 s here, inside the freshness margin: refreshable, not dead.
        #expect(try home.listed()["ci"]?["state"] as? String == "refreshable")
        #expect(try home.run("token", "ci").status == 0)
    }

    @Test(
        "doctor makes the token request check makes: authlib's 404 to a GET is no warning, and a deleted key fails while the token is fresh"
    )
    func doctor() throws {
        try #require(try home.run("add", "rfc7523", "ci", "--service-account", keyFile, "--scope", "read").status == 0)
        try #require(
            try home.run(
                "add", "rfc7523", "cc", "--flow", "client-credentials", "--client-id", "cc-secret",
                "--client-secret-file", secretFile()
            ).status == 0)
        // authlib's token endpoint answers a GET with 404: POST is its only method.
        let get = try CurlTransport().send(HTTPRequest(method: "GET", url: settings.token_endpoint))
        #expect(get.status == 404)
        let before = try log().count
        let healthy = try DoctorRun(try home.run("doctor", "--json"))
        #expect(healthy.result.status == 0, "\(healthy.result.stdout)")
        for name in ["ci", "cc"] {
            #expect(healthy.finding("endpoint", of: name) == nil, "\(healthy.result.stdout)")
            #expect(healthy.status("reachable", of: name) == "ok")
            #expect(healthy.detail("reachable", of: name).contains("answered a token request with HTTP 200"))
            #expect(healthy.status("clock", of: name) == "ok", "\(healthy.detail("clock", of: name))")
            #expect(healthy.status("credentials", of: name) == "ok", "\(healthy.detail("credentials", of: name))")
        }
        // One token request each, with the grant's own credentials and scopes: what check sends.
        let requests = try log().dropFirst(before)
        #expect(
            requests.map { $0["grant_type"] as? String ?? "" }.sorted() == [
                "client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer",
            ])
        #expect(requests.first { $0["client_auth"] as? String == "none" }?["scope"] as? String == "read")
        let human = try home.run("doctor")
        #expect(human.stderr == "vault: no problem found\n", "\(human.stdout)\(human.stderr)")

        // The key deleted at the provider while the stored token is fresh: found, as check finds it.
        try settings(["disable_key": true])
        #expect(try home.listed()["ci"]?["state"] as? String == "fresh")
        let dead = try DoctorRun(try home.run("doctor", "ci", "--json"))
        #expect(dead.result.status == 1)
        #expect(dead.status("credentials", of: "ci") == "fail")
        #expect(
            dead.detail("credentials", of: "ci").contains("invalid_grant"), "\(dead.detail("credentials", of: "ci"))")
        #expect(dead.remedy("credentials", of: "ci").contains("vault add rfc7523 ci --service-account KEY.json"))
        #expect(try home.listed()["ci"]?["state"] as? String == "dead")
        #expect(try home.run("check", "ci").status == 2)
        // From then on the vault says it, in the words of the grant's kind.
        let again = try DoctorRun(try home.run("doctor", "ci", "--json"))
        #expect(
            again.detail("state", of: "ci")
                == "the provider refused the service account's key (invalid_grant): the key was deleted or disabled")
        #expect(
            again.remedy("state", of: "ci") == "add a new key with 'vault add rfc7523 ci --service-account KEY.json'")
        #expect(!again.result.stdout.contains("refresh token"), "\(again.result.stdout)")
    }

    /// A file with the server's client secret for client credentials.
    func secretFile() throws -> String {
        let info = try JSONSerialization.jsonObject(with: Data(server.firstLine.utf8)) as? [String: Any]
        let path = home.path + "/cc-secret"
        home.write(path, (info?["client_secret"] as? String ?? "") + "\n")
        return path
    }

    @Test(
        "a clock ten minutes off is reported as the clock, and changes nothing",
        .enabled(if: FakeTime.installed, "needs libfaketime (Debian's faketime package)"))
    func clockSkew() throws {
        try settings(["expires_in": 30])
        try #require(try home.run("add", "ci", "--service-account", keyFile).status == 0)
        try #require(try home.run("refresh", "ci").status == 0)
        let before = try home.shown("ci")
        for (offset, word) in [("+10m", "ahead of"), ("-10m", "behind")] {
            var env = home.environment
            env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
            let r = try VaultProcess.start(
                ["-f", offset, VaultProcess.binary, "refresh", "ci"], environment: env, executable: FakeTime.wrapper
            ).wait()
            #expect(r.status == 1 && r.stdout.isEmpty, "\(r.stderr)")
            #expect(r.stderr.contains("seconds \(word) the provider's"), "\(r.stderr)")
            #expect(r.stderr.contains("set this machine's clock right"))
            #expect(try home.shown("ci") == before)
        }
        #expect(try home.listed()["ci"]?["state"] as? String != "dead")
    }

    /// Key files vault refuses; each must leave the vault as it was.
    enum BadFile: String, CaseIterable, CustomTestStringConvertible {
        case notJSON, noPrivateKey, pkcs1, encrypted, otherType, groupWritable, missing
        var testDescription: String { rawValue }
    }

    @Test("bad key files: exit 1, the reason, nothing stored", arguments: BadFile.allCases)
    func badKeyFiles(_ bad: BadFile) throws {
        let pem = home.path + "/sa.pem"
        let path = home.path + "/bad.json"
        func converted(_ args: [String]) throws -> String {
            let r = try VaultProcess.start(
                args + ["-in", pem], environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/openssl"
            ).wait()
            return r.stdout
        }
        let expected: String
        switch bad {
        case .notJSON:
            home.write(path, try String(contentsOfFile: pem, encoding: .utf8))
            expected = "bad.json is not a service account key file"
        case .noPrivateKey:
            try writeKeyFile(["private_key": NSNull()], to: path)
            expected = "bad.json has no 'private_key'"
        case .pkcs1:
            try writeKeyFile(["private_key": try converted(["pkey", "-traditional"])], to: path)
            expected = "is a PKCS#1 key (BEGIN RSA PRIVATE KEY); vault needs PKCS#8"
        case .encrypted:
            try writeKeyFile(["private_key": try converted(["pkcs8", "-topk8", "-passout", "pass:x"])], to: path)
            expected = "is encrypted with a password"
        case .otherType:
            try writeKeyFile(["type": "authorized_user"], to: path)
            expected = "holds credentials of type 'authorized_user', not a service account key"
        case .groupWritable:
            try writeKeyFile(["private_key": try String(contentsOfFile: pem, encoding: .utf8)], to: path)
            chmod(path, 0o660)
            expected = "bad.json is writable by group or others"
        case .missing:
            expected = "cannot open"
        }
        let before = home.snapshot()
        let r = try home.run("add", "ci", "--service-account", path)
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.contains(expected), "\(r.stderr)")
        #expect(!r.stderr.contains("MII"))
        if bad == .pkcs1 { #expect(r.stderr.contains("openssl pkcs8 -topk8 -nocrypt")) }
        let listed = try home.listed()
        #expect(home.snapshot() == before && listed.isEmpty)
        #expect(try log().isEmpty)
    }

    @Test("flags that do not go with a service account are usage errors")
    func usage() throws {
        for args in [
            ["add", "ci", "--service-account", keyFile, "--flow", "device"],
            ["add", "ci", "--service-account", keyFile, "--client-id", "x"],
            ["add", "rfc7523", "ci", "--subject", "u@example.com"],
            ["add", "ci", "--service-account", keyFile, "--scope", "a b"],
        ] {
            let r = try VaultProcess.run(args, environment: home.environment)
            #expect(r.status == 64, "\(args): \(r.stderr)")
        }
        #expect(try log().isEmpty)
    }

    @Test("remove --revoke revokes the access token and says the key stays valid")
    func revoke() throws {
        try #require(try home.run("add", "rfc7523", "ci", "--service-account", keyFile).status == 0)
        // check mints a new token with the key, as a refresh does.
        let check = try home.run("check", "ci")
        #expect(check.status == 0 && check.stderr.contains("'ci' is live"), "\(check.stderr)")
        let token = try home.run("token", "ci").stdout.trimmingCharacters(in: .newlines)
        #expect(try MachineSupport.status(base + "/userinfo", token: token) == 200)
        let r = try home.run("remove", "ci", "--revoke")
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("the service account's key stays valid at the provider"))
        #expect(r.stderr.contains("revoked the access token at the provider and removed 'ci'"))
        #expect(try MachineSupport.status(base + "/userinfo", token: token) == 401)
        #expect(try home.listed().isEmpty)
    }
}
