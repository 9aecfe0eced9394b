package import FoundationEssentials
internal import Glibc
import Synchronization
package import VaultCore

/// One token request and what became of it. Names the grant, never a token.
package struct AuditEntry: Codable, Sendable, Equatable {
    /// What the request got.
    package enum Outcome: String, Codable, Sendable {
        /// Handed out without asking (policy `allow`).
        case allowed
        /// Handed out after the person said yes (policy `confirm`).
        case confirmed
        /// Refused by the policy (`deny`).
        case denied
        /// Not confirmed: the person said no, or did not answer in time, or
        /// there was no way to ask.
        case notConfirmed = "not-confirmed"
        /// The request failed (the grant is dead, the provider is away, ...).
        case failed
        /// Refused without asking the person: too many questions, or too
        /// soon after a refusal of the same grant (docs/agent.md).
        case notAsked = "not-asked"

        /// True when a token was handed out.
        package var handedOut: Bool { self == .allowed || self == .confirmed }
    }

    /// When, in seconds since the epoch.
    package var time: Int64
    /// The grant asked for.
    package var grant: String
    /// Where the request came from.
    package var origin: AgentPeer.Origin
    /// Who asked, as the kernel says (for a forwarded request: ssh).
    package var uid: Int?
    package var pid: Int?
    package var executable: String?
    /// For a forwarded request, the destination its ssh was started with.
    package var destination: String?
    /// What a forwarded client says of itself: unchecked.
    package var claimed: RequesterClaims?
    /// What the request got.
    package var outcome: Outcome
    /// Why it failed or was refused: an error code or a short reason.
    package var reason: String?
    /// The one request a DPoP proof was asked for (operation 13): its
    /// method and URL, without query.
    package var request: String?
    /// What was handed out, when it was not an access token: `id` for the
    /// grant's OpenID Connect ID token (operation 16).
    package var token: String?
    /// How many requests like this one (`AuditTally`) the line stands for,
    /// when they were counted rather than written one by one; the time and
    /// the asker are the last one's.
    package var repeated: Int?

    package init(
        time: Date, grant: String, peer: AgentPeer, claimed: RequesterClaims?, outcome: Outcome, reason: String?,
        request: String? = nil, token: String? = nil
    ) {
        self.time = time.epochSeconds
        self.grant = grant
        origin = peer.origin
        uid = peer.uid
        pid = peer.pid
        executable = peer.executable
        destination = peer.destination
        self.claimed = claimed
        self.outcome = outcome
        self.reason = reason
        self.request = request
        self.token = token
    }
}

extension AuditEntry {
    /// The entry as one line of JSON: its `Codable` form with keys sorted,
    /// absent fields left out, written without `JSONEncoder` (the token
    /// path writes it in every process that hands out a token).
    package var line: [UInt8] {
        var w = JSONLineWriter()
        w.object("claimed", present: claimed != nil) { c in
            guard let claimed else { return }
            c.field("command", claimed.command)
            c.field("host", claimed.host)
            c.field("pid", Int64(claimed.pid))
            c.field("uid", Int64(claimed.uid))
        }
        w.field("destination", destination)
        w.field("executable", executable)
        w.field("grant", grant)
        w.field("origin", origin.rawValue)
        w.field("outcome", outcome.rawValue)
        w.field("pid", pid.map(Int64.init))
        w.field("reason", reason)
        w.field("repeated", repeated.map(Int64.init))
        w.field("request", request)
        w.field("time", time)
        w.field("token", token)
        w.field("uid", uid.map(Int64.init))
        return w.closed
    }
}

/// The agent's audit log: one JSON line per token handed out or refused,
/// beside the vault, in three files, so that nothing a forwarded peer can
/// repeat at will pushes a token handed out after a question, or to this
/// machine, out of the log: `audit.log` for those, `audit-forwarded.log`
/// for tokens handed out to forwarded peers without a question, and
/// `audit-refused.log` for refusals and failures. When a file passes
/// `maxBytes` it becomes `NAME.1` (replacing the one before), so at most
/// twice that is kept of each. Each line is one
/// `write` to a file opened with `O_APPEND`, so the agent's threads and the
/// commands that hand out tokens themselves never interleave within a line.
package struct AuditLog: Sendable {
    /// Where the current log of tokens handed out is.
    package let path: String
    /// Where the current log of refusals and failures is.
    package let refusedPath: String
    /// Where the current log of tokens handed out to forwarded peers
    /// without a question is.
    package let forwardedPath: String
    /// Size at which a file starts over.
    package var maxBytes = 1 << 20

    /// The log of the vault in `directory`.
    package init(directory: String) {
        path = directory + "/audit.log"
        refusedPath = directory + "/audit-refused.log"
        forwardedPath = directory + "/audit-forwarded.log"
    }

    /// The file `entry` goes to.
    package func path(of entry: AuditEntry) -> String {
        guard entry.outcome.handedOut else { return refusedPath }
        return entry.origin == .forwarded && entry.outcome == .allowed ? forwardedPath : path
    }

    /// Appends `entry`. A log that cannot be written does not stop the
    /// token: the failure is returned for the caller to report.
    @discardableResult
    package func append(_ entry: AuditEntry) -> VaultError? {
        let path = path(of: entry)
        let line = entry.line + [0x0a]
        for _ in 0..<8 {
            let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return VaultError(.io, "cannot open \(path): \(FileSystem.errnoText())") }
            defer { close(fd) }
            // Whoever holds the lock decides whether the log starts over;
            // a writer that opened the file another one has since renamed
            // opens the new one rather than rename it again.
            flock(fd, LOCK_EX)
            var held = stat()
            var named = stat()
            guard fstat(fd, &held) == 0, lstat(path, &named) == 0, held.st_ino == named.st_ino,
                held.st_dev == named.st_dev
            else { continue }
            if held.st_size > 0, held.st_size + off_t(line.count) > off_t(maxBytes) {
                rename(path, path + ".1")
                continue
            }
            if held.st_mode & 0o7777 != 0o600 { fchmod(fd, 0o600) }
            let n = line.withUnsafeBytes { write(fd, $0.baseAddress!, $0.count) }
            guard n == line.count else {
                return VaultError(.io, "cannot write to \(path): \(FileSystem.errnoText())")
            }
            return nil
        }
        return VaultError(.busy, "cannot append to \(path): it keeps being replaced")
    }

    /// Every entry kept, of the three files, oldest first (in the order written
    /// within a second), and how many lines did not parse.
    package func read() throws(VaultError) -> (entries: [AuditEntry], unreadable: Int) {
        var entries: [(entry: AuditEntry, order: Int)] = []
        var unreadable = 0
        let decoder = JSONDecoder()
        for base in [path, forwardedPath, refusedPath] {
            for file in [base + ".1", base] where FileSystem.exists(file) {
                let bytes = try FileSystem.readFile(file, limit: 2 * maxBytes + 4096, trusted: true)
                for line in bytes.split(separator: 0x0a) where !line.isEmpty {
                    if let entry = try? decoder.decode(AuditEntry.self, from: Data(line)) {
                        entries.append((entry, entries.count))
                    } else {
                        unreadable += 1
                    }
                }
            }
        }
        entries.sort { ($0.entry.time, $0.order) < ($1.entry.time, $1.order) }
        return (entries.map(\.entry), unreadable)
    }
}

