internal import FoundationEssentials
internal import Glibc
import Synchronization
internal import VaultCore

/// A token request the person is asked about.
struct ConfirmationQuestion: Sendable {
    let grant: String
    let peer: AgentPeer
    let claims: RequesterClaims?
    /// The one request a DPoP proof is asked for: method and URL, without query.
    var request: String? = nil
    /// True when the grant's ID token is asked for, not its access token.
    var idToken = false

    /// One line for a terminal or a notification, every outside string
    /// escaped: the grant and where the request comes from first, then the
    /// request a DPoP proof is for (shortened in the middle, so that no
    /// length of it pushes the rest out of view), what the other machine
    /// claims last, labelled as such, so a claim cannot pose as the grant's
    /// name.
    var text: String {
        var line =
            "\(idToken ? "ID token" : "token") of '\(DisplayText.escaped(grant))' for a \(peer.origin.rawValue) request"
        line += " from pid \(peer.pid.map(String.init) ?? "?")"
        if let exe = peer.executable { line += " (\(DisplayText.escaped(exe)))" }
        if let destination = peer.destination {
            line += ", through ssh to \(DisplayText.escaped(destination))"
        } else if peer.origin == .forwarded {
            // A multiplexing master or another relay: which server asks is
            // not known, and the question says so rather than leave it out.
            line += ", through a connection to an unknown server (a shared ssh connection or another relay)"
        }
        if let request {
            line += ", with a DPoP proof for \(ConfirmationQuestion.shortened(DisplayText.escaped(request)))"
        }
        if let claims {
            line +=
                "; the other machine says: host \(DisplayText.escaped(claims.host.isEmpty ? "?" : claims.host)),"
                + " program \(DisplayText.escaped(claims.command.isEmpty ? "?" : claims.command)),"
                + " uid \(claims.uid), pid \(claims.pid)"
        }
        return line
    }

    /// `text` of at most `requestLimit` characters: its start and its end,
    /// with what is between left out.
    static func shortened(_ text: String) -> String {
        guard text.count > requestLimit else { return text }
        return String(text.prefix(requestLimit * 2 / 3)) + "…" + String(text.suffix(requestLimit / 3 - 1))
    }

    /// The most characters of a request shown in a question: a forwarded
    /// one (at most `AgentResponder.maxForwardedURL` bytes) is shown whole.
    static let requestLimit = 600

    /// The summary for a pinentry's `SETDESC` (the Assuan protocol): `%`,
    /// CR and LF percent-encoded, so that nothing in a claim reads as an
    /// escape or starts a line of its own, and cut to `assuanLimit` bytes
    /// (a line is at most 1,000 bytes), never inside a character or an
    /// escape.
    var assuanText: String {
        var out = ""
        var bytes = 0
        for character in text {
            var piece = ""
            for scalar in character.unicodeScalars {
                if let escape = ConfirmationQuestion.assuanEscapes[scalar] {
                    piece += escape
                } else {
                    piece.unicodeScalars.append(scalar)
                }
            }
            guard bytes + piece.utf8.count <= ConfirmationQuestion.assuanLimit else { break }
            bytes += piece.utf8.count
            out += piece
        }
        return out
    }

    /// What the Assuan protocol would read as an escape or a line break.
    static let assuanEscapes: [Unicode.Scalar: String] = ["%": "%25", "\r": "%0D", "\n": "%0A"]

    /// The most bytes of `assuanText`: room for `SETDESC ` in a line of 1,000.
    static let assuanLimit = 900

