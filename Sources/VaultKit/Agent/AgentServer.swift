internal import CPlatform
public import FoundationEssentials
internal import Glibc
public import VaultCrypto
public import VaultHTTP

/// The unlock agent of one vault: holds its keys in secure memory and
/// answers clients of the same uid over a Unix socket (docs/agent.md).
///
/// Single-threaded: one poll loop accepts connections, reads framed
/// requests without blocking, answers each in turn, and between requests
/// enforces the timeouts and refreshes recently used grants before they
/// expire.
public final class AgentServer {
    /// How long the agent keeps the keys and what it does in the background.
    public struct Options: Sendable {
        /// Lock after this long without a request (0: never).
        public var idleTimeout: TimeInterval = 15 * 60
        /// Lock this long after unlocking, whatever the use (0: never).
        public var hardTimeout: TimeInterval = 8 * 3600
        /// Refresh a recently used grant when less than this is left.
        public var refreshBefore: TimeInterval = 5 * 60
        /// Exit when locked (an agent started on demand); otherwise stay and
        /// wait for a client to load the key again (a systemd service).
        public var exitWhenLocked = true

        public init() {}
    }

    private struct Client {
        var buffer: [UInt8] = []
        var lastActivity: Date
    }

    let location: VaultLocation
    let paths: AgentPaths
    let options: Options
    let transport: any HTTPTransport
    let log: (String) -> Void
    let time: any TimeSource

    private var vault: Vault?
    private var localKeys: LocalKeys?
    private var unlockedAt = Date(timeIntervalSince1970: 0)
    private var lastUse = Date(timeIntervalSince1970: 0)
    private var databaseIdentity: (dev_t, ino_t)?
    private var socketIdentity: (dev_t, ino_t)?
    private var recent: [String: Date] = [:]
    private var retryAfter: [String: Date] = [:]
    private var lastMaintenance = Date(timeIntervalSince1970: 0)
    private var clients: [Int32: Client] = [:]
    private var listenFD: Int32 = -1
    private var signalFD: Int32 = -1
    private var lockFD: Int32 = -1
    private var exiting = false

    static let maxClients = 64
    /// A client must finish sending a request this soon after starting it.
    static let requestTimeout: TimeInterval = 10
    /// An idle connection is closed after this long.
    static let connectionTimeout: TimeInterval = 120

    public init(
        location: VaultLocation, paths: AgentPaths, options: Options, transport: any HTTPTransport,
        time: any TimeSource = SystemTime(), log: @escaping (String) -> Void
    ) {
        self.location = location
        self.paths = paths
        self.options = options
        self.transport = transport
        self.time = time
        self.log = log
    }

    deinit {
        for fd in clients.keys { close(fd) }
        for fd in [listenFD, signalFD, lockFD] where fd >= 0 { close(fd) }
    }

    // MARK: Starting

