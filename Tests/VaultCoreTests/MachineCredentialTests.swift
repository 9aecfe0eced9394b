import Foundation
import Glibc
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore

/// RS256 assertions (RFC 7523), the key forms vault accepts and refuses,
/// Google's service-account key file, and what a listing keeps of them.
/// Signatures are checked against the openssl tool: PKCS#1 v1.5 is
/// deterministic, so vault's signature must equal openssl's byte for byte.
@Suite("machine credentials: RS256 assertions, keys and key files")
struct MachineCredentialTests {
    static let keyPath = FixtureServer.root.appendingPathComponent(
        "Tests/VaultCoreTests/Vectors/oauth1-test-rsa-key.pem"
    ).path
    let dir = TemporaryDirectory()

    /// `openssl ARGS`, with `stdin`; its output.
    @discardableResult
    func openssl(_ args: [String], stdin: String? = nil) throws -> ProcessResult {
        let r = try VaultProcess.start(
            args, environment: ["PATH": "/usr/bin:/bin"], stdin: stdin, executable: "/usr/bin/openssl"
        ).wait()
        try #require(r.status == 0, "openssl \(args.joined(separator: " ")): \(r.stderr)")
        return r
    }

    var pem: String { get throws { try String(contentsOfFile: Self.keyPath, encoding: .utf8) } }

