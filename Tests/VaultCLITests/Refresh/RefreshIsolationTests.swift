import Foundation
import Glibc
import Testing
import VaultHTTP
import VaultTestSupport

/// A token endpoint that accepts requests and never answers, and what else
/// goes on while one refresh waits on it. The order of events is the
/// proof, not how long anything took: every other command must finish
/// while the stalled refresh is still in flight (its request still held by
/// the endpoint, its `vault token` not exited).
@Suite("one grant's stalled provider stalls nothing else")
struct RefreshIsolationTests {
    let stall: FixtureServer
    let provider: CountedProvider

    init() throws {
        stall = try FixtureServer(script: "http_fixture.py")
        provider = try CountedProvider()
    }

    /// Requests that reached the stalling endpoint, and those it still holds.
    func stalls() throws -> (arrived: Int, open: Int) {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: stall.base + "/stalls"))
        let doc = try #require(
            try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [String: Int])
        return (doc["arrived"] ?? 0, doc["open"] ?? 0)
    }

    /// An expired grant `slow` refreshed at the stalling endpoint and an
    /// expired grant `exp2` refreshed at the real provider. Returns exp2's
    /// access token before its refresh.
    func importGrants(into home: Home) throws -> String {
        let slow: [String: Any] = [
            "access_token": "slow-old", "refresh_token": "slow-refresh",
            "expires_at": Int(Date().timeIntervalSince1970) - 60, "provider": "local",
            "provider_config": ["token_endpoint": stall.base + "/stall", "client_id": "slow-client"],
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: slow), as: UTF8.self)
        let imported = try home.run("import", "slow", stdin: json)
        try #require(imported.status == 0, "\(imported.stderr)")
        return try provider.importGrant("exp2", into: home)
    }

    /// Starts `vault token slow` and returns once its token request has
    /// reached the endpoint, so what follows runs while it is in flight.
    func startSlowRefresh(_ home: Home) throws -> RunningProcess {
        let before = try stalls().arrived
        let slow = try home.start("token", "slow")
        let arrived = try eventually { try stalls().arrived > before || !slow.isRunning }
        try #require(arrived && slow.isRunning, "the refresh of 'slow' never reached its token endpoint")
        return slow
    }

    /// The slow refresh is still in flight: its request is held, its command runs.
    func expectInFlight(_ slow: RunningProcess, after what: String) throws {
        #expect(try stalls().open == 1, "the stalled request was given up before \(what) finished")
        #expect(slow.isRunning, "'vault token slow' exited before \(what) finished")
    }

    /// The other grants, read, written and refreshed meanwhile.
    func useOtherGrants(_ home: Home, _ slow: RunningProcess, exp2Before: String) throws {
        let ok = try home.run("token", "ok")
        #expect(ok.status == 0 && ok.stdout == "ok-token\n", "\(ok.stderr)")
        try expectInFlight(slow, after: "vault token ok")

        let other = try home.run("import", "other", stdin: Home.tokenJSON("other-token"))
        #expect(other.status == 0, "\(other.stderr)")
        try expectInFlight(slow, after: "vault import other")

        let refreshes = try provider.refreshes()
        let exp2 = try home.run("token", "exp2")
        #expect(exp2.status == 0, "\(exp2.stderr)")
        let refreshed = !exp2.stdout.isEmpty && exp2.stdout != exp2Before + "\n"
        #expect(refreshed, "exp2 was not refreshed")
        #expect(try provider.refreshes() == refreshes + 1)
        try expectInFlight(slow, after: "vault token exp2")
    }

    @Test("without an agent: vault token, import and another refresh finish while one refresh waits on its provider")
    func withoutAgent() throws {
        let home = Home()
        try home.initKeyfileVault()
        home.extra["VAULT_AGENT"] = "off"
        try #require(try home.run("import", "ok", stdin: Home.tokenJSON("ok-token")).status == 0)
        let exp2Before = try importGrants(into: home)

        let slow = try startSlowRefresh(home)
        try useOtherGrants(home, slow, exp2Before: exp2Before)

        // The stalled refresh ends on its own as a transient failure that
        // changes nothing.
        let r = slow.wait(timeout: 90)
        #expect(r.status == 75 && r.stdout.isEmpty, "\(r.status) \(r.stderr)")
        #expect(r.stderr.contains("vault: error: refreshing 'slow'"), "\(r.stderr)")
        #expect(try stalls().open == 0)
        #expect(try home.run("token", "ok").stdout == "ok-token\n")
        #expect(try home.listedNames().names == ["ok", "slow", "exp2", "other"])
    }

    @Test(
        "through the agent: it serves tokens, a listing, an import and vault lock while its refresh of one grant waits")
    func throughAgent() throws {
        let agent = AgentHome()
        let home = agent.home
        try home.initPassphraseVault("isolation passphrase")
        let first = try home.run("import", "ok", stdin: Home.tokenJSON("ok-token"))
        #expect(first.stderr.contains("the agent keeps this vault unlocked"), "\(first.stderr)")
        // From here only the agent can open the vault, so it does every refresh.
        home.extra["VAULT_PASSPHRASE_FILE"] = nil
        let agentPID = try #require(try agent.waitForAgent())
        let exp2Before = try importGrants(into: home)

        let slow = try startSlowRefresh(home)
        try useOtherGrants(home, slow, exp2Before: exp2Before)
        let listed = try home.listedNames()
        #expect(listed.names == ["ok", "slow", "exp2", "other"], "\(listed.result.stderr)")
        try expectInFlight(slow, after: "vault list")

        let lock = try home.run("lock")
        #expect(lock.status == 0 && lock.stderr == "vault: locked\n", "\(lock.stderr)")
        // Locked in the middle of that refresh: the agent serves nothing new
        // at once, but lets the refresh under way end and store its outcome
        // (a rotated refresh token must not be lost), then exits.
        #expect(try home.run("token", "ok").status == 77)
        try expectInFlight(slow, after: "vault lock")
        let r = slow.wait(timeout: 90)
        #expect(r.status == 75 && r.stderr.contains("refreshing 'slow'"), "\(r.status) \(r.stderr)")
        #expect(AgentHome.gone(agentPID, within: 15))
        #expect(try eventually { try stalls().open == 0 })
    }
}
