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

    /// An audit log of 4 KiB files in a new directory, and a forwarded peer.
    static func smallLog() -> (log: AuditLog, directory: String, peer: AgentPeer) {
        let directory = scratch()
        var log = AuditLog(directory: directory)
        log.maxBytes = 4096
        return (log, directory, AgentPeer(origin: .forwarded, uid: 1000, pid: 42, executable: "/usr/bin/ssh"))
    }

    @Test(
        "the server a forwarded request comes through is read from ssh's own command line",
        arguments: [
            (["ssh", "-R", "/r.sock:/l.sock", "dev.example"], "dev.example"),
            (["/usr/bin/ssh", "-F", "cfg", "-R", "a:b", "test-server", "vault token work"], "test-server"),
            (["ssh", "-vAR", "a:b", "ada@build.example", "make"], "ada@build.example"),
            (["ssh", "-p2222", "-oForwardAgent=no", "host.example"], "host.example"),
            (["ssh", "-o", "ForwardAgent=no", "--", "host.example"], "host.example"),
            (["ssh: /home/ada/.ssh/cm-build [mux]"], nil),
            (["ssh", "-N", "-R", "a:b"], nil),
            (["ssh", "-P", "prod", "evil.example"], "evil.example"),
            (["socat", "UNIX-LISTEN:/tmp/x", "UNIX:/tmp/y"], nil),
        ] as [([String], String?)])
    func sshDestination(arguments: [String], destination: String?) {
        #expect(AgentPeer.sshDestination(arguments) == destination)
    }

    @Test(
        "the OpenSSH client is told by its program's name, wherever it lives",
        arguments: [
            ("ssh", true), ("/usr/bin/ssh", true), ("/usr/bin/ssh/", true), ("ssh: /run/cm [mux]", false),
            ("ssh [mux]", true), ("/usr/bin/ssh (deleted)", true), ("/usr/bin/ssh-agent", false),
            ("/usr/bin/sshd", false), ("/opt/ssh/bin/scp", false), ("ss", false), ("", false), ("///", false),
            ("/usr/bin/vault", false),
        ] as [(String, Bool)])
    func sshClient(executable: String, isSSH: Bool) {
        #expect(AgentPeer.isSSHClient(executable) == isSSH)
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
        #expect(question.text.hasPrefix("token of 'work' for a forwarded request from pid 1"))
        #expect(
            question.text.contains(", with a DPoP proof for POST https://api.example/items; the other machine says"))
        #expect(question.environment["VAULT_CONFIRM_REQUEST"] == "POST https://api.example/items")
        // Which server asks: as the laptop's ssh was started, or unknown.
        #expect(question.text.contains(", through a connection to an unknown server"))
        let named = ConfirmationQuestion(
            grant: "work",
            peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: nil, destination: "ada@dev.example"),
            claims: nil)
        #expect(named.text.contains(", through ssh to ada@dev.example") && !named.text.contains("unknown"))
        #expect(named.environment["VAULT_CONFIRM_PEER_DEST"] == "ada@dev.example")
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
        let all = answers.withLock { $0 }
        // Forwarded requests leave one of the places to local ones.
        let waiting = all.filter { $0 == .notAsked("too many requests are waiting for a confirmation") }
        #expect(waiting.count == 8 - (Confirmer.maxWaiting - 1), "\(all)")
        #expect(all.filter { $0 == .yes }.count == Confirmer.maxWaiting - 1, "\(all)")
    }

    @Test(
        "questions are paced: a pause after each forwarded refusal, doubling; a few a minute, with room for local ones")
    func pacing() {
        var p = QuestionPacing()
        let tooSoon = "asked again too soon after a refusal"
        #expect(p.admit(grant: "work", origin: .forwarded, now: 0) == nil)
        p.answered(grant: "work", origin: .forwarded, yes: false, now: 1)
        // 30 seconds from the refusal, for requests from the same SSH
        // connection only: one server cannot keep a grant paused for another.
        #expect(p.admit(grant: "work", origin: .forwarded, now: 30) == tooSoon)
        #expect(p.pause(grant: "work", origin: .forwarded, asker: "other ssh", now: 30) == nil)
        #expect(p.admit(grant: "work", origin: .forwarded, now: 31.5) == nil)
        p.answered(grant: "work", origin: .forwarded, yes: false, now: 32)
        // Two forwarded questions in the minute (at 0 and 31.5): a third
        // waits, whatever its grant; a local one still finds room, once.
        #expect(
            p.admit(grant: "mail", origin: .forwarded, now: 50)
                == "too many questions from other machines in the last minute")
        #expect(p.admit(grant: "mail", origin: .local, now: 55) == nil)
        #expect(p.admit(grant: "bank", origin: .local, now: 56) == "too many questions in the last minute")
        // The second refusal doubled the pause (until 92).
        #expect(p.admit(grant: "work", origin: .forwarded, now: 91) == tooSoon)
        #expect(p.admit(grant: "mail", origin: .forwarded, now: 95) == nil)
        p.answered(grant: "mail", origin: .forwarded, yes: false, now: 96)
        // A yes ends the grant's pauses: a no after it starts from 30 s again.
        #expect(p.admit(grant: "work", origin: .forwarded, now: 200) == nil)
        p.answered(grant: "work", origin: .forwarded, yes: true, now: 201)
        #expect(p.admit(grant: "work", origin: .forwarded, now: 202) == nil)
        p.answered(grant: "work", origin: .forwarded, yes: false, now: 203)
        #expect(p.admit(grant: "work", origin: .forwarded, now: 232) == tooSoon)
        #expect(p.admit(grant: "work", origin: .forwarded, now: 263) == nil)
        // Refusals double up to an hour, and no further.
        var q = QuestionPacing()
        var now = 0.0
        var pause = QuestionPacing.firstPause
        for _ in 0..<10 {
            #expect(q.admit(grant: "work", origin: .forwarded, now: now) == nil)
            q.answered(grant: "work", origin: .forwarded, yes: false, now: now)
            #expect(q.admit(grant: "work", origin: .forwarded, now: now + pause - 1) == tooSoon, "\(pause)")
            now += pause + 61
            pause = min(pause * 2, QuestionPacing.longestPause)
        }
        #expect(pause == QuestionPacing.longestPause)
    }

    @Test("one SSH connection holds at most half the forwarded connections; the others keep theirs")
    func connectionShare() {
        let counter = AgentListener.Counter()
        let limit = AgentListener.maxForwardedClients
        let share = AgentListener.maxForwardedClientsPerAsker
        for _ in 0..<share { #expect(counter.take(limit: limit, asker: 100, perAsker: share)) }
        #expect(!counter.take(limit: limit, asker: 100, perAsker: share), "one server took more than its share")
        for _ in 0..<(limit - share) { #expect(counter.take(limit: limit, asker: 200, perAsker: share)) }
        #expect(!counter.take(limit: limit, asker: 300, perAsker: share), "past the limit")
        counter.release(asker: 100)
        #expect(counter.take(limit: limit, asker: 300, perAsker: share))
        #expect(!counter.take(limit: limit, asker: 100, perAsker: share))
    }

    @Test("a connection whose question went unconfirmed gets no other, and is closed after three refusals without one")
    func connectionRecord() {
        let confirmer = Confirmer(method: .command("exit 1"), timeout: 5)
        let connection = ConnectionRecord()
        let question = ConfirmationQuestion(
            grant: "work", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: nil), claims: nil)
        #expect(confirmer.ask(question, connection: connection) == .no("the person refused"))
        let other = ConfirmationQuestion(
            grant: "mail", peer: AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: nil), claims: nil)
        for i in 0..<ConnectionRecord.closeAfter {
            #expect(!connection.shouldClose, "\(i)")
            #expect(
                confirmer.ask(other, connection: connection)
                    == .notAsked("a request on this connection was not confirmed"))
        }
        #expect(connection.shouldClose)
        // Another connection is asked about another grant.
        #expect(confirmer.ask(other, connection: ConnectionRecord()) == .no("the person refused"))
    }

    @Test("repeatable requests are written once, then as one counted line per kind and interval")
    func auditTally() {
        let tally = AuditTally()
        let forwarded = AgentPeer(origin: .forwarded, uid: 0, pid: 1, executable: "/usr/bin/ssh")
        func entry(
            _ grant: String, _ second: Int64, _ outcome: AuditEntry.Outcome = .notAsked, peer: AgentPeer? = nil
        ) -> AuditEntry {
            AuditEntry(
                time: Date(timeIntervalSince1970: TimeInterval(1_800_000_000 + second)), grant: grant,
                peer: peer ?? forwarded, claimed: nil, outcome: outcome,
                reason: outcome == .notAsked ? "too many questions in the last minute" : nil)
        }
        // Forwarded refusals are one kind whatever grant they name (names
        // can be made up); the line is the last one's.
        #expect(tally.add(entry("work", 0), now: 100) == [entry("work", 0)])
        for second in 1...50 {
            #expect(tally.add(entry("made-up-\(second)", Int64(second)), now: 100 + Double(second) / 10).isEmpty)
        }
        // Tokens handed out to a forwarded peer count by grant; confirmed
        // ones and local ones are written each.
        #expect(tally.add(entry("work", 3, .allowed), now: 103) == [entry("work", 3, .allowed)])
        #expect(tally.add(entry("mail", 3, .allowed), now: 103) == [entry("mail", 3, .allowed)])
        #expect(tally.add(entry("work", 4, .allowed), now: 104).isEmpty)
        // Another server's requests are never credited to the first.
        let other = AgentPeer(origin: .forwarded, uid: 0, pid: 2, executable: "/usr/bin/ssh", destination: "b.example")
        #expect(tally.add(entry("work", 4, .allowed, peer: other), now: 104).first?.destination == "b.example")
        #expect(!AuditTally.counts(entry("work", 4, .confirmed)))
        #expect(!AuditTally.counts(entry("work", 4, .allowed, peer: .thisUser)))
        #expect(AuditTally.counts(entry("work", 4, .notAsked, peer: .thisUser)))
        #expect(tally.due(now: 105).isEmpty)
        var counted = entry("made-up-50", 50)
        counted.repeated = 50
        #expect(tally.due(now: 110) == [counted])
        var handed = entry("work", 4, .allowed)
        handed.repeated = 1
        #expect(tally.due(now: 113) == [handed])
        // Nothing more of a kind for an interval: it is let go, and the next
        // one is written at once.
        #expect(tally.due(now: 125).isEmpty)
        #expect(tally.add(entry("work", 60), now: 130) == [entry("work", 60)])
        #expect(tally.add(entry("work", 61), now: 131).isEmpty)
        #expect(tally.due(now: 132, all: true).map(\.repeated) == [1])
    }

    @Test("refusals cannot push a token handed out out of the audit log")
    func refusalsKeepTheirOwnShare() throws {
        let (log, directory, peer) = Self.smallLog()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let long = RequesterClaims(
            host: String(repeating: "h", count: 200), command: String(repeating: "c", count: 400), uid: 0, pid: 7)
        let time = Date(timeIntervalSince1970: 1_800_000_000)
        #expect(
            log.append(
                AuditEntry(time: time, grant: "work", peer: peer, claimed: nil, outcome: .confirmed, reason: nil))
                == nil)
        for i in 0..<500 {
            let refused = AuditEntry(
                time: time.addingTimeInterval(Double(i)), grant: "work", peer: peer, claimed: long,
                outcome: i % 2 == 0 ? .notConfirmed : .denied, reason: nil)
            #expect(log.append(refused) == nil)
        }
        // Tokens handed out to a forwarded peer without a question have a
        // file of their own too.
        for i in 0..<300 {
            let allowed = AuditEntry(
                time: time.addingTimeInterval(Double(i)), grant: "work", peer: peer, claimed: long,
                outcome: .allowed, reason: nil)
            #expect(log.path(of: allowed) == log.forwardedPath)
            #expect(log.append(allowed) == nil)
        }
        let (entries, unreadable) = try log.read()
        #expect(unreadable == 0)
        #expect(entries.first?.outcome == .confirmed)
        #expect(entries.filter { $0.outcome == .confirmed }.count == 1)
        #expect(entries.last?.time == time.addingTimeInterval(499).epochSeconds)
        for file in [log.refusedPath, log.refusedPath + ".1"] {
            var st = stat()
            #expect(stat(file, &st) == 0 && st.st_size <= 4096)
        }
    }

    @Test("the audit log starts over past its size, keeps the one before, and never mixes lines")
    func auditRotation() throws {
        let (log, directory, peer) = Self.smallLog()
        defer { try? FileManager.default.removeItem(atPath: directory) }
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
        for file in [log.forwardedPath, log.forwardedPath + ".1"] {
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