    func part(_ jwt: String, _ n: Int) throws -> [String: Any] {
        let segment = String(jwt.split(separator: ".")[n])
        let bytes = try #require(Base64.decode(Array(segment.utf8), .urlSafeUnpadded))
        return try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    @Test("an assertion's RS256 signature is openssl's, and openssl verifies it")
    func signatureMatchesOpenSSL() throws {
        let claims = JWTAssertion.Claims(
            issuer: "ci@example.iam", subject: nil, audience: "https://oauth2.example/token", scope: "a b",
            now: Date(epochSeconds: 1_700_000_000))
        let jwt = try JWTAssertion.sign(claims, keyID: "k1", privateKeyPEM: try pem)
        let parts = jwt.split(separator: ".")
        try #require(parts.count == 3)
        let input = dir.path + "/input"
        let signature = dir.path + "/signature"
        try Data((parts[0] + "." + parts[1]).utf8).write(to: URL(fileURLWithPath: input))
        let ours = try #require(Base64.decode(Array(parts[2].utf8), .urlSafeUnpadded))
        try Data(ours).write(to: URL(fileURLWithPath: signature))
        try openssl(["dgst", "-sha256", "-sign", Self.keyPath, "-out", dir.path + "/theirs", input])
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir.path + "/theirs")) == Data(ours))
        try openssl(["pkey", "-in", Self.keyPath, "-pubout", "-out", dir.path + "/pub.pem"])
        let verified = try openssl([
            "dgst", "-sha256", "-verify", dir.path + "/pub.pem", "-signature", signature, input,
        ])
        #expect(verified.stdout.contains("Verified OK"))
    }

    @Test("an assertion carries alg, kid, iss, aud, scope, iat, a five-minute exp and a fresh jti")
    func claims() throws {
        let now = Date(epochSeconds: 1_700_000_000)
        let claims = JWTAssertion.Claims(
            issuer: "ci@example.iam", subject: "user@example.com", audience: "https://o.example/token",
            scope: "s1 s2", now: now)
        let a = try JWTAssertion.sign(claims, keyID: "k1", privateKeyPEM: try pem)
        let b = try JWTAssertion.sign(claims, keyID: nil, privateKeyPEM: try pem)
        let header = try part(a, 0)
        #expect(header["alg"] as? String == "RS256" && header["typ"] as? String == "JWT")
        let headerB = try part(b, 0)
        #expect(header["kid"] as? String == "k1" && headerB["kid"] == nil)
        let body = try part(a, 1)
        #expect(body["iss"] as? String == "ci@example.iam" && body["sub"] as? String == "user@example.com")
        #expect(body["aud"] as? String == "https://o.example/token" && body["scope"] as? String == "s1 s2")
        #expect(body["iat"] as? Int == 1_700_000_000 && body["exp"] as? Int == 1_700_000_300)
        let jti = try #require(body["jti"] as? String)
        let other = try part(b, 1)["jti"] as? String
        #expect(jti.count == 32 && jti != other)
        // Without a subject there is no sub claim (Google's libraries send none).
        let own = JWTAssertion.Claims(issuer: "i", subject: nil, audience: "https://a/t", now: now)
        let ownBody = try part(try JWTAssertion.sign(own, keyID: nil, privateKeyPEM: try pem), 1)
        #expect(ownBody["sub"] == nil)
    }

    /// Keys vault refuses, made by openssl from the committed test key.
    enum BadKey: String, CaseIterable, CustomTestStringConvertible {
        case pkcs1, encryptedPKCS8, encryptedPKCS1, ec, short, garbage, publicKey
        var testDescription: String { rawValue }
    }

    func make(_ kind: BadKey) throws -> String {
        let out = dir.path + "/\(kind.rawValue).pem"
        switch kind {
        case .pkcs1: try openssl(["pkey", "-in", Self.keyPath, "-traditional", "-out", out])
        case .encryptedPKCS8:
            try openssl(["pkcs8", "-topk8", "-in", Self.keyPath, "-passout", "pass:pw", "-out", out])
        case .encryptedPKCS1:
            try openssl(["rsa", "-in", Self.keyPath, "-traditional", "-aes256", "-passout", "pass:pw", "-out", out])
        case .ec: try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", out])
        case .short: try openssl(["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", out])
        case .garbage: return "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n"
        case .publicKey: try openssl(["pkey", "-in", Self.keyPath, "-pubout", "-out", out])
        }
        return try String(contentsOfFile: out, encoding: .utf8)
    }

    @Test("keys that cannot sign RS256 are refused, saying what to do", arguments: BadKey.allCases)
    func refusedKeys(_ kind: BadKey) throws {
        let expected: [BadKey: String] = [
            .pkcs1: "is a PKCS#1 key (BEGIN RSA PRIVATE KEY)", .encryptedPKCS8: "is encrypted with a password",
            .encryptedPKCS1: "is encrypted with a password", .ec: "is not an RSA key",
            .short: "is a 1024-bit RSA key; at least 2048 bits are needed",
            .garbage: "cannot be read as a private key", .publicKey: "is not a PEM private key",
        ]
        let text = try make(kind)
        let error = #expect(throws: VaultError.self) { try JWTAssertion.checkPrivateKey(text, source: "KEY") }
        #expect(error?.code == .invalidInput)
        #expect(error?.reason.hasPrefix("KEY ") == true, "\(error?.reason ?? "")")
        #expect(error?.reason.contains(expected[kind]!) == true, "\(error?.reason ?? "")")
        if kind == .pkcs1 { #expect(error?.remedy == .pkcs8Key(from: .pkcs1)) }
        // Nothing signs with it either, and no secret reaches the message.
        #expect(throws: VaultError.self) {
            try JWTAssertion.sign(
                JWTAssertion.Claims(issuer: "i", subject: nil, audience: "https://a/t", now: Date()), keyID: nil,
                privateKeyPEM: text)
        }
        #expect(error?.reason.contains("MII") == false)
    }

    func keyFile(_ fields: [String: Any]) throws -> SecureBytes {
        try SecureBytes(copying: [UInt8](try JSONSerialization.data(withJSONObject: fields)))
    }

    @Test("Google's service-account key file: read, and each bad one refused with its reason")
    func serviceAccountKeyFiles() throws {
        let good: [String: Any] = [
            "type": "service_account", "project_id": "p", "private_key_id": "abc123", "private_key": try pem,
            "client_email": "ci@p.iam.gserviceaccount.com", "client_id": "1",
            "token_uri": "https://oauth2.googleapis.com/token",
        ]
        let key = try ServiceAccountKey(json: try keyFile(good), source: "key.json")
        #expect(key.clientEmail == "ci@p.iam.gserviceaccount.com" && key.privateKeyID == "abc123")
        #expect(key.tokenURI == "https://oauth2.googleapis.com/token")
        var cases: [(SecureBytes, String)] = [
            (try SecureBytes(copying: Array("not json".utf8)), "is not a service account key file"),
            (try SecureBytes(copying: Array("[1]".utf8)), "is not a service account key file"),
            (try keyFile(good.filter { $0.key != "private_key" }), "has no 'private_key'"),
            (try keyFile(good.filter { $0.key != "client_email" }), "has no usable 'client_email'"),
            (try keyFile(["type": "authorized_user", "refresh_token": "r"]), "of type 'authorized_user'"),
            (try keyFile(good.merging(["token_uri": "http://evil.example/token"]) { $1 }), "token_uri"),
            (try keyFile(good.merging(["private_key": try make(.pkcs1)]) { $1 }), "PKCS#1"),
            (try keyFile(good.merging(["private_key": try make(.encryptedPKCS8)]) { $1 }), "encrypted"),
        ]
        cases.append((try keyFile(good.merging(["private_key_id": "a\u{1b}[2J"]) { $1 }), "private_key_id"))
        for (bytes, reason) in cases {
            let error = #expect(throws: VaultError.self) { try ServiceAccountKey(json: bytes, source: "key.json") }
            #expect(error?.code == .invalidInput)
            #expect(error?.reason.contains(reason) == true, "\(error?.reason ?? "") lacks \(reason)")
        }
    }

    @Test(
        "a listing reads a machine grant without its private key; a full read keeps it, and old grants read as before")
    func listingDropsTheKey() throws {
        var config = ProviderConfiguration(tokenEndpoint: "https://o.example/token", clientID: "ci@p.iam")
        config.clientPrivateKey = try pem
        config.clientKeyID = "k1"
        config.subject = "user@example.com"
        config.scopes = ["s1", "s2"]
        let grant = Grant(
            provider: "google", kind: .serviceAccount, accessToken: "at", providerConfiguration: config,
            createdAt: Date(epochSeconds: 5))
        let sealed = try Payload(name: "ci", grant: grant).sealedBytes()
        let json = sealed.withUnsafeBytes { Data($0) }
        let full = json.withUnsafeBytes { Payload.read($0) }
        #expect(full?.grant == grant)
        let listed = json.withUnsafeBytes { Payload.read($0, secrets: false) }
        // A listing keeps of the configuration what the grant's state reads.
        #expect(listed?.grant?.providerConfiguration == ProviderConfiguration(tokenEndpoint: "", clientID: ""))
        #expect(listed?.grant?.kind == .serviceAccount && listed?.grant?.accessToken == "")
        #expect(listed?.grant?.canAuthorize(at: Date(epochSeconds: 6)) == true)
        // The Codable form agrees with the fast reader.
        #expect(Payload.decodedWithFoundation([UInt8](json)) == full)
        let old = #"{"name":"n","grant":{"provider":"p","created_at":1,"provider_config":{"client_id":"c"}}}"#
        #expect(Array(old.utf8).withUnsafeBytes { Payload.read($0) }?.grant?.kind == .oauth2)
    }

    @Test("a machine grant is refreshable while it has credentials, whatever its access token")
    func machineState() {
        let now = Date(epochSeconds: 1000)
        var g = Grant(
            provider: "p", kind: .clientCredentials, accessToken: "a", expiresAt: Date(epochSeconds: 1010),
            providerConfiguration: ProviderConfiguration(tokenEndpoint: "https://a/t"), createdAt: now)
        #expect(g.state(at: now) == .refreshable && g.canAuthorize(at: now))
        g.dead = true
        #expect(g.state(at: now) == .dead && !g.canAuthorize(at: now))
    }

    @Test("the Date header's IMF-fixdate is read; other forms are not guessed at")
    func httpDates() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == Date(epochSeconds: 784_111_777))
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 23:59:59 GMT") == Date(epochSeconds: 1_709_251_199))
        for bad in [
            "", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 CET", "Sun, 06 Foo 1994 08:49:37 GMT",
        ] {
            #expect(HTTPDate.parse(bad) == nil, "\(bad)")
        }
    }
}

