import Foundation
import Glibc
import Testing
import VaultTestSupport

/// Keep-alive against a real provider: glewlwyd issuers whose refresh
/// tokens roll (each refresh starts their life again) and die after 60
/// seconds unused, and a provider file that says so. Each test has an
/// issuer of its own and waits on the wall clock, about a minute, side by
/// side with the others; the margins (tens of seconds) leave room for a
/// loaded machine.
@Suite("keep-alive against glewlwyd's refresh tokens that die after 60 s unused (waits about a minute)")
struct InactivityLimitTests {
    /// How long glewlwyd's refresh tokens live unused.
    static let limit = 60
    let oidc: OIDCProvider
    let issuer: String
    let home = Home()

    init() throws {
        oidc = try OIDCProvider.shared.get()
        // An issuer for each test: nothing one test's tokens do reaches another's.
        issuer = try oidc.inactivityIssuer(
            "rolling\(UInt32.random(in: 0...UInt32.max))", seconds: Self.limit)
        try home.initKeyfileVault()
        try home.providerFile(
            "rolling",
            [
                "authorization_endpoint": issuer + "/auth", "token_endpoint": issuer + "/token",
                "userinfo_endpoint": issuer + "/userinfo",
                "client_id": oidc.settings.confidential_client, "client_secret": oidc.settings.client_secret,
                // glewlwyd answers a dead refresh token with a bare 400.
                "empty_400_is_invalid_grant": true,
                "refresh_token_policy": ["inactivity": "\(Self.limit)s", "rotates": false],
            ])
    }

    /// Authorizes at the issuer and imports the tokens as `work`, with an
    /// access token already expired unless `fresh`; when they were issued.
    func authorize(fresh: Bool = false) throws -> Date {
        let tokens = try oidc.confidentialTokens(issuer: issuer)
        let issued = Date()
        let grant: [String: Any] = [
            "access_token": tokens["access_token"]!, "refresh_token": tokens["refresh_token"]!,
            "expires_at": Int(issued.timeIntervalSince1970) + (fresh ? 3600 : -10), "provider": "rolling",
            "account": oidc.settings.email,
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let imported = try home.run("import", "work", stdin: json)
        try #require(imported.status == 0, "\(imported.stderr)")
        return issued
    }

    /// Sleeps (without holding a thread) until `seconds` after `start`.
    func wait(until seconds: Double, after start: Date) async throws {
        let left = start.addingTimeInterval(seconds).timeIntervalSinceNow
        if left > 0 { try await Task.sleep(nanoseconds: UInt64(left * 1e9)) }
    }

    func shown() throws -> [String: Any] {
        let r = try home.run("show", "work", "--json")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
    }

    @Test("without keep-alive, 60 s unused kill the grant at the provider: vault token exits 2 (control)")
    func diesWithout() async throws {
        let issued = try authorize()
        #expect(try shown()["refresh_token_deadline_rule"] as? String == "inactivity")
        try await wait(until: Double(Self.limit) + 3, after: issued)
        let r = try home.run("token", "work")
        #expect(r.status == 2, "\(r.stderr)")
        #expect(try shown()["state"] as? String == "dead")
    }

    @Test("vault keepalive before the limit keeps the grant alive past it")
    func keepaliveCommand() async throws {
        // The steps keep to the clock on a thread of their own: a task that
        // sleeps may resume late when other tests hold Swift's few threads,
        // and a keep-alive that runs after the limit proves nothing.
        struct Steps: Sendable {
            var early, kept, later: ProcessResult
            var keptAt, laterAt: Double
        }
        // The thread has the home to itself while the test waits for it.
        nonisolated(unsafe) let home = home
        let issued = try authorize()
        let steps = try await Self.onThread { () throws -> Steps in
            func sleep(until seconds: Double) {
                let left = issued.addingTimeInterval(seconds).timeIntervalSinceNow
                if left > 0 { usleep(UInt32(left * 1e6)) }
            }
            let early = try home.run("keepalive")
            sleep(until: 15)
            let keptAt = Date().timeIntervalSince(issued)
            let kept = try home.run("keepalive", "--within", "50s", "--json")
            sleep(until: Double(Self.limit) + 4)
            let laterAt = Date().timeIntervalSince(issued)
            let later = try home.run("refresh", "work")
            return Steps(early: early, kept: kept, later: later, keptAt: keptAt, laterAt: laterAt)
        }
        // The default lead is a quarter of the limit: 15 s; nothing was due at first.
        #expect(steps.early.status == 0 && steps.early.stderr.contains("no grant is close"), "\(steps.early.stderr)")
        try #require(
            steps.keptAt < Double(Self.limit) - 5, "the keep-alive ran \(steps.keptAt) s after the authorization")
        #expect(steps.kept.status == 0, "\(steps.kept.stderr)")
        let report = try JSONSerialization.jsonObject(with: Data(steps.kept.stdout.utf8)) as? [[String: Any]]
        #expect(report?.first?["result"] as? String == "refreshed", "\(steps.kept.stdout)")
        // Past the first limit, within the one the keep-alive started: the
        // same (non-rotating) refresh token still refreshes at the provider.
        #expect(steps.laterAt > Double(Self.limit))
        #expect(steps.later.status == 0, "\(steps.later.stderr)")
        #expect(try shown()["state"] as? String == "fresh")
        #expect(try home.run("token", "work").status == 0)
    }

    /// Runs `body` on a thread of its own and waits for it without holding one.
    static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try body() }) }.start()
        }
    }

    @Test("a running agent keeps the grant alive past the limit with no command run meanwhile")
    func agentKeepsAlive() async throws {
        let runtime = home.path + "/run"
        mkdir(runtime, 0o700)
        home.extra["XDG_RUNTIME_DIR"] = runtime
        for bad in [["--keepalive-every", "soon"], ["--keepalive-lead", "0"]] {
            let r = try home.run(["agent"] + bad)
            #expect(r.status == 64, "\(bad) \(r.stderr)")
        }
        let issued = try authorize(fresh: true)
        let started = try home.run("agent", "--keepalive-every", "2s", "--keepalive-lead", "45s")
        #expect(started.status == 0, "\(started.stderr)")
        defer { _ = try? home.run("lock") }
        // Nothing runs until the grant would have died.
        try await expectKeptAlive(issued: issued)
    }

    @Test("an agent with the default (hourly) --keepalive-every wakes by the grant's deadline and keeps it alive")
    func agentDefaultsKeepAlive() async throws {
        let runtime = home.path + "/run"
        mkdir(runtime, 0o700)
        home.extra["XDG_RUNTIME_DIR"] = runtime
        let issued = try authorize(fresh: true)
        let started = try home.run("agent")
        #expect(started.status == 0, "\(started.stderr)")
        defer { _ = try? home.run("lock") }
        // The default lead is a quarter of the limit: the agent refreshes
        // about 45 s in, with nothing run meanwhile.
        try await expectKeptAlive(issued: issued)
    }

    /// Past the limit with nothing run meanwhile, the agent has refreshed
    /// the grant (authorized at `issued`), which still refreshes.
    func expectKeptAlive(issued: Date) async throws {
        try await wait(until: Double(Self.limit) + 6, after: issued)
        let refreshed = try shown()["refreshed_at"] as? Double
        #expect((refreshed ?? 0) > issued.timeIntervalSince1970 + 10, "the agent refreshed the grant")
        let later = try home.run("refresh", "work")
        #expect(later.status == 0, "\(later.stderr)")
        #expect(try shown()["state"] as? String == "fresh")
    }
}
