import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultKit
import VaultTestSupport

/// What curl (a client vault did not write) got for a request whose header
/// lines came from `vault header`, read from its stdin (`-H @-`), so no
/// token is on its command line.
extension Home {
    /// `rfcdpop`: dpop_server.py as a provider that binds every grant.
    func dpopProvider(at server: FixtureServer) throws {
        try providerFile(
            "rfcdpop",
            [
                "issuer": server.base, "client_id": "dpop-client", "dpop_bound_access_tokens": true,
                "scopes": ["read"],
            ])
    }

    /// `vault add rfcdpop NAME`, authorized by the fixture's scripted browser.
    func addAtDPoPFixture(_ name: String) throws -> ProcessResult {
        var env = environment
        env["BROWSER"] = "python3 \(FixtureServer.root.path)/Tools/testservers/dpop_server.py browse"
        return try VaultProcess.run(["add", "rfcdpop", name], environment: env)
    }
}

struct CurlAnswer {
    let status: Int
    let dpopNonce: String?

    static func get(_ url: String, headers: String) throws -> CurlAnswer {
        let r = try VaultProcess.start(
            ["-s", "-o", "/dev/null", "-D", "-", "-H", "@-", url], environment: ["PATH": "/usr/bin:/bin"],
            stdin: headers, executable: "/usr/bin/curl"
        ).wait()
        let lines = r.stdout.split(whereSeparator: \.isNewline)
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        let nonce = lines.first { $0.lowercased().hasPrefix("dpop-nonce:") }
            .map { String($0.dropFirst("dpop-nonce:".count)).trimmingCharacters(in: .whitespaces) }
        return CurlAnswer(status: status, dpopNonce: nonce)
    }
}

/// Proofs that `vault header` printed, checked by dpop_server.py's
/// verifier (jwcrypto, RFC 9449 section 4.3: typ, alg, the key and its
/// signature, jti unique among them, htm, htu, iat, ath, nonce, the bound
/// key's thumbprint). Its verdicts, one per proof.
func checkedProofs(_ proofs: [(header: String, method: String, url: String, nonce: String?)], jkt: String) throws
    -> [String]
{
    var list: [[String: Any]] = []
    for p in proofs {
        let lines = p.header.split(whereSeparator: \.isNewline)
        let token = lines.first { $0.hasPrefix("Authorization: DPoP ") }.map { String($0.dropFirst(20)) } ?? ""
        let proof = lines.first { $0.hasPrefix("DPoP: ") }.map { String($0.dropFirst(6)) } ?? ""
        var entry: [String: Any] = ["proof": proof, "method": p.method, "url": p.url, "token": token]
        if let nonce = p.nonce { entry["nonce"] = nonce }
        list.append(entry)
    }
    let input = try JSONSerialization.data(withJSONObject: ["jkt": jkt, "proofs": list])
    let r = try VaultProcess.start(
        ["\(FixtureServer.root.path)/Tools/testservers/dpop_server.py", "check"],
        environment: ["PATH": "/usr/bin:/bin"], stdin: String(decoding: input, as: UTF8.self),
        executable: "/usr/bin/python3"
    ).wait()
    return r.stdout.split(whereSeparator: \.isNewline).map(String.init)
}

extension AddFlowTests {
    /// The userinfo endpoint's status for the access token alone, as a bearer token.
    func bearerStatus(_ url: String, _ token: String) throws -> Int {
        try CurlTransport().send(HTTPRequest(method: "GET", url: url, headers: [("Authorization", "Bearer \(token)")]))
            .status
    }

