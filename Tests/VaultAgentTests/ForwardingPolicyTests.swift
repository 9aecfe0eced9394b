import Foundation
import Glibc
import Synchronization
import Testing
import VaultTestSupport

@testable import VaultAgent
@testable import VaultCore

@Suite("the agent's policy, its confirmations and its audit log")
struct ForwardingPolicyTests {
    static func scratch() -> String {
        let path = NSTemporaryDirectory() + "vault-policy-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(path, 0o700)
        return path
    }

    @Test("a grant's rule wins over the defaults, which win over the built-in ones")
    func ruleLevels() throws {
        let directory = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var policy = try AgentPolicy.load(configDirectory: directory)
        #expect(policy.rule(for: "work", origin: .local) == .allow)
        #expect(policy.rule(for: "work", origin: .forwarded) == .confirm)
        policy.defaults.forwarded = .deny
        policy.grants["work"] = AgentPolicy.Rules(forwarded: .allow)
        policy.grants["bank"] = AgentPolicy.Rules(local: .confirm)
        try policy.save(configDirectory: directory)
        let loaded = try AgentPolicy.load(configDirectory: directory)
        #expect(loaded == policy)
        #expect(loaded.rule(for: "work", origin: .forwarded) == .allow)
        #expect(loaded.rule(for: "mail", origin: .forwarded) == .deny)
        #expect(loaded.rule(for: "bank", origin: .local) == .confirm)
        #expect(loaded.rule(for: "bank", origin: .forwarded) == .deny)
    }

    @Test("a policy file others may write, or one that does not parse, is refused, never guessed at")
    func untrustedFile() throws {
        let directory = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = AgentPolicy.path(configDirectory: directory)
        try #"{"default": {"forwarded": "allow"}}"#.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, 0o666)
        #expect(throws: VaultError.self) { try AgentPolicy.load(configDirectory: directory) }
        chmod(path, 0o600)
        #expect(try AgentPolicy.load(configDirectory: directory).rule(for: "x", origin: .forwarded) == .allow)
        try #"{"default": {"forwarded": "sometimes"}}"#.write(toFile: path, atomically: false, encoding: .utf8)
        #expect(throws: VaultError.self) { try AgentPolicy.load(configDirectory: directory) }
        // A misspelt key is refused, never a rule silently left out.
        for typo in [
            #"{"default": {"forwarded": "allow"}, "grants": {"work": {"forwared": "deny"}}}"#,
            #"{"defaults": {"forwarded": "deny"}}"#,
        ] {
            try typo.write(toFile: path, atomically: false, encoding: .utf8)
            #expect(throws: VaultError.self) { try AgentPolicy.load(configDirectory: directory) }
        }
    }

    @Test("claims are cut by bytes, however many marks one character carries")
    func claimsCutByBytes() {
        let combining = "a" + String(repeating: "\u{301}", count: 100_000)
        let claims = RequesterClaims(host: combining, command: combining, uid: 0, pid: 0)
        #expect(claims.host.utf8.count <= RequesterClaims.maxHost)
        #expect(claims.command.utf8.count <= RequesterClaims.maxCommand)
        #expect(RequesterClaims.cut("héllo", bytes: 2) == "h")
    }