    /// What a confirmation command gets in its environment: values as they
    /// came, for the command to quote; and the one-line summary, escaped,
    /// as it is, for a notification body's markup, and for a pinentry.
    var environment: [String: String] {
        var env = [
            "VAULT_CONFIRM_GRANT": grant,
            "VAULT_CONFIRM_ORIGIN": peer.origin.rawValue,
            "VAULT_CONFIRM_SUMMARY": text,
            "VAULT_CONFIRM_MARKUP": GrantNotifier.markupEscaped(text),
            "VAULT_CONFIRM_ASSUAN": assuanText,
            "VAULT_CONFIRM_PEER_PID": peer.pid.map(String.init) ?? "",
            "VAULT_CONFIRM_PEER_EXE": peer.executable ?? "",
            "VAULT_CONFIRM_PEER_DEST": peer.destination ?? "",
        ]
        if let request { env["VAULT_CONFIRM_REQUEST"] = request }
        // Claims are named as such, and never VAULT_CONFIRM_COMMAND, which
        // is the setting a `vault` started from the command would read.
        if let claims {
            env["VAULT_CONFIRM_CLAIMED_HOST"] = claims.host
            env["VAULT_CONFIRM_CLAIMED_PROGRAM"] = claims.command
            env["VAULT_CONFIRM_CLAIMED_UID"] = String(claims.uid)
            env["VAULT_CONFIRM_CLAIMED_PID"] = String(claims.pid)
        }
        // The environment ends a value at NUL: such a claim is cut there.
        return env.mapValues { String($0.unicodeScalars.prefix { $0 != "\0" }) }
    }
}

/// How often the person may be asked, so that nobody can ask until the
/// person gives in. After a forwarded request for a grant goes unconfirmed
/// (a no, or no answer), forwarded requests for that grant from the same
/// SSH connection (the ssh process at this end, `asker`) are refused
/// without asking for a pause that doubles with each further refusal, so
/// that one server cannot keep a grant paused for another; and
/// in any minute at most `perMinute` questions are put, of which at most
/// `forwardedPerMinute` from forwarded peers, so that one a local process
/// asks always finds room. Times are the caller's monotonic seconds.
struct QuestionPacing: Sendable {
    /// Questions put to the person in any minute, whoever asks.
    static let perMinute = 3
    /// Of those, the most that forwarded requests may take.
    static let forwardedPerMinute = 2
    /// The pause after a grant's first unconfirmed forwarded request.
    static let firstPause: Double = 30
    /// The longest pause: an hour.
    static let longestPause: Double = 3600
    /// Grants with a pause kept at most, so that names a peer makes up cannot
    /// fill memory (each one costs it a question first).
    static let maxPaused = 256

    private struct Pause {
        var until: Double
        var refusals: Int
    }

    private struct Asked: Hashable {
        let grant: String
        let asker: String
    }

    /// When the questions of the last minute were put, and by which origin.
    private var recent: [(time: Double, forwarded: Bool)] = []
    private var paused: [Asked: Pause] = [:]

    /// Why a forwarded request for `grant` from `asker` is refused without
    /// asking: a refusal of the same not long ago. Nil when it is not.
    func pause(grant: String, origin: AgentPeer.Origin, asker: String, now: Double) -> String? {
        guard origin == .forwarded, let pause = paused[Asked(grant: grant, asker: asker)], now < pause.until else {
            return nil
        }
        return "asked again too soon after a refusal"
    }

    /// Nil when the person may be asked now (and the question is counted),
    /// or why it is refused without asking.
    mutating func admit(grant: String, origin: AgentPeer.Origin, asker: String = "", now: Double) -> String? {
        if let why = pause(grant: grant, origin: origin, asker: asker, now: now) { return why }
        recent.removeAll { now - $0.time >= 60 }
        guard recent.count < QuestionPacing.perMinute else { return "too many questions in the last minute" }
        if origin == .forwarded, recent.count(where: \.forwarded) >= QuestionPacing.forwardedPerMinute {
            return "too many questions from other machines in the last minute"
        }
        recent.append((now, origin == .forwarded))
        return nil
    }

    /// Records the answer to a question `admit` let through.
    mutating func answered(grant: String, origin: AgentPeer.Origin, asker: String = "", yes: Bool, now: Double) {
        guard origin == .forwarded else { return }
        let key = Asked(grant: grant, asker: asker)
        guard !yes else {
            paused[key] = nil
            return
        }
        // A pause that ended more than an hour ago is forgotten: the next
        // refusal starts again from the first pause.
        paused = paused.filter { now - $0.value.until < QuestionPacing.longestPause }
        let refusals = (paused[key]?.refusals ?? 0) + 1
        let seconds = min(QuestionPacing.longestPause, QuestionPacing.firstPause * Double(1 << min(refusals - 1, 16)))
        if paused[key] == nil, paused.count >= QuestionPacing.maxPaused,
            let soonest = paused.min(by: { $0.value.until < $1.value.until })?.key
        {
            paused[soonest] = nil
        }
        paused[key] = Pause(until: now + seconds, refusals: refusals)
    }
}

