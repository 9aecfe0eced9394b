import Foundation
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

@testable import VaultCore

/// Token responses as imports, code exchanges and refreshes read them: one
/// expiry parser, the refresh token's expiry, and the whole response kept.
@Suite("token responses: one expiry parser, the refresh token's expiry, the whole response kept")
struct TokenResponseTests {
    let now = Date(epochSeconds: 1_800_000_000)

    /// An `expires_in` (JSON text) and whether a lifetime that long is accepted.
    static let lifetimes: [(String, Bool)] = [
        ("3600", true), (#""3600""#, true), ("0", true), ("2147483647", true), ("9999999999", true),
        ("-3600", false), ("-1", false), (#""nan""#, false), (#""inf""#, false), ("1e300", false),
        ("1e10", false), (#""soon""#, false), ("true", false),
    ]

    @Test(
        "one expiry parser: import, code exchange and refresh accept and refuse the same values", arguments: lifetimes)
    func expiry(_ value: String, _ accepted: Bool) throws {
        // vault import
        let input = try bytes(#"{"provider":"p","access_token":"a","expires_in":"# + value + "}")
        let imported = Result { () throws(VaultError) in try TokenResponse(json: input).importedGrant(now: now) }
        // A code exchange (or any token request).
        let endpoint = TokenEndpoint(
            transport: FakeTransport([(200, #"{"access_token":"a","expires_in":"# + value + "}", [])]),
            client: OAuthClient(ProviderConfiguration(clientID: "c"), providerName: "p"))
        let exchanged = Result { () throws(VaultError) in
            try endpoint.tokenResponse("https://id.example/token", form: [], what: "exchange")
        }
        // A refresh, through the vault.
        let dir = TemporaryDirectory()
        let vault = try Vault.create(
            at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum, time: FixedTime(now))
        var g = TestKeys.grant(token: "old", now: now)
        g.expiresAt = now
        g.providerConfiguration = ProviderConfiguration(tokenEndpoint: "https://id.example/token", clientID: "c")
        try vault.save(g, as: "work")
        let before = try vault.allRows().map(\.ciphertext)
        let transport = FakeTransport([(200, #"{"access_token":"new","expires_in":"# + value + "}", [])])
        let refresher = TokenRefresher(vault: vault, transport: transport)
        let refreshed = Result { () throws(VaultError) in try refresher.freshGrant("work") }
        #expect(((try? imported.get()) != nil) == accepted)
        #expect(((try? exchanged.get()) != nil) == accepted)
        #expect(((try? refreshed.get()) != nil) == accepted)
        if accepted {
            let seconds = Double(value.filter { $0 != "\"" })!
            #expect(try refreshed.get().grant.expiresAt == Date(epochSeconds: now.epochSeconds + Int64(seconds)))
        } else {
            #expect(try vault.allRows().map(\.ciphertext) == before, "nothing stored")
            #expect(try vault.load("work").dead == false)
        }
    }

    @Test("refresh_token_expires_in sets the refresh token's expiry; a rotated token without one has none")
    func refreshTokenExpiry() throws {
        var g = TestKeys.grant(token: "old", now: now)
        g.refreshTokenExpiresAt = now.addingTimeInterval(100)
        let keep = try TokenResponse(json: bytes(#"{"access_token":"n","expires_in":60,"ext_expires_in":60}"#))
        let kept = try g.applying(refresh: keep, now: now, what: "r")
        #expect(kept.refreshTokenExpiresAt == now.addingTimeInterval(100))
        #expect(kept.tokenResponse == ["expires_in": .number(60), "ext_expires_in": .number(60)])
        let given = try TokenResponse(
            json: bytes(#"{"access_token":"n","refresh_token":"r2","refresh_token_expires_in":86400}"#))
        #expect(
            try g.applying(refresh: given, now: now, what: "r").refreshTokenExpiresAt == now.addingTimeInterval(86400))
        let rotated = try TokenResponse(json: bytes(#"{"access_token":"n","refresh_token":"r2"}"#))
        #expect(try g.applying(refresh: rotated, now: now, what: "r").refreshTokenExpiresAt == nil)
        // A known-dead refresh token renews nothing.
        var spent = g
        spent.expiresAt = now
        spent.refreshTokenExpiresAt = now.addingTimeInterval(-1)
        #expect(spent.state(at: now) == .expired)
        #expect(!spent.canAuthorize(at: now) && g.canAuthorize(at: now))
    }

    @Test("the whole token response is kept, without the tokens, nested at most 8 deep")
    func keptResponse() throws {
        let deep = String(repeating: "[", count: 9) + String(repeating: "]", count: 9)
        let r = try TokenResponse(
            json: bytes(
                #"{"access_token":"a","refresh_token":"r","id_token":"h.p.s","scope":"x y","team":{"id":"T1"},"deep":"#
                    + deep + #","huge":1e400,"provider":"p"}"#))
        #expect(Set(r.fields.keys) == ["scope", "team"])
        #expect(r.fields["team"] == .object(["id": .string("T1")]))
        let redacted = JSONValue.object([
            "authed_user": .object(["access_token": .string("xoxp"), "id": .string("U1")]),
            "token_type": .string("bearer"),
        ]).redacted()
        #expect(
            redacted
                == .object([
                    "authed_user": .object(["access_token": .string("redacted"), "id": .string("U1")]),
                    "token_type": .string("bearer"),
                ]))
    }

    func bytes(_ s: String) throws -> SecureBytes { try SecureBytes(copying: Array(s.utf8)) }
}
