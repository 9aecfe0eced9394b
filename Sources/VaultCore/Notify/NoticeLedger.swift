package import FoundationEssentials
internal import Glibc

/// Which notices were already given, so that the same (grant, event,
/// deadline) is told once, whichever process or agent thread sees it:
/// `notified.json` beside the vault (mode 0600, replaced atomically),
/// changed under an `flock` on `notified.lock`. Grants are named by their
/// record's random id, never by name.
package struct NoticeLedger: Sendable {
    /// One notice given.
    struct Entry: Codable, Equatable {
        var record: String
        var event: GrantNotice.Event
        /// The deadline it was about, in seconds since the epoch.
        var deadline: Int64?
        /// When it was given.
        var at: Int64
    }

    struct File: Codable {
        var version = 1
        var notified: [Entry] = []
    }

    /// At most this many entries are kept, the newest: a ledger is a
    /// courtesy against repeats, not a history.
    static let capacity = 512

    let path: String
    let lockPath: String

    /// The ledger of the vault in `directory`.
    package init(directory: String) {
        path = directory + "/notified.json"
        lockPath = directory + "/notified.lock"
    }

    /// Records `notice` as given at `now` and returns true, unless the same
    /// grant, event and deadline was given before (false). A ledger that
    /// cannot be read starts afresh; one that cannot be written lets the
    /// notice through (a repeat is better than silence).
    package func claim(_ notice: GrantNotice, now: Date) -> Bool {
        let entry = Entry(
            record: notice.record.hex, event: notice.event, deadline: notice.deadline?.epochSeconds,
            at: now.epochSeconds)
        return
            (try? changing { file -> Bool in
                let seen = file.notified.contains {
                    $0.record == entry.record && $0.event == entry.event && $0.deadline == entry.deadline
                }
                guard !seen else { return false }
                file.notified.append(entry)
                if file.notified.count > NoticeLedger.capacity {
                    file.notified.removeFirst(file.notified.count - NoticeLedger.capacity)
                }
                return true
            }) ?? true
    }

    /// Forgets every notice about `record`: it was authorized again, and
    /// its next death or deadline is news.
    package func forget(record: [UInt8]) {
        let hex = record.hex
        _ = try? changing { file -> Bool in
            file.notified.removeAll { $0.record == hex }
            return true
        }
    }

    private func read() -> File {
        guard FileSystem.exists(path), let raw = try? FileSystem.readFile(path, limit: 1 << 20),
            let file = try? JSONDecoder().decode(File.self, from: Data(raw)), file.version == 1
        else { return File() }
        return file
    }

    /// Runs `body` on the ledger under its lock and writes the result back
    /// when `body` returns true.
    private func changing(_ body: (inout File) -> Bool) throws(VaultError) -> Bool {
        let fd = try FileSystem.lockExclusive(lockPath)
        defer { FileSystem.unlock(fd) }
        var file = read()
        guard body(&file) else { return false }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(file) else {
            throw VaultError(.internalError, "cannot encode the notice ledger")
        }
        try FileSystem.writeAtomically(path, secret: try Secure.copy(data + [0x0a]), replace: true)
        return true
    }
}
