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

    @Test("a grant handed back as it was and still due is tried again 20 to 40 seconds later, not at every check")
    func handedBackUnrefreshed() throws {
        let due = grant(lifetime: 3600, left: 100)
        let later = try #require(
            BackgroundRefresher.retry(after: FreshGrant(grant: due, refreshed: false), margin: 300, now: now))
        #expect(later.timeIntervalSince(now) >= 20 && later.timeIntervalSince(now) <= 40)
        // Refreshed here, or by another process (no longer due): at the next check.
        #expect(BackgroundRefresher.retry(after: FreshGrant(grant: due, refreshed: true), margin: 300, now: now) == nil)
        let fresh = grant(lifetime: 3600, left: 3500)
        #expect(
            BackgroundRefresher.retry(after: FreshGrant(grant: fresh, refreshed: false), margin: 300, now: now) == nil)
    }
}

@Suite("the background refresher at work, with a scripted provider")
struct BackgroundRefreshTests {
    static let refreshed = (
        200, #"{"access_token":"agent-new-access","expires_in":3600,"token_type":"Bearer"}"#, [(String, String)]()
    )

    /// Waits until the refresher has finished its pass and its refreshes.
    static func settle(_ refresher: BackgroundRefresher, requests: @escaping () -> Int, expected: Int) {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, refresher.isBusy || requests() < expected { usleep(20_000) }
        usleep(50_000)
        while Date() < deadline, refresher.isBusy { usleep(20_000) }
    }

    @Test("a grant asked for since unlocking is refreshed ahead of its expiry; one never asked for is not")
    func refreshesRecentGrants() throws {
        let scene = try AgentScene(answers: [BackgroundRefreshTests.refreshed])
        try scene.unlock()
        // 200 of the token's 3600 seconds left: due, 300 seconds ahead.
        scene.clock.advance(3400)
        let refresher = BackgroundRefresher(keys: scene.keys)
        refresher.start(now: scene.clock.now())
        BackgroundRefreshTests.settle(refresher, requests: { scene.transport.requests.count }, expected: 0)
        #expect(scene.transport.requests.isEmpty, "refreshed a grant nobody asked for")

        _ = scene.keys.use(grant: "work")
        refresher.start(now: scene.clock.now())
        BackgroundRefreshTests.settle(refresher, requests: { scene.transport.requests.count }, expected: 1)
        #expect(scene.transport.requests.count == 1)
        #expect(scene.log.all.contains("refreshed a grant ahead of its expiry"))
        let stored = try Vault.open(at: scene.dir.location, key: .keyfile(TestKeys.keyfileSecret()), time: scene.clock)
        let rotated = try stored.load("work").accessToken == "agent-new-access"
        #expect(rotated, "the new token was not stored")
    }

    @Test("a failed background refresh is tried again 20 to 40 seconds later, not at once")
    func retriesLater() throws {
        let scene = try AgentScene(answers: [(503, "busy", [])])
        try scene.unlock()
        scene.clock.advance(3400)
        _ = scene.keys.use(grant: "work")
        let refresher = BackgroundRefresher(keys: scene.keys)
        let now = scene.clock.now()
        refresher.start(now: now)
        BackgroundRefreshTests.settle(refresher, requests: { scene.transport.requests.count }, expected: 1)
        #expect(scene.log.all.contains { $0.hasPrefix("background refresh failed: ") })
        #expect(scene.keys.refreshCandidates(now: now.addingTimeInterval(19), excluding: []) == nil)
        #expect(scene.keys.refreshCandidates(now: now.addingTimeInterval(40), excluding: [])?.1 == ["work"])
    }
}
