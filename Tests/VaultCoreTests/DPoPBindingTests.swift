import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore

/// What RFC 9449 asks of a client in the cases the DPoP tests leave out:
/// bearer answers to requests made with a proof, token files that name a
/// DPoP token, and the key's private half in descriptions.
@Suite("DPoP: bearer answers, imports, the key's description and nonces")
struct DPoPBindingTests {
    let dir = TemporaryDirectory()

    /// The device-flow provider of `DeviceFlowTests`.
    func deviceProvider() throws -> Provider { try DeviceFlowTests().provider() }

    /// RFC 9449 section 5: a server may answer a request made with a proof
    /// with a bearer access token; for a public client's refresh token this
    /// DPoP-binds the refresh token alone. The grant must keep the key that
    /// refresh token is bound to, or its next refresh carries no proof and
    /// is refused (invalid_grant: the grant dies).
    @Test("a bearer access token with a refresh token, asked for with a proof, keeps the key for the refresh")
    func bearerAnswerKeepsKeyForRefreshToken() throws {
        let key = try DPoPKey.generate()
        let fake = FakeTransport([
            (200, #"{"device_code":"d","user_code":"U","verification_uri":"https://id.example/go","interval":1}"#, []),
            (200, #"{"access_token":"at","token_type":"Bearer","expires_in":3600,"refresh_token":"rt"}"#, []),
        ])
        var request = AuthorizationRequest(provider: try deviceProvider(), flow: .device, timeout: 30)
        request.dpopKey = key
        let authorizer = Authorizer(transport: fake, ui: DeviceFlowTests.RecordingUI(), sleep: { _ in })
        let grant = try authorizer.authorize(request)
        // The code exchange carried a proof of the key: the server may have bound the refresh token to it.
        #expect(fake.requests.last?.headers["dpop"] != nil)
        #expect(grant.refreshToken == "rt")
        let kept = grant.dpopKey?.thumbprint == key.thumbprint
        #expect(kept, "the key the refresh token may be bound to is dropped")
    }

    /// A bound grant whose refresh was answered with a bearer access token
    /// (the key kept for the refresh token): the access token is a bearer
    /// token, to be sent with the Bearer scheme (RFC 6750), not as a DPoP
    /// token (RFC 9449 section 7.1), which a bearer-only resource refuses.
    @Test("a bearer access token of a bound grant is sent with the Bearer scheme")
    func bearerTokenOfBoundGrantUsesBearerScheme() throws {
        let vault = try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
        var g = TestKeys.grant(token: "old")
        g.dpopKey = try DPoPKey.generate()
        g.tokenType = "DPoP"
        _ = try vault.save(g, as: "work")
        let fake = FakeTransport([
            (200, #"{"access_token":"plain","token_type":"Bearer","expires_in":3600,"refresh_token":"r2"}"#, [])
        ])
        let fresh = try TokenRefresher(vault: vault, transport: fake).freshGrant("work", forceRefresh: true)
        #expect(fresh.grant.tokenType == "Bearer")
        let bound = fresh.grant.dpopKey != nil
        #expect(bound)  // right: the refresh token stays bound
        let scheme = try fresh.grant.authorizationHeaders(url: "https://api.example/x", at: Date()).first?.value
            .split(separator: " ").first.map(String.init)
        #expect(scheme == "Bearer", "a bearer access token is sent with the \(scheme ?? "") scheme")
    }

    /// A token file that says `token_type` DPoP holds a token bound to a
    /// key vault does not have: it cannot be used (a resource refuses it as
    /// a bearer token, RFC 9449 section 7.2), and vault would send it with
    /// `Authorization: Bearer` anyway.
    @Test("an imported token file with token_type DPoP is refused: no key comes with it")
    func importOfDPoPTokenRefused() throws {
        let json = #"{"provider":"p","access_token":"a","refresh_token":"r","token_type":"DPoP"}"#
        let bytes = try SecureBytes(copying: Array(json.utf8))
        let imported = Result { () throws(VaultError) in try TokenResponse(json: bytes).importedGrant(now: Date()) }
        // Refused is the outcome wanted; an imported grant is the bug.
        if case .success(let grant) = imported {
            let scheme = try grant.authorizationHeaders(url: "https://api.example/x", at: Date()).first?.value
                .split(separator: " ").first.map(String.init)
            Issue.record("imported without a key; vault would send it with the \(scheme ?? "") scheme")
        }
    }

    /// The private key is a secret: a description of the key (string
    /// interpolation, `dump`, a failed `#expect` comparing grants) must not
    /// print it.
    @Test("a DPoP key's description does not carry its private key")
    func descriptionHidesPrivateKey() throws {
        let key = try DPoPKey.generate()
        let described = String(describing: key).contains(key.privateKey)
        let reflected = String(reflecting: key).contains(key.privateKey)
        let grant = Grant(provider: "p", createdAt: Date(), dpopKey: key)
        let inGrant = "\(grant)".contains(key.privateKey)
        #expect(!described)
        #expect(!reflected)
        #expect(!inGrant)
    }

    /// A key on another 256-bit curve (secp256k1) passes the size check of
    /// `read_p256`: vault then signs proofs whose `jwk` says P-256 with a
    /// point of another curve, which no server verifies. A damaged key is
    /// to be refused as unreadable instead.
    @Test("an ES256 key that is not on P-256 is refused as unreadable")
    func otherCurveRefused() throws {
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["ecparam", "-name", "secp256k1", "-genkey", "-noout", "-outform", "DER"]
        let out = Pipe()
        openssl.standardOutput = out
        try openssl.run()
        let der = out.fileHandleForReading.readDataToEndOfFile()
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0 && !der.isEmpty)
        let encoded = Base64.encodeString(Array(der), .urlSafeUnpadded)
        let key = DPoPKey(algorithm: "ES256", thumbprint: "x", privateKey: encoded)
        let signed = (try? key.proof(method: "GET", url: "https://a.example/", at: Date())) != nil
        #expect(!signed, "a secp256k1 key signed a proof that names P-256")
    }

    /// RFC 9449 section 8: the nonce challenge is answered once; a second
    /// challenge is an error, not a loop.
    @Test("a token endpoint's nonce challenge is answered once")
    func nonceChallengeOnce() throws {
        let key = try DPoPKey.generate()
        let challenge = (400, #"{"error":"use_dpop_nonce"}"#, [("DPoP-Nonce", "n1")])
        let fake = FakeTransport([challenge, challenge, challenge])
        var client = OAuthClient(try deviceProvider())
        client.dpopKey = key
        let endpoint = TokenEndpoint(transport: fake, client: client)
        #expect(throws: VaultError.self) {
            try endpoint.tokenResponse("https://review-once.example/token", form: [("grant_type", "x")], what: "t")
        }
        #expect(fake.requests.count == 2)
    }

    @Test("nonces are kept per origin, never sent to another server")
    func noncesPerOrigin() {
        #expect(DPoPNonces.origin("https://AS.example:8443/token?x=1") == "https://as.example:8443")
        #expect(DPoPNonces.origin("https://evil.example#@as.example/") == "https://evil.example")
        #expect(DPoPNonces.origin("https://evil.example?@as.example/") == "https://evil.example")
        // The user info is not part of the origin (RFC 6454); the host after it is.
        #expect(DPoPNonces.origin("https://u@as.example/") == DPoPNonces.origin("https://as.example/"))
        #expect(DPoPNonces.origin("https://as.example@evil.example/") == "https://evil.example")
    }

    /// RFC 9110 section 7.1: the target URI a server reconstructs has no
    /// userinfo; an htu with it never matches, and it copies a password
    /// into every proof.
    @Test("htu carries no userinfo")
    func htuWithoutUserinfo() throws {
        let key = try DPoPKey.generate()
        let proof = try key.proof(method: "GET", url: "https://user:pw@api.example/x", at: Date())
        let body = String(proof.split(separator: ".")[1])
        let claims = Base64.decode(Array(body.utf8), .urlSafeUnpadded).map { String(decoding: $0, as: UTF8.self) }
        let hasUserinfo = claims?.contains("user:pw@") ?? false
        #expect(!hasUserinfo)
    }

    /// The device flow of `deviceProvider`, answered with `token`, with a
    /// DPoP key in the request; `configure` adjusts request and provider.
    func authorize(
        answer token: String, configure: (inout AuthorizationRequest, inout Provider) -> Void = { _, _ in }
    ) throws -> (Result<Grant, VaultError>, DPoPKey) {
        let key = try DPoPKey.generate()
        let fake = FakeTransport([
            (200, #"{"device_code":"d","user_code":"U","verification_uri":"https://id.example/go","interval":1}"#, []),
            (200, token, []),
        ])
        var provider = try deviceProvider()
        var request = AuthorizationRequest(provider: provider, flow: .device, timeout: 30)
        configure(&request, &provider)
        request.provider = provider
        request.dpopKey = key
        let authorizer = Authorizer(transport: fake, ui: DeviceFlowTests.RecordingUI(), sleep: { _ in })
        return (Result { () throws(VaultError) in try authorizer.authorize(request) }, key)
    }

    @Test("a bearer answer without a refresh token bound nothing: the grant keeps no key")
    func bearerAnswerWithoutRefreshToken() throws {
        let (result, _) = try authorize(answer: #"{"access_token":"at","token_type":"Bearer","expires_in":3600}"#)
        let grant = try result.get()
        #expect(grant.dpopKey == nil)
        #expect(!grant.accessTokenIsDPoPBound)
    }

    @Test("a DPoP answer keeps the key, and its access token goes with a proof")
    func dpopAnswerKeepsKey() throws {
        let (result, key) = try authorize(
            answer: #"{"access_token":"at","token_type":"DPoP","expires_in":3600,"refresh_token":"rt"}"#)
        let grant = try result.get()
        let kept = grant.dpopKey?.thumbprint == key.thumbprint
        #expect(kept)
        #expect(grant.accessTokenIsDPoPBound)
        let names = try grant.authorizationHeaders(url: "https://api.example/x", at: Date()).map(\.name)
        #expect(names == ["Authorization", "DPoP"])
    }

    /// A provider that binds every grant, or a grant whose access token was
    /// bound before: a bearer answer is a downgrade, refused, nothing kept.
    @Test("a bearer answer where a DPoP access token is required is refused", arguments: [false, true])
    func bearerAnswerRefusedWhereRequired(providerSays: Bool) throws {
        let (result, _) = try authorize(
            answer: #"{"access_token":"at","token_type":"Bearer","expires_in":3600,"refresh_token":"rt"}"#
        ) { request, provider in
            if providerSays { provider.dpopBoundAccessTokens = true } else { request.requiresDPoPAccessToken = true }
        }
        guard case .failure(let error) = result else {
            Issue.record("a bearer answer was accepted")
            return
        }
        #expect(error.code == .badResponse)
        #expect(error.reason.contains("bearer access token"))
    }

    /// A narrowed token (RFC 8707, RFC 8693) the provider issued as a bearer
    /// token is sent as one, though the grant holds a key.
    @Test("a bound grant's bearer narrowed token is sent with the Bearer scheme")
    func narrowedBearerToken() throws {
        var g = TestKeys.grant(token: "at")
        g.dpopKey = try DPoPKey.generate()
        g.tokenType = "DPoP"
        let token = DerivedToken(
            target: try TokenTarget(resource: "https://api.example/"), accessToken: "narrow", tokenType: nil,
            expiresAt: nil, scopes: [], issuedAt: Date())
        let headers = try g.narrowed(to: token).authorizationHeaders(url: "https://api.example/x", at: Date())
        #expect(headers.map(\.name) == ["Authorization"])
        #expect(headers.first?.value.hasPrefix("Bearer ") == true)
    }

    /// Userinfo with a bound grant's bearer access token: no proof goes,
    /// and a nonce challenge is not answered with one.
    @Test("userinfo with a bearer access token of a bound grant sends no proof")
    func userinfoWithBearerToken() throws {
        var g = TestKeys.grant(token: "at")
        g.dpopKey = try DPoPKey.generate()
        g.tokenType = "Bearer"
        let fake = FakeTransport([(200, #"{"sub":"s"}"#, [])])
        _ = try ProtectedResource.get("https://id.example/userinfo", grant: g, transport: fake, what: "userinfo")
        #expect(fake.requests.count == 1)
        #expect(fake.requests.first?.headers["dpop"] == nil)
        #expect(fake.requests.first?.headers["authorization"]?.hasPrefix("Bearer ") == true)
    }

    @Test("token files of other token types are refused; bearer in any case is imported")
    func importTokenTypes() throws {
        func imported(_ type: String) throws -> Result<Grant, VaultError> {
            let json = #"{"provider":"p","access_token":"a","token_type":"\#(type)"}"#
            let bytes = try SecureBytes(copying: Array(json.utf8))
            return Result { () throws(VaultError) in try TokenResponse(json: bytes).importedGrant(now: Date()) }
        }
        for type in ["Bearer", "bearer", "BEARER"] { #expect((try? imported(type).get()) != nil, "\(type)") }
        for type in ["mac", "N_A"] {
            guard case .failure(let error) = try imported(type) else {
                Issue.record("\(type) imported")
                continue
            }
            #expect(error.code == .invalidInput)
        }
        switch try imported("DPoP") {
        case .failure(let error): #expect(error.remedy == .authorizeWithDPoP(provider: "p"))
        case .success: Issue.record("a DPoP token was imported without its key")
        }
    }

    /// `read_p256` reads the whole DER key: a byte after it is damage.
    @Test("an ES256 key with bytes after its DER is refused as unreadable")
    func trailingBytesRefused() throws {
        let key = try DPoPKey.generate()
        let der = try #require(Base64.decode(Array(key.privateKey.utf8), .urlSafeUnpadded))
        let longer = DPoPKey(
            algorithm: "ES256", thumbprint: key.thumbprint,
            privateKey: Base64.encodeString(der + [0], .urlSafeUnpadded))
        #expect((try? key.proof(method: "GET", url: "https://a.example/", at: Date())) != nil)
        #expect((try? longer.proof(method: "GET", url: "https://a.example/", at: Date())) == nil)
    }

    /// RFC 9449 section 8: a challenge without a nonce the RFC allows is no
    /// challenge to answer.
    @Test("a nonce challenge with a nonce RFC 9449 does not allow is not answered")
    func invalidNonceChallenge() throws {
        func response(_ nonce: String) throws -> HTTPResponse {
            HTTPResponse(
                status: 400, headers: [("dpop-nonce", nonce)],
                body: try SecureBytes(copying: Array(#"{"error":"use_dpop_nonce"}"#.utf8)))
        }
        #expect(DPoPNonces.asksForNonce(try response("n-1")))
        #expect(!DPoPNonces.asksForNonce(try response("a b")))
        #expect(!DPoPNonces.asksForNonce(try response("")))
    }

    /// RFC 9449 section 4.3 has servers compare `htu` after RFC 3986's
    /// normalization; vault sends the normalized form, for servers that
    /// compare strings (glewlwyd does).
    @Test(
        "htu is the normalized target URI",
        arguments: [
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
            ("HTTPS://API.Example.COM/Items?q=1#f", "https://api.example.com/Items"),
            ("https://api.example:443/x", "https://api.example/x"),
            ("http://api.example:80/x", "http://api.example/x"),
            ("https://api.example:8443/x", "https://api.example:8443/x"),
            ("https://h/./a/../b", "https://h/b"),
            ("https://h/a/b/..", "https://h/a/"),
            ("https://h/../../x", "https://h/x"),
            ("https://h/a/b/", "https://h/a/b/"),
            ("https://[::1]:443/x", "https://[::1]/x"),
            ("https://u:p@h.example/x", "https://h.example/x"),
        ])
    func htuNormalized(url: String, htu: String) {
        #expect(DPoPKey.target(url) == htu)
    }
}