/// Minting, unit by unit, over a scripted transport: the requests each kind
/// sends, what a refusal means, and when the clock is blamed.
@Suite("machine grants: minting and its refusals")
struct MachineMintTests {
    static let pem = (try? String(contentsOfFile: MachineCredentialTests.keyPath, encoding: .utf8)) ?? ""
    let now = Date(epochSeconds: 1_800_000_000)

    func grant(_ kind: Grant.Kind, method: String? = nil) -> Grant {
        var config = ProviderConfiguration(
            tokenEndpoint: "https://as.example/token", clientID: kind == .serviceAccount ? "ci@p.iam" : "client",
            clientSecret: kind == .clientCredentials && method != "private_key_jwt" ? "s3cret" : nil,
            tokenEndpointAuthMethod: kind == .serviceAccount ? "none" : method)
        if kind == .serviceAccount || method == "private_key_jwt" { config.clientPrivateKey = Self.pem }
        config.scopes = ["a", "b"]
        return Grant(provider: "p", kind: kind, providerConfiguration: config, createdAt: now)
    }

    func form(_ body: String) -> [String: String] {
        Dictionary(FormEncoding.decode(Substring(body)), uniquingKeysWith: { a, _ in a })
    }

    /// An HTTP date `offset` seconds from `now`.
    func date(_ offset: Int64) -> String {
        let days = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
        let t = now.epochSeconds + offset
        var tm = Glibc.tm()
        var seconds = time_t(t)
        gmtime_r(&seconds, &tm)
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        return String(
            format: "%@, %02d %@ %d %02d:%02d:%02d GMT", days[Int((t / 86400) % 7)], tm.tm_mday, months[Int(tm.tm_mon)],
            tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec)
    }

