import Foundation
import Glibc
import Testing
import VaultCrypto
import VaultHTTP
import VaultTestSupport

/// The agent refreshes grants in the background: the token requests and
/// answers of those refreshes must not outlive 'vault lock' in its memory
/// (docs/threat-model.md). The scanner's positive control is in
/// AgentMemoryTests.
@Suite("the agent's memory after background refreshes")
struct AgentBackgroundMemoryTests {
    @Test(
        "after vault lock, no token of a grant the agent refreshed in the background is left in its memory (read as root)",
        .enabled(if: AgentMemoryTests.isRoot, "reading another process's memory needs root"))
    func noTokensAfterBackgroundRefresh() throws {
        // Access tokens of 4 s: the agent refreshes a used grant every 2 s.
        let provider = try FixtureServer(script: "chaos_provider.py", arguments: ["4"])
        let base = "http://127.0.0.1:\(provider.port)"
        let a = AgentHome()
        try a.home.initPassphraseVault("agent passphrase")
        try a.home.providerFile(
            "chaos",
            [
                "token_endpoint": base + "/token", "authorization_endpoint": base + "/authorize", "client_id": "chaos",
                "flows": ["browser"],
            ])
        var minted = try mint(base)
        minted["provider"] = "chaos"
        var direct = a.home.environment
        direct["VAULT_AGENT"] = "off"
        let json = String(decoding: try JSONSerialization.data(withJSONObject: minted), as: UTF8.self)
        #expect(try VaultProcess.run(["import", "g"], environment: direct, stdin: json).status == 0)
        let agent = try a.home.start("agent", "--foreground", "--idle-timeout", "1h", "--refresh-before", "1h")
        defer {
            agent.signal(SIGTERM)
            _ = agent.wait(timeout: 10)
        }
        let pid = try #require(try a.waitForAgent())
        a.home.extra["VAULT_PASSPHRASE_FILE"] = nil
        #expect(try a.home.run("token", "g").status == 0)
        #expect(try eventually(within: 30) { try refreshes(base) >= 4 }, "the agent refreshes in the background")
        #expect(try a.home.run("lock").status == 0)
        #expect(!AgentHome.gone(pid, within: 0.5), "a foreground agent stays up, locked")
        let shown = try VaultProcess.run(["show", "g", "--reveal", "--json"], environment: direct)
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any])
        let refresh = try #require(doc["refresh_token"] as? String)
        let access = try #require(doc["access_token"] as? String)
        // Every token this provider issues starts "crt-" or "cat-": none of
        // the refreshes' requests or answers may be left behind.
        let after = try memoryCounts(pid: pid, [access, refresh, "crt-", "cat-"])
        #expect(after[refresh] == 0, "refresh token copies left: \(after[refresh] ?? -1)")
        #expect(after[access] == 0, "access token copies left: \(after[access] ?? -1)")
        #expect(after["crt-"] == 0 && after["cat-"] == 0, "earlier tokens left: \(after)")
    }

    func mint(_ base: String) throws -> [String: Any] {
        var request = HTTPRequest(method: "POST", url: base + "/__mint")
        request.body = try SecureBytes(copying: Array("{}".utf8))
        let r = try CurlTransport().send(request)
        return try #require(
            try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [String: Any])
    }

    func refreshes(_ base: String) throws -> Int {
        let r = try CurlTransport().send(HTTPRequest(method: "GET", url: base + "/__log"))
        let log = try JSONSerialization.jsonObject(with: r.body.withUnsafeBytes { Data($0) }) as? [[String: Any]] ?? []
        return log.filter { $0["outcome"] as? String == "ok" }.count
    }
}

/// Syncs through the agent decrypt every grant to put it in a bucket: none
/// of them may outlive 'vault lock' in the agent's memory either.
@Suite("the agent's memory after syncs")
struct AgentSyncMemoryTests {
    @Test(
        "after vault lock, no token of a grant synced through the agent is left in its memory (read as root)",
        .enabled(if: AgentMemoryTests.isRoot, "reading another process's memory needs root"))
    func noTokensAfterSyncs() throws {
        let dir = TemporaryDirectory()
        let store = try WebDAVStore(in: dir.path)
        let a = AgentHome()
        try a.home.initPassphraseVault("agent passphrase")
        let agent = try a.home.start("agent", "--foreground", "--idle-timeout", "1h")
        defer {
            agent.signal(SIGTERM)
            _ = agent.wait(timeout: 10)
        }
        var direct = a.home.environment
        direct["VAULT_AGENT"] = "off"
        let set = try VaultProcess.run(
            ["remote", "set", store.url, "--user", "vault", "--password-file", store.passwordFile],
            environment: direct)
        #expect(set.status == 0, "\(set.stderr)")
        // The agent takes the key from the first command that unlocks.
        #expect(try a.home.run("list").status == 0)
        let pid = try #require(try a.waitForAgent())
        a.home.extra["VAULT_PASSPHRASE_FILE"] = nil
        #expect(try a.home.run("agent", "--status").status == 0)
        var canaries: [String] = []
        for i in 0..<3 {
            let access = "access-\(UUID().uuidString)-canary"
            let refresh = "refresh-\(UUID().uuidString)-canary"
            canaries += [access, refresh]
            let json = #"{"access_token":"\#(access)","refresh_token":"\#(refresh)","expires_in":3600,"provider":"p"}"#
            #expect(try a.home.run("import", "g\(i)", stdin: json).status == 0)
            let synced = try a.home.run("sync")
            #expect(synced.status == 0, "\(synced.stderr)")
            #expect(try a.home.run("token", "g\(i)").stdout == access + "\n")
        }
        #expect(try a.home.run("lock").status == 0)
        #expect(!AgentHome.gone(pid, within: 0.5), "a foreground agent stays up, locked")
        let after = try memoryCounts(pid: pid, canaries + ["-canary"])
        #expect(after.values.allSatisfy { $0 == 0 }, "tokens left after lock: \(after.filter { $0.value > 0 }.count)")
    }
}

