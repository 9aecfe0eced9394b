import Foundation
import Testing

@testable import VaultCore

@Suite("refresh token lifetimes")
struct RefreshTokenLifetimeTests {
    static let day: TimeInterval = 86400
    static let t0 = Date(epochSeconds: 1_700_000_000)

    static func grant(refreshedAfter days: Double? = nil) -> Grant {
        Grant(
            provider: "p", accessToken: "a", refreshToken: "r",
            providerConfiguration: ProviderConfiguration(tokenEndpoint: "https://p.example/token", clientID: "c"),
            createdAt: t0,
            refreshedAt: days.map { t0.addingTimeInterval($0 * day) })
    }

    @Test("every OAuth 2.0 preset states a refresh-token policy with the address where the provider says it")
    func presetsStatePolicies() throws {
        let catalog = ProviderCatalog.load(configDirectory: "/nonexistent")
        for p in catalog.sorted where p.protocolVersion == .oauth2 {
            let policy = try #require(p.refreshTokenPolicy, "\(p.name)")
            let source = try #require(policy.source, "\(p.name)")
            #expect(source.hasPrefix("https://"), "\(p.name)")
        }
        let p = catalog.providers
        #expect(p["microsoft"]?.refreshTokenPolicy?.inactivity == 90 * Self.day)
        #expect(p["microsoft"]?.refreshTokenPolicy?.rotates == true)
        #expect(p["google"]?.refreshTokenPolicy?.inactivity == 180 * Self.day)
        #expect(p["google"]?.refreshTokenPolicy?.rotates == false)
        #expect(p["github"]?.refreshTokenPolicy?.inactivity == 180 * Self.day)
        #expect(p["linkedin"]?.refreshTokenPolicy?.lifetime == 365 * Self.day)
        // GitLab documents none: unknown, not guessed.
        #expect(p["gitlab"]?.refreshTokenPolicy?.hasLimit == false)
    }

    @Test("a provider file states its own policy, over the preset's; bad durations and fields are refused")
    func providerFilePolicy() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rtp-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: dir.appendingPathComponent("providers"), withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: dir) }
        func write(_ name: String, _ text: String) throws {
            let path = dir.appendingPathComponent("providers/\(name).json").path
            _ = FileManager.default.createFile(
                atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        }
        try write("google", #"{"refresh_token_policy": {"lifetime": "7d", "inactivity": "180d"}}"#)
        try write(
            "bad",
            #"{"token_endpoint": "https://x.example/t", "authorization_endpoint": "https://x.example/a", "refresh_token_policy": {"lifetime": "7 days"}}"#
        )
        try write(
            "odd",
            #"{"token_endpoint": "https://x.example/t", "authorization_endpoint": "https://x.example/a", "refresh_token_policy": {"lifespan": "7d"}}"#
        )
        try write(
            "keycloak",
            #"{"token_endpoint": "https://x.example/t", "authorization_endpoint": "https://x.example/a", "refresh_token_policy": {"rotates": true, "reuse": "revokes"}}"#
        )
        let catalog = ProviderCatalog.load(configDirectory: dir.path)
        #expect(catalog.providers["google"]?.refreshTokenPolicy?.lifetime == 7 * Self.day)
        #expect(catalog.providers["keycloak"]?.refreshTokenPolicy?.reuse == .revokes)
        #expect(catalog.providers["google"]?.refreshTokenPolicy?.reuse == nil)
        #expect(catalog.providers["bad"] == nil && catalog.providers["odd"] == nil)
        let reasons = catalog.problems.map(\.reason).joined(separator: "\n")
        #expect(reasons.contains("refresh_token_policy.lifetime needs a duration"))
        #expect(reasons.contains("unknown field 'refresh_token_policy.lifespan'"))
    }

    @Test("inactivity counts from the last refresh, and a refresh moves it")
    func inactivity() throws {
        let policy = RefreshTokenPolicy(inactivity: 90 * Self.day, rotates: true)
        let never = try #require(Self.grant().refreshTokenDeadline(policy: policy))
        #expect(never.date == Self.t0.addingTimeInterval(90 * Self.day))
        #expect(never.rule == .inactivity && never.renewable)
        let later = try #require(Self.grant(refreshedAfter: 30).refreshTokenDeadline(policy: policy))
        #expect(later.date == Self.t0.addingTimeInterval(120 * Self.day))
        // Due within the default lead (7 days, or a quarter of the limit).
        #expect(!never.keepAliveDue(at: Self.t0.addingTimeInterval(82 * Self.day)))
        #expect(never.keepAliveDue(at: Self.t0.addingTimeInterval(84 * Self.day)))
        #expect(never.keepAliveDue(at: Self.t0.addingTimeInterval(60 * Self.day), lead: 31 * Self.day))
    }

    @Test("a lifetime runs from the authorization and the earlier rule wins; no refresh moves it")
    func lifetime() throws {
        let policy = RefreshTokenPolicy(lifetime: 7 * Self.day, inactivity: 180 * Self.day, rotates: false)
        let authorized = Self.grant().withDocumentedLifetime(policy, authorizedAt: Self.t0)
        var refreshed = authorized
        refreshed.refreshedAt = Self.t0.addingTimeInterval(5 * Self.day)
        for g in [Self.grant(), authorized, refreshed] {
            let d = try #require(g.refreshTokenDeadline(policy: policy))
            #expect(d.date == Self.t0.addingTimeInterval(7 * Self.day) && d.rule == .lifetime && !d.renewable)
            #expect(!d.keepAliveDue(at: Self.t0.addingTimeInterval(6.9 * Self.day)))
        }
    }

    @Test("the provider's refresh_token_expires_in wins over the policy")
    func providerSaid() throws {
        var g = Self.grant(refreshedAfter: 1)
        g.refreshTokenExpiresAt = Self.t0.addingTimeInterval(10 * Self.day)
        g.tokenResponse = ["refresh_token_expires_in": .number(9 * Self.day)]
        g.refreshTokenRotates = true
        let d = try #require(g.refreshTokenDeadline(policy: RefreshTokenPolicy(inactivity: 2 * Self.day)))
        #expect(d.rule == .providerSaid && d.date == Self.t0.addingTimeInterval(10 * Self.day) && d.renewable)
        g.refreshTokenRotates = false
        #expect(g.refreshTokenDeadline(policy: nil)?.renewable == false)
    }

    @Test("nothing known, no refresh token, OAuth 1.0a or dead: no deadline")
    func none() {
        #expect(Self.grant().refreshTokenDeadline(policy: nil) == nil)
        #expect(Self.grant().refreshTokenDeadline(policy: RefreshTokenPolicy(source: "https://x.example")) == nil)
        var g = Self.grant()
        g.refreshToken = nil
        #expect(g.refreshTokenDeadline(policy: RefreshTokenPolicy(inactivity: Self.day)) == nil)
        g = Self.grant()
        g.dead = true
        #expect(g.refreshTokenDeadline(policy: RefreshTokenPolicy(inactivity: Self.day)) == nil)
    }
}
