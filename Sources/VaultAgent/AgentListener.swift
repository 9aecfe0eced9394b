internal import CPlatform
internal import Glibc
import Synchronization
internal import VaultCore

/// The agent's listening end: the lock file that makes it the only agent of
/// its vault, the Unix socket, the signals it watches, and the clients it
/// admits (same uid, at most `maxClients` at a time). The main thread binds
/// and watches signals; serving threads wait on the sockets themselves and
/// serve what they accept; any thread may remove the socket.
final class AgentListener: Sendable {
    struct Descriptors {
        var lock: Int32 = -1
        var socket: Int32 = -1
        var forwardSocket: Int32 = -1
        var signals: Int32 = -1
        /// The socket files this agent bound, so it never removes another's.
        var socketIdentity: FileIdentity?
        var forwardSocketIdentity: FileIdentity?
    }

    static let maxClients = 64
    static let maxForwardedClients = 8
    /// Of those, the most one SSH connection (the ssh process at this end)
    /// may hold, so that one server cannot take them all from the others.
    static let maxForwardedClientsPerAsker = 4
    /// Serving threads that wait for clients while none is being served;
    /// a thread that finishes a connection with this many waiting ends.
    static let spareServers = 2

    let environment: AgentEnvironment
    private let descriptors = Mutex(Descriptors())
    private let clients = Counter()
    private let forwardedClients = Counter()
    /// Serving threads waiting for a client.
    private let waiting = Mutex(0)
    /// This process's effective uid: the only one whose clients are served.
    private let uid = Int64(geteuid())

    /// Connections being served, shared with their threads.
    final class Counter: Sendable {
        private let count = Mutex((total: 0, byAsker: [Int: Int]()))

        /// Counts one more for `asker`, unless `limit` are already counted,
        /// or `perAsker` for that asker.
        func take(limit: Int, asker: Int? = nil, perAsker: Int = .max) -> Bool {
            count.withLock { n in
                guard n.total < limit else { return false }
                if let asker {
                    guard n.byAsker[asker, default: 0] < perAsker else { return false }
                    n.byAsker[asker, default: 0] += 1
                }
                n.total += 1
                return true
            }
        }

        func release(asker: Int? = nil) {
            count.withLock { n in
                n.total -= 1
                if let asker, let held = n.byAsker[asker] { n.byAsker[asker] = held > 1 ? held - 1 : nil }
            }
        }
    }

    init(environment: AgentEnvironment) { self.environment = environment }

    private var paths: AgentPaths { environment.paths }

    deinit {
        descriptors.withLock { d in
            for fd in [d.socket, d.forwardSocket, d.signals, d.lock] where fd >= 0 { close(fd) }
        }
    }

    /// Takes the agent lock, binds the socket and starts watching signals.
    /// `alreadyExists` when another agent serves this vault; `busy` when the
    /// one that served it is still stopping after `AgentServer.handoverTimeout`.
    func bind() throws(VaultError) {
        try paths.prepareDirectory()
        let lock = open(paths.lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw VaultError(.io, "cannot open \(paths.lock): \(FileSystem.errnoText())") }
        descriptors.withLock { $0.lock = lock }
        if flock(lock, LOCK_EX | LOCK_NB) != 0 { try awaitPredecessor(lock) }
        // We hold the lock, so any socket left here is stale.
        if FileSystem.exists(paths.socket) { unlink(paths.socket) }
        let socket = vault_unix_listen(paths.socket)
        guard socket >= 0 else {
            throw VaultError(.io, "cannot listen on \(paths.socket): \(FileSystem.errnoText())")
        }
        let identity = FileIdentity(path: paths.socket)
        descriptors.withLock {
            $0.socket = socket
            $0.socketIdentity = identity
        }
        // The forwarding socket: what `ssh -R` carries to other machines.
        if FileSystem.exists(paths.forwardSocket) { unlink(paths.forwardSocket) }
        let forward = vault_unix_listen(paths.forwardSocket)
        guard forward >= 0 else {
            throw VaultError(.io, "cannot listen on \(paths.forwardSocket): \(FileSystem.errnoText())")
        }
        let forwardIdentity = FileIdentity(path: paths.forwardSocket)
        descriptors.withLock {
            $0.forwardSocket = forward
            $0.forwardSocketIdentity = forwardIdentity
        }
        // Signals are blocked here, before any serving thread exists, so
        // every thread inherits the mask and they arrive on the descriptor.
        let signals = vault_signal_fd()
        guard signals >= 0 else { throw VaultError(.io, "cannot watch signals: \(FileSystem.errnoText())") }
        descriptors.withLock { $0.signals = signals }
    }

    /// Waits for the lock another agent holds. One that listens serves the
    /// vault (`alreadyExists`). One that no longer listens is stopping: it
    /// removed its socket and lets its last requests finish, a refresh
    /// among them storing a rotated refresh token, so it is waited for,
    /// never ended. It has `AgentServer.drainTimeout` for them, and the
    /// wait ends after `AgentServer.handoverTimeout` with `busy`.
    private func awaitPredecessor(_ lock: Int32) throws(VaultError) {
        let deadline = Monotonic.seconds() + AgentServer.handoverTimeout
        var failure = errno
        while true {
            guard failure == EWOULDBLOCK || failure == EINTR else {
                errno = failure
                throw VaultError(.io, "cannot lock \(paths.lock): \(FileSystem.errnoText())")
            }
            // Checked before giving up: an agent that started meanwhile
            // (another command's) serves the vault.
            if someoneListens() {
                throw VaultError(.alreadyExists, "an agent is already running for this vault")
            }
            guard Monotonic.seconds() < deadline else {
                throw VaultError(
                    .busy, "the previous agent of this vault is still finishing its requests",
                    remedy: .tryAgainInAMinute)
            }
            usleep(50_000)
            if flock(lock, LOCK_EX | LOCK_NB) == 0 { return }
            failure = errno
        }
    }