/// What the agent keeps of one client connection while it is open: after
/// a question asked on it went unconfirmed, no other is asked on it; after
/// `closeAfter` requests refused without asking, it is closed. A
/// connection that `defersAudit` holds the audit lines of its request
/// until the answer is sent, so that the asker never waits for the log.
final class ConnectionRecord: Sendable {
    /// Refusals without asking after which the connection is closed.
    static let closeAfter = 3
    private let state = Mutex((unconfirmed: false, notAsked: 0))
    let defersAudit: Bool
    private let deferred = Mutex([AuditEntry]())

    init(defersAudit: Bool = false) { self.defersAudit = defersAudit }

    /// Keeps `entries` to be written once the answer is sent.
    func deferAudit(_ entries: [AuditEntry]) { deferred.withLock { $0 += entries } }

    /// The audit lines kept, which are no longer kept.
    func takeDeferredAudit() -> [AuditEntry] {
        deferred.withLock { kept in
            defer { kept = [] }
            return kept
        }
    }

    /// True once a question asked on this connection went unconfirmed.
    var hadUnconfirmed: Bool { state.withLock { $0.unconfirmed } }
    /// True when the connection should be closed.
    var shouldClose: Bool { state.withLock { $0.notAsked >= ConnectionRecord.closeAfter } }

    func unconfirmed() { state.withLock { $0.unconfirmed = true } }
    func refusedWithoutAsking() { state.withLock { $0.notAsked += 1 } }
}

/// Asks the person whether to hand out a token: through a command the user
/// chose (a desktop notification with actions, a pinentry, a dialog) whose
/// exit status 0 means yes, or on the terminal of a foreground agent. One
/// question at a time; no answer within the timeout is no.
final class Confirmer: Sendable {
    /// How the agent asks.
    enum Method: Sendable, Equatable {
        /// `sh -c COMMAND` with the question in `VAULT_CONFIRM_*`.
        case command(String)
        /// The agent's controlling terminal (`vault agent --foreground`).
        case terminal
        /// No way to ask: every confirmation is refused.
        case none
    }

    /// The answer.
    enum Answer: Sendable, Equatable {
        case yes
        /// Asked, and not confirmed (a no, no answer, no way to ask).
        case no(String)
        /// Refused without asking the person: too many questions, or too
        /// soon after a refusal.
        case notAsked(String)
    }

    let method: Method
    let timeout: TimeInterval
    private let turn = Mutex(())
    private let waiting = Mutex(0)
    private let pacing = Mutex(QuestionPacing())
    /// Questions that may wait for their turn; more are refused at once, so
    /// a flood of requests for one grant cannot hold up the others' for long
    /// nor keep the person answering.
    static let maxWaiting = 3
    /// The least time a question is put with (or half the timeout, when
    /// that is shorter), in seconds.
    static let leastTimeToAnswer: Double = 10

    init(method: Method, timeout: TimeInterval) {
        self.method = method
        self.timeout = timeout
    }

    /// Asks, and waits at most `timeout` for the answer (and for the
    /// questions asked before this one). `connection`: the one the request
    /// came on, which gets no second question after an unconfirmed one.
    func ask(_ question: ConfirmationQuestion, connection: ConnectionRecord? = nil) -> Answer {
        let deadline = Monotonic.seconds() + timeout
        let answer = askPaced(question, connection: connection, deadline: deadline)
        switch answer {
        case .yes: break
        case .no: connection?.unconfirmed()
        case .notAsked: connection?.refusedWithoutAsking()
        }
        return answer
    }