    @Test(
        "glewlwyd with DPoP: add --dpop binds the grant to an ES256 or EdDSA key; refresh, check and header | curl prove it",
        arguments: [("dpopes", "ES256"), ("dpoped", "EdDSA")])
    func glewlwydDPoP(_ name: String, _ algorithm: String) throws {
        let extra: [String: Any] = algorithm == "EdDSA" ? ["dpop_signing_alg_values_supported": ["EdDSA"]] : [:]
        let issuer = try featureProvider(name, ["dpop"], extra: extra)
        let grant = name + "-grant"
        let r = try add([name, grant, "--dpop"])
        #expect(r.status == 0, "\(r.stderr)")
        let g = try #require(try shown(grant))
        #expect(g["token_type"] as? String == "DPoP")
        #expect(g["dpop_alg"] as? String == algorithm)
        let jkt = try #require(g["dpop_jkt"] as? String)
        let token = try #require(g["access_token"] as? String)
        let userinfo = issuer + "/userinfo"
        // The token alone is no bearer token.
        #expect(try bearerStatus(userinfo, token) == 401)
        // vault check calls userinfo with a proof.
        let check = try home.run("check", grant)
        #expect(check.status == 0, "\(check.stderr)")

        let first = try home.run("header", grant, "--url", userinfo)
        #expect(first.status == 0, "\(first.stderr)")
        let twoLines = first.stdout.hasPrefix("Authorization: DPoP ") && first.stdout.contains("\nDPoP: ")
        #expect(twoLines, "vault header did not print the DPoP authorization and proof")
        // Compared aside, so that a failure prints no token.
        let accepted1 = try CurlAnswer.get(userinfo, headers: first.stdout).status == 200
        #expect(accepted1)

        // A refresh spends the refresh token with a proof: new tokens, the same key.
        let refresh = try home.run("refresh", grant)
        #expect(refresh.status == 0, "\(refresh.stderr)")
        let after = try #require(try shown(grant))
        let renewed = after["access_token"] as? String != token
        #expect(renewed, "the refresh kept the old access token")
        #expect(after["token_type"] as? String == "DPoP")
        #expect(after["dpop_jkt"] as? String == jkt)
        let second = try home.run("header", grant, "--method", "GET", "--url", userinfo + "?x=1")
        // Compared aside, so that a failure prints no token.
        let accepted2 = try CurlAnswer.get(userinfo + "?x=1", headers: second.stdout).status == 200
        #expect(accepted2)

        let verdicts = try checkedProofs(
            [(first.stdout, "GET", userinfo, nil), (second.stdout, "GET", userinfo + "?x=1", nil)], jkt: jkt)
        #expect(verdicts == ["ok \(algorithm)", "ok \(algorithm)"])
        // The same proof twice: the verifier's own jti rule refuses the second.
        let replay = try checkedProofs(
            [(first.stdout, "GET", userinfo, nil), (first.stdout, "GET", userinfo, nil)], jkt: jkt)
        #expect(replay == ["ok \(algorithm)", "bad jti replayed"])
    }

    @Test(
        "glewlwyd requiring DPoP nonces: the token and userinfo endpoints' challenges are answered; header --dpop-nonce"
    )
    func glewlwydDPoPNonce() throws {
        let issuer = try featureProvider("dpopnonce", ["dpop-nonce"])
        let r = try add(["dpopnonce", "nonced", "--dpop"])
        #expect(r.status == 0, "\(r.stderr)")
        let g = try #require(try shown("nonced"))
        #expect(g["token_type"] as? String == "DPoP")
        let jkt = try #require(g["dpop_jkt"] as? String)
        #expect(try home.run("refresh", "nonced").status == 0)
        #expect(try home.run("check", "nonced").status == 0)
        let userinfo = issuer + "/userinfo"
        let bare = try home.run("header", "nonced", "--url", userinfo)
        let refused = try CurlAnswer.get(userinfo, headers: bare.stdout)
        #expect(refused.status == 401)
        let nonce = try #require(refused.dpopNonce)
        let again = try home.run("header", "nonced", "--url", userinfo, "--dpop-nonce", nonce)
        #expect(again.status == 0, "\(again.stderr)")
        // Compared aside, so that a failure prints no token.
        let accepted3 = try CurlAnswer.get(userinfo, headers: again.stdout).status == 200
        #expect(accepted3)
        let verdicts = try checkedProofs([(again.stdout, "GET", userinfo, nonce)], jkt: jkt)
        #expect(verdicts == ["ok ES256"])
    }

