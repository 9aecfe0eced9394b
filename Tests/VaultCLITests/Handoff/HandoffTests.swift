import Foundation
import Glibc
import Testing
import VaultTestSupport

@Suite("handing tokens to programs")
struct HandoffTests {
    let home = Home()
    let token = "tok'en$1`x`\\z \"q\" canary-handoff-7c1e"
    let account = "o'brien \"q\" $ENV `date` \\ end\nline2"

    init() throws {
        try home.initKeyfileVault()
        let json = try JSONSerialization.data(withJSONObject: [
            "access_token": token, "expires_at": 4_102_444_800, "provider": "test", "account": account,
        ])
        #expect(try home.run("import", "work", stdin: String(decoding: json, as: UTF8.self)).status == 0)
    }

    func sh(_ script: String, stdin: String? = nil) throws -> ProcessResult {
        var env = home.environment
        env["VAULT"] = VaultProcess.binary
        return try VaultProcess.start(["-c", script], environment: env, stdin: stdin, executable: "/bin/sh").wait()
    }

    @Test("sh output evaluated by a shell gives back exactly the values")
    func shRoundTrip() throws {
        let r = try sh(#"eval "$("$VAULT" env work)" && printf '%s|%s' "$WORK_ACCESS_TOKEN" "$WORK_ACCOUNT""#)
        #expect(r.status == 0, "\(r.stderr)")
        let same = r.stdout == token + "|" + account
        #expect(same, "values changed on the way through sh")
    }

    @Test("exec: stdin and stdout pass through, the exit status is the command's")
    func execPassThrough() throws {
        let r = try VaultProcess.run(
            ["exec", "work", "--", "sh", "-c", "cat; exit 3"], environment: home.environment, stdin: "hello\n")
        #expect(r.status == 3)
        #expect(r.stdout == "hello\n")
    }

    @Test("exec: signals reach the command, which has no token in its argv")
    func execSignals() throws {
        let sampler = ArgvSampler(canaries: ["canary-handoff-7c1e"])
        let p = try home.start("exec", "work", "--", "sleep", "30")
        usleep(400_000)
        // vault has become the command: this pid is sleep's now.
        let cmdline = FileManager.default.contents(atPath: "/proc/\(p.pid)/cmdline").map {
            String(decoding: $0, as: UTF8.self)
        }
        #expect(cmdline == "sleep\u{0}30\u{0}")
        p.signal(SIGTERM)
        #expect(p.wait().status == 128 + SIGTERM)
        #expect(sampler.stop().isEmpty)
    }

    @Test("exec gives the command the caller's umask and core limit back")
    func execRestoresSettings() throws {
        let r = try sh(#"umask 022; ulimit -c 1234; "$VAULT" exec work -- sh -c 'umask; ulimit -c'"#)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "0022\n1234\n")
    }
}
