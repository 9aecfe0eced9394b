import Foundation
import Testing
import VaultTestSupport

/// `vault keepalive` against a provider that lets a refresh token die after
/// 90 days unused (Microsoft's rule, as the fixture's Microsoft persona
/// enforces it), with the days passed by libfaketime for vault and by the
/// fixture's own clock for the provider.
@Suite(
    "keepalive: a grant kept alive past an inactivity limit that kills it without",
    .enabled(if: FakeTime.installed, "needs libfaketime (Debian's faketime package)"))
struct KeepaliveTests {
    static let day = 86400

    /// A Microsoft grant at the fixture, with 90 days of allowed inactivity.
    static func scene() throws -> ProviderScene {
        let scene = try ProviderScene("microsoft", settings: ["refresh_inactivity": 90 * day])
        let added = try scene.add()
        precondition(added.status == 0, added.stderr)
        return scene
    }

    /// `vault ARGS` in `scene`'s home, `days` days from now for vault and the provider alike.
    static func run(_ scene: ProviderScene, days: Int, _ args: String...) throws -> ProcessResult {
        try scene.post("/__settings", ["clock_offset": days * day])
        var env = scene.home.environment
        env["FAKETIME_DONT_FAKE_MONOTONIC"] = "1"
        return try VaultProcess.start(
            ["-f", "+\(days)d", VaultProcess.binary] + args, environment: env, executable: FakeTime.wrapper
        ).wait()
    }

    @Test("without keep-alive the grant dies of inactivity after 90 days (control)")
    func diesWithout() throws {
        let scene = try Self.scene()
        let r = try Self.run(scene, days: 95, "token", "work")
        #expect(r.status == 2, "\(r.stderr)")
        #expect(try scene.shown()?["state"] as? String == "dead")
    }

    @Test("keep-alive refreshes it before the limit, and it lives past the limit")
    func livesWith() throws {
        let scene = try Self.scene()
        // Not due yet: nothing is sent.
        let early = try Self.run(scene, days: 10, "keepalive")
        #expect(early.status == 0 && early.stderr.contains("no grant is close"), "\(early.stderr)")
        #expect(try scene.log("token", grantType: "refresh_token").isEmpty)
        // Five days before the limit: refreshed, through the provider.
        let kept = try Self.run(scene, days: 85, "keepalive", "--json")
        #expect(kept.status == 0, "\(kept.stderr) \(kept.stdout)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(kept.stdout.utf8)) as? [[String: Any]])
        #expect(report.count == 1 && report.first?["result"] as? String == "refreshed")
        #expect(report.first?["rule"] as? String == "inactivity")
        #expect(try scene.log("token", grantType: "refresh_token").count == 1)
        // 170 days after the authorization, 85 after the keep-alive: alive.
        let later = try Self.run(scene, days: 170, "token", "work")
        #expect(later.status == 0, "\(later.stderr)")
        #expect(try scene.shown()?["state"] as? String == "fresh")
    }

    @Test("a refusal exits 2 and marks the grant dead; --within is checked")
    func refusal() throws {
        let scene = try Self.scene()
        try scene.script(["token": [["error": "invalid_grant", "when": "refresh_token"]]])
        let r = try Self.run(scene, days: 88, "keepalive", "--json")
        #expect(r.status == 2, "\(r.stderr)")
        #expect(r.stdout.contains("\"died\""))
        #expect(try scene.shown()?["state"] as? String == "dead")
        let bad = try scene.home.run("keepalive", "--within", "soon")
        #expect(bad.status == 64 && bad.stderr.contains("--within needs a duration"))
        scene.home.extra["VAULT_KEEPALIVE_LEAD"] = "soon"
        let badLead = try scene.home.run("keepalive")
        #expect(badLead.status == 64 && badLead.stderr.contains("VAULT_KEEPALIVE_LEAD needs a duration"))
    }
}
