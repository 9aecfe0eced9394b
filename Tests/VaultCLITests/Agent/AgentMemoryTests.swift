import Foundation
import Glibc
import Testing
import VaultTestSupport

/// How often each needle occurs in the readable memory of process `pid`,
/// read from outside through /proc/PID/mem (root reads any process's).
func memoryCounts(pid: pid_t, _ needles: [String]) throws -> [String: Int] {
    let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
    let fd = open("/proc/\(pid)/mem", O_RDONLY)
    guard fd >= 0 else { throw POSIXError(.EACCES) }
    defer { close(fd) }
    var counts = Dictionary(uniqueKeysWithValues: needles.map { ($0, 0) })
    for line in maps.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 2, fields[1].hasPrefix("r"), !line.hasSuffix("[vvar]"), !line.hasSuffix("[vsyscall]")
        else { continue }
        let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
        guard bounds.count == 2, bounds[1] > bounds[0], bounds[1] - bounds[0] <= 1 << 30 else { continue }
        var region = [UInt8](repeating: 0, count: Int(bounds[1] - bounds[0]))
        let offset = off_t(Int64(bitPattern: bounds[0]))
        let n = region.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, offset) }
        guard n > 0 else { continue }
        let bytes = region[..<n]
        for needle in needles {
            let pattern = Array(needle.utf8)
            var i = bytes.startIndex
            while let hit = bytes[i...].firstRange(of: pattern) {
                counts[needle, default: 0] += 1
                i = hit.upperBound
            }
        }
    }
    return counts
}

@Suite("the agent's memory and start")
struct AgentMemoryTests {
    static let isRoot = geteuid() == 0

    @Test(
        "after vault lock, no token the agent served is left in its memory (read as root)",
        .enabled(if: isRoot, "reading another process's memory needs root"))
    func noTokensAfterLock() throws {
        let a = AgentHome()
        try a.home.initPassphraseVault("agent passphrase")
        let access = "access-\(UUID().uuidString)-canary"
        let refresh = "refresh-\(UUID().uuidString)-canary"
        var env = a.home.environment
        env["VAULT_AGENT"] = "off"
        let imported = try VaultProcess.run(
            ["import", "g"], environment: env,
            stdin: #"{"access_token":"\#(access)","refresh_token":"\#(refresh)","expires_in":3600,"provider":"p"}"#)
        #expect(imported.status == 0, "\(imported.stderr)")

        let agent = try a.home.start("agent", "--foreground", "--idle-timeout", "1h")
        defer {
            agent.signal(SIGTERM)
            _ = agent.wait(timeout: 10)
        }
        let pid = try #require(try a.waitForAgent())
        #expect(pid == agent.pid)
        a.home.extra["VAULT_PASSPHRASE_FILE"] = nil
        // The agent serves both tokens: the access token with `token`, the
        // whole decrypted grant with `show --reveal`, several times.
        for _ in 0..<10 {
            #expect(try a.home.run("token", "g").stdout == access + "\n")
            #expect(try a.home.run("show", "g", "--reveal").stdout.contains(refresh))
            #expect(try a.home.run("list").status == 0)
        }
        // Positive control: the scanner finds both tokens in a process that
        // holds them (vault exec's command keeps them in its environment).
        let holder = try a.home.start("exec", "g", "--", "sleep", "60")
        defer { holder.signal(SIGKILL) }
        var found: [String: Int] = [:]
        for _ in 0..<100 {
            found = try memoryCounts(pid: holder.pid, [access])
            if found[access, default: 0] > 0 { break }
            usleep(50_000)
        }
        #expect(found[access, default: 0] > 0, "the scanner cannot see the token")

        #expect(try a.home.run("lock").status == 0)
        #expect(!AgentHome.gone(pid, within: 0.5), "a foreground agent stays up, locked")
        let after = try memoryCounts(pid: pid, [access, refresh])
        #expect(after[access] == 0, "access token copies left: \(after[access] ?? -1)")
        #expect(after[refresh] == 0, "refresh token copies left: \(after[refresh] ?? -1)")
    }

    @Test("with the runtime directory refused, no agent is claimed and --status exits 77")
    func refusedRuntimeDirectory() throws {
        let a = AgentHome()
        // The agent's directory a link elsewhere: agents must refuse it.
        let elsewhere = a.home.path + "/elsewhere"
        mkdir(elsewhere, 0o700)
        symlink(elsewhere, a.runtime + "/vault")
        try a.home.initPassphraseVault("pass")
        let r = try a.home.run("import", "g", stdin: Home.tokenJSON("t"))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stderr.contains("keeps this vault unlocked"), "\(r.stderr)")
        #expect(r.stderr.contains("could not start the agent"), "\(r.stderr)")
        let status = try a.home.run("agent", "--status")
        #expect(status.status == 77, "\(status.stderr)")
        #expect(status.stderr.contains("symbolic links are refused"), "\(status.stderr)")

        // Positive control: a private runtime directory gets a confirmed agent.
        let b = AgentHome()
        try b.home.initPassphraseVault("pass")
        let started = try b.home.run("import", "g", stdin: Home.tokenJSON("t"))
        #expect(started.stderr.contains("the agent keeps this vault unlocked"), "\(started.stderr)")
        #expect(try b.home.run("agent", "--status").status == 0)
    }
}