    @Test("glewlwyd with pushed requests and DPoP: the pushed request carries dpop_jkt and a proof, the code is bound")
    func glewlwydDPoPPushed() throws {
        let issuer = try featureProvider("dpoppar", ["par", "dpop"])
        let r = try add(["dpoppar", "pushedbound", "--dpop"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("\(issuer)/auth?client_id=\(s.public_client)&request_uri="), "\(r.stderr)")
        let g = try #require(try shown("pushedbound"))
        #expect(g["token_type"] as? String == "DPoP")
        let header = try home.run("header", "pushedbound", "--url", issuer + "/userinfo")
        // Compared aside, so that a failure prints no token.
        let accepted4 = try CurlAnswer.get(issuer + "/userinfo", headers: header.stdout).status == 200
        #expect(accepted4)
    }

    @Test("header refuses what a DPoP proof cannot cover, and --dpop-nonce on a bearer grant")
    func dpopHeaderUsage() throws {
        _ = try featureProvider("dpopuse", ["dpop"])
        #expect(try add(["dpopuse", "bounduse", "--dpop"]).status == 0)
        for args in [
            ["header", "bounduse"], ["header", "bounduse", "--url", "ftp://x.example/"],
            ["header", "bounduse", "--url", "https://x.example/", "--method", "get"],
            ["header", "bounduse", "--url", "https://x.example/", "--dpop-nonce", "a b"],
            // The bound token goes with its proof over https only (plain http to this machine).
            ["header", "bounduse", "--url", "http://x.example/"],
        ] {
            let r = try home.run(args)
            #expect(r.status == 64, "\(args): \(r.stderr)")
            #expect(r.stdout.isEmpty)
        }
        try localProvider()
        #expect(try add(["local", "plain"]).status == 0)
        #expect(try home.run("header", "plain", "--dpop-nonce", "n").status == 64)
    }
}

/// DPoP against a provider of the final RFC 9449's rules (dpop_server.py),
/// whose proofs are all checked by jwcrypto: nonces demanded at the token
/// endpoint and the resource, codes bound by `dpop_jkt`, refresh tokens
/// bound to the key.
@Suite("DPoP against a provider of RFC 9449's final rules", .serialized)
struct DPoPFixtureTests {
    let server: FixtureServer
    let home = Home()

    init() throws {
        server = try FixtureServer(script: "dpop_server.py", arguments: ["serve"])
        try home.initKeyfileVault()
        // dpop_bound_access_tokens: every grant is bound, without --dpop.
        try home.dpopProvider(at: server)
    }

