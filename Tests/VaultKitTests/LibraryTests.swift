import Foundation
import Testing
import VaultKit
import VaultTestSupport

/// The async library API as an app uses it: `import VaultKit` only.
@Suite("VaultKit for apps: stores, sessions, fresh tokens from many tasks")
struct LibraryTests {
    let dir = TemporaryDirectory()

    static let rotated = (
        200, #"{"access_token":"new-access","refresh_token":"new-refresh","expires_in":3600,"token_type":"Bearer"}"#,
        [(String, String)]()
    )

    func expiredGrant() throws -> Grant {
        var g = TestKeys.grant(token: "old-access")
        g.expiresAt = Date().addingTimeInterval(-10)
        g.providerConfiguration = ProviderConfiguration(
            tokenEndpoint: "https://id.example/token", userinfoEndpoint: "https://id.example/userinfo", clientID: "c")
        return g
    }

    func vaultStore() async throws -> VaultGrantStore {
        try await VaultGrantStore.create(
            at: dir.location, key: .keyfile(try TestKeys.keyfileSecret()), kdf: .minimum)
    }

    @Test("the GTMAppAuth store operations, on a vault file and in memory, with any non-empty name")
    func storeOperations() async throws {
        let stores: [any GrantStore] = [try await vaultStore(), InMemoryGrantStore()]
        for store in stores {
            let name = "ada@example.com/gmail"
            try await store.save(TestKeys.grant(), as: name)
            #expect(try await store.retrieve(name).accessToken == "ya29.sample")
            #expect(try await store.canAuthorize(name))
            #expect(try await store.names() == [name])
            try await store.remove(name)
            await #expect(throws: VaultError.self) { try await store.retrieve(name) }
            do {
                try await store.remove(name)
                Issue.record("removed twice")
            } catch {
                #expect(error.code == .notFound)
            }
            do {
                try await store.save(TestKeys.grant(), as: "bad\u{1b}[2Jname")
                Issue.record("a control character was accepted in a name")
            } catch {
                #expect(error.code == .invalidInput)
            }
        }
    }

