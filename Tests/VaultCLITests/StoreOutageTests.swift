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

    @Test(
        "an expired synced grant is refreshed while the store is away, and the next sync hands it on",
        arguments: Outage.allCases)
    func refreshWhileStoreIsAway(_ outage: Outage) throws {
        let imported = try provider.importGrant("work", into: a)
        let remote = try a.run(
            "remote", "set", proxied, "--user", "vault", "--password-file", a.path + "/store-password")
        #expect(remote.status == 0, "\(remote.stderr)")
        #expect(try a.run("sync").status == 0)
        let joined = try b.run("join", proxied, "--user", "vault", "--password-file", b.path + "/store-password")
        try #require(joined.status == 0, "\(joined.stderr)")

        try takeAway(outage)
        let refreshes = try provider.refreshes()
        let r = try a.start("token", "work").wait(timeout: 110)
        #expect(r.status == 0, "\(r.status) \(r.stderr)")
        // Tokens are compared, never printed.
        let token = r.stdout
        let newToken = token.count > 100 && token != imported + "\n"
        #expect(newToken, "a new access token")
        #expect(try provider.refreshes() == refreshes + 1)
        // Fresh now: no store and no provider needed.
        let kept = try a.run("token", "work").stdout == token
        #expect(kept, "the refreshed token was stored")

        try bringBack(outage)
        let pushed = try a.run("sync")
        #expect(pushed.status == 0 && pushed.stderr.contains("1 sent"), "\(pushed.stderr)")
        let pulled = try b.run("sync")
        #expect(pulled.status == 0 && pulled.stderr.contains("1 received"), "\(pulled.stderr)")
        let other = try b.run("token", "work")
        let handedOn = other.stdout == token
        #expect(other.status == 0, "\(other.stderr)")
        #expect(handedOn, "the second machine has the token refreshed while the store was away")
        #expect(try provider.refreshes() == refreshes + 1, "the second machine took the token, spending nothing")
    }
}
