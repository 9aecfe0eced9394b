import Foundation
import Testing
import VaultTestSupport

extension ForwardingScene {
    /// A laptop whose agent holds `bound`, a grant of dpop_server.py bound
    /// to a key, that forwarded requests may use.
    static func withBoundDPoPGrant() throws -> (ForwardingScene, FixtureServer) {
        let scene = try ForwardingScene()
        let dpop = try FixtureServer(script: "dpop_server.py", arguments: ["serve"])
        let home = scene.laptop.home
        try home.dpopProvider(at: dpop)
        let added = try home.addAtDPoPFixture("bound")
        try #require(added.status == 0, "\(added.stderr)")
        #expect(try home.run("policy", "bound", "--forwarded", "allow").status == 0)
        return (scene, dpop)
    }
}

/// `vault header NAME` without `--url`, for a DPoP-bound grant, is the same
/// usage error on the laptop and on a server that reaches the laptop's
/// agent through `ssh -R`: the proof needs the request's URL, and
/// `--url` is what makes it work there (operation 13).
@Suite("vault header through a forwarded agent, for a DPoP-bound grant", .serialized)
struct ForwardedDPoPHeaderTests {
    @Test("forwarded header without --url: exit 64 and the hint to give --url, as on the laptop")
    func headerWithoutURL() throws {
        let (scene, dpop) = try ForwardingScene.withBoundDPoPGrant()
        let home = scene.laptop.home

        let local = try home.run("header", "bound")
        #expect(local.status == 64, "\(local.stderr)")
        #expect(local.stderr.contains("--url"), "\(local.stderr)")

        let remote = try scene.onServer("header", "bound")
        #expect(remote.status == 64, "\(remote.stderr)")
        #expect(remote.stderr.contains("--url"), "\(remote.stderr)")
        #expect(remote.stdout.isEmpty)

        // With --url it works there: the same command with the URL is the way.
        let url = dpop.base + "/userinfo"
        let withURL = try scene.onServer("header", "bound", "--url", url)
        #expect(withURL.status == 0, "\(withURL.stderr)")
    }

    @Test("forwarded token for a DPoP-bound grant: the refusal points to header --url")
    func tokenPointsToHeader() throws {
        let (scene, _) = try ForwardingScene.withBoundDPoPGrant()
        let bare = try scene.onServer("token", "bound")
        #expect(bare.status != 0 && bare.stdout.isEmpty)
        #expect(bare.stderr.contains("vault header bound --url"), "\(bare.stderr)")
    }
}
