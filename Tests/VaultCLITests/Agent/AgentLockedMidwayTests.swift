import Foundation
import Glibc
import Testing
import VaultTestSupport

/// Debug builds pause before a chosen request to the agent when
/// VAULT_TEST_AGENT_PAUSE is set; a binary given in VAULT_BINARY may be a
/// release build without that pause.
private let pauseAvailable = ProcessInfo.processInfo.environment["VAULT_BINARY"]?.isEmpty ?? true

/// Commands opened through the agent while `vault lock` arrives in their
/// middle: one that can unlock by itself finishes on its own, one that
/// cannot fails as locked, and neither leaves a partial write.
@Suite("a command the agent stops serving midway finishes on its own")
struct AgentLockedMidwayTests {
    /// A key-file vault with grants g and other, served by an agent.
    func servedHome() throws -> AgentHome {
        let a = AgentHome()
        try a.home.initKeyfileVault()
        #expect(try a.home.run("import", "g", stdin: Home.tokenJSON("g-token")).status == 0)
        #expect(try a.home.run("import", "other", stdin: Home.tokenJSON("other-token")).status == 0)
        return a
    }

    /// Runs `vault ARGS` through the agent (started if none runs), locks
    /// the agent when the command is about to send its second record
    /// operation, and lets the command go on: right away (the agent still
    /// runs, locked) or once the agent has exited. Without `keyfile` the
    /// command has no way to unlock by itself.
    func lockedMidway(
        _ a: AgentHome, _ args: [String], stdin: String? = nil, keyfile: Bool, afterExit: Bool
    ) throws -> ProcessResult {
        let home = a.home
        if try a.agentPID() == nil {
            let started = try home.run("agent")
            try #require(started.status == 0, "\(started.stderr)")
        }
        let agentPID = try #require(try a.agentPID())
        let marker = home.path + "/paused"
        var environment = home.environment
        environment["VAULT_TEST_AGENT_PAUSE"] = "2:" + marker
        if !keyfile { environment["VAULT_KEYFILE"] = nil }
        let command = try VaultProcess.start(args, environment: environment, stdin: stdin)
        let paused = eventually { FileManager.default.fileExists(atPath: marker) || !command.isRunning }
        try #require(paused && command.isRunning, "\(args) did not pause before its second agent request")
        let lock = try home.run("lock")
        #expect(lock.status == 0 && lock.stderr == "vault: locked\n", "\(lock.stderr)")
        if afterExit { #expect(AgentHome.gone(agentPID, within: 10)) }
        unlink(marker)
        return command.wait(timeout: 60)
    }

    @Test(
        "show, import and remove finish with a key file when the agent locks midway, and fail as locked without",
        .enabled(if: pauseAvailable))
    func recordCommands() throws {
        let a = try servedHome()
        let home = a.home
        for afterExit in [false, true] {
            // Without a way to unlock here: exit 77, nothing changed.
            let show = try lockedMidway(a, ["show", "g", "--reveal"], keyfile: false, afterExit: afterExit)
            #expect(show.status == 77 && show.stdout.isEmpty, "\(show.status) \(show.stderr)")
            let added = try lockedMidway(
                a, ["import", "h"], stdin: Home.tokenJSON("h-token"), keyfile: false, afterExit: afterExit)
            #expect(added.status == 77, "\(added.status) \(added.stderr)")
            let removed = try lockedMidway(a, ["remove", "g"], keyfile: false, afterExit: afterExit)
            #expect(removed.status == 77, "\(removed.status) \(removed.stderr)")
            #expect(try home.listedNames().names == ["g", "other"])

            // With the key file: each finishes on its own, once.
            let shown = try lockedMidway(a, ["show", "g", "--reveal"], keyfile: true, afterExit: afterExit)
            #expect(shown.status == 0 && shown.stdout.contains("g-token"), "\(shown.status) \(shown.stderr)")
            let imported = try lockedMidway(
                a, ["import", "h"], stdin: Home.tokenJSON("h-token"), keyfile: true, afterExit: afterExit)
            #expect(imported.status == 0, "\(imported.status) \(imported.stderr)")
            let removing = try lockedMidway(a, ["remove", "other"], keyfile: true, afterExit: afterExit)
            #expect(removing.status == 0, "\(removing.status) \(removing.stderr)")
            #expect(try home.listedNames().names == ["g", "h"])
            #expect(try home.run("show", "h", "--reveal").stdout.contains("h-token"))
            // Back to the start for the next round.
            #expect(try home.run("remove", "h").status == 0)
            #expect(try home.run("import", "other", stdin: Home.tokenJSON("other-token")).status == 0)
        }
        // The vault's state and records still agree.
        let verified = try home.run("list")
        #expect(verified.status == 0 && !verified.stderr.contains("error"), "\(verified.stderr)")
    }

    @Test("vault refresh finishes with a key file when the agent locks during its refresh, and refreshes once")
    func refreshLockedMidway() throws {
        let a = AgentHome()
        let home = a.home
        try home.initKeyfileVault()
        let endpoint = try SlowTokenEndpoint()
        try endpoint.importExpired("slow", delay: 3, into: home)

        for keyfile in [true, false] {
            if try a.agentPID() == nil { try #require(try home.run("agent").status == 0) }
            let requests = try endpoint.counts()["requests"] ?? 0
            var environment = home.environment
            if !keyfile { environment["VAULT_KEYFILE"] = nil }
            let before = try VaultProcess.start(["refresh", "slow"], environment: environment)
            let arrived = try eventually { try endpoint.counts()["requests"] ?? 0 > requests || !before.isRunning }
            try #require(arrived && before.isRunning, "the refresh never reached the token endpoint")
            // The agent lets its refresh finish and store the new tokens,
            // answers, and stops; the command reads the result on its own.
            let lock = try home.run("lock")
            #expect(lock.status == 0, "\(lock.stderr)")
            let r = before.wait(timeout: 60)
            if keyfile {
                #expect(r.status == 0 && r.stderr.contains("refreshed 'slow'"), "\(r.status) \(r.stderr)")
            } else {
                #expect(r.status == 77 && r.stderr.contains("locked"), "\(r.status) \(r.stderr)")
            }
            // One refresh either way, and its tokens are stored.
            #expect(try endpoint.counts()["requests"] == requests + 1)
            let shown = try home.run("show", "slow", "--reveal", "--json")
            #expect(shown.stdout.contains("bench-rotated-\(String(format: "%06d", requests + 1))"), "\(shown.stdout)")
            #expect(try endpoint.counts()["requests"] == requests + 1)
        }
    }
}
