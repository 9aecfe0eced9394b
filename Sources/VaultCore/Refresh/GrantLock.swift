import FoundationEssentials
internal import Glibc

/// This machine's lock for refreshing one grant: an `flock` on a file in
/// the vault directory named by the record's random id (never by the
/// grant's name). Processes, and threads that open it separately, exclude
/// each other; other grants have locks of their own, so a slow provider
/// delays only its own grant.
package final class GrantLock {
    private var fd: Int32

    private init(fd: Int32) { self.fd = fd }

    deinit { release() }

    /// Waits up to `wait` seconds for the lock of record `id`, pausing
    /// and measuring through `pacing`.
    static func acquire(directory: String, record id: [UInt8], wait: TimeInterval, pacing: Pacing = .system)
        throws(VaultError) -> GrantLock
    {
        let path = directory + "/refresh-" + id.hex + ".lock"
        let fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw VaultError(.io, "cannot open \(path): \(FileSystem.errnoText())") }
        let lock = GrantLock(fd: fd)
        let deadline = pacing.monotonic() + wait
        // Polling rather than a blocking flock: the wait is bounded, and a
        // waiter notices the holder's release within a few milliseconds.
        var pause = 0.002
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else {
                throw VaultError(.io, "cannot lock \(path): \(FileSystem.errnoText())")
            }
            guard pacing.monotonic() < deadline else {
                throw VaultError(.busy, "another process has been refreshing this grant for \(Int(wait)) s")
            }
            pacing.sleep(pause)
            pause = min(pause * 2, 0.05)
        }
        return lock
    }

    /// True while a process of this machine (this one included) holds the
    /// lock of record `id`: a refresh of it is under way. Probes without
    /// waiting; a lock file that cannot be opened or probed counts as held.
    static func isHeld(directory: String, record id: [UInt8]) -> Bool {
        let fd = open(directory + "/refresh-" + id.hex + ".lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return errno != ENOENT }
        defer { close(fd) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else { return true }
        flock(fd, LOCK_UN)
        return false
    }

    /// The lock of record `id` if no process of this machine holds it now;
    /// nil without waiting when one does (or the lock cannot be taken).
    package static func take(directory: String, record id: [UInt8]) -> GrantLock? {
        try? acquire(directory: directory, record: id, wait: 0)
    }

    /// Releases the lock (also on deinit).
    package func release() {
        if fd >= 0 { close(fd) }
        fd = -1
    }
}