    /// Takes the agent lock and binds the socket. `alreadyExists` when
    /// another agent serves this vault.
    public func listen() throws(VaultError) {
        guard vault_refuse_core_dumps() == 0 else {
            throw VaultError(.io, "cannot make the agent non-dumpable: \(FileSystem.errnoText())")
        }
        try paths.prepareDirectory()
        lockFD = open(paths.lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard lockFD >= 0 else { throw VaultError(.io, "cannot open \(paths.lock): \(FileSystem.errnoText())") }
        guard flock(lockFD, LOCK_EX | LOCK_NB) == 0 else {
            throw VaultError(.alreadyExists, "an agent is already running for this vault")
        }
        // We hold the lock, so any socket left here is stale.
        if FileSystem.exists(paths.socket) { unlink(paths.socket) }
        listenFD = vault_unix_listen(paths.socket)
        guard listenFD >= 0 else {
            throw VaultError(.io, "cannot listen on \(paths.socket): \(FileSystem.errnoText())")
        }
        socketIdentity = identity(paths.socket)
        signalFD = vault_signal_fd()
        guard signalFD >= 0 else { throw VaultError(.io, "cannot watch signals: \(FileSystem.errnoText())") }
    }

    /// Unlocks with a master key handed over by a client; the key must open
    /// this vault's state.
    public func unlock(vaultID: [UInt8], masterKey: SecureBytes) throws(VaultError) {
        let opened = try Vault.open(at: location, masterKey: masterKey, vaultID: vaultID, time: time)
        vault = opened.vault
        localKeys = opened.keys
        databaseIdentity = identity(location.databasePath)
        unlockedAt = time.now()
        lastUse = unlockedAt
        recent = [:]
        retryAfter = [:]
        log("unlocked")
    }

    /// Unlocks with the key of a vault unlocked in this process.
    public func unlock(_ store: Vault) throws(VaultError) {
        try unlock(vaultID: store.header.vaultID, masterKey: try store.requireMasterKey())
    }

    /// Drops the keys (their secure memory is zeroed as it is freed).
    func lockKeys(_ why: String) {
        guard vault != nil else { return }
        vault = nil
        localKeys = nil
        recent = [:]
        retryAfter = [:]
        log("locked: \(why)")
        if options.exitWhenLocked { exiting = true }
    }

    var isUnlocked: Bool { vault != nil }

    // MARK: The loop

    /// Serves until told to stop (SIGTERM, SIGINT, or locking when
    /// `exitWhenLocked`), then removes the socket.
    public func run() {
        if !isUnlocked && options.exitWhenLocked { exiting = true }
        while !exiting {
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            fds.append(pollfd(fd: signalFD, events: Int16(POLLIN), revents: 0))
            for fd in clients.keys { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
            let n = poll(&fds, nfds_t(fds.count), 1000)
            if n < 0 && errno != EINTR {
                log("poll failed: \(FileSystem.errnoText())")
                break
            }
            if fds[1].revents != 0 { handleSignals() }
            if fds[0].revents & Int16(POLLIN) != 0 { acceptClients() }
            for p in fds.dropFirst(2) where p.revents != 0 { serve(p.fd) }
            maintain()
        }
        lockKeys("stopping")
        for fd in clients.keys { close(fd) }
        clients = [:]
        if let mine = socketIdentity, let now = identity(paths.socket), mine == now { unlink(paths.socket) }
        log("stopped")
    }

    private func handleSignals() {
        while case let signal = vault_signal_read(signalFD), signal != 0 {
            switch signal {
            case SIGHUP:
                lockKeys("SIGHUP")
            default:
                lockKeys(signal == SIGTERM ? "SIGTERM" : "SIGINT")
                exiting = true
            }
        }
    }

    private func acceptClients() {
        while true {
            let fd = vault_unix_accept(listenFD)
            guard fd >= 0 else { return }
            let uid = vault_peer_uid(fd)
            guard uid == Int64(geteuid()) else {
                log("refused a connection from uid \(uid)")
                close(fd)
                continue
            }
            guard clients.count < AgentServer.maxClients else {
                log("refused a connection: too many clients")
                close(fd)
                continue
            }
            var tv = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            clients[fd] = Client(lastActivity: time.now())
        }
    }

    private func drop(_ fd: Int32) {
        if var client = clients.removeValue(forKey: fd) { secureZero(&client.buffer) }
        close(fd)
    }

    /// Reads what the client sent; answers each complete request.
    private func serve(_ fd: Int32) {
        guard var client = clients[fd] else { return }
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        defer { secureZero(&chunk) }
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        guard n > 0 else { return drop(fd) }
        client.buffer += chunk[..<n]
        client.lastActivity = time.now()
        while client.buffer.count >= 4 {
            let length = client.buffer[..<4].reduce(0) { ($0 << 8) | Int($1) }
            guard length > 0, length <= AgentProtocol.maxLength else {
                log("refused a message of \(length) bytes")
                clients[fd] = client
                return drop(fd)
            }
            guard client.buffer.count >= 4 + length else { break }
            var body = Array(client.buffer[4..<(4 + length)])
            for i in 0..<(4 + length) { client.buffer[i] = 0 }
            client.buffer.removeFirst(4 + length)
            var response = answer(body).framed
            secureZero(&body)
            let ok = send(response, to: fd)
            secureZero(&response)
            guard ok else {
                clients[fd] = client
                return drop(fd)
            }
        }
        clients[fd] = client
    }

    private func send(_ bytes: [UInt8], to fd: Int32) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }

    // MARK: Requests

    /// The response to one request body; never throws, errors are answers.
    func answer(_ body: [UInt8]) -> MessageWriter {
        do {
            var request = try AgentRequest(parsing: body)
            defer { request.wipe() }
            return try respond(to: request)
        } catch {
            var w = MessageWriter(status: 1)
            w.error(error)
            return w
        }
    }

    private func respond(to request: AgentRequest) throws(VaultError) -> MessageWriter {
        var w = MessageWriter(status: 0)
        switch request {
        case .hello(let id):
            let now = time.now()
            w.u8(vault?.header.vaultID == id ? 1 : 0)
            w.u32(UInt32(getpid()))
            w.u32(isUnlocked ? remaining(options.idleTimeout, since: lastUse, now: now) : 0)
            w.u32(isUnlocked ? remaining(options.hardTimeout, since: unlockedAt, now: now) : 0)
            return w
        case .load(let id, let raw):
            if let vault {
                guard vault.header.vaultID == id else {
                    throw VaultError(.alreadyExists, "the agent holds the keys of another vault")
                }
                lastUse = time.now()
                return w
            }
            try unlock(vaultID: id, masterKey: try wrap { () throws(CryptoError) in try SecureBytes(copying: raw) })
            return w
        case .lock:
            lockKeys("lock requested")
            return w
        default:
            break
        }
        // The vault file must still be the one unlocked (not replaced by a
        // new vault at the same path since).
        if let known = databaseIdentity, identity(location.databasePath).map({ $0 != known }) ?? true {
            lockKeys("the vault file was replaced or removed")
        }
        guard let vault, let keys = localKeys else {
            throw VaultError(.locked, "the agent is locked")
        }
        lastUse = time.now()
        switch request {
        case .token(let name, let minimum, let force):
            recent[name] = time.now()
            let fresh = try vault.freshGrant(
                name, minimumValidity: TimeInterval(minimum), forceRefresh: force, transport: transport)
            w.string(fresh.grant.accessToken ?? "")
            w.string(fresh.grant.tokenType ?? "Bearer")
            w.u64(UInt64(bitPattern: fresh.grant.expiresAt?.epochSeconds ?? AgentProtocol.noExpiry))
        case .nameHash(let name):
            w.fixed(try keys.nameHash(name))
        case .seal(let raw, let id, let version, let deleted, let hash):
            let plain = try wrap { () throws(CryptoError) in try SecureBytes(copying: raw) }
            let record = try keys.cipher.seal(
                payload: plain, id: id, version: version, deleted: deleted, nameHash: hash)
            w.bytes(record.nonce)
            w.bytes(record.ciphertext)
        case .open(let rows):
            let scratch = try keys.scratchBuffer(for: rows)
            for row in rows {
                do throws(VaultError) {
                    var bytes = try keys.openChecked(row, scratch: scratch) { plain, _ throws(VaultError) in
                        Array(plain)
                    }
                    w.u8(0)
                    w.bytes(bytes)
                    secureZero(&bytes)
                } catch {
                    w.u8(1)
                    w.error(error)
                }
            }
        case .stateMAC(let body):
            w.bytes(try keys.stateMAC(body))
        case .sync:
            let report = try vault.sync(transport: transport)
            w.u32(UInt32(report.pulled))
            w.u32(UInt32(report.pushed))
            w.u8(report.repaired ? 1 : 0)
            w.u32(UInt32(report.requests))
            w.u64(UInt64(report.bytesSent))
            for names in [report.conflicts, report.renamed] {
                w.u32(UInt32(names.count))
                for n in names { w.string(n) }
            }
        case .hello, .load, .lock:
            break
        }
        return w
    }

    private func remaining(_ limit: TimeInterval, since start: Date, now: Date) -> UInt32 {
        guard limit > 0 else { return 0 }
        return UInt32(max(1, min(Double(UInt32.max), limit - now.timeIntervalSince(start))))
    }

    // MARK: Between requests

    /// Timeouts, the identity of the socket and the vault file, stale
    /// connections, and background refresh.
    private func maintain() {
        let now = time.now()
        if now.timeIntervalSince(lastMaintenance) < 1 { return }
        lastMaintenance = now
        for (fd, client) in clients {
            let limit = client.buffer.isEmpty ? AgentServer.connectionTimeout : AgentServer.requestTimeout
            if now.timeIntervalSince(client.lastActivity) > limit { drop(fd) }
        }
        // Another agent took the socket over, or someone removed it.
        if let mine = socketIdentity, identity(paths.socket).map({ $0 != mine }) ?? true {
            log("the socket \(paths.socket) was replaced or removed")
            exiting = true
            return
        }
        guard isUnlocked else { return }
        if options.idleTimeout > 0 && now.timeIntervalSince(lastUse) >= options.idleTimeout {
            return lockKeys("idle timeout")
        }
        if options.hardTimeout > 0 && now.timeIntervalSince(unlockedAt) >= options.hardTimeout {
            return lockKeys("hard timeout")
        }
        if let known = databaseIdentity, identity(location.databasePath).map({ $0 != known }) ?? true {
            return lockKeys("the vault file was replaced or removed")
        }
        refreshRecent(now: now)
    }

    /// Refreshes grants used since unlocking whose tokens are about to
    /// expire, through the same single-refresh lock as every CLI process.
    private func refreshRecent(now: Date) {
        guard let vault else { return }
        for name in recent.keys.sorted() {
            if let after = retryAfter[name], after > now { continue }
            guard let grant = try? vault.load(name), !grant.dead, grant.refreshToken != nil,
                let expires = grant.expiresAt
            else {
                recent[name] = nil
                continue
            }
            // Short-lived tokens are refreshed at half their life, not
            // continuously.
            let issued = grant.refreshedAt ?? grant.createdAt
            let lifetime = max(0, expires.timeIntervalSince(issued))
            let margin = min(options.refreshBefore, lifetime / 2)
            guard expires.timeIntervalSince(now) <= margin else { continue }
            do {
                let fresh = try vault.freshGrant(name, minimumValidity: margin, transport: transport)
                log(
                    fresh.refreshed
                        ? "refreshed a grant ahead of its expiry" : "a grant was refreshed by another process")
                retryAfter[name] = nil
            } catch {
                switch error.code {
                case .dead, .notFound:
                    log("stopped refreshing a grant: \(error.reason)")
                    recent[name] = nil
                default:
                    log("background refresh failed: \(error.reason)")
                    retryAfter[name] = now.addingTimeInterval(Double.random(in: 20...40))
                }
            }
        }
    }

    private func identity(_ path: String) -> (dev_t, ino_t)? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return (st.st_dev, st.st_ino)
    }
}

extension Vault {
    /// Opens with a master key handed to the agent: the vault id must match
    /// and the key must authenticate the state.
    static func open(at location: VaultLocation, masterKey: SecureBytes, vaultID: [UInt8], time: any TimeSource)
        throws(VaultError) -> (vault: Vault, keys: LocalKeys)
    {
        let locked = try LockedVault(location: location)
        guard locked.header.vaultID == vaultID else {
            throw VaultError(.wrongKey, "the key is for another vault")
        }
        let keys = try LocalKeys(header: locked.header, masterKey: masterKey)
        let vault = Vault(location: location, database: locked.database, header: locked.header, keys: keys, time: time)
        do {
            _ = try vault.read { (_: StateManifest) throws(VaultError) in () }
        } catch {
            throw error.code == .tampered ? VaultError(.wrongKey, "the key does not open this vault") : error
        }
        return (vault, keys)
    }
}
