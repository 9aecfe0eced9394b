import Foundation
import Testing
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

@Suite("the agent's keep-alive plans its passes by the grants' deadlines")
struct KeepAliveScheduleTests {
    let now = Date(epochSeconds: 1_800_000_000)

    func inactivity(in seconds: TimeInterval, limit: TimeInterval) -> RefreshTokenDeadline {
        RefreshTokenDeadline(
            date: now.addingTimeInterval(seconds), rule: .inactivity, span: limit, renewable: true)
    }

    @Test("the next pass comes a lead before the earliest deadline a refresh moves, at most an interval away")
    func plan() {
        let next = { (deadlines: [RefreshTokenDeadline], lead: TimeInterval?) in
            KeepAliveRefresher.nextPass(after: now, deadlines: deadlines, lead: lead, interval: 3600)
                .timeIntervalSince(now)
        }
        // Nothing known: the interval.
        #expect(next([], nil) == 3600)
        // 10 minutes unused, refreshed now: a quarter of the limit ahead of it.
        #expect(next([inactivity(in: 600, limit: 600)], nil) == 450)
        #expect(next([inactivity(in: 600, limit: 600)], 300) == 300)
        // The earliest of several; a far one does not wait beyond the interval.
        #expect(next([inactivity(in: 90 * 86400, limit: 90 * 86400), inactivity(in: 1200, limit: 1200)], nil) == 900)
        #expect(next([inactivity(in: 90 * 86400, limit: 90 * 86400)], nil) == 3600)
        // A deadline no refresh moves plans nothing.
        let lifetime = RefreshTokenDeadline(
            date: now.addingTimeInterval(60), rule: .lifetime, span: 86400, renewable: false)
        #expect(next([lifetime], nil) == 3600)
        // A tiny window, or one past, does not make the agent spin.
        #expect(next([inactivity(in: 4, limit: 8)], nil) == KeepAliveRefresher.floor)
        #expect(next([inactivity(in: -30, limit: 600)], nil) == KeepAliveRefresher.floor)
        // A failed refresh is tried again a minute later; a shorter interval set by hand wins.
        #expect(
            KeepAliveRefresher.nextPass(after: now, deadlines: [], lead: nil, interval: 3600, failed: true)
                == now.addingTimeInterval(KeepAliveRefresher.retryAfterFailure))
        #expect(
            KeepAliveRefresher.nextPass(
                after: now, deadlines: [inactivity(in: 1, limit: 4)], lead: nil, interval: 2)
                == now.addingTimeInterval(2))
    }

    /// Waits until the pass is over.
    static func settle(_ keepAlive: KeepAliveRefresher) {
        let deadline = Date().addingTimeInterval(10)
        usleep(20_000)
        while Date() < deadline, keepAlive.isBusy { usleep(20_000) }
    }

    @Test("an agent at the default hourly interval refreshes a grant that dies after 10 minutes unused before it dies")
    func refreshesBeforeTheWindowCloses() throws {
        let refreshed = (
            200, #"{"access_token":"kept-alive","expires_in":3600,"token_type":"Bearer"}"#, [(String, String)]()
        )
        let scene = try AgentScene(answers: [refreshed, refreshed])
        // The grant's provider documents a 10-minute inactivity limit.
        let providers = scene.dir.location.configDirectory + "/providers"
        try FileManager.default.createDirectory(
            atPath: providers, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let written = FileManager.default.createFile(
            atPath: providers + "/google.json",
            contents: Data(#"{"refresh_token_policy": {"inactivity": "10m"}}"#.utf8),
            attributes: [.posixPermissions: 0o600])
        try #require(written)
        try scene.unlock()
        let keepAlive = KeepAliveRefresher(keys: scene.keys)
        #expect(AgentServer.Options().keepAliveInterval == 3600)

        // The first pass comes at once and finds nothing due: the grant was
        // authorized just now; it plans the next 2.5 minutes ahead of the limit.
        keepAlive.start(now: scene.clock.now())
        Self.settle(keepAlive)
        #expect(scene.transport.requests.isEmpty)
        #expect(keepAlive.nextPass == AgentScene.start.addingTimeInterval(450))

        // Nothing in between, with the vault unchanged.
        scene.clock.advance(449)
        keepAlive.start(now: scene.clock.now())
        Self.settle(keepAlive)
        #expect(scene.transport.requests.isEmpty)

        // At the planned time: refreshed, well before the 10 minutes are up,
        // and the next pass planned from the new deadline.
        scene.clock.advance(1)
        keepAlive.start(now: scene.clock.now())
        Self.settle(keepAlive)
        #expect(scene.transport.requests.count == 1)
        #expect(scene.log.all.contains("kept a grant alive ahead of its inactivity limit"))
        #expect(keepAlive.nextPass == AgentScene.start.addingTimeInterval(900))
    }
}