/// Requests another machine can repeat at will, counted rather than
/// written one by one, so that it can neither flush the log nor fill the
/// disk: forwarded refusals and failures by outcome and reason, whatever
/// grant they name (names can be made up), forwarded tokens handed out
/// without a question by grant (only grants the policy allows have any),
/// and local refusals made without asking by grant and reason. The first
/// of a kind is written at once, the ones after it within `interval` are
/// counted, and the count is written as one line (`repeated`) when the
/// interval has passed. At most `maxKinds` kinds are counted at once;
/// others are written as they come.
final class AuditTally: Sendable {
    /// Seconds between two lines of one kind.
    static let interval: Double = 10
    /// Kinds counted at once.
    static let maxKinds = 64

    private struct Kind: Hashable {
        let grant: String
        let origin: AgentPeer.Origin
        let outcome: AuditEntry.Outcome
        let reason: String?
        let asker: String
        let request: String?
        /// ID tokens apart from access tokens.
        let token: String?
    }

    private struct Count {
        var latest: AuditEntry
        var count: Int
        var written: Double
    }

    private let counts = Mutex<[Kind: Count]>([:])

    init() {}

    /// True when entries like `entry` are counted.
    static func counts(_ entry: AuditEntry) -> Bool {
        entry.origin == .forwarded ? entry.outcome != .confirmed : entry.outcome == .notAsked
    }

    /// What to write now for `entry`: itself, unless one of its kind was
    /// written within the interval (then it is counted); after the
    /// interval, the count of its kind not written yet comes first.
    func add(_ entry: AuditEntry, now: Double) -> [AuditEntry] {
        let byGrant = entry.origin == .local || entry.outcome.handedOut
        // A forwarded request counts with those of the same server (its
        // ssh), and a proof handed out with those for the same request: a
        // line never credits one server's requests, or one request's
        // proofs, to another. Refusals count whatever URL they name.
        let forwarded = entry.origin == .forwarded
        let kind = Kind(
            grant: byGrant ? entry.grant : "", origin: entry.origin, outcome: entry.outcome, reason: entry.reason,
            asker: forwarded ? (entry.destination ?? entry.pid.map(String.init) ?? "?") : "",
            request: forwarded && entry.outcome.handedOut ? entry.request : nil, token: entry.token)
        return counts.withLock { counts -> [AuditEntry] in
            if var known = counts[kind], now - known.written < AuditTally.interval {
                known.latest = entry
                known.count += 1
                counts[kind] = known
                return []
            }
            if counts[kind] == nil && counts.count >= AuditTally.maxKinds { return [entry] }
            let pending = counts[kind].flatMap(AuditTally.line)
            counts[kind] = Count(latest: entry, count: 0, written: now)
            return (pending.map { [$0] } ?? []) + [entry]
        }
    }

    /// The counted lines due now (all of them with `all`, when the agent
    /// stops); kinds with nothing counted for an interval are let go.
    func due(now: Double, all: Bool = false) -> [AuditEntry] {
        counts.withLock { counts -> [AuditEntry] in
            var lines: [AuditEntry] = []
            for (kind, known) in counts where all || now - known.written >= AuditTally.interval {
                if let line = AuditTally.line(known) {
                    lines.append(line)
                    counts[kind] = Count(latest: known.latest, count: 0, written: now)
                } else {
                    counts[kind] = nil
                }
            }
            return lines.sorted { $0.time < $1.time }
        }
    }

    /// The counted line of `known`, nil when nothing is counted.
    private static func line(_ known: Count) -> AuditEntry? {
        guard known.count > 0 else { return nil }
        var line = known.latest
        line.repeated = known.count
        return line
    }
}
