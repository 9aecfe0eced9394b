package import FoundationEssentials
internal import Glibc
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
    /// What a forwarded client says of itself: unchecked.
    package var claimed: RequesterClaims?
    /// What the request got.
    package var outcome: Outcome
    /// Why it failed or was refused: an error code or a short reason.
    package var reason: String?
    /// The one request a DPoP proof was asked for (operation 13): its
    /// method and URL, without query.
    package var request: String?

    package init(
        time: Date, grant: String, peer: AgentPeer, claimed: RequesterClaims?, outcome: Outcome, reason: String?,
        request: String? = nil
    ) {
        self.time = time.epochSeconds
        self.grant = grant
        origin = peer.origin
        uid = peer.uid
        pid = peer.pid
        executable = peer.executable
        self.claimed = claimed
        self.outcome = outcome
        self.reason = reason
        self.request = request
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
        w.field("executable", executable)
        w.field("grant", grant)
        w.field("origin", origin.rawValue)
        w.field("outcome", outcome.rawValue)
        w.field("pid", pid.map(Int64.init))
        w.field("reason", reason)
        w.field("request", request)
        w.field("time", time)
        w.field("uid", uid.map(Int64.init))
        return w.closed
    }
}

/// The agent's audit log: one JSON line per token handed out or refused,
/// appended to `audit.log` beside the vault. When it passes `maxBytes` it
/// becomes `audit.log.1` (replacing the one before), so at most twice that
/// is kept. Each line is one `write` to a file opened with `O_APPEND`, so
/// the agent's threads and the commands that hand out tokens themselves
/// never interleave within a line.
package struct AuditLog: Sendable {
    /// Where the current log is.
    package let path: String
    /// Size at which the log starts over.
    package var maxBytes = 1 << 20

    /// The log of the vault in `directory`.
    package init(directory: String) { path = directory + "/audit.log" }

    /// Appends `entry`. A log that cannot be written does not stop the
    /// token: the failure is returned for the caller to report.
    @discardableResult
    package func append(_ entry: AuditEntry) -> VaultError? {
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

    /// Every entry kept, oldest first, and how many lines did not parse.
    package func read() throws(VaultError) -> (entries: [AuditEntry], unreadable: Int) {
        var entries: [AuditEntry] = []
        var unreadable = 0
        let decoder = JSONDecoder()
        for file in [path + ".1", path] where FileSystem.exists(file) {
            let bytes = try FileSystem.readFile(file, limit: 2 * maxBytes + 4096, trusted: true)
            for line in bytes.split(separator: 0x0a) where !line.isEmpty {
                if let entry = try? decoder.decode(AuditEntry.self, from: Data(line)) {
                    entries.append(entry)
                } else {
                    unreadable += 1
                }
            }
        }
        return (entries, unreadable)
    }
}
