import Foundation
import Testing
import VaultCrypto
import VaultTestSupport

/// Tokens narrowed to one resource (RFC 8707) against glewlwyd, whose
/// OIDC plugin implements resource indicators: a refresh-token request
/// naming a resource among those the grant was authorized for gets an
/// access token whose `aud` claim is that resource.
// Nested in the serialized AddFlowTests: the provider registers one exact
// redirect URI (port included), which no two authorizations can listen on at once.
extension AddFlowTests {
    @Suite("narrowed tokens: resource indicators against a real OpenID Connect provider", .serialized)
    struct NarrowedTokenTests {
        let oidc: OIDCProvider
        let home = Home()
        static let api = "https://api.example.com/"
        static let billing = "https://billing.example.com/v1"

        init() throws {
            oidc = try OIDCProvider.shared.get()
            try home.initKeyfileVault()
        }

        var s: OIDCProvider.Settings { oidc.settings }

        /// A provider file for glewlwyd's issuer at `/api/NAME` with `features`,
        /// whose authorizations ask for both resources (glewlwyd keeps the
        /// resources of an authorization as one comma-separated value).
        func resourceProvider(_ name: String, _ features: [String]) throws {
            let issuer = try oidc.featureIssuer(name, features)
            try home.providerFile(
                name,
                [
                    "issuer": issuer, "client_id": s.public_client, "redirect_uri": s.redirect_uri,
                    "authorization_params": ["resource": "\(Self.api),\(Self.billing)"],
                ])
            var env = home.environment
            env["BROWSER"] = oidc.browser("approve")
            let r = try VaultProcess.run(["add", name, "g-" + name], environment: env)
            try #require(r.status == 0, "\(r.stderr)")
        }

        func shown(_ name: String) throws -> [String: Any] {
            let r = try home.run("show", name, "--json", "--reveal")
            try #require(r.status == 0, "\(r.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        }

        /// The `aud` claim of a JWT access token, as a list.
        func audience(_ token: String) throws -> [String] {
            let parts = token.split(separator: ".")
            try #require(parts.count == 3, "the access token is not a JWT")
            let payload = try #require(Base64.decode(Array(parts[1].utf8), .urlSafeUnpadded))
            let claims = try #require(try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any])
            if let one = claims["aud"] as? String { return [one] }
            return claims["aud"] as? [String] ?? []
        }

        func token(_ name: String, _ args: String...) throws -> ProcessResult {
            try home.run(["token", name] + args)
        }

        @Test("--resource: a token whose aud is the resource, cached per resource, refused targets change nothing")
        func resourceIndicators() throws {
            try resourceProvider("resind", ["resource"])
            let before = try shown("g-resind")
            let first = try token("g-resind", "--resource", Self.api)
            try #require(first.status == 0, "\(first.stderr)")
            let apiToken = first.stdout.trimmingCharacters(in: .newlines)
            #expect(try audience(apiToken) == [Self.api])
            #expect(apiToken != before["access_token"] as? String)

            // Asked again: the cached token, not a new one from the provider.
            let again = try token("g-resind", "--resource", Self.api)
            #expect(again.status == 0 && again.stdout.trimmingCharacters(in: .newlines) == apiToken, "\(again.stderr)")
            let billing = try token("g-resind", "--resource", Self.billing, "--json")
            try #require(billing.status == 0, "\(billing.stderr)")
            let doc = try #require(try JSONSerialization.jsonObject(with: Data(billing.stdout.utf8)) as? [String: Any])
            let billingToken = try #require(doc["access_token"] as? String)
            #expect(try audience(billingToken) == [Self.billing] && billingToken != apiToken)
            #expect((doc["token_type"] as? String)?.lowercased() == "bearer" && doc["expires_at"] is Int)

            // env and header hand out the same cached tokens.
            let env = try home.run("env", "g-resind", "--resource", Self.api, "--prefix", "API", "--format", "json")
            let vars = try JSONSerialization.jsonObject(with: Data(env.stdout.utf8)) as? [String: String]
            #expect(vars?["API_ACCESS_TOKEN"] == apiToken, "\(env.stderr)")
            let header = try home.run("header", "g-resind", "--resource", Self.billing)
            #expect(header.stdout == "Authorization: Bearer \(billingToken)\n", "\(header.stderr)")

            // The grant's own tokens are untouched; it keeps both narrowed ones.
            let after = try shown("g-resind")
            #expect(after["access_token"] as? String == before["access_token"] as? String)
            #expect(after["state"] as? String == "fresh")

            // A resource the grant was not authorized for: invalid_target, exit 1, nothing changed.
            let refused = try token("g-resind", "--resource", "https://elsewhere.example.com/")
            #expect(refused.status == 1, "\(refused.stderr)")
            #expect(refused.stderr.contains("invalid_target"), "\(refused.stderr)")
            #expect(refused.stdout.isEmpty)
            let unchanged = try shown("g-resind")
            #expect(unchanged["access_token"] as? String == before["access_token"] as? String)
            #expect(unchanged["refresh_token"] as? String == before["refresh_token"] as? String)
            #expect(unchanged["state"] as? String == "fresh")
            let still = try token("g-resind", "--resource", Self.api)
            #expect(still.stdout.trimmingCharacters(in: .newlines) == apiToken)

            // Not a resource indicator at all: a usage error before any request.
            let bad = try token("g-resind", "--resource", "not a uri#frag")
            #expect(bad.status == 64, "\(bad.stderr)")
        }

        @Test("--resource with rotating refresh tokens: the rotated one is stored, and a later refresh uses it")
        func rotatedRefreshTokenStored() throws {
            try resourceProvider("resrot", ["resource", "rotate"])
            let before = try shown("g-resrot")
            let spent = try #require(before["refresh_token"] as? String)
            let first = try token("g-resrot", "--resource", Self.api)
            try #require(first.status == 0, "\(first.stderr)")
            #expect(try audience(first.stdout.trimmingCharacters(in: .newlines)) == [Self.api])
            let after = try shown("g-resrot")
            let rotated = try #require(after["refresh_token"] as? String)
            #expect(rotated != spent, "the rotated refresh token was not stored")
            #expect(after["access_token"] as? String == before["access_token"] as? String)

            // The spent refresh token would be refused (and kill the grant): the stored one works.
            let refresh = try home.run("refresh", "g-resrot")
            #expect(refresh.status == 0, "\(refresh.stderr)")
            #expect(try shown("g-resrot")["state"] as? String == "fresh")
            // glewlwyd ties a refresh token it rotated for a resource to that
            // resource: the plain refresh's token names it too, and the other
            // resource is refused from now on, which changes nothing.
            #expect(try audience(try #require(try shown("g-resrot")["access_token"] as? String)) == [Self.api])
            let other = try token("g-resrot", "--resource", Self.billing)
            #expect(other.status == 1 && other.stderr.contains("invalid_target"), "\(other.stderr)")
            #expect(try shown("g-resrot")["state"] as? String == "fresh")
        }
    }
}