    private func askPaced(_ question: ConfirmationQuestion, connection: ConnectionRecord?, deadline: Double) -> Answer {
        if connection?.hadUnconfirmed == true {
            return .notAsked("a request on this connection was not confirmed")
        }
        let origin = question.peer.origin
        let asker = question.peer.pid.map(String.init) ?? "?"
        // A request that would be refused anyway takes no place in the queue.
        if let why = pacing.withLock({
            $0.pause(grant: question.grant, origin: origin, asker: asker, now: Monotonic.seconds())
        }) {
            return .notAsked(why)
        }
        // Forwarded requests leave one place to local ones.
        let admitted = waiting.withLock { n -> Bool in
            let places = origin == .forwarded ? Confirmer.maxWaiting - 1 : Confirmer.maxWaiting
            guard n < places else { return false }
            n += 1
            return true
        }
        guard admitted else { return .notAsked("too many requests are waiting for a confirmation") }
        defer { waiting.withLock { $0 -= 1 } }
        return turn.withLock { _ -> Answer in
            guard method != .none else { return .no("no way to ask for a confirmation") }
            // A question with too little time left for an answer is not
            // put: the person could not answer it, and it would count as a
            // refusal.
            guard deadline - Monotonic.seconds() >= min(Confirmer.leastTimeToAnswer, timeout / 2) else {
                return .notAsked("no time left to ask")
            }
            // Counted when its turn comes, so that questions refused while
            // waiting are not counted against the next minute.
            if let why = pacing.withLock({
                $0.admit(grant: question.grant, origin: origin, asker: asker, now: Monotonic.seconds())
            }) {
                return .notAsked(why)
            }
            let answer: Answer
            switch method {
            case .none:
                answer = .no("no way to ask for a confirmation")
            case .command(let command):
                answer = Confirmer.runCommand(command, question: question, deadline: deadline)
            case .terminal:
                answer = Confirmer.askTerminal(question, deadline: deadline)
            }
            pacing.withLock {
                $0.answered(
                    grant: question.grant, origin: origin, asker: asker, yes: answer == .yes, now: Monotonic.seconds())
            }
            return answer
        }
    }

    private static func runCommand(_ command: String, question: ConfirmationQuestion, deadline: Double) -> Answer {
        // The agent's environment without vault's own variables, whose
        // values may be secrets or say where they are; then the question.
        var environment = Subprocess.inheritedEnvironment()
        environment.merge(question.environment) { $1 }
        // A session of its own, so a timeout ends the whole group it started.
        guard let pid = Subprocess.startShell(["sh", "-c", command], environment: environment) else {
            return .no("the confirmation command could not be started")
        }
        switch Subprocess.wait(pid, until: deadline) {
        case .exited(0): return .yes
        case .killed: return .no("no answer in time")
        case .vanished: return .no("the confirmation command vanished")
        case .exited, .signalled: return .no("the person refused")
        }
    }

    private static func askTerminal(_ question: ConfirmationQuestion, deadline: Double) -> Answer {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else { return .no("no terminal to ask on") }
        defer { close(fd) }
        // Whatever was typed before the question is not its answer.
        tcflush(fd, TCIFLUSH)
        var prompt = Array("vault agent: \(question.text)\nvault agent: hand it out? [y/N] ".utf8)
        _ = prompt.withUnsafeMutableBytes { write(fd, $0.baseAddress!, $0.count) }
        var line: [UInt8] = []
        while Monotonic.seconds() < deadline {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let wait = Int32(max(1, min(1000, (deadline - Monotonic.seconds()) * 1000)))
            guard poll(&p, 1, wait) > 0 else { continue }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1 else { return .no("the terminal closed") }
            if byte == 0x0a {
                let answer = String(decoding: line.filter { $0 != 0x20 && $0 != 0x0d }, as: UTF8.self).lowercased()
                return answer == "y" || answer == "yes" ? .yes : .no("the person refused")
            }
            if line.count < 16 { line.append(byte) }
        }
        var late = Array("\nvault agent: no answer in time; refused\n".utf8)
        _ = late.withUnsafeMutableBytes { write(fd, $0.baseAddress!, $0.count) }
        return .no("no answer in time")
    }
}