    func proofs() throws -> [[String: Any]] {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: server.base + "/__proofs"))
        return try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [[String: Any]] ?? []
    }

    @Test("add, refresh, check and header | curl: every proof passes, nonce challenges aside")
    func wholeLife() async throws {
        let r = try home.addAtDPoPFixture("bound")
        #expect(r.status == 0, "\(r.stderr)")
        let show = try home.run("show", "bound", "--json")
        let g = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        #expect(g["token_type"] as? String == "DPoP")
        #expect(g["dpop_alg"] as? String == "ES256")
        // The account was asked of userinfo with a proof.
        #expect(g["account"] as? String == "dpop@example.com")
        for _ in 0..<2 { #expect(try home.run("refresh", "bound").status == 0) }
        #expect(try home.run("check", "bound").status == 0)
        // A narrowed token (RFC 8707) is asked for with a proof too, and the
        // refresh token that request rotated is kept: the next refresh works.
        let narrowed = try home.run("token", "bound", "--resource", "https://api.example/")
        #expect(narrowed.status == 0, "\(narrowed.stderr)")
        #expect(try home.run("refresh", "bound").status == 0)
        let url = server.base + "/userinfo"
        let first = try home.run("header", "bound", "--url", url)
        let challenge = try CurlAnswer.get(url, headers: first.stdout)
        #expect(challenge.status == 401)
        let nonce = try #require(challenge.dpopNonce)
        let second = try home.run("header", "bound", "--url", url, "--dpop-nonce", nonce)
        // Compared aside, so that a failure prints no token.
        let accepted5 = try CurlAnswer.get(url, headers: second.stdout).status == 200
        #expect(accepted5)

        // An app: VaultKit's authorize adds the token and a proof for the
        // request, and the server's nonce when asked again with it.
        let secret = try SecureBytes(copying: Array(Data(contentsOf: URL(fileURLWithPath: home.path + "/key"))))
        let store = try await VaultGrantStore.open(
            at: VaultLocation(directory: home.path + "/vault", configDirectory: home.path + "/config"),
            key: .keyfile(try Keyfile.decode(secret)))
        let session = TokenSession(store: store, transport: CurlTransport())
        var request = HTTPRequest(method: "GET", url: url + "?from=app")
        try await session.authorize(&request, with: "bound")
        #expect(request.headers.contains { $0.name == "Authorization" && $0.value.hasPrefix("DPoP ") })
        let refusal = try await CurlTransport().send(request)
        #expect(refusal.status == 401)
        let appNonce = try #require(refusal.header("dpop-nonce"))
        try await session.authorize(&request, with: "bound", dpopNonce: appNonce)
        #expect(request.headers.filter { $0.name == "DPoP" }.count == 1)
        #expect(try await CurlTransport().send(request).status == 200)

        let seen = try proofs()
        let failures = seen.filter { ($0["ok"] as? Bool) != true }.compactMap { $0["why"] as? String }
        // The only refusals are the nonce challenges each new process meets once per server.
        #expect(Set(failures) == ["use_dpop_nonce"], "\(failures)")
        let passed = seen.filter { ($0["ok"] as? Bool) == true }
        // The code exchange, three refreshes and the narrowed token's request.
        #expect(passed.filter { $0["endpoint"] as? String == "token" }.count == 5)
        // add (the account), check, curl with the second header, and the app's second request.
        #expect(passed.filter { $0["endpoint"] as? String == "userinfo" }.count == 4)
    }

    /// RFC 9449 section 5: a provider may answer a request made with a
    /// proof with a bearer access token, binding the refresh token alone.
    /// The grant keeps the key for its refreshes and sends the access token
    /// as a bearer token; where the provider binds every grant, such an
    /// answer is a downgrade, refused.
    @Test("a bearer access token with a bound refresh token: the key signs each refresh; a downgrade is refused")
    func bearerAccessToken() throws {
        try home.providerFile(
            "rfchalf", ["issuer": server.base, "client_id": "bearer-client", "scopes": ["read"]])
        var env = home.environment
        env["BROWSER"] = "python3 \(FixtureServer.root.path)/Tools/testservers/dpop_server.py browse"
        let r = try VaultProcess.run(["add", "rfchalf", "half", "--dpop"], environment: env)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.contains("only the refresh token is bound"), "\(r.stderr)")
        let show = try home.run("show", "half", "--json")
        let g = try #require(try JSONSerialization.jsonObject(with: Data(show.stdout.utf8)) as? [String: Any])
        #expect(g["token_type"] as? String == "Bearer")
        #expect(g["dpop_alg"] as? String == "ES256")
        // The account was asked of userinfo with the Bearer scheme, which the fixture alone accepts.
        #expect(g["account"] as? String == "dpop@example.com")
        // Each refresh spends a refresh token bound to the key: only a proof of it gets a new one.
        for _ in 0..<2 {
            let refreshed = try home.run("refresh", "half")
            #expect(refreshed.status == 0, "\(refreshed.stderr)")
        }
        #expect(try home.run("check", "half").status == 0)
        let url = server.base + "/userinfo"
        let header = try home.run("header", "half", "--url", url)
        #expect(header.status == 0, "\(header.stderr)")
        #expect(header.stdout.hasPrefix("Authorization: Bearer "))
        #expect(!header.stdout.contains("DPoP"))
        let accepted = try CurlAnswer.get(url, headers: header.stdout).status == 200
        #expect(accepted)

        // A provider file that says every grant is bound: the bearer answer is refused, nothing stored.
        try home.providerFile(
            "rfcstrict",
            [
                "issuer": server.base, "client_id": "bearer-client", "scopes": ["read"],
                "dpop_bound_access_tokens": true,
            ])
        let refused = try VaultProcess.run(["add", "rfcstrict", "strict"], environment: env)
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("bearer access token"), "\(refused.stderr)")
        #expect(try home.run("show", "strict").status != 0)

        let seen = try proofs()
        let failures = seen.filter { ($0["ok"] as? Bool) != true }.compactMap { $0["why"] as? String }
        #expect(Set(failures).isSubset(of: ["use_dpop_nonce"]), "\(failures)")
        let passed = seen.filter { ($0["ok"] as? Bool) == true }
        // Two code exchanges and two refreshes, each with a proof jwcrypto accepted.
        #expect(passed.filter { $0["endpoint"] as? String == "token" }.count == 4)
    }
}