    @Test("a question about a DPoP proof names the request it is for, first, and in VAULT_CONFIRM_REQUEST")
    func proofQuestion() {
        let question = ConfirmationQuestion(
            grant: "work", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: nil),
            claims: RequesterClaims(host: "server", command: "curl", uid: 1000, pid: 7),
            request: "POST https://api.example/items")
        #expect(question.text.hasPrefix("DPoP proof for POST https://api.example/items with the token of 'work'"))
        #expect(question.environment["VAULT_CONFIRM_REQUEST"] == "POST https://api.example/items")
        let plain = ConfirmationQuestion(
            grant: "work", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: nil), claims: nil)
        #expect(plain.text.hasPrefix("token of 'work'"))
        #expect(plain.environment["VAULT_CONFIRM_REQUEST"] == nil)
    }

    @Test("a flood of questions is refused at once beyond a few waiting")
    func confirmationFlood() {
        let confirmer = Confirmer(method: .command("sleep 1; exit 0"), timeout: 20)
        let question = ConfirmationQuestion(
            grant: "work", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: nil), claims: nil)
        let answers = Mutex<[Confirmer.Answer]>([])
        // Threads of their own, as the agent serves each connection.
        let done = DispatchGroup()
        for _ in 0..<8 {
            done.enter()
            Thread {
                let answer = confirmer.ask(question)
                answers.withLock { $0.append(answer) }
                done.leave()
            }.start()
        }
        done.wait()
        let refused = answers.withLock { $0.filter { $0 == .no("too many requests are waiting for a confirmation") } }
        #expect(refused.count == 8 - Confirmer.maxWaiting, "\(answers.withLock { $0 })")
    }

    @Test("the audit log starts over past its size, keeps the one before, and never mixes lines")
    func auditRotation() throws {
        let directory = Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var writer = AuditLog(directory: directory)
        writer.maxBytes = 4096
        let log = writer
        let peer = AgentPeer(origin: .forwarded, uid: 1000, pid: 42, executable: "/usr/bin/ssh")
        let claims = RequesterClaims(host: "server", command: "git fetch", uid: 1000, pid: 7)
        // Four threads append at once.
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for i in 0..<100 {
                let entry = AuditEntry(
                    time: Date(timeIntervalSince1970: 1_800_000_000), grant: "g\(thread)-\(i)", peer: peer,
                    claimed: claims, outcome: .allowed, reason: nil)
                #expect(log.append(entry) == nil)
            }
        }
        let (entries, unreadable) = try log.read()
        #expect(unreadable == 0)
        #expect(!entries.isEmpty && entries.count < 400, "older entries were let go: \(entries.count)")
        for file in [log.path, log.path + ".1"] {
            var st = stat()
            #expect(stat(file, &st) == 0)
            #expect(st.st_size <= 4096)
            #expect(st.st_mode & 0o777 == 0o600)
        }
        // What is kept is in order per thread, and ends with a thread's last entry.
        for thread in 0..<4 {
            let numbers = entries.filter { $0.grant.hasPrefix("g\(thread)-") }.map { Int($0.grant.dropFirst(3))! }
            #expect(numbers == numbers.sorted())
        }
        #expect(entries.last?.grant.hasSuffix("-99") == true)
        #expect(entries.last?.claimed == claims)
    }

    @Test("a confirmation command's exit status answers; one that does not finish in time is a no")
    func confirmCommand() throws {
        let question = ConfirmationQuestion(
            grant: "work\u{1b}[2J", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: "/usr/bin/ssh"),
            claims: RequesterClaims(host: "evil\nhost", command: "git\u{202e}fetch", uid: 0, pid: 2))
        #expect(
            !question.text.contains("\u{1b}") && !question.text.contains("\n") && !question.text.contains("\u{202e}"))
        #expect(question.text.contains("work\\u{1b}[2J"))
        #expect(Confirmer(method: .command("exit 0"), timeout: 5).ask(question) == .yes)
        #expect(Confirmer(method: .command("exit 3"), timeout: 5).ask(question) == .no("the person refused"))
        #expect(
            Confirmer(
                method: .command(
                    #"[ "$VAULT_CONFIRM_HOST" = "evil"$'\n'"host" ] || [ "$VAULT_CONFIRM_ORIGIN" = forwarded ]"#),
                timeout: 5
            )
            .ask(question) == .yes)
        let started = Date()
        #expect(Confirmer(method: .command("sleep 30"), timeout: 1).ask(question) == .no("no answer in time"))
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(Confirmer(method: .none, timeout: 5).ask(question) == .no("no way to ask for a confirmation"))
    }
}
