import Foundation
import Glibc
import Testing
import VaultHTTP
import VaultTestSupport

/// Availability first: a synced vault whose store goes away while the
/// provider is up still hands out tokens, refreshing locally, and the next
/// sync that reaches the store pushes the result to the other machines.
@Suite("the sync store is never required for a token")
final class StoreOutageTests {
    /// How the store goes away.
    enum Outage: String, CaseIterable, CustomTestStringConvertible {
        /// The store accepts connections and never answers.
        case stall
        /// The store answers every request with HTTP 500.
        case failing = "500"
        /// Nothing listens at the store's address any more.
        case gone

        var testDescription: String { rawValue }
    }

    let dir = TemporaryDirectory()
    let dav: WebDAVStore
    var davBase: String { "http://127.0.0.1:\(dav.port)" }
    var proxy: FixtureServer?
    let proxyPort: Int
    let provider: CountedProvider
    let a = Home()
    let b = Home()

    init() throws {
        // The proxy is this suite's own: `takeAway(.gone)` stops it and
        // starts it again on the same port.
        dav = try WebDAVStore(in: dir.path)
        let proxy = try FixtureServer(script: "store_proxy.py", arguments: ["http://127.0.0.1:\(dav.port)"])
        proxyPort = proxy.port
        self.proxy = proxy
        provider = try CountedProvider()
        try a.initKeyfileVault()
        for home in [a, b] {
            home.extra["VAULT_AGENT"] = "off"
            home.write(home.path + "/store-password", "store password\n")
        }
        // Both machines hold the same key file, as a server pair would.
        b.extra["VAULT_KEYFILE"] = a.path + "/key"
    }

    var proxied: String { "http://127.0.0.1:\(proxyPort)/store/" }

    func control(_ path: String) throws {
        _ = try CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(proxyPort)/__\(path)"))
    }

    func takeAway(_ outage: Outage) throws {
        switch outage {
        case .stall, .failing: try control("mode/" + outage.rawValue)
        case .gone: proxy = nil  // stops the proxy and waits until it has
        }
    }

    func bringBack(_ outage: Outage) throws {
        switch outage {
        case .stall, .failing: try control("mode/pass")
        case .gone: proxy = try FixtureServer(script: "store_proxy.py", arguments: [davBase, String(proxyPort)])
        }
    }

    /// Machines a and b syncing grant "work" through the proxied store,
    /// refreshed once on a, which then holds its standing lease (one-use
    /// refresh tokens rotate, and the provider is not known to tolerate
    /// reuse). The provider's access tokens last five minutes here, less
    /// than the lease: a may refresh alone under it (it is not quiet).
    /// Returns the access token a's refresh got. With access tokens that
    /// outlast the lease (`expires` of an hour), a renews it quiet: it
    /// promised not to refresh alone under it.
    func holderAndOther(expires: Int = 300) throws -> String {
        try provider.control("/__expires/\(expires)")
        try provider.importGrant("work", into: a)
        let remote = try a.run(
            "remote", "set", proxied, "--user", "vault", "--password-file", a.path + "/store-password")
        #expect(remote.status == 0, "\(remote.stderr)")
        #expect(try a.run("sync").status == 0)
        let joined = try b.run("join", proxied, "--user", "vault", "--password-file", b.path + "/store-password")
        try #require(joined.status == 0, "\(joined.stderr)")
        let first = try a.run("token", "work")
        try #require(first.status == 0, "\(first.stderr)")
        #expect(try b.run("sync").status == 0)
        return first.stdout
    }

    @Test("vault doctor through the agent probes the store and says who holds the right to refresh")
    func doctorThroughTheAgent() throws {
        _ = try holderAndOther()
        b.allowAgent()
        #expect(try b.start("agent").wait().status == 0)
        defer { _ = try? b.run("lock") }
        let up = try DoctorRun(try b.run("doctor", "work", "--json"))
        #expect(up.detail("unlock").contains("through the agent"), "\(up.detail("unlock"))")
        #expect(up.status("sync-store") == "ok", "\(up.detail("sync-store"))")
        #expect(up.status("refresh-right", of: "work") == "ok", "\(up.detail("refresh-right", of: "work"))")
        try takeAway(.gone)
        let down = try DoctorRun(try b.start("doctor", "work", "--json").wait(timeout: 110))
        #expect(down.status("sync-store") == "fail" && down.result.status == 1, "\(down.detail("sync-store"))")
        let right = down.detail("refresh-right", of: "work")
        #expect(right.contains("holds the right to refresh it and the store cannot be reached"), "\(right)")
    }