    @Test(
        "1,000 tasks asking for one expired grant: one token request, the same token for all", arguments: [true, false])
    func singleFlight(onDisk: Bool) async throws {
        let store: any GrantStore = onDisk ? try await vaultStore() : InMemoryGrantStore()
        try await store.save(try expiredGrant(), as: "work")
        let fake = FakeTransport([LibraryTests.rotated])
        let session = TokenSession(store: store, transport: fake)
        let tokens = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<1000 { group.addTask { try await session.freshGrant("work").grant.accessToken } }
            var all: Set<String?> = []
            for try await t in group { all.insert(t) }
            return all
        }
        #expect(tokens == ["new-access"])
        #expect(fake.requests.count == 1)
        // Saved before it was handed out: the rotated refresh token is stored.
        #expect(try await store.retrieve("work").refreshToken == "new-refresh")
    }

    @Test("events tell an app that a grant was refreshed and rotated, or refused and kept")
    func events() async throws {
        let store = InMemoryGrantStore()
        try await store.save(try expiredGrant(), as: "work")
        try await store.save(try expiredGrant(), as: "gone")
        let fake = FakeTransport([LibraryTests.rotated, (400, #"{"error":"invalid_grant"}"#, [])])
        let session = TokenSession(store: store, transport: fake)
        var iterator = session.events.makeAsyncIterator()
        _ = try await session.freshGrant("work")
        #expect(await iterator.next() == .refreshed(name: "work", rotated: true))
        do {
            _ = try await session.freshGrant("gone")
            Issue.record("no refusal")
        } catch {
            #expect(error.code == .dead && error.oauthError == "invalid_grant" && error.httpStatus == 400)
        }
        #expect(await iterator.next() == .refused(name: "gone", oauthError: "invalid_grant"))
        let kept = try await store.retrieve("gone")
        let canAuthorize = try await store.canAuthorize("gone")
        #expect(kept.dead && !canAuthorize)
    }

    @Test(
        "a bare 400 (glewlwyd's answer to a revoked refresh token) is a refused event when the provider declares it, and kills nothing otherwise"
    )
    func bareRefusal() async throws {
        var declared = try expiredGrant()
        var quirks = ErrorQuirks()
        quirks.empty400IsInvalidGrant = true
        declared.providerConfiguration = ProviderConfiguration(
            tokenEndpoint: "https://id.example/token", clientID: "c", errorQuirks: quirks)
        let store = InMemoryGrantStore(["work": declared, "other": try expiredGrant()])
        let session = TokenSession(store: store, transport: FakeTransport([(400, "", []), (400, "", [])]))
        var iterator = session.events.makeAsyncIterator()
        await #expect(throws: VaultError.self) { try await session.freshGrant("work") }
        #expect(await iterator.next() == .refused(name: "work", oauthError: "invalid_grant"))
        #expect(try await store.retrieve("work").dead)
        do {
            _ = try await session.freshGrant("other")
            Issue.record("accepted a bare 400")
        } catch {
            #expect(error.code == .badResponse)
        }
        #expect(try await !store.retrieve("other").dead)
    }

    @Test("authorizeRequest adds a fresh bearer token, and refuses plain http to anything but loopback")
    func authorizeRequest() async throws {
        let store = InMemoryGrantStore(["work": TestKeys.grant(token: "live")])
        let session = TokenSession(store: store, transport: FakeTransport([]))
        var request = HTTPRequest(method: "GET", url: "https://api.example/me")
        try await session.authorize(&request, with: "work")
        #expect(request.headers.filter { $0.name == "Authorization" }.map(\.value) == ["Bearer live"])
        var plain = HTTPRequest(method: "GET", url: "http://api.example/me")
        do {
            try await session.authorize(&plain, with: "work")
            Issue.record("a token went to plain http")
        } catch {
            #expect(error.code == .invalidInput)
        }
        #expect(plain.headers.isEmpty)
        // A nonce that cannot go in a proof is the caller's error, found before any refresh.
        var nonced = HTTPRequest(method: "GET", url: "https://api.example/me")
        do {
            try await session.authorize(&nonced, with: "missing", dpopNonce: "a b")
            Issue.record("a nonce with a space was taken")
        } catch {
            #expect(error.code == .invalidInput)
        }
    }

    @Test("a cancelled task stops waiting; the refresh others share still completes and is saved")
    func cancellation() async throws {
        let store = InMemoryGrantStore()
        try await store.save(try expiredGrant(), as: "work")
        let session = TokenSession(store: store, transport: FakeTransport([LibraryTests.rotated]))
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await session.freshGrant("work")
        }
        do {
            _ = try await cancelled.value
            Issue.record("a cancelled task got a token")
        } catch {
            #expect((error as? VaultError)?.code == .cancelled)
        }
        #expect(try await session.freshGrant("work").grant.accessToken == "new-access")
    }

    @Test("a fresh token served again from memory is never stale: a change by another process is seen at once")
    func changesElsewhereAreSeen() async throws {
        let mine = try await vaultStore()
        try await mine.save(TestKeys.grant(token: "first"), as: "work")
        let session = TokenSession(store: mine, transport: FakeTransport([]))
        #expect(try await session.freshGrant("work").grant.accessToken == "first")
        #expect(try await session.freshGrant("work").grant.accessToken == "first")
        // Another process (here another store on the same file) replaces it.
        let other = try await VaultGrantStore.open(at: dir.location, key: .keyfile(try TestKeys.keyfileSecret()))
        try await other.save(TestKeys.grant(token: "second"), as: "work")
        #expect(try await session.freshGrant("work").grant.accessToken == "second")
        try await other.remove("work")
        await #expect(throws: VaultError.self) { try await session.freshGrant("work") }
    }

    @Test("a code the app obtained itself is exchanged from async code, off the cooperative pool")
    func asyncExchange() async throws {
        let provider = try Provider(
            name: "app", authorizationEndpoint: "https://id.example/authorize",
            tokenEndpoint: "https://id.example/token",
            clientID: "c", flows: [.browser])
        struct NoUI: AuthorizationUI {
            func openBrowser(_ url: String) {}
            func show(_ message: String) {}
            func readPasted(prompt: String) throws(VaultError) -> String { "" }
        }
        let fake = FakeTransport([LibraryTests.rotated])
        let grant = try await Authorizer(transport: fake, ui: NoUI()).exchange(
            code: "the-code", codeVerifier: "v", redirectURI: "http://127.0.0.1:8080/cb", provider: provider)
        #expect(grant.accessToken == "new-access" && grant.refreshToken == "new-refresh")
        #expect(fake.requests.first?.body.contains("grant_type=authorization_code") == true)
        #expect(fake.requests.first?.body.contains("code_verifier=v") == true)
    }
}
