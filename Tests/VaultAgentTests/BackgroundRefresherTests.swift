import Foundation
import Testing
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

@Suite("the background refresher: which grants are due")
struct BackgroundRefresherTests {
    let now = Date(epochSeconds: 1_800_000_000)

    func grant(lifetime: TimeInterval, left: TimeInterval) -> Grant {
        var g = TestKeys.grant(now: now.addingTimeInterval(left - lifetime))
        g.expiresAt = now.addingTimeInterval(left)
        return g
    }

    @Test("a token is due when less than refreshBefore is left")
    func dueBeforeExpiry() {
        let refresher = BackgroundRefresher.due
        #expect(refresher(grant(lifetime: 3600, left: 301), 300, now) == .notYet)
        #expect(refresher(grant(lifetime: 3600, left: 300), 300, now) == .now(margin: 300))
        #expect(refresher(grant(lifetime: 3600, left: -5), 300, now) == .now(margin: 300))
    }

    @Test("a short-lived token is refreshed at half its life, not continuously")
    func shortLived() {
        #expect(BackgroundRefresher.due(grant(lifetime: 120, left: 61), refreshBefore: 300, now: now) == .notYet)
        #expect(
            BackgroundRefresher.due(grant(lifetime: 120, left: 60), refreshBefore: 300, now: now) == .now(margin: 60))
    }

    @Test("a grant that is dead, has no refresh token or never expires is never due")
    func never() {
        var dead = grant(lifetime: 3600, left: 10)
        dead.dead = true
        var bare = grant(lifetime: 3600, left: 10)
        bare.refreshToken = nil
        var forever = grant(lifetime: 3600, left: 10)
        forever.expiresAt = nil
        for g in [dead, bare, forever] {
            #expect(BackgroundRefresher.due(g, refreshBefore: 300, now: now) == .never)
        }
        var machine = bare
        machine.kind = .clientCredentials
        #expect(BackgroundRefresher.due(machine, refreshBefore: 300, now: now) == .now(margin: 300))
    }
}
