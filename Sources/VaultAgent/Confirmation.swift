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

    /// One line for a terminal or a notification, every outside string
    /// escaped: the grant and where the request comes from first, what the
    /// other machine claims last, labelled as such, so a claim cannot pose
    /// as the grant's name.
    var text: String {
        var line = request.map { "DPoP proof for \(DisplayText.escaped($0)) with the " } ?? ""
        line += "token of '\(DisplayText.escaped(grant))' for a \(peer.origin.rawValue) request"
        line += " from pid \(peer.pid.map(String.init) ?? "?")"
        if let exe = peer.executable { line += " (\(DisplayText.escaped(exe)))" }
        if let claims {
            line +=
                "; the other machine says: host \(DisplayText.escaped(claims.host.isEmpty ? "?" : claims.host)),"
                + " program \(DisplayText.escaped(claims.command.isEmpty ? "?" : claims.command)),"
                + " uid \(claims.uid), pid \(claims.pid)"
        }
        return line
    }

    /// What a confirmation command gets in its environment: values as they
    /// came, for the command to quote; and the one-line summary, escaped.
    var environment: [String: String] {
        var env = [
            "VAULT_CONFIRM_GRANT": grant,
            "VAULT_CONFIRM_ORIGIN": peer.origin.rawValue,
            "VAULT_CONFIRM_SUMMARY": text,
            "VAULT_CONFIRM_PEER_PID": peer.pid.map(String.init) ?? "",
            "VAULT_CONFIRM_PEER_EXE": peer.executable ?? "",
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
        case no(String)
    }

    let method: Method
    let timeout: TimeInterval
    private let turn = Mutex(())
    private let waiting = Mutex(0)
    /// Questions that may wait for their turn; more are refused at once, so
    /// a flood of requests for one grant cannot hold up the others' for long
    /// nor keep the person answering.
    static let maxWaiting = 3

    init(method: Method, timeout: TimeInterval) {
        self.method = method
        self.timeout = timeout
    }

    /// Asks, and waits at most `timeout` for the answer (and for the
    /// questions asked before this one).
    func ask(_ question: ConfirmationQuestion) -> Answer {
        let deadline = Monotonic.seconds() + timeout
        let admitted = waiting.withLock { n -> Bool in
            guard n < Confirmer.maxWaiting else { return false }
            n += 1
            return true
        }
        guard admitted else { return .no("too many requests are waiting for a confirmation") }
        defer { waiting.withLock { $0 -= 1 } }
        return turn.withLock { _ -> Answer in
            guard Monotonic.seconds() < deadline else { return .no("no answer in time") }
            switch method {
            case .none:
                return .no("no way to ask for a confirmation")
            case .command(let command):
                return Confirmer.runCommand(command, question: question, deadline: deadline)
            case .terminal:
                return Confirmer.askTerminal(question, deadline: deadline)
            }
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