extension AgentSyncMemoryTests {
    @Test(
        "after vault lock, no token of either side of a conflict the agent listed, synced and served is left in its memory (read as root)",
        .enabled(if: AgentMemoryTests.isRoot, "reading another process's memory needs root"))
    func noTokensAfterConflicts() throws {
        let dir = TemporaryDirectory()
        let store = try WebDAVStore(in: dir.path)
        let a = AgentHome()
        try a.home.initPassphraseVault("agent passphrase")
        let passphrase = a.home.path + "/passphrase"
        var direct = a.home.environment
        direct["VAULT_AGENT"] = "off"
        func json(_ access: String, _ refresh: String) -> String {
            #"{"access_token":"\#(access)","refresh_token":"\#(refresh)","expires_in":3600,"provider":"p"}"#
        }
        #expect(
            try VaultProcess.run(["import", "g"], environment: direct, stdin: json("base-a", "base-r")).status == 0)
        for args in [
            ["remote", "set", store.url, "--user", "vault", "--password-file", store.passwordFile], ["sync"],
        ] {
            let r = try VaultProcess.run(args, environment: direct)
            #expect(r.status == 0, "\(r.stderr)")
        }
        let b = Home()
        b.extra = ["VAULT_AGENT": "off", "VAULT_PASSPHRASE_FILE": passphrase]
        let joined = try b.run("join", store.url, "--user", "vault", "--password-file", store.passwordFile)
        #expect(joined.status == 0, "\(joined.stderr)")

        let agent = try a.home.start("agent", "--foreground", "--idle-timeout", "1h")
        defer {
            agent.signal(SIGTERM)
            _ = agent.wait(timeout: 10)
        }
        #expect(try a.home.run("list").status == 0)
        let pid = try #require(try a.waitForAgent())
        a.home.extra["VAULT_PASSPHRASE_FILE"] = nil
        #expect(try a.home.run("agent", "--status").status == 0)

        // Both machines change the grant between syncs: each side has tokens
        // of its own, and the agent's machine ends up holding both.
        let canaries = (0..<4).map { "side\($0)-\(UUID().uuidString)-canary" }
        #expect(try a.home.run("import", "g", "--replace", stdin: json(canaries[0], canaries[1])).status == 0)
        #expect(try b.run("import", "g", "--replace", stdin: json(canaries[2], canaries[3])).status == 0)
        for home in [a.home, b, a.home] {
            let synced = try home.run("sync")
            #expect([0, 1].contains(synced.status), "\(synced.stderr)")
        }
        // The agent names the conflicted grant to list (operation 10);
        // looking at the sides and resolving need the vault's own key.
        let listed = try a.home.run("list")
        #expect(listed.status == 0 && listed.stdout.contains("(conflict)"), "\(listed.stdout)\(listed.stderr)")
        #expect(try VaultProcess.run(["conflicts", "--json"], environment: direct).status == 0)
        let resolved = try VaultProcess.run(["conflicts", "resolve", "g", "--keep", "other"], environment: direct)
        #expect(resolved.status == 0, "\(resolved.stderr)")
        let token = try a.home.run("token", "g")
        let served = String(token.stdout.dropLast())
        #expect(token.status == 0 && (served == canaries[0] || served == canaries[2]), "\(token.stderr)")
        #expect(try a.home.run("show", "g").status == 0)
        #expect(try a.home.run("sync").status == 0)

        #expect(try a.home.run("lock").status == 0)
        #expect(!AgentHome.gone(pid, within: 0.5), "a foreground agent stays up, locked")
        let after = try memoryCounts(pid: pid, canaries + ["-canary"])
        #expect(after.values.allSatisfy { $0 == 0 }, "tokens left after lock: \(after.filter { $0.value > 0 }.count)")
    }
}