/// A grant bound to a DPoP key, added on one machine, is refreshed and used
/// on another after a sync: the key travels inside the encrypted grant,
/// and the provider (dpop_server.py, which binds refresh tokens to the key)
/// takes the other machine's proofs.
@Suite("DPoP keys travel by sync")
final class DPoPSyncTests {
    let dir = TemporaryDirectory()
    let a = Home()
    let b = Home()

    @Test("the bound grant refreshes and signs on the machine that joined")
    func boundGrantSyncs() throws {
        let server = try FixtureServer(script: "dpop_server.py", arguments: ["serve"])
        let dav = try WebDAVStore(in: dir.path)
        try a.initKeyfileVault()
        b.extra["VAULT_KEYFILE"] = a.path + "/key"
        for home in [a, b] {
            home.extra["VAULT_AGENT"] = "off"
            try home.dpopProvider(at: server)
        }
        let added = try a.addAtDPoPFixture("bound")
        try #require(added.status == 0, "\(added.stderr)")
        let remote = try a.run("remote", "set", dav.url, "--user", "vault", "--password-file", dav.passwordFile)
        try #require(remote.status == 0, "\(remote.stderr)")
        try #require(try a.run("sync").status == 0)
        let joined = try b.run("join", dav.url, "--user", "vault", "--password-file", dav.passwordFile)
        try #require(joined.status == 0, "\(joined.stderr)")

        func jkt(_ home: Home) throws -> String? {
            let r = try home.run("show", "bound", "--json")
            return (try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])?["dpop_jkt"]
                as? String
        }
        #expect(try jkt(b) != nil && jkt(b) == jkt(a))
        let refreshed = try b.run("refresh", "bound")
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        let url = server.base + "/userinfo"
        let first = try b.run("header", "bound", "--url", url)
        let nonce = try #require(try CurlAnswer.get(url, headers: first.stdout).dpopNonce)
        let second = try b.run("header", "bound", "--url", url, "--dpop-nonce", nonce)
        // Compared aside, so that a failure prints no token.
        let accepted6 = try CurlAnswer.get(url, headers: second.stdout).status == 200
        #expect(accepted6)
        // Back on the first machine after a sync: the refresh token the other rotated works here,
        // once the other, which holds the grant's refreshes, has handed them over at its next sync
        // (docs/sync.md, "Refresh rights while the store is away").
        try #require(try b.run("sync").status == 0)
        try #require(try a.run("sync").status == 0)
        let asked = try a.run("refresh", "bound")
        #expect(asked.status == 75 && asked.stderr.contains("holds the right to refresh 'bound'"), "\(asked.stderr)")
        try #require(try b.run("sync").status == 0)
        #expect(try a.run("refresh", "bound").status == 0)
    }
}
