import Foundation
import Testing
import VaultTestSupport

@testable import VaultCore

/// A refresh the coordinator let go alone (the sync store away) is sent
/// only if the right to do so still holds right before the request: it can
/// run out while the process waits for the vault file to take writes.
@Suite("refresh alone: the decision is checked again before the request")
struct RefreshAloneTests {
    let dir = TemporaryDirectory()

    /// Lets every refresh go alone, and says whether it still may.
    struct AloneCoordinator: RefreshCoordinator {
        let stillAlone: Bool

        func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision {
            .proceedAlone
        }

        func mayStillRefreshAlone(_ need: RefreshNeed, grant: Grant, in vault: Vault) -> Bool { stillAlone }
    }

    /// A vault whose grant "work" has `expiresIn` seconds left, and a
    /// refresher whose provider would answer one refresh.
    func scene(expiresIn: TimeInterval, stillAlone: Bool) throws -> (Vault, FakeTransport, TokenRefresher) {
        let vault = try Vault.create(at: dir.location, key: .keyfile(TestKeys.keyfileSecret()), kdf: .minimum)
        var grant = TestKeys.grant(token: "old")
        grant.expiresAt = Date().addingTimeInterval(expiresIn)
        try vault.save(grant, as: "work")
        let fake = FakeTransport([
            (200, #"{"access_token":"new","expires_in":3600,"refresh_token":"r2"}"#, [(String, String)]())
        ])
        let coordinator = AloneCoordinator(stillAlone: stillAlone)
        return (vault, fake, TokenRefresher(vault: vault, transport: fake, coordinator: coordinator))
    }

    @Test("while the right holds, the request is sent")
    func sent() throws {
        let (_, fake, refresher) = try scene(expiresIn: 10, stillAlone: true)
        let fresh = try refresher.freshGrant("work", minimumValidity: 60)
        #expect(fresh.refreshed && fresh.grant.accessToken == "new")
        #expect(fake.requests.count == 1)
    }

    @Test("once it ran out: nothing is sent; a token still valid is handed out, else the error says try again")
    func ranOut() throws {
        let (vault, fake, refresher) = try scene(expiresIn: 30, stillAlone: false)
        let kept = try refresher.freshGrant("work", minimumValidity: 60)
        #expect(!kept.refreshed && kept.grant.accessToken == "old")

        var grant = try vault.load("work")
        grant.expiresAt = Date().addingTimeInterval(2)
        try vault.save(grant, as: "work")
        #expect {
            try refresher.freshGrant("work", minimumValidity: 60)
        } throws: { error in
            let error = error as? VaultError
            return error?.code == .transient && error?.reason.contains("right to refresh 'work' alone ran out") == true
        }
        // Forced, even a valid token is not what was asked for.
        #expect(throws: VaultError.self) { try refresher.freshGrant("work", forceRefresh: true) }
        #expect(fake.requests.isEmpty)
        #expect(try vault.load("work").refreshToken == grant.refreshToken)
    }

    /// Merges a newer token into the vault, as a sync does, then finds the
    /// store away with another machine holding the grant.
    struct MergingCoordinator: RefreshCoordinator {
        let newer: Grant

        func prepare(_ need: RefreshNeed, grant: Grant, in vault: Vault) throws(VaultError) -> RefreshDecision {
            try vault.save(newer, as: need.name)
            throw VaultError(.transient, "the sync store cannot be reached")
        }
    }

    @Test("a token that could not be refreshed is the newest the vault has, as the failed coordination left it")
    func newestAfterTheSync() throws {
        let (vault, fake, _) = try scene(expiresIn: 30, stillAlone: false)
        var newer = TestKeys.grant(token: "merged")
        newer.expiresAt = Date().addingTimeInterval(40)
        let refresher = TokenRefresher(vault: vault, transport: fake, coordinator: MergingCoordinator(newer: newer))
        let handed = try refresher.freshGrant("work", minimumValidity: 60)
        #expect(!handed.refreshed && handed.grant.accessToken == "merged")
        #expect(fake.requests.isEmpty)
    }
}