    let ok = (
        200, #"{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"ignored"}"#,
        [(String, String)]()
    )

    @Test("each kind sends its grant type, its client authentication and the scopes; no refresh token is kept")
    func requests() throws {
        for (g, type, auth) in [
            (grant(.serviceAccount), "urn:ietf:params:oauth:grant-type:jwt-bearer", "none"),
            (grant(.clientCredentials), "client_credentials", "basic"),
            (grant(.clientCredentials, method: "client_secret_post"), "client_credentials", "post"),
            (grant(.clientCredentials, method: "private_key_jwt"), "client_credentials", "jwt"),
        ] {
            let fake = FakeTransport([ok])
            let next = try MachineGrants.mint(g, name: "m", transport: fake, now: now)
            #expect(
                next.accessToken == "at-1" && next.refreshToken == nil
                    && next.expiresAt == Date(epochSeconds: 1_800_003_600))
            #expect(next.refreshTokenRotates == false && next.scopes == ["a", "b"])
            let sent = try #require(fake.requests.first)
            let f = form(sent.body)
            #expect(f["grant_type"] == type && f["scope"] == "a b")
            #expect((sent.headers["authorization"] != nil) == (auth == "basic"), "\(auth)")
            #expect((f["client_secret"] == "s3cret") == (auth == "post"), "\(auth)")
            #expect((f["client_assertion_type"] != nil) == (auth == "jwt"), "\(auth)")
            #expect(
                (f["assertion"] != nil) == (auth == "none")
                    && (f["client_id"] == nil) == (auth != "post" && auth != "jwt"))
            #expect(!sent.body.contains("PRIVATE"))
        }
    }

    @Test("invalid_grant is a refusal; with the provider's clock far off it is the clock instead, and says which way")
    func refusalsAndClock() throws {
        let refused = #"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#
        func mint(_ answer: (Int, String, [(String, String)])) -> VaultError? {
            #expect(throws: VaultError.self) {
                try MachineGrants.mint(grant(.serviceAccount), name: "m", transport: FakeTransport([answer]), now: now)
            }
        }
        // The provider's clock agrees: the key was refused.
        #expect(mint((400, refused, [("Date", date(5))]))?.code == .refused)
        #expect(mint((400, refused, []))?.code == .refused)
        // Ten minutes apart, either way: the clock, not the key.
        let ahead = mint((400, refused, [("Date", date(-600))]))
        #expect(ahead?.code == .providerError && ahead?.reason.contains("600 seconds ahead of the provider's") == true)
        let behind = mint((401, #"{"error":"invalid_client"}"#, [("Date", date(600))]))
        #expect(behind?.code == .providerError && behind?.reason.contains("600 seconds behind") == true)
        #expect(behind?.remedy == .setClock)
        // No Date header, but the answer is about the assertion's time.
        let google =
            #"{"error":"invalid_grant","error_description":"Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."}"#
        let words = mint((400, google, []))
        #expect(words?.code == .providerError && words?.reason.contains("clock looks wrong") == true)
        // A secret-authenticated request never blames the clock.
        let secret = #expect(throws: VaultError.self) {
            try MachineGrants.mint(
                grant(.clientCredentials), name: "m",
                transport: FakeTransport([(400, refused, [("Date", date(-600))])]),
                now: now)
        }
        #expect(secret?.code == .refused)
        // 5xx stays transient whatever the clock.
        #expect(mint((503, "", [("Date", date(-600))]))?.code == .transient)
    }
}