    @Test(
        "the store away from both machines: the holder refreshes, the other hands out its valid token or exits 75",
        arguments: Outage.allCases)
    func onlyTheHolderRefreshes(_ outage: Outage) throws {
        let first = try holderAndOther()
        let before = try provider.refreshes()
        try takeAway(outage)

        // b does not hold the grant: it never spends the refresh token.
        let forced = try b.start("token", "work", "--force-refresh").wait(timeout: 110)
        #expect(forced.status == 75, "\(forced.status) \(forced.stderr)")
        #expect(forced.stderr.contains("may hold the right to refresh 'work'"), "\(forced.stderr)")
        let served = try b.start("token", "work", "--min-valid", "100000").wait(timeout: 110)
        let same = served.stdout == first
        #expect(served.status == 0 && same, "b hands out the access token it has while it is valid: \(served.stderr)")
        #expect(
            served.stderr.contains("the access token of 'work' is valid for")
                && served.stderr.contains("less than the 100000 s asked for"),
            "b says the token is shorter than asked: \(served.stderr)")
        #expect(try provider.refreshes() == before, "b sent no refresh")
        // vault doctor says who holds the grant, on both machines.
        let told = try b.start("doctor", "work").wait(timeout: 110)
        #expect(
            (told.stdout + told.stderr).contains("holds the right to refresh it and the store cannot be reached"),
            "\(told.stdout)")
        let holds = try a.start("doctor", "work").wait(timeout: 110)
        #expect((holds.stdout + holds.stderr).contains("this machine holds the right to refresh it"), "\(holds.stdout)")
        // Doctor's probe of the token endpoint spends nothing, but the proxy counts it.
        let refreshes = try provider.refreshes()

        // a holds it: it refreshes while the store is away.
        let r = try a.start("token", "work", "--min-valid", "100000").wait(timeout: 110)
        #expect(r.status == 0, "\(r.status) \(r.stderr)")
        let token = r.stdout
        let newToken = token.count > 100 && token != first
        #expect(newToken, "a new access token")
        #expect(try provider.refreshes() == refreshes + 1)
        let kept = try a.run("token", "work").stdout == token
        #expect(kept, "the refreshed token was stored")

        // The store back: a's sync sends it on, b takes it, and the grant
        // still refreshes: no refresh token was presented twice.
        try bringBack(outage)
        let pushed = try a.run("sync")
        #expect(pushed.status == 0 && pushed.stderr.contains("1 sent"), "\(pushed.stderr)")
        let pulled = try b.run("sync")
        #expect(pulled.status == 0 && pulled.stderr.contains("1 received"), "\(pulled.stderr)")
        let other = try b.run("token", "work")
        let handedOn = other.stdout == token
        #expect(other.status == 0 && handedOn, "b has the token refreshed while the store was away: \(other.stderr)")
        let again = try a.run("token", "work", "--force-refresh")
        #expect(again.status == 0, "the grant lives: \(again.stderr)")
        #expect(try provider.refreshes() == refreshes + 2)
    }

    @Test("the store away: the holder of a quiet right says so and when it refreshes; a short token says why")
    func holderSaysWhy() throws {
        let first = try holderAndOther(expires: 3600)
        let before = try provider.refreshes()
        try takeAway(.gone)

        // a holds the right, and promised not to refresh alone under it.
        let forced = try a.start("refresh", "work").wait(timeout: 110)
        #expect(forced.status == 75, "\(forced.status) \(forced.stderr)")
        #expect(forced.stderr.contains("this machine holds the right to refresh 'work'"), "\(forced.stderr)")
        #expect(
            forced.stderr.contains("promised the other machines not to refresh it without the store")
                && forced.stderr.contains("it is refreshed here once the store answers"), "\(forced.stderr)")
        #expect(!forced.stderr.contains("another machine may hold"), "\(forced.stderr)")
        // b does not: it keeps the wording for a machine that is not the holder.
        let other = try b.start("refresh", "work").wait(timeout: 110)
        #expect(other.status == 75, "\(other.status) \(other.stderr)")
        #expect(other.stderr.contains("another machine may hold the right to refresh 'work'"), "\(other.stderr)")

        // A token shorter than asked for says why it was not refreshed.
        let held = try a.start("token", "work", "--min-valid", "100000").wait(timeout: 110)
        let same = held.stdout == first
        #expect(held.status == 0 && same, "\(held.stderr)")
        #expect(
            held.stderr.contains(
                "less than the 100000 s asked for: it could not be refreshed now: this machine holds the right to "
                    + "refresh 'work'"), "\(held.stderr)")
        let away = try b.start("token", "work", "--min-valid", "100000").wait(timeout: 110)
        #expect(away.status == 0, "\(away.stderr)")
        #expect(
            away.stderr.contains(
                "less than the 100000 s asked for: it could not be refreshed now: the sync store cannot be reached"),
            "\(away.stderr)")
        #expect(try provider.refreshes() == before, "nothing was refreshed")

        // The store back: b asks a for the right, and says a holds it.
        try bringBack(.gone)
        let asked = try b.start("token", "work", "--min-valid", "100000").wait(timeout: 110)
        #expect(asked.status == 0, "\(asked.stderr)")
        #expect(
            asked.stderr.contains("it could not be refreshed now: machine ")
                && asked.stderr.contains("holds the right to refresh 'work'"), "\(asked.stderr)")
        #expect(try provider.refreshes() == before, "b sent no refresh")
    }

    @Test("a store that accepts and never answers: sync says so while it tries again, then names the store")
    func stalledStoreIsNamed() throws {
        _ = try holderAndOther()
        try takeAway(.stall)
        a.extra["VAULT_STORE_TIMEOUT"] = "1"
        let direct = try a.start("sync").wait(timeout: 110)
        #expect(direct.status == 75, "\(direct.status) \(direct.stderr)")
        #expect(
            direct.stderr.contains(
                "vault: the store at \(proxied) has not answered GET vault-root in 1 s; trying again (2 of 5)\n"),
            "\(direct.stderr)")
        #expect(direct.stderr.contains("trying again (5 of 5)"), "\(direct.stderr)")
        #expect(
            direct.stderr.contains(
                "vault: error: the store at \(proxied) did not answer GET vault-root in 1 s (5 tries)"),
            "\(direct.stderr)")
        #expect(
            direct.stderr.contains("vault: hint: check that the store's server is running and answers")
                && direct.stderr.contains("VAULT_STORE_TIMEOUT (seconds, default 30)"), "\(direct.stderr)")

        // Through the agent: its own store timeout bounds its tries, and the
        // client waits for them, so the store is named, not the agent.
        b.allowAgent()
        b.extra["VAULT_STORE_TIMEOUT"] = "1"
        #expect(try b.start("agent").wait().status == 0)
        defer { _ = try? b.run("lock") }
        let through = try b.start("sync").wait(timeout: 200)
        #expect(through.status == 75, "\(through.status) \(through.stderr)")
        #expect(
            through.stderr.contains("vault: error: the store at \(proxied) did not answer GET vault-root in 1 s"),
            "\(through.stderr)")
        #expect(through.stderr.contains("VAULT_STORE_TIMEOUT in the agent's environment"), "\(through.stderr)")
        #expect(!through.stderr.contains("the agent did not answer"), "\(through.stderr)")
        try bringBack(.stall)
        let back = try b.run("sync")
        #expect(back.status == 0, "\(back.stderr)")
    }

    @Test("the holder's sync says that it handed the right to refresh over, with the agent and without")
    func handoverIsSaid() throws {
        _ = try holderAndOther()
        // b asks for the right: a holds it.
        let asked = try b.start("token", "work", "--min-valid", "100000").wait(timeout: 110)
        #expect(asked.stderr.contains("holds the right to refresh 'work'"), "\(asked.stderr)")
        let handed = try a.run("sync")
        #expect(handed.status == 0, "\(handed.stderr)")
        #expect(
            handed.stderr.contains("vault: handed the right to refresh 'work' over to machine ")
                && handed.stderr.contains(", which asked for it"), "\(handed.stderr)")
        // b takes it at its next refresh; a asks it back, and b's agent hands it over.
        let took = try b.start("token", "work", "--force-refresh").wait(timeout: 110)
        #expect(took.status == 0, "\(took.stderr)")
        let back = try a.start("token", "work", "--min-valid", "100000").wait(timeout: 110)
        #expect(back.stderr.contains("holds the right to refresh 'work'"), "\(back.stderr)")
        b.allowAgent()
        #expect(try b.start("agent").wait().status == 0)
        defer { _ = try? b.run("lock") }
        let through = try b.run("sync")
        #expect(through.status == 0, "\(through.stderr)")
        #expect(
            through.stderr.contains("vault: handed the right to refresh 'work' over to the machine that asked for it"),
            "\(through.stderr)")
    }
}
