import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore
@testable import VaultSync

@Suite("fresh tokens and the userinfo probe, with a scripted provider")
struct FreshTokenTests {
    let dir = TemporaryDirectory()
    let now = Date(epochSeconds: 1_800_000_000)

    func makeVault(expiresIn: Double = 3600) throws -> Vault {
        let vault = try Vault.create(
            at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum, time: FixedTime(now))
        var g = TestKeys.grant(token: "old-access", now: now)
        g.expiresAt = now.addingTimeInterval(expiresIn)
        g.providerConfiguration = ProviderConfiguration(
            tokenEndpoint: "https://id.example/token", userinfoEndpoint: "https://id.example/userinfo", clientID: "c")
        try vault.save(g, as: "work")
        return vault
    }

    let refreshed = (
        200, #"{"access_token":"new-access","refresh_token":"new-refresh","expires_in":3600,"token_type":"Bearer"}"#,
        [(String, String)]()
    )

    @Test("a fresh grant needs no request; a stale one is refreshed and the rotated refresh token stored")
    func refresh() throws {
        let vault = try makeVault(expiresIn: 30)
        let fake = FakeTransport([refreshed])
        let fresh = try TokenRefresher(vault: vault, transport: fake).freshGrant("work")
        #expect(fresh.refreshed && fresh.grant.accessToken == "new-access")
        #expect(
            fake.requests.count == 1
                && fake.requests[0].body
                    == "grant_type=refresh_token&refresh_token=1%2F%2Frefresh-old-access&client_id=c"
        )
        let stored = try vault.load("work")
        #expect(stored.refreshToken == "new-refresh" && stored.refreshedAt == now)
        #expect(try !TokenRefresher(vault: vault, transport: fake).freshGrant("work").refreshed)
        #expect(fake.requests.count == 1)
    }

    @Test("a provider that does not rotate keeps the old refresh token")
    func noRotation() throws {
        let vault = try makeVault(expiresIn: 0)
        _ = try TokenRefresher(
            vault: vault, transport: FakeTransport([(200, #"{"access_token":"n","expires_in":60}"#, [])])
        ).freshGrant("work")
        #expect(try vault.load("work").refreshToken == "1//refresh-old-access")
    }

    @Test(
        "only invalid_grant in a 400 or 401 marks the grant dead (kept); every other failure changes nothing",
        arguments: [
            (400, #"{"error":"invalid_grant"}"#, VaultError.Code.dead),
            (401, #"{"error":"invalid_grant"}"#, .dead),
            (401, #"{"error":"invalid_client"}"#, .invalidClient),
            (400, #"{"error":"unauthorized_client"}"#, .invalidClient),
            (400, "", .badResponse),
            (400, "<html>proxy</html>", .badResponse),
            (403, #"{"error":"invalid_grant"}"#, .providerError),
            (200, #"{"error":"invalid_grant"}"#, .providerError),
            (503, "", .transient),
            (429, #"{"error":"invalid_grant"}"#, .transient),
            (400, #"{"error":"temporarily_unavailable"}"#, .transient),
        ])
    func failures(status: Int, body: String, code: VaultError.Code) throws {
        let vault = try makeVault(expiresIn: 0)
        let before = try vault.allRows()
        do {
            _ = try TokenRefresher(vault: vault, transport: FakeTransport([(status, body, [])])).freshGrant("work")
            Issue.record("no error")
        } catch {
            #expect(error.code == code, "\(error.reason)")
        }
        let dies = code == .dead
        #expect(try vault.load("work").dead == dies)
        if !dies { #expect(try vault.allRows().map(\.ciphertext) == before.map(\.ciphertext)) }
    }

    @Test("check: 200 is live; 401 is refreshed once and retried")
    func checkLive() throws {
        let vault = try makeVault()
        #expect(
            try TokenRefresher(vault: vault, transport: FakeTransport([(200, "{}", [])])).check("work")
                == .live(account: "ada@example.com"))
        let fake = FakeTransport([(401, "", []), refreshed, (200, "{}", [])])
        #expect(try TokenRefresher(vault: vault, transport: fake).check("work") == .live(account: "ada@example.com"))
        #expect(
            fake.requests.map(\.url) == [
                "https://id.example/userinfo", "https://id.example/token", "https://id.example/userinfo",
            ])
        #expect(fake.requests[2].headers["authorization"] == "Bearer new-access")
    }

    @Test("check: a 401 to the token just issued says the check failed; the grant is kept, refreshed")
    func checkProbeFailed() throws {
        let vault = try makeVault()
        #expect {
            try TokenRefresher(vault: vault, transport: FakeTransport([(401, "", []), refreshed, (401, "", [])])).check(
                "work")
        } throws: {
            ($0 as? VaultError)?.code == .badResponse
        }
        #expect(try !vault.load("work").dead)
        #expect(try vault.load("work").accessToken == "new-access")
    }

    @Test("check: a 5xx is transient and changes nothing")
    func checkTransient() throws {
        let vault = try makeVault()
        let before = try vault.allRows().map(\.ciphertext)
        #expect { try TokenRefresher(vault: vault, transport: FakeTransport([(503, "", [])])).check("work") } throws: {
            ($0 as? VaultError)?.code == .transient
        }
        #expect(try vault.allRows().map(\.ciphertext) == before)
    }
}
