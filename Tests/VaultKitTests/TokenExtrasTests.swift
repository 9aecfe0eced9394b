import Foundation
import Testing
import VaultKit
import VaultTestSupport

/// An authorization UI that keeps the address it was asked to open and
/// then gives up (the tests only look at the address).
final class AddressKeeper: AuthorizationUI, @unchecked Sendable {
    private let lock = NSLock()
    private var urls: [String] = []
    var opened: [String] { lock.withLock { urls } }
    func openBrowser(_ url: String) { lock.withLock { urls.append(url) } }
    func show(_ message: String) {}
    func readPasted(prompt: String) throws(VaultError) -> String { throw VaultError(.cancelled, "no person here") }
}

@Suite("extra token request parameters and headers; grants migrated from token responses and AppAuth")
struct TokenExtrasTests {
    let library = LibraryTests()

    @Test("the protocol's own fields and headers, and malformed names or values, are refused as extras")
    func refusals() throws {
        for name in [
            "grant_type", "Grant_Type", "code", "code_verifier", "client_id", "client_secret", "refresh_token",
            "redirect_uri", "scope", "device_code", "client_assertion", "", "a\nb",
        ] {
            #expect(throws: VaultError.self, "\(name)") { try TokenRequestExtras(parameters: [name: "x"]) }
        }
        #expect(throws: VaultError.self) { try TokenRequestExtras(parameters: ["resource": "a\r\nb"]) }
        for name in ["Authorization", "content-type", "HOST", "Content-Length", "X Bad", "X:Bad", "", "é"] {
            #expect(throws: VaultError.self, "\(name)") { try TokenRequestExtras(headers: [name: "x"]) }
        }
        for value in ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\u{0}b"] {
            #expect(throws: VaultError.self) { try TokenRequestExtras(headers: ["X-Tenant": value]) }
        }
        let ok = try TokenRequestExtras(
            parameters: ["resource": "https://api.example", "audience": "api"], headers: ["X-Tenant": "acme\tone"])
        #expect(ok.parameters.count == 2 && ok.headers.count == 1)
    }

    @Test("refresh extras go with every refresh of the provider's grants, through any store, and only those")
    func refreshExtras() async throws {
        let extras = try TokenRequestExtras(
            parameters: ["resource": "https://api.example"], headers: ["X-Tenant": "acme"])
        let stores: [any GrantStore] = [try await library.vaultStore(), InMemoryGrantStore()]
        for store in stores {
            var other = try library.expiredGrant()
            other.provider = "other"
            try await store.save(try library.expiredGrant(), as: "work")
            try await store.save(other, as: "elsewhere")
            let fake = FakeTransport([LibraryTests.rotated, LibraryTests.rotated])
            let session = TokenSession(store: store, transport: fake, refreshExtras: ["google": extras])
            _ = try await session.freshGrant("work")
            _ = try await session.freshGrant("elsewhere")
            let requests = fake.requests
            try #require(requests.count == 2)
            #expect(requests[0].body.hasPrefix("grant_type=refresh_token&refresh_token="))
            #expect(requests[0].body.contains("&resource=https%3A%2F%2Fapi.example"))
            #expect(requests[0].headers["x-tenant"] == "acme")
            #expect(!requests[1].body.contains("resource="))
            #expect(requests[1].headers["x-tenant"] == nil)
        }
    }

    @Test("extras on the code exchange and the authorization URL; the authorization's own fields are refused")
    func authorizationExtras() async throws {
        let provider = try Provider(
            name: "id", authorizationEndpoint: "https://id.example/auth", tokenEndpoint: "https://id.example/token",
            clientID: "c")
        let fake = FakeTransport([LibraryTests.rotated])
        let extras = try TokenRequestExtras(parameters: ["audience": "api"], headers: ["X-Tenant": "acme"])
        let grant = try await Authorizer(transport: fake, ui: AddressKeeper()).exchange(
            code: "the-code", codeVerifier: String(repeating: "v", count: 43), redirectURI: "http://127.0.0.1/cb",
            provider: provider, extras: extras)
        #expect(grant.accessToken == "new-access")
        let sent = try #require(fake.requests.first)
        #expect(sent.body.contains("grant_type=authorization_code&code=the-code"))
        #expect(sent.body.contains("&audience=api"))
        #expect(sent.headers["x-tenant"] == "acme")

        let ui = AddressKeeper()
        var request = AuthorizationRequest(provider: provider, flow: .paste)
        request.additionalParameters = ["prompt": "consent", "acr_values": "mfa"]
        await #expect(throws: VaultError.self) { try await Authorizer(transport: fake, ui: ui).authorize(request) }
        let url = try #require(ui.opened.first)
        #expect(url.contains("&acr_values=mfa") && url.contains("&prompt=consent"))
        for own in ["state", "redirect_uri", "code_challenge", "Client_ID", "nonce"] {
            request.additionalParameters = [own: "x"]
            do {
                _ = try await Authorizer(transport: fake, ui: AddressKeeper()).authorize(request)
                Issue.record("\(own) was added")
            } catch {
                #expect(error.code == .invalidInput, "\(own)")
            }
        }
    }

    @Test("a token response an app holds, migrated with its provider, is saved and refreshes at the real provider")
    func migrateTokenResponse() async throws {
        let oidc = try OIDCProvider.shared.get()
        let s = oidc.settings
        let json = try providerTokens(oidc, client: s.confidential_client, secret: s.client_secret)
        var provider = try await Discovery.provider(name: "glewlwyd", issuer: s.issuer, transport: CurlTransport())
        provider.clientID = s.confidential_client
        provider.clientSecret = s.client_secret
        let grant = try Grant(tokenResponse: try SecureBytes(copying: Array(json.utf8)), provider: provider)
        #expect(grant.account == s.email)
        let dir = TemporaryDirectory()
        let store = try await VaultGrantStore.create(
            at: dir.location, key: .keyfile(try TestKeys.keyfileSecret()), kdf: .minimum)
        try await store.save(grant, as: "migrated")
        // Extras ride along on the refresh; the provider ignores them.
        let session = TokenSession(
            store: store, refreshExtras: ["glewlwyd": try TokenRequestExtras(parameters: ["x_app": "demo"])])
        let fresh = try await session.freshGrant("migrated", forceRefresh: true)
        #expect(fresh.refreshed)
        #expect(fresh.grant.accessToken != grant.accessToken)
        #expect(try await session.check("migrated") == .live(account: s.email))
    }

    @Test("a GTMAppAuth archive's fields become a grant that is saved and refreshes at the real provider")
    func migrateAppAuth() async throws {
        let oidc = try OIDCProvider.shared.get()
        let s = oidc.settings
        let json = try providerTokens(oidc, client: s.confidential_client, secret: s.client_secret)
        let tokens = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let expiresIn = try #require(tokens["expires_in"] as? Double)
        let state = AppAuthState(
            accessToken: tokens["access_token"] as? String,
            accessTokenExpirationDate: Date().addingTimeInterval(expiresIn), tokenType: tokens["token_type"] as? String,
            idToken: tokens["id_token"] as? String, refreshToken: tokens["refresh_token"] as? String,
            scope: "openid email", issuer: s.issuer, authorizationEndpoint: s.issuer + "/auth",
            tokenEndpoint: s.issuer + "/token", userinfoEndpoint: s.issuer + "/userinfo",
            clientID: s.confidential_client, clientSecret: s.client_secret, redirectURL: s.redirect_uri,
            userEmail: s.email)
        let grant = try Grant(appAuth: state, providerName: "glewlwyd")
        #expect(grant.account == s.email)
        #expect(grant.providerConfiguration?.clientID == s.confidential_client)
        #expect(grant.providerConfiguration?.tokenEndpoint == s.issuer + "/token")
        #expect(grant.scopes == ["openid", "email"])
        let dir = TemporaryDirectory()
        let store = try await VaultGrantStore.create(
            at: dir.location, key: .keyfile(try TestKeys.keyfileSecret()), kdf: .minimum)
        try await store.save(grant, as: "from-appauth")
        let session = TokenSession(store: store)
        let fresh = try await session.freshGrant("from-appauth", forceRefresh: true)
        #expect(fresh.refreshed && fresh.grant.accessToken != state.accessToken)
        #expect(try await session.check("from-appauth") == .live(account: s.email))

        // Another source of endpoints is a provider the app names: its
        // client must be the archive's, and the archive's own endpoints are
        // not kept.
        let stranger = try Provider(
            name: "other", authorizationEndpoint: "https://id.example/auth", tokenEndpoint: "https://id.example/token",
            clientID: "someone-else")
        #expect(throws: VaultError.self) { try Grant(appAuth: state, provider: stranger) }
        let named = try Provider(
            name: "named", authorizationEndpoint: "https://id.example/auth", tokenEndpoint: "https://id.example/token",
            clientID: s.confidential_client)
        let viaProvider = try Grant(appAuth: state, provider: named)
        #expect(viaProvider.providerConfiguration?.tokenEndpoint == "https://id.example/token")
        #expect(viaProvider.providerConfiguration?.clientSecret == nil)
        // An archive without its endpoints cannot stand on its own.
        var bare = state
        bare.tokenEndpoint = nil
        #expect(throws: VaultError.self) { try Grant(appAuth: bare, providerName: "glewlwyd") }
    }
}