    /// True when an agent accepts connections on the socket.
    private func someoneListens() -> Bool {
        guard FileSystem.exists(paths.socket) else { return false }
        let fd = vault_unix_connect(paths.socket)
        guard fd >= 0 else { return false }
        close(fd)
        return true
    }

    /// Waits up to a second for a signal: whether one is pending, or nil
    /// when waiting failed.
    func waitForSignals() -> Bool? {
        var p = pollfd(fd: descriptors.withLock { $0.signals }, events: Int16(POLLIN), revents: 0)
        let n = poll(&p, 1, 1000)
        if n < 0 && errno != EINTR { return nil }
        return n > 0 && p.revents != 0
    }

    /// The signals that arrived, in order.
    func pendingSignals() -> [Int32] {
        let fd = descriptors.withLock { $0.signals }
        var signals: [Int32] = []
        while case let signal = vault_signal_read(fd), signal != 0 { signals.append(signal) }
        return signals
    }

    // MARK: Serving threads

    /// Starts the serving threads. Each waits on both sockets itself and
    /// serves the connection it accepts on its own thread, so a request
    /// costs neither a new thread nor a second wake-up: the kernel wakes one
    /// waiting thread per connection. While a thread serves, another waits
    /// (it starts one when it was the last waiting), so a slow client or a
    /// refresh never holds up the next; at most `spareServers` wait. They
    /// end within a second of `isStopping` turning true.
    func startServing(
        isStopping: @escaping @Sendable () -> Bool, _ serve: @escaping @Sendable (Int32, AgentPeer) -> Void
    ) {
        for _ in 0..<AgentListener.spareServers { startServer(isStopping: isStopping, serve) }
    }

    private func startServer(
        isStopping: @escaping @Sendable () -> Bool, _ serve: @escaping @Sendable (Int32, AgentPeer) -> Void
    ) {
        let waiter = descriptors.withLock { vault_accept_waiter($0.socket, $0.forwardSocket) }
        guard waiter >= 0 else {
            environment.log("cannot wait for clients: \(FileSystem.errnoText())")
            return
        }
        waiting.withLock { $0 += 1 }
        let started = tryStartThread { [self] in
            defer { close(waiter) }
            while !isStopping() {
                let ready = vault_accept_wait(waiter, 1000)
                if ready < 0 && errno != EINTR {
                    environment.log("waiting for clients failed: \(FileSystem.errnoText())")
                    break
                }
                guard ready > 0, let (fd, peer, counter) = admit() else { continue }
                if waiting.withLock({ n -> Bool in
                    n -= 1
                    return n == 0
                }) {
                    startServer(isStopping: isStopping, serve)
                }
                serve(fd, peer)
                counter.release(asker: peer.origin == .forwarded ? peer.pid ?? 0 : nil)
                let surplus = waiting.withLock { n -> Bool in
                    guard n < AgentListener.spareServers else { return true }
                    n += 1
                    return false
                }
                if surplus { return }
            }
            waiting.withLock { $0 -= 1 }
        }
        if !started {
            waiting.withLock { $0 -= 1 }
            close(waiter)
            environment.log("cannot start a serving thread")
        }
    }

    /// The next client on either socket that is of our uid and fits within
    /// its socket's share (`maxClients`, `maxForwardedClients`), with what
    /// the kernel says of it and the count it takes; others are closed.
    /// Nil when no client is waiting (another thread took it).
    private func admit() -> (fd: Int32, peer: AgentPeer, counter: Counter)? {
        let sockets = descriptors.withLock { [($0.socket, false), ($0.forwardSocket, true)] }
        for (listening, forwarded) in sockets where listening >= 0 {
            while true {
                let fd = vault_unix_accept(listening)
                guard fd >= 0 else { break }
                var uid: Int64 = -1
                var pid: Int32 = 0
                guard vault_peer_credentials(fd, &uid, &pid) == 0, uid == self.uid else {
                    environment.log("refused a connection from uid \(uid)")
                    close(fd)
                    continue
                }
                // Forwarded peers have a share of their own, so another machine
                // cannot take every connection this machine's commands need.
                let peer = AgentPeer.of(uid: Int(uid), pid: pid, socketOrigin: forwarded ? .forwarded : .local)
                let counter = peer.origin == .forwarded ? forwardedClients : clients
                let limit = peer.origin == .forwarded ? AgentListener.maxForwardedClients : AgentListener.maxClients
                let asker = peer.origin == .forwarded ? peer.pid ?? 0 : nil
                guard counter.take(limit: limit, asker: asker, perAsker: AgentListener.maxForwardedClientsPerAsker)
                else {
                    environment.log("refused a \(peer.origin.rawValue) connection: too many clients")
                    close(fd)
                    continue
                }
                return (fd, peer, counter)
            }
        }
        return nil
    }

    /// True when another agent took the socket over, or someone removed it.
    var socketWasReplaced: Bool {
        guard let mine = descriptors.withLock({ $0.socketIdentity }) else { return false }
        return FileIdentity(path: paths.socket) != mine
    }

    /// Unlinks the sockets that are still the ones this agent bound.
    func removeSocket() {
        let mine = descriptors.withLock { ($0.socketIdentity, $0.forwardSocketIdentity) }
        if let socket = mine.0, FileIdentity(path: paths.socket) == socket { unlink(paths.socket) }
        if let forward = mine.1, FileIdentity(path: paths.forwardSocket) == forward { unlink(paths.forwardSocket) }
    }
}
