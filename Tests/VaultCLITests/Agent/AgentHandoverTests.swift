import Foundation
import Glibc
import Testing
import VaultTestSupport

/// A token endpoint that answers refreshes after a delay
/// (Tools/testservers/slow_token_endpoint.py), so a test can act while a
/// refresh is under way.
final class SlowTokenEndpoint {
    let server: FixtureServer

    init() throws { server = try FixtureServer(script: "slow_token_endpoint.py") }

    /// Its counters: "requests" so far and "in_flight" now.
    func counts() throws -> [String: Int] {
        let r = try VaultProcess.start(
            ["-s", server.base + "/__counts"], environment: ["PATH": "/usr/bin:/bin"], executable: "/usr/bin/curl"
        ).wait(timeout: 30)
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Int])
    }

    /// Imports an expired grant NAME into `home` whose refresh takes
    /// `delay` seconds and rotates the refresh token.
    func importExpired(_ name: String, delay: Int, into home: Home) throws {
        let grant: [String: Any] = [
            "access_token": "\(name)-old", "refresh_token": "\(name)-refresh",
            "expires_at": Int(Date().timeIntervalSince1970) - 60, "provider": "local",
            "provider_config": [
                "token_endpoint": server.base + "/delay/\(delay)/rotating/token", "client_id": "slow-client",
            ],
        ]
        let json = String(decoding: try JSONSerialization.data(withJSONObject: grant), as: UTF8.self)
        let imported = try home.run("import", name, stdin: json)
        try #require(imported.status == 0, "\(imported.stderr)")
    }

    /// Starts `vault ARGS` in `home` and returns once its token request
    /// has reached this endpoint, so what follows happens while it is under way.
    func startRefresh(_ home: Home, _ args: String...) throws -> RunningProcess {
        let before = try counts()["requests"] ?? 0
        let process = try VaultProcess.start(args, environment: home.environment)
        let arrived = try eventually { try counts()["requests"] ?? 0 > before || !process.isRunning }
        try #require(arrived && process.isRunning, "the refresh never reached the token endpoint")
        return process
    }
}

/// The pid in "agent started (pid N)" or "(pid N) already holds".
private func reportedPID(_ stderr: String) -> String? {
    guard let range = stderr.range(of: #"pid \d+"#, options: .regularExpression) else { return nil }
    return String(stderr[range])
}

@Suite("an agent that is stopping hands the vault over to the next")
struct AgentHandoverTests {
    @Test("vault agent right after vault lock waits for the old agent, which stores the refresh it had under way")
    func startRightAfterLock() throws {
        let a = AgentHome()
        let home = a.home
        try home.initKeyfileVault()
        let endpoint = try SlowTokenEndpoint()
        try endpoint.importExpired("slow", delay: 3, into: home)
        let first = try home.run("agent")
        try #require(first.status == 0, "\(first.stderr)")
        let oldPID = try #require(try a.waitForAgent())

        // The old agent refreshes for `vault token`; it is locked meanwhile
        // and stops listening at once, but lets that refresh finish.
        let token = try endpoint.startRefresh(home, "token", "slow")
        let lock = try home.run("lock")
        #expect(lock.status == 0 && lock.stderr == "vault: locked\n", "\(lock.stderr)")
        // Two commands start agents at once while it is still finishing.
        let starters = [try home.start("agent"), try home.start("agent")]
        let started = starters.map { $0.wait(timeout: 90) }
        for r in started {
            #expect(r.status == 0, "\(r.status) \(r.stderr)")
        }
        // They end with one agent, the new one, which started once the old
        // one had exited.
        let newPID = try #require(try a.agentPID())
        #expect(newPID != oldPID)
        #expect(AgentHome.gone(oldPID, within: 1))
        #expect(Set(started.map { reportedPID($0.stderr) }) == ["pid \(newPID)"], "\(started.map(\.stderr))")

        // The old agent answered the refresh and stored the rotated refresh
        // token before it exited: the new agent serves that token without
        // another request.
        let refreshed = token.wait(timeout: 60)
        #expect(refreshed.status == 0 && refreshed.stdout.hasPrefix("bench-refreshed-"), "\(refreshed.stderr)")
        let requests = try endpoint.counts()["requests"]
        let again = try home.run("token", "slow")
        #expect(again.status == 0 && again.stdout == refreshed.stdout, "\(again.stderr)")
        #expect(try endpoint.counts()["requests"] == requests)
        let shown = try home.run("show", "slow", "--reveal", "--json")
        #expect(shown.stdout.contains("bench-rotated-"), "\(shown.stdout) \(shown.stderr)")
    }

    @Test("a new agent waits a bounded time for one that does not let go, then says so")
    func boundedWait() throws {
        let a = AgentHome()
        let home = a.home
        try home.initKeyfileVault()
        // This test holds the agent lock, like an agent that stopped
        // listening and is still finishing its requests.
        mkdir(a.runtime + "/vault", 0o700)
        let lock = open(a.paths.lock, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0)
        defer { close(lock) }

        // Let go within the wait: the new agent starts.
        let waiting = try home.start("agent")
        sleep(2)
        #expect(waiting.isRunning, "vault agent did not wait for the agent lock")
        flock(lock, LOCK_UN)
        let started = waiting.wait(timeout: 60)
        #expect(started.status == 0 && started.stderr.contains("agent started"), "\(started.stderr)")
        let pid = try #require(try a.agentPID())
        #expect(try home.run("lock").status == 0)
        #expect(AgentHome.gone(pid, within: 10))

        // Never let go: the wait ends (35 s) with a transient failure that says why.
        // (A process whose main thread is a zombie can still be ending its
        // other threads, and holds its files until the last one ends.)
        try #require(eventually(within: 10) { flock(lock, LOCK_EX | LOCK_NB) == 0 })
        let began = Date()
        let r = try home.start("agent").wait(timeout: 120)
        #expect(r.status == 75, "\(r.status) \(r.stderr)")
        #expect(
            r.stderr.contains(
                "vault: error: the agent did not start: the previous agent of this vault is still finishing its requests"
            ),
            "\(r.stderr)")
        #expect(Date().timeIntervalSince(began) > 30)
        #expect(try home.run("agent", "--status").status == 77)
    }
}
