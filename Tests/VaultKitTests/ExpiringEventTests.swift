import Foundation
import Testing
import VaultTestSupport

@testable import VaultKit

/// `GrantEvent.expiring`: a session that hands out a grant whose refresh
/// token dies for good within the app's lead says so, once.
@Suite("a session tells when a grant's refresh token dies soon for good")
struct ExpiringEventTests {
    let library = LibraryTests()

    /// A fresh grant whose refresh token's lifetime, kept at its
    /// authorization, ends in `days` days.
    func grant(lifetimeLeft days: Double) throws -> Grant {
        var g = try library.expiredGrant()
        g.expiresAt = Date().addingTimeInterval(3600)
        g.refreshTokenExpiresAt = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + days * 86400).rounded())
        return g
    }

    @Test("within the lead: one .expiring with the deadline, not repeated; beyond it or without a lead: none")
    func once() async throws {
        let store = InMemoryGrantStore()
        let g = try grant(lifetimeLeft: 3)
        try await store.save(g, as: "work")
        let session = TokenSession(store: store, transport: FakeTransport([]), expiringLead: 7 * 86400)
        let first = session.events
        #expect(try await session.freshGrant("work").grant.accessToken == g.accessToken)
        let deadline = try #require(g.refreshTokenExpiresAt)
        #expect(await SecondPassTests.collect(first, 1) == [.expiring(name: "work", deadline: deadline)])
        let again = session.events
        _ = try await session.freshGrant("work")
        _ = try await session.freshGrant("work")
        #expect(await SecondPassTests.collect(again, 1) == [])

        for quiet in [
            TokenSession(store: store, transport: FakeTransport([]), expiringLead: 86400),
            TokenSession(store: store, transport: FakeTransport([])),
        ] {
            let events = quiet.events
            _ = try await quiet.freshGrant("work")
            #expect(await SecondPassTests.collect(events, 1) == [])
        }
    }
}
