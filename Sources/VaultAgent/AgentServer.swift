internal import CPlatform
public import FoundationEssentials
internal import Glibc
public import VaultCore
public import VaultCrypto
public import VaultHTTP
internal import VaultSync

/// The unlock agent of one vault: holds its keys in secure memory and
/// answers clients of the same uid over a Unix socket (docs/agent.md).
///
/// The main thread accepts connections, watches signals and enforces the
/// timeouts; each connection is served on a thread of its own, with its own
/// SQLite connection, so a refresh waiting on a slow provider delays only
/// the client that asked for that grant. Refreshes of one grant are
/// single-flight through the core's per-grant lock, which threads share
/// with every other process.
public final class AgentServer: @unchecked Sendable {
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

        /// The defaults: 15 minutes idle, 8 hours at most.
        public init() {}
    }

    /// The unlocked keys, shared read-only by the connection threads, and
    /// the SQLite connections over them that no thread is using. Keeping a
    /// few open spares every request opening one (and SQLite recreating the
    /// write-ahead log, as the last connection to close deletes it).
    private final class Unlocked: @unchecked Sendable {
        let header: Header
        let keys: LocalKeys
        private let mutex = ThreadMutex()
        private var idle: [Vault] = []

        init(header: Header, keys: LocalKeys) {
            self.header = header
            self.keys = keys
        }

        func take() -> Vault? { mutex.locked { idle.popLast() } }

        func give(_ vault: Vault) {
            mutex.locked { if idle.count < 8 { idle.append(vault) } }
        }
    }

    let location: VaultLocation
    let paths: AgentPaths
    let options: Options
    let transport: any HTTPTransport
    let log: (String) -> Void
    let time: any TimeSource

    // Guarded by `mutex`.
    private let mutex = ThreadMutex()
    private var unlocked: Unlocked?
    private var unlockedAt = Date(timeIntervalSince1970: 0)
    private var lastUse = Date(timeIntervalSince1970: 0)
    private var databaseIdentity: (dev_t, ino_t)?
    private var recent: [String: Date] = [:]
    private var retryAfter: [String: Date] = [:]
    private var clientCount = 0
    private var exiting = false
    private var backgroundChecking = false
    private var backgroundRefreshing: Set<String> = []
    private var requestsInFlight = 0

    // Main thread only.
    private var socketIdentity: (dev_t, ino_t)?
    private var lastMaintenance = Date(timeIntervalSince1970: 0)
    private var listenFD: Int32 = -1
    private var signalFD: Int32 = -1
    private var lockFD: Int32 = -1

    static let maxClients = 64
    /// A client must finish sending a request this soon after starting it.
    static let requestTimeout: Int = 10
    /// An idle connection is closed after this long.
    static let connectionTimeout: TimeInterval = 120

    /// Creates an agent for the vault at `location`; `listen` and `run` start it.
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
        for fd in [listenFD, signalFD, lockFD] where fd >= 0 { close(fd) }
    }

    // MARK: Starting

    /// Takes the agent lock and binds the socket. `alreadyExists` when
    /// another agent serves this vault.
    public func listen() throws(VaultError) {
        guard vault_refuse_core_dumps() == 0 else {
            throw VaultError(.io, "cannot make the agent non-dumpable: \(FileSystem.errnoText())")
        }
        // Every heap block is zeroed as it is freed from here on: the tokens
        // a request decoded and sent leave no copy once it is answered, so
        // none outlives `vault lock` (the keys themselves are in secure memory).
        vault_wipe_freed_memory()
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
        // Signals are blocked here, before any serving thread exists, so
        // every thread inherits the mask and they arrive on the descriptor.
        signalFD = vault_signal_fd()
        guard signalFD >= 0 else { throw VaultError(.io, "cannot watch signals: \(FileSystem.errnoText())") }
    }

    /// Unlocks with a master key handed over by a client; the key must open
    /// this vault's state.
    public func unlock(vaultID: [UInt8], masterKey: SecureBytes) throws(VaultError) {
        let opened = try Vault.open(at: location, masterKey: masterKey, vaultID: vaultID, time: time)
        let now = time.now()
        let identity = identity(location.databasePath)
        mutex.locked {
            unlocked = Unlocked(header: opened.vault.header, keys: opened.keys)
            databaseIdentity = identity
            unlockedAt = now
            lastUse = now
            recent = [:]
            retryAfter = [:]
        }
        log("unlocked")
    }

    /// Unlocks with the key of a vault unlocked in this process.
    public func unlock(_ store: Vault) throws(VaultError) {
        try unlock(vaultID: store.header.vaultID, masterKey: try store.requireMasterKey())
    }

    /// Drops the keys (their secure memory is zeroed as the last thread
    /// using them lets go).
    func lockKeys(_ why: String) {
        let wasUnlocked = mutex.locked { () -> Bool in
            guard unlocked != nil else { return false }
            unlocked = nil
            recent = [:]
            retryAfter = [:]
            if options.exitWhenLocked { exiting = true }
            return true
        }
        if wasUnlocked {
            // Hand the (already zeroed) free pages back to the kernel.
            vault_release_free_memory()
            log("locked: \(why)")
        }
    }

    var isUnlocked: Bool { mutex.locked { unlocked != nil } }
    private var isExiting: Bool { mutex.locked { exiting } }

    // MARK: The loop

    /// Serves until told to stop (SIGTERM, SIGINT, or locking when
    /// `exitWhenLocked`), then removes the socket.
    public func run() {
        if !isUnlocked && options.exitWhenLocked { mutex.locked { exiting = true } }
        while !isExiting {
            var fds = [
                pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0),
                pollfd(fd: signalFD, events: Int16(POLLIN), revents: 0),
            ]
            let n = poll(&fds, nfds_t(fds.count), 1000)
            if n < 0 && errno != EINTR {
                log("poll failed: \(FileSystem.errnoText())")
                break
            }
            if fds[1].revents != 0 { handleSignals() }
            if fds[0].revents & Int16(POLLIN) != 0 { acceptClients() }
            maintain()
        }
        lockKeys("stopping")
        removeSocket()
        // A refresh under way may have spent a rotating refresh token: let
        // it store the new one before the process ends.
        let deadline = Monotonic.seconds() + TokenRefresher.requestTimeout + 10
        while mutex.locked({ requestsInFlight > 0 || !backgroundRefreshing.isEmpty }), Monotonic.seconds() < deadline {
            usleep(20_000)
        }
        log("stopped")
    }

    /// Unlinks the socket if it is still the one this agent bound.
    private func removeSocket() {
        if let mine = socketIdentity, let now = identity(paths.socket), mine == now { unlink(paths.socket) }
    }

    private func handleSignals() {
        while case let signal = vault_signal_read(signalFD), signal != 0 {
            switch signal {
            case SIGHUP:
                lockKeys("SIGHUP")
            default:
                lockKeys(signal == SIGTERM ? "SIGTERM" : "SIGINT")
                mutex.locked { exiting = true }
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
            let admitted = mutex.locked { () -> Bool in
                guard clientCount < AgentServer.maxClients else { return false }
                clientCount += 1
                return true
            }
            guard admitted else {
                log("refused a connection: too many clients")
                close(fd)
                continue
            }
            // A thread of its own, not a shared pool: a client waiting on a
            // stalled provider must not take a worker others need.
            startThread { [self] in
                serveConnection(fd)
                mutex.locked { clientCount -= 1 }
            }
        }
    }

    // MARK: A connection

    /// Serves one client until it hangs up, idles out, or the agent stops.
    private func serveConnection(_ fd: Int32) {
        defer { close(fd) }
        // The accepted socket may inherit non-blocking mode: this thread blocks.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var tv = timeval(tv_sec: AgentServer.requestTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var handle: Handle?
        defer { handle.map { $0.keys.give($0.vault) } }
        while waitForRequest(fd) {
            guard var body = receiveMessage(fd) else { return }
            mutex.locked { requestsInFlight += 1 }
            var response = answer(body, handle: &handle).framed
            mutex.locked { requestsInFlight -= 1 }
            secureZero(&body)
            let ok = send(response, to: fd)
            secureZero(&response)
            guard ok else { return }
        }
    }

    /// Waits for the first byte of a request: false when the client hung
    /// up, stayed idle too long, or the agent is stopping.
    private func waitForRequest(_ fd: Int32) -> Bool {
        let start = time.now()
        while !isExiting {
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let n = poll(&p, 1, 1000)
            if n > 0 { return p.revents & Int16(POLLIN) != 0 }
            if n < 0 && errno != EINTR { return false }
            if time.now().timeIntervalSince(start) > AgentServer.connectionTimeout { return false }
        }
        return false
    }

    /// One framed message, or nil when the client hung up, was too slow
    /// (SO_RCVTIMEO) or sent an oversized length.
    private func receiveMessage(_ fd: Int32) -> [UInt8]? {
        guard let prefix = receiveExactly(fd, 4) else { return nil }
        let length = prefix.reduce(0) { ($0 << 8) | Int($1) }
        guard length > 0, length <= AgentProtocol.maxLength else {
            log("refused a message of \(length) bytes")
            return nil
        }
        return receiveExactly(fd, length)
    }

    private func receiveExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = out.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + got, count - got, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                secureZero(&out)
                return nil
            }
            got += n
        }
        return out
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

    /// A connection's own view of the unlocked vault: its own SQLite
    /// connection over the shared keys.
    private struct Handle {
        let keys: Unlocked
        let vault: Vault
    }

    /// The response to one request body; never throws, errors are answers.
    private func answer(_ body: [UInt8], handle: inout Handle?) -> MessageWriter {
        do {
            var request = try AgentRequest(parsing: body)
            defer { request.wipe() }
            return try respond(to: request, handle: &handle)
        } catch {
            var w = MessageWriter(status: 1)
            w.error(error)
            return w
        }
    }

    private func respond(to request: AgentRequest, handle: inout Handle?) throws(VaultError) -> MessageWriter {
        var w = MessageWriter(status: 0)
        switch request {
        case .hello(let id):
            let (matches, idle, hard) = mutex.locked { () -> (Bool, UInt32, UInt32) in
                let now = time.now()
                guard let unlocked else { return (false, 0, 0) }
                return (
                    unlocked.header.vaultID == id, remaining(options.idleTimeout, since: lastUse, now: now),
                    remaining(options.hardTimeout, since: unlockedAt, now: now)
                )
            }
            w.u8(matches ? 1 : 0)
            w.u32(UInt32(getpid()))
            w.u32(idle)
            w.u32(hard)
            return w
        case .load(let id, let raw):
            let held = mutex.locked { unlocked?.header.vaultID }
            if let held {
                guard held == id else {
                    throw VaultError(.alreadyExists, "the agent holds the keys of another vault")
                }
                mutex.locked { lastUse = time.now() }
                return w
            }
            try unlock(vaultID: id, masterKey: try wrap { () throws(CryptoError) in try SecureBytes(copying: raw) })
            return w
        case .lock:
            lockKeys("lock requested")
            handle = nil
            // An agent that exits when locked stops listening before it
            // answers, so the next command finds no agent rather than one
            // about to close.
            if isExiting { removeSocket() }
            return w
        default:
            break
        }
        // The vault file must still be the one unlocked (not replaced by a
        // new vault at the same path since).
        let known = mutex.locked { databaseIdentity }
        if let known, identity(location.databasePath).map({ $0 != known }) ?? true {
            lockKeys("the vault file was replaced or removed")
        }
        let current = mutex.locked { () -> Unlocked? in
            guard let unlocked else { return nil }
            lastUse = time.now()
            if case .token(let name, _, _) = request { recent[name] = lastUse }
            return unlocked
        }
        guard let current else {
            handle = nil
            throw VaultError(.locked, "the agent is locked")
        }
        let keys = current.keys
        switch request {
        case .token(let name, let minimum, let force):
            let vault = try connection(current, &handle)
            let fresh = try refresher(vault).freshGrant(
                name, minimumValidity: TimeInterval(minimum), forceRefresh: force)
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
            let report = try SyncEngine(vault: try connection(current, &handle), transport: transport).sync()
            w.u32(UInt32(report.pulled))
            w.u32(UInt32(report.pushed))
            w.u8(report.repaired ? 1 : 0)
            w.u32(UInt32(report.requests))
            w.u64(UInt64(report.bytesSent))
            for names in [report.conflicts, report.renamed] {
                w.u32(UInt32(names.count))
                for n in names { w.string(n) }
            }
        case .conflicts:
            let engine = SyncEngine(vault: try connection(current, &handle), transport: transport)
            let names = engine.isConfigured ? try engine.conflictNames() : []
            w.u32(UInt32(names.count))
            for n in names { w.string(n) }
        case .hello, .load, .lock:
            break
        }
        return w
    }

    /// The connection's vault over `current` keys, opened on first use and
    /// again after the keys changed (a lock and a new unlock).
    private func connection(_ current: Unlocked, _ handle: inout Handle?) throws(VaultError) -> Vault {
        if let handle, handle.keys === current { return handle.vault }
        if let idle = current.take() {
            handle = Handle(keys: current, vault: idle)
            return idle
        }
        let vault = Vault(
            location: location, database: try Vault.connect(location.databasePath), header: current.header,
            keys: current.keys, time: time)
        // A new vault at the same path may even reuse the old file's inode:
        // its header names another vault, and these keys are not for it.
        guard let blob = try vault.getMeta("header"), try Header(decoding: blob).vaultID == current.header.vaultID
        else {
            lockKeys("the vault file was replaced")
            throw VaultError(.locked, "the agent is locked")
        }
        handle = Handle(keys: current, vault: vault)
        return vault
    }

    private func refresher(_ vault: Vault) -> TokenRefresher {
        TokenRefresher(vault: vault, transport: transport, coordinator: SyncRefreshCoordinator(transport: transport))
    }

    private func remaining(_ limit: TimeInterval, since start: Date, now: Date) -> UInt32 {
        guard limit > 0 else { return 0 }
        return UInt32(max(1, min(Double(UInt32.max), limit - now.timeIntervalSince(start))))
    }

    // MARK: Between requests

    /// Timeouts, the identity of the socket and the vault file, and
    /// background refresh.
    private func maintain() {
        let now = time.now()
        if now.timeIntervalSince(lastMaintenance) < 1 { return }
        lastMaintenance = now
        // Another agent took the socket over, or someone removed it.
        if let mine = socketIdentity, identity(paths.socket).map({ $0 != mine }) ?? true {
            log("the socket \(paths.socket) was replaced or removed")
            mutex.locked { exiting = true }
            return
        }
        let snapshot = mutex.locked { () -> (Date, Date, (dev_t, ino_t)?)? in
            unlocked == nil ? nil : (self.lastUse, self.unlockedAt, databaseIdentity)
        }
        guard let (lastUse, unlockedAt, known) = snapshot else { return }
        if options.idleTimeout > 0 && now.timeIntervalSince(lastUse) >= options.idleTimeout {
            return lockKeys("idle timeout")
        }
        if options.hardTimeout > 0 && now.timeIntervalSince(unlockedAt) >= options.hardTimeout {
            return lockKeys("hard timeout")
        }
        if let known, identity(location.databasePath).map({ $0 != known }) ?? true {
            return lockKeys("the vault file was replaced or removed")
        }
        startBackgroundRefresh(now: now)
    }

    /// Refreshes grants used since unlocking whose tokens are about to
    /// expire, through the same per-grant lock as every CLI process. One
    /// thread looks (a pass at a time); each grant that is due is refreshed
    /// on a thread of its own, so a stalled provider holds up only its grant.
    private func startBackgroundRefresh(now: Date) {
        let work = mutex.locked { () -> (Unlocked, [String])? in
            guard !backgroundChecking, let unlocked else { return nil }
            let names = recent.keys.filter { name in
                !backgroundRefreshing.contains(name) && (retryAfter[name].map { $0 <= now } ?? true)
            }.sorted()
            guard !names.isEmpty else { return nil }
            backgroundChecking = true
            return (unlocked, names)
        }
        guard let (keys, names) = work else { return }
        startThread { [self] in
            var handle: Handle?
            defer { handle.map { $0.keys.give($0.vault) } }
            for name in names {
                guard let margin = dueMargin(name, keys: keys, handle: &handle, now: now) else { continue }
                let claimed = mutex.locked { backgroundRefreshing.insert(name).inserted }
                guard claimed else { continue }
                startThread { [self] in
                    var own: Handle?
                    defer { own.map { $0.keys.give($0.vault) } }
                    refreshInBackground(name, margin: margin, keys: keys, handle: &own, now: now)
                    mutex.locked { _ = backgroundRefreshing.remove(name) }
                }
            }
            mutex.locked { backgroundChecking = false }
        }
    }

    /// The margin to refresh `name` with when it is due now, else nil.
    private func dueMargin(_ name: String, keys: Unlocked, handle: inout Handle?, now: Date) -> Double? {
        guard let vault = try? connection(keys, &handle), let grant = try? vault.load(name), !grant.dead,
            grant.refreshToken != nil || grant.kind.mintsTokens, let expires = grant.expiresAt
        else {
            forget(name)
            return nil
        }
        // Short-lived tokens are refreshed at half their life, not
        // continuously.
        let issued = grant.refreshedAt ?? grant.createdAt
        let lifetime = max(0, expires.timeIntervalSince(issued))
        let margin = min(options.refreshBefore, lifetime / 2)
        return expires.timeIntervalSince(now) <= margin ? margin : nil
    }

    private func refreshInBackground(_ name: String, margin: Double, keys: Unlocked, handle: inout Handle?, now: Date) {
        guard let vault = try? connection(keys, &handle) else { return }
        do {
            let fresh = try refresher(vault).freshGrant(name, minimumValidity: margin)
            log(fresh.refreshed ? "refreshed a grant ahead of its expiry" : "a grant was refreshed by another process")
            mutex.locked { retryAfter[name] = nil }
        } catch {
            switch error.code {
            case .dead, .notFound:
                log("stopped refreshing a grant: \(error.reason)")
                forget(name)
            default:
                log("background refresh failed: \(error.reason)")
                mutex.locked { retryAfter[name] = now.addingTimeInterval(Double.random(in: 20...40)) }
            }
        }
    }

    private func forget(_ name: String) { mutex.locked { recent[name] = nil } }

    private func identity(_ path: String) -> (dev_t, ino_t)? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return (st.st_dev, st.st_ino)
    }
}

/// Starts `body` on a new detached thread.
func startThread(_ body: @escaping @Sendable () -> Void) {
    final class Box: @unchecked Sendable {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let context = Unmanaged.passRetained(Box(body)).toOpaque()
    var thread = pthread_t()
    let started = pthread_create(
        &thread, nil,
        { raw in
            let box = Unmanaged<AnyObject>.fromOpaque(raw!).takeRetainedValue() as! Box
            box.body()
            return nil
        }, context)
    if started == 0 {
        pthread_detach(thread)
    } else {
        // No thread could be made: run it here rather than drop it.
        (Unmanaged<AnyObject>.fromOpaque(context).takeRetainedValue() as! Box).body()
    }
}

/// A pthread mutex for state shared by the agent's threads.
final class ThreadMutex: @unchecked Sendable {
    private var mutex = pthread_mutex_t()

    init() { pthread_mutex_init(&mutex, nil) }
    deinit { pthread_mutex_destroy(&mutex) }

    /// Runs `body` holding the mutex.
    func locked<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return try body()
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
